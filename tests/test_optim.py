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
