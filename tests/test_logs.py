"""log2 and log10 (07_ops, the pointwise family) against torch: values and dtypes over shapes and dtypes, the
edges of the domain, gradients and second derivatives in float64, gradcheck, forward mode, node names."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import fromscratch as fs

NAMES = ['log2', 'log10']
SHAPES = [(), (5,), (3, 4), (2, 3, 2)]


def positive(shape, seed=0):
    return np.random.default_rng(seed).uniform(0.1, 20.0, shape)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('shape', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'bool'])
def test_values_and_dtypes_like_torch(name, shape, dtype):
    a = (positive(shape) * 5).astype(dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    for ours, theirs in ((getattr(fs, name)(x), getattr(torch, name)(tx)), (getattr(x, name)(), getattr(tx, name)())):
        assert str(theirs.dtype) == f'torch.{ours.dtype}'
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6 if ours.dtype == fs.float32 else 1e-15)


@pytest.mark.parametrize('name', NAMES)
def test_the_edges_of_the_domain_like_torch(name):
    a = np.array([-1.0, -0.0, 0.0, 1.0, np.inf, -np.inf, np.nan, 1e-300, 1e300])
    x, tx = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ours, theirs = getattr(fs, name)(x), getattr(torch, name)(tx)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    ours.sum().backward(); theirs.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('shape', SHAPES, ids=str)
def test_gradients_and_second_derivatives_like_torch(name, shape):
    a, w = positive(shape), np.random.default_rng(1).standard_normal(shape)
    def run(L):
        x = L.tensor(a, requires_grad=True)
        y = getattr(x, name)()
        g, = L.autograd.grad((y * L.tensor(w)).sum(), x, create_graph=True)
        (g * g).sum().backward()
        return y.grad_fn.name(), g.detach().numpy(), x.grad.numpy()
    ours, theirs = run(fs), run(torch)
    assert ours[0] == theirs[0] == f'{name.capitalize()}Backward0'
    for o, t in zip(ours[1:], theirs[1:]): np.testing.assert_allclose(o, t, rtol=1e-14)


@pytest.mark.parametrize('name', NAMES)
def test_gradcheck_and_gradgradcheck(name):
    x = fs.tensor(positive((3, 2)), requires_grad=True)
    f = getattr(fs, name)
    assert fs.autograd.gradcheck(f, (x,)) and fs.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize('name', NAMES)
def test_float32_gradients_stay_float32(name):
    x = fs.tensor(positive(4).astype('float32'), requires_grad=True)
    getattr(x, name)().sum().backward()
    assert x.grad.dtype == fs.float32


@pytest.mark.parametrize('name', NAMES)
def test_forward_mode_like_torch(name):
    a, v = positive((3, 4)), np.random.default_rng(2).standard_normal((3, 4))
    def run(L, fwd):
        with fwd.dual_level():
            out = fwd.unpack_dual(getattr(L, name)(fwd.make_dual(L.tensor(a), L.tensor(v)) * 2))
            return out.primal.numpy().copy(), out.tangent.numpy().copy()
    for o, t in zip(run(fs, fs.autograd.forward_ad), run(torch, fwAD)): np.testing.assert_allclose(o, t, rtol=1e-14)
    o = fs.func.jvp(getattr(fs, name), (fs.tensor(a),), (fs.tensor(v),))
    t = torch.func.jvp(getattr(torch, name), (torch.tensor(a),), (torch.tensor(v),))
    for p, q in zip(o, t): np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-14)
