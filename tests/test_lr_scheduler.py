"""fromscratch.optim.lr_scheduler against torch.optim.lr_scheduler: the same learning rates (and momenta), to the
last bit, at every step, for many settings; resuming, state_dict, warnings and errors as torch's."""
import gc
import itertools
import math
import warnings
import weakref

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch import optim
from fromscratch.optim import lr_scheduler
from fromscratch.testing import check_close

TL = torch.optim.lr_scheduler


def optimizers(name='SGD', lrs=(0.1, 0.03), **kwargs):
    "The optimizer `name` in fromscratch and in torch, a one-element parameter per group with the rates `lrs`."
    return [getattr(lib.optim, name)([{'params': [lib.zeros(1, requires_grad=True)], 'lr': lr} for lr in lrs], **kwargs)
            for lib in (fs, torch)]


def trace(opt, sched, steps, key=lambda g: g['lr']):
    "Per optimizer step: `key` of each group, the scheduler's last_epoch and get_last_lr(); the scheduler stepped after."
    out = []
    for _ in range(steps):
        out.append(([key(g) for g in opt.param_groups], sched.last_epoch, list(sched.get_last_lr())))
        opt.step(); sched.step()
    return out


def same_run(name, kwargs, steps=300, opt_name='SGD', key=lambda g: g['lr'], **opt_kwargs):
    opt, topt = optimizers(opt_name, **opt_kwargs)
    ours, theirs = getattr(lr_scheduler, name)(opt, **kwargs), getattr(TL, name)(topt, **kwargs)
    a, b = trace(opt, ours, steps, key), trace(topt, theirs, steps, key)
    assert a == b                                   # exactly: the same floats
    return a


CASES = [('StepLR', dict(step_size=s, gamma=g)) for s, g in itertools.product([1, 3, 30, 1000], [0.1, 0.5, 0.9, 1.0, 2.0])] + \
        [('MultiStepLR', dict(milestones=m, gamma=g)) for m, g in itertools.product(
            [[10, 40, 70], [70, 10], [5, 5, 5, 100], [], [0, 1, 2]], [0.1, 0.7])] + \
        [('ExponentialLR', dict(gamma=g)) for g in [0.5, 0.9, 0.99, 0.999, 1.0, 1.01]] + \
        [('CosineAnnealingLR', dict(T_max=t, eta_min=e)) for t, e in itertools.product([1, 2, 7, 50, 100, 301], [0.0, 1e-3, 0.05])]


@pytest.mark.parametrize('name,kwargs', CASES, ids=[f'{n}-{k}' for n, k in CASES])
def test_rates_equal_torchs_exactly(name, kwargs):
    same_run(name, kwargs)


def test_lambda_lr_one_function_or_one_per_group():
    warmup = lambda t: min(1.0, (t + 1) / 20)
    same_run('LambdaLR', dict(lr_lambda=warmup))
    same_run('LambdaLR', dict(lr_lambda=[warmup, lambda t: 0.97 ** t]))
    same_run('LambdaLR', dict(lr_lambda=(lambda t: 1 / (t + 1), lambda t: np.cos(t / 10) + 1.5)))


ONE_CYCLE = [dict(max_lr=m, total_steps=t, pct_start=p, anneal_strategy=a, div_factor=d, final_div_factor=f, three_phase=three)
             for m, t, p, a, d, f, three in itertools.product([0.3, [1.0, 0.05]], [1, 3, 10, 97, 625], [0.3, 0.25, 0.5, 1.0],
                                                               ['cos', 'linear'], [25.0, 4.0], [1e4, 10.0], [False, True])]
ONE_CYCLE = ONE_CYCLE[::5] + [dict(max_lr=0.2, epochs=4, steps_per_epoch=33), dict(max_lr=0.1, epochs=1, steps_per_epoch=1)]


