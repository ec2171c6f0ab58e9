"""fs.autograd.functional against torch.autograd.functional: jacobian, hessian, vjp, jvp, vhp, hvp, for one
tensor and tuples in and out, create_graph, strict, vectorize and the strategies, and every error torch's
module raises, in its words (torch.Size written as fromscratch.Size)."""
import numpy as np
import pytest
import torch

import fromscratch as fs

AF = {'fs': fs.autograd.functional, 'torch': torch.autograd.functional}


def leaves_and_structure(r):
    "The structure of a result (tuple/list nesting and shapes), and its tensors in order."
    if isinstance(r, (tuple, list)):
        parts = [leaves_and_structure(e) for e in r]
        return (type(r).__name__, [p[0] for p in parts]), [t for p in parts for t in p[1]]
    return tuple(r.shape), [r]


def same(ours, theirs, history=True):
    "The same structure, values (float64) and, unless told not to, whether each tensor requires grad."
    so, lo = leaves_and_structure(ours)
    st, lt = leaves_and_structure(theirs)
    assert so == st, (so, st)
    for o, t in zip(lo, lt):
        assert isinstance(o, fs.Tensor)
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-9, atol=1e-11)
        assert o.dtype == np.dtype(str(t.dtype).split('.')[-1])
        if history: assert o.requires_grad == t.requires_grad, (o.requires_grad, t.requires_grad)


def error(f):
    try: f()
    except Exception as e: return type(e).__name__, str(e).replace('torch.Size', 'fromscratch.Size')
    return None


RNG = np.random.default_rng(0)
X, W, V3, VW, U2 = (RNG.standard_normal(s) for s in [(3,), (2, 3), (3,), (2, 3), (2,)])


def data(lib, requires_grad=False):
    t = lambda a: lib.tensor(a, dtype=lib.float64, requires_grad=requires_grad)
    return t(X), t(W), lib.tensor(V3, dtype=lib.float64), lib.tensor(VW, dtype=lib.float64), \
        lib.tensor(U2, dtype=lib.float64)


# functions of one input and of two, with one output and with two (names say which)
FUNCS = {
    'x -> y': lambda a: (a.exp() * a).sin(),
    'x -> s': lambda a: (a.exp() * a).sum(),
    'x, w -> y': lambda a, b: (b @ a).tanh(),
    'x, w -> s': lambda a, b: ((b @ a) ** 2).sum() + (a * a * a).sum(),
    'x -> (y, s)': lambda a: (a.sin(), (a * a).sum()),
    'x, w -> (y, s)': lambda a, b: (b @ a, (b * b).sum() * a[0]),
    'x -> y, linear': lambda a: a * 3,
    'x -> (y, s), w unused': lambda a, b: (a.exp(), a.sum()),
}


def inputs_of(name, lib, requires_grad=False):
    x, w, *_ = data(lib, requires_grad)
    return (x, w) if name.startswith('x, w') or 'unused' in name else x


@pytest.mark.parametrize('vectorize', [False, True])
@pytest.mark.parametrize('name', list(FUNCS))
def test_jacobian(name, vectorize):
    ours = AF['fs'].jacobian(FUNCS[name], inputs_of(name, fs), vectorize=vectorize)
    theirs = AF['torch'].jacobian(FUNCS[name], inputs_of(name, torch), vectorize=vectorize)
    same(ours, theirs)


@pytest.mark.parametrize('name', list(FUNCS))
def test_jacobian_forward_mode(name):
    ours = AF['fs'].jacobian(FUNCS[name], inputs_of(name, fs), vectorize=True, strategy='forward-mode')
    theirs = AF['torch'].jacobian(FUNCS[name], inputs_of(name, torch), vectorize=True, strategy='forward-mode')
    same(ours, theirs)                                    # lists where torch gives lists


