"""F.group_norm and nn.GroupNorm; F.smooth_l1_loss, F.huber_loss, F.kl_div and their modules, against torch."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import nn
from fromscratch.testing import check_close

RNG = np.random.default_rng(28)


def pair(a, requires_grad=True):
    "The array `a` as our tensor and as torch's."
    a = np.asarray(a)
    grad = requires_grad and a.dtype.kind == 'f'
    return fs.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def close_with_nans(ours, theirs, rtol=1e-12, atol=0.0, name=''):
    "Equal nan patterns, and close values elsewhere."
    a, b = np.asarray(ours.detach().numpy() if hasattr(ours, 'detach') else ours), theirs.detach().numpy()
    assert a.shape == b.shape, name
    assert (np.isnan(a) == np.isnan(b)).all(), (name, a, b)
    check_close(a[~np.isnan(a)], b[~np.isnan(b)], rtol=rtol, atol=atol, name=name)


def outcome(f):
    "('ok', None) or (the exception's type name, its message)."
    try: f(); return 'ok', None
    except Exception as e: return type(e).__name__, str(e)


# ---------------------------------------------------------------- group_norm

GN_CASES = [((2, 6, 5), 3), ((2, 6, 5), 1), ((2, 6, 5), 6), ((3, 4), 2), ((1, 4), 2), ((2, 4, 3, 3), 2), ((1, 8, 2, 2, 2), 4),
            ((4, 2, 7), 2)]


@pytest.mark.parametrize('shape, groups', GN_CASES)
@pytest.mark.parametrize('affine', ['both', 'weight', 'bias', 'none'])
def test_group_norm_values_and_gradients_like_torch(shape, groups, affine):
    xa = RNG.standard_normal(shape) * 4 + 2
    (x, x_t) = pair(xa)
    (w, w_t), (b, b_t) = pair(RNG.standard_normal(shape[1])), pair(RNG.standard_normal(shape[1]))
    w, w_t = (w, w_t) if affine in ('both', 'weight') else (None, None)
    b, b_t = (b, b_t) if affine in ('both', 'bias') else (None, None)
    if affine == 'bias':                    # torch's backward fails for a bias without a weight: compare with a weight of ones
        w_t = torch.ones(shape[1], dtype=torch.float64)
    out, out_t = F.group_norm(x, groups, w, b, eps=1e-4), TF.group_norm(x_t, groups, w_t, b_t, eps=1e-4)
    g = RNG.standard_normal(shape)
    (out * fs.tensor(g)).sum().backward(); (out_t * torch.tensor(g)).sum().backward()
    check_close(out, out_t, rtol=1e-10, atol=1e-12)
    check_close(x.grad, x_t.grad, rtol=1e-8, atol=1e-11, name='input')
    for t, t_t, name in ((w, w_t, 'weight'), (b, b_t, 'bias')):
        if t is not None: check_close(t.grad, t_t.grad, rtol=1e-9, atol=1e-12, name=name)


def test_group_norm_float32_and_default_eps():
    xa = (RNG.standard_normal((3, 6, 4)) * 10).astype(np.float32)
    wa, ba = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    out = F.group_norm(fs.tensor(xa), 2, fs.tensor(wa), fs.tensor(ba))
    out_t = TF.group_norm(torch.tensor(xa), 2, torch.tensor(wa), torch.tensor(ba))
    assert out.dtype == fs.float32
    check_close(out, out_t, rtol=1e-4, atol=1e-5)


def test_group_norm_second_derivatives_like_torch():
    xa, wa, ba = RNG.standard_normal((2, 4, 3)), RNG.standard_normal(4), RNG.standard_normal(4)
    results = []
    for lib, fn in ((fs, F.group_norm), (torch, TF.group_norm)):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in (xa, wa, ba))
        (gx,) = lib.autograd.grad((fn(x, 2, w, b) ** 3).sum(), x, create_graph=True)
        results.append(lib.autograd.grad((gx ** 2).sum(), (x, w, b)))
    for a, e in zip(*results): check_close(a, e, rtol=1e-8, atol=1e-10)


def test_group_norm_gradcheck():
    x = fs.tensor(RNG.standard_normal((2, 4, 3)), requires_grad=True)
    w, b = fs.tensor(RNG.standard_normal(4), requires_grad=True), fs.tensor(RNG.standard_normal(4), requires_grad=True)
    assert fs.autograd.gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b))


def test_group_norm_normalises_each_group():
    x = fs.tensor(RNG.standard_normal((3, 6, 5)) * 3 + 7)
    groups = F.group_norm(x, 3, eps=0.0).reshape(3, 3, -1).numpy()
    check_close(groups.mean(-1), np.zeros((3, 3)), atol=1e-6)
    check_close(groups.var(-1), np.ones((3, 3)), rtol=1e-5)


def test_group_norm_empty_inputs_like_torch():
    for shape in ((0, 4, 3), (2, 4, 0)):
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            out = F.group_norm(fs.ones(*shape), 2)
        assert tuple(out.shape) == tuple(TF.group_norm(torch.ones(*shape), 2).shape) == shape


GN_ERRORS = [
    lambda lib: (lib.ones(4), 2),
    lambda lib: (lib.ones(2, 4, 3), 3),
    lambda lib: (lib.ones(2, 4, 3), 8),
    lambda lib: (lib.ones(2, 4, 3), -2),
    lambda lib: (lib.ones(2, 4, 3), 0),
    lambda lib: (lib.ones(2, 4, 3), 2.0),
    lambda lib: (lib.ones(1, 2), 2),
    lambda lib: (lib.ones(1, 2, 1), 2),
    lambda lib: (lib.ones(2, 4, 3), 2, lib.ones(3)),
    lambda lib: (lib.ones(2, 4, 3), 2, lib.ones(2, 2)),
    lambda lib: (lib.ones(2, 4, 3), 2, None, lib.ones(5)),
    lambda lib: (lib.ones(2, 4, 3), 2, lib.ones(4, dtype=lib.float64)),
    lambda lib: (lib.ones(2, 4, 3, dtype=lib.float64), 2, lib.ones(4), lib.ones(4)),
    lambda lib: (lib.ones(2, 4, 3, dtype=lib.float64), 2, None, lib.ones(4)),
    lambda lib: (lib.ones(2, 4, 3, dtype=lib.int64), 2),
]


@pytest.mark.parametrize('make', GN_ERRORS)
def test_group_norm_errors_like_torch(make):
    ours, theirs = outcome(lambda: F.group_norm(*make(fs))), outcome(lambda: TF.group_norm(*make(torch)))
    assert ours[0] != 'ok'
    if 'Expected bias' in theirs[1]:
        # torch's message shows the weight's shape (or [0] without one) as the bias's; ours shows the bias's
        cut = lambda m: m.split(' but got')[0]
        assert (ours[0], cut(ours[1])) == (theirs[0], cut(theirs[1])) and 'bias of shape [5]' in ours[1]
    else:
        assert ours == theirs


@pytest.mark.parametrize('kw', [{}, {'affine': False}, {'bias': False}, {'eps': 1e-3}, {'affine': False, 'bias': True}])
def test_group_norm_module_like_torch(kw):
    gn, gn_t = nn.GroupNorm(3, 6, **kw), torch.nn.GroupNorm(3, 6, **kw)
    assert repr(gn) == repr(gn_t)
    assert list(gn.state_dict()) == list(gn_t.state_dict()) and list(gn.named_buffers()) == []
    assert (gn.num_groups, gn.num_channels, gn.eps, gn.affine) == (gn_t.num_groups, gn_t.num_channels, gn_t.eps, gn_t.affine)
    for p, p_t in zip(gn.parameters(), gn_t.parameters()):
        check_close(p, p_t, rtol=0) ; assert p.dtype == fs.float32 and p.requires_grad
    gn.double(); gn_t.double()
    if gn.weight is not None:
        wa = RNG.standard_normal(6)
        gn.weight.data = fs.tensor(wa); gn_t.weight.data = torch.tensor(wa)
    xa = RNG.standard_normal((4, 6, 3))
    (x, x_t) = pair(xa)
    out, out_t = gn(x), gn_t(x_t)
    (out ** 2).sum().backward(); (out_t ** 2).sum().backward()
    check_close(out, out_t, rtol=1e-10, atol=1e-12); check_close(x.grad, x_t.grad, rtol=1e-8, atol=1e-11)
    for (name, p), p_t in zip(gn.named_parameters(), gn_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-9, atol=1e-12, name=name)
    check_close(gn.eval()(fs.tensor(xa)), out.detach(), rtol=0)            # no running statistics: the same in evaluation


def test_group_norm_module_dtype_device_and_errors_like_torch():
    assert nn.GroupNorm(2, 4, dtype=fs.float64).weight.dtype == fs.float64
    with pytest.raises(RuntimeError, match='CPU only'): nn.GroupNorm(2, 4, device='cuda')
    for lib in (nn, torch.nn):
        with pytest.raises(ValueError) as e: lib.GroupNorm(3, 4)
        assert str(e.value) == 'num_channels (4) must be divisible by num_groups (3)'
        with pytest.raises(ZeroDivisionError): lib.GroupNorm(0, 4)
    assert repr(nn.GroupNorm(-2, 4)) == repr(torch.nn.GroupNorm(-2, 4))                 # accepted, refused at the forward
    assert outcome(lambda: nn.GroupNorm(2, 4)(fs.ones(2, 6))) == outcome(lambda: torch.nn.GroupNorm(2, 4)(torch.ones(2, 6)))
    assert outcome(lambda: nn.GroupNorm(2, 4)(fs.ones(4))) == outcome(lambda: torch.nn.GroupNorm(2, 4)(torch.ones(4)))
    assert outcome(lambda: nn.GroupNorm(2, 4)(fs.ones(2, 4, dtype=fs.float64))) == outcome(
        lambda: torch.nn.GroupNorm(2, 4)(torch.ones(2, 4, dtype=torch.float64)))


# ---------------------------------------------------------------- smooth_l1_loss and huber_loss

MISSES = np.array([[-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 0.25], [4.0, -2.0, 0.1, -0.1, 1.5, -1.5, 0.75, -0.75]])


def robust(name, ours_or_torch, setting):
    "smooth_l1_loss (setting = beta) or huber_loss (setting = delta), ours or torch's."
    fn = getattr(F if ours_or_torch == 'ours' else TF, name)
    key = 'beta' if name == 'smooth_l1_loss' else 'delta'
    return lambda x, t, **kw: fn(x, t, **{key: setting}, **kw)


@pytest.mark.parametrize('name, setting', [('smooth_l1_loss', 1.0), ('smooth_l1_loss', 0.5), ('smooth_l1_loss', 2.0),
                                           ('smooth_l1_loss', 0.0), ('huber_loss', 1.0), ('huber_loss', 0.5), ('huber_loss', 2.0)])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('target', ['zeros', 'random', 'row'])
def test_robust_losses_like_torch(name, setting, reduction, target):
    ta = {'zeros': np.zeros_like(MISSES), 'random': RNG.standard_normal(MISSES.shape) * 0.1, 'row': RNG.standard_normal(8)}[target]
    (x, x_t), (t, t_t) = pair(MISSES + (ta if target != 'row' else 0)), pair(ta)
    ours, theirs = robust(name, 'ours', setting), robust(name, 'torch', setting)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')                                             # the broadcast warning, tested below
        loss, loss_t = ours(x, t, reduction=reduction), theirs(x_t, t_t, reduction=reduction)
    g = RNG.standard_normal(tuple(loss_t.shape))
    (loss * fs.tensor(g)).sum().backward(); (loss_t * torch.tensor(g)).sum().backward()
    check_close(loss, loss_t, rtol=1e-12)
    check_close(x.grad, x_t.grad, rtol=1e-12, atol=1e-15, name='input')
    check_close(t.grad, t_t.grad, rtol=1e-12, atol=1e-15, name='target')


@pytest.mark.parametrize('name', ['smooth_l1_loss', 'huber_loss'])
def test_robust_losses_float32_and_second_derivative(name):
    xa, ta = MISSES.astype(np.float32), np.zeros_like(MISSES, dtype=np.float32)
    check_close(getattr(F, name)(fs.tensor(xa), fs.tensor(ta)), getattr(TF, name)(torch.tensor(xa), torch.tensor(ta)), rtol=1e-6)
    assert getattr(F, name)(fs.tensor(xa), fs.tensor(ta)).dtype == fs.float32
    grads = []
    for lib, fn in ((fs, getattr(F, name)), (torch, getattr(TF, name))):
        x = lib.tensor(MISSES * 0.7, requires_grad=True)
        (gx,) = lib.autograd.grad(fn(x, lib.zeros_like(x), reduction='sum'), x, create_graph=True)
        grads.append(lib.autograd.grad((gx ** 3).sum(), x)[0])
    check_close(grads[0], grads[1], rtol=1e-12)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_huber_weight_like_torch(reduction):
    (x, x_t), (t, t_t), (w, w_t) = pair(MISSES), pair(RNG.standard_normal(MISSES.shape)), pair(RNG.uniform(0, 2, MISSES.shape))
    loss, loss_t = F.huber_loss(x, t, reduction, 0.8, w), TF.huber_loss(x_t, t_t, reduction, 0.8, w_t)
    loss.sum().backward(); loss_t.sum().backward()
    check_close(loss, loss_t, rtol=1e-12)
    for a, e, name in ((x, x_t, 'input'), (t, t_t, 'target'), (w, w_t, 'weight')): check_close(a.grad, e.grad, rtol=1e-12, name=name)


def test_robust_loss_errors_like_torch():
    x, t = MISSES, np.zeros_like(MISSES)
    cases = [
        ('smooth_l1_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'beta': -1.0})),
        ('huber_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'delta': 0.0})),
        ('huber_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'delta': -2.0})),
        ('smooth_l1_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'reduction': 'max'})),
        ('huber_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'reduction': 'max'})),
        ('huber_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'weight': lib.ones(8)})),
        ('huber_loss', lambda lib: ((lib.tensor(x), lib.tensor(t)), {'weight': lib.ones(2, 8), 'reduction': 'max'})),
    ]
    for name, make in cases:
        args, kw = make(fs); args_t, kw_t = make(torch)
        ours, theirs = outcome(lambda: getattr(F, name)(*args, **kw)), outcome(lambda: getattr(TF, name)(*args_t, **kw_t))
        assert ours[0] != 'ok' and ours == theirs, (name, kw, ours, theirs)


@pytest.mark.parametrize('name', ['smooth_l1_loss', 'huber_loss'])
def test_robust_losses_broadcast_warning_like_torch(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        getattr(F, name)(fs.ones(3, 1), fs.ones(3)); getattr(TF, name)(torch.ones(3, 1), torch.ones(3))
    assert len(caught) == 2
    assert str(caught[0].message) == str(caught[1].message).replace('torch.Size', 'fromscratch.Size')
    assert caught[0].filename == __file__


@pytest.mark.parametrize('size_average, reduce', [(False, None), (None, False), (True, True)])
def test_smooth_l1_legacy_flags_like_torch(size_average, reduce):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        out = F.smooth_l1_loss(fs.tensor(MISSES), fs.zeros(2, 8, dtype=fs.float64), size_average, reduce)
        out_t = TF.smooth_l1_loss(torch.tensor(MISSES), torch.zeros(2, 8, dtype=torch.float64), size_average, reduce)
    check_close(out, out_t, rtol=1e-12)
    assert [str(w.message) for w in caught[:1]] == [str(w.message) for w in caught[1:]]


@pytest.mark.parametrize('make', [lambda n: n.SmoothL1Loss(), lambda n: n.SmoothL1Loss(reduction='sum', beta=0.3),
                                  lambda n: n.SmoothL1Loss(beta=0.0), lambda n: n.HuberLoss(), lambda n: n.HuberLoss('none', 2.5),
                                  lambda n: n.KLDivLoss(reduction='batchmean'), lambda n: n.KLDivLoss(reduction='sum', log_target=True)])
def test_loss_modules_like_torch(make):
    m, m_t = make(nn), make(torch.nn)
    assert repr(m) == repr(m_t) and list(m.state_dict()) == list(m_t.state_dict()) == []
    assert {k: getattr(m, k) for k in ('reduction', 'beta', 'delta', 'log_target') if hasattr(m_t, k)} == \
        {k: getattr(m_t, k) for k in ('reduction', 'beta', 'delta', 'log_target') if hasattr(m_t, k)}
    x = np.log(RNG.dirichlet(np.ones(5), size=3)); t = RNG.dirichlet(np.ones(5), size=3)
    if getattr(m_t, 'log_target', False): t = np.log(t)
    (a, a_t), (b, b_t) = pair(x), pair(t)
    loss, loss_t = m(a, b), m_t(a_t, b_t)
    loss.sum().backward(); loss_t.sum().backward()
    check_close(loss, loss_t, rtol=1e-12); check_close(a.grad, a_t.grad, rtol=1e-12); check_close(b.grad, b_t.grad, rtol=1e-12)


def test_loss_module_signatures_like_torch():
    import inspect
    for name in ('SmoothL1Loss', 'HuberLoss', 'KLDivLoss'):
        ours, theirs = inspect.signature(getattr(nn, name)), inspect.signature(getattr(torch.nn, name))
        assert [(p.name, p.default) for p in ours.parameters.values()] == [(p.name, p.default) for p in theirs.parameters.values()]
    for name in ('smooth_l1_loss', 'huber_loss', 'kl_div', 'group_norm'):
        ours, theirs = inspect.signature(getattr(F, name)), inspect.signature(getattr(TF, name))
        assert [(p.name, p.default) for p in ours.parameters.values()] == [(p.name, p.default) for p in theirs.parameters.values()]
    ours, theirs = inspect.signature(nn.GroupNorm), inspect.signature(torch.nn.GroupNorm)
    assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == [(p.name, p.default, p.kind) for p in theirs.parameters.values()]


# ---------------------------------------------------------------- kl_div

def kl_inputs(log_target, shape=(4, 5), zeros=True):
    x = np.log(RNG.dirichlet(np.ones(shape[-1]), size=shape[:-1]))
    t = RNG.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    if zeros: t.reshape(-1)[[1, 4]] = 0.0
    return x, (np.log(RNG.dirichlet(np.ones(shape[-1]), size=shape[:-1])) if log_target else t)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none', 'batchmean'])
@pytest.mark.parametrize('log_target', [False, True])
@pytest.mark.parametrize('shape', [(4, 5), (2, 3, 4), (6,)])
def test_kl_div_values_and_gradients_like_torch(reduction, log_target, shape):
    xa, ta = kl_inputs(log_target, shape)
    (x, x_t), (t, t_t) = pair(xa), pair(ta)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        loss, loss_t = F.kl_div(x, t, reduction=reduction, log_target=log_target), TF.kl_div(x_t, t_t, reduction=reduction, log_target=log_target)
    g = RNG.standard_normal(tuple(loss_t.shape))
    (loss * fs.tensor(g)).sum().backward(); (loss_t * torch.tensor(g)).sum().backward()
    check_close(loss, loss_t, rtol=1e-12)
    check_close(x.grad, x_t.grad, rtol=1e-12, name='input')
    close_with_nans(t.grad, t_t.grad, name='target')
    if not log_target: assert np.isnan(t.grad.numpy()).sum() == 2                      # at the two zeros, as torch


def test_kl_div_odd_values_like_torch():
    x = np.array([np.nan, -1.0, -1.0, -2.0, -np.inf, -1.0, 0.5])
    t = np.array([0.0, 0.0, -0.1, np.nan, 0.5, np.inf, 0.3])
    for log_target in (False, True):
        (a, a_t), (b, b_t) = pair(x), pair(t)
        with np.errstate(all='raise'):
            loss = F.kl_div(a, b, reduction='none', log_target=log_target)
        loss_t = TF.kl_div(a_t, b_t, reduction='none', log_target=log_target)
        close_with_nans(loss, loss_t, name=f'loss log_target={log_target}')
        with np.errstate(all='raise'):
            loss.sum().backward()
        loss_t.sum().backward()
        close_with_nans(a.grad, a_t.grad, name='input'); close_with_nans(b.grad, b_t.grad, name='target')


def test_kl_div_broadcasts_like_torch():
    for xs, ts in (((3, 4), (4,)), ((4,), (3, 4)), ((3, 1), (3, 4))):
        xa, ta = np.log(RNG.uniform(0.1, 1, xs)), RNG.uniform(0, 1, ts)
        (x, x_t), (t, t_t) = pair(xa), pair(ta)
        loss, loss_t = F.kl_div(x, t, reduction='batchmean'), TF.kl_div(x_t, t_t, reduction='batchmean')
        loss.backward(); loss_t.backward()
        check_close(loss, loss_t, rtol=1e-12)
        check_close(x.grad, x_t.grad, rtol=1e-12); check_close(t.grad, t_t.grad, rtol=1e-12)


def test_kl_div_batchmean_edge_cases_like_torch():
    for x, t in ((np.array(-1.0), np.array(0.5)), (np.zeros((0, 3)), np.zeros((0, 3)))):
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            loss = F.kl_div(fs.tensor(x), fs.tensor(t), reduction='batchmean')
        close_with_nans(loss, TF.kl_div(torch.tensor(x), torch.tensor(t), reduction='batchmean'))


def test_kl_div_float32_second_derivative_and_gradcheck():
    xa, ta = kl_inputs(False, zeros=False)
    loss = F.kl_div(fs.tensor(xa.astype(np.float32)), fs.tensor(ta.astype(np.float32)), reduction='batchmean')
    assert loss.dtype == fs.float32
    check_close(loss, TF.kl_div(torch.tensor(xa.astype(np.float32)), torch.tensor(ta.astype(np.float32)), reduction='batchmean'), rtol=1e-5)
    for log_target in (False, True):
        results = []
        for lib, fn in ((fs, F.kl_div), (torch, TF.kl_div)):
            x, t = lib.tensor(xa, requires_grad=True), lib.tensor(np.log(ta) if log_target else ta, requires_grad=True)
            gx, gt = lib.autograd.grad(fn(x, t, reduction='sum', log_target=log_target), (x, t), create_graph=True)
            results.append(lib.autograd.grad((gx ** 2).sum() + (gt ** 2).sum(), (x, t)))
        for a, e in zip(*results): check_close(a, e, rtol=1e-10, atol=1e-12)
        x, t = fs.tensor(xa, requires_grad=True), fs.tensor(np.log(ta) if log_target else ta, requires_grad=True)
        assert fs.autograd.gradcheck(lambda x, t: F.kl_div(x, t, reduction='sum', log_target=log_target), (x, t))


def test_kl_div_mixed_dtypes_like_torch():
    xa, ta = kl_inputs(False, zeros=False)
    for dx, dt in ((np.float32, np.float64), (np.float64, np.float32)):
        (x, x_t), (t, t_t) = pair(xa.astype(dx)), pair(ta.astype(dt))
        loss, loss_t = F.kl_div(x, t, reduction='sum'), TF.kl_div(x_t, t_t, reduction='sum')
        assert str(loss.dtype).split('.')[-1] == str(loss_t.dtype).split('.')[-1]
        loss.backward(); loss_t.backward()
        check_close(loss, loss_t, rtol=1e-6)
        for a, e in ((x, x_t), (t, t_t)):
            assert str(a.grad.dtype).split('.')[-1] == str(e.grad.dtype).split('.')[-1]
            check_close(a.grad, e.grad, rtol=1e-5)


def test_kl_div_is_one_node():
    x, t = fs.tensor(np.log([[0.5, 0.5]]), requires_grad=True), fs.tensor([[0.2, 0.8]])
    loss = F.kl_div(x, t, reduction='none')
    assert loss.grad_fn.name() == 'KLDivFunctionBackward'
    assert loss.grad_fn.next_functions[0][0].name() == 'AccumulateGrad'


def test_kl_div_mean_warning_like_torch():
    xa, ta = kl_inputs(False)
    for reduction in ('mean', 'sum', 'none', 'batchmean'):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            F.kl_div(fs.tensor(xa), fs.tensor(ta), reduction=reduction)
            TF.kl_div(torch.tensor(xa), torch.tensor(ta), reduction=reduction)
        assert len(caught) == (2 if reduction == 'mean' else 0)
        if caught:
            assert str(caught[0].message) == str(caught[1].message)
            assert caught[0].category is caught[1].category is UserWarning and caught[0].filename == __file__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        nn.KLDivLoss()(fs.tensor(xa), fs.tensor(ta))
    assert len(caught) == 1 and "'batchmean' divides only by the batch size" in str(caught[0].message)


@pytest.mark.parametrize('size_average, reduce, reduction', [(True, None, 'mean'), (False, None, 'mean'), (None, False, 'mean'),
                                                             (None, False, 'batchmean'), (True, True, 'batchmean')])
def test_kl_div_legacy_flags_like_torch(size_average, reduce, reduction):
    xa, ta = kl_inputs(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        out = F.kl_div(fs.tensor(xa), fs.tensor(ta), size_average, reduce, reduction)
        n = len(caught)
        out_t = TF.kl_div(torch.tensor(xa), torch.tensor(ta), size_average, reduce, reduction)
    check_close(out, out_t, rtol=1e-12)
    assert [str(w.message) for w in caught[:n]] == [str(w.message) for w in caught[n:]]


def test_kl_div_errors_like_torch():
    cases = [lambda lib: (lib.ones(2, dtype=lib.int64), lib.ones(2)), lambda lib: (lib.ones(2), lib.ones(2, dtype=lib.int64)),
             lambda lib: (lib.ones(2), lib.ones(3))]
    for make in cases:
        ours, theirs = outcome(lambda: F.kl_div(*make(fs), reduction='sum')), outcome(lambda: TF.kl_div(*make(torch), reduction='sum'))
        assert ours[0] == theirs[0] != 'ok'
        assert ours[1].startswith(theirs[1])            # ours goes on to say how shapes broadcast
    for reduction in ('max', 'batchmeans'):
        with pytest.raises(ValueError, match=f'{reduction} is not a valid value for reduction'):
            F.kl_div(fs.ones(2), fs.ones(2), reduction=reduction)
        with pytest.raises(ValueError, match=f'{reduction} is not a valid value for reduction'):
            TF.kl_div(torch.ones(2), torch.ones(2), reduction=reduction)


def test_new_names_in_the_namespaces():
    for name in ('ParameterList', 'ParameterDict', 'GroupNorm', 'SmoothL1Loss', 'HuberLoss', 'KLDivLoss'):
        assert getattr(nn, name).__module__.startswith('fromscratch.nn.modules.')
    for name in ('group_norm', 'smooth_l1_loss', 'huber_loss', 'kl_div'):
        assert callable(getattr(F, name))
    assert F.kl_div.__module__ == F.smooth_l1_loss.__module__ == F.huber_loss.__module__ == 'fromscratch.nn.functions.loss'
