"""fs.autograd and the engine behind it, against torch on the same numbers (float64 where values are compared).

Graph shapes, backward/grad and their arguments, retain_graph and freed saved tensors, create_graph and
higher-order gradients, retain_grad, hooks, grad mode, detach, requires_grad_, in-place changes and the
version counter, custom Functions, gradcheck, every row of COURSE.md's error table, leaf `.grad` aliasing.
Memory (weak references, live objects, reference cycles) is in test_engine_memory.py.
"""
import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fromscratch as fs
from fromscratch import autograd
from fromscratch.core import Tensor, Function
from fromscratch.testing import check_close


def pair(data, requires_grad=True, dtype='float64'):
    "The same numbers as a fromscratch tensor and a torch tensor."
    return (fs.tensor(np.array(data, dtype=dtype), requires_grad=requires_grad),
            torch.tensor(np.array(data, dtype=dtype), requires_grad=requires_grad))


def close(ours, theirs, **kw):
    "check_close that also accepts None on both sides and tuples/lists of tensors."
    if isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs): close(o, t, **kw)
    elif ours is None or theirs is None:
        assert ours is None and theirs is None, (ours, theirs)
    else:
        check_close(ours, theirs, **kw)


# ---------------------------------------------------------------------------------------------------------
# Small custom Functions of our own (engine-level tests), each written once for both libraries
# ---------------------------------------------------------------------------------------------------------

def make_functions(lib):
    "Tiny Functions: a product saving its inputs, a pass-through sum, an exp saving its output."
    class MyMul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b
        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            return (grad_output * b if ctx.needs_input_grad[0] else None,
                    grad_output * a if ctx.needs_input_grad[1] else None)

    class MyAdd(lib.autograd.Function):          # returns the very same tensor for both inputs
        @staticmethod
        def forward(ctx, a, b): return a + b
        @staticmethod
        def backward(ctx, grad_output): return grad_output, grad_output

    class MyExp(lib.autograd.Function):          # saves its output
        @staticmethod
        def forward(ctx, a):
            out = a.exp()
            ctx.save_for_backward(out)
            return out
        @staticmethod
        def backward(ctx, grad_output):
            out, = ctx.saved_tensors
            return grad_output * out

    class Scale(lib.autograd.Function):          # a non-tensor argument, and nothing saved
        @staticmethod
        def forward(ctx, a, k):
            ctx.k = k
            return a * k
        @staticmethod
        def backward(ctx, grad_output): return grad_output * ctx.k, None

    return MyMul, MyAdd, MyExp, Scale


FS_FNS, TORCH_FNS = make_functions(fs), make_functions(torch)


def graph_cases(lib, fns, x, w):
    "Named scalar functions of x (and w) covering the shapes of graph an engine must handle."
    MyMul, MyAdd, MyExp, Scale = fns
    def intermediate_twice():
        h = MyMul.apply(x, w)
        return (MyMul.apply(h, h) + h).sum()
    def diamond():
        h = Scale.apply(x, 3.0)
        return MyMul.apply(MyExp.apply(h), MyMul.apply(h, h)).sum()
    def wide_diamond():
        h = x * w
        return sum(((h * k).tanh() for k in (0.5, 1.0, 1.5, 2.0)), lib.zeros(1, dtype=h.dtype)).sum()
    def shared_leaf_pass_through():
        return MyAdd.apply(MyAdd.apply(x, x), MyMul.apply(x, w)).sum()
    def nested_diamonds():
        h = x
        for _ in range(5):
            h = MyAdd.apply(MyExp.apply(h * 0.3), Scale.apply(h, 0.5))
        return h.sum()
    return {
        'leaf_twice': lambda: MyMul.apply(x, x).sum(),
        'intermediate_twice': intermediate_twice,
        'diamond': diamond,
        'wide_diamond': wide_diamond,
        'shared_leaf_pass_through': shared_leaf_pass_through,
        'nested_diamonds': nested_diamonds,
        'unused_branch': lambda: (x * 2).sum() + (w * 0).sum(),
    }


GRAPHS = list(graph_cases(fs, FS_FNS, None, None))


@pytest.mark.parametrize('name', GRAPHS)
def test_graph_shapes_backward(name):
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal(4), rng.standard_normal(4)
    x, tx = pair(xs)
    w, tw = pair(ws)
    graph_cases(fs, FS_FNS, x, w)[name]().backward()
    graph_cases(torch, TORCH_FNS, tx, tw)[name]().backward()
    close(x.grad, tx.grad); close(w.grad, tw.grad)


@pytest.mark.parametrize('name', GRAPHS)
def test_graph_shapes_grad_and_second_order(name):
    rng = np.random.default_rng(1)
    x, tx = pair(rng.standard_normal(3))
    w, tw = pair(rng.standard_normal(3))
    g = autograd.grad(graph_cases(fs, FS_FNS, x, w)[name](), [x, w], create_graph=True, allow_unused=True)
    tg = torch.autograd.grad(graph_cases(torch, TORCH_FNS, tx, tw)[name](), [tx, tw], create_graph=True,
                             allow_unused=True)
    close(g, tg)
    assert x.grad is None and w.grad is None
    assert g[0].requires_grad == tg[0].requires_grad
    if not g[0].requires_grad: return    # a linear function: its gradient is a constant
    hv = autograd.grad((g[0] * fs.tensor([1.0, -2.0, 0.5], dtype=fs.float64)).sum(), [x, w], allow_unused=True)
    thv = torch.autograd.grad((tg[0] * torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)).sum(), [tx, tw],
                              allow_unused=True)
    for o, t in zip(hv, thv):       # torch may return None where we return zeros of a constant, or vice versa
        close(o if o is not None else np.zeros(3), t if t is not None else np.zeros(3))


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 5), elements=st.floats(-3, 3)))
def test_diamond_property(xs):
    x, tx = pair(xs)
    for lib, fns, t in ((fs, FS_FNS, x), (torch, TORCH_FNS, tx)):
        graph_cases(lib, fns, t, t)['diamond']().backward()
    close(x.grad, tx.grad, rtol=1e-9, atol=1e-9)


class Step(Function):
    "The cheapest node there is: the engine's own work dominates a chain of them."
    @staticmethod
    def forward(ctx, a): return Tensor(a.array)
    @staticmethod
    def backward(ctx, grad_output): return grad_output


def chain(n, x):
    h = x
    for _ in range(n): h = Step.apply(h)
    return h


@pytest.fixture(scope='module')
def chains():
    "A leaf and chains of 20,000 and 100,000 nodes from it (Step saves nothing: they can be walked repeatedly)."
    x = fs.tensor([2.0], requires_grad=True)
    return x, chain(20_000, x), chain(100_000, x)


def test_long_chain_no_recursion_error(chains):
    x, _, long = chains
    x.grad = None
    long.backward(fs.tensor([3.0]))
    assert x.grad.tolist() == [3.0]
    assert autograd.grad(long, x, fs.tensor([1.0]))[0].tolist() == [1.0]


def test_long_chain_work_is_linear(chains, monkeypatch):
    # no clock: count the node backwards the engine runs. Each node runs once, so the work of a backward is
    # the number of nodes, and five times the chain is exactly five times the work.
    import fromscratch.core.engine as engine   # the module whose walk calls call_backward
    x, short, long = chains
    runs, real = [], engine.call_backward
    monkeypatch.setattr(engine, 'call_backward', lambda node, buf, arrays: (runs.append(node), real(node, buf, arrays))[1])
    def work(y):
        runs.clear()
        y.backward(fs.tensor([1.0]))
        return len(runs), len(set(map(id, runs)))
    (small, small_distinct), (big, big_distinct) = work(short), work(long)
    assert (small, big) == (small_distinct, big_distinct) == (20_000, 100_000)


def test_long_chain_of_operations():
    MyMul, MyAdd, MyExp, Scale = FS_FNS
    x = fs.tensor([1.0], dtype=fs.float64, requires_grad=True)
    h = x
    for _ in range(5_000): h = Scale.apply(h * 1.0, 1.0) + 0.0
    h.sum().backward()
    assert x.grad.tolist() == [1.0]