@pytest.mark.parametrize('name', [n for n in FUNCS if n.endswith('-> s')])
@pytest.mark.parametrize('how', [{}, {'vectorize': True}, {'vectorize': True, 'outer_jacobian_strategy': 'forward-mode'}])
def test_hessian(name, how):
    ours = AF['fs'].hessian(FUNCS[name], inputs_of(name, fs), **how)
    theirs = AF['torch'].hessian(FUNCS[name], inputs_of(name, torch), **how)
    # torch's forward-over-reverse Hessian keeps a history it did not mean to (requires_grad=True)
    same(ours, theirs, history='outer_jacobian_strategy' not in how)


def vs_for(name, lib, which):
    "The v of each product: shaped like the outputs (vjp) or like the inputs (jvp, vhp, hvp)."
    x, w, v3, vw, u2 = data(lib)
    if which == 'vjp':
        return {'x -> y': v3, 'x, w -> y': u2, 'x -> (y, s)': (v3, lib.tensor(2.0, dtype=lib.float64)),
                'x, w -> (y, s)': (u2, lib.tensor(-1.0, dtype=lib.float64)), 'x -> y, linear': v3,
                'x -> s': lib.tensor(0.5, dtype=lib.float64)}[name]
    return (v3, vw) if name.startswith('x, w') else v3


@pytest.mark.parametrize('which', ['vjp', 'jvp'])
@pytest.mark.parametrize('name', ['x -> y', 'x -> s', 'x, w -> y', 'x -> (y, s)', 'x, w -> (y, s)', 'x -> y, linear'])
def test_vjp_and_jvp(which, name):
    ours = getattr(AF['fs'], which)(FUNCS[name], inputs_of(name, fs), vs_for(name, fs, which))
    theirs = getattr(AF['torch'], which)(FUNCS[name], inputs_of(name, torch), vs_for(name, torch, which))
    same(ours, theirs)


@pytest.mark.parametrize('which', ['vhp', 'hvp'])
@pytest.mark.parametrize('name', ['x -> s', 'x, w -> s'])
def test_vhp_and_hvp(which, name):
    ours = getattr(AF['fs'], which)(FUNCS[name], inputs_of(name, fs), vs_for(name, fs, which))
    theirs = getattr(AF['torch'], which)(FUNCS[name], inputs_of(name, torch), vs_for(name, torch, which))
    same(ours, theirs)
    # H is symmetric: vhp = hvp
    same(getattr(AF['fs'], 'vhp' if which == 'hvp' else 'hvp')(FUNCS[name], inputs_of(name, fs),
                                                               vs_for(name, fs, which)), theirs)


@pytest.mark.parametrize('which', ['vjp', 'jvp', 'vhp', 'hvp'])
def test_v_may_be_left_out_for_one_number(which):
    f = (lambda a: (a * a).exp().sum()) if which in ('vhp', 'hvp') else (lambda a: (a * a).exp())
    if which == 'vjp': f = lambda a: (a * a).exp().sum()
    run = lambda lib: getattr(AF[lib.__name__.replace('fromscratch', 'fs')], which)(
        f, lib.tensor([0.7], dtype=lib.float64))
    same(run(fs), run(torch))


def products_with_graph(lib, which):
    "A product computed with create_graph=True, then differentiated again with respect to x."
    x, w, v3, vw, u2 = data(lib, requires_grad=True)
    F = AF['fs' if lib is fs else 'torch']
    if which == 'jacobian': out = F.jacobian(FUNCS['x, w -> y'], (x, w), create_graph=True)
    elif which == 'jacobian vectorized':
        out = F.jacobian(FUNCS['x, w -> y'], (x, w), create_graph=True, vectorize=True)
    elif which == 'hessian': out = F.hessian(FUNCS['x, w -> s'], (x, w), create_graph=True)
    elif which == 'vjp': out = F.vjp(FUNCS['x, w -> y'], (x, w), u2, create_graph=True)
    elif which == 'jvp': out = F.jvp(FUNCS['x, w -> y'], (x, w), (v3, w * 0.5), create_graph=True)
    else: out = getattr(F, which)(FUNCS['x, w -> s'], (x, w), (v3, w * 0.5), create_graph=True)
    _, tensors = leaves_and_structure(out)
    total = sum((t * t).sum() for t in tensors)
    return out, lib.autograd.grad(total, [x, w], allow_unused=True)


