"""fromscratch.lessons.function: the custom autograd Functions pass gradcheck and equal torch's own ops, a wrong backward
fails gradcheck, `graph_lines` draws torch's graph, and importing the module does not import torch."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.autograd.gradcheck import GradcheckError

from fromscratch.lessons.function import graph_lines, relu_function, sigmoid_function
from fromscratch.testing import check_close

SETTINGS = settings(max_examples=30, deadline=None)
shapes = st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple)
MyReLU, MySigmoid = relu_function(), sigmoid_function()


def away_from_zero(shape, seed):
    "float64 normal samples of `shape` with every |x| >= 0.01, so that finite differences never cross ReLU's kink."
    x = np.random.default_rng(seed).standard_normal(shape)
    x = np.where(np.abs(x) < 0.01, np.where(x < 0, -0.01, 0.01), x)
    return torch.tensor(x, requires_grad=True)


class WrongSigmoid(torch.autograd.Function):
    "A sigmoid whose backward forgets the (1 - out) factor."
    @staticmethod
    def forward(ctx, x):
        out = 1 / (1 + torch.exp(-x))
        ctx.save_for_backward(out)
        return out
    @staticmethod
    def backward(ctx, grad_output):
        out, = ctx.saved_tensors
        return grad_output * out


class WrongReLU(torch.autograd.Function):
    "A ReLU whose backward lets the gradient through everywhere."
    @staticmethod
    def forward(ctx, x): return x.clamp(min=0)
    @staticmethod
    def backward(ctx, grad_output): return grad_output


@SETTINGS
@given(shapes, st.integers(0, 2**32 - 1))
def test_gradcheck_passes(shape, seed):
    x = away_from_zero(shape, seed)
    assert torch.autograd.gradcheck(MyReLU.apply, (x,))
    assert torch.autograd.gradcheck(MySigmoid.apply, (x,))


@pytest.mark.parametrize('shape', [(3,), (2, 3), (4, 1, 2)])
def test_gradgradcheck_of_sigmoid(shape):
    "The backward is itself made of differentiable torch ops, so second derivatives are right too."
    assert torch.autograd.gradgradcheck(MySigmoid.apply, (away_from_zero(shape, 0),))


@pytest.mark.parametrize('wrong', [WrongSigmoid, WrongReLU])
@pytest.mark.parametrize('shape', [(3,), (2, 3), (4, 1, 2)])
def test_wrong_backward_fails_gradcheck(wrong, shape):
    x = torch.linspace(-1.05, 0.95, int(np.prod(shape)), dtype=torch.float64).reshape(shape).requires_grad_()
    with pytest.raises(GradcheckError, match='Jacobian mismatch for output 0 with respect to input 0'):
        torch.autograd.gradcheck(wrong.apply, (x,))
    assert torch.autograd.gradcheck(wrong.apply, (x,), raise_exception=False) is False


@SETTINGS
@given(shapes, st.integers(0, 2**32 - 1), st.booleans())
def test_outputs_and_grads_equal_torch(shape, seed, with_zeros):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 5
    if with_zeros: x.flat[::2] = 0.0                        # relu'(0) = 0 in both
    g = rng.standard_normal(shape)
    for ours, theirs, rtol in ((MyReLU.apply, torch.relu, 0), (MySigmoid.apply, torch.sigmoid, 1e-14)):
        a, b = torch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = ours(a), theirs(b)
        check_close(ya, yb, rtol=rtol, atol=1e-300, name='output')
        ya.backward(torch.tensor(g)); yb.backward(torch.tensor(g))
        check_close(a.grad, b.grad, rtol=1e-12, atol=1e-300, name='grad')


def test_sigmoid_extremes_are_finite():
    x = torch.tensor([-1000.0, -40.0, 0.0, 40.0, 1000.0], dtype=torch.float64, requires_grad=True)
    y = MySigmoid.apply(x)
    y.sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    check_close(y, torch.sigmoid(x), rtol=1e-15)


def test_float32_inputs_keep_their_dtype():
    x = torch.randn(4, requires_grad=True)
    for f in (MyReLU, MySigmoid):
        y = f.apply(x); y.sum().backward()
        assert y.dtype == torch.float32 and x.grad.dtype == torch.float32
        x.grad = None


def test_functions_are_built_once_and_named_for_the_graph():
    assert relu_function() is relu_function() and sigmoid_function() is sigmoid_function()
    assert issubclass(MyReLU, torch.autograd.Function) and issubclass(MySigmoid, torch.autograd.Function)
    x = torch.ones(2, requires_grad=True)
    assert MyReLU.apply(x).grad_fn.name() == 'MyReLUBackward'
    assert MySigmoid.apply(x).grad_fn.name() == 'MySigmoidBackward'


def test_relu_saves_its_input_and_sigmoid_its_output():
    x = torch.tensor([-1.0, 2.0], dtype=torch.float64, requires_grad=True)
    r, s = MyReLU.apply(x), MySigmoid.apply(x)
    assert torch.equal(r.grad_fn.saved_tensors[0], x)
    assert torch.equal(s.grad_fn.saved_tensors[0], s)


def test_saved_output_modified_in_place_is_detected():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    y = MySigmoid.apply(x * 1.0)
    y.mul_(2)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'): y.sum().backward()


def test_function_inside_a_module_matches_nn_relu():
    class ReLUFromFunction(torch.nn.Module):
        def forward(self, x): return MyReLU.apply(x)
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(5, 4), ReLUFromFunction(), torch.nn.Linear(4, 2)).double()
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(7, 5, dtype=torch.float64)
    ours(x).pow(2).sum().backward(); ref(x).pow(2).sum().backward()
    for p, q in zip(ours.parameters(), ref.parameters()): check_close(p.grad, q.grad, rtol=1e-12)


def test_backward_method_on_a_module_is_never_called():
    calls = []
    class Fake(torch.nn.Module):
        def forward(self, x): return x.clamp(min=0)
        def backward(self, grad_output): calls.append(1); return grad_output * 1000
    x = torch.tensor([-1.0, 2.0], dtype=torch.float64, requires_grad=True)
    Fake()(x).sum().backward()
    assert calls == [] and x.grad.tolist() == [0.0, 1.0]


def test_graph_lines_on_a_small_graph():
    x = torch.randn(5, 3, dtype=torch.float64)
    w = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    h = MyReLU.apply(x @ w + b)
    loss = (MySigmoid.apply(h) * h).sum()
    assert graph_lines(loss.grad_fn) == [
        'SumBackward0',
        '    MulBackward0',
        '        MySigmoidBackward',
        '            MyReLUBackward',
        '                AddBackward0',
        '                    MmBackward0',
        '                        AccumulateGrad (3, 2)',
        '                    AccumulateGrad (2,)',
        '        MyReLUBackward (shown above)']


def test_graph_lines_on_a_leaf_and_on_a_deep_chain():
    w = torch.ones(2, requires_grad=True)
    assert graph_lines((w * 2).grad_fn) == ['MulBackward0', '    AccumulateGrad (2,)']
    y = w
    for _ in range(3000): y = MySigmoid.apply(y)           # deeper than Python's recursion limit
    lines = graph_lines(y.grad_fn)
    assert len(lines) == 3001 and lines[-1].strip() == 'AccumulateGrad (2,)'


def test_graph_lines_expands_a_shared_node_once():
    a = torch.ones(3, requires_grad=True)
    s = MySigmoid.apply(a)
    y = s * s + s
    lines = graph_lines(y.grad_fn)
    assert sum('MySigmoidBackward' in l and 'shown above' not in l for l in lines) == 1
    assert sum('(shown above)' in l for l in lines) == 2
    assert sum('AccumulateGrad' in l for l in lines) == 1


def test_importing_the_module_does_not_import_torch():
    code = ("import sys, fromscratch.lessons.function as f\n"
            "print('torch' in sys.modules, callable(f.relu_function), callable(f.sigmoid_function))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ['False', 'True', 'True']
