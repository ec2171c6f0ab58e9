"""autograd.graph.saved_tensors_hooks and save_on_cpu against torch's: what is packed and unpacked, when,
in which grad mode, the gradients through packed tensors, nesting, and torch's errors."""
import contextlib

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import SAVED_HOOKS
from fromscratch.testing import check_close, error_of


def logging_hooks(lib, log):
    def pack(t):
        log.append(('pack', tuple(t.shape), str(t.dtype).split('.')[-1], lib.is_grad_enabled()))
        return t
    def unpack(t):
        log.append(('unpack', tuple(t.shape), lib.is_grad_enabled()))
        return t
    return lib.autograd.graph.saved_tensors_hooks(pack, unpack)


# ops whose nodes save the same tensors in both libraries (our fused linear/cross_entropy save others)
OPS = {
    'x * c': lambda lib, x, c, m: x * c, 'x * x': lambda lib, x, c, m: x * x,
    'x * 2': lambda lib, x, c, m: x * 2, 'c * x (broadcast)': lambda lib, x, c, m: c[None] * x,
    'x / c': lambda lib, x, c, m: x / c, 'c / x': lambda lib, x, c, m: c / x,
    'x + c': lambda lib, x, c, m: x + c, 'x - x': lambda lib, x, c, m: x - x,
    'exp': lambda lib, x, c, m: x.exp(), 'log': lambda lib, x, c, m: x.log(),
    'sin': lambda lib, x, c, m: x.sin(), 'cos': lambda lib, x, c, m: x.cos(),
    'sqrt': lambda lib, x, c, m: x.sqrt(), 'tanh': lambda lib, x, c, m: x.tanh(),
    'sigmoid': lambda lib, x, c, m: x.sigmoid(), 'relu': lambda lib, x, c, m: x.relu(),
    'abs': lambda lib, x, c, m: x.abs(), 'x ** 2': lambda lib, x, c, m: x ** 2,
    'sum': lambda lib, x, c, m: x.sum(), 'mean': lambda lib, x, c, m: x.mean(),
    'reshape': lambda lib, x, c, m: x.reshape(3, 1), 'index': lambda lib, x, c, m: x[1:],
    'm @ x': lambda lib, x, c, m: m @ x, 'x @ m.T': lambda lib, x, c, m: x @ m.T,
    'softmax': lambda lib, x, c, m: x.softmax(0), 'log_softmax': lambda lib, x, c, m: x.log_softmax(0),
    'chain': lambda lib, x, c, m: ((m @ x).tanh() * c[:2]).exp().sum(),
}


def program(lib, name, hooks=None):
    "Forward inside logging hooks, then backward: the log of the forward, of the backward, and x.grad."
    x = lib.tensor([0.5, 1.5, 2.0], dtype=lib.float64, requires_grad=True)
    c = lib.tensor([3.0, -1.0, 2.0], dtype=lib.float64)
    m = lib.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0]], dtype=lib.float64)
    log = []
    with logging_hooks(lib, log): y = OPS[name](lib, x, c, m)
    forward = list(log)
    y.sum().backward()
    return forward, log[len(forward):], x.grad


@pytest.mark.parametrize('name', OPS)
def test_pack_and_unpack_like_torch(name):
    ours, theirs = program(fs, name), program(torch, name)
    assert ours[:2] == theirs[:2]
    check_close(ours[2], theirs[2])


def test_nothing_is_packed_without_recording():
    def run(lib):
        log, x = [], lib.tensor([1.0, 2.0], requires_grad=True)
        with logging_hooks(lib, log):
            with lib.no_grad(): x * x
            lib.tensor([1.0]).exp() * lib.tensor([2.0])         # nothing requires grad
        return log
    assert run(fs) == run(torch) == []


def test_nodes_made_outside_are_not_packed_and_blocks_nest():
    def run(lib):
        log = []
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        outer = lib.autograd.graph.saved_tensors_hooks(lambda t: ('outer', t), lambda p: log.append(p[0]) or p[1])
        inner = lib.autograd.graph.saved_tensors_hooks(lambda t: ('inner', t), lambda p: log.append(p[0]) or p[1])
        a = x.exp()                                             # no hooks
        with outer:
            b = a * a                                           # outer
            with inner: c = b.sin()                             # inner wins
            d = c.tanh()                                        # outer again
        e = d.log()                                             # none
        e.sum().backward()
        return log, x.grad.tolist()
    ours, theirs = run(fs), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-10)
    assert SAVED_HOOKS == []


def as_lists(lib):
    return lib.autograd.graph.saved_tensors_hooks(lambda t: (t.tolist(), t.dtype),
                                                 lambda p: lib.tensor(p[0], dtype=p[1]))