@pytest.mark.parametrize('which', ['jacobian', 'jacobian vectorized', 'hessian', 'vjp', 'jvp', 'vhp', 'hvp'])
def test_create_graph_results_can_be_differentiated(which):
    ours, theirs = products_with_graph(fs, which), products_with_graph(torch, which)
    same(ours[0], theirs[0])
    same(tuple(ours[1]), tuple(theirs[1]))


def test_results_have_no_history_without_create_graph_even_for_inputs_that_require_grad():
    for lib in (fs, torch):
        x, w, v3, vw, u2 = data(lib, requires_grad=True)
        F = AF['fs' if lib is fs else 'torch']
        outs = [F.jacobian(FUNCS['x -> y'], x), F.vjp(FUNCS['x -> y'], x, v3)[1], F.jvp(FUNCS['x -> y'], x, v3)[1],
                F.hessian(FUNCS['x -> s'], x), F.hvp(FUNCS['x -> s'], x, v3)[1], F.vhp(FUNCS['x -> s'], x, v3)[0]]
        assert [o.requires_grad for o in outs] == [False] * 6
        assert x.grad is None


def test_the_function_sees_new_tensors_not_the_callers():
    def run(lib):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64)
        seen = []
        AF['fs' if lib is fs else 'torch'].jacobian(lambda a: seen.append(a is x) or a * x, x)
        return seen
    assert run(fs) == run(torch) == [False]


def test_grad_mode_of_the_products_follows_the_caller():
    def run(lib):
        F = AF['fs' if lib is fs else 'torch']
        x, w, v3, vw, u2 = data(lib)
        with lib.no_grad():
            a = F.vjp(FUNCS['x -> y'], x, v3)[1].requires_grad
            b = F.jacobian(FUNCS['x -> y'], x).requires_grad
            c = F.vjp(FUNCS['x -> y'], x, v3, create_graph=True)[1].requires_grad
        return a, b, c, lib.is_grad_enabled()
    assert run(fs) == run(torch)


# ---- strict mode: each stage's message ----------------------------------------------------------------

