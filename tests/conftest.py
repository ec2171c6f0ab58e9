"""Fixtures shared by the tests in this folder."""
import os

import pytest

from browser import Chromium, find_chromium


@pytest.fixture(scope='module')
def browser(tmp_path_factory):
    exe = find_chromium()
    if not exe:
        if os.environ.get('CI', '').lower() not in ('', '0', 'false'): pytest.fail('CI is set but no Chromium was found: .ci/run installs Debian\'s chromium')
        pytest.skip('no Chromium found (apt-get install chromium, or set CHROMIUM=/path/to/it)')
    tmp = tmp_path_factory.mktemp('chromium')
    with open(tmp / 'chromium.log', 'w') as log:
        b = Chromium(exe, tmp / 'profile', log)
        try: yield b
        finally: b.close()
