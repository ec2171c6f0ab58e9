"""Project-wide pytest set-up.

nbdev's `nbdev_clean` strips execution counts from notebooks to keep diffs small, but nbval treats a code
cell without one as never run and refuses to compare its stored outputs ("Unrun reference cell has
outputs"). Every notebook in nbs/ is executed top to bottom before it is committed (tools/refresh.py),
so we number its code cells in order as they are collected, and nbval compares every stored output.
"""
import os

# One BLAS thread in tests and in the notebook kernels nbval starts (they inherit this environment):
# results then do not depend on how the BLAS splits a product between threads, and on a loaded 2-core
# machine small products do not slow down tenfold from threads competing for the cores.
for _var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

from nbval.plugin import IPyNbFile  # noqa: E402

_collect = IPyNbFile.collect


def _collect_with_counts(self):
    items = list(_collect(self))
    for n, cell in enumerate((c for c in self.nb.cells if c.cell_type == 'code'), start=1):
        if cell.get('execution_count') is None: cell.execution_count = n
    return items


IPyNbFile.collect = _collect_with_counts