def one_cycle_run(kwargs, opt_name, key, **opt_kwargs):
    "Both libraries' traces over the whole cycle, or the exception both raise."
    opt, topt = optimizers(opt_name, **opt_kwargs)
    try: theirs = TL.OneCycleLR(topt, **kwargs); b = trace(topt, theirs, theirs.total_steps, key)
    except Exception as e: error = e
    else: error = None
    if error is not None:
        with pytest.raises(type(error)): trace(opt, lr_scheduler.OneCycleLR(opt, **kwargs), 10**4, key)
        return None
    ours = lr_scheduler.OneCycleLR(opt, **kwargs)
    assert trace(opt, ours, ours.total_steps, key) == b
    return ours, theirs


@pytest.mark.parametrize('kwargs', ONE_CYCLE, ids=str)
@pytest.mark.parametrize('opt_name,key,opt_kwargs', [
    ('SGD', lambda g: (g['lr'], g['momentum']), dict(momentum=0.9)),
    ('SGD', lambda g: (g['lr'], g['momentum']), dict()),
    ('Adam', lambda g: (g['lr'], g['betas']), dict(betas=(0.9, 0.99))),
    ('RMSprop', lambda g: (g['lr'], g['momentum']), dict())], ids=['sgd-momentum', 'sgd', 'adam', 'rmsprop'])
def test_one_cycle_rates_and_momenta_equal_torchs(kwargs, opt_name, key, opt_kwargs):
    one_cycle_run(kwargs, opt_name, key, **opt_kwargs)


@pytest.mark.parametrize('kwargs', [dict(base_momentum=0.8, max_momentum=0.99), dict(base_momentum=[0.8, 0.5], max_momentum=[0.9, 0.95]),
                                    dict(cycle_momentum=False)], ids=str)
def test_one_cycle_momentum_settings(kwargs):
    for opt_name, key in (('SGD', lambda g: (g['lr'], g['momentum'])), ('AdamW', lambda g: (g['lr'], g['betas']))):
        one_cycle_run(dict(max_lr=0.5, total_steps=50, **kwargs), opt_name, key)


def test_one_cycle_stops_at_its_end_like_torch():
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=20), TL.OneCycleLR(topt, max_lr=0.5, total_steps=20)
    for _ in range(20): opt.step(); topt.step(); ours.step(); theirs.step()     # the last step sets the rate of step 20
    with pytest.raises(ValueError) as a: ours.step()
    with pytest.raises(ValueError) as b: theirs.step()
    assert str(a.value) == str(b.value) == 'Tried to step 21 times. The specified number of total steps is 20'


BAD_ONE_CYCLE = [dict(max_lr=0.1), dict(max_lr=0.1, epochs=3), dict(max_lr=0.1, total_steps=0), dict(max_lr=0.1, total_steps=2.0),
                 dict(max_lr=0.1, epochs=0, steps_per_epoch=3), dict(max_lr=0.1, epochs=2, steps_per_epoch=1.5),
                 dict(max_lr=0.1, total_steps=10, pct_start=1.5), dict(max_lr=0.1, total_steps=10, pct_start=1),
                 dict(max_lr=0.1, total_steps=10, anneal_strategy='exp'), dict(max_lr=[0.1, 0.2, 0.3], total_steps=10),
                 dict(max_lr=0.1, total_steps=10, base_momentum=[0.8]), dict(max_lr=0.1, total_steps=10, max_momentum=(0.9, 0.9, 0.9))]


