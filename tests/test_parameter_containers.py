"""nn.ParameterList, nn.ParameterDict, `del` on Sequential, and loading state dicts without BatchNorm's counter, against torch."""
import copy
from collections import OrderedDict

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch import nn
from fromscratch.testing import check_close

LIBS = [(nn, fs), (torch.nn, torch)]


def same(f):
    "f(nn, lib) for our library and for torch, with torch's names written as ours; both results."
    out = [f(n, lib) for n, lib in LIBS]
    text = lambda x: repr(x).replace('torch.', 'fromscratch.')
    return text(out[0]), text(out[1])


def outcome(f):
    """What calling `f` gives: ('ok', its repr) or (the exception's type name, its message). Our Parameter adds a
    hint to torch's message for an integer tensor; it is cut here."""
    try: return 'ok', repr(f()).replace('torch.', 'fromscratch.')
    except Exception as e:
        return type(e).__name__, str(e).replace('torch.', 'fromscratch.').split(' (this one is int64')[0]


# ---------------------------------------------------------------- ParameterList

def list_edits(n, lib):
    "A sequence of edits on a ParameterList; what is seen after each."
    pl = n.ParameterList([n.Parameter(lib.ones(2, 3)), lib.zeros(4)])
    seen = []
    def snap():
        seen.append(([k for k, _ in pl.named_parameters()], list(pl.state_dict()), len(pl), repr(pl),
                     [type(p).__name__ for p in pl], [tuple(p.shape) if hasattr(p, 'shape') else p for p in pl]))
    for edit in (lambda: pl.append(lib.ones(2, dtype=lib.float64)), lambda: pl.extend([lib.ones(1), 'a note', None]),
                 lambda: pl.__setitem__(-3, lib.zeros(5)), lambda: pl.__setitem__(0, n.Parameter(lib.ones(7))),
                 lambda: pl.__iadd__([lib.ones(2, 2)]), lambda: pl.__iadd__(n.ParameterList([lib.ones(3)])),
                 lambda: pl.extend(lib.ones(2, 2) for _ in range(2)), lambda: pl.append(n.Linear(1, 1)),
                 lambda: pl.__setitem__(5, lib.ones(6))):
        edit(); snap()
    return seen


def test_parameter_list_edits_like_torch():
    ours, theirs = same(list_edits)
    assert ours == theirs


def test_parameter_list_indexing_and_slices_like_torch():
    def look(n, lib):
        pl = n.ParameterList([lib.ones(i + 1) for i in range(5)])
        return ([tuple(p.shape) for p in pl[1:4]], [tuple(p.shape) for p in pl[::-2]], type(pl[2:]).__name__,
                repr(pl[-2:]), repr(pl[7:]), tuple(pl[-1].shape), tuple(pl[np.int64(1)].shape), len(pl[:0]),
                pl[0] is pl[-5], [p is q for p, q in zip(pl[:2], pl)])
    ours, theirs = same(look)
    assert ours == theirs


def test_parameter_list_reprs_like_torch():
    def reprs(n, lib):
        return [repr(n.ParameterList()), repr(n.ParameterList([lib.ones(2)])), repr(n.ParameterList([n.Parameter(lib.tensor(2.0))])),
                repr(n.ParameterList([lib.ones(2, 3, 4, dtype=lib.float64), 3.5, 'x', None])),
                repr(n.ParameterList([n.Parameter(lib.ones(2), requires_grad=False)]))]
    ours, theirs = same(reprs)
    assert ours == theirs


def test_parameter_list_entries_become_parameters():
    for n, lib in LIBS:
        t = lib.ones(3, requires_grad=True) * 2                  # a non-leaf
        plain = lib.zeros(2)                                      # requires no grad
        pl = n.ParameterList([t, plain])
        assert all(isinstance(p, n.Parameter) and p.is_leaf and p.requires_grad for p in pl)
        assert pl[0].grad_fn is None
        p = n.Parameter(lib.ones(1))
        pl.append(p)
        assert pl[2] is p                                         # a Parameter goes in as it is
        pl2 = n.ParameterList([p, p])
        assert [k for k, _ in pl2.named_parameters()] == ['0'] and list(pl2.state_dict()) == ['0', '1']


