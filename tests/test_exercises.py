"""Every notebook that ends with `## Exercises` has a folded solution for each exercise.

The format: right after the exercises, a `### Solutions` markdown cell; then, in exercise order, for
exercise k a markdown cell holding only the heading `#### Solution k`, collapsed in JupyterLab (cell
metadata `"jp-MarkdownHeadingCollapsed": true`), followed by the solution's prose (markdown cells
without headings) and code cells whose first line is `# Solution k` (`# Solution k, continued` for the
next ones). The heading folds prose and code as one, in JupyterLab and on the site (tools/docs.py makes
the section one closed <details>), so no cell is folded on its own. `#| hide` cells (which the site never
shows) may sit among them; nothing else may.
"""
import copy
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLLAPSED = 'jp-MarkdownHeadingCollapsed'
EXERCISES = re.compile(r'^## Exercises[ \t]*$', re.M)
CODE_HEAD = re.compile(r'# Solution (\d+)(, continued)?$')
HEADING = re.compile(r'#### Solution (\d+)$')
ANY_HEADING = re.compile(r'^#{1,6}[ \t]', re.M)
FOLDED_TAGS = {'hide-cell', 'hide-input', 'hide-output'}


def source(cell): return ''.join(cell['source'])


def exercises_cell(cells):
    "The index of the markdown cell with the `## Exercises` heading, or None."
    return next((i for i, c in enumerate(cells)
                 if c['cell_type'] == 'markdown' and EXERCISES.search(source(c))), None)


def exercise_numbers(text):
    "The numbers of the exercises listed after the `## Exercises` heading of `text`."
    return [int(n) for n in re.findall(r'^(\d+)\.\s', text[EXERCISES.search(text).end():], re.M)]


def folded_on_its_own(cell):
    meta = cell.get('metadata', {})
    jupyter = meta.get('jupyter', {})
    return bool(jupyter.get('source_hidden') or jupyter.get('outputs_hidden')
                or FOLDED_TAGS & set(meta.get('tags', [])))


def solution_problems(nb):
    "What is wrong with the exercises and solutions of notebook `nb` (a dict read from JSON); [] if nothing."
    cells = nb['cells']
    i = exercises_cell(cells)
    numbers = exercise_numbers(source(cells[i]))
    if not numbers: return ['no numbered exercises after "## Exercises"']
    problems = [] if numbers == list(range(1, len(numbers) + 1)) else \
        [f'exercises numbered {numbers}, not 1 to {len(numbers)}']
    if i + 1 >= len(cells) or cells[i + 1]['cell_type'] != 'markdown' \
            or not source(cells[i + 1]).startswith('### Solutions'):
        return problems + ['no "### Solutions" markdown cell right after the exercises']
    solved, last = {}, 0          # solved: exercise -> how many cells its heading folds
    k, last_code = None, None     # the current heading's exercise; the exercise of the last code cell
    for j, cell in enumerate(cells[i + 2:], start=i + 2):
        src = source(cell)
        first = src.split('\n', 1)[0].strip()
        if cell['cell_type'] == 'markdown':
            m = HEADING.match(src.strip())
            if m:
                k, last_code = int(m.group(1)), None
                if cell.get('metadata', {}).get(COLLAPSED) is not True:
                    problems.append(f'cell {j}: Solution {k} is not collapsed (metadata {COLLAPSED})')
                if k in solved: problems.append(f'cell {j}: a second "#### Solution {k}" heading')
                if k < last: problems.append(f'cell {j}: Solution {k} comes after Solution {last}')
                if k not in numbers: problems.append(f'cell {j}: Solution {k}, but there is no exercise {k}')
                solved[k], last = 0, max(last, k)
                continue
            if ANY_HEADING.search(src):
                problems.append(f'cell {j}: a heading among the solutions that is not "#### Solution k" '
                                '(it would end the fold)')
            elif k is None: problems.append(f'cell {j}: prose before the first "#### Solution k"')
            else: solved[k] += 1
        elif cell['cell_type'] == 'code':
            m = CODE_HEAD.match(first)
            if not m:
                if not first.startswith('#| hide'):
                    problems.append(f'cell {j}: a visible code cell among the solutions ({first[:40]!r})')
                continue
            n, continued = int(m.group(1)), bool(m.group(2))
            if n != k: problems.append(f'cell {j}: "# Solution {n}" under the heading of Solution {k}')
            if folded_on_its_own(cell):
                problems.append(f'cell {j}: Solution {n} is folded on its own (metadata '
                                f'{cell.get("metadata")}): its heading folds it')
            if '#| export' in src: problems.append(f'cell {j}: Solution {n} exports code')
            if continued and last_code != n:
                problems.append(f'cell {j}: "Solution {n}, continued" does not follow a code cell of '
                                f'Solution {n}')
            if not continued and last_code == n:
                problems.append(f'cell {j}: a second "# Solution {n}" cell (say ", continued")')
            last_code = n
            if k is not None: solved[k] += 1
    problems += [f'Solution {n} is an empty heading' for n, count in solved.items() if not count]
    problems += [f'exercise {n} has no solution' for n in numbers if n not in solved]
    return problems