# ---------------------------------------------------------------------------------------------------------
# The seed examples
# ---------------------------------------------------------------------------------------------------------

def test_seed_square_plus_three():
    x, tx = pair(1.0)
    for t in (x, tx): ((t + 2) ** 2 + 3).backward()
    close(x.grad, tx.grad)
    assert x.grad.item() == 6.0


def test_seed_vector_sum_backward():
    x, tx = pair([1.0, 2.0, 3.0])
    for t in (x, tx): ((t + 2) ** 2 + 3).sum().backward()
    close(x.grad, tx.grad)


def test_seed_gradient_is_a_vector_jacobian_product():
    a, ta = pair([2.0, 3.0, -1.0])
    b, tb = pair([6.0, 4.0, 0.5])
    v, tv = pair([1.0, 0.5, -2.0], requires_grad=False)
    (a * b).backward(gradient=v)
    (ta * tb).backward(gradient=tv)
    close(a.grad, ta.grad); close(b.grad, tb.grad)
    # v^T J with J = diag(b) computed explicitly
    close(a.grad, v.numpy() @ np.diag(b.detach().numpy()))
    # the same as the gradient of the weighted sum
    a2 = fs.tensor(a.detach().numpy(), requires_grad=True)
    ((a2 * b.detach()) * v).sum().backward()
    close(a2.grad, a.grad)


def test_seed_freezing_with_detach():
    def run(lib, x, w1, w2):
        h = (x @ w1).relu()
        (h.detach() @ w2).sum().backward()
    rng = np.random.default_rng(2)
    xs, w1s, w2s = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 1))
    x, tx = pair(xs, requires_grad=False)
    w1, tw1 = pair(w1s)
    w2, tw2 = pair(w2s)
    run(fs, x, w1, w2); run(torch, tx, tw1, tw2)
    assert w1.grad is None and tw1.grad is None
    close(w2.grad, tw2.grad)


# ---------------------------------------------------------------------------------------------------------
# backward and grad: arguments
# ---------------------------------------------------------------------------------------------------------

def test_autograd_backward_several_tensors():
    a, ta = pair([2.0, 3.0])
    b, tb = pair([6.0, 4.0])
    v, tv = pair([1.0, 0.5], requires_grad=False)
    autograd.backward([a * b, (a * a).sum()], [v, None])
    torch.autograd.backward([ta * tb, (ta * ta).sum()], [tv, None])
    close(a.grad, ta.grad); close(b.grad, tb.grad)


def test_backward_accumulates_across_calls():
    x, tx = pair([1.0, 2.0])
    for t in (x, tx):
        (t * 3).sum().backward()
        (t * t).sum().backward()
    close(x.grad, tx.grad)


def test_grad_returns_and_leaves_grad_alone():
    x, tx = pair([1.0, 2.0, 3.0])
    w, tw = pair([0.5, -1.0, 2.0])
    g = autograd.grad((x * w * x).sum(), [x, w])
    tg = torch.autograd.grad((tx * tw * tx).sum(), [tx, tw])
    assert isinstance(g, tuple) and len(g) == 2
    close(g, tg)
    assert x.grad is None and w.grad is None


def test_grad_single_tensor_input_returns_tuple():
    x, tx = pair([1.0, 2.0])
    g = autograd.grad((x * x).sum(), x)
    tg = torch.autograd.grad((tx * tx).sum(), tx)
    assert isinstance(g, tuple) and len(g) == 1
    close(g, tg)


def test_grad_outputs():
    x, tx = pair([1.0, 2.0, 3.0])
    v, tv = pair([1.0, -1.0, 0.25], requires_grad=False)
    close(autograd.grad(x.exp(), x, grad_outputs=v), torch.autograd.grad(tx.exp(), tx, grad_outputs=tv))
    close(autograd.grad([x.exp(), x * x], x, grad_outputs=[v, v]),
          torch.autograd.grad([tx.exp(), tx * tx], tx, grad_outputs=[tv, tv]))


def test_grad_allow_unused_and_materialize():
    x, tx = pair([1.0, 2.0])
    u, tu = pair([3.0])
    res = autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    tres = torch.autograd.grad((tx * 2).sum(), [tx, tu], allow_unused=True)
    close(res, tres)
    res = autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    tres = torch.autograd.grad((tx * 2).sum(), [tx, tu], materialize_grads=True)
    close(res, tres)
    with pytest.raises(ValueError, match='Expected allow_unused to be True or not passed'):
        autograd.grad((x * 2).sum(), [x, u], allow_unused=False, materialize_grads=True)


def test_grad_input_used_but_given_no_gradient_is_unused():
    class NoGrad(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(a.array * 2)
        @staticmethod
        def backward(ctx, g): return None
    x = fs.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match='index 0 appears to not have been used in the graph'):
        autograd.grad(NoGrad.apply(x).sum(), x)
    assert autograd.grad(NoGrad.apply(x).sum(), x, allow_unused=True) == (None,)


def test_grad_with_respect_to_non_leaf():
    x, tx = pair([1.0, 2.0])
    res, tres = [], []
    for t, out in ((x, res), (tx, tres)):
        h = t * 2
        y = (h * h * t).sum()
        lib = fs if t is x else torch
        out.extend(lib.autograd.grad(y, [h, t]))
    close(res, tres)


def test_grad_of_an_input_itself():
    x, tx = pair([1.0, 2.0])
    v, tv = pair([3.0, 4.0], requires_grad=False)
    close(autograd.grad(x, x, v), torch.autograd.grad(tx, tx, tv))


def test_grad_does_not_run_or_free_unneeded_nodes():
    # torch frees only the nodes it ran: the node of h = x * x survives grad(y, h)
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * x
        lib.autograd.grad((h * h).sum(), h)
        (h * 3).sum().backward()
        close(x.grad, [6.0, 12.0])


def test_backward_inputs_restricts_accumulation():
    x, tx = pair([1.0, 2.0])
    w, tw = pair([3.0, 4.0])
    (x * w).sum().backward(inputs=[w])
    (tx * tw).sum().backward(inputs=[tw])
    assert x.grad is None and tx.grad is None
    close(w.grad, tw.grad)
    autograd.backward((x * w).sum(), inputs=x)
    torch.autograd.backward((tx * tw).sum(), inputs=tx)
    close(x.grad, tx.grad); close(w.grad, tw.grad)


def test_backward_inputs_non_leaf_like_torch():
    # torch retains the gradient of a non-leaf listed in inputs, from then on
    state = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2
        h.sum().backward(inputs=[h], retain_graph=True)
        (h * 3).sum().backward(inputs=[h], retain_graph=True)
        first = (h.retains_grad, h.grad.tolist(), x.grad)
        (h * 5).sum().backward()
        state.append((first, h.grad.tolist(), x.grad.tolist()))
    assert state[0] == state[1]


def test_retain_graph_defaults_to_create_graph():
    x, tx = pair([1.0, 2.0])
    for t in (x, tx):
        y = (t ** 3).sum()
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            y.backward(create_graph=True)
        y.backward()                 # the graph was retained
    close(x.grad, tx.grad)


def test_seed_dtype_follows_output():
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.backward(lib.ones(2, dtype=lib.float64))
        assert str(x.grad.dtype).endswith('float32')
        y = lib.tensor([1.0, 2.0], requires_grad=True)
        (y * 2).backward(lib.ones(2, dtype=lib.float64))
        assert str(y.grad.dtype).endswith('float32')


def test_float32_default_and_float64_supported():
    for dtype in (None, fs.float64):
        x = fs.tensor([1.0, 2.0], dtype=dtype, requires_grad=True)
        (x.exp() * x).sum().backward()
        assert x.grad.dtype == (dtype or fs.float32)
        close(x.grad, np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])), rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# retain_graph and a second backward
# ---------------------------------------------------------------------------------------------------------

def test_backward_twice_without_retain_graph_raises_like_torch():
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x.exp() * x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match=r'Trying to backward through the graph a second time.*'
                                               r'Specify retain_graph=True'):
            y.backward()