STRICT_CASES = {
    'jacobian, output independent of an input': lambda F, lib: F.jacobian(
        lambda a, b: a * 2, (lib.ones(2), lib.ones(3)), strict=True),
    'jacobian, output needs no grad': lambda F, lib: F.jacobian(lambda a: lib.ones(2), lib.ones(2), strict=True),
    'jacobian, create_graph and a constant jacobian': lambda F, lib: F.jacobian(
        lambda a: a * 2, lib.ones(2), strict=True, create_graph=True),
    'vjp, unused input': lambda F, lib: F.vjp(lambda a, b: a * 2, (lib.ones(2), lib.ones(3)), lib.ones(2),
                                              strict=True),
    'vjp, output needs no grad': lambda F, lib: F.vjp(lambda a: lib.ones(2), lib.ones(2), lib.ones(2), strict=True),
    'jvp, unused input': lambda F, lib: F.jvp(lambda a, b: a * 2, (lib.ones(2), lib.ones(3)),
                                              (lib.ones(2), lib.ones(3)), strict=True),
    'jvp, output independent of the inputs': lambda F, lib: F.jvp(
        lambda a: (a * 2, lib.ones(2) * 1), lib.ones(2), lib.ones(2), strict=True),
    'hessian, linear function': lambda F, lib: F.hessian(lambda a: (a * 2).sum(), lib.ones(2), strict=True),
    'hessian, unused input': lambda F, lib: F.hessian(lambda a, b: (a * a).sum(), (lib.ones(2), lib.ones(2)),
                                                      strict=True),
    'vhp, linear function': lambda F, lib: F.vhp(lambda a: (a * 2).sum(), lib.ones(2), lib.ones(2), strict=True),
    'vhp, quadratic': lambda F, lib: F.vhp(lambda a, b: (a * a).sum() + (b * 1).sum(), (lib.ones(2), lib.ones(2)),
                                           (lib.ones(2), lib.ones(2)), strict=True),
    'hvp, linear function': lambda F, lib: F.hvp(lambda a: (a * 2).sum(), lib.ones(2), lib.ones(2), strict=True),
    'hvp, quadratic': lambda F, lib: F.hvp(lambda a, b: (a * a).sum() + (b * 1).sum(), (lib.ones(2), lib.ones(2)),
                                           (lib.ones(2), lib.ones(2)), strict=True),
    'hvp, create_graph with a quadratic': lambda F, lib: F.hvp(lambda a: (a * a).sum(), lib.ones(2), lib.ones(2),
                                                               strict=True, create_graph=True),
    'vhp, create_graph with a quadratic': lambda F, lib: F.vhp(lambda a: (a * a).sum(), lib.ones(2), lib.ones(2),
                                                               strict=True, create_graph=True),
    'vjp, create_graph and a linear function': lambda F, lib: F.vjp(lambda a: a * 2, lib.ones(2), lib.ones(2),
                                                                    strict=True, create_graph=True),
    'jvp, create_graph and a linear function': lambda F, lib: F.jvp(lambda a: a * 2, lib.ones(2), lib.ones(2),
                                                                    strict=True, create_graph=True),
    'strict and vectorize': lambda F, lib: F.jacobian(lambda a: a * a, lib.ones(2), strict=True, vectorize=True),
    'strict and forward mode': lambda F, lib: F.jacobian(lambda a: a * a, lib.ones(2), strict=True,
                                                         vectorize=True, strategy='forward-mode'),
    'strict, a well-behaved function': lambda F, lib: F.hessian(lambda a: (a ** 3).sum(), lib.ones(2),
                                                                strict=True).shape,
}


@pytest.mark.parametrize('case', list(STRICT_CASES))
def test_strict_mode_like_torch(case):
    ours, theirs = error(lambda: STRICT_CASES[case](AF['fs'], fs)), error(lambda: STRICT_CASES[case](AF['torch'], torch))
    assert ours == theirs
    assert (ours is None) == (case == 'strict, a well-behaved function')


@pytest.mark.parametrize('case', ['jacobian', 'vjp', 'jvp', 'hessian'])
def test_without_strict_independence_gives_zeros(case):
    def run(lib):
        F = AF['fs' if lib is fs else 'torch']
        a, b = lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([3.0], dtype=lib.float64)
        return {'jacobian': lambda: F.jacobian(lambda x, y: x * 2, (a, b)),
                'vjp': lambda: F.vjp(lambda x, y: lib.ones(2, dtype=lib.float64), (a, b), a),
                'jvp': lambda: F.jvp(lambda x, y: (x * 2, lib.ones(1, dtype=lib.float64)), (a, b), (a, b)),
                'hessian': lambda: F.hessian(lambda x, y: (x * 2).sum(), (a, b))}[case]()
    same(run(fs), run(torch))


# ---- argument errors ----------------------------------------------------------------------------------