def test_parameter_list_errors_like_torch():
    def errors(n, lib):
        pl = n.ParameterList([lib.ones(1)])
        cases = [lambda: pl[3], lambda: pl[-2], lambda: pl['0'], lambda: pl[1.0], lambda: pl.__setitem__(1, lib.ones(1)),
                 lambda: pl.extend(5), lambda: pl.extend(lib.ones(2)), lambda: n.ParameterList(5),
                 lambda: pl.append(lib.tensor([1, 2])), lambda: pl(), lambda: pl.__setitem__(0, 3)]
        return [outcome(c) for c in cases]
    ours, theirs = same(errors)
    assert ours == theirs


def test_parameter_list_failed_append_leaves_the_list_as_it_was():
    # torch counts the entry before converting it, so after this error its list is one entry longer than what
    # it holds (and iterating it fails); ours converts first and stays whole
    pl = nn.ParameterList([fs.ones(1)])
    with pytest.raises(RuntimeError, match='Only Tensors of floating point'): pl.append(fs.tensor([1, 2]))
    assert len(pl) == 1 and [tuple(p.shape) for p in pl] == [(1,)]


def model(n, lib):
    "A model whose weights sit in a ParameterList and a ParameterDict."
    class Net(n.Module):
        def __init__(self):
            super().__init__()
            self.weights = n.ParameterList([n.Parameter(lib.randn(3, 4)), n.Parameter(lib.randn(4, 2))])
            self.scale = n.ParameterDict({'out': n.Parameter(lib.ones(2)), 'in': n.Parameter(lib.ones(3))})
        def forward(self, x):
            x = x * self.scale['in']
            for w in self.weights: x = (x @ w).tanh()
            return x * self.scale['out']
    return Net()


def test_containers_in_a_model_train_save_and_load_like_torch():
    torch.manual_seed(0)
    net, net_t = model(nn, fs).double(), model(torch.nn, torch).double()
    assert list(net.state_dict()) == list(net_t.state_dict()) == ['weights.0', 'weights.1', 'scale.in', 'scale.out']
    assert [k for k, _ in net.named_parameters()] == [k for k, _ in net_t.named_parameters()]
    net.load_state_dict(net_t.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 3))
    out, out_t = net(fs.tensor(x)), net_t(torch.tensor(x))
    (out ** 2).sum().backward(); (out_t ** 2).sum().backward()
    check_close(out, out_t, rtol=1e-12)
    for (k, p), p_t in zip(net.named_parameters(), net_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-10, name=k)
    opt = fs.optim.SGD(net.parameters(), lr=0.1)
    assert len(opt.param_groups[0]['params']) == 4
    assert repr(net).replace('fromscratch.', 'torch.') == repr(net_t)
    copied = copy.deepcopy(net)
    assert list(copied.state_dict()) == list(net.state_dict()) and copied.weights[0] is not net.weights[0]
    check_close(copied(fs.tensor(x)), out, rtol=1e-12)


def test_containers_convert_with_to_and_freeze_with_requires_grad():
    for n, lib in LIBS:
        pl, pd = n.ParameterList([lib.ones(2)]), n.ParameterDict({'a': lib.ones(2)})
        pl.double(); pd.double()
        assert str(pl[0].dtype).split('.')[-1] == str(pd['a'].dtype).split('.')[-1] == 'float64'
        pd.requires_grad_(False)
        assert not pd['a'].requires_grad


# ---------------------------------------------------------------- ParameterDict

