"""fromscratch.optim against torch.optim: every option, many steps, from the same start."""
import itertools

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch import optim
from fromscratch.testing import check_close


def problem(seed, n=32, d=6, k=3):
    rng = np.random.default_rng(seed)
    X, W = rng.standard_normal((n, d)), rng.standard_normal((d, k))
    return X, X @ W + 0.1 * rng.standard_normal((n, k)), rng.standard_normal((d, k)), rng.standard_normal(k)


def grads_from_torch(X, Y, w, b):
    "The gradient of an MSE regression loss at (w, b), computed by torch (the engine is tested elsewhere)."
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    loss = ((torch.tensor(X) @ tw + tb - torch.tensor(Y)) ** 2).mean()
    loss.backward()
    return tw.grad.numpy(), tb.grad.numpy()


def run(ours_cls, torch_cls, kwargs, steps=120, seed=0, dtype=np.float64):
    """Step both optimizers `steps` times from the same start, fed the same gradients each step.

    The gradients are those of a regression loss at torch's current parameters, so both see a realistic
    sequence; feeding both the same ones keeps rounding differences from being amplified by the feedback
    of a chaotic trajectory, so the comparison can stay at float64 precision."""
    X, Y, w0, b0 = problem(seed)
    ours = [fs.tensor(w0.astype(dtype), requires_grad=True), fs.tensor(b0.astype(dtype), requires_grad=True)]
    theirs = [torch.tensor(w0.astype(dtype), requires_grad=True), torch.tensor(b0.astype(dtype), requires_grad=True)]
    o, t = ours_cls(ours, **kwargs), torch_cls(theirs, **kwargs)
    for _ in range(steps):
        gw, gb = grads_from_torch(X, Y, *(p.detach().numpy().astype(np.float64) for p in theirs))
        o.zero_grad(); t.zero_grad()
        ours[0].grad, ours[1].grad = fs.tensor(gw.astype(dtype)), fs.tensor(gb.astype(dtype))
        theirs[0].grad, theirs[1].grad = torch.tensor(gw.astype(dtype)), torch.tensor(gb.astype(dtype))
        o.step(); t.step()
    return [p.detach().numpy() for p in ours], [p.detach().numpy() for p in theirs]


SGD_OPTIONS = [dict(lr=lr, momentum=m, dampening=d, weight_decay=wd, nesterov=n, maximize=mx)
               for lr, m, d, wd, n, mx in itertools.product([0.1], [0, 0.9], [0, 0.3], [0, 1e-2], [False, True], [False, True])
               if not (n and (m == 0 or d != 0))]


@pytest.mark.parametrize('kwargs', SGD_OPTIONS, ids=lambda k: ','.join(f'{a}={b}' for a, b in k.items()))
def test_sgd_matches_torch(kwargs):
    ours, theirs = run(optim.SGD, torch.optim.SGD, kwargs)
    for a, b in zip(ours, theirs): check_close(a, b, rtol=1e-11, atol=1e-12)


ADAM_OPTIONS = [dict(lr=lr, betas=betas, eps=eps, weight_decay=wd, amsgrad=ams, maximize=mx)
                for lr, betas, eps, wd, ams, mx in itertools.product([1e-3, 0.05], [(0.9, 0.999), (0.5, 0.9)], [1e-8, 1e-3],
                                                                     [0, 0.1], [False, True], [False, True])]


