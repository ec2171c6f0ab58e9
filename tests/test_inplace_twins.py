"""The in-place twins made by `twin(op)` (07_ops, the in-place family: `sin_`, `clamp_`, `pow_`, `%=`, ...)
against torch: values and gradients through the write in float64, the graph they leave (no extra node), versions,
leaves under no_grad, views, forward mode, dtypes, and torch's errors."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import Tensor
from fromscratch.ops.inplace import INPLACE
from fromscratch.testing import compare_errors
from engines import check_both, check_second


def lib(t): return fs if isinstance(t, Tensor) else torch


X = np.array([[0.5, 1.25, 2.0], [0.75, 1.5, 3.0]])           # positive: every op is defined here
V = np.array([1.5, -0.5, 2.0])
CALLS = {   # name: the arguments besides self (`v`: a tensor that requires grad)
    'abs_': (), 'neg_': (), 'exp_': (), 'log_': (), 'sqrt_': (), 'rsqrt_': (), 'sin_': (), 'cos_': (), 'tanh_': (),
    'sigmoid_': (), 'relu_': (), 'sign_': (), 'log1p_': (), 'expm1_': (), 'reciprocal_': (), 'square_': (),
    'clamp_': (0.7, 1.6), 'clip_': (None, 1.6), 'clamp_min_': (1.0,), 'clamp_max_': ('v',), 'pow_': ('v',),
    'remainder_': ('v',), 'fmod_': (0.6,), 'floor_divide_': (0.6,), 'index_add_': (1, 'index', 'v2'),
}


def test_every_twin_is_tested_and_is_a_tensor_method():
    assert set(INPLACE) | {'clip_'} == set(CALLS)
    for name in CALLS: assert hasattr(fs.ones(1), name) and hasattr(torch.ones(1), name)


def arguments(x, v, args):
    made = {'v': v, 'index': lib(x).tensor([2, 0]), 'v2': v.reshape(3, 1)[:2].expand(2, 2) * 1}
    return [made[a] if isinstance(a, str) else a for a in args]


@pytest.mark.parametrize('name', list(CALLS))
def test_values_and_gradients_through_the_write(name):
    if name == 'index_add_': return check_both(lambda x, v: (x * 1).index_add_(*arguments(x, v, CALLS[name])), X, V)
    grads = name != 'floor_divide_'   # no derivative, in torch either
    check_both(lambda x, v: getattr(x * 1, name)(*arguments(x, v, CALLS[name])), X, V, grads=grads)


@pytest.mark.parametrize('name', list(CALLS))
def test_the_graph_is_torchs_and_the_version_moves_on(name):
    def run(L):
        x = L.tensor(X, requires_grad=True)
        v = L.tensor(V, requires_grad=True)
        y = x * 1
        out = getattr(y, name)(*arguments(x, v, CALLS[name]))
        node = y.grad_fn
        return (out is y, y._version, node.name().replace('torch::autograd::', ''),
                sorted(f.name().replace('torch::autograd::', '') for f, _ in node.next_functions if f is not None))
    ours, theirs = run(fs), run(torch)
    assert ours[:2] == theirs[:2] and ours[3] == theirs[3]
    # the node is the out-of-place op's; three of those carry another variant number than torch's
    # (ClampMinBackward0, ClampMaxBackward1, PowBackward1 there)
    assert ours[2] == theirs[2] or name in ('clamp_min_', 'clamp_max_', 'pow_')


@pytest.mark.parametrize('name', list(CALLS))
def test_a_leaf_under_no_grad_and_a_plain_tensor(name):
    def run(L):
        x = L.tensor(X, requires_grad=True)
        v = L.tensor(V)
        with L.no_grad(): getattr(x, name)(*arguments(x, v, CALLS[name]))
        p = L.tensor(X)
        getattr(p, name)(*arguments(p, v, CALLS[name]))
        return x.detach().numpy().copy(), x._version, x.requires_grad, x.is_leaf, p.numpy().copy(), p._version
    ours, theirs = run(fs), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-12)
    assert ours[1:4] + ours[5:] == theirs[1:4] + theirs[5:]


@pytest.mark.parametrize('name', ['sin_', 'exp_', 'pow_', 'clamp_', 'remainder_'])
def test_through_a_view_of_a_tensor_in_the_graph(name):
    def f(x, v):
        h = x * 1
        getattr(h[1], name)(*arguments(x, v, CALLS[name]))
        return h * x
    check_both(f, X, V)


@pytest.mark.parametrize('name', ['sin_', 'sigmoid_', 'pow_', 'reciprocal_'])
def test_second_derivatives(name):
    check_second(lambda x, v: getattr(x * x, name)(*arguments(x, v, CALLS[name])) * x, X, V)


@pytest.mark.parametrize('name', ['sin_', 'tanh_', 'pow_', 'clamp_', 'fmod_'])
def test_forward_mode_through_the_write(name):
    t = np.random.default_rng(0).standard_normal(X.shape)
    def tangent(L):
        def f(x):
            y = x * 1
            getattr(y, name)(*arguments(x, L.tensor(V), CALLS[name]))
            return y
        return L.func.jvp(f, (L.tensor(X),), (L.tensor(t),))[1].numpy()
    np.testing.assert_allclose(tangent(fs), tangent(torch), rtol=1e-12)


def test_a_saved_input_changed_in_place_is_caught():
    def run(L):
        x = L.tensor(X, requires_grad=True)
        y = x * 1
        z = y.sin()        # saves y
        y.cos_()
        z.sum().backward()
    ours, theirs = pytest.raises(RuntimeError, run, fs), pytest.raises(RuntimeError, run, torch)
    start = 'one of the variables needed for gradient computation has been modified by an inplace operation'
    assert str(ours.value).startswith(start) and str(theirs.value).startswith(start)


@pytest.mark.parametrize('name', ['sin_', 'sqrt_', 'sigmoid_', 'exp_', 'reciprocal_', 'rsqrt_'])
def test_integers_refuse_a_float_result(name):
    ours = pytest.raises(RuntimeError, lambda: getattr(fs.tensor([1, 2]), name)())
    theirs = pytest.raises(RuntimeError, lambda: getattr(torch.tensor([1, 2]), name)())
    for e in (ours, theirs): assert "can't be cast to the desired output type" in str(e.value)


@pytest.mark.parametrize('name', ['abs_', 'neg_', 'relu_', 'square_', 'sign_', 'clamp_', 'pow_'])
def test_integers_stay_integers_where_torch_keeps_them(name):
    args = {'clamp_': (0, 2), 'pow_': (2,)}.get(name, ())
    assert getattr(fs.tensor([-3, 1, 2]), name)(*args).tolist() == getattr(torch.tensor([-3, 1, 2]), name)(*args).tolist()


@pytest.mark.parametrize('case', ['a leaf', 'a view of a leaf', 'a result that would broadcast', 'bool neg_',
                                  'clamp_ without bounds', 'an expanded tensor'])
def test_errors_in_torchs_words(case):
    f = {'a leaf': lambda L: L.ones(2, requires_grad=True).sin_(),
         'a view of a leaf': lambda L: L.ones(2, 2, requires_grad=True)[0].exp_(),
         'a result that would broadcast': lambda L: L.ones(3).pow_(L.ones(2, 3)),
         'bool neg_': lambda L: L.tensor([True]).neg_(),
         'clamp_ without bounds': lambda L: L.ones(2).clamp_(),
         'an expanded tensor': lambda L: L.ones(3).expand(2, 3).sin_()}[case]
    compare_errors(lambda: f(fs), lambda: f(torch))
