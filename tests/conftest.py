"""Fixtures shared by the tests in this folder."""
import os

import pytest

from browser import Chromium, find_chromium


def skips_are_failures():
    "As in the project's conftest.py: under CI a missing system tool fails the tests that need it."
    flag = os.environ.get('FROMSCRATCH_NO_SKIPS') or os.environ.get('CI', '')
    return flag.lower() not in ('', '0', 'false')


@pytest.fixture(scope='module')
def browser(tmp_path_factory):
    exe = find_chromium()
    if not exe:
        if skips_are_failures():
            pytest.fail("no Chromium found, and CI skips nothing: .ci/run installs Debian's chromium")
        pytest.skip('no Chromium found (apt-get install chromium, or set CHROMIUM=/path/to/it)')
    tmp = tmp_path_factory.mktemp('chromium')
    with open(tmp / 'chromium.log', 'w') as log:
        b = Chromium(exe, tmp / 'profile', log)
        try: yield b
        finally: b.close()
