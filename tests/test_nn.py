"""fromscratch.nn against torch.nn: the Module API, layers, losses, functional, init, and many-step training parity."""
import copy
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import nn
from fromscratch.nn import init
from fromscratch.testing import check_close


def tt(a, requires_grad=False):
    "A torch copy of numpy array `a`."
    return torch.tensor(np.asarray(a), requires_grad=requires_grad)


def ft(a, requires_grad=False):
    "A fromscratch copy of numpy array `a`."
    return fs.tensor(np.asarray(a), requires_grad=requires_grad)


# ---------------------------------------------------------------- the package layout

def test_namespaces():
    import fromscratch.nn.functional as F2
    assert nn.functional is F2 and fs.nn is nn and nn.init is init
    for name in ('Module', 'Parameter', 'Linear', 'ReLU', 'Sigmoid', 'Tanh', 'Sequential', 'MSELoss',
                 'CrossEntropyLoss', 'NLLLoss', 'Identity', 'Flatten'):
        assert hasattr(nn, name), name
    for name in ('relu', 'sigmoid', 'tanh', 'linear', 'softmax', 'log_softmax', 'mse_loss', 'nll_loss', 'cross_entropy'):
        assert callable(getattr(F, name)), name
    for name in ('kaiming_normal_', 'kaiming_uniform_', 'xavier_uniform_', 'xavier_normal_', 'zeros_', 'ones_',
                 'normal_', 'uniform_', 'constant_', 'calculate_gain'):
        assert callable(getattr(init, name)), name


# ---------------------------------------------------------------- Parameter

def test_parameter():
    t = fs.ones(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, fs.Tensor) and p.requires_grad and p.is_leaf and p.array is t.array
    assert repr(p) == repr(torch.nn.Parameter(torch.ones(2, 3)))
    assert hasattr(p, '__dict__') == hasattr(torch.nn.Parameter(torch.ones(2, 3)), '__dict__')  # attributes of your own
    assert not nn.Parameter(fs.ones(2), requires_grad=False).requires_grad
    assert nn.Parameter().shape == (0,)
    assert type(p * 2) is fs.Tensor and type(p.detach()) is fs.Tensor
    with pytest.raises(RuntimeError, match='Only Tensors of floating point'): nn.Parameter(fs.tensor([1, 2]))


# ---------------------------------------------------------------- models built the same way in both libraries

def lib_ones(nn_lib, *shape):
    return torch.ones(*shape) if nn_lib is torch.nn else fs.ones(*shape)


def make_nested(nn_lib):
    "Nested blocks, a shared module, a shared parameter, buffers (one non-persistent), a None parameter."
    class Block(nn_lib.Module):
        def __init__(self, n, m):
            super().__init__()
            self.lin = nn_lib.Linear(n, m)
            self.register_buffer('scale', lib_ones(nn_lib, m))
            self.register_buffer('scratch', lib_ones(nn_lib, 1), persistent=False)
            self.act = nn_lib.Tanh()
        def forward(self, x): return self.act(self.lin(x)) * self.scale

    class Net(nn_lib.Module):
        def __init__(self):
            super().__init__()
            self.alpha = nn_lib.Parameter(lib_ones(nn_lib, 1))
            self.first = Block(4, 5)
            self.inner = nn_lib.Module()
            self.inner.block = Block(5, 5)
            self.inner.again = self.first                   # a shared module
            self.register_parameter('unused', None)
            self.body = nn_lib.Sequential(nn_lib.Linear(5, 6), nn_lib.ReLU(), nn_lib.Linear(6, 3, bias=False))
            self.tied = nn_lib.Linear(4, 5)
            self.tied.weight = self.first.lin.weight         # a shared parameter
            self.gamma = nn_lib.Parameter(lib_ones(nn_lib, 3))
        def forward(self, x):
            h = self.inner.block(self.first(x)) + self.tied(x)
            return self.body(h) * self.gamma * self.alpha

    return Net()


@pytest.fixture
def pair():
    torch.manual_seed(0)
    net_t = make_nested(torch.nn).double()
    net = make_nested(nn).double()
    net.load_state_dict(net_t.state_dict())
    return net, net_t


def names(it): return [n for n, _ in it]


def test_registration_names_and_order(pair):
    net, net_t = pair
    assert names(net.named_parameters()) == names(net_t.named_parameters())
    assert names(net.named_parameters(remove_duplicate=False)) == names(net_t.named_parameters(remove_duplicate=False))
    assert names(net.named_parameters(prefix='model')) == names(net_t.named_parameters(prefix='model'))
    assert names(net.named_parameters(recurse=False)) == names(net_t.named_parameters(recurse=False)) == ['alpha', 'gamma']
    assert names(net.named_buffers()) == names(net_t.named_buffers())
    assert names(net.named_modules()) == names(net_t.named_modules())
    assert names(net.named_modules(remove_duplicate=False)) == names(net_t.named_modules(remove_duplicate=False))
    assert names(net.named_modules(prefix='m')) == names(net_t.named_modules(prefix='m'))
    assert names(net.named_children()) == names(net_t.named_children())
    assert [type(m).__name__ for m in net.modules()] == [type(m).__name__ for m in net_t.modules()]
    assert [type(m).__name__ for m in net.children()] == [type(m).__name__ for m in net_t.children()]
    assert len(list(net.parameters())) == len(list(net_t.parameters()))
    assert list(net._parameters) == list(net_t._parameters) and list(net._modules) == list(net_t._modules)


def test_parameters_are_the_registered_objects(pair):
    net, _ = pair
    ps = list(net.parameters())
    assert all(isinstance(p, nn.Parameter) for p in ps)
    assert len({id(p) for p in ps}) == len(ps)
    assert net.tied.weight is net.first.lin.weight and net.inner.again is net.first


def test_forward_matches_torch(pair):
    net, net_t = pair
    x = np.random.default_rng(0).standard_normal((3, 4))
    out, out_t = net(ft(x)), net_t(tt(x))
    check_close(out, out_t, rtol=1e-12)
    out.sum().backward(); out_t.sum().backward()
    for (name, p), p_t in zip(net.named_parameters(), net_t.parameters()):
        check_close(p.grad, p_t.grad, rtol=1e-10, atol=1e-12, name=name)