def read(path): return json.loads(path.read_text(encoding='utf-8'))


NOTEBOOKS = [p for p in sorted((ROOT / 'nbs').glob('*.ipynb')) if exercises_cell(read(p)['cells']) is not None]


def test_notebooks_with_exercises_are_found():
    assert len(NOTEBOOKS) >= 10, [p.name for p in NOTEBOOKS]


# Gaps known today, listed exactly: the test fails if one is closed (remove its entry then) or if anything else is wrong.
KNOWN_GAPS = {}     # notebook stem -> the problems it is allowed to keep for now


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_exercise_has_a_folded_solution(path):
    problems, known = solution_problems(read(path)), KNOWN_GAPS.get(path.stem, [])
    assert problems == known, f'{path.name}:\n' + '\n'.join(problems or [f'fixed: remove {known} from KNOWN_GAPS'])


# The check itself must catch each kind of mistake: break a correct notebook on purpose.
def cells_of(nb, k):
    "The indices of the heading of Solution k and of the cells it folds."
    cells, out = nb['cells'], []
    for i, c in enumerate(cells):
        if HEADING.match(source(c).strip()): inside = source(c).strip() == f'#### Solution {k}'
        elif ANY_HEADING.search(source(c)) and c['cell_type'] == 'markdown': inside = False
        if out or source(c).strip() == f'#### Solution {k}':
            if not inside: break
            out.append(i)
    return out

def drop_solution(nb, k):
    drop = set(cells_of(nb, k))
    nb['cells'] = [c for i, c in enumerate(nb['cells']) if i not in drop]

def expand(nb, k):
    nb['cells'][cells_of(nb, k)[0]]['metadata'] = {}

def fold_code(nb, k):
    cell = next(c for c in nb['cells'] if source(c).startswith(f'# Solution {k}'))
    cell['metadata'] = {'jupyter': {'source_hidden': True}, 'tags': ['hide-cell']}

def add_extra(nb, k):
    nb['cells'] += [{'cell_type': 'markdown', 'metadata': {COLLAPSED: True}, 'source': f'#### Solution {k}'},
                    {'cell_type': 'code', 'metadata': {}, 'source': f'# Solution {k}\n1', 'outputs': [],
                     'execution_count': None}]

def drop_heading(nb, _):
    nb['cells'] = [c for c in nb['cells'] if not source(c).startswith('### Solutions')]

def empty(nb, k):
    heading, *rest = cells_of(nb, k)
    nb['cells'] = [c for i, c in enumerate(nb['cells']) if i not in rest]

def another_heading(nb, k):
    nb['cells'].insert(cells_of(nb, k)[1], {'cell_type': 'markdown', 'metadata': {},
                                            'source': '#### A note'})

def visible_cell(nb, _):
    nb['cells'].append({'cell_type': 'code', 'metadata': {}, 'source': 'print(42)', 'outputs': [],
                        'execution_count': None})

def swap_order(nb, k):
    cells, block = nb['cells'], cells_of(nb, k)
    moved = [cells[i] for i in block]
    nb['cells'] = [c for i, c in enumerate(cells) if i not in block] + moved

def misplace_code(nb, k):
    cells = nb['cells']
    cells.insert(cells_of(nb, 1)[-1] + 1, cells.pop(cells_of(nb, k)[-1]))


MUTATIONS = [
    (drop_solution, 3, 'exercise 3 has no solution'),
    (expand, 2, 'Solution 2 is not collapsed'),
    (fold_code, 2, 'Solution 2 is folded on its own'),
    (add_extra, 9, 'Solution 9, but there is no exercise 9'),
    (drop_heading, None, 'no "### Solutions" markdown cell'),
    (empty, 4, 'Solution 4 is an empty heading'),
    (another_heading, 1, 'a heading among the solutions'),
    (visible_cell, None, 'a visible code cell among the solutions'),
    (swap_order, 1, 'comes after Solution'),
    (misplace_code, 3, '"# Solution 3" under the heading of Solution 1'),
]


@pytest.mark.parametrize('mutate, k, expected', MUTATIONS, ids=[m[0].__name__ for m in MUTATIONS])
def test_the_check_catches(mutate, k, expected):
    nb = read(ROOT / 'nbs' / '10_optim.ipynb')
    assert solution_problems(nb) == []
    mutate(nb, k)
    problems = solution_problems(nb)
    assert any(expected in p for p in problems), problems
