"""An op lives in one module: its `Function`, the `Tensor` methods and operators that call it, its node's name.

`fromscratch.ops` is a package of families (`unary`, `reduce`, `shape`, ...). Each family module ends with
its own tables, `METHODS` (what it binds onto `Tensor`) and `NODE_NAMES` (what its nodes print as), so that
adding an op touches one module and its notebook cell. These tests find, for every `Function` defined in
`fromscratch.ops.*`, the methods that call it and its node's name, and check that both are in the tables of
the module that defines the class.
"""
import ast
import importlib
import pkgutil
import types
from pathlib import Path

import pytest

import fromscratch.ops as ops
from fromscratch import core
from fromscratch.core import Function, Tensor

ROOT = Path(__file__).resolve().parents[1]
TABLES = ('METHODS', 'NODE_NAMES', 'BATCHING')


def families():
    "Every module of the `fromscratch.ops` package, by name."
    return {i.name: importlib.import_module(i.name)
            for i in pkgutil.iter_modules(ops.__path__, 'fromscratch.ops.')}


def op_classes(module):
    "The `Function` subclasses that `module` defines."
    return [v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, Function) and v.__module__ == module.__name__]


def functions_of(method):
    "The plain functions behind a table entry: a function, a property's getter, nothing for a value."
    if isinstance(method, property): return [method.fget]
    return [method] if isinstance(method, types.FunctionType) else []


def called_ops(method, home):
    """The `Function`s of `fromscratch.ops` that `method` calls: the classes its code names, through the
    functions it wraps (closures: `reflected(pow)`, `to_dtype(float32)`) and the functions of its own
    module `home` that it calls, but not through another module's functions (`mean` calling `sum`)."""
    found, seen, todo = set(), set(), list(functions_of(method))
    while todo:
        f = todo.pop()
        if f in seen: continue
        seen.add(f)
        codes, names = [f.__code__], set()
        while codes:
            code = codes.pop()
            names |= set(code.co_names)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        wrapped = [c.cell_contents for c in f.__closure__ or ()]
        for v in [f.__globals__[n] for n in names if n in f.__globals__] + wrapped:
            if isinstance(v, type) and issubclass(v, Function) and v.__module__.startswith('fromscratch.ops.'):
                found.add(v)
            elif isinstance(v, types.FunctionType) and (v.__module__ == home or v in wrapped):
                todo.append(v)
    return found


def misplaced(mods):
    """What is out of place in the family modules `mods` (name: module): an empty list when every op's methods
    and node name are in its own module's tables and on `Tensor`."""
    problems, owner = [], {}
    for name, module in mods.items():
        if op_classes(module) and not isinstance(getattr(module, 'NODE_NAMES', None), dict):
            problems.append(f'{name} has no NODE_NAMES table')
        if not isinstance(getattr(module, 'METHODS', None), dict): problems.append(f'{name} has no METHODS table')
        for method_name, method in getattr(module, 'METHODS', {}).items():
            if method_name in owner: problems.append(f'{method_name} is bound by {owner[method_name]} and {name}')
            owner[method_name] = name
            if vars(Tensor).get(method_name, problems) is not method:
                problems.append(f'Tensor.{method_name} is not what {name}.METHODS binds')
            for op in called_ops(method, name):
                if op.__module__ != name:
                    problems.append(f'Tensor.{method_name} calls {op.__name__} ({op.__module__}) '
                                    f'but is bound in {name}')
    # `shared` fills the core's own NODE_NAMES (it imports it to do so); the families' tables are their own dicts
    node_tables = {n: m.NODE_NAMES for n, m in mods.items()
                   if getattr(m, 'NODE_NAMES', None) is not core.NODE_NAMES}
    for name, module in mods.items():
        for op in op_classes(module):
            if op not in core.NODE_NAMES: continue
            where = [n for n, table in node_tables.items() if op in table]
            if where != [name]:
                problems.append(f'the node name of {op.__name__} ({name}) is set in {where}')
            elif module.NODE_NAMES[op] != core.NODE_NAMES[op]:
                problems.append(f'{name}.NODE_NAMES[{op.__name__}] is not the name the core uses')
    return problems


def test_every_op_is_whole_in_its_module():
    assert misplaced(families()) == []


