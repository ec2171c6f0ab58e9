"""The meta device against torch's: tensors with a shape and a dtype and no values. Ops give meta results of
torch's shapes and dtypes (forward and backward), reading values out is refused in torch's words, modules move
there and back (`to_empty`), and a meta tensor prints as torch's does."""
import copy

import numpy as np
import pytest
import torch

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import nn


def pair(shape, dtype='float32', requires_grad=False):
    "A meta tensor of ours and torch's, of `shape` and `dtype`."
    ours = fs.empty(shape, dtype=getattr(fs, dtype), device='meta', requires_grad=requires_grad)
    theirs = torch.empty(shape, dtype=getattr(torch, dtype), device='meta', requires_grad=requires_grad)
    return ours, theirs


def same_meta(ours, theirs):
    "Both on the meta device, of one shape and dtype."
    assert theirs.device.type == 'meta'
    assert ours.device == fs.device('meta') and ours.is_meta, repr(ours)
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert str(ours.dtype).split('.')[-1] == str(theirs.dtype).split('.')[-1], (ours.dtype, theirs.dtype)


def torch_repr(t): return repr(t).replace('fromscratch.', 'torch.')


OPS = {
    'add': lambda lib, a, b: a + b,
    'broadcast mul': lambda lib, a, b: a * b[0] - 2.5,
    'int with float': lambda lib, a, b: a.long() + b,
    'compare': lambda lib, a, b: (a > b) & (a < 1),
    'exp log tanh': lambda lib, a, b: a.exp().log().tanh().relu().sigmoid(),
    'pow clamp': lambda lib, a, b: (a ** 2).clamp(0, 1).sqrt(),
    'matmul': lambda lib, a, b: a @ b.transpose(0, 1),
    'batched matmul': lambda lib, a, b: a.unsqueeze(0).expand(4, 2, 3) @ b.t().unsqueeze(0),
    'sum mean': lambda lib, a, b: a.sum(0) + a.mean(1, keepdim=True),
    'max argmax': lambda lib, a, b: a.max(1).values + a.argmax(1),
    'var std norm': lambda lib, a, b: a.var(0) + a.std() + a.norm(),
    'reshape view': lambda lib, a, b: a.reshape(3, 2).view(6)[1:4].flatten(),
    'transpose permute': lambda lib, a, b: a.t().permute(1, 0).unsqueeze(-1).squeeze(),
    'index int slice': lambda lib, a, b: a[1, ::2],
    'index None ellipsis': lambda lib, a, b: a[None, ..., 1:],
    'cat stack': lambda lib, a, b: lib.cat([lib.stack([a, b]), a.unsqueeze(0)]),
    'where': lambda lib, a, b: lib.where(a > 0, a, b),
    'softmax': lambda lib, a, b: a.softmax(-1) + a.log_softmax(0),
    'double': lambda lib, a, b: a.double() * b,
    'einsum': lambda lib, a, b: lib.einsum('ij,kj->ik', a, b),
}


@pytest.mark.parametrize('name', list(OPS))
def test_ops_give_meta_results_of_torchs_shape_and_dtype(name):
    (a, ta), (b, tb) = pair((2, 3)), pair((2, 3))
    same_meta(OPS[name](fs, a, b), OPS[name](torch, ta, tb))


def test_nn_forward_and_backward_give_meta_gradients():
    x, tx = pair((4, 3, 8, 8), requires_grad=True)
    w, tw = pair((5, 3, 3, 3), requires_grad=True)
    target, ttarget = pair((4,), 'int64')
    y = F.cross_entropy(F.conv2d(x, w, padding=1).relu().flatten(1), target)
    ty = torch.nn.functional.cross_entropy(torch.nn.functional.conv2d(tx, tw, padding=1).relu().flatten(1), ttarget)
    same_meta(y, ty)
    assert torch_repr(y).split('grad_fn')[0] == repr(ty).split('grad_fn')[0]
    y.backward(); ty.backward()
    same_meta(w.grad, tw.grad)
    same_meta(x.grad, tx.grad)


def test_linear_on_meta():
    fs.manual_seed(0)
    lin, tlin = nn.Linear(3, 2).to('meta'), torch.nn.Linear(3, 2).to('meta')
    x, tx = pair((5, 3))
    same_meta(lin(x), tlin(tx))
    out, tout = lin(x).sum(), tlin(tx).sum()
    out.backward(); tout.backward()
    same_meta(lin.weight.grad, tlin.weight.grad)
    same_meta(lin.bias.grad, tlin.bias.grad)


