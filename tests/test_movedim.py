"""movedim and moveaxis (07_ops, the shape family) against torch: every move of one dimension and many of
two, over shapes and dtypes; a view sharing memory; gradients and forward mode in float64; torch's errors."""
import itertools

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.testing import compare_errors

SHAPES = [(), (5,), (2, 3), (2, 3, 4), (2, 1, 3, 2)]


def moves(shape):
    "Every (source, destination) of one dimension, with both signs, and every move of two in tuples and lists."
    n = max(len(shape), 1)
    dims = range(-n, n)
    singles = [(s, d) for s in dims for d in dims]
    pairs = [(s, d) for s in itertools.permutations(range(len(shape)), 2)
             for d in itertools.permutations(range(-len(shape), len(shape)), 2)
             if len({x % len(shape) for x in d}) == 2]
    return singles + [(s, d) for s, d in pairs[::7]] + [(list(s), list(d)) for s, d in pairs[3::11]]


@pytest.mark.parametrize('shape', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64'])
def test_every_move_is_torchs(shape, dtype):
    a = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    for source, destination in moves(shape):
        for ours, theirs in ((fs.movedim(x, source, destination), torch.movedim(tx, source, destination)),
                             (x.moveaxis(source, destination), tx.moveaxis(source, destination))):
            assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype == getattr(fs, dtype)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_a_view_of_its_input():
    x = fs.zeros(2, 3, 4)
    y = x.movedim(0, -1)
    y[1, 2, 0] = 5.0
    assert x[0, 1, 2].item() == 5.0 and x._version == y._version


CASES = {
    'movedim(0, -1)': lambda L, x: L.movedim(x, 0, -1),
    'movedim((0, 1), (2, 0))': lambda L, x: x.movedim((0, 1), (2, 0)),
    'moveaxis([-1], [1])': lambda L, x: L.moveaxis(x, [-1], [1]),
    'movedim, then reshape': lambda L, x: x.movedim(2, 0).reshape(4, 6) * 2,
}


def gradient_of(L, name):
    x = L.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    out = CASES[name](L, x)
    w = L.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)))
    (out * w).sum().backward()
    return out.grad_fn.name(), out.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize('name', list(CASES))
def test_gradients_node_names_and_forward_mode_like_torch(name):
    ours, theirs = gradient_of(fs, name), gradient_of(torch, name)
    assert ours[0] == theirs[0]
    for o, t in zip(ours[1:], theirs[1:]): np.testing.assert_allclose(o, t, rtol=1e-14)
    a = np.random.default_rng(2).standard_normal((2, 3, 4))
    assert fs.autograd.gradcheck(lambda x: CASES[name](fs, x), (fs.tensor(a, requires_grad=True),))
    v = np.random.default_rng(3).standard_normal((2, 3, 4))
    o = fs.func.jvp(lambda x: CASES[name](fs, x), (fs.tensor(a),), (fs.tensor(v),))
    t = torch.func.jvp(lambda x: CASES[name](torch, x), (torch.tensor(a),), (torch.tensor(v),))
    for p, q in zip(o, t): np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-14)


@pytest.mark.parametrize('mistake', ['source repeated', 'source repeated, one negative', 'destination repeated',
                                     'lengths differ', 'source out of range', 'destination out of range',
                                     'out of range before repeated', 'a 0-d tensor, dim 1'])
def test_mistakes_get_torchs_errors(mistake):
    f = {'source repeated': lambda L: L.movedim(L.zeros(2, 3, 4), (0, 0), (1, 2)),
         'source repeated, one negative': lambda L: L.zeros(2, 3, 4).movedim((0, -3), (1, 2)),
         'destination repeated': lambda L: L.zeros(2, 3, 4).moveaxis((-1, -3), (1, -2)),
         'lengths differ': lambda L: L.movedim(L.zeros(2, 3, 4), (0, 1), (1,)),
         'source out of range': lambda L: L.movedim(L.zeros(2, 3, 4), 5, 0),
         'destination out of range': lambda L: L.zeros(2, 3, 4).movedim(0, -4),
         'out of range before repeated': lambda L: L.movedim(L.zeros(2, 3, 4), (0, 0), (1, 7)),
         'a 0-d tensor, dim 1': lambda L: L.tensor(1.0).movedim(1, 0)}[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))


def test_an_int_and_a_tuple_are_refused_like_torch():
    compare_errors(lambda: fs.zeros(2, 3).movedim(0, (1,)), lambda: torch.zeros(2, 3).movedim(0, (1,)),
                   same_message=False)
