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


# A printed comparison is also a check: re-running a notebook whose code has been changed so that
# ours and torch's disagree fails at that cell, so tools/refresh.py cannot store the divergence.

def run_changed(old, new):
    "Execute a copy of 00_testing with `old` replaced by `new` in one cell; the error it stopped on."
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    root = Path(__file__).resolve().parents[1]
    nb = nbformat.read(root / 'nbs' / '00_testing.ipynb', as_version=4)
    cells = [c for c in nb.cells if c.cell_type == 'code' and old in c.source]
    assert len(cells) == 1, old
    cells[0].source = cells[0].source.replace(old, new)
    try: NotebookClient(nb, timeout=120, kernel_name='python3',
                        resources={'metadata': {'path': str(root / 'nbs')}}).execute()
    except CellExecutionError as e: return str(e)
    return None


def test_a_value_that_disagrees_with_torch_fails_the_notebook():
    error = run_changed('(softplus, torch.nn.functional.softplus', '(softplus, torch.nn.functional.relu')
    assert error and 'AssertionError' in error and 'softplus' in error


def test_an_error_that_disagrees_with_torch_fails_the_notebook():
    error = run_changed("torch.nn.functional.softplus('x')", 'torch.nn.functional.softplus(torch.ones(1))')
    assert error and 'the errors differ' in error and 'no error' in error