def test_factories_and_to():
    for make in ('zeros', 'ones', 'empty', 'randn', 'rand'):
        same_meta(getattr(fs, make)(2, 3, device='meta'), getattr(torch, make)(2, 3, device='meta'))
    same_meta(fs.full((2,), 7, device='meta'), torch.full((2,), 7, device='meta'))
    same_meta(fs.zeros(2, device=fs.device('meta')), torch.zeros(2, device=torch.device('meta')))
    same_meta(fs.zeros_like(fs.ones(2, device='meta')), torch.zeros_like(torch.ones(2, device='meta')))
    x, tx = fs.ones(2, 3, dtype=fs.float64), torch.ones(2, 3, dtype=torch.float64)
    for args, kwargs in ((('meta',), {}), ((), {'device': 'meta'}), ((fs.device('meta'),), {})):
        targs = tuple(torch.device('meta') if isinstance(a, fs.device) else a for a in args)
        same_meta(x.to(*args, **kwargs), tx.to(*targs, **kwargs))
    same_meta(x.to('meta', fs.float32), tx.to('meta', torch.float32))
    same_meta(x.to(fs.ones(1, device='meta')), tx.to(torch.ones(1, device='meta')))
    assert fs.ones(2).to('cpu').device == fs.device('cpu') and not fs.ones(2).is_meta
    assert repr(fs.ones(2, device='meta').device) == repr(torch.ones(2, device='meta').device)
    assert fs.ones(2, 3, device='meta').stride() == torch.ones(2, 3, device='meta').stride()


def test_to_meta_keeps_the_history():
    x, tx = fs.ones(2, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True)
    y, ty = x.to('meta'), tx.to('meta')
    assert torch_repr(y) == repr(ty) and y.is_leaf == ty.is_leaf


@pytest.mark.parametrize('shape,dtype,requires_grad', [((2, 3), 'float32', False), ((), 'float32', False),
                                                       ((0,), 'float32', False), ((2,), 'float64', False),
                                                       ((4,), 'int64', False), ((2, 3), 'float32', True)])
def test_repr(shape, dtype, requires_grad):
    x, tx = pair(shape, dtype, requires_grad)
    assert torch_repr(x) == repr(tx)
    assert torch_repr(x * 2) == repr(tx * 2)
    assert str(x) == str(tx).replace('torch.', 'fromscratch.')


REFUSED = {
    'item of many': lambda t: t.item(),
    'item': lambda t: t[0, 0].item(),
    'float': lambda t: float(t[0, 0]),
    'bool of many': lambda t: bool(t),
    'bool': lambda t: bool(t[0, 0]),
    'tolist': lambda t: t.tolist(),
    'numpy': lambda t: t.numpy(),
    'np.asarray': lambda t: np.asarray(t),
    'cpu': lambda t: t.cpu(),
    'to cpu': lambda t: t.to('cpu'),
    'to device cpu': lambda t: t.to(device='cpu'),
}


@pytest.mark.parametrize('name', list(REFUSED))
def test_reading_values_is_refused_in_torchs_words(name):
    x, tx = pair((2, 3))
    with pytest.raises(Exception) as theirs: REFUSED[name](tx)
    with pytest.raises(type(theirs.value), match=None) as ours: REFUSED[name](x)
    assert str(ours.value) == str(theirs.value)


MIXED = {
    'meta + cpu': lambda lib, m, c: m + c,
    'cpu + meta': lambda lib, m, c: c + m,
    'meta * cpu': lambda lib, m, c: m * c,
    'cat': lambda lib, m, c: lib.cat([m, c]),
    'stack': lambda lib, m, c: lib.stack([c, m]),
    'compare': lambda lib, m, c: m == c,
    'where': lambda lib, m, c: lib.where(m > 0, c, 0.0),
}


@pytest.mark.parametrize('name', list(MIXED))
def test_meta_and_cpu_in_one_op(name):
    (m, tm), c, tc = pair((2, 3)), fs.ones(2, 3), torch.ones(2, 3)
    with pytest.raises(RuntimeError) as theirs: MIXED[name](torch, tm, tc)
    with pytest.raises(RuntimeError) as ours: MIXED[name](fs, m, c)
    assert str(ours.value) == str(theirs.value)


