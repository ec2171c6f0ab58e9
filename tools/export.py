"""Export the notebooks to the package: `nbdev_export`, with one change, so that a notebook can export
into several modules.

    python tools/export.py

Stock nbdev 2 (2.3.37) writes afresh only a notebook's `#| default_exp` module. A cell exported with
`#| export core.engine` is appended to what `fromscratch/core/engine.py` holds already (and fails if the
file does not exist), so a notebook that exports into several modules would add its cells again on every
export. Here a module is written afresh by the first notebook, in name order, that exports a cell to it,
and later notebooks append to it (as `07a_engine_in_depth` appends the hook runner to `core/engine.py`).
For a module that only its own notebook writes to, this is what `nbdev_export` does.
"""
from functools import partial

import nbdev.doclinks
from nbdev.export import nb_export
from nbdev.maker import ModuleMaker


class FreshOnce(ModuleMaker):
    "A `ModuleMaker` that writes its module afresh the first time this export meets it."
    written = set()

    def __init__(self, dest, name, nb_path, is_new=True, parse=True, solo_nb=False):
        fresh = is_new or name not in self.written
        self.written.add(name)
        super().__init__(dest, name, nb_path, is_new=fresh, parse=parse, solo_nb=solo_nb)


def main():
    FreshOnce.written.clear()
    nbdev.doclinks.nb_export = partial(nb_export, mod_maker=FreshOnce)
    nbdev.doclinks.nbdev_export()


if __name__ == '__main__':
    main()
