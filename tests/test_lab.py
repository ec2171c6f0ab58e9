"""The course command, as a learner meets it: `make lab` starts JupyterLab serving nbs/."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def lab_command(port, token):
    "The README's `make lab`, pointed at this interpreter's environment, without a browser."
    args = f'--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token} --ServerApp.port_retries=0'
    venv = Path(sys.prefix)
    if shutil.which('make'):
        # -o: take the environment as installed (it is: this test runs in it) instead of rebuilding it
        return ['make', '--no-print-directory', '-o', str(venv / '.fromscratch-installed'), 'lab',
                f'VENV={venv}', f'LAB_ARGS={args}']
    root = ['--allow-root'] if os.geteuid() == 0 else []
    return [str(venv / 'bin' / 'jupyter'), 'lab', '--notebook-dir=nbs', *root, *args.split()]


def get_json(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r: return json.load(r)


def test_lab_serves_the_notebooks(tmp_path):
    port, token = free_port(), 'fromscratch-test'
    env = {**os.environ, 'JUPYTER_RUNTIME_DIR': str(tmp_path), 'JUPYTER_CONFIG_DIR': str(tmp_path / 'cfg')}
    proc = subprocess.Popen(lab_command(port, token), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url = f'http://127.0.0.1:{port}/api/contents?token={token}'
        deadline, listing = time.monotonic() + 90, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                listing = get_json(url); break
            except OSError: time.sleep(0.5)
        assert listing is not None, f'JupyterLab did not answer on port {port}'
        names = {item['name'] for item in listing['content']}
        expected = {p.name for p in (ROOT / 'nbs').glob('*.ipynb')}
        assert expected <= names, f'missing from the server: {expected - names}'
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/lab?token={token}', timeout=5) as r:
            assert r.status == 200 and b'JupyterLab' in r.read()
    finally:
        os.killpg(proc.pid, 15)
        try: proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9); proc.wait()
