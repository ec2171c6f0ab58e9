"""A notebook's names mean one thing: the notebook-level twin of test_package's shadowing check.

An export cell that defines `float`, `sum` or `ones` binds that name in the notebook too, so a later cell
that calls `float(t)` gets the dtype, not Python's `float`, and a "Where it breaks" cell shows an error
nobody meant. A non-export cell that rebinds a library name (`ones = tensor(...)`) hides the library's
for every cell after it. Both are found here, from the notebooks' source, without running them.
"""
import ast
import builtins
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / 'nbs').glob('*.ipynb'))

# where a notebook means its own binding of a builtin's name (07_ops compares its `sum` with
# `torch.sum`), the names are listed here; everywhere else the builtin is written `builtins.float`
MEANT = {'07_ops.ipynb': {'abs', 'pow', 'sum', 'max', 'min', 'all', 'any'},
         '21_compile.ipynb': {'compile'}}  # torch's name for what the notebook builds


def top_level_bindings(tree, imports=True):
    "The names a cell binds in the notebook's namespace (not inside functions, lambdas or comprehensions)."
    names, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name); continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if imports: names += [(a.asname or a.name).split('.')[0] for a in node.names if a.name != '*']
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store): names.append(node.id)
        todo += list(ast.iter_child_nodes(node))
    return names


def parsed_cells(path):
    "(index, is_export, ast) of each code cell, with IPython's `%` and `!` lines blanked."
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type != 'code': continue
        src = '\n'.join('' if l.lstrip().startswith(('%', '!')) else l for l in cell.source.splitlines())
        try: tree = ast.parse(src)
        except SyntaxError: continue
        yield i, cell.source.lstrip().startswith('#| export'), tree


def loads(tree):
    "Names read in `tree`, less those that a function or lambda in it takes as a parameter."
    params = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = fn.args
            params |= {x.arg for x in a.args + a.kwonlyargs + a.posonlyargs}
            params |= {x.arg for x in (a.vararg, a.kwarg) if x}
    return [(n.lineno, n.id) for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in params]


def shadowed_in_notebook(path):
    """Builtins a cell rebinds and a later non-export cell reads (`float(t)` after `float = float32`), and
    library names that a non-export cell rebinds (`ones = tensor(...)` after `ones` was imported)."""
    meant = MEANT.get(Path(path).name, set())
    rebound, library, found = {}, set(), []
    for i, export, tree in parsed_cells(path):
        if not export:
            found += [f'cell {i} line {line}: {name} (rebound in cell {rebound[name]})'
                      for line, name in loads(tree) if name in rebound and name not in meant]
        bound, defined = top_level_bindings(tree), set(top_level_bindings(tree, imports=False))
        if not export:              # set for a moment and put back in a `finally:` is not a new meaning
            restored = {n.id for t in ast.walk(tree) if isinstance(t, ast.Try) for s in t.finalbody
                        for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            found += [f'cell {i}: rebinds the library name {name}'
                      for name in sorted((defined - restored) & library)]
        else:                        # what the notebook exports, and what it imports from the library
            library |= defined
        library |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                    and (n.module or '').startswith('fromscratch') for a in n.names}
        rebound.update({n: i for n in bound if hasattr(builtins, n) and not n.startswith('_')})
    return found


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_names_mean_one_thing(path):
    found = shadowed_in_notebook(path)
    assert found == [], (f'{path.name}: a name that hides a builtin or the library\'s is used later; write '
                         f'builtins.NAME / fs.NAME, or give the lesson\'s version its own name:\n' +
                         '\n'.join(found))


def test_the_notebook_check_finds_a_builtin_called_after_it_is_rebound(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('#| export\nfloat = "a dtype"\ndef any(x): return 0'),
        nbformat.v4.new_code_cell('y = float(3)'),                           # meant the builtin: found
        nbformat.v4.new_code_cell('import builtins\ny = builtins.float(3)'),   # said so: not found
        nbformat.v4.new_code_cell('f = lambda float: float + 1'),             # a parameter: not found
        nbformat.v4.new_code_cell('ones = 1\nprint(any)'),                    # a library name, then a builtin
        nbformat.v4.new_code_cell('old, tensor = tensor, 2\ntry: pass\nfinally: tensor = old'),  # put back
    ])
    path = tmp_path / 'shadowing.ipynb'
    nbformat.write(nb, path)
    assert shadowed_in_notebook(path) == [
        'cell 1 line 1: float (rebound in cell 0)',
        'cell 4 line 2: any (rebound in cell 0)',
    ]
    nb.cells.insert(0, nbformat.v4.new_code_cell('from fromscratch.core import ones, tensor'))
    nbformat.write(nb, path)
    found = shadowed_in_notebook(path)
    assert 'cell 5: rebinds the library name ones' in found
    assert not any('tensor' in f for f in found)


def imported_over_definitions(path):
    """(cell, name, cell that defined it) for each name that an export cell imports from the package
    after an earlier export cell of the notebook defined it. Run in the notebook, such an import
    (`from fromscratch.bench.blas import worker_env` in a later section) replaces the notebook's own
    definition with the package's copy, so a learner who edits the earlier cell does not see the change
    in the cells that follow. A module's import cells belong at the top of the notebook, before any
    definition, so that every definition overrides them."""
    defined, found = {}, []
    for i, export, tree in parsed_cells(path):
        if not export: continue
        found += [(i, a.asname or a.name, defined[a.asname or a.name])
                  for node in tree.body if isinstance(node, ast.ImportFrom)
                  and (node.level > 0 or (node.module or '').split('.')[0] == 'fromscratch')
                  for a in node.names if (a.asname or a.name) in defined]
        for name in top_level_bindings(tree, imports=False): defined.setdefault(name, i)
    return found


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_export_cell_imports_what_the_notebook_defined(path):
    found = [f'cell {i}: imports {name}, defined in cell {j}' for i, name, j in imported_over_definitions(path)]
    assert found == [], (f'{path.name}: an export cell imports a name an earlier export cell defined, '
                         f'so the notebook uses the package\'s copy from there on; put the module\'s '
                         f'import cell at the top of the notebook, before any definition:\n' +
                         '\n'.join(found))


def test_the_import_check_finds_an_import_after_the_definition(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('#| export bench.workers\nfrom fromscratch.bench.blas import worker_env'),
        nbformat.v4.new_code_cell('#| export bench.blas\ndef worker_env(threads=1): return {}'),
        nbformat.v4.new_code_cell('#| export bench.blas\nLR = 0.1'),
        nbformat.v4.new_code_cell('from fromscratch.bench.blas import LR'),         # not an export cell
        nbformat.v4.new_code_cell('#| export bench.ladder\nfrom fromscratch.bench.blas import worker_env'),
        nbformat.v4.new_code_cell('#| export\nfrom .blas import LR as rate, worker_env as env\n'
                                  'from fromscratch.bench.blas import os\nimport numpy as LR'),
    ])
    path = tmp_path / 'imports.ipynb'
    nbformat.write(nb, path)
    assert imported_over_definitions(path) == [(4, 'worker_env', 1)]
    nb.cells[5].source = '#| export\nfrom .blas import LR, worker_env as env'
    nbformat.write(nb, path)
    assert imported_over_definitions(path) == [(4, 'worker_env', 1), (5, 'LR', 2)]
    with pytest.raises(AssertionError, match='cell 5: imports LR, defined in cell 2'):
        test_no_export_cell_imports_what_the_notebook_defined(path)