@pytest.mark.parametrize('kwargs', BAD_ONE_CYCLE, ids=str)
def test_one_cycle_refuses_what_torch_refuses_in_its_words(kwargs):
    opt, topt = optimizers()
    with pytest.raises(ValueError) as theirs: TL.OneCycleLR(topt, **kwargs)
    with pytest.raises(ValueError) as ours: lr_scheduler.OneCycleLR(opt, **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_one_cycle_needs_a_momentum_to_cycle():
    a, ta = fs.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)
    with pytest.raises(ValueError) as theirs: TL.OneCycleLR(torch.optim.Adagrad([ta]), max_lr=0.1, total_steps=5)
    with pytest.raises(ValueError) as ours: lr_scheduler.OneCycleLR(optim.Adagrad([a]), max_lr=0.1, total_steps=5)
    assert str(ours.value) == str(theirs.value)
    same = lr_scheduler.OneCycleLR(optim.Adagrad([a]), max_lr=0.1, total_steps=5, cycle_momentum=False)
    assert same.get_last_lr() == TL.OneCycleLR(torch.optim.Adagrad([ta]), max_lr=0.1, total_steps=5, cycle_momentum=False).get_last_lr()


@pytest.mark.parametrize('make', [lambda L, o: L.StepLR(o, 10), lambda L, o: L.OneCycleLR(o, 0.1, 10), lambda L, o: L.CosineAnnealingLR(o, 10)])
def test_a_scheduler_needs_an_optimizer(make):
    with pytest.raises(TypeError) as theirs: make(TL, object())
    with pytest.raises(TypeError) as ours: make(lr_scheduler, object())
    assert str(ours.value) == str(theirs.value) == 'object is not an Optimizer'


def test_lambda_lr_wants_one_function_per_group():
    opt, topt = optimizers()
    with pytest.raises(ValueError) as theirs: TL.LambdaLR(topt, [lambda t: 1])
    with pytest.raises(ValueError) as ours: lr_scheduler.LambdaLR(opt, [lambda t: 1])
    assert str(ours.value) == str(theirs.value) == 'Expected 2 lr_lambdas, but got 1'


# ---------------------------------------------------------------- resuming

RESUMABLE = [('StepLR', dict(step_size=7, gamma=0.5)), ('StepLR', dict(step_size=5)), ('MultiStepLR', dict(milestones=[12, 20, 20])),
             ('ExponentialLR', dict(gamma=0.9)), ('CosineAnnealingLR', dict(T_max=13, eta_min=0.001)),
             ('LambdaLR', dict(lr_lambda=lambda t: 0.9 ** t)), ('OneCycleLR', dict(max_lr=0.4, total_steps=60))]


@pytest.mark.parametrize('name,kwargs', RESUMABLE, ids=[n for n, _ in RESUMABLE])
@pytest.mark.parametrize('k', [0, 4, 10, 20])
def test_built_with_last_epoch_like_torch(name, kwargs, k):
    "A scheduler built to resume at step k (the groups holding initial_lr) sets the same rates as torch's."
    opt, topt = optimizers(momentum=0.9)
    for o in (opt, topt):
        for g, start in zip(o.param_groups, (0.2, 0.05)):
            g.update(initial_lr=start, lr=start / 3, max_lr=0.4, min_lr=1e-6, max_momentum=0.95, base_momentum=0.85)
    ours, theirs = getattr(lr_scheduler, name)(opt, last_epoch=k, **kwargs), getattr(TL, name)(topt, last_epoch=k, **kwargs)
    assert trace(opt, ours, 30, lambda g: (g['lr'], g['momentum'])) == trace(topt, theirs, 30, lambda g: (g['lr'], g['momentum']))


def test_resuming_without_initial_lr_is_torchs_key_error():
    opt, topt = optimizers()
    with pytest.raises(KeyError) as theirs: TL.StepLR(topt, 3, last_epoch=5)
    with pytest.raises(KeyError) as ours: lr_scheduler.StepLR(opt, 3, last_epoch=5)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize('name,kwargs', RESUMABLE, ids=[n for n, _ in RESUMABLE])
def test_state_dict_resumes_exactly(name, kwargs):
    opt, _ = optimizers(momentum=0.9)
    sched = getattr(lr_scheduler, name)(opt, **kwargs)
    trace(opt, sched, 17)
    saved_opt, saved = opt.state_dict(), sched.state_dict()
    rest = trace(opt, sched, 40, lambda g: (g['lr'], g['momentum']))
    opt2, _ = optimizers(momentum=0.9)
    sched2 = getattr(lr_scheduler, name)(opt2, **kwargs)
    opt2.load_state_dict(saved_opt); sched2.load_state_dict(saved)
    assert trace(opt2, sched2, 40, lambda g: (g['lr'], g['momentum'])) == rest