@pytest.mark.parametrize('hooks', ['lists', 'save_on_cpu', 'save_on_cpu pinned', 'clone'])
def test_gradients_through_packed_tensors(hooks):
    def run(lib):
        make = {'lists': as_lists, 'save_on_cpu': lambda lib: lib.autograd.graph.save_on_cpu(),
                'save_on_cpu pinned': lambda lib: lib.autograd.graph.save_on_cpu(pin_memory=True),
                'clone': lambda lib: lib.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t),
                None: lambda lib: contextlib.nullcontext()}
        rng = np.random.default_rng(3)
        x = lib.tensor(rng.standard_normal((5, 4)))
        w1 = lib.tensor(rng.standard_normal((4, 3)), requires_grad=True)
        w2 = lib.tensor(rng.standard_normal((3, 2)), requires_grad=True)
        out = {}
        for name in (hooks, None):
            with make[name](lib):
                loss = ((x @ w1).relu() @ w2).log_softmax(1).mean() + (w1 * w1).sum()
            out[name] = lib.autograd.grad(loss, [w1, w2], retain_graph=True) + lib.autograd.grad(loss, [w1, w2])
        return out
    ours, theirs = run(fs), run(torch)
    for o, t, plain in zip(ours[hooks], theirs[hooks], ours[None]):
        check_close(o, t); check_close(o, plain)


def test_retain_graph_unpacks_again_and_a_freed_graph_refuses():
    def run(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with logging_hooks(lib, log): y = (x * lib.tensor([3.0, 4.0])).sum()
        y.backward(retain_graph=True)
        y.backward()
        return log, error_of(lambda: y.backward()).split('(')[0]
    assert run(fs) == run(torch)


def test_custom_function_unpacks_at_each_access():
    def run(lib):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * 2
            @staticmethod
            def backward(ctx, g):
                a, = ctx.saved_tensors
                a, = ctx.saved_tensors                          # a second access: a second unpack
                return g * 2
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with logging_hooks(lib, log): y = Twice.apply(x).sum()
        y.backward()
        return log, x.grad.tolist()
    assert run(fs) == run(torch)


def test_hooks_open_during_a_create_graph_backward_pack_its_nodes():
    def run(lib):
        log = []
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        y = (x * x * x).sum()
        with logging_hooks(lib, log): g, = lib.autograd.grad(y, x, create_graph=True)
        packs = sorted(e for e in log if e[0] == 'pack')
        g2, = lib.autograd.grad(g.sum(), x)
        return packs, g2.tolist()
    assert run(fs) == run(torch)


def test_a_packed_tensor_is_not_version_checked():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 4.0])
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t): y = (x * c).sum()
        c.add_(1)                                              # the node kept a clone: nothing to check
        y.backward()
        h = x * 1
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t): z = (h * h).sum()
        h.add_(1)                                              # torch does not check here either
        z.backward()
        return x.grad.tolist()
    assert run(fs) == run(torch)


def test_unpack_may_give_a_tensor_with_history():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([2.0, 3.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * w):
            y = (x * lib.tensor([1.0, 1.0])).sum()
        y.backward()
        return x.grad.tolist(), w.grad
    assert run(fs) == run(torch)


@pytest.mark.parametrize('case', ['unpack gives a number', 'unpack gives a list', 'pack changes its tensor',
                                  'pack changes a saved output'])
def test_errors_like_torch(case):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 4.0])
        def go():
            if case == 'unpack gives a number':
                with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: 3): y = (x * c).sum()
                y.backward()
            elif case == 'unpack gives a list':
                with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: [1.0, 2.0]): y = (x * c).sum()
                y.backward()
            elif case == 'pack changes its tensor':
                with lib.autograd.graph.saved_tensors_hooks(lambda t: t.mul_(2), lambda p: p): x * c
            else:
                with lib.autograd.graph.saved_tensors_hooks(lambda t: t.mul_(2), lambda p: p): (x * 1).exp()
        return error_of(go), c.tolist()
    assert run(fs) == run(torch)
    assert SAVED_HOOKS == []


def test_a_gradient_that_is_an_unpacked_tensor_is_copied_into_grad():
    "A backward that returns what the unpack hook gave: .grad must not share its memory, or += would change it."
    def run(lib):
        keep = lib.tensor([1.0, 2.0])
        class PassSaved(lib.autograd.Function):                 # PyTorch 2's style
            @staticmethod
            def forward(a): return a * 1
            @staticmethod
            def setup_context(ctx, inputs, output): ctx.save_for_backward(keep)
            @staticmethod
            def backward(ctx, g): return ctx.saved_tensors[0]
        x = lib.tensor([5.0, 5.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            y = PassSaved.apply(x).sum()
        y.backward()
        (x * 3).sum().backward()                              # accumulates into x.grad in place
        return keep.tolist(), x.grad.tolist()
    assert run(fs) == run(torch) == ([1.0, 2.0], [4.0, 5.0])


def test_without_hooks_nodes_keep_their_tensors():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert y.grad_fn.unpack is None and all(t is x for t in y.grad_fn.to_save)
