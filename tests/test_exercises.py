"""Every notebook that ends with `## Exercises` has a folded solution for each exercise.

The format: right after the exercises, a `### Solutions` markdown cell; then, in exercise order, for
exercise k a markdown cell `<details><summary>Solution k</summary> ... </details>` and/or code cells
whose first line is `# Solution k` (`# Solution k, continued` for the next ones), folded by the cell
metadata below. `#| hide` cells (which the site never shows) may sit among them; nothing else may.
"""
import copy
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = {"jupyter": {"outputs_hidden": True, "source_hidden": True}, "tags": ["hide-cell"]}
EXERCISES = re.compile(r'^## Exercises[ \t]*$', re.M)
CODE_HEAD = re.compile(r'# Solution (\d+)(, continued)?$')
MD_HEAD = re.compile(r'<details><summary>Solution (\d+)</summary>')


def source(cell): return ''.join(cell['source'])


def exercises_cell(cells):
    "The index of the markdown cell with the `## Exercises` heading, or None."
    return next((i for i, c in enumerate(cells) if c['cell_type'] == 'markdown' and EXERCISES.search(source(c))), None)


def exercise_numbers(text):
    "The numbers of the exercises listed after the `## Exercises` heading of `text`."
    return [int(n) for n in re.findall(r'^(\d+)\.\s', text[EXERCISES.search(text).end():], re.M)]


def solution_problems(nb):
    "What is wrong with the exercises and solutions of notebook `nb` (a dict read from JSON); [] if nothing."
    cells = nb['cells']
    i = exercises_cell(cells)
    numbers = exercise_numbers(source(cells[i]))
    if not numbers: return ['no numbered exercises after "## Exercises"']
    problems = [] if numbers == list(range(1, len(numbers) + 1)) else [f'exercises numbered {numbers}, not 1 to {len(numbers)}']
    if i + 1 >= len(cells) or cells[i + 1]['cell_type'] != 'markdown' or not source(cells[i + 1]).startswith('### Solutions'):
        return problems + ['no "### Solutions" markdown cell right after the exercises']
    solved, last, last_code = set(), 0, None       # last_code: the exercise of the previous code solution cell
    for j, cell in enumerate(cells[i + 2:], start=i + 2):
        src = source(cell)
        first = src.split('\n', 1)[0].strip()
        if cell['cell_type'] == 'markdown':
            m = MD_HEAD.match(src)
            if not m:
                problems.append(f'cell {j}: a markdown cell among the solutions that is not <details><summary>Solution k</summary>')
                continue
            k = int(m.group(1))
            if not src.rstrip().endswith('</details>'): problems.append(f'cell {j}: Solution {k} does not end with </details>')
            last_code = None
        elif cell['cell_type'] == 'code':
            m = CODE_HEAD.match(first)
            if not m:
                if not first.startswith('#| hide'): problems.append(f'cell {j}: a visible code cell among the solutions ({first[:40]!r})')
                continue
            k, continued = int(m.group(1)), bool(m.group(2))
            if cell.get('metadata') != HIDDEN: problems.append(f'cell {j}: Solution {k} has metadata {cell.get("metadata")}, not {HIDDEN}')
            if '#| export' in src: problems.append(f'cell {j}: Solution {k} exports code')
            if continued and last_code != k: problems.append(f'cell {j}: "Solution {k}, continued" does not follow a code cell of Solution {k}')
            if not continued and last_code == k: problems.append(f'cell {j}: a second "# Solution {k}" cell (say ", continued")')
            last_code = k
        else: continue
        if k < last: problems.append(f'cell {j}: Solution {k} comes after Solution {last}')
        if k not in numbers: problems.append(f'cell {j}: Solution {k}, but there is no exercise {k}')
        solved.add(k); last = max(last, k)
    problems += [f'exercise {k} has no solution' for k in numbers if k not in solved]
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
def drop_solution(nb, k):
    nb['cells'] = [c for c in nb['cells'] if not re.match(rf'(# Solution|<details><summary>Solution) {k}\b', source(c))]

def unfold(nb, k):
    next(c for c in nb['cells'] if source(c).startswith(f'# Solution {k}'))['metadata'] = {}

def add_extra(nb, k):
    extra = {'cell_type': 'code', 'metadata': copy.deepcopy(HIDDEN), 'source': f'# Solution {k}\n1', 'outputs': [], 'execution_count': None}
    nb['cells'].append(extra)

def drop_heading(nb, _):
    nb['cells'] = [c for c in nb['cells'] if not source(c).startswith('### Solutions')]

def unclose(nb, k):
    cell = next(c for c in nb['cells'] if source(c).startswith(f'<details><summary>Solution {k}</summary>'))
    cell['source'] = source(cell).replace('</details>', '')

def visible_cell(nb, _):
    nb['cells'].append({'cell_type': 'code', 'metadata': {}, 'source': 'print(42)', 'outputs': [], 'execution_count': None})

def swap_order(nb, k):
    cells = nb['cells']
    a = next(i for i, c in enumerate(cells) if source(c).startswith(f'# Solution {k}'))
    cells.append(cells.pop(a))


MUTATIONS = [
    (drop_solution, 3, 'exercise 3 has no solution'),
    (unfold, 2, 'Solution 2 has metadata {}'),
    (add_extra, 9, 'Solution 9, but there is no exercise 9'),
    (drop_heading, None, 'no "### Solutions" markdown cell'),
    (unclose, 1, 'Solution 1 does not end with </details>'),
    (visible_cell, None, 'a visible code cell among the solutions'),
    (swap_order, 1, 'comes after Solution'),
]


@pytest.mark.parametrize('mutate, k, expected', MUTATIONS, ids=[m[0].__name__ for m in MUTATIONS])
def test_the_check_catches(mutate, k, expected):
    nb = read(ROOT / 'nbs' / '10_optim.ipynb')
    assert solution_problems(nb) == []
    mutate(nb, k)
    problems = solution_problems(nb)
    assert any(expected in p for p in problems), problems