@pytest.mark.parametrize('name,kwargs', RESUMABLE, ids=[n for n, _ in RESUMABLE])
def test_state_dict_has_torchs_entries_and_loads_torchs(name, kwargs):
    opt, topt = optimizers(momentum=0.9)
    ours, theirs = getattr(lr_scheduler, name)(opt, **kwargs), getattr(TL, name)(topt, **kwargs)
    trace(opt, ours, 9); trace(topt, theirs, 9)
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert set(sd) <= set(tsd) and {'last_epoch', 'base_lrs', '_last_lr', '_step_count'} <= set(sd)
    for k in sd:
        if k != 'lr_lambdas': assert sd[k] == tsd[k], k
    opt2, _ = optimizers(momentum=0.9)
    resumed = getattr(lr_scheduler, name)(opt2, **kwargs)
    opt2.load_state_dict(topt.state_dict()); resumed.load_state_dict(tsd)          # torch's checkpoint, in ours
    assert trace(opt2, resumed, 30, lambda g: (g['lr'], g['momentum'])) == trace(topt, theirs, 30, lambda g: (g['lr'], g['momentum']))


def test_lambda_lr_saves_the_state_of_callable_objects_only():
    class Decay:
        def __init__(self, rate): self.rate = rate
        def __call__(self, t): return self.rate ** t
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.LambdaLR(opt, [lambda t: 1.0, Decay(0.9)]), TL.LambdaLR(topt, [lambda t: 1.0, Decay(0.9)])
    assert ours.state_dict()['lr_lambdas'] == theirs.state_dict()['lr_lambdas'] == [None, {'rate': 0.9}]
    sd = ours.state_dict(); sd['lr_lambdas'][1]['rate'] = 0.5
    fresh = lr_scheduler.LambdaLR(optimizers()[0], [lambda t: 1.0, Decay(0.9)])
    fresh.load_state_dict(sd)
    assert fresh.lr_lambdas[1].rate == 0.5 and sd['lr_lambdas'] == [None, {'rate': 0.5}]


# ---------------------------------------------------------------- the base class

def test_step_with_an_epoch_warns_and_uses_the_closed_form_like_torch():
    for name, kwargs in RESUMABLE[:5]:
        opt, topt = optimizers()
        ours, theirs = getattr(lr_scheduler, name)(opt, **kwargs), getattr(TL, name)(topt, **kwargs)
        for epoch in (3, 12, 7, 40):
            opt.step(); topt.step()
            with pytest.warns(UserWarning) as a: ours.step(epoch)
            with pytest.warns(UserWarning) as b: theirs.step(epoch)
            assert str(a[0].message) == str(b[0].message)
            assert [g['lr'] for g in opt.param_groups] == [g['lr'] for g in topt.param_groups], (name, epoch)


@pytest.mark.parametrize('order', ['optimizer first', 'scheduler first', 'no optimizer step'])
def test_warns_about_the_order_of_the_steps_when_torch_does(order):
    def run(lib, L):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
        sched = L.StepLR(opt, 1, 0.5)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            for _ in range(3):
                if order == 'optimizer first': opt.step(); sched.step()
                elif order == 'scheduler first': sched.step(); opt.step()
                else: sched.step()
        return [str(w.message) for w in caught], opt.param_groups[0]['lr']
    assert run(fs, lr_scheduler) == run(torch, TL)


