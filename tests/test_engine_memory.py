"""Memory: a backward without retain_graph releases what the graph saved, and training steps leak nothing.

Weak references show that an object is gone (they do not keep it alive). These tests fail if the graph,
a hook, or the engine keeps a saved tensor, its array, or a whole step's graph alive.
"""
import gc
import weakref

import numpy as np
import pytest

import fromscratch as fs
from fromscratch import autograd
from fromscratch.core import Tensor, Function


class Saves(Function):
    "x * y, saving both inputs."
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return Tensor(a.array * b.array)
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


def intermediate_graph(kind):
    "A loss whose graph alone holds an intermediate; weak references to what the graph saved of it."
    x = fs.tensor(np.linspace(-1, 1, 50), requires_grad=True)
    h = x * 3
    if kind == 'custom': y = Saves.apply(h, h).sum()
    elif kind == 'mul': y = (h * h).sum()
    elif kind == 'matmul':                # matmul saves views of h: they hold h's array
        y = (h.reshape(5, 10) @ h.reshape(10, 5)).sum()
        return x, y, [weakref.ref(h.array)]
    else:                                 # exp and tanh save their output's array (not the output tensor)
        h = h.exp() if kind == 'exp_output' else h.tanh()
        y = h.sum()
        return x, y, [weakref.ref(h.array)]
    return x, y, [weakref.ref(h), weakref.ref(h.array)]


KINDS = ['custom', 'mul', 'exp_output', 'matmul', 'tanh']


@pytest.mark.parametrize('kind', KINDS)
def test_saved_tensors_released_by_backward(kind):
    x, y, refs = intermediate_graph(kind)
    assert all(r() is not None for r in refs)              # the graph keeps them for the backward
    y.backward()
    assert all(r() is None for r in refs), 'the graph still holds what it saved after backward()'
    assert x.grad is not None


@pytest.mark.parametrize('kind', KINDS)
def test_saved_tensors_kept_with_retain_graph(kind):
    x, y, refs = intermediate_graph(kind)
    y.backward(retain_graph=True)
    assert all(r() is not None for r in refs)
    first = x.grad.clone()
    y.backward()                                          # the last one frees
    assert all(r() is None for r in refs)
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy())


@pytest.mark.parametrize('kind', KINDS)
def test_saved_tensors_released_by_autograd_grad(kind):
    x, y, refs = intermediate_graph(kind)
    autograd.grad(y, x)
    assert all(r() is None for r in refs)


def test_graph_dies_with_its_output():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    node = weakref.ref(y.grad_fn)
    del y
    assert node() is None
    y = (x.exp() * x).sum()
    node = weakref.ref(y.grad_fn)
    y.backward()
    del y
    assert node() is None
    assert x.grad is not None and x.is_leaf


def mlp_step(x, target, params):
    w1, b1, w2, b2 = params
    h = (x @ w1 + b1).relu()
    out = (h @ w2 + b2).log_softmax(1)
    loss = -(out * target).sum(dim=1).mean()
    loss.backward()
    with fs.no_grad():
        for p in params:
            p -= 0.01 * p.grad
            p.grad = None
    return loss.item()


def make_problem():
    rng = np.random.default_rng(0)
    x = fs.tensor(rng.standard_normal((16, 8)))
    target = fs.tensor(np.eye(3)[rng.integers(0, 3, 16)])
    params = [fs.tensor(rng.standard_normal(s) * 0.3, requires_grad=True) for s in ((8, 12), (12,), (12, 3), (3,))]
    return x, target, params


def live_tensors():
    gc.collect()
    return sum(type(o) is Tensor for o in gc.get_objects())


def test_training_loop_keeps_live_tensors_flat():
    x, target, params = make_problem()
    for _ in range(20): mlp_step(x, target, params)
    before = live_tensors()
    losses = [mlp_step(x, target, params) for _ in range(1000)]
    after = live_tensors()
    assert after - before <= 2, (before, after)
    assert losses[-1] < losses[0]


def test_training_step_creates_no_reference_cycles():
    # without cycles, everything a step made is freed by reference counting, at once, without the collector
    x, target, params = make_problem()
    mlp_step(x, target, params)
    gc.collect()
    gc.disable()
    try:
        for _ in range(50): mlp_step(x, target, params)
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f'{found} objects were only reclaimable by the cycle collector'


def test_forward_without_backward_creates_no_cycles():
    # saved outputs (exp, tanh, softmax) must not form node -> output -> node cycles
    x = fs.tensor(np.linspace(-1, 1, 20), requires_grad=True)
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            y = (x.exp() * x.tanh()).sigmoid().softmax(0).sum()
            del y
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, found


def test_grad_loop_keeps_live_tensors_flat():
    x = fs.tensor(np.linspace(-1, 1, 10), dtype=fs.float64, requires_grad=True)
    def step():
        g, = autograd.grad((x.tanh() * x).sum(), x, create_graph=True)
        h, = autograd.grad((g * g).sum(), x)
        return h
    for _ in range(10): step()
    before = live_tensors()
    for _ in range(300): step()
    assert live_tensors() - before <= 2


def test_hooks_and_retained_grads_do_not_keep_the_graph():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    k = h.exp()
    h.retain_grad()
    handle = h.register_hook(lambda g: g * 2)
    ref = weakref.ref(k)
    y = (k * k).sum()
    del k
    y.backward()
    assert ref() is None
    assert h.grad is not None
    handle.remove()