def test_every_op_has_a_node_name():
    "Every op's node prints under PyTorch's name; only `Pointwise`, the class the unary ops share, has none."
    unnamed = {op.__name__ for m in families().values() for op in op_classes(m) if op not in core.NODE_NAMES}
    assert unnamed == {'Pointwise'}


def test_the_package_gathers_every_family():
    mods = families()
    assert [f.__name__ for f in ops.FAMILIES] == sorted(mods, key=[f.__name__ for f in ops.FAMILIES].index)
    assert set(mods) == {f.__name__ for f in ops.FAMILIES}
    assert ops.METHODS == {k: v for m in mods.values() for k, v in m.METHODS.items()}
    assert ops.BATCHING == {k: v for m in mods.values() for k, v in getattr(m, 'BATCHING', {}).items()}
    for m in mods.values():
        for n in m.__all__:
            if n not in TABLES: assert getattr(ops, n) is getattr(m, n), f'fromscratch.ops.{n}'


def test_no_module_is_named_like_a_function_it_exports():
    for name, module in families().items():
        short = name.rsplit('.', 1)[-1]
        assert short not in module.__all__ and short not in ops.__all__, name


def test_each_family_module_is_one_export_of_the_notebook():
    "No top-level name defined twice: a second `nbdev_export` appends cells (tools/export.py says why)."
    for name, module in families().items():
        tree = ast.parse(Path(module.__file__).read_text(encoding='utf-8'))
        defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert len(defined) == len(set(defined)), f'{name}: {sorted({d for d in defined if defined.count(d) > 1})}'


def test_the_check_finds_a_method_bound_in_another_module(monkeypatch):
    mods = families()
    unary, reduce = mods['fromscratch.ops.unary'], mods['fromscratch.ops.reduce']
    monkeypatch.setitem(reduce.METHODS, 'exp', unary.METHODS['exp'])
    monkeypatch.delitem(unary.METHODS, 'exp')
    assert misplaced(mods) == ['Tensor.exp calls Exp (fromscratch.ops.unary) but is bound in fromscratch.ops.reduce']


def test_the_check_finds_a_node_named_in_another_module(monkeypatch):
    mods = families()
    unary, reduce = mods['fromscratch.ops.unary'], mods['fromscratch.ops.reduce']
    Exp = unary.Exp
    monkeypatch.setitem(reduce.NODE_NAMES, Exp, unary.NODE_NAMES[Exp])
    monkeypatch.delitem(unary.NODE_NAMES, Exp)
    assert misplaced(mods) == ["the node name of Exp (fromscratch.ops.unary) is set in ['fromscratch.ops.reduce']"]


def test_the_check_finds_an_op_whose_methods_live_elsewhere(tmp_path, monkeypatch):
    "A new family module whose op's method is bound, by mistake, from another family's table."
    (tmp_path / 'stray_family.py').write_text(
        'from fromscratch.core import Function, Tensor\n'
        'class Twice(Function):\n'
        '    @staticmethod\n'
        '    def forward(ctx, a): return Tensor(a.array * 2)\n'
        'def twice(input): return Twice.apply(input)\n'
        'METHODS, NODE_NAMES = {}, {Twice: "TwiceBackward0"}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    stray = importlib.import_module('stray_family')
    monkeypatch.setattr(stray.Twice, '__module__', 'fromscratch.ops.stray_family')
    monkeypatch.setattr(stray, '__name__', 'fromscratch.ops.stray_family')
    monkeypatch.setitem(core.NODE_NAMES, stray.Twice, 'TwiceBackward0')
    mods = families()
    monkeypatch.setitem(mods['fromscratch.ops.shape'].METHODS, 'twice', stray.twice)
    monkeypatch.setattr(Tensor, 'twice', stray.twice, raising=False)
    assert misplaced({**mods, 'fromscratch.ops.stray_family': stray}) == [
        'Tensor.twice calls Twice (fromscratch.ops.stray_family) but is bound in fromscratch.ops.shape'
    ]
    monkeypatch.delitem(mods['fromscratch.ops.shape'].METHODS, 'twice')
    monkeypatch.setitem(stray.METHODS, 'twice', stray.twice)
    assert misplaced({**mods, 'fromscratch.ops.stray_family': stray}) == []