def test_chained_schedulers_on_one_optimizer_like_torch():
    opt, topt = optimizers()
    a, b = lr_scheduler.StepLR(opt, 4, 0.5), lr_scheduler.ExponentialLR(opt, 0.95)
    ta, tb = TL.StepLR(topt, 4, 0.5), TL.ExponentialLR(topt, 0.95)
    for _ in range(30):
        opt.step(); topt.step(); a.step(); b.step(); ta.step(); tb.step()
        assert [g['lr'] for g in opt.param_groups] == [g['lr'] for g in topt.param_groups]
        assert a.get_last_lr() == ta.get_last_lr() and b.get_last_lr() == tb.get_last_lr()


def test_the_step_watch_keeps_the_optimizer_working_and_collectable():
    w = fs.tensor([1.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    sched = lr_scheduler.StepLR(opt, 1)
    watch = opt.step
    lr_scheduler.ExponentialLR(opt, 0.9)                              # a second scheduler does not wrap it again
    assert opt.step is watch and not watch.called
    def closure():
        opt.zero_grad(); loss = (w * w).sum(); loss.backward(); return loss
    assert opt.step(closure).item() == 1.0 and watch.called and w.item() == 0.0     # 1 - 0.5 * 2
    ref = weakref.ref(opt)
    gc.disable()
    try:
        del opt, sched, watch
        assert ref() is None                                          # no reference cycle: freed at once
    finally: gc.enable()


def test_initial_lr_and_base_lrs_like_torch():
    opt, topt = optimizers()
    opt.param_groups[1]['initial_lr'] = topt.param_groups[1]['initial_lr'] = 0.7
    ours, theirs = lr_scheduler.ExponentialLR(opt, 0.5), TL.ExponentialLR(topt, 0.5)
    assert ours.base_lrs == theirs.base_lrs == [0.1, 0.7]
    assert [g['initial_lr'] for g in opt.param_groups] == [g['initial_lr'] for g in topt.param_groups]
    assert ours.get_last_lr() == theirs.get_last_lr() and ours.last_epoch == theirs.last_epoch == 0


# ---------------------------------------------------------------- training under a schedule

def problem(seed=0):
    rng = np.random.default_rng(seed)
    X, W = rng.standard_normal((32, 6)), rng.standard_normal((6, 3))
    return X, X @ W + 0.1 * rng.standard_normal((32, 3)), rng.standard_normal((6, 3))


@pytest.mark.parametrize('opt_name,opt_kwargs,name,kwargs', [
    ('SGD', dict(lr=0.1, momentum=0.9), 'OneCycleLR', dict(max_lr=0.1, total_steps=80)),
    ('SGD', dict(lr=0.1, momentum=0.9, nesterov=True), 'OneCycleLR', dict(max_lr=0.05, total_steps=80, three_phase=True)),
    ('Adam', dict(lr=0.05), 'OneCycleLR', dict(max_lr=0.05, total_steps=80, anneal_strategy='linear')),
    ('AdamW', dict(lr=0.05), 'CosineAnnealingLR', dict(T_max=80)),
    ('RMSprop', dict(lr=0.01, momentum=0.5), 'OneCycleLR', dict(max_lr=0.01, total_steps=80)),
    ('Adagrad', dict(lr=0.1), 'StepLR', dict(step_size=10, gamma=0.7))], ids=lambda v: v if isinstance(v, str) else None)
def test_training_under_a_schedule_matches_torch(opt_name, opt_kwargs, name, kwargs):
    "Both optimizers fed the same gradients (torch's, at torch's weights), so that rounding is not amplified."
    X, Y, w0 = problem()
    w, tw = fs.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    opt, topt = getattr(optim, opt_name)([w], **opt_kwargs), getattr(torch.optim, opt_name)([tw], **opt_kwargs)
    sched, tsched = getattr(lr_scheduler, name)(opt, **kwargs), getattr(TL, name)(topt, **kwargs)
    for _ in range(80):
        topt.zero_grad(); ((torch.tensor(X) @ tw - torch.tensor(Y)) ** 2).mean().backward()
        w.grad = fs.tensor(tw.grad.numpy().copy())
        opt.step(); topt.step(); sched.step(); tsched.step()
    check_close(w, tw, rtol=1e-11, atol=1e-12)


# ---------------------------------------------------------------- ReduceLROnPlateau

def plateau_metrics(kind, n=120, seed=0):
    "Metric sequences with plateaus: a rounded 1/(1+t/8), a noisy one, one that gets worse, and a constant one."
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return {'rounded': np.round(1 / (1 + t / 8), 2), 'noisy': 1 / (1 + t / 10) + 0.02 * rng.standard_normal(n),
            'stairs': np.repeat([5.0, 4.0, 3.99, 3.0, 2.9999, 2.0, 2.0, 1.5], n // 8), 'worse': 0.5 + t / 100,
            'constant': np.full(n, 0.3), 'negative': -np.round(1 / (1 + t / 8), 2) - 1}[kind]


def plateau_trace(lib_pair, metrics, kwargs, opt_name='SGD', lrs=(0.1, 0.03), **opt_kwargs):
    "Per step of a ReduceLROnPlateau of ours and torch's: the groups' rates, get_last_lr(), the counters; equal."
    opt, topt = optimizers(opt_name, lrs, **opt_kwargs)
    ours, theirs = lr_scheduler.ReduceLROnPlateau(opt, **kwargs), TL.ReduceLROnPlateau(topt, **kwargs)
    out = []
    for o, s in ((opt, ours), (topt, theirs)):
        seen = []
        for m in metrics:
            o.step(); s.step(m)
            seen.append(([g['lr'] for g in o.param_groups], list(s.get_last_lr()), s.last_epoch, s.best, s.num_bad_epochs,
                         s.cooldown_counter, s.in_cooldown))
        out.append(seen)
    assert out[0] == out[1]                          # exactly: the same floats
    return out[0]


PLATEAU = [dict(mode=m, threshold_mode=tm, threshold=th, patience=p, cooldown=c, factor=f)
           for m, tm, th, p, c, f in itertools.product(['min', 'max'], ['rel', 'abs'], [1e-4, 0.01, 0.1], [0, 2, 10], [0, 3], [0.1, 0.5])]


@pytest.mark.parametrize('kwargs', PLATEAU, ids=str)
@pytest.mark.parametrize('kind', ['rounded', 'noisy', 'stairs'])
def test_plateau_rates_equal_torchs_exactly(kwargs, kind):
    metrics = plateau_metrics(kind)
    if kwargs['mode'] == 'max': metrics = -metrics
    plateau_trace(None, metrics, kwargs)


@pytest.mark.parametrize('kind', ['worse', 'constant', 'negative'])
@pytest.mark.parametrize('kwargs', [dict(), dict(patience=1, min_lr=0.01), dict(patience=0, min_lr=[0.02, 0.001], factor=0.3),
                                    dict(patience=1, eps=0.005), dict(patience=1, eps=0.5), dict(mode='max', patience=3),
                                    dict(threshold_mode='abs', threshold=-0.1, patience=1)], ids=str)
def test_plateau_min_lr_eps_and_odd_metrics_like_torch(kind, kwargs):
    rates = plateau_trace(None, plateau_metrics(kind), kwargs)
    if kind == 'worse' and kwargs.get('min_lr') == 0.01:
        # 0.1 * 0.1 is 0.010000000000000002; the last step to min_lr, 2e-18, is below eps and not made, in torch too
        assert rates[-1][0] == [0.1 * 0.1, 0.01]


def test_plateau_metric_types_like_torch():
    values = [1.0, np.float32(0.9), np.float64(0.9), 1, fs.tensor(0.8), fs.tensor([0.85]), torch.tensor(0.7)]
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.ReduceLROnPlateau(opt, patience=0), TL.ReduceLROnPlateau(topt, patience=0)
    for v in values:
        ours.step(v); theirs.step(torch.tensor(v.numpy()) if isinstance(v, fs.Tensor) else v)
        assert (ours.best, ours.get_last_lr(), type(ours.best)) == (theirs.best, theirs.get_last_lr(), type(theirs.best))
    for bad in ('abc', None):
        with pytest.raises((ValueError, TypeError)) as a: ours.step(bad)
        with pytest.raises((ValueError, TypeError)) as b: theirs.step(bad)
        assert (type(a.value), str(a.value)) == (type(b.value), str(b.value))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'metrics'"): ours.step()


def test_plateau_with_adam_and_a_group_added_later_like_torch():
    for kwargs in (dict(patience=1, min_lr=0.001), dict(patience=1, min_lr=[0.001, 0.002])):
        results = []
        for lib, L in ((fs, lr_scheduler), (torch, TL)):
            opt = lib.optim.Adam([{'params': [lib.zeros(1, requires_grad=True)], 'lr': 0.1},
                                  {'params': [lib.zeros(1, requires_grad=True)], 'lr': 0.01}])
            sched = L.ReduceLROnPlateau(opt, **kwargs)
            for _ in range(3): sched.step(1.0)
            opt.add_param_group({'params': [lib.zeros(1, requires_grad=True)], 'lr': 0.05})
            try:
                for _ in range(3): sched.step(1.0)
                results.append(('ok', [g['lr'] for g in opt.param_groups], sched.min_lrs))
            except RuntimeError as e:
                results.append(('RuntimeError', str(e)))
        assert results[0] == results[1]


def test_plateau_state_dict_has_torchs_entries_in_torchs_order():
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.ReduceLROnPlateau(opt, patience=1, cooldown=2), TL.ReduceLROnPlateau(topt, patience=1, cooldown=2)
    assert list(ours.state_dict()) == list(theirs.state_dict()) and ours.state_dict() == theirs.state_dict()
    for m in plateau_metrics('rounded')[:30]: ours.step(m); theirs.step(m)
    assert list(ours.state_dict()) == list(theirs.state_dict()) and ours.state_dict() == theirs.state_dict()
    assert 'optimizer' not in ours.state_dict() and list(vars(ours)) == list(vars(theirs))


@pytest.mark.parametrize('kwargs', [dict(patience=2, cooldown=1), dict(mode='max', threshold_mode='abs', threshold=0.01, patience=1),
                                    dict(patience=0, min_lr=[0.001, 0.0001])], ids=str)
@pytest.mark.parametrize('at', [0, 7, 31])
def test_plateau_state_dict_round_trips_and_loads_torchs(kwargs, at):
    metrics = plateau_metrics('noisy', 80, seed=at)
    if kwargs.get('mode') == 'max': metrics = -metrics
    whole = plateau_trace(None, metrics, kwargs)
    for source in ('ours', 'torch'):
        opt, topt = optimizers()
        sched = (lr_scheduler.ReduceLROnPlateau(opt, **kwargs), TL.ReduceLROnPlateau(topt, **kwargs))[source == 'torch']
        o = (opt, topt)[source == 'torch']
        for m in metrics[:at]: o.step(); sched.step(m)
        saved_opt, saved = o.state_dict(), sched.state_dict()
        opt2, _ = optimizers()
        resumed = lr_scheduler.ReduceLROnPlateau(opt2, mode=kwargs.get('mode', 'min'))      # other settings: loaded
        opt2.load_state_dict(saved_opt); resumed.load_state_dict(saved)
        rest = []
        for m in metrics[at:]:
            opt2.step(); resumed.step(m)
            rest.append(([g['lr'] for g in opt2.param_groups], list(resumed.get_last_lr()), resumed.last_epoch, resumed.best,
                         resumed.num_bad_epochs, resumed.cooldown_counter, resumed.in_cooldown))
        assert rest == whole[at:], source


def test_plateau_load_state_dict_checks_the_modes_like_torch():
    for L, opt in ((lr_scheduler, optimizers()[0]), (TL, optimizers()[1])):
        sched = L.ReduceLROnPlateau(opt)
        sd = sched.state_dict(); sd['mode'] = 'max'
        sched.load_state_dict(sd)
        assert sched.mode_worse == -math.inf and sched.best == math.inf        # the best value is not reset
        sd['threshold_mode'] = 'relative'
        with pytest.raises(ValueError, match='threshold mode relative is unknown!'): sched.load_state_dict(sd)


def test_plateau_errors_like_torch():
    cases = [dict(factor=1.0), dict(factor=2), dict(mode='minimum'), dict(threshold_mode='relative'), dict(min_lr=[0.1]),
             dict(min_lr=(0.1, 0.2, 0.3)), dict(factor=1.0, mode='x')]
    for kwargs in cases:
        opt, topt = optimizers()
        with pytest.raises(ValueError) as a: lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        with pytest.raises(ValueError) as b: TL.ReduceLROnPlateau(topt, **kwargs)
        assert str(a.value) == str(b.value), kwargs
    for bad in (object(), [fs.zeros(1)]):
        with pytest.raises(TypeError) as a: lr_scheduler.ReduceLROnPlateau(bad)
        with pytest.raises(TypeError) as b: TL.ReduceLROnPlateau(bad)
        assert str(a.value) == str(b.value)
    with pytest.raises(NotImplementedError): lr_scheduler.ReduceLROnPlateau(optimizers()[0]).get_lr()


def test_plateau_settings_and_defaults_like_torch():
    import inspect
    ours, theirs = inspect.signature(lr_scheduler.ReduceLROnPlateau), inspect.signature(TL.ReduceLROnPlateau)
    assert [(p.name, p.default) for p in ours.parameters.values()] == [(p.name, p.default) for p in theirs.parameters.values()]
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.ReduceLROnPlateau(opt, min_lr=(0.1, 0.2)), TL.ReduceLROnPlateau(topt, min_lr=(0.1, 0.2))
    assert ours.state_dict() == theirs.state_dict() and isinstance(ours.min_lrs, list)
    assert 'initial_lr' not in opt.param_groups[0] and ours.get_last_lr() == [0.1, 0.03] and not ours.in_cooldown
    assert isinstance(ours, lr_scheduler.LRScheduler) and isinstance(theirs, TL.LRScheduler)


def test_plateau_step_with_an_epoch_warns_like_torch():
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.ReduceLROnPlateau(opt, patience=0), TL.ReduceLROnPlateau(topt, patience=0)
    for epoch, m in ((5, 1.0), (2, 1.0), (9, 0.5)):
        with pytest.warns(UserWarning) as a: ours.step(m, epoch)
        with pytest.warns(UserWarning) as b: theirs.step(m, epoch)
        assert str(a[0].message) == str(b[0].message) and a[0].filename == __file__
        assert (ours.last_epoch, ours.get_last_lr()) == (theirs.last_epoch, theirs.get_last_lr())
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ours.step(1.0)                                       # no warning without an epoch, and none about the order


def test_plateau_in_training_matches_torch():
    rng = np.random.default_rng(3)
    X, w_true = rng.standard_normal((64, 5)), rng.standard_normal((5, 1))
    y, w0 = X @ w_true + 0.3 * rng.standard_normal((64, 1)), rng.standard_normal((5, 1))
    finals = []
    for lib, L in ((fs, lr_scheduler), (torch, TL)):
        w = lib.tensor(w0, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.3, momentum=0.9)
        sched, rates = L.ReduceLROnPlateau(opt, patience=3, factor=0.5, threshold=1e-3), []
        for _ in range(150):
            loss = ((lib.tensor(X) @ w - lib.tensor(y)) ** 2).mean()
            loss.backward(); opt.step(); opt.zero_grad()
            sched.step(loss.item()); rates.append(opt.param_groups[0]['lr'])
        finals.append((w.detach().numpy(), rates))
    check_close(finals[0][0], finals[1][0], rtol=1e-10)
    assert finals[0][1] == finals[1][1] and finals[0][1][-1] < 0.3
