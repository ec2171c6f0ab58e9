"""nbval runs in strict mode on cleaned notebooks: a wrong stored output must fail the run."""
import subprocess
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat


def make_notebook(path, stored):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('print(6 * 7)')
    cell.outputs = [nbformat.v4.new_output('stream', name='stdout', text=stored)]
    cell.execution_count = None                     # as nbdev_clean leaves it
    nb.cells = [cell]
    nbformat.write(nb, path)


def run_nbval(tmp_path, stored):
    # inside the project, so that its conftest.py (which numbers cleaned cells) applies
    root = Path(__file__).resolve().parents[1]
    (root / 'build').mkdir(exist_ok=True)
    nb = Path(tempfile.mkdtemp(dir=root / 'build')) / 'check.ipynb'
    make_notebook(nb, stored)
    try:
        return subprocess.run([sys.executable, '-m', 'pytest', str(nb), '-c', str(root / 'pytest.ini'),
                               '--rootdir', str(root), '-q', '-p', 'no:randomly'],
                              capture_output=True, text=True, cwd=root)
    finally:
        shutil.rmtree(nb.parent)


def test_matching_output_passes(tmp_path):
    r = run_nbval(tmp_path, '42\n')
    assert r.returncode == 0, r.stdout


def test_wrong_output_fails(tmp_path):
    r = run_nbval(tmp_path, '41\n')
    assert r.returncode == 1, r.stdout
    assert 'Unrun reference cell' not in r.stdout