def dict_edits(n, lib):
    "A sequence of edits on a ParameterDict; what is seen after each."
    d = n.ParameterDict({'b': lib.ones(1), 'a': n.Parameter(lib.ones(2, 2))})
    seen = []
    def snap():
        seen.append((list(d), list(d.keys()), [k for k, _ in d.items()], [type(v).__name__ for v in d.values()],
                     [k for k, _ in d.named_parameters()], list(d.state_dict()), len(d), 'a' in d, 'zz' in d, repr(d),
                     list(reversed(d))))
    edits = (lambda: d.__setitem__('c', lib.zeros(3, dtype=lib.float64)), lambda: d.update([('e', lib.ones(1)), ['d', lib.ones(2)]]),
             lambda: d.update({'z': lib.ones(1), 'f': lib.ones(1)}), lambda: d.update(OrderedDict(y=lib.ones(1), g=lib.ones(1))),
             lambda: d.update(n.ParameterDict({'x': lib.ones(4)})), lambda: d.__setitem__('a', lib.ones(5)),
             lambda: d.pop('b'), lambda: d.__delitem__('c'), lambda: d.popitem(), lambda: d.setdefault('h', lib.ones(6)),
             lambda: d.setdefault('h', lib.ones(7)), lambda: d.__setitem__('note', 'text'), lambda: d.__setitem__('none', None),
             lambda: d.__ior__({'i': lib.ones(1)}), lambda: d.clear())
    for edit in edits:
        edit(); snap()
    return seen


def test_parameter_dict_edits_like_torch():
    ours, theirs = same(dict_edits)
    assert ours == theirs


def test_parameter_dict_lookups_copies_and_unions_like_torch():
    def look(n, lib):
        p = n.Parameter(lib.ones(2))
        d = n.ParameterDict(OrderedDict(b=p, a=lib.zeros(3)))
        c = d.copy()
        union, runion = d | {'w': lib.ones(1)}, {'w': lib.ones(1)} | d
        f, g = d.fromkeys(['u', 'v']), d.fromkeys(['u', 'v'], lib.ones(2))
        return (list(d), d['b'] is p, d.get('b') is p, d.get('q'), d.get('q', 3), type(c).__name__, list(c), c['b'] is p,
                type(union).__name__, list(union), list(d), type(runion).__name__, list(runion), repr(f), list(g), g['u'] is g['v'],
                list(n.ParameterDict([('z', lib.ones(1)), ('y', lib.ones(1))])), list(n.ParameterDict({'z': lib.ones(1), 'y': lib.ones(1)})),
                list(n.ParameterDict(d)), n.ParameterDict(d)['b'] is p, d.setdefault('b') is p, d.popitem()[0], list(d))
    ours, theirs = same(look)
    assert ours == theirs


def test_parameter_dict_reprs_like_torch():
    def reprs(n, lib):
        return [repr(n.ParameterDict()), repr(n.ParameterDict({'s': n.Parameter(lib.tensor(1.0))})),
                repr(n.ParameterDict({'a': lib.ones(2, 3, dtype=lib.float64), 'b': lib.ones(1, dtype=lib.float16)})),
                repr(n.ParameterDict({'a': lib.ones(1)}).fromkeys(['x', 'y']))]
    ours, theirs = same(reprs)
    assert ours == theirs


def test_parameter_dict_errors_like_torch():
    def errors(n, lib):
        d = n.ParameterDict({'a': lib.ones(1)})
        cases = [lambda: d['missing'], lambda: d.pop('missing'), lambda: d.__delitem__('missing'), lambda: d[1],
                 lambda: d.__setitem__(1, lib.ones(1)), lambda: d.__setitem__('', lib.ones(1)),
                 lambda: d.__setitem__('train', lib.ones(1)), lambda: d.__setitem__('x', lib.tensor([1, 2])),
                 lambda: n.ParameterDict().popitem(), lambda: d.update(5), lambda: d.update([1]), lambda: d.update([('k',)]),
                 lambda: d.update([('k', lib.ones(1), 3)]), lambda: n.ParameterDict(5)]
        return [outcome(c) for c in cases]
    ours, theirs = errors(nn, fs), errors(torch.nn, torch)
    assert len(ours) == len(theirs) == 14
    for (kind, message), (kind_t, message_t) in zip(ours, theirs):
        assert kind == kind_t
        # torch writes "should be Iterable; isint", without the space ours has
        assert message == message_t or message == message_t.replace('; isint', '; is int'), (message, message_t)


def test_parameter_dict_key_with_a_dot_like_torch():
    for n, lib in LIBS:
        d = n.ParameterDict()
        with pytest.raises(KeyError) as e: d['a.b'] = lib.ones(1)
        assert e.value.args[0] == 'parameter name can\'t contain "."'
    d = nn.ParameterDict({'a': fs.ones(1)})
    with pytest.raises(KeyError): d['a.b'] = fs.ones(1)
    d.clear()                 # torch records the key before refusing it, and its clear() then fails; ours does not
    assert len(d) == 0 and list(d.parameters()) == []


