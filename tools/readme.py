"""Write README.md from nbs/index.ipynb (what `nbdev_readme` does, without needing quarto).

    python tools/readme.py           # write README.md
    python tools/readme.py --check   # exit 1 if README.md is out of date
"""
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def directives(source):
    "The `#| name value` lines at the top of a cell, as a dict."
    out = {}
    for line in source.splitlines():
        if not line.startswith('#|'): break
        name, _, value = line[2:].strip().partition(' ')
        out[name] = value.strip()
    return out


def cell_markdown(cell):
    "One cell of the notebook as GitHub markdown: prose as is, code in a fence, text outputs below it."
    if cell.cell_type == 'markdown':       # images and notebooks are relative to nbs/ in the notebook,
        text = re.sub(r'(!\[[^\]]*\]\()(?![a-z][a-z0-9+.-]*:|/)', r'\1nbs/', cell.source.strip())
        return re.sub(r'((?<!!)\[[^\]]*\]\()([\w.-]+\.ipynb)', r'\1nbs/\2', text)    # to the top in README.md
    if cell.cell_type != 'code': return ''
    flags = directives(cell.source)
    if 'hide' in flags or 'default_exp' in flags or 'export' in flags: return ''
    code = '\n'.join(l for l in cell.source.splitlines() if not l.startswith('#|')).strip()
    parts = [f'```python\n{code}\n```'] if code and 'echo: false' not in cell.source else []
    for out in cell.get('outputs', []):
        text = out.get('text') or out.get('data', {}).get('text/plain')
        if text and 'image/png' not in out.get('data', {}): parts.append(f'```\n{"".join(text).rstrip()}\n```')
    return '\n\n'.join(parts)


def render(nb_path=ROOT / 'nbs' / 'index.ipynb'):
    nb = nbformat.read(nb_path, as_version=4)
    body = '\n\n'.join(m for m in map(cell_markdown, nb.cells) if m)
    note = '<!-- Generated from nbs/index.ipynb by tools/readme.py: edit the notebook, not this file. -->'
    return f'{note}\n\n{body}\n'


if __name__ == '__main__':
    text, readme = render(), ROOT / 'README.md'
    if '--check' in sys.argv:
        if not readme.exists() or readme.read_text(encoding='utf-8') != text:
            sys.exit('README.md is out of date with nbs/index.ipynb: run `python tools/readme.py`')
    else:
        readme.write_text(text, encoding='utf-8')
