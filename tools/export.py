"""Export every notebook to the package, as `nbdev_export` does, with one notebook free to write several modules.

    python tools/export.py

nbdev 2 writes a notebook's `#| default_exp` module afresh and *appends* a cell marked `#| export other.module`
to `other/module.py` (github.com/AnswerDotAI/nbdev/issues/742). That is right for a module another notebook
writes first (nbs/18_conv.ipynb adds to `nn/__init__.py`), but a module that only such cells write would grow
by one copy at every export. Here such a module is written afresh the first time a notebook exports to it in
this run, and added to after that; everything else is nbdev's own `nbdev_export`, always over all notebooks
(a module written from several notebooks is only whole after all of them).
"""
import re
from pathlib import Path

import nbformat
from nbdev.config import get_config
from nbdev.doclinks import _build_modidx, nbglob
from nbdev.export import black_format, nb_export
from nbdev.maker import ModuleMaker
from nbdev.process import add_init

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EXP = re.compile(r'^#\|\s*default_exp\s+(\S+)', re.M)


def default_modules(notebooks):
    "The modules that some notebook names in its `#| default_exp` cell: nbdev writes those afresh itself."
    return {m for nb in notebooks for cell in nbformat.read(nb, as_version=4).cells
            if cell.cell_type == 'code' for m in DEFAULT_EXP.findall(cell.source)}


def export(notebooks):
    "Export `notebooks` in name order; a module no `default_exp` names is written afresh at its first cells."
    owned, written = default_modules(notebooks), set()

    class Maker(ModuleMaker):
        def __init__(self, dest, name, nb_path, is_new=True, **kwargs):
            first = name not in owned and name not in written
            super().__init__(dest, name, nb_path, is_new=is_new or first, **kwargs)
            written.add(name)

    for nb in notebooks: nb_export(nb, procs=[black_format], mod_maker=Maker)
    add_init(get_config().lib_path)
    _build_modidx()


if __name__ == '__main__':
    export(nbglob(as_path=True).sorted('name'))   # the notebooks nbdev_export reads, in its order
