"""autograd.profiler against torch.autograd.profiler: the ops recorded and their call counts where the names
correspond (the backward's nodes share torch's names; a forward op is its node's name less `Backward`, in torch's
`aten::` form), the table's layout, record_function, self and total times, and the engine's cost when no profile runs."""
import contextlib
import os
import re

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import engine, forward_mode


@contextlib.contextmanager
def quiet():
    "torch's profiler writes a line with the time to stderr at start and stop."
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try: yield
    finally:
        os.dup2(saved, 2); os.close(devnull); os.close(saved)


# our forward op names and torch's top-level aten names for the same calls
# (the same where both record the same kernel; torch's `x.T` and `@` name the Python-level call)
FORWARD = {'aten::permute': 'aten::numpy_T', 'aten::mm': 'aten::matmul', **{f'aten::{n}': f'aten::{n}' for n in (
    'mul', 'add', 'sub', 'div', 'exp', 'tanh', 'relu', 'sum', 'mean', 'sigmoid', 'log_softmax', 'neg', 'pow')}}

PROGRAMS = {
    'mm relu sum': lambda lib, x, w: (x @ w).relu().sum(),
    'diamond': lambda lib, x, w: ((x * 3).exp() * (x * 3)).sum() + (w * w).mean(),
    'mlp': lambda lib, x, w: -((x @ w).tanh() @ w.T).log_softmax(1).sum() / 4,
    'sigmoid and sub': lambda lib, x, w: ((x @ w).sigmoid() - 0.5).pow(2).sum(),
}


def run(lib, name, backward=True):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    w = lib.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    with (quiet() if lib is torch else contextlib.nullcontext()):
        with lib.autograd.profiler.profile() as prof:
            y = PROGRAMS[name](lib, x, w)
            if backward: y.backward()
    return prof


def top_level_forward(prof, lib):
    "{name: calls} of the events no other event holds (our names; torch's mapped onto ours)."
    back = {v: k for k, v in FORWARD.items()}
    counts = {}
    for e in prof.function_events:
        if e.cpu_parent is None and 'Backward' not in e.name and 'autograd' not in e.name:
            key = e.name if lib is fs else back.get(e.name, e.name)
            counts[key] = counts.get(key, 0) + 1
    return counts


def backward_nodes(prof):
    return {e.key.split('::')[-1]: e.count for e in prof.key_averages()
            if e.key.endswith(('Backward0', 'AccumulateGrad')) and ': ' not in e.key}


@pytest.mark.parametrize('name', list(PROGRAMS))
def test_forward_ops_and_counts_match_torchs_top_level_ops(name):
    ours, theirs = top_level_forward(run(fs, name, False), fs), top_level_forward(run(torch, name, False), torch)
    assert ours == theirs


@pytest.mark.parametrize('name', list(PROGRAMS))
def test_backward_nodes_and_counts_match_torch(name):
    assert backward_nodes(run(fs, name)) == backward_nodes(run(torch, name))


def test_mm_inside_its_backward_counts_as_torchs():
    "MmBackward0 runs two products inside it, in both libraries: aten::mm is called three times."
    ours = {e.key: e.count for e in run(fs, 'mm relu sum').key_averages()}
    theirs = {e.key: e.count for e in run(torch, 'mm relu sum').key_averages()}
    assert ours['aten::mm'] == theirs['aten::mm'] == 3


def table_shape(table):
    "The table with each time and percentage replaced by its kind: the layout, the names and the counts."
    return re.sub(r'\d+\.\d+(us|ms|s)', 'T', re.sub(r'\d+\.\d+%', 'P', table))


@pytest.mark.parametrize('kwargs', [dict(sort_by='count'), dict(sort_by='count', row_limit=3),
                                    dict(sort_by='count', max_name_column_width=8),
                                    dict(sort_by='count', header='A HEADER'),
                                    dict(sort_by='count', top_level_events_only=True)])
