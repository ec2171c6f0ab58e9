"""The index's "Questions about .backward()" table points at sections that exist.

Each answer names a notebook and, in italics, a section of it: `[04_function](04_function.ipynb), *The
graph: ...*`. A learner looks for that title in the notebook, so it must begin a heading of the notebook
(`## ...`, `### ...`) or the bold lead of a "Where it breaks" paragraph (`**Forgetting zero_grad.**`).
"""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / 'nbs'
LINK = re.compile(r'\[(\w+)\]\((\w+)\.ipynb\)((?:,? *(?:and )?\*[^*]+\*)*)')
TITLE = re.compile(r'\*([^*]+)\*')


def questions_cell():
    nb = nbformat.read(NBS / 'index.ipynb', as_version=4)
    return next(c.source for c in nb.cells
                if c.cell_type == 'markdown' and c.source.startswith('## Questions about `.backward()`'))


def titles(name):
    "Every heading of notebook `name` and every bold paragraph lead, as written."
    nb = nbformat.read(NBS / f'{name}.ipynb', as_version=4)
    found = []
    for c in nb.cells:
        if c.cell_type != 'markdown': continue
        found += re.findall(r'^#{1,6} +(.+?)\s*$', c.source, re.M)
        found += re.findall(r'^\*\*(.+?)\*\*', c.source, re.M)
    return found


def references():
    "(notebook, section title) for every answer of the table that names a section."
    refs = []
    for line in questions_cell().splitlines():
        if not line.startswith('|') or line.startswith(('| question', '|---')): continue
        answer = line.rstrip(' |').rsplit(' | ', 1)[-1]
        for m in LINK.finditer(answer):
            refs += [(m.group(2), t) for t in TITLE.findall(m.group(3))]
    return refs


def test_the_table_names_sections():
    assert len(references()) >= 20


@pytest.mark.parametrize('name, title', references(), ids=lambda v: v[:40])
def test_each_section_named_in_the_questions_exists(name, title):
    assert (NBS / f'{name}.ipynb').exists(), name
    candidates = titles(name)
    assert any(t.rstrip('.').startswith(title) for t in candidates), (
        f'{name} has no section called {title!r}; its sections: {candidates}')
