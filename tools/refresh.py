"""Re-run notebooks top to bottom, store their outputs, clean them (tools/clean.py) and export the package.

    python tools/refresh.py                      # every notebook in nbs/
    python tools/refresh.py nbs/01_matmul.ipynb  # just these

This is the step to run before committing a notebook: nbval later re-runs each notebook and compares
what it prints with the outputs stored here.
"""
import os
import subprocess
import sys
from pathlib import Path

# The same single-threaded BLAS as the test run (conftest.py), so stored outputs are what nbval sees.
for _var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


# Figures are stored at twice their size, with the size to show them at (matplotlib's "retina" format), so
# that the documentation site shows them sharp on any screen. Only the stored pictures change: nbval does not
# compare images, and a notebook opened in Jupyter draws its figures as you have set it up to.
KERNEL_ARGS = ['--InlineBackend.figure_formats=retina']


def run_notebook(path, timeout=1200):
    "Execute the notebook at `path` in its own folder with this interpreter's kernel and save it."
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name='python3', extra_arguments=KERNEL_ARGS,
                            resources={'metadata': {'path': str(Path(path).parent)}})
    client.execute()
    nbformat.write(nb, path)


def main(paths):
    paths = [Path(p) for p in paths] or sorted((ROOT / 'nbs').glob('*.ipynb'))
    ran = []
    try:
        for p in paths:
            print(f'running {p}', flush=True)
            run_notebook(p)
            ran.append(p)
    finally:  # a notebook that fails stops the run; those that ran before it are written, so clean them
        # nbdev_clean, keeping the metadata as JupyterLab writes it (tools/clean.py says why)
        if ran: subprocess.run([sys.executable, str(ROOT / 'tools' / 'clean.py'), *map(str, ran)], check=True, cwd=ROOT)
    # nbdev_export, for notebooks that export into several modules (tools/export.py says why)
    subprocess.run([sys.executable, str(ROOT / 'tools' / 'export.py')], check=True, cwd=ROOT)
    subprocess.run([sys.executable, str(ROOT / 'tools' / 'readme.py')], check=True, cwd=ROOT)


if __name__ == '__main__':
    main(sys.argv[1:])