def test_a_zero_dim_cpu_tensor_goes_with_meta():
    m, tm = pair((2, 3))
    same_meta(m + fs.tensor(2.0), tm + torch.tensor(2.0))
    same_meta(m * fs.tensor(2.0, dtype=fs.float64), tm * torch.tensor(2.0, dtype=torch.float64))


def test_other_devices_are_still_refused():
    with pytest.raises(RuntimeError, match='CPU only'): fs.zeros(2, device='cuda')
    with pytest.raises(RuntimeError, match='CPU only'): fs.ones(2).to('cuda')
    with pytest.raises(RuntimeError): fs.set_default_device('meta')


def modules(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))


def test_module_to_meta_and_deepcopy():
    for move in (lambda m: m.to('meta'), lambda m: m.to(device='meta')):
        net, tnet = move(modules(fs)), move(modules(torch))
        for (name, p), (_, tp) in zip(net.named_parameters(), tnet.named_parameters()):
            same_meta(p, tp)
            assert type(p) is nn.Parameter and p.requires_grad and p.is_leaf, name
        for b, tb in zip(net.buffers(), tnet.buffers()): same_meta(b, tb)
        copied, tcopied = copy.deepcopy(net), copy.deepcopy(tnet)
        for p, tp in zip(copied.parameters(), tcopied.parameters()):
            same_meta(p, tp)
            assert type(p) is nn.Parameter
        assert torch_repr(next(copied.parameters())) == repr(next(tcopied.parameters()))


def test_module_off_meta_is_refused_and_to_empty_comes_back():
    net, tnet = modules(fs).to('meta'), modules(torch).to('meta')
    for move in (lambda m: m.to('cpu'), lambda m: m.cpu()):
        with pytest.raises(NotImplementedError) as theirs: move(tnet)
        with pytest.raises(NotImplementedError) as ours: move(net)
        assert str(ours.value) == str(theirs.value)
    net.to_empty(device='cpu'); tnet.to_empty(device='cpu')
    for p, tp in zip(net.parameters(), tnet.parameters()):
        assert p.device.type == tp.device.type == 'cpu' and p.shape == tp.shape and type(p) is nn.Parameter
    with fs.no_grad():
        for p in net.parameters(): p.fill_(0.5)
    assert net(fs.ones(2, 3)).shape == (2, 2)
    assert not modules(fs).to_empty(device='meta')[0].weight.device.type == 'cpu'


def test_meta_tensors_cost_no_memory():
    x = fs.zeros(100_000, 100_000, device='meta')
    assert x.shape == (100_000, 100_000) and x.array.strides == (0, 0)
    assert (x.T * 2).array.strides == (0, 0)


def test_empty_and_two_output_elementwise_ops():
    x, tx = pair((0, 3))
    same_meta(x + 1, tx + 1)
    same_meta(x.exp().sum(0), tx.exp().sum(0))
    y, ty = pair((2, 3))
    same_meta(y // 2, ty // 2)
    same_meta(y.long() % 3, ty.long() % 3)


FACTORIES = {
    'tensor': lambda lib, **kw: lib.tensor([[1.0, 2.0]], **kw),
    'tensor of ints': lambda lib, **kw: lib.tensor([1, 2, 3], **kw),
    'as_tensor': lambda lib, **kw: lib.as_tensor(np.arange(3.0), **kw),
    'as_tensor of a tensor': lambda lib, **kw: lib.as_tensor(lib.ones(2), **kw),
    'arange': lambda lib, **kw: lib.arange(5, **kw),
    'linspace': lambda lib, **kw: lib.linspace(0, 1, 4, **kw),
    'eye': lambda lib, **kw: lib.eye(3, **kw),
    'randint': lambda lib, **kw: lib.randint(0, 5, (2, 3), **kw),
    'normal': lambda lib, **kw: lib.normal(0.0, 1.0, (2,), **kw),
    'full_like': lambda lib, **kw: lib.full_like(lib.ones(2), 7.0, **kw),
    'rand_like': lambda lib, **kw: lib.rand_like(lib.ones(2, 1), **kw),
}


@pytest.mark.parametrize('name', list(FACTORIES))
def test_every_factory_makes_meta_tensors(name):
    same_meta(FACTORIES[name](fs, device='meta'), FACTORIES[name](torch, device='meta'))
    assert not FACTORIES[name](fs).is_meta
