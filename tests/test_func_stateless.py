"""`fromscratch.func.functional_call` and `stack_module_state` against torch.func's: tied weights, strict
names, tuples of dicts, buffers, the errors, and a model's own tensors put back afterwards."""
import re

import numpy as np
import pytest
import torch

import fromscratch as fs
import fromscratch.func as ff
from fromscratch import nn


def model(lib, bias=True):
    "Layers a and b share one weight; a buffer; c is a BatchNorm1d (buffers running_mean, ...)."
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = lib.nn.Linear(3, 3, bias=bias), lib.nn.Linear(3, 3)
            self.b.weight = self.a.weight
            self.c = lib.nn.BatchNorm1d(3)
            self.register_buffer('shift', lib.ones(3, dtype=lib.float64))
        def forward(self, x, scale=1.0): return self.c(self.b(self.a(x).tanh())) * scale + self.shift
    return M().double()


def pair_of_models(bias=True):
    ours, theirs = model(fs, bias), model(torch, bias)
    with torch.no_grad():
        for (n, a), (m, b) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert n == m
            b.copy_(torch.tensor(a.detach().numpy()))
    return ours, theirs


def both(values):
    "The same named float64 arrays as fromscratch tensors and as torch tensors (None stays None)."
    conv = lambda f: {k: None if v is None else f(v) for k, v in values.items()}
    return conv(fs.tensor), conv(torch.tensor)


RNG = np.random.default_rng(0)
A = {n: RNG.standard_normal(s) for n, s in [('a.weight', (3, 3)), ('a.bias', (3,)), ('b.weight', (3, 3)),
                                           ('b.bias', (3,)), ('c.weight', (3,)), ('c.bias', (3,)),
                                           ('shift', (3,)), ('c.running_mean', (3,))]}
A['c.running_var'], A['c.num_batches_tracked'] = np.abs(RNG.standard_normal(3)) + 0.5, np.array(2)
X = RNG.standard_normal((4, 3))


def normalise(message):
    "Torch's error with our library's names in it, and without the reprs of tensors (each library's own)."
    message = message.replace('torch.nn.Module', 'fromscratch.nn.Module').replace('torch.Tensor', 'fromscratch.Tensor')
    return re.sub(r'`: .* is not an instance', '`: <tensor> is not an instance', message, flags=re.S)


def outcome(f):
    "f()'s result as an array, or its error as (type name, message)."
    try: out = f()
    except Exception as e: return type(e).__name__, normalise(str(e))
    return out.detach().numpy()


def agree(ours, theirs):
    o, t = outcome(ours), outcome(theirs)
    if isinstance(t, tuple) or isinstance(o, tuple): assert o == t
    else: np.testing.assert_allclose(o, t, rtol=1e-12, atol=1e-14)
    return t


NAMES = {  # which of A's tensors each case gives, and the extra ones
    'all': list(A), 'a.weight only': ['a.weight'], 'b.weight only': ['b.weight'],
    'both tied, same tensor': ['a.weight', 'b.weight=a.weight'], 'both tied, different': ['a.weight', 'b.weight'],
    'all but a.weight': [n for n in A if n != 'a.weight'], 'all but b.weight': [n for n in A if n != 'b.weight'],
    'params only': ['a.weight', 'a.bias', 'b.bias', 'c.weight', 'c.bias'], 'unexpected': list(A) + ['zz'],
    'unexpected and missing': ['a.weight', 'zz', 'yy'], 'none': [],
    'complete, tied': [n for n in A if n != 'b.weight'] + ['b.weight=a.weight'],
}


def values_for(names):
    out = {}
    for n in names:
        if '=' in n: n, same = n.split('='); out[n] = out[same]
        else: out[n] = A.get(n, np.ones(3))
    return out


def given(values, lib):
    "The values as tensors of lib, a tied pair ('b.weight=a.weight') as one tensor under both names."
    out, made = {}, {}
    for k, v in values.items():
        out[k] = made.setdefault(id(v), lib.tensor(v))
    return out