def test_setattr_rules():
    m = nn.Linear(2, 3)
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor' as parameter 'weight' \(fromscratch.nn.Parameter or None expected\)"):
        m.weight = fs.ones(3, 2)
    m.bias = None
    assert m.bias is None and 'bias' in m._parameters and names(m.named_parameters()) == ['weight']
    m.bias = nn.Parameter(fs.zeros(3))
    assert names(m.named_parameters()) == ['weight', 'bias']
    m.sub = nn.ReLU()
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'sub'"): m.sub = 3
    m.sub = None
    assert m._modules['sub'] is None
    m.plain = fs.ones(2)                       # a plain tensor attribute is not registered
    assert 'plain' in m.__dict__ and 'plain' not in m._buffers
    m.register_buffer('buf', fs.ones(2))
    with pytest.raises(TypeError, match="as buffer 'buf'"): m.buf = 3
    m.buf = fs.zeros(2)
    assert m._buffers['buf'] is m.buf
    m.plain = nn.Parameter(fs.ones(1))         # a plain attribute becomes a parameter
    assert 'plain' not in m.__dict__ and m._parameters['plain'] is m.plain
    del m.plain, m.buf, m.sub
    assert 'plain' not in m._parameters and 'buf' not in m._buffers and 'sub' not in m._modules
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nothing'"): m.nothing
    m.x = 1
    del m.x
    assert not hasattr(m, 'x')


def test_setattr_before_init():
    class P(nn.Module):
        def __init__(self): self.w = nn.Parameter(fs.ones(1))
    class M(nn.Module):
        def __init__(self): self.l = nn.ReLU()
    with pytest.raises(AttributeError, match=r'cannot assign parameters before Module.__init__\(\) call'): P()
    with pytest.raises(AttributeError, match=r'cannot assign module before Module.__init__\(\) call'): M()


def test_register_checks():
    m = nn.Linear(2, 3)
    with pytest.raises(KeyError, match='parameter name can.+t contain "\\."'): m.register_parameter('a.b', None)
    with pytest.raises(KeyError, match='parameter name can.+t be empty string'): m.register_parameter('', None)
    with pytest.raises(KeyError, match="attribute 'in_features' already exists"): m.register_parameter('in_features', None)
    with pytest.raises(KeyError, match="attribute 'forward' already exists"): m.add_module('forward', nn.ReLU())
    with pytest.raises(KeyError, match="attribute 'weight' already exists"): m.add_module('weight', nn.ReLU())
    with pytest.raises(TypeError, match="parameter name should be a string. Got int"): m.register_parameter(1, None)
    with pytest.raises(TypeError, match="module name should be a string. Got int"): m.add_module(3, nn.ReLU())
    with pytest.raises(TypeError, match="int is not a Module subclass"): m.add_module('a', 3)
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor' object to parameter 'x' \(fromscratch.nn.Parameter or None required\)"):
        m.register_parameter('x', fs.ones(2))
    with pytest.raises(TypeError, match="cannot assign 'int' object to buffer 'a'"): m.register_buffer('a', 3)
    w = nn.Parameter(fs.ones(2))
    nonleaf = w * 2
    nonleaf.__class__ = nn.Parameter
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'x'"): m.register_parameter('x', nonleaf)
    m.register_parameter('weight', nn.Parameter(fs.ones(3, 2)))     # re-registering the same name is allowed
    m.register_module('extra', nn.Tanh())
    assert names(m.named_children()) == ['extra']


def test_train_eval(pair):
    net, net_t = pair
    assert net.training and all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.inner.train(False); net_t.inner.train(False)
    assert [m.training for m in net.modules()] == [m.training for m in net_t.modules()]
    assert not net.inner.block.lin.training and net.training and net.body.training
    with pytest.raises(ValueError, match='training mode is expected to be boolean'): net.train('yes')


@pytest.mark.parametrize('set_to_none', [True, False])
def test_zero_grad(pair, set_to_none):
    net, net_t = pair
    x = ft(np.ones((2, 4)))
    net(x).sum().backward()
    grads = [p.grad for p in net.parameters()]
    assert all(g is not None for g in grads)
    net.zero_grad(set_to_none=set_to_none)
    if set_to_none: assert all(p.grad is None for p in net.parameters())
    else:
        assert all(p.grad is g for p, g in zip(net.parameters(), grads))
        assert all(not p.grad.numpy().any() for p in net.parameters())
    net(x).sum().backward()       # the next backward starts from zero either way
    net_t(tt(np.ones((2, 4)))).sum().backward()
    for p, p_t in zip(net.parameters(), net_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-10)


def test_zero_grad_of_a_graph_gradient():
    lin = nn.Linear(2, 2)
    x = fs.ones(1, 2)
    lin(x).pow(2).sum().backward(create_graph=True)
    assert lin.weight.grad.grad_fn is not None
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad.grad_fn is None and not lin.weight.grad.numpy().any()


def test_requires_grad_and_freezing():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    assert model[0].requires_grad_(False) is model[0]
    model(fs.ones(2, 3)).sum().backward()
    assert model[0].weight.grad is None and model[2].weight.grad is not None


def test_apply_order_matches_torch(pair):
    net, net_t = pair
    seen, seen_t = [], []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    net_t.apply(lambda m: seen_t.append(type(m).__name__))
    assert seen == seen_t


def test_to_dtype():
    model = nn.Sequential(nn.Linear(3, 2))
    params = list(model.parameters())
    model(fs.ones(1, 3)).sum().backward()
    model.double()
    assert [p.dtype for p in model.parameters()] == [fs.float64] * 2 and list(model.parameters()) == params
    assert model[0].weight.grad.dtype == fs.float64
    assert model(fs.ones(1, 3, dtype=fs.float64)).dtype == fs.float64
    assert model.float()[0].bias.dtype == fs.float32


