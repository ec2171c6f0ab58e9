"""fromscratch.utils.benchmark.Timer against torch.utils.benchmark.Timer: what it prints and what it keeps."""
import re
import statistics
import time

import pytest
import torch.utils.benchmark as tb

from fromscratch.utils import benchmark as fb


def shape_of(m):
    "The printout of a Measurement with the object address and the times taken out (they always differ)."
    lines = repr(m).splitlines()[1:]
    return [re.sub(r'\d+\.\d\d (ns|us|ms|s)\b', 'T', l) for l in lines if 'WARNING' not in l and 'suggests' not in l]


@pytest.mark.parametrize('kwargs', [
    dict(stmt='x * 2', setup='x = 3'),
    dict(stmt='x * 2', globals={'x': 3}, label='double', sub_label='int', description='python int'),
    dict(stmt='y = x * 2\ny + 1', setup='x = 3', sub_label='two lines'),
    dict(stmt='x * 2', globals={'x': 3}, num_threads=4),
])
def test_timeit_prints_like_torch(kwargs):
    ours, theirs = fb.Timer(**kwargs).timeit(100), tb.Timer(**kwargs).timeit(100)
    assert shape_of(ours) == shape_of(theirs)
    assert ours.number_per_run == theirs.number_per_run == 100 and len(ours.times) == len(theirs.times) == 1
    assert ours.title == theirs.title


def test_blocked_autorange_keeps_blocks():
    calls = []
    m = fb.Timer('time.sleep(0.001)', globals={'time': time}).blocked_autorange(
        callback=lambda n, t: calls.append((n, t)), min_run_time=0.03)
    assert len(m.times) == len(calls) >= 2 and sum(m.raw_times) >= 0.03
    assert m.times == [t / m.number_per_run for t in m.raw_times]
    assert m.median == statistics.median(m.times) and m.times[0] >= 1e-3
    assert re.match(r'\s+Median: \d+\.\d\d ms', repr(m).splitlines()[2])
    assert re.match(r'\s+\d+ measurements, \d+ runs per measurement, 1 thread', repr(m).splitlines()[-1]
                    if not m.has_warnings else repr(m).splitlines()[-3])


def test_spread_is_torchs():
    t = tb.Timer('pass').blocked_autorange(min_run_time=0.02)
    ours = fb.Measurement(t.number_per_run, t.raw_times, t.title)
    assert ours.median == pytest.approx(t.median, rel=1e-12) and ours.mean == pytest.approx(t.mean, rel=1e-12)
    assert ours.iqr == pytest.approx(t.iqr, rel=1e-9, abs=1e-15)


def test_missing_name_is_a_name_error():
    with pytest.raises(NameError, match="name 'x' is not defined"): fb.Timer('x + 1').timeit(1)
    with pytest.raises(NameError, match="name 'x' is not defined"): tb.Timer('x + 1').timeit(1)


def test_reached_from_the_package():
    import fromscratch
    assert fromscratch.utils.benchmark.Timer is fb.Timer
