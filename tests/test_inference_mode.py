"""fs.inference_mode against torch.inference_mode: what is recorded, which tensors are inference tensors,
and torch's errors when an inference tensor is later used where autograd needs it."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.testing import check_close, error_of


def both(f):
    "f(fromscratch) and f(torch), asserted equal; the common value."
    ours, theirs = f(fs), f(torch)
    assert ours == theirs, (ours, theirs)
    return ours


def test_modes_inside_and_after():
    def modes(lib):
        seen = [(lib.is_grad_enabled(), lib.is_inference_mode_enabled())]
        with lib.inference_mode():
            seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            with lib.inference_mode(False):
                seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            with lib.no_grad():
                seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            with lib.inference_mode(mode=True):
                seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
        with lib.no_grad():
            with lib.inference_mode(False):      # grad mode back on, as torch's guard does
                seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            with lib.inference_mode():
                seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
        seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
        return seen
    both(modes)


def test_exception_inside_restores_the_modes():
    def run(lib):
        try:
            with lib.inference_mode(): raise ValueError('inside')
        except ValueError: pass
        return lib.is_grad_enabled(), lib.is_inference_mode_enabled()
    assert both(run) == (True, False)


@pytest.mark.parametrize('make', ['x * 2', 'x.exp()', 'x[0]', 'x.T', 'x.sum()', 'x > 0', 'ones', 'zeros_like',
                                  'tensor', 'arange', 'randn', 'rand_like', 'cat', 'detach', 'x @ x.T',
                                  'clone', 'F.relu', 'linear'])
def test_tensors_made_inside_are_inference_tensors(make):
    def run(lib):
        x = lib.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
        F = lib.nn.functional
        f = {'x * 2': lambda: x * 2, 'x.exp()': lambda: x.exp(), 'x[0]': lambda: x[0] * 1,
             'x.T': lambda: (x * 1).T, 'x.sum()': lambda: x.sum(), 'x > 0': lambda: x > 0,
             'ones': lambda: lib.ones(2), 'zeros_like': lambda: lib.zeros_like(x),
             'tensor': lambda: lib.tensor([1, 2]), 'arange': lambda: lib.arange(3),
             'randn': lambda: lib.randn(2), 'rand_like': lambda: lib.rand_like(x),
             'cat': lambda: lib.cat([x, x]), 'detach': lambda: (x * 1).detach(),
             'x @ x.T': lambda: x @ x.T, 'clone': lambda: x.clone(), 'F.relu': lambda: F.relu(x),
             'linear': lambda: F.linear(x, x, x[0])}[make]
        with lib.inference_mode(): y = f()
        return y.is_inference(), lib.is_inference(y), y.requires_grad, y.grad_fn is None, y.is_leaf
    assert both(run) == (True, True, False, True, True)


def test_what_is_an_inference_tensor_outside():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        n = lib.tensor([1.0, 2.0])
        with lib.inference_mode():
            y = n * 2
            w = lib.ones(2, requires_grad=True)
            v = y[1:]                                    # a view of an inference tensor
            plain_view = n[1:]                           # a view of a normal tensor stays normal
        return {'x': x.is_inference(), 'y view outside': y[:1].is_inference(), 'y view inside': v.is_inference(),
                'y.detach()': y.detach().is_inference(), 'y.clone()': y.clone().is_inference(),
                'y * n': (y * n).is_inference(), 'view of a normal tensor': plain_view.is_inference(),
                'w': (w.is_inference(), w.requires_grad, w.is_leaf),
                'y + x': ((y + x).is_inference(), (y + x).requires_grad, (y + x).grad_fn.name())}
    both(run)


def test_no_grad_tensors_are_not_inference_tensors():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.no_grad(): y = x * 2
        return y.is_inference(), y._version, (y * x).requires_grad
    assert both(run) == (False, 0, True)


@pytest.mark.parametrize('form', ['with', 'decorator()', 'bare decorator', 'decorator(False)', 'mode=False'])
def test_context_manager_and_decorator(form):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        def double(t):
            "Doubles."
            return t * 2, lib.is_grad_enabled(), lib.is_inference_mode_enabled()
        if form == 'with':
            with lib.inference_mode(): out = double(x)
            name = None
        else:
            deco = {'decorator()': lib.inference_mode(), 'bare decorator': lib.inference_mode,
                    'decorator(False)': lib.inference_mode(False),
                    'mode=False': lib.inference_mode(mode=False)}[form]
            f = deco(double)
            out, name = f(x), (f.__name__, f.__doc__)
        y, grad_on, inference_on = out
        return (y.is_inference(), y.requires_grad, grad_on, inference_on, name,
                lib.is_grad_enabled(), lib.is_inference_mode_enabled())
    both(run)


def test_a_decorated_function_can_be_called_again():
    def run(lib):
        f = lib.inference_mode()(lambda t: t * 2)
        x = lib.ones(2, requires_grad=True)
        return [f(x).is_inference() for _ in range(3)]
    assert both(run) == [True] * 3


SAVED = "Inference tensors cannot be saved for backward"


@pytest.mark.parametrize('op', ['y * x', 'x * y', 'x @ y', 'y.exp() * x', 'F.linear', 'x.pow(y)', 'x / y',
                                'where'])
def test_a_node_refuses_to_save_an_inference_tensor(op):
    def run(lib):
        x = lib.tensor([[1.0, 2.0], [3.0, 0.5]], requires_grad=True)
        with lib.inference_mode(): y = lib.tensor([[2.0, 1.0], [0.5, 3.0]]) * 1
        F = lib.nn.functional
        f = {'y * x': lambda: y * x, 'x * y': lambda: x * y, 'x @ y': lambda: x @ y,
             'y.exp() * x': lambda: y.exp() * x, 'F.linear': lambda: F.linear(y, x),
             'x.pow(y)': lambda: x.pow(y), 'x / y': lambda: x / y,
             'where': lambda: lib.where(y > 1, x * 1, y)}[op]
        return error_of(f)
    message = both(run)
    assert (SAVED in message) == (op not in ('where', 'y.exp() * x')), message   # y.exp() is a new, normal tensor


@pytest.mark.parametrize('op', ['y + x', 'x - y', 'x * 2 + y', 'where'])
def test_recorded_ops_that_save_nothing_accept_inference_tensors(op):
    def run(lib):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        with lib.inference_mode(): y = lib.tensor([3.0, 4.0], dtype=lib.float64) * 1
        out = {'y + x': lambda: y + x, 'x - y': lambda: x - y, 'x * 2 + y': lambda: x * 2 + y,
               'where': lambda: lib.where(y > 3.5, x, y)}[op]()
        (out * out).sum().backward()
        return out.is_inference(), out.requires_grad, x.grad.tolist()
    both(run)


def test_an_inference_leaf_that_requires_grad():
    def run(lib):
        with lib.inference_mode(): w = lib.ones(2, requires_grad=True)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (w * 2).sum().backward()                          # w is not saved: fine
        return w.grad.tolist(), w.grad.is_inference(), error_of(lambda: w * x)
    both(run)


@pytest.mark.parametrize('op', ['add_', 'mul_', 'zero_', 'setitem', 'copy_', '+=', 'fill_', 'sub_ with a grad'])
@pytest.mark.parametrize('mode', ['grad', 'no_grad'])
def test_in_place_outside_inference_mode_is_refused_after_the_write(op, mode):
    def run(lib):
        with lib.inference_mode(): y = lib.ones(2) * 2
        g = lib.tensor([1.0, 2.0], requires_grad=True)
        def change():
            with (lib.no_grad() if mode == 'no_grad' else lib.enable_grad()):
                if op == 'add_': y.add_(1)
                elif op == 'mul_': y.mul_(3)
                elif op == 'zero_': y.zero_()
                elif op == 'setitem': y[0] = 5
                elif op == 'copy_': y.copy_(lib.zeros(2))
                elif op == '+=':
                    z = y
                    z += 1
                elif op == 'fill_': y.fill_(7)
                elif op == 'sub_ with a grad': y.sub_(g)
        return error_of(change), y.tolist()
    message, values = both(run)
    assert 'Inplace update to inference tensor outside InferenceMode is not allowed' in message


def test_in_place_inside_inference_mode_is_allowed():
    def run(lib):
        n = lib.tensor([1.0, 2.0])
        with lib.inference_mode():
            y = n * 2
            y.add_(1)
            n.mul_(2)                                     # a normal tensor counts its change
            with lib.inference_mode(False):
                refused = error_of(lambda: y.add_(1))
        return y.tolist(), n._version, n.tolist(), refused
    both(run)


def test_requires_grad_and_version_of_an_inference_tensor():
    def run(lib):
        with lib.inference_mode():
            y = lib.ones(2)
            inside = error_of(lambda: y._version)
            y2 = lib.ones(2)
            y2.requires_grad_()                              # allowed inside
        return (inside, error_of(lambda: y._version), error_of(lambda: y.requires_grad_()),
                error_of(lambda: setattr(y, 'requires_grad', True)), y.requires_grad_(False).requires_grad,
                y2.requires_grad, error_of(lambda: y.clone().requires_grad_()))
    both(run)


def test_a_model_evaluated_in_inference_mode():
    def run(lib):
        rng = np.random.default_rng(0)
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.ReLU(), lib.nn.Linear(3, 2))
        with lib.no_grad():
            for p in model.parameters(): p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)), dtype=lib.float32))
        x = lib.tensor(rng.standard_normal((5, 4)), dtype=lib.float32)
        with lib.inference_mode(): out = model(x)
        again = model(x)                                       # outside: recorded as usual
        again.sum().backward()
        return out, out.is_inference(), out.requires_grad, again.requires_grad, model[0].weight.grad
    ours, theirs = run(fs), run(torch)
    check_close(ours[0], theirs[0], rtol=1e-5)
    check_close(ours[4], theirs[4], rtol=1e-5)
    assert ours[1:4] == theirs[1:4] == (True, False, True)


def test_func_grad_works_inside_inference_mode():
    def run(lib):
        with lib.inference_mode():
            g = lib.func.grad(lambda t: (t * t).sum())(lib.tensor([1.0, 2.0]))
        return g.tolist()
    both(run)


def test_custom_function_with_an_inference_input():
    def run(lib):
        class Scale(lib.autograd.Function):      # PyTorch 2's style: setup_context saves
            @staticmethod
            def forward(a, b): return a * b
            @staticmethod
            def setup_context(ctx, inputs, output): ctx.save_for_backward(*inputs)
            @staticmethod
            def backward(ctx, g): return g * ctx.saved_tensors[1], g * ctx.saved_tensors[0]
        with lib.inference_mode():
            y = lib.ones(2) * 3
            inside = Scale.apply(y, y).is_inference()
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        unrecorded = Scale.apply(y, lib.ones(2))              # nothing requires grad: nothing saved
        return inside, unrecorded.is_inference(), error_of(lambda: Scale.apply(x, y))
    both(run)


def test_engine_cost_unchanged_outside_inference_mode():
    "A tensor made outside inference mode gets no counter until one is needed, as before."
    x = fs.ones(2)
    assert x._version_counter is None and not x.is_inference()