def test_table_layout_is_torchs(kwargs):
    "The same rows (names our own) laid out as torch lays them out: widths, headers, separators, footer."
    def rows(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with (quiet() if lib is torch else contextlib.nullcontext()):
            with lib.autograd.profiler.profile() as prof:
                with lib.autograd.profiler.record_function('a_long_block_name'):
                    (x * 2).sum()
        return prof
    ours = rows(fs).key_averages().table(**kwargs)
    lines = ours.splitlines()
    head = [i for i, l in enumerate(lines) if l.strip().startswith('Name')][0]
    assert lines[head - 1] == lines[head + 1] == lines[-2] and set(lines[-2]) == {'-', ' '}
    assert lines[-1].startswith('Self CPU time total: ') and ours.endswith('\n')
    # torch's header line for the same name width
    theirs = rows(torch).key_averages().table(**kwargs)
    name_width = len(lines[head + 1].split('  ')[0])
    assert [l for l in theirs.splitlines() if l.strip().startswith('Name')][0].endswith(
        lines[head][name_width:])
    if 'header' in kwargs: assert lines[1] == 'A HEADER' and set(lines[0]) == {'='}
    if 'top_level_events_only' in kwargs:
        assert 'This report only display top-level ops statistics' in ours
        assert [l.split()[0] for l in lines[head + 2:-2]] == ['a_long_block_name']   # Mul and Sum ran inside it
    if kwargs.get('max_name_column_width') == 8:
        assert [l.split()[0] for l in lines[head + 2:-2]] == ['a_lon...', 'aten:...', 'aten:...']   # as torch cuts


def test_table_rows_sorted_and_limited():
    prof = run(fs, 'mlp')
    events = prof.key_averages()
    for key in ('count', 'cpu_time_total', 'self_cpu_time_total', 'cpu_time'):
        table = events.table(sort_by=key, row_limit=4)
        names = [l.split()[0] for l in table.splitlines()[3:-2]]
        assert len(names) == 4
        by = {e.key: getattr(e, key) for e in events}
        values = [by[n] for n in names]
        assert values == sorted(values, reverse=True)
        assert all(by[n] >= max(v for k, v in by.items() if k not in names) for n in names)
    assert events.table(row_limit=100).count('\n') == len(events) + 5


def test_self_and_total_times_and_record_function():
    x = fs.tensor(np.random.default_rng(0).standard_normal((64, 64)), requires_grad=True)
    with fs.autograd.profiler.profile() as prof:
        with fs.autograd.profiler.record_function('outer'):
            with fs.autograd.profiler.record_function('inner'):
                y = (x @ x).tanh().sum()
            y.backward()
    events = prof.function_events
    outer = next(e for e in events if e.name == 'outer')
    inner = next(e for e in events if e.name == 'inner')
    assert inner.cpu_parent is outer and outer.cpu_parent is None
    assert {e.name for e in inner.cpu_children} == {'aten::mm', 'aten::tanh', 'aten::sum'}
    assert 'MmBackward0' in {e.name for e in outer.cpu_children}
    for e in events:
        assert e.cpu_time_total >= e.self_cpu_time_total >= 0
        assert abs(e.self_cpu_time_total - (e.cpu_time_total - sum(c.cpu_time_total for c in e.cpu_children))) < 1e-6
    averages = {e.key: e for e in prof.key_averages()}
    total = sum(e.self_cpu_time_total for e in averages.values())
    assert abs(total - outer.cpu_time_total) < 1e-3       # all the time was inside `outer`
    assert averages['aten::mm'].count == 3 and averages['aten::mm'].cpu_time == averages['aten::mm'].cpu_time_total / 3


def test_record_function_decorator_and_outside_a_profile():
    @fs.autograd.profiler.record_function('decorated')
    def f(t): return t * 3
    x = fs.ones(2, requires_grad=True)
    f(x)                                                     # no profile: nothing to record, no error
    with fs.autograd.profiler.record_function('outside'): x * 2
    with fs.autograd.profiler.profile() as prof: f(x); f(x)
    assert {e.key: e.count for e in prof.key_averages()} == {'decorated': 2, 'aten::mul': 2}
    with (quiet()):
        @torch.autograd.profiler.record_function('decorated')
        def g(t): return t * 3
        with torch.autograd.profiler.profile() as tprof: g(torch.ones(2, requires_grad=True))
    assert {e.key for e in tprof.key_averages()} >= {'decorated', 'aten::mul'}


def test_disabled_and_unfinished_like_torch():
    with quiet():
        with torch.autograd.profiler.profile(enabled=False) as theirs: pass
    with fs.autograd.profiler.profile(enabled=False) as ours: pass
    assert ours is theirs is None
    # inside the block there are no events to group yet: torch 2.13, in a fresh process, says so thus (after
    # other profiles in the same process it answers with what an earlier one left)
    with fs.autograd.profiler.profile() as prof:
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'key_averages'"):
            prof.key_averages()
    assert prof.key_averages() == []


def test_a_profile_changes_no_result():
    def step(lib, profiled):
        rng = np.random.default_rng(2)
        x = lib.tensor(rng.standard_normal((5, 3)), dtype=lib.float64, requires_grad=True)
        w = lib.tensor(rng.standard_normal((3, 2)), dtype=lib.float64, requires_grad=True)
        ctx = lib.autograd.profiler.profile() if profiled else contextlib.nullcontext()
        with ctx:
            y = ((x @ w).exp() * x.sum()).mean()
            g, = lib.autograd.grad(y, w, create_graph=True)
            (g * g).sum().backward()
            h = lib.func.grad(lambda t: (t * t).sum())(w.detach())
        return y.detach().numpy(), x.grad.numpy(), h.requires_grad, h.numpy()
    plain, profiled = step(fs, False), step(fs, True)
    for a, b in zip(plain, profiled): np.testing.assert_array_equal(a, b)
    assert not forward_mode.stack


def test_no_profile_costs_the_walk_nothing():
    "Without a profile the walk calls the engine's own functions: no wrapper in between."
    run = engine.Run(False, True)
    assert run.at_node is engine.at_node and run.at_leaf is engine.at_leaf


def test_profile_inside_vmap_and_forward_mode():
    x = fs.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    with fs.autograd.profiler.profile() as prof:
        fs.func.vmap(lambda r: (r * r).sum())(x)
        fs.func.jvp(lambda t: t.exp(), (x.detach(),), (fs.ones(2, 3, dtype=x.dtype),))
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts['aten::mul'] >= 1 and counts['aten::exp'] >= 1 and not forward_mode.stack
