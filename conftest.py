"""Project-wide pytest set-up.

nbdev's `nbdev_clean` strips execution counts from notebooks to keep diffs small, but nbval treats a code
cell without one as never run and refuses to compare its stored outputs ("Unrun reference cell has
outputs"). Every notebook in nbs/ is executed top to bottom before it is committed (tools/refresh.py),
so we number its code cells in order as they are collected, and nbval compares every stored output.

A few tests need a tool of the system that pip cannot install (a C++ compiler, Python's C headers). On a
machine without one they are skipped with one line that says what to install; under CI (`CI` set, or
`FROMSCRATCH_NO_SKIPS=1`) such a skip is a failure instead, so nothing goes unchecked there.
"""
import os
import shutil
import sysconfig
from pathlib import Path

import pytest

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


def skips_are_failures():
    "Under CI a test that lacks a system tool fails instead of being skipped (tests/conftest.py reads it too)."
    flag = os.environ.get('FROMSCRATCH_NO_SKIPS') or os.environ.get('CI', '')
    return flag.lower() not in ('', '0', 'false')


def missing_for_cpp():
    "What compiling a C++ extension needs from the system and this machine lacks, as install advice."
    missing = []
    cxx = os.environ.get('CXX')
    if not (shutil.which(cxx) if cxx else any(shutil.which(c) for c in ('c++', 'g++', 'clang++'))):
        missing.append('a C++ compiler (Debian/Ubuntu: apt-get install g++)')
    if not Path(sysconfig.get_paths()['include'], 'Python.h').exists():
        missing.append("Python's C headers (Debian/Ubuntu: apt-get install python3-dev)")
    return missing


def needs_cpp(item):
    """The C++ extensions' notebook and tests, the edge cases that run its GELU, and the
    compiled programs' fused kernels (the notebook of `fromscratch.compile`, its tests of fusion)."""
    name = Path(str(item.fspath)).name
    return (name in ('20_extension.ipynb', 'test_extension.py', '21_compile.ipynb')
            or 'GELUExtension' in item.name or 'cpp_fusion' in item.name)


def pytest_runtest_setup(item):
    if not needs_cpp(item): return
    missing = missing_for_cpp()
    if not missing: return
    why = f'needs {" and ".join(missing)} to compile C++ extensions'
    if skips_are_failures(): pytest.fail(f'{why}; CI skips nothing (.ci/run installs them)', pytrace=False)
    pytest.skip(why)