def test_repr_matches_torch(pair):
    net, net_t = pair
    assert repr(net) == repr(net_t)
    layers = lambda lib: lib.Sequential(lib.Linear(784, 50), lib.ReLU(), lib.Sigmoid(), lib.Tanh(), lib.Identity(),
                                        lib.Flatten(), lib.Linear(5, 1, bias=False), lib.MSELoss(),
                                        lib.CrossEntropyLoss(), lib.NLLLoss())
    assert repr(layers(nn)) == repr(layers(torch.nn))
    assert repr(nn.Module()) == 'Module()'


def test_forward_missing():
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required "forward" function'):
        nn.Module()(fs.ones(1))


def test_deepcopy():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    clone = copy.deepcopy(model)
    assert clone[0].weight is not model[0].weight
    check_close(clone(fs.ones(1, 3)), model(fs.ones(1, 3)))
    with fs.no_grad(): clone[0].weight.zero_()
    assert model[0].weight.detach().numpy().any()


# ---------------------------------------------------------------- state_dict

def test_state_dict_keys_and_values(pair):
    net, net_t = pair
    sd, sd_t = net.state_dict(), net_t.state_dict()
    assert isinstance(sd, OrderedDict) and list(sd) == list(sd_t)
    assert 'first.scratch' not in sd
    for k in sd:
        assert sd[k].grad_fn is None and not sd[k].requires_grad
        check_close(sd[k], sd_t[k], rtol=0, atol=0, name=k)
    assert sd['first.lin.weight'].array is net.first.lin.weight.array        # detached, not copied
    kv = net.state_dict(keep_vars=True)
    assert kv['first.lin.weight'] is net.first.lin.weight


def test_state_dict_round_trip():
    fs.manual_seed(0)
    a = make_nested(nn)
    fs.manual_seed(1)
    b = make_nested(nn)
    x = fs.randn(3, 4)
    assert not np.allclose(a(x).detach().numpy(), b(x).detach().numpy())
    params_before = list(b.parameters())
    result = b.load_state_dict(a.state_dict())
    assert repr(result) == '<All keys matched successfully>'
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert list(b.parameters()) == params_before                         # same objects, new values
    check_close(a(x), b(x), rtol=0, atol=0)
    for (k, v), v2 in zip(a.state_dict().items(), b.state_dict().values()):
        assert v.array is not v2.array, k                                # copied, not shared


def test_load_state_dict_from_torch_and_numpy():
    torch.manual_seed(0)
    m_t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m.load_state_dict(m_t.state_dict())
    x = np.ones((2, 3), np.float32)
    check_close(m(ft(x)), m_t(tt(x)), rtol=1e-6)
    m2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m2.load_state_dict({k: v.numpy() for k, v in m.state_dict().items()})
    check_close(m2(ft(x)), m(ft(x)), rtol=0, atol=0)


def test_load_state_dict_bumps_version():
    lin = nn.Linear(2, 2)
    out = (lin.weight * lin.weight).sum()
    lin.load_state_dict(nn.Linear(2, 2).state_dict())
    with pytest.raises(RuntimeError, match='modified by an inplace operation'): out.backward()


def torch_message(e):
    return str(e).replace('torch.Size(', '').replace('])', ']')


def test_load_state_dict_errors_like_torch():
    ours, theirs = nn.Linear(4, 10), torch.nn.Linear(4, 10)
    w_before = ours.weight.detach().numpy().copy()
    bad_shape = {'weight': np.zeros((10, 5), np.float32), 'bias': np.zeros(10, np.float32)}
    with pytest.raises(RuntimeError) as e: ours.load_state_dict(bad_shape)
    with pytest.raises(RuntimeError) as e_t: theirs.load_state_dict({k: torch.tensor(v) for k, v in bad_shape.items()})
    assert str(e.value) == torch_message(e_t.value)
    assert ('size mismatch for weight: copying a param with shape [10, 5] from checkpoint, the shape in current '
            'model is [10, 4].') in str(e.value)
    assert np.array_equal(ours.weight.detach().numpy(), w_before)           # nothing copied
    keys = {'weight': np.zeros((10, 4), np.float32), 'foo': np.zeros(1, np.float32), 'bar.baz': np.zeros(1, np.float32)}
    with pytest.raises(RuntimeError) as e: ours.load_state_dict(keys)
    with pytest.raises(RuntimeError) as e_t: theirs.load_state_dict({k: torch.tensor(v) for k, v in keys.items()})
    assert str(e.value) == str(e_t.value)
    assert str(e.value) == ('Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". \n\t'
                            'Unexpected key(s) in state_dict: "foo", "bar.baz". ')
    assert np.array_equal(ours.weight.detach().numpy(), w_before)
    result = ours.load_state_dict(keys, strict=False)
    assert result.missing_keys == ['bias'] and result.unexpected_keys == ['foo', 'bar.baz']
    assert repr(result) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['foo', 'bar.baz'])"
    assert not ours.weight.detach().numpy().any()
    with pytest.raises(RuntimeError, match='size mismatch for bias'):
        ours.load_state_dict({'bias': np.zeros(3, np.float32)}, strict=False)
    with pytest.raises(RuntimeError, match='While copying the parameter named "weight", expected fromscratch.Tensor'):
        ours.load_state_dict({'weight': [1, 2], 'bias': np.zeros(10)})


def test_nested_state_dict_error_names():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1)))
    sd = model.state_dict()
    sd['2.0.weight'] = fs.zeros(2, 3)
    del sd['0.bias']
    with pytest.raises(RuntimeError) as e: model.load_state_dict(sd)
    msg = str(e.value)
    assert msg.startswith('Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: "0.bias". ')
    assert 'size mismatch for 2.0.weight: copying a param with shape [2, 3]' in msg


def test_buffers_in_state_dict():
    m = nn.Module()
    m.register_buffer('running', fs.zeros(3))
    m.register_buffer('tmp', fs.ones(1), persistent=False)
    m.register_buffer('empty', None)
    assert list(m.state_dict()) == ['running'] and names(m.named_buffers()) == ['running', 'tmp']
    m.load_state_dict({'running': np.arange(3.0)})
    assert m.running.tolist() == [0.0, 1.0, 2.0]
    m.register_buffer('tmp', fs.ones(1), persistent=True)
    assert list(m.state_dict()) == ['running', 'tmp']


