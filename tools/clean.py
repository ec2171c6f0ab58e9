"""Clean notebooks as `nbdev_clean` does, but keep the metadata the way JupyterLab writes it.

    python tools/clean.py                        # every notebook in nbs/
    python tools/clean.py nbs/01_matmul.ipynb    # just these

`nbdev_clean` strips execution counts and stray metadata, and it renames the kernel to `python3`. JupyterLab
then undoes part of that the moment a learner opens a notebook: it names the kernel "Python 3 (ipykernel)",
adds the kernel's `language_info`, and marks a cell whose outputs are folded as `collapsed`; and it folds a
collapsed heading's section whole only if the markdown cells in it are marked too (see below). The notebook
shows as changed before anyone typed, autosave writes it, and `git pull` of the next lesson refuses to
overwrite it. So after nbdev's cleaning this script stores those three things as the lab would, and a
notebook that is opened and saved stays byte for byte what was committed.
"""
import platform
import re
import sys
from pathlib import Path

from execnb.nbio import read_nb, write_nb
from nbdev.clean import clean_nb
from nbdev.config import get_config

ROOT = Path(__file__).resolve().parents[1]
KERNEL_DISPLAY_NAME = 'Python 3 (ipykernel)'     # ipykernel's own kernelspec, the one JupyterLab shows


def language_info():
    "What ipykernel reports for this interpreter, the block JupyterLab stores on first save."
    return {'codemirror_mode': {'name': 'ipython', 'version': 3}, 'file_extension': '.py',
            'mimetype': 'text/x-python', 'name': 'python', 'nbconvert_exporter': 'python',
            'pygments_lexer': 'ipython3', 'version': platform.python_version()}


FOLDED = 'jp-MarkdownHeadingCollapsed'


def heading_level(source):
    "The level of the first markdown heading of a cell's source, 0 if it has none."
    m = re.search(r'^(#{1,6}) ', re.sub(r'^```.*?^```', '', source, flags=re.M | re.S), re.M)
    return len(m.group(1)) if m else 0


def fold_whole_sections(cells):
    """Mark every markdown cell under a collapsed heading with the heading's key too. JupyterLab 4.6
    folds the cells below a collapsed heading only as far as the first markdown cell whose headings it
    has parsed, and on opening a notebook it parses only the cells so marked: without the key, a
    solution's prose and code would show under its folded heading."""
    level = 0
    for cell in cells:
        if cell['cell_type'] != 'markdown': continue
        here = heading_level(cell['source'])
        if here and (not level or here <= level): level = here if cell['metadata'].get(FOLDED) else 0
        elif level and not here: cell['metadata'][FOLDED] = True


def as_jupyterlab_writes(nb):
    "Put back the metadata JupyterLab adds on opening a notebook (an existing `language_info` is kept)."
    fold_whole_sections(nb['cells'])
    meta = nb['metadata']
    if meta.get('kernelspec', {}).get('name') == 'python3':
        meta['kernelspec']['display_name'] = KERNEL_DISPLAY_NAME
    meta.setdefault('language_info', language_info())
    for cell in nb['cells']:
        folded = cell['metadata'].get('jupyter', {}).get('outputs_hidden', False)
        if cell['cell_type'] == 'code' and folded: cell['metadata']['collapsed'] = True
        else: cell['metadata'].pop('collapsed', None)
    return nb


def clean(path, cfg):
    nb = read_nb(path)      # settings.ini's allowed keys keep `language_info`, `collapsed` and headings' folds
    clean_nb(nb, cfg.clear_all, cfg.get('allowed_metadata_keys').split(),
             cfg.get('allowed_cell_metadata_keys').split(), cfg.clean_ids)
    write_nb(as_jupyterlab_writes(nb), path)


def main(paths):
    cfg = get_config(path=ROOT)
    for p in [Path(p) for p in paths] or sorted((ROOT / cfg.nbs_path).glob('*.ipynb')): clean(p, cfg)


if __name__ == '__main__':
    main(sys.argv[1:])
