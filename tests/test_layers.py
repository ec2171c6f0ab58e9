"""fromscratch.lessons.layers: every manual gradient against torch autograd in float64, the `LayerFunction` versions
against the hand-written ones, and `Module` registration against `torch.nn.Module`."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from torch import nn

from fromscratch.lessons.layers import (Lin, LinLayer, LinModule, LayerFunction, Mlp, Model, Module, Mse, MseLayer, Param,
                                Relu, ReluLayer, copy_from_torch)
from fromscratch.testing import check_close

RTOL = 1e-10
SETTINGS = settings(max_examples=40, deadline=None)
dims = st.integers(1, 7)


def torch_backward(f, inputs, grad_output=1.0):
    "Gradients of float64 torch copies of `inputs` after `f(*inputs).backward(grad_output)`."
    ts = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in inputs]
    f(*ts).backward(torch.tensor(grad_output, dtype=torch.float64))
    return [t.grad for t in ts]


def randn(rng, *shape): return rng.standard_normal(shape)


# ---------------------------------------------------------------- hand-written layers against torch

@SETTINGS
@given(st.lists(dims, min_size=1, max_size=4), st.integers(0, 2**32 - 1))
def test_relu_forward_and_backward(shape, seed):
    rng = np.random.default_rng(seed)
    x = randn(rng, *shape)
    x.flat[::3] = 0.0                                      # relu'(0) = 0, as in torch
    g = randn(rng, *shape)
    relu = Relu()
    check_close(relu(x), torch.relu(torch.tensor(x)), rtol=0, atol=0, name='relu')
    check_close(relu.backward(g), torch_backward(torch.relu, [x], g)[0], rtol=RTOL, name='relu grad')


@SETTINGS
@given(dims, dims, dims, st.integers(0, 2**32 - 1))
def test_lin_grads(n, n_in, n_out, seed):
    rng = np.random.default_rng(seed)
    x, w, b, g = randn(rng, n, n_in), randn(rng, n_in, n_out), randn(rng, n_out), randn(rng, n, n_out)
    lin = Lin(w, b)
    check_close(lin(x), torch.tensor(x) @ torch.tensor(w) + torch.tensor(b), rtol=RTOL, name='lin')
    x_grad = lin.backward(g)
    tx, tw, tb = torch_backward(lambda x, w, b: x @ w + b, [x, w, b], g)
    check_close(x_grad, tx, rtol=RTOL, name='x')
    check_close(lin.w_grad, tw, rtol=RTOL, name='w')
    check_close(lin.b_grad, tb, rtol=RTOL, name='b')


@SETTINGS
@given(dims, dims, st.booleans(), st.floats(-3, 3), st.integers(0, 2**32 - 1))
def test_mse_value_and_grad(n, k, flat_targets, grad_output, seed):
    rng = np.random.default_rng(seed)
    if flat_targets: out, targ = randn(rng, n, 1), randn(rng, n)          # the model's (n, 1) against (n,)
    else: out, targ = randn(rng, n, k), randn(rng, n, k)
    ttarg = torch.tensor(targ).reshape(out.shape)
    mse = Mse()
    check_close(mse(out, targ), F.mse_loss(torch.tensor(out), ttarg), rtol=1e-12, name='mse')
    tg, = torch_backward(lambda o: F.mse_loss(o, ttarg), [out], grad_output)
    check_close(mse.backward(grad_output), tg, rtol=RTOL, atol=1e-12, name='mse grad')


def test_mse_backward_defaults_to_one():
    rng = np.random.default_rng(0)
    out, targ = randn(rng, 5, 1), randn(rng, 5)
    mse = Mse(); mse(out, targ)
    tg, = torch_backward(lambda o: F.mse_loss(o.squeeze(-1), torch.tensor(targ)), [out])
    check_close(mse.backward(), tg, rtol=RTOL)


def test_mse_rejects_targets_of_another_size():
    with pytest.raises(ValueError, match='cannot reshape'): Mse()(np.zeros((4, 1)), np.zeros(5))


def make_mlp(rng, sizes):
    "Weights and biases for a stack of linear layers with the given sizes, Kaiming-scaled."
    return [(randn(rng, i, o) * np.sqrt(2 / i), randn(rng, o) * 0.1) for i, o in zip(sizes[:-1], sizes[1:])]


def torch_stack(params, targ):
    "A function of (x, w1, b1, w2, b2, ...) running the same linear/ReLU stack and MSE in torch."
    def f(x, *wb):
        for i in range(0, len(wb), 2):
            x = x @ wb[i] + wb[i + 1]
            if i + 2 < len(wb): x = torch.relu(x)
        return F.mse_loss(x, torch.tensor(targ).reshape(x.shape))
    return f


@SETTINGS
@given(dims, st.lists(dims, min_size=2, max_size=5), st.integers(0, 2**32 - 1), st.booleans())
def test_model_gradients_match_autograd(n, sizes, seed, use_layer_function):
    rng = np.random.default_rng(seed)
    params = make_mlp(rng, sizes)
    x = randn(rng, n, sizes[0])
    targ = randn(rng, n) if sizes[-1] == 1 else randn(rng, n, sizes[-1])
    lin, relu, loss = (LinLayer, ReluLayer, MseLayer) if use_layer_function else (Lin, Relu, Mse)
    layers = []
    for i, (w, b) in enumerate(params):
        layers.append(lin(w, b))
        if i < len(params) - 1: layers.append(relu())
    model = Model(layers, loss())
    flat = [a for wb in params for a in wb]
    check_close(model(x, targ), torch_stack(params, targ)(*map(torch.tensor, [x, *flat])), rtol=1e-12, name='loss')
    x_grad = model.backward()
    tgrads = torch_backward(torch_stack(params, targ), [x, *flat])
    check_close(x_grad, tgrads[0], rtol=RTOL, atol=1e-13, name='x')
    lins = [l for l in layers if isinstance(l, lin)]
    for i, l in enumerate(lins):
        check_close(l.w_grad, tgrads[1 + 2 * i], rtol=RTOL, atol=1e-13, name=f'w{i + 1}')
        check_close(l.b_grad, tgrads[2 + 2 * i], rtol=RTOL, atol=1e-13, name=f'b{i + 1}')


def test_model_backward_runs_layers_in_reverse():
    calls = []
    class Spy:
        def __init__(self, name): self.name = name
        def __call__(self, x, *args): calls.append(('forward', self.name)); return x
        def backward(self, g=1.0): calls.append(('backward', self.name)); return g
    model = Model([Spy('a'), Spy('b'), Spy('c')], Spy('loss'))
    model(np.zeros(1), np.zeros(1)); model.backward()
    assert calls == [('forward', 'a'), ('forward', 'b'), ('forward', 'c'), ('forward', 'loss'),
                     ('backward', 'loss'), ('backward', 'c'), ('backward', 'b'), ('backward', 'a')]


# ---------------------------------------------------------------- LayerFunction versions equal the hand-written ones

@SETTINGS
@given(dims, dims, dims, st.integers(0, 2**32 - 1))
def test_layer_function_versions_equal_hand_written(n, n_in, n_out, seed):
    rng = np.random.default_rng(seed)
    x, w, b, g = randn(rng, n, n_in), randn(rng, n_in, n_out), randn(rng, n_out), randn(rng, n, n_out)
    x[0, 0] = 0.0
    targ = randn(rng, n, n_in)
    for hand, lf, args, grad in ((Relu(), ReluLayer(), (x,), randn(rng, n, n_in)),
                                 (Lin(w, b), LinLayer(w, b), (x,), g), (Mse(), MseLayer(), (x, targ), 0.7)):
        np.testing.assert_array_equal(hand(*args), lf(*args))
        np.testing.assert_array_equal(hand.backward(grad), lf.backward(grad))
    hand, lf = Lin(w, b), LinLayer(w, b)
    hand(x); lf(x); hand.backward(g); lf.backward(g)
    np.testing.assert_array_equal(hand.w_grad, lf.w_grad)
    np.testing.assert_array_equal(hand.b_grad, lf.b_grad)


def test_layer_function_saves_its_arguments():
    x, targ = np.ones((2, 1)), np.zeros(2)
    m = MseLayer(); m(x, targ)
    assert m.args[0] is x and m.args[1] is targ


def test_layer_function_base_needs_forward_and_bwd():
    class Half(LayerFunction): pass
    with pytest.raises(NotImplementedError, match='Half has no forward'): Half()(np.zeros(2))
    h = Half(); h.args = (np.zeros(2),)
    with pytest.raises(NotImplementedError, match='Half has no bwd'): h.backward(np.ones(2))


def test_backward_before_forward_fails():
    with pytest.raises(AttributeError): Lin(np.zeros((2, 2)), np.zeros(2)).backward(np.ones((1, 2)))
    with pytest.raises(AttributeError): LinLayer(np.zeros((2, 2)), np.zeros(2)).backward(np.ones((1, 2)))


# ---------------------------------------------------------------- Param

def test_param_copies_to_float64_and_starts_without_grad():
    a = np.arange(6).reshape(2, 3)
    p = Param(a)
    assert p.data.dtype == np.float64 and p.shape == (2, 3) and p.grad is None
    p.data[0, 0] = 100
    assert a[0, 0] == 0
    assert repr(p) == 'Param(shape=(2, 3))'


# ---------------------------------------------------------------- Module against torch.nn.Module

class TorchMlp(nn.Module):
    def __init__(self, n_in, nh, n_out):
        super().__init__()
        self.lin1, self.relu, self.lin2 = nn.Linear(n_in, nh), nn.ReLU(), nn.Linear(nh, n_out)
    def forward(self, x): return self.lin2(self.relu(self.lin1(x)))


@SETTINGS
@given(dims, dims, dims, dims, st.integers(0, 2**32 - 1))
def test_mlp_module_matches_torch(n, n_in, nh, n_out, seed):
    torch.manual_seed(seed % 2**31)
    theirs = TorchMlp(n_in, nh, n_out).double()
    ours = Mlp(n_in, nh, n_out, rng=np.random.default_rng(seed))
    assert [(k, p.shape) for k, p in ours.named_parameters()] == \
           [(k, tuple(p.shape)) for k, p in theirs.named_parameters()]
    copy_from_torch(ours, theirs)
    rng = np.random.default_rng(seed)
    x, targ = randn(rng, n, n_in), randn(rng, n, n_out)
    tx = torch.tensor(x, requires_grad=True)
    tout = theirs(tx)
    out = ours(x)
    check_close(out, tout, rtol=1e-12, name='output')
    F.mse_loss(tout, torch.tensor(targ)).backward()
    loss = MseLayer()
    loss(out, targ)
    check_close(ours.backward(loss.backward()), tx.grad, rtol=RTOL, atol=1e-13, name='x')
    for (k, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_close(p.grad, tp.grad, rtol=RTOL, atol=1e-13, name=k)


def test_lin_module_default_init_is_torchs_range():
    lin = LinModule(50, 30, rng=np.random.default_rng(0))
    bound = 1 / np.sqrt(50)
    for p in lin.parameters():
        assert np.abs(p.data).max() <= bound and np.abs(p.data).max() > 0.9 * bound
    assert lin.weight.shape == tuple(nn.Linear(50, 30).weight.shape)


def test_lin_module_matches_torch_linear():
    rng = np.random.default_rng(3)
    tl = nn.Linear(4, 3).double()
    ours = LinModule(4, 3); copy_from_torch(ours, tl)
    x, g = randn(rng, 5, 4), randn(rng, 5, 3)
    tx = torch.tensor(x, requires_grad=True)
    tl(tx).backward(torch.tensor(g))
    check_close(ours(x), tl(torch.tensor(x)), rtol=1e-12)
    check_close(ours.backward(g), tx.grad, rtol=RTOL)
    check_close(ours.weight.grad, tl.weight.grad, rtol=RTOL)
    check_close(ours.bias.grad, tl.bias.grad, rtol=RTOL)


# A nested architecture described once and built twice, in ours and in torch.
shapes = st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple)
leaf = st.one_of(st.tuples(st.just('param'), shapes),
                 st.tuples(st.just('linear'), st.tuples(st.integers(1, 3), st.integers(1, 3))),
                 st.tuples(st.just('array'), shapes),
                 st.tuples(st.just('number'), st.floats(-1, 1)))
specs = st.recursive(st.lists(leaf, max_size=4),
                     lambda kids: st.lists(st.one_of(leaf, st.tuples(st.just('sub'), kids)), max_size=4),
                     max_leaves=15)


def build(spec, ours):
    "A module holding the attributes `spec` lists, as ours (`Module`) or torch's (`nn.Module`)."
    m = Module() if ours else nn.Module()
    for i, (kind, arg) in enumerate(spec):
        if kind == 'param': value = Param(np.zeros(arg)) if ours else nn.Parameter(torch.zeros(arg))
        elif kind == 'linear': value = LinModule(*arg) if ours else nn.Linear(*arg)
        elif kind == 'sub': value = build(arg, ours)
        elif kind == 'array': value = np.zeros(arg) if ours else torch.zeros(arg)
        else: value = arg
        setattr(m, f'{kind}{i}', value)
    return m


def names_and_shapes(m):
    return [(k, tuple(p.shape)) for k, p in m.named_parameters()]


@SETTINGS
@given(specs)
def test_nested_registration_matches_torch(spec):
    ours, theirs = build(spec, True), build(spec, False)
    assert names_and_shapes(ours) == names_and_shapes(theirs)
    assert [id(p) for p in ours.parameters()] == [id(p) for _, p in ours.named_parameters()]


def test_own_parameters_come_before_sub_modules():
    m, t = Module(), nn.Module()
    m.first, t.first = LinModule(2, 3), nn.Linear(2, 3)
    m.own, t.own = Param(np.zeros(4)), nn.Parameter(torch.zeros(4))
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in t.named_parameters()] == \
           ['own', 'first.weight', 'first.bias']


def test_reassigning_a_param_replaces_it_in_place():
    m, t = Module(), nn.Module()
    for name in 'abc':
        setattr(m, name, Param(np.zeros(1))); setattr(t, name, nn.Parameter(torch.zeros(1)))
    new, tnew = Param(np.ones((2, 2))), nn.Parameter(torch.ones(2, 2))
    m.a, t.a = new, tnew
    assert names_and_shapes(m) == names_and_shapes(t) == [('a', (2, 2)), ('b', (1,)), ('c', (1,))]
    assert list(m.parameters())[0] is new and m.a is new


def test_reassigning_a_module_replaces_it_in_place():
    m, t = Module(), nn.Module()
    m.x, m.y = LinModule(1, 1), LinModule(1, 1)
    t.x, t.y = nn.Linear(1, 1), nn.Linear(1, 1)
    m.x, t.x = LinModule(2, 3), nn.Linear(2, 3)
    assert names_and_shapes(m) == names_and_shapes(t)


def test_replacing_a_param_with_an_array_raises_like_torch():
    lin = LinModule(3, 2)
    with pytest.raises(TypeError, match=r"cannot assign 'ndarray' as parameter 'weight' \(Param expected\)"):
        lin.weight = np.zeros((2, 3))
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' as parameter 'weight'"):
        nn.Linear(3, 2).weight = torch.zeros(2, 3)
    assert isinstance(lin.weight, Param) and len(list(lin.parameters())) == 2


def test_replacing_a_module_with_something_else_raises_like_torch():
    mlp = Mlp(2, 3, 1)
    with pytest.raises(TypeError, match=r"cannot assign 'int' as child module 'lin1' \(Module expected\)"):
        mlp.lin1 = 0
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'lin1'"):
        TorchMlp(2, 3, 1).lin1 = 0
    with pytest.raises(TypeError, match="as child module 'lin1'"):
        mlp.lin1 = Param(np.zeros(1))


def test_plain_attributes_are_not_registered():
    m = Module()
    m.array, m.number, m.text, m.items = np.zeros(3), 1.5, 'hello', [Param(np.zeros(1))]
    m.relu, m.lin = ReluLayer(), Lin(np.zeros((1, 1)), np.zeros(1))
    assert list(m.named_parameters()) == [] and m._modules == {}
    m.array = np.ones(3)                                  # plain attributes stay plain and reassignable
    assert m.array.sum() == 3


def test_forgetting_super_init_raises_like_torch():
    class Forgetful(Module):
        def __init__(self): self.lin = LinModule(1, 1)
    class ForgetfulParam(Module):
        def __init__(self): self.w = Param(np.zeros(1))
    class TorchForgetful(nn.Module):
        def __init__(self): self.lin = nn.Linear(1, 1)
    with pytest.raises(AttributeError, match=r'cannot assign module before Module.__init__\(\) call'): Forgetful()
    with pytest.raises(AttributeError, match=r'cannot assign parameters before Module.__init__\(\) call'):
        ForgetfulParam()
    with pytest.raises(AttributeError, match=r'cannot assign module before Module.__init__\(\) call'):
        TorchForgetful()


def test_shared_param_and_shared_module_are_listed_once_like_torch():
    m, t = Module(), nn.Module()
    m.enc, t.enc = LinModule(3, 3), nn.Linear(3, 3)
    m.dec, t.dec = LinModule(3, 3), nn.Linear(3, 3)
    m.dec.weight, t.dec.weight = m.enc.weight, t.enc.weight          # tied weights
    m.again, t.again = m.enc, t.enc                                  # the same module under two names
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in t.named_parameters()] == \
           ['enc.weight', 'enc.bias', 'dec.bias']


def test_named_parameters_prefix_like_torch():
    ours, theirs = Mlp(2, 3, 1), TorchMlp(2, 3, 1)
    assert [k for k, _ in ours.named_parameters(prefix='model')] == \
           [k for k, _ in theirs.named_parameters(prefix='model')]


def test_copy_from_torch_refuses_mismatches():
    with pytest.raises(ValueError, match='parameter names differ'): copy_from_torch(Mlp(2, 3, 1), nn.Linear(2, 3))
    with pytest.raises(ValueError, match=r'lin1.weight: shape \(3, 2\) vs torch \(4, 2\)'):
        copy_from_torch(Mlp(2, 3, 1), TorchMlp(2, 4, 1))


def test_copy_from_torch_copies_values_not_references():
    ours, theirs = Mlp(2, 3, 1), TorchMlp(2, 3, 1).double()
    copy_from_torch(ours, theirs)
    check_close(ours.lin1.weight.data, theirs.lin1.weight, rtol=0, atol=0)
    with torch.no_grad(): theirs.lin1.weight.add_(1.0)
    assert not np.allclose(ours.lin1.weight.data, theirs.lin1.weight.detach().numpy())


def test_layers_module_does_not_import_torch():
    import subprocess, sys
    code = "import sys, fromscratch.lessons.layers; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == 'False'