def test_backward_twice_with_retain_graph_accumulates():
    x, tx = pair([1.0, 2.0])
    for t in (x, tx):
        y = (t.exp() * t).sum()
        y.backward(retain_graph=True)
        y.backward(retain_graph=True)
        y.backward()
    close(x.grad, tx.grad)
    close(x.grad, 3 * np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))


@pytest.mark.parametrize('build', [lambda x: (x + x).sum(), lambda x: x.sum(), lambda x: x.reshape(2, 1).sum()])
def test_graph_without_saved_tensors_can_be_walked_twice(build):
    # torch raises only when a freed saved tensor is read
    x, tx = pair([1.0, 2.0])
    for t in (x, tx):
        y = build(t)
        y.backward(); y.backward()
    close(x.grad, tx.grad)


def test_custom_function_saving_but_not_reading_can_run_twice():
    class SavesUnused(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return Tensor(a.array * 2)
        @staticmethod
        def backward(ctx, g): return g * 2
    x = fs.tensor([1.0], requires_grad=True)
    y = SavesUnused.apply(x).sum()
    y.backward(); y.backward()
    assert x.grad.tolist() == [4.0]


def test_saved_tensors_after_free_raise():
    MyMul = FS_FNS[0]
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    y = MyMul.apply(x, x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match='Trying to backward through the graph a second time'):
        y.grad_fn.saved_tensors


# ---------------------------------------------------------------------------------------------------------
# create_graph: second and third derivatives
# ---------------------------------------------------------------------------------------------------------

HIGHER = {
    'cube': lambda t: t ** 3,
    'tanh': lambda t: t.tanh(),
    'sigmoid': lambda t: t.sigmoid(),
    'exp_times_x': lambda t: t.exp() * t,
    'softmax': lambda t: t.softmax(0),
    'log_softmax': lambda t: t.log_softmax(0),
    'div': lambda t: 1 / (1 + t * t),
    'sqrt': lambda t: (t * t + 1).sqrt(),
    'mean_sq': lambda t: (t * t).mean() * t,
}


@pytest.mark.parametrize('name', list(HIGHER))
def test_first_second_third_derivatives(name):
    f = HIGHER[name]
    x, tx = pair([-0.7, 0.2, 1.3])
    g, tg = f(x), f(tx)
    for _ in range(3):
        g, = autograd.grad(g.sum(), x, create_graph=True)
        tg, = torch.autograd.grad(tg.sum(), tx, create_graph=True)
        close(g, tg, rtol=1e-9, atol=1e-12)
        assert g.requires_grad == tg.requires_grad
        if not g.requires_grad: break


def test_hessian_vector_product_matches_torch():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 4))
    x, tx = pair(rng.standard_normal(4))
    v, tv = pair(rng.standard_normal(4), requires_grad=False)
    def f(lib, t): return ((lib.tensor(A) @ t).tanh() * t).sum()
    g, = autograd.grad(f(fs, x), x, create_graph=True)
    hv, = autograd.grad((g * v).sum(), x)
    tg, = torch.autograd.grad(f(torch, tx), tx, create_graph=True)
    thv, = torch.autograd.grad((tg * tv).sum(), tx)
    close(hv, thv)