def test_parameter_dict_items_and_values_are_generators_like_torch():
    for n, lib in LIBS:
        d = n.ParameterDict({'a': lib.ones(1)})
        assert type(d.keys()).__name__ == 'dict_keys'
        assert type(d.items()).__name__ == type(d.values()).__name__ == 'generator'


# ---------------------------------------------------------------- del on Sequential and ModuleList

def deletions(n, lib):
    "Deletions from Sequentials built from arguments and from an OrderedDict; the names after each."
    seen = []
    def make():
        return n.Sequential(n.Linear(2, 2), n.ReLU(), n.Linear(2, 3), n.Tanh(), n.Linear(3, 1), n.ReLU())
    for idx in (0, -1, 2, np.int64(3), slice(1, 3), slice(None, None, 2), slice(5, 10), slice(None), slice(-2, None), slice(None, None, -2)):
        s = make()
        del s[idx]
        seen.append((list(s._modules), [k for k, _ in s.named_parameters()], list(s.state_dict()), repr(s), len(s)))
    named = n.Sequential(OrderedDict(a=n.ReLU(), b=n.Linear(1, 1), c=n.Tanh()))
    del named[0]
    seen.append((list(named._modules), list(named.state_dict())))
    named.append(n.ReLU())
    seen.append(list(named._modules))
    del named[1:]
    seen.append(list(named._modules))
    return seen


def test_sequential_del_like_torch():
    ours, theirs = same(deletions)
    assert ours == theirs


def test_sequential_del_keeps_the_model_working():
    torch.manual_seed(0)
    seq_t = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2), torch.nn.Tanh()).double()
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2), nn.Tanh()).double()
    seq.load_state_dict(seq_t.state_dict())
    del seq[:2]; del seq_t[:2]
    seq.load_state_dict(seq_t.state_dict())
    x = np.random.default_rng(1).standard_normal((4, 3))
    check_close(seq(fs.tensor(x)), seq_t(torch.tensor(x)), rtol=1e-12)


def test_sequential_and_module_list_index_errors_like_torch():
    def errors(n, lib):
        s, ml = n.Sequential(n.ReLU(), n.Tanh()), n.ModuleList([n.ReLU(), n.Tanh()])
        cases = []
        for c in (s, ml):
            cases += [lambda c=c: c.__delitem__(5), lambda c=c: c.__delitem__(-3), lambda c=c: c.__delitem__('a'),
                      lambda c=c: c.__delitem__(1.0), lambda c=c: c['a'], lambda c=c: c[2], lambda c=c: c.__setitem__(-3, n.ReLU())]
        return [outcome(c) for c in cases]
    ours, theirs = same(errors)
    assert ours == theirs


# ---------------------------------------------------------------- state dict versions; BatchNorm without num_batches_tracked

def test_state_dict_metadata_like_torch():
    def meta(n, lib):
        m = n.Sequential(n.Linear(2, 2), n.BatchNorm1d(2), n.Sequential(n.ReLU(), n.BatchNorm1d(2)))
        sd = m.state_dict()
        return dict(sd._metadata), list(sd), hasattr(m.state_dict(destination={}), '_metadata')
    ours, theirs = same(meta)
    assert ours == theirs


def trained_bn(n, lib, cls='BatchNorm1d', steps=3, **kw):
    bn = getattr(n, cls)(3, **kw)
    shape = (4, 3) if cls == 'BatchNorm1d' else (4, 3, 2, 2)
    for i in range(steps): bn(lib.tensor(np.random.default_rng(i).standard_normal(shape).astype(np.float32)))
    return bn


def plain(lib, names=('weight', 'bias', 'running_mean', 'running_var'), value=2.0):
    return {k: lib.full((3,), value) for k in names}


