"""The package's public surface as JSON: every module's public names with their signatures, and `dir()` of a
Tensor, of a `grad_fn` and of a leaf's `AccumulateGrad` node.

    python tools/surface.py > tests/public_surface.json   # after a deliberate change to the public API

tests/test_surface.py compares the package with the stored file, so that moving code between modules
(a refactor) cannot drop or change a name that a learner's program uses.
"""
import importlib
import inspect
import json
import pkgutil
import re
import sys
import types


def public_names(module):
    "`__all__` where the module has one (nbdev writes it), else every name without a leading underscore."
    names = getattr(module, '__all__', None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith('_')]
    return sorted(n for n in names if not isinstance(getattr(module, n, None), types.ModuleType))


def signature(obj):
    "How `obj` is called, as text, or its type's name when it is not callable."
    if not callable(obj):
        return type(obj).__name__
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return 'callable'
    # a default that is an object prints its address and the module it lives in: keep its kind and name
    text = re.sub(r'<function (\S+) at 0x[0-9a-f]+>', r'<function \1>', text)
    text = re.sub(r"<module '([\w.]+)' from '[^']*'>", r"<module '\1'>", text)
    return re.sub(r'<(?:[\w.]+\.)?(\w+) object at 0x[0-9a-f]+>', r'<\1 object>', text)


def modules(package='fromscratch'):
    "Every module of the package, imported, by name (nbdev's index `_modidx` left out)."
    root = importlib.import_module(package)
    found = {package: root}
    for info in pkgutil.walk_packages(root.__path__, package + '.'):
        if info.name.rsplit('.', 1)[-1].startswith('_'):
            continue
        found[info.name] = importlib.import_module(info.name)
    return found


def surface():
    import fromscratch as fs
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    leaf_node = y.grad_fn.next_functions[0][0].next_functions[0][0]
    return {
        'modules': {name: {n: signature(getattr(m, n)) for n in public_names(m)}
                    for name, m in sorted(modules().items())},
        'Tensor': attributes(x),
        'grad_fn': attributes(y.grad_fn),
        'AccumulateGrad': attributes(leaf_node),
    }


def attributes(obj):
    "`dir(obj)` sorted, less `__slotnames__` (copyreg caches it on a class once an instance is copied or pickled)."
    return sorted(set(dir(obj)) - {'__slotnames__'})


if __name__ == '__main__':
    json.dump(surface(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write('\n')