@pytest.mark.parametrize('strict', [False, True])
@pytest.mark.parametrize('tie_weights', [True, False])
@pytest.mark.parametrize('case', NAMES)
def test_functional_call_ties_and_strict_as_torch(case, tie_weights, strict):
    ours, theirs = pair_of_models()
    ours.eval(), theirs.eval()
    values = values_for(NAMES[case])
    kw = dict(tie_weights=tie_weights, strict=strict)
    agree(lambda: ff.functional_call(ours, given(values, fs), (fs.tensor(X),), **kw),
          lambda: torch.func.functional_call(theirs, given(values, torch), (torch.tensor(X),), **kw))
    assert not hasattr(ours, 'zz') and not hasattr(theirs, 'zz')           # an extra name goes after the call
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):   # their own tensors are back
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy())
    assert ours.b.weight is ours.a.weight


def test_the_strict_message_is_torchs_exactly():
    ours, theirs = pair_of_models()
    values = values_for(['a.weight', 'zz'])
    message = outcome(lambda: torch.func.functional_call(theirs, given(values, torch), (torch.tensor(X),), strict=True))
    assert message == ('RuntimeError', "Error(s) in reparametrizing for M:\n\tUnexpected key(s): 'zz'.\n\tMissing key(s): "
                       "'a.bias', 'b.bias', 'c.bias', 'c.num_batches_tracked', 'c.running_mean', 'c.running_var', "
                       "'c.weight', 'shift'.")
    assert outcome(lambda: ff.functional_call(ours, given(values, fs), (fs.tensor(X),), strict=True)) == message


@pytest.mark.parametrize('form', ['tuple', 'list', 'one dict'])
def test_parameters_and_buffers_in_several_dicts(form):
    ours, theirs = pair_of_models()
    ours.eval(), theirs.eval()
    def dicts(m, lib):
        params = {k: lib.tensor(A[k]) for k, _ in m.named_parameters()}
        buffers = {k: lib.tensor(A[k]) for k in ('shift', 'c.running_mean', 'c.running_var')}
        return {'tuple': (params, buffers), 'list': [params, buffers], 'one dict': {**params, **buffers}}[form]
    agree(lambda: ff.functional_call(ours, dicts(ours, fs), fs.tensor(X)),
          lambda: torch.func.functional_call(theirs, dicts(theirs, torch), torch.tensor(X)))


