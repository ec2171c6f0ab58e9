"""tril, triu and their in-place forms (07_ops, the triangles family) against torch: values over shapes,
diagonals and dtypes; gradients, forward mode and node names; in place in a graph, through a view, and
unrecorded; torch's errors."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.testing import compare_errors

SHAPES = [(2, 2), (3, 5), (5, 3), (2, 3, 4), (2, 1, 3, 3), (0, 3), (3, 0), (2, 0, 2)]
NAMES = ['tril', 'triu']


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('shape', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'bool'])
def test_values_like_torch(name, shape, dtype):
    a = np.random.default_rng(0).integers(-3, 4, shape).astype(dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    for k in range(-6, 7):
        for ours, theirs in ((getattr(fs, name)(x, k), getattr(torch, name)(tx, k)),
                             (getattr(x, name)(diagonal=k), getattr(tx, name)(diagonal=k))):
            assert str(theirs.dtype) == f'torch.{ours.dtype}' and tuple(ours.shape) == tuple(theirs.shape)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        y, ty = x.clone(), tx.clone()
        assert getattr(y, name + '_')(k) is y
        getattr(ty, name + '_')(k)
        np.testing.assert_array_equal(y.numpy(), ty.numpy())
        assert y._version == ty._version


def run(L, name, k, inplace):
    x = L.tensor(np.random.default_rng(1).standard_normal((2, 3, 4)), requires_grad=True)
    y = getattr(x * 1, name + '_')(k) if inplace else getattr(L, name)(x, k)
    w = L.tensor(np.random.default_rng(2).standard_normal((2, 3, 4)))
    (y * y * w).sum().backward()
    return y.grad_fn.name(), y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('k', [-2, 0, 1, 3])
@pytest.mark.parametrize('inplace', [False, True])
def test_gradients_and_node_names_like_torch(name, k, inplace):
    ours, theirs = run(fs, name, k, inplace), run(torch, name, k, inplace)
    assert ours[0] == theirs[0] == f'{name.capitalize()}Backward0'
    for o, t in zip(ours[1:], theirs[1:]): np.testing.assert_allclose(o, t, rtol=1e-14)


@pytest.mark.parametrize('name', NAMES)
def test_gradcheck_and_forward_mode_like_torch(name):
    rng = np.random.default_rng(3)
    a, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    f = lambda L: (lambda x: getattr(L, name)(x, 1) * x)
    assert fs.autograd.gradcheck(f(fs), (fs.tensor(a, requires_grad=True),))
    assert fs.autograd.gradgradcheck(f(fs), (fs.tensor(a, requires_grad=True),))
    ours = fs.func.jvp(f(fs), (fs.tensor(a),), (fs.tensor(v),))
    theirs = torch.func.jvp(f(torch), (torch.tensor(a),), (torch.tensor(v),))
    for o, t in zip(ours, theirs): np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-14)


def test_in_place_through_a_view_like_torch():
    def run(L):
        x = L.tensor(np.random.default_rng(4).standard_normal((2, 3, 3)), requires_grad=True)
        y = x * 1
        y[0].tril_()
        (y * y).sum().backward()
        return y.grad_fn.name(), y.detach().numpy(), x.grad.numpy()
    ours, theirs = run(fs), run(torch)
    assert ours[0] == 'CopySlices' and theirs[0] == 'torch::autograd::CopySlices'   # torch's own prefix
    for o, t in zip(ours[1:], theirs[1:]): np.testing.assert_allclose(o, t, rtol=1e-14)


def test_in_place_on_a_leaf_under_no_grad_like_torch():
    for L in (fs, torch):
        x = L.ones(3, 3, requires_grad=True)
        with L.no_grad(): x.triu_()
        assert x.tolist() == [[1, 1, 1], [0, 1, 1], [0, 0, 1]] and x._version == 1 and x.requires_grad


def test_the_causal_mask_of_attention():
    s = np.random.default_rng(5).standard_normal((5, 5))
    def run(L):
        x = L.tensor(s, requires_grad=True)
        p = x.masked_fill(L.tril(L.ones(5, 5)) == 0, -np.inf).softmax(-1)
        (p * L.arange(5.0, dtype=L.float64)).sum().backward()
        return p.detach().numpy(), x.grad.numpy()
    for o, t in zip(run(fs), run(torch)): np.testing.assert_allclose(o, t, rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize('mistake', ['a vector', 'a number', 'a vector, in place', 'a float diagonal',
                                     'a bool diagonal', 'a leaf that requires grad'])
def test_mistakes_get_torchs_errors(mistake):
    f = {'a vector': lambda L: L.tril(L.ones(3)),
         'a number': lambda L: L.triu(L.tensor(1.0)),
         'a vector, in place': lambda L: L.ones(3).triu_(),
         'a float diagonal': lambda L: L.triu(L.ones(3, 3), 1.5),
         'a bool diagonal': lambda L: L.tril(L.ones(3, 3), True),
         'a leaf that requires grad': lambda L: L.ones(3, 3, requires_grad=True).tril_()}[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))