ARGUMENT_CASES = {
    'inputs as a list': lambda F, lib: F.jacobian(lambda a: a, [lib.ones(2)]),
    'a number among the inputs': lambda F, lib: F.vjp(lambda a, b: a, (lib.ones(2), 3), lib.ones(2)),
    'a number as the input': lambda F, lib: F.jvp(lambda a: a, 3.0, lib.ones(2)),
    'the function returns a number': lambda F, lib: F.jacobian(lambda a: 3, lib.ones(2)),
    'the function returns a list': lambda F, lib: F.vjp(lambda a: [a], lib.ones(2), lib.ones(2)),
    'v as a list': lambda F, lib: F.vjp(lambda a: a * 2, lib.ones(2), [lib.ones(2)]),
    'v of the wrong size': lambda F, lib: F.vjp(lambda a: a * 2, lib.ones(2), lib.ones(3)),
    'v of the wrong size, tuples': lambda F, lib: F.jvp(lambda a, b: a * b, (lib.ones(2), lib.ones(2)),
                                                       (lib.ones(2), lib.ones(3))),
    'v too short': lambda F, lib: F.jvp(lambda a, b: a * b, (lib.ones(2), lib.ones(2)), (lib.ones(2),)),
    'v for one tensor, two given': lambda F, lib: F.vjp(lambda a: a * 2, lib.ones(2), (lib.ones(2), lib.ones(2))),
    'no v, vector output': lambda F, lib: F.vjp(lambda a: a * 2, lib.ones(2)),
    'no v, vector input (jvp)': lambda F, lib: F.jvp(lambda a: a.sum(), lib.ones(2)),
    'no v, vector input (vhp)': lambda F, lib: F.vhp(lambda a: (a * a).sum(), lib.ones(2)),
    'no v, vector input (hvp)': lambda F, lib: F.hvp(lambda a: (a * a).sum(), lib.ones(2)),
    'hessian of a vector': lambda F, lib: F.hessian(lambda a: a * a, lib.ones(2)),
    'hessian of a tuple': lambda F, lib: F.hessian(lambda a: ((a * a).sum(),), lib.ones(2)),
    'vhp of a vector': lambda F, lib: F.vhp(lambda a: a * a, lib.ones(2), lib.ones(2)),
    'hvp of a tuple': lambda F, lib: F.hvp(lambda a: ((a * a).sum(),), lib.ones(2), lib.ones(2)),
    'unknown strategy': lambda F, lib: F.jacobian(lambda a: a, lib.ones(2), strategy='sideways'),
    'unknown outer strategy': lambda F, lib: F.hessian(lambda a: a.sum(), lib.ones(2),
                                                       outer_jacobian_strategy='sideways'),
    'forward mode without vectorize': lambda F, lib: F.jacobian(lambda a: a, lib.ones(2), strategy='forward-mode'),
    'forward mode with create_graph': lambda F, lib: F.jacobian(lambda a: a, lib.ones(2), create_graph=True,
                                                                vectorize=True, strategy='forward-mode'),
    'forward-over-reverse without vectorize': lambda F, lib: F.hessian(
        lambda a: (a * a).sum(), lib.ones(2), outer_jacobian_strategy='forward-mode'),
    'an integer input': lambda F, lib: F.jacobian(lambda a: a * 2.0, lib.tensor([1, 2])),
}


@pytest.mark.parametrize('case', list(ARGUMENT_CASES))
def test_argument_errors_like_torch(case):
    ours, theirs = error(lambda: ARGUMENT_CASES[case](AF['fs'], fs)), error(lambda: ARGUMENT_CASES[case](AF['torch'], torch))
    assert ours is not None and theirs is not None
    if case == 'an integer input':   # torch words this one three ways, by where it is set; the same phrases
        assert ours[0] == theirs[0] and all(p in m for m in (ours[1], theirs[1])
                                            for p in ('Tensors of floating point', 'can require gradients'))
    else: assert ours == theirs


def test_float32_results_keep_their_dtype():
    run = lambda lib: AF['fs' if lib is fs else 'torch'].hessian(
        lambda a: (a.exp() * a).sum(), lib.tensor([0.5, 1.0]))
    ours, theirs = run(fs), run(torch)
    assert ours.dtype == fs.float32 and theirs.dtype == torch.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)
