"""The prose quotes only what the notebook shows.

nbval checks that a re-run prints what is stored; it cannot check that the prose around it is true. This
test lists every measured figure a markdown cell quotes (a time, a ratio such as "3x", a count of calls or
instructions) and fails unless an output of the same notebook shows that figure (to the precision the
prose gives it), or the sentence says where it was measured.
"""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / 'nbs').glob('*.ipynb'))

NUMBER = r'(\d[\d,]*(?:\.\d+)?)'
SECONDS = {'ns': 1e-9, 'µs': 1e-6, 'us': 1e-6, 'ms': 1e-3, 's': 1.0, 'sec': 1.0, 'second': 1.0,
           'seconds': 1.0, 'min': 60.0, 'minute': 60.0, 'minutes': 60.0, 'hour': 3600.0, 'hours': 3600.0}
KINDS = {
    # "30 s", "2 ms", "90 seconds" (not "1s", the plural of 1)
    'time': re.compile(NUMBER + r'(?:\s?(ns|µs|us|ms|seconds?|sec|minutes?|min|hours?)|\s(s))(?![\w/])'),
    # "3x", "1.2×" (not a shape such as "3x4" or "2 × 3")
    'ratio': re.compile(NUMBER + r'\s?[x×](?!\s?\d)(?!\w)'),
    'count': re.compile(NUMBER + r'\s+(?:Python |C |function |machine )?(calls|instructions)\b'),
}
MEASURED_ELSEWHERE = re.compile(r'\bmeasured (on|in|with|by|at)\b', re.I)


def prose_only(markdown):
    "The markdown without code, maths, links' targets and HTML tags: the words a learner reads."
    text = re.sub(r'```.*?```', ' ', markdown, flags=re.S)
    text = re.sub(r'\$\$.*?\$\$|\$[^$\n]+\$|`[^`\n]+`', ' ', text, flags=re.S)
    text = re.sub(r'\]\([^)]*\)|<[^>]+>', ' ', text)
    return text


def figures(text):
    "(kind, value in base units, decimals, the matched text) for every figure in `text`."
    for kind, pattern in KINDS.items():
        for m in pattern.finditer(text):
            number = m.group(1).replace(',', '')
            decimals = len(number.partition('.')[2])
            scale = SECONDS[m.group(2) or m.group(3)] if kind == 'time' else 1.0
            yield kind, float(number), scale, decimals, m


def sentences(text):
    return re.split(r'(?<=[.!?:;])\s+(?=[A-Z(*_])|\n\s*\n|\n[-*|] ', text)


def quoted(nb):
    "The figures the markdown cells quote, each with its sentence, leaving out reading times in tables."
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != 'markdown': continue
        for sentence in sentences(prose_only(cell.source)):
            for kind, value, scale, decimals, m in figures(sentence):
                if re.fullmatch(r'\s*\d+ min\s*', sentence.split('|')[0] if '|' not in sentence
                                else next((c for c in sentence.split('|') if m.group(0) in c), '')):
                    continue      # a table cell that is only a duration: the time to read a notebook
                yield i, kind, value * scale, decimals, m.group(0), sentence.strip()


def shown(nb):
    "Every figure the notebook's outputs show, by kind: values in base units."
    out = {kind: [] for kind in KINDS}
    for cell in nb.cells:
        for o in cell.get('outputs', []):
            text = o.get('text') or o.get('data', {}).get('text/plain') or o.get('traceback') or ''
            text = ''.join(text) if isinstance(text, list) else text
            for kind, value, scale, decimals, m in figures(text): out[kind].append(value * scale)
    return out


def agrees(value, decimals, scale_hint, candidates):
    "Whether a shown value, rounded to the prose's precision, is the quoted one (in the prose's unit)."
    return any(abs(round(c / scale_hint, decimals) - round(value / scale_hint, decimals)) < 1e-9
               or abs(c - value) <= 1e-12 for c in candidates)


def unit_scale(text):
    m = KINDS['time'].search(text)
    return SECONDS[m.group(2) or m.group(3)] if m else 1.0


def unsupported(nb):
    found, bad = shown(nb), []
    for i, kind, value, decimals, text, sentence in quoted(nb):
        if MEASURED_ELSEWHERE.search(sentence): continue
        if not agrees(value, decimals, unit_scale(text) if kind == 'time' else 1.0, found[kind]):
            bad.append(f'cell {i}: "{text}" in: {sentence[:160]}')
    return bad


@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.name)
def test_every_quoted_figure_is_shown_or_sourced(path):
    bad = unsupported(nbformat.read(path, as_version=4))
    assert not bad, (f'{path.name} quotes {len(bad)} figures that no output shows; print them from code, '
                     'or say where they were measured ("measured on ..."):\n' + '\n'.join(bad))


def test_the_check_finds_an_unshown_figure_and_accepts_a_shown_one():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell('A step takes about 12 ms, 3.5x faster; it makes 224 Python calls.'),
        nbformat.v4.new_code_cell('print(t)', outputs=[nbformat.v4.new_output(
            'stream', name='stdout', text='step: 11.8 ms, ratio 3.46x, 224 calls\n')])])
    assert unsupported(nb) == []
    nb.cells[0].source = ('A step takes about 20 ms, and the ratio is 4x (as $2x$ shows, a 3x3 kernel'
                          ' or a 2 × 3 matrix, padded with 1s).')
    bad = unsupported(nb)
    assert len(bad) == 2 and '"20 ms"' in bad[0] and '"4x"' in bad[1], bad
    nb.cells[0].source = 'A step took 20 ms, measured on a laptop with 4 cores.'
    assert unsupported(nb) == []