# ---------------------------------------------------------------- hooks

def test_forward_hooks_like_torch():
    torch.manual_seed(0)
    lin_t = torch.nn.Linear(3, 2).double()
    lin = nn.Linear(3, 2).double()
    lin.load_state_dict(lin_t.state_dict())
    x = np.random.default_rng(0).standard_normal((4, 3))

    def run(m, inp):
        log, results = [], []
        h1 = m.register_forward_pre_hook(lambda mod, args: log.append(('pre', type(mod).__name__, len(args))))
        h2 = m.register_forward_pre_hook(lambda mod, args: args[0] * 2)          # not a tuple: wrapped in one
        h3 = m.register_forward_hook(lambda mod, args, out: log.append(('post', tuple(args[0].shape))))
        h4 = m.register_forward_hook(lambda mod, args, out: out + 1)
        results.append(m(inp))
        h2.remove(); h4.remove()
        results.append(m(inp))
        h1.remove(); h3.remove(); h1.remove()                                     # removing twice is harmless
        results.append(m(inp))
        return log, results

    (log, results), (log_t, results_t) = run(lin, ft(x)), run(lin_t, tt(x))
    assert log == log_t == [('pre', 'Linear', 1), ('post', (4, 3)), ('pre', 'Linear', 1), ('post', (4, 3))]
    for a, b in zip(results, results_t): check_close(a, b, rtol=1e-12)
    check_close(results[0], lin(ft(2 * x)) + 1, rtol=1e-12)
    assert not lin._forward_hooks and not lin._forward_pre_hooks


def test_hook_handles_context_and_gradients():
    lin = nn.Linear(2, 2)
    with lin.register_forward_hook(lambda m, a, o: o * 0):
        assert not lin(fs.ones(1, 2)).detach().numpy().any()
    assert lin(fs.ones(1, 2)).detach().numpy().any()
    assert not lin._forward_hooks
    # the replaced output stays in the graph
    h = lin.register_forward_hook(lambda m, a, o: o * 3)
    lin(fs.ones(1, 2)).sum().backward()
    check_close(lin.bias.grad, [3.0, 3.0])
    h.remove()


def test_hooks_see_kwargs_passed_through():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0): return x * factor
    m, seen = Scale(), []
    m.register_forward_pre_hook(lambda mod, args: seen.append(args))
    assert m(fs.ones(1), factor=3.0).item() == 3.0
    assert len(seen) == 1 and len(seen[0]) == 1


def test_call_without_hooks_is_forward():
    lin = nn.Linear(2, 2)
    x = fs.ones(1, 2)
    check_close(lin(x), lin.forward(x), rtol=0, atol=0)
    assert lin(x).grad_fn.name() == 'LinearFunctionBackward'
    assert [fn and fn.name() for fn, _ in lin(x).grad_fn.next_functions] == [None, 'AccumulateGrad', 'AccumulateGrad']


# ---------------------------------------------------------------- Sequential

def test_sequential_indexing():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1), nn.Sigmoid()]
    s = nn.Sequential(*layers)
    assert len(s) == 4 and list(s) == layers and s[0] is layers[0] and s[-1] is layers[-1] and s[-4] is layers[0]
    tail = s[1:]
    assert isinstance(tail, nn.Sequential) and list(tail._modules) == ['1', '2', '3'] and list(tail) == layers[1:]
    assert list(s[::2]._modules) == ['0', '2']
    with pytest.raises(IndexError, match='index 4 is out of range'): s[4]
    with pytest.raises(IndexError, match='index -5 is out of range'): s[-5]
    s.append(nn.Tanh())
    assert list(s._modules) == ['0', '1', '2', '3', '4']
    new = nn.Linear(3, 1)
    s[2] = new
    assert s[2] is new and s._modules['2'] is new
    s[-1] = nn.Identity()
    assert isinstance(s[4], nn.Identity)
    named = nn.Sequential(OrderedDict([('fc', nn.Linear(2, 2)), ('act', nn.ReLU())]))
    assert names(named.named_children()) == ['fc', 'act'] and names(named.named_parameters()) == ['fc.weight', 'fc.bias']
    torch_s = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1), torch.nn.Sigmoid())
    assert repr(nn.Sequential(*layers)[1:]) == repr(torch_s[1:])


def test_sequential_forward_matches_torch():
    torch.manual_seed(0)
    s_t = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3), torch.nn.Sigmoid(),
                              torch.nn.Flatten(0), torch.nn.Identity()).double()
    s = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3), nn.Sigmoid(), nn.Flatten(0), nn.Identity()).double()
    s.load_state_dict(s_t.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 5))
    out, out_t = s(ft(x)), s_t(tt(x))
    check_close(out, out_t, rtol=1e-12)
    (out ** 2).sum().backward(); (out_t ** 2).sum().backward()
    for p, p_t in zip(s.parameters(), s_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-10)


def test_flatten():
    x = np.arange(24.0).reshape(2, 3, 4)
    for args in ((), (0,), (1, 2), (0, 1), (0, -1)):
        assert nn.Flatten(*args)(ft(x)).shape == tuple(torch.nn.Flatten(*args)(tt(x)).shape)


# ---------------------------------------------------------------- Linear and its initialisation

def test_linear_default_init_matches_torch_distribution():
    fs.manual_seed(0)
    lin = nn.Linear(400, 1000)
    torch.manual_seed(0)
    lin_t = torch.nn.Linear(400, 1000)
    bound = 1 / math.sqrt(400)
    for ours, theirs in ((lin.weight, lin_t.weight), (lin.bias, lin_t.bias)):
        a, b = ours.detach().numpy(), theirs.detach().numpy()
        assert a.dtype == np.float32 and a.shape == b.shape
        assert np.abs(a).max() <= bound and np.abs(b).max() <= bound
        assert np.abs(a).max() > 0.98 * bound
    w = lin.weight.detach().numpy().astype(np.float64)
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound / math.sqrt(3)
    assert abs(w.std() - lin_t.weight.detach().numpy().std()) < 0.01 * w.std()
    assert abs(w.mean()) < 0.01 * bound