@pytest.mark.parametrize('cls', ['BatchNorm1d', 'BatchNorm2d'])
@pytest.mark.parametrize('strict', [True, False])
def test_batch_norm_loads_a_plain_dict_without_its_counter_like_torch(cls, strict):
    def load(n, lib):
        bn = trained_bn(n, lib, cls)
        result = repr(bn.load_state_dict(plain(lib), strict=strict))
        fresh = getattr(n, cls)(3)
        fresh_result = repr(fresh.load_state_dict(plain(lib), strict=strict))
        return (result, int(bn.num_batches_tracked), bn.running_mean.tolist(), bn.running_var.tolist(), bn.weight.tolist(),
                fresh_result, int(fresh.num_batches_tracked))
    ours, theirs = same(load)
    assert ours == theirs


def test_batch_norm_counter_loads_when_given_and_keys_missing_are_still_reported():
    def load(n, lib):
        bn = trained_bn(n, lib)
        with_count = dict(plain(lib), num_batches_tracked=lib.tensor(7))
        r1 = repr(bn.load_state_dict(with_count)); c1 = int(bn.num_batches_tracked)
        r2 = outcome(lambda: bn.load_state_dict(plain(lib, ('weight', 'bias'))))
        r3 = repr(bn.load_state_dict(plain(lib, ('weight',)), strict=False))
        r4 = outcome(lambda: bn.load_state_dict(dict(plain(lib), extra=lib.ones(1))))
        r5 = repr(n.BatchNorm1d(3, track_running_stats=False).load_state_dict(plain(lib, ('weight', 'bias'))))
        return r1, c1, r2, r3, int(bn.num_batches_tracked), r4, r5
    ours, theirs = same(load)
    assert ours == theirs


def test_a_newer_state_dict_without_the_counter_is_missing_a_key_like_torch():
    def load(n, lib):
        bn = trained_bn(n, lib)
        sd = bn.state_dict(); del sd['num_batches_tracked']
        strict = outcome(lambda: n.BatchNorm1d(3).load_state_dict(sd))
        loose = repr(n.BatchNorm1d(3).load_state_dict(sd, strict=False))
        old = OrderedDict(sd); old._metadata = {'': {'version': 1}}
        older = repr(n.BatchNorm1d(3).load_state_dict(old))
        nested = n.Sequential(n.Linear(3, 3), n.BatchNorm1d(3))
        nsd = nested.state_dict(); del nsd['1.num_batches_tracked']
        nested_newer = outcome(lambda: nested.load_state_dict(nsd))
        nsd._metadata = {'1': {'version': 1}}
        nested_older = repr(nested.load_state_dict(nsd))
        return strict, loose, older, nested_newer, nested_older
    ours, theirs = same(load)
    assert ours == theirs


def test_torch_state_dicts_load_into_ours_with_their_versions():
    torch.manual_seed(0)
    seq_t = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    seq_t(torch.randn(5, 3))
    seq = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    assert repr(seq.load_state_dict(seq_t.state_dict())) == '<All keys matched successfully>'
    assert int(seq[1].num_batches_tracked) == 1
    sd = seq_t.state_dict(); del sd['1.num_batches_tracked']             # torch's metadata says version 2
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "1.num_batches_tracked"'): seq.load_state_dict(sd)
    plain_t = {k: v for k, v in seq_t.state_dict().items() if 'num_batches' not in k}
    assert repr(seq.load_state_dict(plain_t)) == '<All keys matched successfully>' and int(seq[1].num_batches_tracked) == 1


def test_load_state_dict_leaves_the_given_dict_alone_and_refuses_a_non_mapping():
    for n, lib in LIBS:
        d = plain(lib)
        n.BatchNorm1d(3).load_state_dict(d)
        assert list(d) == ['weight', 'bias', 'running_mean', 'running_var']
        with pytest.raises(TypeError) as e: n.Linear(1, 1).load_state_dict([1])
        assert str(e.value) == "Expected state_dict to be dict-like, got <class 'list'>."


def test_shared_batch_norm_is_upgraded_under_each_name():
    def load(n, lib):
        bn = n.BatchNorm1d(3)
        m = n.Sequential(bn, n.ReLU(), bn)
        sd = {k: v for k, v in m.state_dict().items() if 'num_batches' not in k}
        return repr(m.load_state_dict(sd)), list(m.state_dict())
    ours, theirs = same(load)
    assert ours == theirs