def test_arguments_keywords_and_bad_dicts_as_torch():
    ours, theirs = pair_of_models()
    x, xt = fs.tensor(X), torch.tensor(X)
    w, wt = fs.tensor(A['a.weight']), torch.tensor(A['a.weight'])
    cases = [
        (lambda lib, m, x, w: lib.func.functional_call(m, {}, (x,), {'scale': 2.0})),
        (lambda lib, m, x, w: lib.func.functional_call(m, {}, None, {'x': x, 'scale': 3.0})),
        (lambda lib, m, x, w: lib.func.functional_call(m, {'a.weight': w}, x)),
        (lambda lib, m, x, w: lib.func.functional_call(m, ({'a.weight': w}, {'a.weight': w}), (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, ({'a.bias': w[0]}, {'shift': w[0], 'a.bias': w[0]},
                                                         {'shift': w[1]}), (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, ({'a.weight': w}, 3), (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, 3, (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, {'d.x': w}, (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, {'a.weight.x': w}, (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, {'a.weight': 3}, (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, {'a.weight': w, 'c.bias': None}, (x,))),
        (lambda lib, m, x, w: lib.func.functional_call(m, {'a.': w}, (x,))),
    ]
    for case in cases:
        agree(lambda: case(fs, ours, x, w), lambda: case(torch, theirs, xt, wt))
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy())


def test_plain_attributes_missing_biases_and_reassignment():
    def counter(lib):
        class Counter(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer('count', lib.zeros(()))
                self.scale, self.t = 2.0, lib.ones(2)
            def forward(self, x):
                self.count = self.count + 1          # a new tensor, assigned: it ends in the caller's dict
                return x * self.t * self.count
        return Counter()
    for lib in (fs, torch):
        c, x = counter(lib), lib.ones(2)
        d = {'count': lib.tensor(5.0), 't': lib.tensor([1.0, 3.0])}
        out = lib.func.functional_call(c, d, (x,))
        assert out.tolist() == [6.0, 18.0] and d['count'].item() == 6.0 and c.count.item() == 0.0
        assert c.t.tolist() == [1.0, 1.0]
        with pytest.raises(TypeError, match=r"attribute `scale`: 2.0 is not an instance of (fromscratch|torch).Tensor"):
            lib.func.functional_call(c, {'scale': lib.ones(2)}, (x,))
        lin = lib.nn.Linear(2, 2, bias=False)        # a parameter registered as None can be given
        out = lib.func.functional_call(lin, {'weight': lib.zeros(2, 2), 'bias': lib.ones(2)}, (x[None],))
        assert out.tolist() == [[1.0, 1.0]] and lin.bias is None
        with pytest.raises(RuntimeError, match=r"Unexpected key\(s\): 'bias'\."):
            lib.func.functional_call(lin, {'weight': lib.zeros(2, 2), 'bias': lib.ones(2)}, (x[None],), strict=True)


def test_a_forward_that_raises_still_puts_the_tensors_back():
    for lib in (fs, torch):
        class Bad(lib.nn.Module):
            def __init__(self): super().__init__(); self.l = lib.nn.Linear(2, 2)
            def forward(self, x): raise ValueError('boom')
        bad = Bad(); w0 = bad.l.weight
        with pytest.raises(ValueError, match='boom'): lib.func.functional_call(bad, {'l.weight': lib.zeros(2, 2)}, (1,))
        assert bad.l.weight is w0
        with pytest.raises(AttributeError, match='Bad has no attribute `zz`'):
            lib.func.functional_call(bad, {'l.weight': lib.zeros(2, 2), 'zz.q': lib.zeros(2)}, (1,))
        assert bad.l.weight is w0


def test_batch_norm_in_training_updates_the_buffers_it_is_given():
    ours, theirs = pair_of_models()
    bufs = lambda lib: {k: lib.tensor(A[k]) for k in ('c.running_mean', 'c.running_var')} | {'c.num_batches_tracked': lib.tensor(3)}
    b, bt = bufs(fs), bufs(torch)
    out = ff.functional_call(ours, b, (fs.tensor(X),))
    outt = torch.func.functional_call(theirs, bt, (torch.tensor(X),))
    np.testing.assert_allclose(out.detach().numpy(), outt.detach().numpy(), rtol=1e-12)
    for k in b: np.testing.assert_allclose(b[k].numpy(), bt[k].numpy(), rtol=1e-12)   # updated in place, alike
    assert b['c.num_batches_tracked'].item() == 4 and ours.c.num_batches_tracked.item() == 0
    np.testing.assert_allclose(ours.c.running_mean.numpy(), 0)


def test_gradients_through_functional_call_with_buffers_in_eval():
    ours, theirs = pair_of_models()
    ours.eval(), theirs.eval()
    def loss(lib, m):
        return lambda p, b, x: lib.func.functional_call(m, (p, b), (x,)).pow(2).mean()
    p = {k: fs.tensor(A[k]) for k, _ in ours.named_parameters()}
    pt = {k: torch.tensor(A[k]) for k, _ in theirs.named_parameters()}
    b = {k: v.detach() for k, v in ours.named_buffers()} | {'shift': fs.tensor(A['shift'])}
    bt = {k: v.detach() for k, v in theirs.named_buffers()} | {'shift': torch.tensor(A['shift'])}
    g = ff.grad(loss(fs, ours))(p, b, fs.tensor(X))
    gt = torch.func.grad(loss(torch, theirs))(pt, bt, torch.tensor(X))
    assert list(g) == list(gt) == ['a.weight', 'a.bias', 'b.bias', 'c.weight', 'c.bias']   # one gradient for the tie
    for k in gt: np.testing.assert_allclose(g[k].numpy(), gt[k].numpy(), rtol=1e-10, atol=1e-12)