@pytest.mark.parametrize('kwargs', ADAM_OPTIONS[::3], ids=lambda k: ','.join(f'{a}={b}' for a, b in k.items()))
@pytest.mark.parametrize('pair', [(optim.Adam, torch.optim.Adam), (optim.AdamW, torch.optim.AdamW)], ids=['Adam', 'AdamW'])
def test_adam_family_matches_torch(pair, kwargs):
    ours, theirs = run(*pair, kwargs)
    for a, b in zip(ours, theirs): check_close(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize('pair,kwargs', [((optim.SGD, torch.optim.SGD), dict(lr=0.05, momentum=0.9, nesterov=True)),
                                         ((optim.Adam, torch.optim.Adam), dict(lr=0.01)),
                                         ((optim.AdamW, torch.optim.AdamW), dict(lr=0.01))])
def test_float32_agrees_to_float32_precision(pair, kwargs):
    ours, theirs = run(*pair, kwargs, dtype=np.float32)
    for a, b in zip(ours, theirs):
        assert a.dtype == np.float32
        check_close(a, b, rtol=1e-5, atol=1e-6)


def test_adamw_defaults_to_weight_decay_0_01():
    p = fs.tensor([1.0], requires_grad=True)
    assert optim.AdamW([p]).param_groups[0]['weight_decay'] == torch.optim.AdamW([torch.ones(1, requires_grad=True)]).param_groups[0]['weight_decay']


def test_param_groups_fill_defaults_like_torch():
    a, b = fs.tensor([1.0], requires_grad=True), fs.tensor([2.0], requires_grad=True)
    ta, tb = torch.tensor([1.0], requires_grad=True), torch.tensor([2.0], requires_grad=True)
    ours = optim.SGD([{'params': [a], 'lr': 0.5}, {'params': b}], lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD([{'params': [ta], 'lr': 0.5}, {'params': tb}], lr=0.1, momentum=0.9)
    for g, tg in zip(ours.param_groups, theirs.param_groups):
        for key in ('lr', 'momentum', 'dampening', 'weight_decay', 'nesterov', 'maximize'):
            assert g[key] == tg[key], key
    a.grad, b.grad = fs.tensor([1.0]), fs.tensor([1.0])
    ours.step()
    assert a.item() == pytest.approx(0.5) and b.item() == pytest.approx(1.9)


def test_duplicate_parameter_rejected():
    a = fs.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match='more than one parameter group'):
        optim.SGD([{'params': [a]}, {'params': [a]}], lr=0.1)


def test_zero_grad_both_modes():
    a = fs.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([a], lr=0.1)
    a.grad = fs.tensor([3.0, 4.0])
    g = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is g and a.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert a.grad is None


def test_params_without_grad_are_skipped():
    a, b = fs.tensor([1.0], requires_grad=True), fs.tensor([1.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1, weight_decay=0.5)
    a.grad = fs.tensor([1.0])
    v = b._version
    opt.step()
    assert b.item() == 1.0 and b not in opt.state and b._version == v
    assert a.item() != 1.0 and a._version == v + 1


def test_torch_words_its_errors_the_same_way():
    p = [torch.tensor([1.0], requires_grad=True)]
    for make, message in [(lambda: torch.optim.SGD(p, lr=-1), 'Invalid learning rate: -1'),
                          (lambda: torch.optim.Adam(p, betas=(1.0, 0.9)), 'Invalid beta parameter at index 0: 1.0'),
                          (lambda: torch.optim.SGD(p, lr=0.1, nesterov=True), 'Nesterov momentum requires a momentum')]:
        with pytest.raises(ValueError, match=message):
            make()


@pytest.mark.parametrize('make,message', [
    (lambda p: optim.SGD(p, lr=-1), 'Invalid learning rate: -1'),
    (lambda p: optim.SGD(p, lr=0.1, momentum=-0.5), 'Invalid momentum value: -0.5'),
    (lambda p: optim.SGD(p, lr=0.1, weight_decay=-1), 'Invalid weight_decay value: -1'),
    (lambda p: optim.SGD(p, lr=0.1, nesterov=True), 'Nesterov momentum requires a momentum and zero dampening'),
    (lambda p: optim.Adam(p, eps=-1), 'Invalid epsilon value: -1'),
    (lambda p: optim.Adam(p, betas=(1.0, 0.9)), 'Invalid beta parameter at index 0: 1.0'),
    (lambda p: optim.Adam(p, betas=(0.9, -0.1)), 'Invalid beta parameter at index 1: -0.1'),
    (lambda p: optim.AdamW(p, weight_decay=-0.1), 'Invalid weight_decay value: -0.1')])
def test_argument_errors_use_torch_wording(make, message):
    with pytest.raises(ValueError, match=message.replace('(', r'\(').replace(')', r'\)').replace('.', r'\.')):
        make([fs.tensor([1.0], requires_grad=True)])


def test_empty_and_single_tensor_params_rejected():
    with pytest.raises(ValueError, match='empty parameter list'):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match='iterable of Tensors'):
        optim.SGD(fs.tensor([1.0], requires_grad=True), lr=0.1)


def test_step_bumps_version_and_updates_in_place():
    a = fs.tensor([1.0, 2.0], requires_grad=True)
    arr = a.array
    opt = optim.SGD([a], lr=0.5)
    a.grad = fs.tensor([1.0, 1.0])
    opt.step()
    assert a.array is arr and a.tolist() == [0.5, 1.5] and a._version == 1


def test_closure_returns_loss():
    a = fs.tensor([1.0], requires_grad=True)
    opt = optim.SGD([a], lr=0.1)
    def closure():
        opt.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss.item() == 1.0 and a.item() == pytest.approx(0.8)


def test_accumulated_micro_batches_equal_full_batch():
    X, Y, w0, b0 = problem(3, n=48)
    def step(chunks):
        w = fs.tensor(w0, requires_grad=True)
        opt = optim.SGD([w], lr=0.1, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            for Xc, Yc in zip(np.array_split(X, chunks), np.array_split(Y, chunks)):
                (((fs.tensor(Xc) @ w - fs.tensor(Yc)) ** 2).mean() / chunks).backward()
            opt.step()
        return w.detach().numpy()
    check_close(step(4), step(1), rtol=1e-10)


def test_frozen_parameter_does_not_move():
    X, Y, w0, b0 = problem(4)
    w = fs.tensor(w0, requires_grad=False)
    b = fs.tensor(b0, requires_grad=True)
    opt = optim.AdamW([w, b], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        ((fs.tensor(X) @ w + b - fs.tensor(Y)) ** 2).mean().backward()
        opt.step()
    assert np.array_equal(w.numpy(), w0) and not np.array_equal(b.detach().numpy(), b0)


# ---------------------------------------------------------------- what a mutation run found unchecked

@pytest.mark.parametrize('pair,kwargs', [((optim.SGD, torch.optim.SGD), dict(lr=0.1, weight_decay=1.0)),
                                         ((optim.SGD, torch.optim.SGD), dict(lr=0.1, momentum=0.5, weight_decay=1.0)),
                                         ((optim.Adam, torch.optim.Adam), dict(lr=0.05, weight_decay=1.0)),
                                         ((optim.AdamW, torch.optim.AdamW), dict(lr=0.05, weight_decay=1.0)),
                                         ((optim.Adam, torch.optim.Adam), dict(lr=0.05, betas=(0.5, 0.9))),
                                         ((optim.Adam, torch.optim.Adam), dict(lr=0.05, betas=(0.1, 0.9))),
                                         ((optim.Adam, torch.optim.Adam), dict(lr=0.05, betas=(0.0, 0.0), eps=0.0)),
                                         ((optim.Adam, torch.optim.Adam), dict(lr=0.0))], ids=str)
def test_boundary_settings_match_torch(pair, kwargs):
    "Weight decay of exactly 1, beta1 at the switch of torch's two lerp formulas (0.5) and on both sides of it."
    ours, theirs = run(*pair, kwargs, steps=20)
    for a, b in zip(ours, theirs): check_close(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize('pair', [(optim.SGD, torch.optim.SGD), (optim.Adam, torch.optim.Adam), (optim.AdamW, torch.optim.AdamW)])
def test_defaults_like_torch(pair):
    ours, theirs = pair[0]([fs.ones(1, requires_grad=True)]), pair[1]([torch.ones(1, requires_grad=True)])
    for key, value in ours.defaults.items(): assert theirs.defaults[key] == value, key


@pytest.mark.parametrize('make', [lambda o, p, v: o.SGD(p, lr=v), lambda o, p, v: o.Adam(p, lr=v), lambda o, p, v: o.Adam(p, eps=v),
                                  lambda o, p, v: o.Adam(p, betas=(v, 0.9)), lambda o, p, v: o.Adam(p, betas=(0.9, v)),
                                  lambda o, p, v: o.SGD(p, lr=0.1, momentum=v), lambda o, p, v: o.SGD(p, lr=0.1, weight_decay=v),
                                  lambda o, p, v: o.Adam(p, weight_decay=v)])
@pytest.mark.parametrize('value', [-1e-9, 0.0, 0.5, 1.0, 1.5])
def test_setting_bounds_like_torch(make, value):
    "Each setting at, just below and above the ends of its allowed range: accepted or refused as torch does."
    try: make(torch.optim, [torch.ones(1, requires_grad=True)], value)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e).split(':')[0]): make(optim, [fs.ones(1, requires_grad=True)], value)
    else: make(optim, [fs.ones(1, requires_grad=True)], value)


def test_amsgrad_state_has_torch_names():
    a, ta = fs.tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
    ours, theirs = optim.Adam([a], amsgrad=True), torch.optim.Adam([ta], amsgrad=True)
    a.grad, ta.grad = fs.tensor([0.5]), torch.tensor([0.5])
    ours.step(); theirs.step()
    assert set(ours.state[a]) == set(theirs.state[ta])


def test_step_returns_none_and_counts_versions():
    a, ta = fs.tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
    ours, theirs = optim.SGD([a], lr=0.1), torch.optim.SGD([ta], lr=0.1)
    for _ in range(3):
        a.grad, ta.grad = fs.tensor([0.5]), torch.tensor([0.5])
        assert ours.step() is None and theirs.step() is None
    assert a._version == ta._version == 3


def test_zero_grad_after_a_parameter_without_grad_and_of_a_graph_gradient():
    a, b, c = (fs.tensor([1.0, 2.0], requires_grad=True) for _ in range(3))
    opt = optim.SGD([a, b, c], lr=0.1)
    (b * b).sum().backward(create_graph=True)       # b.grad has a history
    c.grad = fs.tensor([1.0, 1.0])
    opt.zero_grad(set_to_none=False)
    assert a.grad is None and b.grad.tolist() == [0.0, 0.0] and b.grad.grad_fn is None and c.grad.tolist() == [0.0, 0.0]


def test_optimizer_rejects_what_torch_rejects_in_torch_words():
    for bad, exc, words in (([fs.ones(1, requires_grad=True), 'w'], TypeError, 'optimizer can only optimize Tensors'),
                            ([fs.ones(1, requires_grad=True) * 2], ValueError, "can't optimize a non-leaf Tensor")):
        with pytest.raises(exc, match=words): optim.SGD(bad, lr=0.1)
        tbad = [torch.ones(1, requires_grad=True), 'w'] if exc is TypeError else [torch.ones(1, requires_grad=True) * 2]
        with pytest.raises(exc, match=words): torch.optim.SGD(tbad, lr=0.1)


def test_repr_lists_each_group_and_its_settings():
    a, b = fs.ones(1, requires_grad=True), fs.ones(1, requires_grad=True)
    lines = repr(optim.SGD([{'params': [a]}, {'params': [b], 'lr': 0.5}], lr=0.1)).splitlines()
    assert lines[0] == 'SGD (' and lines[-1] == ')'
    assert [l for l in lines if l.startswith('Parameter Group')] == ['Parameter Group 0', 'Parameter Group 1']
    group1 = lines[lines.index('Parameter Group 1') + 1:-1]
    assert group1 == sorted(group1) and '    lr: 0.5' in group1 and not any('params' in l for l in group1)


# ---------------------------------------------------------------- RMSprop and Adagrad

RMSPROP_OPTIONS = [dict(lr=lr, alpha=a, eps=eps, weight_decay=wd, momentum=m, centered=c, maximize=mx)
                   for lr, a, eps, wd, m, c, mx in itertools.product([0.01], [0.99, 0.5], [1e-8, 1e-2], [0, 0.1], [0, 0.9],
                                                                     [False, True], [False, True])]


@pytest.mark.parametrize('kwargs', RMSPROP_OPTIONS[::2] + [RMSPROP_OPTIONS[-1]], ids=lambda k: ','.join(f'{a}={b}' for a, b in k.items()))
def test_rmsprop_matches_torch(kwargs):
    ours, theirs = run(optim.RMSprop, torch.optim.RMSprop, kwargs)
    for a, b in zip(ours, theirs): check_close(a, b, rtol=1e-11, atol=1e-12)


ADAGRAD_OPTIONS = [dict(lr=lr, lr_decay=d, weight_decay=wd, initial_accumulator_value=iav, eps=eps, maximize=mx)
                   for lr, d, wd, iav, eps, mx in itertools.product([0.1, 0.5], [0, 0.05], [0, 0.1], [0, 0.5], [1e-10, 1e-3], [False, True])]


@pytest.mark.parametrize('kwargs', ADAGRAD_OPTIONS[::3], ids=lambda k: ','.join(f'{a}={b}' for a, b in k.items()))
def test_adagrad_matches_torch(kwargs):
    ours, theirs = run(optim.Adagrad, torch.optim.Adagrad, kwargs)
    for a, b in zip(ours, theirs): check_close(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize('pair,kwargs', [((optim.RMSprop, torch.optim.RMSprop), dict(lr=0.01)),
                                         ((optim.RMSprop, torch.optim.RMSprop), dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
                                         ((optim.Adagrad, torch.optim.Adagrad), dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1))])
def test_rmsprop_adagrad_float32(pair, kwargs):
    ours, theirs = run(*pair, kwargs, dtype=np.float32)
    for a, b in zip(ours, theirs):
        assert a.dtype == np.float32
        check_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('pair', [(optim.RMSprop, torch.optim.RMSprop), (optim.Adagrad, torch.optim.Adagrad)], ids=['RMSprop', 'Adagrad'])
def test_new_optimizers_defaults_like_torch(pair):
    ours, theirs = pair[0]([fs.ones(1, requires_grad=True)]), pair[1]([torch.ones(1, requires_grad=True)])
    for key, value in ours.defaults.items(): assert theirs.defaults[key] == value, key


@pytest.mark.parametrize('make', [lambda o, p, v: o.RMSprop(p, lr=v), lambda o, p, v: o.RMSprop(p, alpha=v), lambda o, p, v: o.RMSprop(p, eps=v),
                                  lambda o, p, v: o.RMSprop(p, momentum=v), lambda o, p, v: o.RMSprop(p, weight_decay=v),
                                  lambda o, p, v: o.Adagrad(p, lr=v), lambda o, p, v: o.Adagrad(p, lr_decay=v),
                                  lambda o, p, v: o.Adagrad(p, weight_decay=v), lambda o, p, v: o.Adagrad(p, initial_accumulator_value=v),
                                  lambda o, p, v: o.Adagrad(p, eps=v)])
@pytest.mark.parametrize('value', [-1e-9, -1, 0.0, 0.5, 2.0])
def test_new_optimizers_refuse_what_torch_refuses_in_its_words(make, value):
    try: make(torch.optim, [torch.ones(1, requires_grad=True)], value)
    except ValueError as e:
        with pytest.raises(ValueError) as ours: make(optim, [fs.ones(1, requires_grad=True)], value)
        assert str(ours.value) == str(e)
    else: make(optim, [fs.ones(1, requires_grad=True)], value)


@pytest.mark.parametrize('make', [lambda o, p: o.RMSprop(p, momentum=0.9, centered=True), lambda o, p: o.RMSprop(p),
                                  lambda o, p: o.Adagrad(p, initial_accumulator_value=0.3)], ids=['rmsprop-all', 'rmsprop', 'adagrad'])
def test_state_names_and_values_like_torch(make):
    a, ta = fs.tensor([1.0, -2.0], requires_grad=True), torch.tensor([1.0, -2.0], requires_grad=True)
    ours, theirs = make(optim, [a]), make(torch.optim, [ta])
    for g in ([0.5, 0.1], [-0.2, 0.3]):
        a.grad, ta.grad = fs.tensor(g), torch.tensor(g)
        ours.step(); theirs.step()
    assert set(ours.state[a]) == set(theirs.state[ta])
    for k, v in ours.state[a].items():
        check_close(np.asarray(v, dtype=np.float64), theirs.state[ta][k].numpy().astype(np.float64), rtol=1e-6, name=k)


def test_adagrad_state_exists_before_the_first_step_and_ignores_a_groups_own_initial_value():
    a, b = fs.ones(2, requires_grad=True), fs.ones(3, requires_grad=True)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    ours = optim.Adagrad([{'params': [a]}, {'params': [b], 'initial_accumulator_value': 2.0}], initial_accumulator_value=0.5)
    theirs = torch.optim.Adagrad([{'params': [ta]}, {'params': [tb], 'initial_accumulator_value': 2.0}], initial_accumulator_value=0.5)
    c, tc = fs.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)
    ours.add_param_group({'params': [c], 'initial_accumulator_value': 3.0})
    theirs.add_param_group({'params': [tc], 'initial_accumulator_value': 3.0})
    for p, tp in ((a, ta), (b, tb)): assert ours.state[p]['sum'].tolist() == theirs.state[tp]['sum'].tolist()
    assert c not in ours.state and tc not in theirs.state
    for p, tp in ((a, ta), (b, tb), (c, tc)): p.grad, tp.grad = fs.ones(*p.shape), torch.ones(tp.shape)
    ours.step(); theirs.step()
    for p, tp in ((a, ta), (b, tb), (c, tc)):
        check_close(ours.state[p]['sum'], theirs.state[tp]['sum'], rtol=1e-7, name='sum')
        check_close(p, tp, rtol=1e-6)


# ---------------------------------------------------------------- state_dict and load_state_dict

ALL = [(optim.SGD, torch.optim.SGD, dict(lr=0.1)), (optim.SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
       (optim.Adam, torch.optim.Adam, dict(lr=0.05, amsgrad=True)), (optim.AdamW, torch.optim.AdamW, dict(lr=0.05)),
       (optim.RMSprop, torch.optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True)),
       (optim.Adagrad, torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.01))]
IDS = ['sgd', 'sgd-nesterov', 'adam-amsgrad', 'adamw', 'rmsprop', 'adagrad']


class Pair:
    "Three parameters in two groups, in both libraries; the last has no gradient at the first steps."
    def __init__(self, ours_cls, torch_cls, kwargs, seed=0):
        rng = np.random.default_rng(seed)
        self.init = [rng.standard_normal(s) for s in ((3, 2), (2,), (4,))]
        self.ours = [fs.tensor(v, requires_grad=True) for v in self.init]
        self.theirs = [torch.tensor(v, requires_grad=True) for v in self.init]
        self.o = ours_cls([{'params': self.ours[:2]}, {'params': self.ours[2:], 'lr': kwargs['lr'] / 2}], **kwargs)
        self.t = torch_cls([{'params': self.theirs[:2]}, {'params': self.theirs[2:], 'lr': kwargs['lr'] / 2}], **kwargs)
        self.rng = np.random.default_rng(seed + 1)

    def steps(self, n, skip_last=False):
        for _ in range(n):
            grads = [self.rng.standard_normal(v.shape) for v in self.init]
            for p, tp, g in zip(self.ours, self.theirs, grads):
                none = skip_last and p is self.ours[-1]
                p.grad, tp.grad = (None, None) if none else (fs.tensor(g), torch.tensor(g))
            self.o.step(); self.t.step()


@pytest.mark.parametrize('ours_cls,torch_cls,kwargs', ALL, ids=IDS)
def test_state_dict_has_torchs_layout_and_values(ours_cls, torch_cls, kwargs):
    pair = Pair(ours_cls, torch_cls, kwargs)
    pair.steps(3, skip_last=True)
    sd, tsd = pair.o.state_dict(), pair.t.state_dict()
    assert set(sd) == set(tsd) == {'state', 'param_groups'}
    assert list(sd['state']) == list(tsd['state'])
    for i, state in sd['state'].items():
        assert set(state) == set(tsd['state'][i])
        for k, v in state.items():
            assert isinstance(v, fs.Tensor) and str(v.dtype) == str(tsd['state'][i][k].dtype).replace('torch.', 'fromscratch.'), k
            check_close(v, tsd['state'][i][k], rtol=1e-12, name=k)
    assert len(sd['param_groups']) == len(tsd['param_groups']) == 2
    for g, tg in zip(sd['param_groups'], tsd['param_groups']):
        assert set(g) <= set(tg) and all(g[k] == tg[k] for k in g), (g, tg)
    assert [g['params'] for g in sd['param_groups']] == [[0, 1], [2]]


@pytest.mark.parametrize('ours_cls,torch_cls,kwargs', ALL, ids=IDS)
def test_resuming_from_a_state_dict_continues_the_run_exactly(ours_cls, torch_cls, kwargs):
    pair = Pair(ours_cls, torch_cls, kwargs)
    pair.steps(4, skip_last=True)
    saved_weights, saved = [p.detach().numpy().copy() for p in pair.ours], pair.o.state_dict()
    rng_state = pair.rng.bit_generator.state
    pair.steps(6)
    resumed = [fs.tensor(w, requires_grad=True) for w in saved_weights]
    opt = ours_cls([{'params': resumed[:2]}, {'params': resumed[2:]}], lr=123.0)     # the settings come from the state_dict
    opt.load_state_dict(saved)
    assert [g['lr'] for g in opt.param_groups] == [g['lr'] for g in pair.o.param_groups]
    rng = np.random.default_rng(); rng.bit_generator.state = rng_state
    for _ in range(6):
        for p, w in zip(resumed, saved_weights): p.grad = fs.tensor(rng.standard_normal(w.shape))
        opt.step()
    for p, q in zip(resumed, pair.ours): assert np.array_equal(p.detach().numpy(), q.detach().numpy())


@pytest.mark.parametrize('ours_cls,torch_cls,kwargs', ALL, ids=IDS)
def test_loading_torchs_state_dict_continues_like_torch(ours_cls, torch_cls, kwargs):
    pair = Pair(ours_cls, torch_cls, kwargs)
    pair.steps(5, skip_last=True)
    for p, tp in zip(pair.ours, pair.theirs): p.array[...] = tp.detach().numpy()      # start from torch's weights
    pair.o = ours_cls([{'params': pair.ours[:2]}, {'params': pair.ours[2:]}], lr=1.0)
    pair.o.load_state_dict(pair.t.state_dict())
    pair.steps(10)
    for p, tp in zip(pair.ours, pair.theirs): check_close(p, tp, rtol=1e-11, atol=1e-12)


def test_state_dict_is_a_snapshot_and_loading_copies():
    a = fs.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    a.grad = fs.tensor([1.0, 1.0]); opt.step()
    sd = opt.state_dict()
    before = sd['state'][0]['momentum_buffer'].tolist()
    opt.step()
    assert sd['state'][0]['momentum_buffer'].tolist() == before
    b = fs.tensor([1.0, 2.0], requires_grad=True)
    opt2 = optim.SGD([b], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    opt2.state[b]['momentum_buffer'] *= 0
    assert sd['state'][0]['momentum_buffer'].tolist() == before
    sd['param_groups'][0]['lr'] = 5.0
    assert opt2.param_groups[0]['lr'] == 0.1


def test_load_state_dict_casts_to_the_parameters_dtype_like_torch():
    a64, a32 = fs.tensor([1.0, 2.0], dtype=fs.float64, requires_grad=True), fs.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([a64], lr=0.1)
    a64.grad = fs.tensor([0.1, 0.2], dtype=fs.float64); opt.step()
    opt32 = optim.Adam([a32], lr=0.1)
    opt32.load_state_dict(opt.state_dict())
    assert opt32.state[a32]['exp_avg'].dtype == np.float32 and opt32.state[a32]['step'] == 1
    t64, t32 = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    topt = torch.optim.Adam([t64], lr=0.1); t64.grad = torch.tensor([0.1, 0.2], dtype=torch.float64); topt.step()
    topt32 = torch.optim.Adam([t32], lr=0.1); topt32.load_state_dict(topt.state_dict())
    assert topt32.state[t32]['exp_avg'].dtype == torch.float32


@pytest.mark.parametrize('groups_a,groups_b', [((1,), (1, 1)), ((2,), (1,)), ((1, 2), (2, 1))])
def test_load_state_dict_of_another_shape_fails_in_torchs_words(groups_a, groups_b):
    def make(lib, sizes, cls):
        return cls([{'params': [lib.ones(1, requires_grad=True) for _ in range(n)]} for n in sizes], lr=0.1)
    with pytest.raises(ValueError) as ours: make(fs, groups_b, optim.SGD).load_state_dict(make(fs, groups_a, optim.SGD).state_dict())
    with pytest.raises(ValueError) as theirs:
        make(torch, groups_b, torch.optim.SGD).load_state_dict(make(torch, groups_a, torch.optim.SGD).state_dict())
    assert str(ours.value) == str(theirs.value)


def test_add_param_group_then_state_dict_numbers_it_last():
    a, b = fs.ones(2, requires_grad=True), fs.ones(1, requires_grad=True)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)
    ours, theirs = optim.Adam([a], lr=0.1), torch.optim.Adam([ta], lr=0.1)
    ours.add_param_group({'params': b, 'lr': 0.01}); theirs.add_param_group({'params': tb, 'lr': 0.01})
    for p, tp in ((a, ta), (b, tb)): p.grad, tp.grad = fs.ones(*p.shape), torch.ones(tp.shape)
    ours.step(); theirs.step()
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert [g['params'] for g in sd['param_groups']] == [g['params'] for g in tsd['param_groups']] == [[0], [1]]
    assert [g['lr'] for g in sd['param_groups']] == [0.1, 0.01]
    check_close(b, tb, rtol=1e-6)


def test_state_dict_of_a_fresh_optimizer_is_empty_like_torchs():
    for cls, tcls in ((optim.SGD, torch.optim.SGD), (optim.Adam, torch.optim.Adam), (optim.RMSprop, torch.optim.RMSprop)):
        sd, tsd = cls([fs.ones(1, requires_grad=True)], lr=0.1).state_dict(), tcls([torch.ones(1, requires_grad=True)], lr=0.1).state_dict()
        assert sd['state'] == tsd['state'] == {}
    sd = optim.SGD([fs.ones(1, requires_grad=True)], lr=0.1)
    a = sd.param_groups[0]['params'][0]; a.grad = fs.ones(1); sd.step()
    assert sd.state_dict()['state'] == {}              # plain SGD keeps nothing, as torch's