def test_linear_init_is_seeded():
    fs.manual_seed(3); a = nn.Linear(5, 4)
    fs.manual_seed(3); b = nn.Linear(5, 4)
    fs.manual_seed(4); c = nn.Linear(5, 4)
    assert np.array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    assert not np.array_equal(a.weight.detach().numpy(), c.weight.detach().numpy())


def test_linear_options():
    lin = nn.Linear(3, 2, bias=False, dtype=fs.float64)
    assert lin.bias is None and names(lin.named_parameters()) == ['weight'] and lin.weight.dtype == fs.float64
    assert repr(lin) == 'Linear(in_features=3, out_features=2, bias=False)'
    assert nn.Linear(0, 3).bias.detach().numpy().tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- functional against torch

@pytest.mark.parametrize('shape', [(5, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize('bias', [True, False])
def test_linear_function(shape, bias):
    rng = np.random.default_rng(0)
    xa, wa, ba = rng.standard_normal(shape), rng.standard_normal((3, 4)), rng.standard_normal(3)
    ours = [ft(xa, True), ft(wa, True)] + ([ft(ba, True)] if bias else [])
    theirs = [tt(xa, True), tt(wa, True)] + ([tt(ba, True)] if bias else [])
    out, out_t = F.linear(*ours), torch.nn.functional.linear(*theirs)
    check_close(out, out_t, rtol=1e-12)
    gout = rng.standard_normal(out_t.shape)
    out.backward(ft(gout)); out_t.backward(tt(gout))
    for i, (o, t) in enumerate(zip(ours, theirs)): check_close(o.grad, t.grad, rtol=1e-12, name=f'grad {i}')


def test_linear_function_saves_only_what_it_needs_and_float32():
    fs.manual_seed(0)
    x = fs.randn(64, 784)
    w = fs.randn(50, 784, requires_grad=True)
    b = fs.randn(50, requires_grad=True)
    out = F.linear(x, w, b)
    x_saved, w_saved = out.grad_fn.saved_tensors
    assert x_saved is x and w_saved is None
    out.sum().backward()
    # each entry sums 64 float32 products; compared with the float64 sum, near-zero sums need an absolute tolerance
    check_close(w.grad, np.ones((50, 64)) @ x.numpy().astype(np.float64), rtol=1e-5, atol=1e-5)
    assert w.grad.dtype == fs.float32 and out.dtype == fs.float32


def test_linear_gradcheck_and_double_backward():
    rng = np.random.default_rng(1)
    inputs = [ft(rng.standard_normal(s), True) for s in ((3, 4), (2, 4), (2,))]
    assert fs.autograd.gradcheck(F.linear, inputs)
    assert fs.autograd.gradgradcheck(F.linear, inputs)
    x3 = [ft(rng.standard_normal(s), True) for s in ((2, 3, 4), (2, 4), (2,))]
    assert fs.autograd.gradgradcheck(F.linear, x3)


def test_linear_errors():
    with pytest.raises(RuntimeError, match=r'mat1 and mat2 shapes cannot be multiplied \(3x5 and 4x4\)'):
        F.linear(fs.randn(3, 5), fs.randn(4, 4))
    with pytest.raises(RuntimeError, match=r'mat1 and mat2 shapes cannot be multiplied \(6x5 and 4x2\)'):
        F.linear(fs.randn(2, 3, 5), fs.randn(2, 4))
    with pytest.raises(RuntimeError, match='expected m1 and m2 to have the same dtype'):
        F.linear(fs.randn(3, 4), fs.randn(2, 4, dtype=fs.float64))


@pytest.mark.parametrize('name', ['relu', 'sigmoid', 'tanh'])
def test_activations(name):
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[0, 0] = 0.0
    a, b = ft(x, True), tt(x, True)
    out, out_t = getattr(F, name)(a), getattr(torch.nn.functional, name)(b)
    check_close(out, out_t, rtol=1e-12)
    out.sum().backward(); out_t.sum().backward()
    check_close(a.grad, b.grad, rtol=1e-12)
    module = {'relu': nn.ReLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh}[name]()
    check_close(module(ft(x)), out_t, rtol=1e-12)


@pytest.mark.parametrize('dim', [0, 1, -1])
def test_softmax_functions(dim):
    x = np.random.default_rng(0).standard_normal((3, 4)) * 5
    check_close(F.softmax(ft(x), dim), torch.softmax(tt(x), dim), rtol=1e-12)
    check_close(F.log_softmax(ft(x), dim), torch.log_softmax(tt(x), dim), rtol=1e-12)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_mse_loss(reduction):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    ours, theirs = [ft(x, True), ft(y, True)], [tt(x, True), tt(y, True)]
    out, out_t = F.mse_loss(*ours, reduction=reduction), torch.nn.functional.mse_loss(*theirs, reduction=reduction)
    check_close(out, out_t, rtol=1e-12)
    out.sum().backward(); out_t.sum().backward()
    for o, t in zip(ours, theirs): check_close(o.grad, t.grad, rtol=1e-12)
    check_close(nn.MSELoss(reduction=reduction)(*ours), out_t, rtol=1e-12)


def test_mse_loss_broadcast_warning_and_bad_reduction():
    with pytest.warns(UserWarning, match=r'Using a target size \(fromscratch.Size\(\[3\]\)\) that is different to the input '
                                         r'size \(fromscratch.Size\(\[3, 1\]\)\)'):
        out = F.mse_loss(fs.ones(3, 1), fs.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        check_close(out, torch.nn.functional.mse_loss(torch.ones(3, 1), torch.zeros(3)))
    with pytest.raises(ValueError, match='foo is not a valid value for reduction'):
        F.mse_loss(fs.ones(3), fs.ones(3), reduction='foo')


def class_case(seed, shape, n_classes, ignore=0.0):
    "Random float64 logits of `shape` (classes in dim 1, or dim 0 when unbatched) and int64 targets."
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal(shape) * 3
    tshape = () if len(shape) == 1 else (shape[0],) + tuple(shape[2:])
    target = rng.integers(0, n_classes, tshape)
    if ignore and target.ndim: target[rng.random(tshape) < ignore] = -100
    return logits, target


SHAPES = [((6, 5), 5), ((5,), 5), ((4, 3, 2, 2), 3), ((1, 7), 7), ((3, 2, 5), 2)]


@pytest.mark.parametrize('fn', ['cross_entropy', 'nll_loss'])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('shape,n_classes', SHAPES)
@pytest.mark.parametrize('ignore', [0.0, 0.3])
def test_class_losses(fn, reduction, shape, n_classes, ignore):
    logits, target = class_case(0, shape, n_classes, ignore)
    if fn == 'nll_loss':
        logits = torch.log_softmax(tt(logits), 0 if len(shape) == 1 else 1).numpy()
    x, x_t = ft(logits, True), tt(logits, True)
    out = getattr(F, fn)(x, ft(target), reduction=reduction)
    out_t = getattr(torch.nn.functional, fn)(x_t, tt(target), reduction=reduction)
    check_close(out, out_t, rtol=1e-12, atol=1e-14)
    g = np.random.default_rng(1).standard_normal(out_t.shape)
    out.backward(ft(g)); out_t.backward(tt(g))
    check_close(x.grad, x_t.grad, rtol=1e-12, atol=1e-14)
    module = {'cross_entropy': nn.CrossEntropyLoss, 'nll_loss': nn.NLLLoss}[fn](reduction=reduction)
    check_close(module(ft(logits), ft(target)), out_t, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize('ignore_index', [0, 2, -1])
def test_ignore_index_values(ignore_index):
    logits, target = class_case(3, (8, 4), 4)
    if ignore_index == -1: target[::3] = -1
    for fn in ('cross_entropy', 'nll_loss'):
        x, x_t = ft(logits, True), tt(logits, True)
        out = getattr(F, fn)(x, ft(target), ignore_index=ignore_index)
        out_t = getattr(torch.nn.functional, fn)(x_t, tt(target), ignore_index=ignore_index)
        out.backward(); out_t.backward()
        check_close(out, out_t, rtol=1e-12); check_close(x.grad, x_t.grad, rtol=1e-12, atol=1e-15)


def test_all_targets_ignored():
    x = fs.randn(3, 4, requires_grad=True)
    t = fs.tensor([-100, -100, -100])
    for fn in (F.cross_entropy, F.nll_loss):
        loss = fn(x, t)
        loss.backward()
        assert np.isnan(loss.item()) and x.grad.tolist() == [[0.0] * 4] * 3      # torch: nan loss, zero gradient
        x.grad = None
    empty = fs.randn(0, 4, requires_grad=True)
    loss = F.cross_entropy(empty, fs.tensor(np.zeros(0, np.int64)))
    loss.backward()
    assert np.isnan(loss.item()) and empty.grad.shape == (0, 4)
    assert F.cross_entropy(x, t, reduction='sum').item() == 0.0
    assert F.cross_entropy(x, t, reduction='none').tolist() == [0.0, 0.0, 0.0]


def test_cross_entropy_float32_and_stability():
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0], [-50.0, 50.0, 0.0]], np.float32)
    target = np.array([2, 1, 0])
    x, x_t = ft(logits, True), tt(logits, True)
    out, out_t = F.cross_entropy(x, ft(target)), torch.nn.functional.cross_entropy(x_t, tt(target))
    assert out.dtype == fs.float32 and np.isfinite(out.item())
    out.backward(); out_t.backward()
    check_close(out, out_t, rtol=1e-6); check_close(x.grad, x_t.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_cross_entropy_probability_targets(reduction):
    rng = np.random.default_rng(0)
    logits, probs = rng.standard_normal((4, 3)), rng.dirichlet(np.ones(3), 4)
    x, x_t = ft(logits, True), tt(logits, True)
    out = F.cross_entropy(x, ft(probs), reduction=reduction)
    out_t = torch.nn.functional.cross_entropy(x_t, tt(probs), reduction=reduction)
    check_close(out, out_t, rtol=1e-12)
    out.sum().backward(); out_t.sum().backward()
    check_close(x.grad, x_t.grad, rtol=1e-12)


def test_cross_entropy_is_one_node():
    x = fs.randn(4, 3, requires_grad=True)
    loss = F.cross_entropy(x, fs.tensor([0, 1, 2, 0]))
    assert loss.grad_fn.name() == 'CrossEntropyFunctionBackward'
    assert [fn.name() for fn, _ in loss.grad_fn.next_functions] == ['AccumulateGrad']


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_cross_entropy_double_backward(reduction):
    logits, target = class_case(5, (5, 4), 4, ignore=0.3)
    x, x_t = ft(logits, True), tt(logits, True)
    loss, loss_t = F.cross_entropy(x, ft(target), reduction=reduction), torch.nn.functional.cross_entropy(x_t, tt(target), reduction=reduction)
    w = np.random.default_rng(2).standard_normal(loss_t.shape)
    g, = fs.autograd.grad((loss * ft(w)).sum(), x, create_graph=True)
    g_t, = torch.autograd.grad((loss_t * tt(w)).sum(), x_t, create_graph=True)
    check_close(g, g_t, rtol=1e-12, atol=1e-15)
    v = np.random.default_rng(3).standard_normal(logits.shape)
    (g * ft(v)).sum().backward(); (g_t * tt(v)).sum().backward()
    check_close(x.grad, x_t.grad, rtol=1e-10, atol=1e-14)


def test_class_losses_gradcheck():
    logits, target = class_case(4, (4, 3), 3, ignore=0.3)
    t = ft(target)
    for fn in (F.cross_entropy, F.nll_loss):
        for reduction in ('mean', 'none'):
            f = lambda x: fn(x, t, reduction=reduction)
            assert fs.autograd.gradcheck(f, [ft(logits, True)])
            assert fs.autograd.gradgradcheck(f, [ft(logits, True)])


def test_class_loss_errors_like_torch():
    x = fs.randn(3, 5)
    cases = [(fs.tensor([1.0, 2.0, 3.0]), RuntimeError, 'expected target dtype to be Long or Byte, but got float32'),
             (fs.tensor([1, 2, 3, 4]), ValueError, r'Expected input batch_size \(3\) to match target batch_size \(4\)\.'),
             (fs.tensor([[1, 2, 3]]), ValueError, r'Expected input batch_size \(3\) to match target batch_size \(1\)\.'),
             (fs.tensor([1, 2, 7]), IndexError, 'Target 7 is out of bounds.'),
             (fs.tensor([1, 2, -1]), IndexError, 'Target -1 is out of bounds.')]
    for fn in (F.cross_entropy, F.nll_loss):
        for target, exc, msg in cases:
            with pytest.raises(exc, match=msg): fn(x, target)
    with pytest.raises(ValueError, match='foo is not a valid value for reduction'):
        F.cross_entropy(x, fs.tensor([1, 2, 3]), reduction='foo')
    with pytest.raises(ValueError, match='foo is not a valid value for reduction'):
        F.nll_loss(x, fs.tensor([1, 2, 3]), reduction='foo')


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 6), c=st.integers(1, 6), scale=st.floats(0.1, 30.0), seed=st.integers(0, 10_000),
       reduction=st.sampled_from(['mean', 'sum', 'none']))
def test_cross_entropy_property(n, c, scale, seed, reduction):
    rng = np.random.default_rng(seed)
    logits, target = rng.standard_normal((n, c)) * scale, rng.integers(0, c, n)
    x, x_t = ft(logits, True), tt(logits, True)
    out = F.cross_entropy(x, ft(target), reduction=reduction)
    out_t = torch.nn.functional.cross_entropy(x_t, tt(target), reduction=reduction)
    check_close(out, out_t, rtol=1e-10, atol=1e-12)
    out.sum().backward(); out_t.sum().backward()
    check_close(x.grad, x_t.grad, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- nn.init

@pytest.mark.parametrize('shape', [(3, 4), (50, 784), (16, 3, 5, 5), (2, 3, 4)])
def test_fans(shape):
    assert init._calculate_fan_in_and_fan_out(fs.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))


def test_gains():
    for name in ('linear', 'conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d',
                 'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'):
        assert math.isclose(init.calculate_gain(name), torch.nn.init.calculate_gain(name)), name
    for slope in (0, 0.2, 1, math.sqrt(5)):
        assert math.isclose(init.calculate_gain('leaky_relu', slope), torch.nn.init.calculate_gain('leaky_relu', slope))
    with pytest.raises(ValueError, match='Unsupported nonlinearity foo'): init.calculate_gain('foo')
    with pytest.raises(ValueError, match='negative_slope a not a valid number'): init.calculate_gain('leaky_relu', 'a')
    with pytest.raises(ValueError, match='negative_slope True not a valid number'): init.calculate_gain('leaky_relu', True)


INITS = [  # (name, kwargs, expected (std, bound or None) from the formula for shape (400, 1000): fan_in 1000, fan_out 400)
    ('uniform_', dict(a=-2.0, b=3.0), (5 / math.sqrt(12), None)),
    ('normal_', dict(mean=1.0, std=0.5), (0.5, None)),
    ('xavier_uniform_', {}, (math.sqrt(2 / 1400), math.sqrt(6 / 1400))),
    ('xavier_uniform_', dict(gain=2.0), (2 * math.sqrt(2 / 1400), 2 * math.sqrt(6 / 1400))),
    ('xavier_normal_', dict(gain=0.5), (0.5 * math.sqrt(2 / 1400), None)),
    ('kaiming_uniform_', {}, (math.sqrt(2 / 1000), math.sqrt(6 / 1000))),
    ('kaiming_uniform_', dict(a=math.sqrt(5)), (1 / math.sqrt(3000), 1 / math.sqrt(1000))),
    ('kaiming_uniform_', dict(mode='fan_out', nonlinearity='relu'), (math.sqrt(2 / 400), math.sqrt(6 / 400))),
    ('kaiming_normal_', {}, (math.sqrt(2 / 1000), None)),
    ('kaiming_normal_', dict(mode='fan_out', nonlinearity='tanh'), (5 / 3 / math.sqrt(400), None)),
    ('kaiming_normal_', dict(a=0.2, nonlinearity='leaky_relu'), (math.sqrt(2 / 1.04 / 1000), None)),
]


@pytest.mark.parametrize('name,kwargs,expected', INITS)
def test_init_statistics(name, kwargs, expected):
    std, bound = expected
    fs.manual_seed(0); torch.manual_seed(0)
    t = fs.empty(400, 1000, dtype=fs.float64, requires_grad=True)
    version = t._version
    assert getattr(init, name)(t, **kwargs) is t
    assert t.is_leaf and t.requires_grad and t._version > version
    a = t.detach().numpy()
    b = getattr(torch.nn.init, name)(torch.empty(400, 1000, dtype=torch.float64), **kwargs).numpy()
    assert abs(a.std() - std) < 0.01 * std and abs(b.std() - std) < 0.01 * std
    assert abs(a.mean() - b.mean()) < 0.01 * std + 0.01 * abs(b.mean())
    if bound is not None:
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    if name == 'uniform_': assert a.min() >= -2 and a.max() < 3


def test_init_fills_and_float32():
    t = fs.empty(3, 4)
    assert init.zeros_(t).tolist() == [[0.0] * 4] * 3
    assert init.ones_(t).tolist() == [[1.0] * 4] * 3
    assert init.constant_(t, 0.25).tolist() == [[0.25] * 4] * 3
    assert init.kaiming_uniform_(t).dtype == fs.float32
    assert init.kaiming_normal_(fs.empty(0, 3)).shape == (0, 3)
    fs.manual_seed(5); a = init.normal_(fs.empty(3)).tolist()
    fs.manual_seed(5); b = init.normal_(fs.empty(3)).tolist()
    assert a == b


def test_init_errors():
    with pytest.raises(ValueError, match='Fan in and fan out can not be computed for tensor with fewer than 2 dimensions'):
        init.xavier_uniform_(fs.empty(3))
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported, please use one of \['fan_in', 'fan_out'\]"):
        init.kaiming_uniform_(fs.empty(3, 3), mode='fan_avg')
    with pytest.raises(ValueError, match='Unsupported nonlinearity'): init.kaiming_normal_(fs.empty(3, 3), nonlinearity='gelu')


# ---------------------------------------------------------------- training parity with torch over many steps

def make_mlp(lib, sizes, act='ReLU'):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(lib.Linear(a, b))
        if i < len(sizes) - 2: layers.append(getattr(lib, act)())
    return lib.Sequential(*layers)


def train_pair(sizes, dtype, steps, loss_name, act='ReLU', lr=0.1, batch=16, update='inplace', seed=0):
    "Train the same MLP in torch and ours with hand-written SGD; yield (loss, loss_t, model, model_t) each step."
    torch.manual_seed(seed)
    model_t = make_mlp(torch.nn, sizes, act).to(getattr(torch, str(np.dtype(dtype))))
    model = make_mlp(nn, sizes, act).to(dtype)
    model.load_state_dict(model_t.state_dict())
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((steps * batch, sizes[0])).astype(dtype)
    n_out = sizes[-1]
    Y = rng.integers(0, n_out, steps * batch) if loss_name == 'ce' else rng.standard_normal((steps * batch, n_out)).astype(dtype)
    loss_fn, loss_fn_t = ((nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()) if loss_name == 'ce'
                          else (nn.MSELoss(), torch.nn.MSELoss()))
    for step in range(steps):
        xb, yb = X[step * batch:(step + 1) * batch], Y[step * batch:(step + 1) * batch]
        loss, loss_t = loss_fn(model(ft(xb)), ft(yb)), loss_fn_t(model_t(tt(xb)), tt(yb))
        loss.backward(); loss_t.backward()
        yield loss, loss_t, model, model_t
        if update == 'inplace':
            with fs.no_grad():
                for p in model.parameters(): p -= lr * p.grad
        else:
            for p in model.parameters(): p.data -= lr * p.grad.data
        with torch.no_grad():
            for p in model_t.parameters(): p -= lr * p.grad
        model.zero_grad(); model_t.zero_grad()


@pytest.mark.parametrize('loss_name,act,update', [('ce', 'ReLU', 'inplace'), ('mse', 'Tanh', 'data'), ('ce', 'Sigmoid', 'data')])
def test_training_parity_float64(loss_name, act, update):
    for loss, loss_t, model, model_t in train_pair([20, 16, 12, 5], np.float64, 40, loss_name, act, update=update):
        check_close(loss, loss_t, rtol=1e-10)
        for (name, p), p_t in zip(model.named_parameters(), model_t.parameters()):
            check_close(p.grad, p_t.grad, rtol=1e-8, atol=1e-12, name=name)
    for p, p_t in zip(model.parameters(), model_t.parameters()): check_close(p, p_t, rtol=1e-8, atol=1e-12)


def test_training_parity_float32_mnist_shape():
    for loss, loss_t, model, model_t in train_pair([784, 50, 10], np.float32, 15, 'ce', lr=0.05, batch=64):
        check_close(loss, loss_t, rtol=1e-5)
        for (name, p), p_t in zip(model.named_parameters(), model_t.parameters()):
            check_close(p.grad, p_t.grad, rtol=1e-4, atol=1e-6, name=name)
    assert all(p.dtype == fs.float32 for p in model.parameters())


def test_fastbook_model():
    "fastbook's Going-to-PyTorch model: Sequential(Linear, ReLU, Linear) and MSE on the squeezed output."
    def build(lib):
        class Model(lib.Module):
            def __init__(self, n_in, nh, n_out):
                super().__init__()
                self.layers = lib.Sequential(lib.Linear(n_in, nh), lib.ReLU(), lib.Linear(nh, n_out))
                self.loss = lib.MSELoss()
            def forward(self, x, targ): return self.loss(self.layers(x).squeeze(-1), targ)
        return Model(784, 50, 1)
    torch.manual_seed(0)
    model_t, model = build(torch.nn), build(nn)
    model.load_state_dict(model_t.state_dict())
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 784)).astype(np.float32), rng.integers(0, 10, 32).astype(np.float32)
    loss, loss_t = model(ft(x), ft(y)), model_t(tt(x), tt(y))
    loss.backward(); loss_t.backward()
    check_close(loss, loss_t, rtol=1e-5)
    assert names(model.named_parameters()) == names(model_t.named_parameters())
    for (name, p), p_t in zip(model.named_parameters(), model_t.parameters()):
        check_close(p.grad, p_t.grad, rtol=1e-4, atol=1e-6, name=name)


@pytest.mark.parametrize('make', ['Linear', 'Conv2d', 'BatchNorm1d', 'BatchNorm2d', 'LayerNorm', 'Embedding'])
def test_a_modules_parameters_take_the_default_dtype_as_torchs_do(make):
    def kinds(lib):
        before = lib.get_default_dtype()
        lib.set_default_dtype(lib.float64)
        try:
            m = {'Linear': lambda: lib.nn.Linear(3, 4), 'Conv2d': lambda: lib.nn.Conv2d(1, 2, 3),
                 'BatchNorm1d': lambda: lib.nn.BatchNorm1d(3), 'BatchNorm2d': lambda: lib.nn.BatchNorm2d(3),
                 'LayerNorm': lambda: lib.nn.LayerNorm(3), 'Embedding': lambda: lib.nn.Embedding(3, 2)}[make]()
            return sorted((n, str(t.dtype).replace('torch.', '').replace('fromscratch.', ''))
                          for n, t in [*m.named_parameters(), *m.named_buffers()])
        finally: lib.set_default_dtype(before)
    assert kinds(fs) == kinds(torch)