def test_backward_create_graph_gives_grad_a_history():
    x, tx = pair([1.0, 2.0])
    (x ** 3).sum().backward(create_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        (tx ** 3).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None and x.grad.requires_grad and tx.grad.requires_grad
    close(x.grad, tx.grad)
    g2, = autograd.grad(x.grad.sum(), x)
    tg2, = torch.autograd.grad(tx.grad.sum(), tx)
    close(g2, tg2)
    # a second backward with create_graph adds, still with a history
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None
    close(x.grad, 2 * 3 * np.array([1.0, 4.0]))


def test_gradient_penalty_like_torch():
    rng = np.random.default_rng(4)
    ws, xs = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
    w, tw = pair(ws)
    x, tx = pair(xs)
    for lib, wt, xt in ((fs, w, x), (torch, tw, tx)):
        out = (xt @ wt).tanh().sum()
        gx, = lib.autograd.grad(out, xt, create_graph=True)
        ((gx * gx).sum() + out).backward()
    close(w.grad, tw.grad); close(x.grad, tx.grad)


def test_custom_function_is_twice_differentiable():
    MyMul, MyAdd, MyExp, Scale = FS_FNS
    TMul, TAdd, TExp, TScale = TORCH_FNS
    x, tx = pair([0.3, -1.2])
    g, = autograd.grad(MyMul.apply(MyExp.apply(x), x).sum(), x, create_graph=True)
    tg, = torch.autograd.grad(TMul.apply(TExp.apply(tx), tx).sum(), tx, create_graph=True)
    close(autograd.grad(g.sum(), x), torch.autograd.grad(tg.sum(), tx))


# ---------------------------------------------------------------------------------------------------------
# .grad of non-leaves, retain_grad
# ---------------------------------------------------------------------------------------------------------

def test_non_leaf_grad_is_none_with_torchs_warning():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    (h * h).sum().backward()
    with pytest.warns(UserWarning, match=r'The \.grad attribute of a Tensor that is not a leaf Tensor is being '
                                         r'accessed.*retain_grad\(\)'):
        assert h.grad is None


def test_leaf_and_retained_grad_do_not_warn():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert x.grad is None and h.grad is None
        (h * h).sum().backward()
        x.grad, h.grad


def test_retain_grad_matches_torch():
    x, tx = pair([1.0, 2.0])
    out = []
    for lib, t in ((fs, x), (torch, tx)):
        h = t * 2
        h.retain_grad()
        k = h.exp()
        k.retain_grad()
        (k * h).sum().backward()
        out.append((h.grad, k.grad, t.grad, h.retains_grad, t.retains_grad))
    close(out[0][:3], out[1][:3])
    assert out[0][3:] == out[1][3:] == (True, False)


def test_retain_grad_accumulates_over_backwards():
    x, tx = pair([1.0, 2.0])
    hs = []
    for t in (x, tx):
        h = t * 2
        h.retain_grad()
        y = (h * h).sum()
        y.backward(retain_graph=True)
        y.backward()
        hs.append(h.grad)
    close(*hs)


def test_retain_grad_with_create_graph_keeps_history():
    out = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        h = x * x
        h.retain_grad()
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            (h * h).sum().backward(create_graph=True)
        out.append((h.grad.requires_grad, h.grad.detach().tolist()))
    assert out[0] == out[1]


def test_retain_grad_follows_an_in_place_change_hooks_stay():
    out = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2
        h.retain_grad()
        seen = []
        h.register_hook(lambda g: seen.append(('before', g.tolist())))
        h.mul_(3)
        h.register_hook(lambda g: seen.append(('after', g.tolist())))
        (h * h).sum().backward()
        out.append((h.grad.tolist(), seen, x.grad.tolist()))
    assert out[0] == out[1]


def test_retain_grad_errors_and_leaf_no_op():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        fs.ones(2).retain_grad()
    x = fs.tensor([1.0], requires_grad=True)
    x.retain_grad()
    assert not x.retains_grad


# ---------------------------------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------------------------------

def test_hook_observes_intermediate():
    seen = {}
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        h = x * 2
        got = []
        h.register_hook(lambda g: got.append(g.tolist()))
        (h * h * h).sum().backward()
        seen[lib.__name__] = (got, x.grad.tolist())
    assert seen['fromscratch'] == seen['torch']


def test_hook_modifies_downstream_and_leaf_grad():
    out = []
    for lib in (fs, torch):
        x = lib.tensor([0.1, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([1.0, -1.0], dtype=lib.float64, requires_grad=True)
        h = x * 2
        h.register_hook(lambda g: g.clamp(-1, 1))
        w.register_hook(lambda g: g * 10)
        (h * h * w).sum().backward()
        out.append((x.grad.tolist(), w.grad.tolist()))
    assert out[0] == out[1]


def test_hooks_chain_in_registration_order_then_retain_grad():
    out = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2
        h.retain_grad()
        h.register_hook(lambda g: g * 100)
        h.register_hook(lambda g: g + 1)
        calls = []
        x.register_hook(lambda g: calls.append('x1'))
        x.register_hook(lambda g: calls.append('x2'))
        (h * 1).sum().backward()
        out.append((h.grad.tolist(), x.grad.tolist(), calls))
    assert out[0] == out[1]


def test_hook_handle_remove_and_with():
    out = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        handle = x.register_hook(lambda g: g * 10)
        (x * 1).sum().backward()
        handle.remove()
        handle.remove()                       # removing twice is harmless
        (x * 1).sum().backward()
        with x.register_hook(lambda g: g * 100):
            (x * 1).sum().backward()
        (x * 1).sum().backward()
        h = x * 1
        hh = h.register_hook(lambda g: g * 7)
        hh.remove()
        h.sum().backward()
        out.append(x.grad.tolist())
    assert out[0] == out[1] == [113.0, 113.0]


def test_leaf_hook_fires_during_autograd_grad_like_torch():
    out = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        calls = []
        x.register_hook(lambda g: (calls.append('x'), g * 10)[1])
        w.register_hook(lambda g: calls.append('w'))
        res = lib.autograd.grad((x * x * w).sum(), x)
        out.append((res[0].tolist(), calls, x.grad, w.grad))
    assert out[0] == out[1]


@pytest.mark.parametrize('wrt', ['h', 'hx', 'x'])
def test_non_leaf_input_capture_and_hooks_like_torch(wrt):
    # torch captures h's gradient after h's hooks if h's node only needs capturing, before them if it runs
    out = []
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2
        h.register_hook(lambda g: g * 100)
        h.retain_grad()
        y = (h * h).sum()
        inputs = {'h': [h], 'hx': [h, x], 'x': [x]}[wrt]
        out.append(([g.tolist() for g in lib.autograd.grad(y, inputs)], h.grad.tolist()))
    assert out[0] == out[1]


def test_hook_not_fired_for_pruned_leaf():
    calls = []
    x = fs.tensor([1.0], requires_grad=True)
    w = fs.tensor([1.0], requires_grad=True)
    w.register_hook(lambda g: calls.append('w'))
    (x * w).sum().backward(inputs=[x])
    autograd.grad((x * w).sum(), x)
    assert calls == [] and w.grad is None


def test_hook_changing_the_size_raises():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: fs.ones(3))
    with pytest.raises(RuntimeError, match='has changed the size of value'):
        (x * 2).sum().backward()


def _post_accumulate_program(lib, case):
    """What post-accumulate hooks see (and what .grad ends up) in one small program per case."""
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([3.0, -1.0], dtype=lib.float64, requires_grad=True)
    seen = []
    def watch(name):
        return lambda t: seen.append((name, t is {'x': x, 'w': w}[name], t.grad.tolist(),
                                      t.grad.requires_grad, lib.is_grad_enabled()))
    if case == 'two backwards, then removed':
        handle = x.register_post_accumulate_grad_hook(watch('x'))
        (x * w).sum().backward(); (x * x).sum().backward()
        handle.remove(); handle.remove()
        (x * 3).sum().backward()
    elif case == 'order with tensor hooks':
        x.register_post_accumulate_grad_hook(watch('x'))
        x.register_hook(lambda g: seen.append(('pre', g.tolist())) or g * 2)
        x.register_post_accumulate_grad_hook(lambda t: seen.append(('second', t.grad.tolist())))
        (x * w).sum().backward()
    elif case == 'autograd.grad and inputs= skip it':
        x.register_post_accumulate_grad_hook(watch('x'))
        w.register_post_accumulate_grad_hook(watch('w'))
        lib.autograd.grad((x * w).sum(), [x, w])
        (x * w).sum().backward(inputs=[w])
    elif case == 'create_graph':
        x.register_post_accumulate_grad_hook(watch('x'))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            (x ** 3 * w).sum().backward(create_graph=True)
    elif case == 'a leaf used twice':
        x.register_post_accumulate_grad_hook(watch('x'))
        ((x * w).sum() + (x * x).sum()).backward()
    elif case == 'a step inside the backward':
        def step(t):
            with lib.no_grad(): t -= 0.5 * t.grad
            t.grad = None
        for p in (x, w): p.register_post_accumulate_grad_hook(step)
        ((x * w).exp().sum()).backward()
        seen.append((x.tolist(), w.tolist(), x.grad, w.grad))
    elif case == 'with a leaf hook that replaces the gradient':
        x.register_hook(lambda g: g * 10)
        x.register_post_accumulate_grad_hook(watch('x'))
        (x * w).sum().backward()
    return seen, None if x.grad is None else x.grad.tolist()


@pytest.mark.parametrize('case', ['two backwards, then removed', 'order with tensor hooks',
                                  'autograd.grad and inputs= skip it', 'create_graph', 'a leaf used twice',
                                  'a step inside the backward', 'with a leaf hook that replaces the gradient'])
def test_post_accumulate_grad_hook_like_torch(case):
    assert _post_accumulate_program(fs, case) == _post_accumulate_program(torch, case)


def test_post_accumulate_grad_hook_errors_like_torch():
    def errors(lib):
        out = []
        for f in (lambda: lib.ones(2).register_post_accumulate_grad_hook(lambda t: None),
                  lambda: (lib.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(lambda t: None)):
            with pytest.raises(RuntimeError) as e: f()
            out.append(str(e.value))
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        handle = x.register_post_accumulate_grad_hook(lambda t: t.grad * 2)
        with pytest.raises(RuntimeError) as e: (x * 3).sum().backward()
        out.append((str(e.value), x.grad.tolist(), type(handle).__name__))      # accumulated before the check
        return out
    assert errors(fs) == errors(torch)


def test_post_accumulate_hooks_do_not_keep_a_handle_alive():
    x = fs.tensor([1.0], requires_grad=True)
    handle = x.register_post_accumulate_grad_hook(lambda t: None)
    assert handle.hooks() is x._hooks.post and len(x._hooks) == 0
    del x
    handle.remove()                                   # the hooks went with the tensor: nothing to remove


def test_hooks_run_in_grad_mode_of_create_graph():
    # with create_graph=False a hook's own operations are not recorded (torch: same)
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        x.register_hook(lambda g: g * w)
        (x * 2).sum().backward()
        assert not x.grad.requires_grad
        assert x.grad.tolist() == [6.0, 8.0]


# ---------------------------------------------------------------------------------------------------------
# Grad mode
# ---------------------------------------------------------------------------------------------------------

def modes(lib):
    x = lib.tensor([1.0], requires_grad=True)
    res = []
    with lib.no_grad():
        res.append((x * 2).requires_grad)
        with lib.enable_grad(): res.append((x * 2).requires_grad)
        res.append(lib.is_grad_enabled())
    @lib.no_grad()
    def f(): return (x * 2).requires_grad
    @lib.enable_grad()
    def g(): return (x * 2).requires_grad
    res.append(f())
    with lib.no_grad(): res.append(g())
    with lib.set_grad_enabled(False): res.append((x * 2).requires_grad)
    res.append(lib.is_grad_enabled())
    lib.set_grad_enabled(False)
    res.append((x * 2).requires_grad)
    lib.set_grad_enabled(True)
    @lib.set_grad_enabled(False)
    def h(): return (x * 2).requires_grad
    res.append(h())
    res.append(lib.is_grad_enabled())
    return res


def test_grad_mode_matches_torch():
    assert modes(fs) == modes(torch)


def test_no_grad_bare_decorator_and_exception_restores():
    @fs.no_grad
    def f(): return fs.is_grad_enabled()
    assert f() is False and fs.is_grad_enabled()
    with pytest.raises(ValueError):
        with fs.no_grad(): raise ValueError
    assert fs.is_grad_enabled()
    assert autograd.no_grad is fs.no_grad and autograd.set_grad_enabled is fs.set_grad_enabled


def test_backward_under_no_grad_still_works():
    x, tx = pair([1.0, 2.0])
    for lib, t in ((fs, x), (torch, tx)):
        y = (t * t).sum()
        with lib.no_grad(): y.backward()
    close(x.grad, tx.grad)


# ---------------------------------------------------------------------------------------------------------
# detach, requires_grad_
# ---------------------------------------------------------------------------------------------------------

def test_detach_shares_data_and_version():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    d = h.detach()
    assert not d.requires_grad and d.is_leaf and np.shares_memory(d.array, h.array)
    y = (h * h).sum()
    d.add_(1)
    assert h._version == 1
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


def test_detach_inplace_makes_a_leaf():
    for lib in (fs, torch):
        x = lib.tensor([1.0], requires_grad=True)
        h = x * 2
        h.detach_()
        assert (h.requires_grad, h.is_leaf, h.grad_fn) == (False, True, None)


def test_requires_grad_():
    for lib in (fs, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        assert w.requires_grad_(False) is w and not (w * 3).requires_grad
        assert w.requires_grad_() is w and (w * 3).requires_grad
        h = w * 3
        assert h.requires_grad_(True) is h       # allowed on a non-leaf that requires grad
        with pytest.raises(RuntimeError, match='you can only change requires_grad flags of leaf variables.'):
            h.requires_grad_(False)


def test_integer_tensors_cannot_require_grad():
    for make in (lambda lib: lib.tensor([1, 2], requires_grad=True),
                 lambda lib: lib.arange(3).requires_grad_(),
                 lambda lib: lib.zeros(2, dtype=lib.int64, requires_grad=True)):
        with pytest.raises(RuntimeError, match='(?i)only Tensors of floating point'):
            make(torch)
        with pytest.raises(RuntimeError, match='Only Tensors of floating point and complex dtype can require gradients'):
            make(fs)


# ---------------------------------------------------------------------------------------------------------
# In-place changes and the version counter
# ---------------------------------------------------------------------------------------------------------

def in_place_program(lib):
    x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    h = x * 2
    v = [h._version]
    h.mul_(w)
    h += 1
    h.sub_(x, alpha=0.5)
    h.div_(3.0)
    v.append(h._version)
    (h * h).sum().backward()
    return v, x.grad.tolist(), w.grad.tolist()


def test_in_place_recorded_like_torch():
    ours, theirs = in_place_program(fs), in_place_program(torch)
    assert ours[0] == theirs[0]
    close(ours[1:], theirs[1:])


def test_in_place_on_saved_tensor_raises():
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2                   # saves only the constant 2
        y = h.sum()
        h.mul_(2)
        y.backward()                # nothing saved was changed: fine
        z = x.exp()
        k = (z * z).sum()
        z.add_(1)
        with pytest.raises(RuntimeError, match='one of the variables needed for gradient computation has been '
                                               'modified by an inplace operation'):
            k.backward()


def test_in_place_on_leaf_requiring_grad():
    for lib in (fs, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match='a leaf Variable that requires grad is being used in an in-place '
                                               'operation.'):
            w.add_(1)
        with lib.no_grad():
            w -= 0.5
            w.mul_(2)
        assert w.is_leaf and w.requires_grad and w._version == 2 and w.tolist() == [1.0, 3.0]


def test_in_place_makes_a_tensor_require_grad():
    for lib in (fs, torch):
        a = lib.zeros(2)
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        a.add_(w * 3)
        a.sum().backward()
        assert not a.is_leaf and w.grad.tolist() == [3.0, 3.0]


# ---------------------------------------------------------------------------------------------------------
# Python control flow
# ---------------------------------------------------------------------------------------------------------

def control_flow(x):
    y, steps = x * 2, 0
    while (y * y).sum().sqrt().item() < 50:
        y = y * 2 if steps % 2 else y.tanh() * 3 + y
        steps += 1
    if y.sum().item() > 0: return y.exp().sum() / 1e3, steps
    return (y * y).mean(), steps


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float64, 3, elements=st.floats(-2, 2).filter(lambda v: abs(v) > 0.05)))
def test_control_flow_gradients(xs):
    x, tx = pair(xs)
    y, steps = control_flow(x)
    ty, tsteps = control_flow(tx)
    assert steps == tsteps
    y.backward(); ty.backward()
    close(x.grad, tx.grad, rtol=1e-9)


# ---------------------------------------------------------------------------------------------------------
# Custom Functions: PyTorch's contract
# ---------------------------------------------------------------------------------------------------------

def make_contract(lib, record):
    class Contract(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, k):
            ctx.save_for_backward(x, w)
            ctx.k = k
            out = x * w * k
            index = out.argmax()
            ctx.mark_non_differentiable(index)
            return out, index
        @staticmethod
        def backward(ctx, grad_out, grad_index):
            record.append(tuple(ctx.needs_input_grad))
            x, w = ctx.saved_tensors
            return (grad_out * w * ctx.k if ctx.needs_input_grad[0] else None,
                    grad_out * x * ctx.k if ctx.needs_input_grad[1] else None, None)
    return Contract


@pytest.mark.parametrize('needs', [(True, True), (True, False), (False, True)])
def test_custom_function_contract(needs):
    res = []
    for lib in (fs, torch):
        record = []
        x = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=needs[0])
        w = lib.tensor([0.5, 0.5, 2.0], dtype=lib.float64, requires_grad=needs[1])
        out, index = make_contract(lib, record).apply(x, w, 2.0)
        assert out.requires_grad and not index.requires_grad and index.item() == 2
        out.sum().backward()
        res.append((record, x.grad, w.grad, type(out.grad_fn).__name__ if lib is torch else out.grad_fn.name()))
    assert res[0][0] == res[1][0] == [needs + (False,)]
    close(res[0][1:3], res[1][1:3])
    assert res[0][3] == res[1][3] == 'ContractBackward'


def test_custom_function_next_functions():
    MyMul = FS_FNS[0]
    x = fs.tensor([1.0], requires_grad=True)
    y = MyMul.apply(x, fs.tensor([2.0]))
    (acc, nr), (none, _) = y.grad_fn.next_functions
    assert acc.name() == 'AccumulateGrad' and acc.variable is x and none is None


def test_custom_function_broadcast_gradient_is_summed():
    class BroadcastGrad(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(np.broadcast_to(a.array, (4, 3)).copy())
        @staticmethod
        def backward(ctx, g): return g           # shape (4, 3) for an input of shape (3,)
    x = fs.tensor([1.0, 2.0, 3.0], requires_grad=True)
    BroadcastGrad.apply(x).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0]


def test_custom_function_gradient_dtype_is_cast():
    class Float64Grad(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(a.array * 2)
        @staticmethod
        def backward(ctx, g): return Tensor(np.full(g.shape, 2.0))
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    Float64Grad.apply(x).sum().backward()
    assert x.grad.dtype == fs.float32


def test_custom_function_returning_an_input_gives_a_new_tensor():
    class Identity(Function):
        @staticmethod
        def forward(ctx, a): return a
        @staticmethod
        def backward(ctx, g): return g * 3
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


# ---------------------------------------------------------------------------------------------------------
# gradcheck and gradgradcheck
# ---------------------------------------------------------------------------------------------------------

def away(*shape, seed=0):
    r = np.random.default_rng(seed)
    return fs.tensor(r.uniform(0.5, 1.5, shape) * r.choice([-1, 1], shape), requires_grad=True)


def positive(*shape, seed=1):
    return fs.tensor(np.random.default_rng(seed).uniform(0.5, 2.0, shape), requires_grad=True)


A, B, M, P, V3 = away(2, 3), away(2, 3, seed=2), away(3, 4, seed=3), positive(2, 3), away(3, seed=4)
OPS = {
    'add': (lambda a, b: a + b, (A, B)), 'sub': (lambda a, b: a - b, (A, B)), 'mul': (lambda a, b: a * b, (A, B)),
    'div': (lambda a, b: a / b, (A, B)), 'neg': (lambda a: -a, (A,)), 'pow_tensor': (lambda p, b: p ** b, (P, B)),
    'pow_int': (lambda a: a ** 3, (A,)), 'rpow': (lambda a: 2 ** a, (A,)), 'pow_frac': (lambda p: p ** 1.5, (P,)),
    'broadcast': (lambda a, v: a * v + v - a / v, (A, V3)), 'scalar_ops': (lambda a: 3 - a * 2 + 1 / a, (A,)),
    'matmul': (lambda a, m: a @ m, (A, M)), 'vecmat': (lambda v, m: v @ m, (V3, M)),
    'matvec': (lambda a, v: a @ v, (A, V3)), 'vecvec': (lambda v: v @ v, (V3,)),
    'batched_matmul': (lambda m, a: m.reshape(2, 2, 3) @ a.T, (M, A)),
    'sum': (lambda a: a.sum(), (A,)), 'sum_dim': (lambda a: a.sum(dim=1), (A,)),
    'sum_keepdim': (lambda a: a.sum(dim=(0, 1), keepdim=True), (A,)), 'mean': (lambda a: a.mean(dim=0), (A,)),
    'max': (lambda a: a.max(), (A,)), 'max_dim': (lambda a: a.max(dim=1).values, (A,)),
    'min_dim_keepdim': (lambda a: a.min(dim=0, keepdim=True).values, (A,)), 'min': (lambda a: a.min(), (A,)),
    'exp': (lambda a: a.exp(), (A,)), 'log': (lambda p: p.log(), (P,)), 'sqrt': (lambda p: p.sqrt(), (P,)),
    'abs': (lambda a: a.abs(), (A,)), 'relu': (lambda a: a.relu(), (A,)), 'sigmoid': (lambda a: a.sigmoid(), (A,)),
    'tanh': (lambda a: a.tanh(), (A,)), 'clamp': (lambda a: a.clamp(-1.0, 1.0), (A,)),
    'clamp_min': (lambda a: a.clamp_min(0.0), (A,)), 'maximum': (lambda a, b: fs.maximum(a, b), (A, B)),
    'minimum': (lambda a, b: fs.minimum(a, b), (A, B)),
    'reshape': (lambda a: a.reshape(3, 2), (A,)), 'view': (lambda a: a.view(6), (A,)), 'T': (lambda a: a.T, (A,)),
    'transpose': (lambda m: m.reshape(2, 3, 2).transpose(0, 2), (M,)), 'permute': (lambda m: m.reshape(3, 2, 2).permute(2, 0, 1), (M,)),
    'unsqueeze_squeeze': (lambda a: a.unsqueeze(0).squeeze(0) * a.unsqueeze(1), (A,)),
    'expand': (lambda v: v.reshape(3, 1).expand(3, 4), (V3,)), 'flatten': (lambda m: m.flatten(), (M,)),
    'index_int': (lambda a: a[1], (A,)), 'index_slice': (lambda a: a[:, 1:], (A,)),
    'index_none_ellipsis': (lambda a: a[None, ..., 0], (A,)),
    'index_repeats': (lambda a: a[fs.tensor([0, 0, 1])], (A,)),
    'index_mask': (lambda a: a[fs.tensor(a.detach().numpy() > 0)], (A,)),
    'softmax': (lambda a: a.softmax(-1), (A,)), 'log_softmax': (lambda a: a.log_softmax(0), (A,)),
    'where': (lambda a, b: fs.where(a > 0, a, b), (A, B)), 'clone': (lambda a: a.clone(), (A,)),
}
OPS.update({
    'cat': (lambda a, b: fs.cat([a, b], dim=1), (A, B)), 'stack': (lambda a, b: fs.stack([a, b], dim=2), (A, B)),
    'einsum': (lambda a, m: fs.einsum('ij,jk->ik', a, m), (A, M)), 'einsum_trace': (lambda m: fs.einsum('ii->', m[:, :3]), (M,)),
    'var': (lambda a, b: a.var(dim=1) + b.var(), (A, B)), 'std': (lambda a: a.std(dim=0), (A,)),
    'norm': (lambda a: a.norm(), (A,)), 'logsumexp': (lambda a: a.logsumexp(1), (A,)),
    'setitem': (lambda a, b: _setitem_copy(a, b), (A, B)),
})


def _setitem_copy(a, b):
    h = a * 1
    h[0, 1:] = b[1, :2] * 3
    return h


@pytest.mark.parametrize('name', list(OPS))
def test_gradcheck_every_op(name):
    f, args = OPS[name]
    assert autograd.gradcheck(f, args)


@pytest.mark.parametrize('name', list(OPS))
def test_gradgradcheck_every_op(name):
    f, args = OPS[name]
    assert autograd.gradgradcheck(f, args)


def make_wrong(lib):
    "A Function whose backward is wrong for its second input only."
    class WrongSecond(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b * b
        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b * b, g * a * b       # the second should be 2 * g * a * b
    return WrongSecond


def test_gradcheck_catches_a_wrong_function_and_names_the_input():
    a, ta = pair([1.0, 2.0])
    b, tb = pair([3.0, -4.0])
    with pytest.raises(autograd.GradcheckError, match=r'Jacobian mismatch for output 0 with respect to input 1') as e:
        autograd.gradcheck(make_wrong(fs).apply, (a, b))
    assert isinstance(e.value, RuntimeError)
    msg = str(e.value)
    # the worst element: d out[1] / d b[1] = 2ab = -16 numerically, ab = -8 analytically
    assert 'd output[1] / d input[1] is -16 numerically but -8 analytically' in msg
    assert autograd.gradcheck(make_wrong(fs).apply, (a, b), raise_exception=False) is False
    assert torch.autograd.gradcheck(make_wrong(torch).apply, (ta, tb), raise_exception=False) is False


def test_gradcheck_agrees_with_torch_on_good_functions():
    rng = np.random.default_rng(5)
    a, ta = pair(rng.standard_normal((2, 3)))
    for f in (lambda t: (t @ t.T).tanh(), lambda t: t.softmax(1) * t, lambda t: (t * t).sum(dim=0).sqrt()):
        assert autograd.gradcheck(f, a) and torch.autograd.gradcheck(f, ta)
        assert autograd.gradgradcheck(f, a) and torch.autograd.gradgradcheck(f, ta)


def test_gradcheck_jacobians_match_torch():
    rng = np.random.default_rng(6)
    x, tx = pair(rng.standard_normal(3))
    w, tw = pair(rng.standard_normal((3, 2)))
    f = lambda x, w: (x @ w).sigmoid()
    ja = autograd.analytical_jacobian(f, (x, w))
    jn = autograd.numerical_jacobian(f, (x, w))
    tj = torch.autograd.functional.jacobian(f, (tx, tw))
    for k, t in enumerate(tj):
        close(ja[0][k], t.reshape(2, -1))
        close(jn[0][k], t.reshape(2, -1), rtol=1e-6, atol=1e-8)


def test_gradcheck_catches_an_output_cut_from_the_graph():
    class Detached(Function):
        @staticmethod
        def forward(ctx, a):
            out = Tensor(a.array * 2)
            ctx.mark_non_differentiable(out)
            return out
        @staticmethod
        def backward(ctx, g): return None
    x = fs.tensor([1.0, 2.0], dtype=fs.float64, requires_grad=True)
    assert autograd.gradcheck(Detached.apply, x, raise_exception=False) is False


def test_gradcheck_multiple_outputs_and_integer_outputs():
    x = fs.tensor([1.0, -2.0, 3.0], dtype=fs.float64, requires_grad=True)
    assert autograd.gradcheck(lambda t: (t.exp(), t.argmax(), t * t), x)
    assert autograd.gradcheck(lambda t: t.max(dim=0), x)


def test_gradcheck_input_checks():
    x32 = fs.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match='Input #0 requires gradient and is not a double precision floating point'):
        autograd.gradcheck(lambda t: t * 2, x32, raise_exception=False)
    with pytest.raises(ValueError, match='gradcheck expects at least one input tensor to require gradient'):
        autograd.gradcheck(lambda t: t * 2, fs.tensor([1.0], dtype=fs.float64))
    with fs.no_grad(): e = fs.tensor([1.0], dtype=fs.float64).expand(3)
    e.requires_grad_()
    with pytest.raises(RuntimeError, match='has a dimension with stride 0'):
        autograd.gradcheck(lambda t: t * 2, e)


def test_gradcheck_restores_inputs():
    x = fs.tensor([1.0, 2.0, 3.0], dtype=fs.float64, requires_grad=True)
    before = x.detach().numpy().copy()
    autograd.gradcheck(lambda t: t.exp(), x)
    assert np.array_equal(x.detach().numpy(), before) and x.grad is None


def test_gradgradcheck_catches_a_wrong_second_derivative():
    class FirstOnly(Function):     # backward right, but computed on raw arrays: the second derivative is lost
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return Tensor(a.array ** 3)
        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * Tensor(3 * a.array ** 2)
    x = fs.tensor([1.0, 2.0], dtype=fs.float64, requires_grad=True)
    assert autograd.gradcheck(FirstOnly.apply, x)
    assert autograd.gradgradcheck(FirstOnly.apply, x, raise_exception=False) is False


# ---------------------------------------------------------------------------------------------------------
# Every row of COURSE.md's error table
# ---------------------------------------------------------------------------------------------------------

def second_backward(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def saved_changed(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = (h * h).sum()
    h.add_(1)
    y.backward()


def unused(lib):
    x, w = lib.tensor([1.0], requires_grad=True), lib.tensor([1.0], requires_grad=True)
    lib.autograd.grad((x * 2).sum(), [x, w])


def make_bad(lib):
    class TwoInputs(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y): return x * 2
        @staticmethod
        def backward(ctx, g): return g
    class WrongShape(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
        @staticmethod
        def backward(ctx, g): return lib.ones(5)
    return TwoInputs, WrongShape


ERRORS = [
    ('no_grad_backward', lambda lib: lib.ones(2).sum().backward(),
     'element 0 of tensors does not require grad and does not have a grad_fn'),
    ('no_grad_backward_element_1', lambda lib: lib.autograd.backward([lib.ones(1, requires_grad=True) * 2, lib.ones(1)]),
     'element 1 of tensors does not require grad and does not have a grad_fn'),
    ('non_scalar', lambda lib: (lib.ones(2, requires_grad=True) * 2).backward(),
     'grad can be implicitly created only for scalar outputs'),
    ('second_backward', second_backward,
     r'Trying to backward through the graph a second time.*Specify retain_graph=True'),
    ('saved_changed', saved_changed,
     'one of the variables needed for gradient computation has been modified by an inplace operation'),
    ('leaf_in_place', lambda lib: lib.ones(2, requires_grad=True).add_(1),
     re.escape('a leaf Variable that requires grad is being used in an in-place operation.')),
    ('numpy', lambda lib: lib.ones(2, requires_grad=True).numpy(),
     re.escape("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")),
    ('integer', lambda lib: lib.tensor([1, 2], requires_grad=True),
     'Only Tensors of floating point and complex dtype can require gradients'),
    ('requires_grad_non_leaf', lambda lib: (lib.ones(2, requires_grad=True) * 2).requires_grad_(False),
     re.escape('you can only change requires_grad flags of leaf variables.')),
    ('hook_no_grad', lambda lib: lib.ones(2).register_hook(lambda g: g),
     "cannot register a hook on a tensor that doesn't require gradient"),
    ('wrong_gradient_shape', lambda lib: (lib.ones(2, requires_grad=True) * 2).backward(lib.ones(3)),
     r'Mismatch in shape: grad_output\[0\] has a shape of \w+\.Size\(\[3\]\) and output\[0\] has a shape of '
     r'\w+\.Size\(\[2\]\)'),
    ('unused_input', unused,
     re.escape('appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.')),
    ('wrong_count', lambda lib: make_bad(lib)[0].apply(lib.ones(3, requires_grad=True), lib.ones(3)).sum().backward(),
     re.escape('returned an incorrect number of gradients (expected 2, got 1)')),
    ('wrong_shape', lambda lib: make_bad(lib)[1].apply(lib.ones(3, requires_grad=True)).sum().backward(),
     re.escape('returned an invalid gradient at index 0 - got [5] but expected shape compatible with [3]')),
    ('matmul_shapes', lambda lib: lib.ones(2, 3) @ lib.ones(2, 3), re.escape('(2x3 and 2x3)')),
    ('broadcast_shapes', lambda lib: lib.ones(2, 3) + lib.ones(4),
     re.escape('The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1')),
]


@pytest.mark.parametrize('name,f,pattern', ERRORS, ids=[e[0] for e in ERRORS])
def test_error_table_row(name, f, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        f(torch)                        # the wording is PyTorch's...
    with pytest.raises(RuntimeError, match=pattern):
        f(fs)                           # ...and ours


def test_other_argument_errors():
    x = fs.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape('`inputs` argument to `backward()` cannot be empty.')):
        (x * 2).sum().backward(inputs=[])
    with pytest.raises(RuntimeError, match='One of the differentiated Tensors does not require grad'):
        autograd.grad((x * 2).sum(), fs.ones(1))
    with pytest.raises(RuntimeError, match=re.escape("attempting to assign a gradient of size '[3]' to a tensor of "
                                                     "size '[1]'")):
        x.grad = fs.ones(3)


# ---------------------------------------------------------------------------------------------------------
# Leaf .grad: never shared, always writable, stolen when nothing else holds it
# ---------------------------------------------------------------------------------------------------------

def unshared(*grads):
    arrays = [g.array for g in grads]
    for i in range(len(arrays)):
        assert arrays[i].flags.writeable
        for j in range(i + 1, len(arrays)):
            assert grads[i] is not grads[j] and not np.shares_memory(arrays[i], arrays[j])


def test_pass_through_gradient_is_not_shared_between_leaves():
    MyAdd = FS_FNS[1]
    x, y = fs.tensor([1.0, 2.0], requires_grad=True), fs.tensor([3.0, 4.0], requires_grad=True)
    MyAdd.apply(x, y).sum().backward()
    unshared(x.grad, y.grad)
    x.grad.add_(1)
    assert y.grad.tolist() == [1.0, 1.0]
    z = fs.tensor([1.0, 2.0], requires_grad=True)
    (x + y + z).sum().backward()
    unshared(x.grad, y.grad, z.grad)


def test_same_array_in_two_tensors_is_not_shared():
    class SameArray(Function):
        @staticmethod
        def forward(ctx, a, b): return Tensor(a.array + b.array)
        @staticmethod
        def backward(ctx, g):
            a = g.array * 1                      # a fresh, writable array, wrapped twice
            return Tensor(a), Tensor(a)
    x, y = fs.tensor([1.0], requires_grad=True), fs.tensor([2.0], requires_grad=True)
    SameArray.apply(x, y).sum().backward()
    unshared(x.grad, y.grad)


def test_gradient_kept_by_a_hook_is_not_changed_later():
    for lib in (fs, torch):
        kept = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda g: kept.append(g))
        (x * 3).sum().backward()
        (x * 3).sum().backward()
        x.grad.mul_(0)
        assert [k.tolist() for k in kept] == [[3.0, 3.0], [3.0, 3.0]]


def test_gradient_kept_by_a_non_leaf_hook_is_not_changed_later():
    MyAdd = FS_FNS[1]
    for order in (0, 1):
        kept = []
        x, w = fs.tensor([1.0, 2.0], requires_grad=True), fs.tensor([1.0, 2.0], requires_grad=True)
        h = w * 1
        h.register_hook(lambda g: kept.append(g))
        s = (MyAdd.apply(x, h) if order else MyAdd.apply(h, x)) * 2   # a fresh gradient, sent to x and to h
        s.sum().backward()
        x.grad.add_(5)
        assert kept[0].tolist() == [2.0, 2.0] and w.grad.tolist() == [2.0, 2.0]


def test_seed_gradient_is_not_changed_by_accumulation():
    g = fs.tensor([1.0, 1.0])
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    x.backward(g)
    x.backward(g)
    assert g.tolist() == [1.0, 1.0] and x.grad.tolist() == [2.0, 2.0]
    y = fs.tensor([1.0, 2.0], requires_grad=True)
    (y * 1).backward(g)
    y.grad.zero_()
    assert g.tolist() == [1.0, 1.0]


def test_seed_passed_on_unchanged_is_copied():
    g = fs.tensor([1.0, 1.0])
    for f in (lambda y: y + 0, lambda y: y.clone()):     # backwards that return grad_output itself
        y = fs.tensor([1.0, 2.0], requires_grad=True)
        f(y).backward(g)
        assert not np.shares_memory(y.grad.array, g.array)
        y.grad.add_(1)
        assert g.tolist() == [1.0, 1.0]


def test_gradient_that_is_a_saved_tensor_is_copied():
    class ReturnsSavedTensor(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(b)
            return Tensor(a.array * b.array)
        @staticmethod
        def backward(ctx, g):
            b, = ctx.saved_tensors
            return b, None                       # g * b, for the all-ones g that .sum() sends
    x, w = fs.tensor([1.0, 2.0], requires_grad=True), fs.tensor([3.0, 4.0])
    ReturnsSavedTensor.apply(x, w).sum().backward()
    assert not np.shares_memory(x.grad.array, w.array)
    x.grad.add_(1)
    assert w.tolist() == [3.0, 4.0] and x.grad.tolist() == [4.0, 5.0]


def test_gradient_saved_by_a_function_is_not_changed():
    class ReturnsSaved(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.const = Tensor(np.full(a.shape, 5.0, dtype=a.dtype))
            return Tensor(a.array * 5)
        @staticmethod
        def backward(ctx, g): return ctx.const
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    y = ReturnsSaved.apply(x)
    y.sum().backward(retain_graph=True)
    x.grad.add_(1)
    assert y.grad_fn.const.tolist() == [5.0, 5.0]


def test_read_only_gradient_is_copied():
    class ReadOnly(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(a.array.sum(keepdims=False).reshape(()))
        @staticmethod
        def backward(ctx, g): return Tensor(np.broadcast_to(g.array, (3,)))
    x = fs.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ReadOnly.apply(x).backward()
    assert x.grad.array.flags.writeable
    x.grad.add_(1)


def test_fresh_gradient_is_stolen_not_copied():
    made = []
    class Fresh(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(a.array * 2)
        @staticmethod
        def backward(ctx, g):
            out = Tensor(g.array * 2)
            made.append(id(out.array))
            return out
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    Fresh.apply(x).sum().backward()
    assert id(x.grad.array) == made[0]


def test_reference_to_grad_sees_later_accumulation():
    for lib in (fs, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.grad = lib.zeros(2)
        ref = x.grad
        (x * 2).sum().backward()
        assert ref is x.grad and ref.tolist() == [2.0, 2.0]


def test_create_graph_grads_not_shared_between_leaves():
    x, y = fs.tensor([1.0, 2.0], requires_grad=True), fs.tensor([3.0, 4.0], requires_grad=True)
    ((x + y) * (x + y)).sum().backward(create_graph=True)
    assert x.grad is not y.grad and x.grad.grad_fn is not None
    close(x.grad, 2 * (x.detach().numpy() + y.detach().numpy()))


def test_grad_assignment():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    x.grad = fs.tensor([5.0, 5.0])
    (x * 1).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    x.grad = None
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------------------------------------------
# In-place changes through a view (PyTorch's CopySlices)
# ---------------------------------------------------------------------------------------------------------

from fromscratch.core import make_view   # noqa: E402
from fromscratch.ops import write_inplace   # noqa: E402


class Narrow(Function):
    "a[start:stop] as a view, recorded with make_view (an engine-level view op of our own)."
    @staticmethod
    def forward(ctx, a, start, stop):
        ctx.shape, ctx.start, ctx.stop = a.shape, start, stop
        return make_view(Tensor(a.array[start:stop]), a, lambda t: Narrow.apply(t, start, stop))
    @staticmethod
    def backward(ctx, g): return Pad.apply(g, ctx.shape, ctx.start, ctx.stop), None, None


class Pad(Function):
    "Zeros of `shape` with `g` at [start:stop]: Narrow's backward, differentiable in turn."
    @staticmethod
    def forward(ctx, g, shape, start, stop):
        ctx.start, ctx.stop = start, stop
        out = np.zeros(shape, dtype=g.dtype)
        out[start:stop] = g.array
        return Tensor(out)
    @staticmethod
    def backward(ctx, gg): return Narrow.apply(gg, ctx.start, ctx.stop), None, None, None


def test_in_place_through_a_view_rewrites_the_base_history():
    x, tx = pair([1.0, 2.0, 3.0, 4.0, 5.0])
    w, tw = pair([0.5, -2.0])
    h = x * 1
    v = Narrow.apply(h, 1, 3)
    write_inplace(v, v.clone() * w)          # like mul_: save a copy of the old value, not the view
    ((h * h).sum() + (v * 3).sum()).backward()
    th = tx * 1
    tv = th[1:3]
    tv.mul_(tw)
    ((th * th).sum() + (tv * 3).sum()).backward()
    close(h, th); close(x.grad, tx.grad); close(w.grad, tw.grad)
    assert h.grad_fn.name() == 'CopySlices' and h._version == v._version == 1


def test_in_place_through_a_view_of_a_view():
    x, tx = pair([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    h = x.exp()
    h = h * 1
    v = Narrow.apply(Narrow.apply(h, 1, 5), 1, 3)       # elements 2 and 3 of h
    write_inplace(v, v * 10)
    (h * h).sum().backward()
    th = tx.exp() * 1
    th[1:5][1:3].mul_(10)
    (th * th).sum().backward()
    close(x.grad, tx.grad)


def test_in_place_through_a_view_gives_the_base_a_history():
    w, tw = pair([2.0, 3.0])
    a, ta = fs.zeros(4, dtype=fs.float64), torch.zeros(4, dtype=torch.float64)
    v = Narrow.apply(a, 1, 3)
    write_inplace(v, v + w)
    ta[1:3].add_(tw)
    assert a.requires_grad and ta.requires_grad and not a.is_leaf
    (a * fs.tensor([1.0, 2.0, 3.0, 4.0], dtype=fs.float64)).sum().backward()
    (ta * torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)).sum().backward()
    close(w.grad, tw.grad)


def test_in_place_through_a_view_second_order():
    x, tx = pair([0.5, -1.0, 2.0])
    h = x * 1
    v = Narrow.apply(h, 0, 2)
    write_inplace(v, v.clone() * x[:2])
    g, = autograd.grad((h * h * h).sum(), x, create_graph=True)
    th = tx * 1
    th[0:2].mul_(tx[:2])
    tg, = torch.autograd.grad((th * th * th).sum(), tx, create_graph=True)
    close(g, tg)
    close(autograd.grad(g.sum(), x), torch.autograd.grad(tg.sum(), tx))


def test_in_place_through_a_view_of_a_leaf_raises():
    w = fs.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = Narrow.apply(w, 0, 2)
    with pytest.raises(RuntimeError, match=re.escape('a view of a leaf Variable that requires grad is being used in '
                                                     'an in-place operation.')):
        write_inplace(v, v * 2)
    with pytest.raises(RuntimeError, match='a view of a leaf Variable that requires grad'):
        torch.tensor([1.0, 2.0, 3.0], requires_grad=True)[0:2].mul_(2)
    with fs.no_grad(): write_inplace(v, v * 2)               # allowed when nothing is recorded
    assert w.tolist() == [2.0, 4.0, 3.0]


@pytest.mark.parametrize('case', ['slice', 'int_index', 'reshape', 'transpose', 'nested'])
def test_in_place_through_a_view_of_ops(case):
    def run(lib, x, w):
        h = x * 1
        if case == 'slice': h[1:3].mul_(w)
        elif case == 'int_index': h[2].mul_(w[0])
        elif case == 'reshape': h.view(2, 3)[1] += w[0]
        elif case == 'transpose': h.reshape(2, 3).t()[0].mul_(w)
        else: h[1:5][1:3].mul_(w)
        (h * h).sum().backward()
    x, tx = pair([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    w, tw = pair([0.5, -2.0])
    run(fs, x, w); run(torch, tx, tw)
    close(x.grad, tx.grad); close(w.grad, tw.grad)


def test_leaf_grad_is_contiguous_like_torch():
    class Transposed(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(a.array * 2)
        @staticmethod
        def backward(ctx, g): return Tensor(np.ascontiguousarray(g.array.T).T * 2)   # fresh, but column-major
    w = fs.tensor(np.ones((3, 4)), requires_grad=True)
    Transposed.apply(w).sum().backward()
    assert w.grad.array.flags.c_contiguous and w.grad.view(-1).shape == (12,)
    tw = torch.ones(3, 4, requires_grad=True)
    (tw @ torch.ones(4, 4)).T.sum().backward()
    assert tw.grad.is_contiguous()
