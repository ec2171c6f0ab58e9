"""sort, argsort and topk (07_ops, the sorting family) against torch: values and indices over shapes, dims,
dtypes and both orders; ties with stable=True; nan; gradients in float64 (also by finite differences and
second order); forward mode; node names; the named tuple they return; torch's errors."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import fromscratch as fs
from fromscratch.testing import compare_errors

SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (0, 3)]
DTYPES = ['float32', 'float64', 'int64']


def dims_of(shape):
    "Every dimension `shape` has, counted from the front and from the back (0 and -1 for a 0-d tensor)."
    n = max(len(shape), 1)
    return list(range(-n, n))


def data(shape, dtype, ties, seed=0):
    "Numbers of `shape` in `dtype`: small integers (many ties), or distinct values (no ties)."
    rng = np.random.default_rng(seed)
    if ties: return rng.integers(-2, 3, shape).astype(dtype)
    size = int(np.prod(shape))
    return (rng.permutation(size).reshape(shape) - size // 2).astype(dtype) * (1.5 if dtype != 'int64' else 1)


def both(a):
    return fs.tensor(a), torch.tensor(a)


def same(ours, theirs):
    "Values equal in shape, dtype and every element (nan where torch has nan)."
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split('.')[-1] == str(theirs.dtype).split('.')[-1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize('shape', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('descending', [False, True])
@pytest.mark.parametrize('ties', [True, False], ids=['ties, stable=True', 'no ties, stable not given'])
def test_sort_and_argsort_are_torchs(shape, dtype, descending, ties):
    "Indices too: with ties, those of torch's stable sort; without, the only ones there are."
    x, tx = both(data(shape, dtype, ties))
    kw = {'stable': True} if ties else {}
    for dim in dims_of(shape):
        ours = fs.sort(x, dim=dim, descending=descending, **kw)
        theirs = torch.sort(tx, dim=dim, descending=descending, **kw)
        same(ours.values, theirs.values)
        same(ours.indices, theirs.indices)
        same(x.argsort(dim=dim, descending=descending, **kw), tx.argsort(dim=dim, descending=descending, **kw))
        if not ties: same(x.sort(dim, descending).indices, theirs.indices)


@pytest.mark.parametrize('shape', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('largest', [True, False])
def test_topk_is_torchs(shape, dtype, largest):
    x, tx = both(data(shape, dtype, ties=False))
    for dim in dims_of(shape):
        n = shape[dim] if shape else 1
        for k in range(n + 1):
            ours, theirs = x.topk(k, dim, largest), torch.topk(tx, k, dim, largest)
            same(ours.values, theirs.values)
            same(ours.indices, theirs.indices)


@pytest.mark.parametrize('largest', [True, False])
def test_topk_with_ties_picks_the_right_values(largest):
    "With ties, torch's choice among equal values is its own; the values must agree, and each index must hold its value."
    x, tx = both(data((4, 9), 'float64', ties=True))
    for dim in (0, 1):
        for k in range(x.shape[dim] + 1):
            ours, theirs = x.topk(k, dim, largest), tx.topk(k, dim, largest)
            same(ours.values, theirs.values)
            same(x.gather(dim, ours.indices), ours.values)
            assert all(len(set(r)) == len(r) for r in np.moveaxis(ours.indices.numpy(), dim, -1).tolist())


def test_sorted_false_gives_the_same_values():
    x, tx = both(data((3, 6), 'float64', ties=False))
    ours, theirs = x.topk(4, sorted=False), tx.topk(4, sorted=False)
    np.testing.assert_array_equal(np.sort(ours.values.numpy(), -1), np.sort(theirs.values.numpy(), -1))


@pytest.mark.parametrize('descending', [False, True])
def test_nan_and_infinities_sort_like_torch(descending):
    a = np.array([[1.0, np.nan, 2.0, np.nan, -np.inf, 2.0, np.inf, -0.0, 0.0]])
    x, tx = both(a)
    ours, theirs = x.sort(descending=descending, stable=True), tx.sort(descending=descending, stable=True)
    same(ours.values, theirs.values)
    same(ours.indices, theirs.indices)
    for k in range(a.shape[1] + 1):
        same(x.topk(k, largest=descending).values, tx.topk(k, largest=descending).values)


@pytest.mark.parametrize('dtype', ['bool', 'uint8', 'int32', 'int16', 'float16'])
def test_other_dtypes_sort_like_torch(dtype):
    a = np.random.default_rng(1).integers(0, 3, (4, 6)).astype(dtype)
    x, tx = both(a)
    for descending in (False, True):
        ours, theirs = x.sort(dim=0, descending=descending, stable=True), tx.sort(dim=0, descending=descending, stable=True)
        same(ours.values, theirs.values)
        same(ours.indices, theirs.indices)


CASES = {
    'sort': lambda L, x: L.sort(x, 1).values,
    'sort descending': lambda L, x: x.sort(0, descending=True).values,
    'sort stable': lambda L, x: L.sort(x, dim=-1, descending=True, stable=True).values,
    'topk': lambda L, x: L.topk(x, 3).values,
    'topk smallest along 0': lambda L, x: x.topk(2, 0, largest=False).values,
    'topk of a 3-d': lambda L, x: x.reshape(2, 2, 5).topk(2, 1).values,
    'sort of a 0-d': lambda L, x: x[1, 2].sort().values,
    'topk of a 0-d': lambda L, x: x[0, 0].topk(1).values,
    'sort, unpacked': lambda L, x: L.sort(x * 2)[0] * L.sort(x, 1)[0],
}


def gradient_of(L, name, seed=0):
    x = L.tensor(np.random.default_rng(seed).standard_normal((4, 5)), dtype=L.float64, requires_grad=True)
    out = CASES[name](L, x)
    w = L.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(out.shape)), dtype=L.float64)
    (out * w).sum().backward()
    return out.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize('name', list(CASES))
def test_gradients_agree_with_torch_in_float64(name):
    (o, g), (to, tg) = gradient_of(fs, name), gradient_of(torch, name)
    np.testing.assert_allclose(o, to, rtol=1e-13)
    np.testing.assert_allclose(g, tg, rtol=1e-13)


@pytest.mark.parametrize('name', list(CASES))
def test_gradcheck_like_torch(name):
    a = np.random.default_rng(2).standard_normal((4, 5))
    x = fs.tensor(a, requires_grad=True)
    assert fs.autograd.gradcheck(lambda x: CASES[name](fs, x), (x,))
    assert torch.autograd.gradcheck(lambda x: CASES[name](torch, x), (torch.tensor(a, requires_grad=True),))


def test_second_derivatives_flow_through_sort_and_topk():
    def run(L):
        x = L.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
        y = (x.sort(1).values ** 3 * L.tensor([1.0, 2.0, 3.0, 4.0], dtype=L.float64)).sum() + (x.topk(2, 0).values ** 2).sum()
        g, = L.autograd.grad(y, x, create_graph=True)
        (g * g).sum().backward()
        return g.detach().numpy(), x.grad.numpy()
    for ours, theirs in zip(run(fs), run(torch)): np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize('name', list(CASES))
def test_forward_mode_agrees_with_torch_func_jvp(name):
    rng = np.random.default_rng(4)
    a, v = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    ours = fs.func.jvp(lambda x: CASES[name](fs, x), (fs.tensor(a),), (fs.tensor(v),))
    theirs = torch.func.jvp(lambda x: CASES[name](torch, x), (torch.tensor(a),), (torch.tensor(v),))
    for o, t in zip(ours, theirs): np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-13)


def test_forward_mode_with_dual_tensors_like_torch():
    rng = np.random.default_rng(5)
    a, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    def run(L, fwd):
        with fwd.dual_level():
            x = fwd.make_dual(L.tensor(a), L.tensor(v))
            values, indices = L.topk(x, 2, 0)
            out = fwd.unpack_dual(values)
            assert fwd.unpack_dual(indices).tangent is None
            return out.primal.numpy().copy(), out.tangent.numpy().copy(), indices.numpy().copy()
    for ours, theirs in zip(run(fs, fs.autograd.forward_ad), run(torch, fwAD)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-13)


def test_node_names_like_torch():
    def names(L):
        x = L.ones(2, 3, requires_grad=True)
        outs = [x.sort(), x.sort(stable=True), x.sort(stable=False), L.sort(x, 0, True), x.topk(1)]
        return [o.values.grad_fn.name() for o in outs] + [o.indices.requires_grad for o in outs]
    assert names(fs) == names(torch)
    x = fs.ones(2, 3, requires_grad=True)
    assert x.argsort().requires_grad is False and x.argsort().dtype == fs.int64


def test_the_named_tuple_prints_and_unpacks_like_torchs():
    a = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, -1.0]])
    for f in (lambda L, x: L.sort(x), lambda L, x: x.topk(2, largest=False), lambda L, x: x.sort(0, True)):
        ours, theirs = f(fs, fs.tensor(a, requires_grad=True)), f(torch, torch.tensor(a, requires_grad=True))
        assert repr(ours).replace('fromscratch.', 'torch.') == repr(theirs)
        assert type(ours).__name__ == type(theirs).__name__
        assert isinstance(ours, tuple) and len(ours) == 2 and ours[0] is ours.values and ours[1] is ours.indices
        values, indices = ours
        assert values is ours.values and indices is ours.indices


@pytest.mark.parametrize('mistake', ['k too large', 'k negative', 'k a float', 'k a bool', 'topk of bools',
                                     'sort dim out of range', 'topk dim out of range', 'argsort dim out of range',
                                     'sort of a 0-d, dim 1', 'topk of a 0-d, k 2', 'topk, k past an empty dim',
                                     'stable given by position'])
def test_mistakes_get_torchs_errors(mistake):
    f = {'k too large': lambda L: L.topk(L.ones(2, 3), 4),
         'k negative': lambda L: L.ones(2, 3).topk(-1),
         'k a float': lambda L: L.topk(L.ones(3), 2.0),
         'k a bool': lambda L: L.topk(L.ones(3), True),
         'topk of bools': lambda L: L.tensor([True, False]).topk(1),
         'sort dim out of range': lambda L: L.ones(2, 3).sort(2),
         'topk dim out of range': lambda L: L.ones(2, 3).topk(1, -3),
         'argsort dim out of range': lambda L: L.argsort(L.ones(2, 3), 5),
         'sort of a 0-d, dim 1': lambda L: L.tensor(1.0).sort(1),
         'topk of a 0-d, k 2': lambda L: L.tensor(1.0).topk(2),
         'topk, k past an empty dim': lambda L: L.ones(2, 0).topk(1),
         'stable given by position': lambda L: L.ones(3).argsort(0, False, True)}[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch), same_message=mistake != 'stable given by position')
