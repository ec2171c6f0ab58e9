"""fs.autograd.function (08_autograd, 14_forward_ad): the module, `once_differentiable` and the ctx's
`save_for_forward`, each run through our engine and torch on the same numbers, in float64, errors in torch's
words."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwAD

import fromscratch as fs
import fromscratch.autograd.forward_ad as fwAD
from fromscratch.testing import check_close, compare_errors

rng = np.random.default_rng(28)
X, Y = rng.standard_normal(4), rng.standard_normal(4)


def test_the_module_holds_the_function_machinery():
    for name in ('Function', 'FunctionCtx', 'once_differentiable'):
        assert hasattr(torch.autograd.function, name) and hasattr(fs.autograd.function, name)
    assert fs.autograd.Function is fs.autograd.function.Function
    assert fs.autograd.FunctionCtx is fs.autograd.function.FunctionCtx


def numpy_functions(L):
    "Functions whose backwards compute in numpy, under `once_differentiable`."
    once = L.autograd.function.once_differentiable

    class NumpySquare(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return L.tensor(x.detach().numpy() ** 2)

        @staticmethod
        @once
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            ctx.seen = (L.is_grad_enabled(), grad_output.requires_grad)
            return L.tensor(2 * x.numpy() * grad_output.numpy())

    class NumpyProduct(L.autograd.Function):
        "x * y, and x alone: two inputs, two outputs; the second input gets no gradient"
        @staticmethod
        def forward(ctx, x, y, scale):
            ctx.save_for_backward(x, y)
            return L.tensor(x.detach().numpy() * y.detach().numpy()), x.detach().clone()

        @staticmethod
        @once
        def backward(ctx, g_product, g_copy):
            x, y = ctx.saved_tensors
            return L.tensor(g_product.numpy() * y.numpy() + g_copy.numpy()), None, None

    return NumpySquare, NumpyProduct


def second_order(L, create_graph):
    "The gradient of sum(square(x) * x), and what a second backward through it does."
    square, _ = numpy_functions(L)
    x = L.tensor(X, dtype=L.float64, requires_grad=True)
    out = square.apply(x)
    g, = L.autograd.grad((out * x).sum(), x, create_graph=create_graph)
    try:
        g.sum().backward()
        error = None
    except RuntimeError as e:
        error = str(e)
    return g.detach().numpy(), g.requires_grad, out.grad_fn.seen, error


@pytest.mark.parametrize('create_graph', [False, True])
def test_once_differentiable_gives_the_first_derivative_and_refuses_a_second(create_graph):
    ours, theirs = second_order(fs, create_graph), second_order(torch, create_graph)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:] == theirs[1:]
    if create_graph:
        assert ours[3] == 'trying to differentiate twice a function that was marked with @once_differentiable'


def test_once_differentiable_records_nothing_when_no_incoming_gradient_requires_grad():
    def run(L):
        square, _ = numpy_functions(L)
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        g, = L.autograd.grad(square.apply(x).sum(), x, create_graph=True)
        return g.detach().numpy(), g.requires_grad, g.grad_fn is None
    ours, theirs = run(fs), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:] == theirs[1:] == (False, True)


def test_once_differentiable_with_several_outputs_and_a_none():
    def run(L):
        _, product = numpy_functions(L)
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        y = L.tensor(Y, dtype=L.float64, requires_grad=True)
        p, c = product.apply(x, y, 2.0)
        gx, gy = L.autograd.grad((p * x).sum() + (c * c).sum(), (x, y), create_graph=True,
                                 allow_unused=True)
        try:
            gx.sum().backward()
            error = None
        except RuntimeError as e:
            error = str(e)
        return gx.detach().numpy(), gy is None, error
    ours, theirs = run(fs), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:] == theirs[1:] and theirs[1] and theirs[2]


def test_the_decorated_backward_keeps_its_name_and_the_error_node_its_kind():
    for L in (fs, torch):
        square, _ = numpy_functions(L)
        assert square.backward.__name__ == 'backward'
    def node(L):
        square, _ = numpy_functions(L)
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        g, = L.autograd.grad((square.apply(x) * x).sum(), x, create_graph=True)
        return g.grad_fn.next_functions[1][0].name()
    assert node(fs) == 'Error' and node(torch).endswith('::Error')


def test_numpy_works_under_no_grad_on_a_tensor_that_requires_grad():
    for L in (fs, torch):
        x = L.ones(2, requires_grad=True)
        with L.no_grad(): assert x.numpy().tolist() == [1.0, 1.0]
    compare_errors(lambda: fs.ones(2, requires_grad=True).numpy(),
                   lambda: torch.ones(2, requires_grad=True).numpy())


def forward_functions(L):
    "Custom Functions with forward-mode rules: one that saves different tensors for each mode."
    class Cube(L.autograd.Function):
        "x ** 3: jvp reads 3 x ** 2 (saved for forward), backward reads x (saved for backward)"
        @staticmethod
        def forward(x): return x.pow(3)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(3 * inputs[0] ** 2, None)
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def jvp(ctx, x_t):
            slope, nothing = ctx.saved_tensors
            ctx.jvp_saw = (len(ctx.saved_tensors), nothing is None)
            return slope * x_t

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            ctx.backward_saw = len(ctx.saved_tensors)
            return 3 * x ** 2 * grad_output

    class SavesNothing(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x)
            ctx.y = y
            return x * y

        @staticmethod
        def jvp(ctx, x_t, y_t):
            ctx.jvp_saw = len(ctx.saved_tensors)
            return x_t * ctx.y + (0 if y_t is None else y_t * 2)

    return Cube, SavesNothing


def run_forward(L, fw):
    cube, saves_nothing = forward_functions(L)
    x = L.tensor(X, dtype=L.float64, requires_grad=True)
    with fw.dual_level():
        out = cube.apply(fw.make_dual(x, L.tensor(Y, dtype=L.float64)))
        tangent = fw.unpack_dual(out).tangent
        other = saves_nothing.apply(fw.make_dual(x.detach(), L.ones(4, dtype=L.float64)), 3.0)
        other_tangent = fw.unpack_dual(other).tangent
    saw = (out.grad_fn.jvp_saw, other.grad_fn.jvp_saw if other.grad_fn is not None else None)
    out.sum().backward()
    return tangent.detach().numpy(), other_tangent.numpy(), x.grad.numpy(), saw, out.grad_fn.backward_saw


def test_jvp_reads_save_for_forward_and_backward_reads_save_for_backward():
    ours, theirs = run_forward(fs, fwAD), run_forward(torch, tfwAD)
    for a, b in zip(ours[:3], theirs[:3]): np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(ours[0], 3 * X ** 2 * Y, rtol=1e-12)
    assert ours[3:] == theirs[3:]


def test_the_rule_runs_under_func_jvp_too():
    def run(L):
        cube, _ = forward_functions(L)
        return L.func.jvp(cube.apply, (L.tensor(X),), (L.tensor(Y),))[1].numpy()
    np.testing.assert_allclose(run(fs), run(torch), rtol=1e-12)


@pytest.mark.parametrize('mistake', ['a number saved for forward', 'no jvp'])
def test_mistakes_get_torchs_errors(mistake):
    def saves_a_number(L, fw):
        class Saves(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_forward(x, 2.0)
                return x * 2
        Saves.apply(L.ones(2))

    def no_jvp(L, fw):
        class Double(L.autograd.Function):
            @staticmethod
            def forward(ctx, x): return x * 2
        with fw.dual_level(): Double.apply(fw.make_dual(L.ones(2), L.ones(2)))

    f = {'a number saved for forward': saves_a_number, 'no jvp': no_jvp}[mistake]
    compare_errors(lambda: f(fs, fwAD), lambda: f(torch, tfwAD))
