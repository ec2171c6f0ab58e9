"""Every matmul variant of 01_matmul against torch, their shape errors, broadcasting rules, and the timing ladder."""
import math
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from fromscratch.lessons.matmul import (Timing, broadcast_shapes, format_seconds, format_speedup, format_table, matmul_blas,
                                matmul_broadcast, matmul_einsum, matmul_elementwise, matmul_ladder, matmul_loops,
                                matmul_shapes, matrix_shape, plot_timings, time_call, time_matmuls, torch_threads)
from fromscratch.testing import check_close

VARIANTS = [matmul_loops, matmul_elementwise, matmul_broadcast, matmul_einsum, matmul_blas]
LADDER = ['matmul_loops', 'matmul_elementwise', 'matmul_broadcast', 'matmul_einsum', 'numpy @', 'torch @']
# (m, k, n): scalars-as-matrices, row and column vectors, non-square, fastbook's shape, and zero sizes
SHAPES = [(1, 1, 1), (1, 7, 1), (1, 5, 3), (4, 1, 3), (3, 4, 1), (5, 1, 1), (1, 1, 6), (2, 3, 4), (7, 2, 5),
          (6, 6, 6), (5, 784, 10), (0, 3, 2), (2, 0, 3), (2, 3, 0), (0, 0, 0), (0, 4, 0)]


def as_result(f, a, b):
    "The product `f(a, b)` as a float64 array; the loops return a list of rows, which we check first."
    c = f(a, b)
    m, n = a.shape[0], b.shape[1]
    if f is matmul_loops:
        assert isinstance(c, list) and len(c) == m and all(isinstance(r, list) and len(r) == n for r in c)
        return np.array(c, dtype=np.float64).reshape(m, n)    # a 0-row list carries no column count
    return c


def torch_matmul(a, b): return (torch.from_numpy(np.ascontiguousarray(a)) @ torch.from_numpy(np.ascontiguousarray(b))).numpy()


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize('shape', SHAPES, ids=str)
def test_variant_matches_torch_float64(f, shape):
    m, k, n = shape
    rng = np.random.default_rng(m * 10_000 + k * 100 + n)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    check_close(as_result(f, a, b), torch_matmul(a, b), rtol=1e-12, atol=1e-12, name=f.__name__)


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
def test_variant_on_python_lists_of_ints(f):
    a, b = [[1, 2, 3], [4, 5, 6]], [[1, 0], [0, 1], [1, 1]]
    c = f(a, b)
    check_close(c, [[4, 5], [10, 11]], rtol=0, atol=0)
    check_close(c, torch.tensor(a) @ torch.tensor(b), rtol=0, atol=0)


def test_loops_return_python_floats():
    c = matmul_loops([[1, 2]], [[3], [4]])
    assert c == [[11.0]] and type(c[0][0]) is float


@pytest.mark.parametrize('f', VARIANTS[1:], ids=lambda f: f.__name__)
def test_array_variants_keep_float32(f):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 784), dtype=np.float32), rng.standard_normal((784, 10), dtype=np.float32)
    c = f(a, b)
    assert c.dtype == np.float32 and c.shape == (5, 10)
    check_close(c, torch.from_numpy(a) @ torch.from_numpy(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
def test_variants_do_not_modify_inputs(f):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    a0, b0 = a.copy(), b.copy()
    f(a, b)
    assert (a == a0).all() and (b == b0).all()


def test_a_wrong_variant_would_fail():
    "The comparison used above catches a product that is off by a transpose or a single entry."
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    with pytest.raises(AssertionError):
        check_close(matmul_blas(b, a), torch_matmul(a, b), rtol=1e-12, atol=1e-12)
    c = matmul_blas(a, b); c[1, 2] += 1e-9
    with pytest.raises(AssertionError, match='index \\(1, 2\\)'):
        check_close(c, torch_matmul(a, b), rtol=1e-12, atol=1e-12)


matrices = st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)).flatmap(
    lambda s: st.tuples(arrays(np.float64, (s[0], s[1]), elements=st.floats(-1e3, 1e3)),
                        arrays(np.float64, (s[1], s[2]), elements=st.floats(-1e3, 1e3))))


@settings(max_examples=40, deadline=None)
@given(matrices)
def test_variants_match_torch_property(ab):
    a, b = ab
    expected = torch_matmul(a, b)
    scale = float(np.abs(a).max(initial=0) * np.abs(b).max(initial=0) * max(a.shape[1], 1))
    for f in VARIANTS:
        check_close(as_result(f, a, b), expected, rtol=1e-10, atol=1e-13 * scale + 1e-300, name=f.__name__)


# ---------------------------------------------------------------- shape errors

def mismatch_message(a_shape, b_shape):
    (m, k), (k2, n) = a_shape, b_shape
    return (f"cannot multiply a {m}x{k} matrix by a {k2}x{n} matrix: the number of columns of the first ({k}) "
            f"must equal the number of rows of the second ({k2})")


BAD_PAIRS = [((5, 784), (785, 10)), ((1, 3), (2, 1)), ((3, 0), (1, 3)), ((2, 2), (3, 2)), ((4, 1), (4, 1)), ((0, 2), (0, 2))]


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize('shapes', BAD_PAIRS, ids=str)
def test_mismatch_names_both_shapes(f, shapes):
    a, b = np.ones(shapes[0]), np.ones(shapes[1])
    with pytest.raises(ValueError) as info:
        f(a, b)
    assert str(info.value) == mismatch_message(*shapes)
    with pytest.raises(RuntimeError, match='cannot be multiplied'):     # torch refuses them too
        torch.from_numpy(a) @ torch.from_numpy(b)


def test_the_briefs_example_message():
    with pytest.raises(ValueError, match=r'^cannot multiply a 5x784 matrix by a 785x10 matrix: the number of columns '
                                         r'of the first \(784\) must equal the number of rows of the second \(785\)$'):
        matmul_einsum(np.zeros((5, 784)), np.zeros((785, 10)))


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
def test_mismatch_on_lists(f):
    with pytest.raises(ValueError, match='cannot multiply a 2x3 matrix by a 2x2 matrix'):
        f([[1, 2, 3], [4, 5, 6]], [[1, 2], [3, 4]])


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize('a_shape,b_shape,which,bad', [((3,), (3, 2), 'first', (3,)), ((2, 3), (3,), 'second', (3,)),
                                                       ((2, 2, 2), (2, 2), 'first', (2, 2, 2)), ((), (1, 1), 'first', ())])
def test_not_a_matrix(f, a_shape, b_shape, which, bad):
    with pytest.raises(ValueError, match=rf'the {which} matrix has shape {re_escape(bad)}, which is not 2-d: reshape'):
        f(np.ones(a_shape), np.ones(b_shape))


def re_escape(x):
    import re
    return re.escape(str(x))


@pytest.mark.parametrize('f', VARIANTS, ids=lambda f: f.__name__)
def test_ragged_list_is_refused(f):
    with pytest.raises(ValueError, match=r'rows of the first matrix have different lengths \[2, 3\]'):
        f([[1, 2, 3], [4, 5]], [[1], [2], [3]])


def test_flat_list_is_refused():
    with pytest.raises(ValueError, match='the second matrix must be a list of rows'):
        matmul_loops([[1, 2]], [1, 2])


def test_matrix_shape_and_matmul_shapes():
    assert matrix_shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)
    assert matrix_shape([]) == (0, 0)
    assert matrix_shape([[], []]) == (2, 0)
    assert matrix_shape(((1, 2),)) == (1, 2)
    assert matrix_shape(torch.zeros(4, 5)) == (4, 5)
    assert matmul_shapes(np.zeros((5, 784)), np.zeros((784, 10))) == (5, 784, 10)


# ---------------------------------------------------------------- broadcasting

@pytest.mark.parametrize('shapes,expected', [
    (((3, 4), (4,)), (3, 4)), (((3, 1), (1, 4)), (3, 4)), (((784, 1), (784, 10)), (784, 10)), (((), (2, 3)), (2, 3)),
    (((8, 1, 6, 1), (7, 1, 5)), (8, 7, 6, 5)), (((0,), (1,)), (0,)), (((2, 0), (1, 1)), (2, 0)), (((5,),), (5,)),
    ((), ()), (((1,), (1, 1, 1)), (1, 1, 1)), (((2, 1, 3), (1, 4, 1), (4, 3)), (2, 4, 3))])
def test_broadcast_shapes_examples(shapes, expected):
    assert broadcast_shapes(*shapes) == expected
    assert tuple(torch.broadcast_shapes(*shapes)) == expected


@pytest.mark.parametrize('shapes,dim,sizes', [(((3, 4), (3,)), -1, '4, 3'), (((2, 3), (3, 3)), -2, '2, 3'),
                                              (((0,), (3,)), -1, '0, 3'), (((2, 1), (1, 3), (4, 1)), -2, '2, 1, 4')])
def test_broadcast_error_names_shapes_and_dimension(shapes, dim, sizes):
    with pytest.raises(ValueError) as info:
        broadcast_shapes(*shapes)
    msg = str(info.value)
    names = ', '.join(map(str, shapes[:-1])) + f' and {shapes[-1]}'
    assert msg.startswith(f'cannot broadcast shapes {names}: ')
    assert f'dimension {dim} has sizes {sizes}' in msg and 'equal or 1' in msg
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes(*shapes)


shape_lists = st.lists(st.lists(st.integers(0, 3), max_size=4).map(tuple), min_size=1, max_size=3)


@settings(max_examples=50, deadline=None)
@given(shape_lists)
def test_broadcast_shapes_agree_with_numpy_and_torch(shapes):
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError, match='cannot broadcast shapes'):
            broadcast_shapes(*shapes)
        with pytest.raises(RuntimeError):
            torch.broadcast_shapes(*shapes)
        return
    assert broadcast_shapes(*shapes) == expected == tuple(torch.broadcast_shapes(*shapes))
    # and the arrays really do combine to that shape
    assert sum(np.zeros(s) for s in shapes).shape == expected


# ---------------------------------------------------------------- timing

def test_time_call_counts_and_measures():
    calls = []
    secs = time_call(lambda: calls.append(1), repeat=3, min_time=1e-4)
    assert secs > 0 and math.isfinite(secs)
    assert len(calls) >= 2 + 3        # two warm-up calls, then at least one call per run


def test_time_call_measures_a_known_duration():
    import time
    secs = time_call(time.sleep, 2e-3, repeat=3, min_time=1e-3)
    assert 2e-3 <= secs < 0.1


def test_time_matmuls_rows_on_a_tiny_shape():
    rows = time_matmuls(2, 3, 4, repeat=2, loop_repeat=1, min_time=1e-4)
    assert [r.name for r in rows] == LADDER
    assert all(isinstance(r, Timing) for r in rows)
    assert all(r.seconds > 0 and math.isfinite(r.seconds) for r in rows)
    assert rows[0].speedup == 1.0
    for r in rows: assert r.speedup == pytest.approx(rows[0].seconds / r.seconds)


def test_time_matmuls_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, 'torch', None)      # `import torch` now raises ImportError
    rows = time_matmuls(2, 3, 4, repeat=1, loop_repeat=1, min_time=1e-5)
    assert [r.name for r in rows] == LADDER[:-1]


def test_torch_threads_sets_and_restores():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(KeyError):
        with torch_threads(1): raise KeyError('boom')
    assert torch.get_num_threads() == before


def test_torch_threads_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, 'torch', None)
    with torch_threads(1): pass


def test_time_matmuls_times_torch_on_the_given_threads(monkeypatch):
    import fromscratch.lessons.matmul as mm
    seen, original = [], mm.matmul_ladder
    def spy(a, b):
        return [(n, (lambda f: lambda *args: (seen.append(torch.get_num_threads()), f(*args))[1])(f), args)
                for n, f, args in original(a, b)]
    monkeypatch.setattr(mm, 'matmul_ladder', spy)
    before = torch.get_num_threads()
    mm.time_matmuls(2, 3, 4, repeat=1, loop_repeat=1, min_time=1e-5, threads=1)
    assert set(seen) == {1} and torch.get_num_threads() == before


def test_ladder_variants_agree():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 7), dtype=np.float32), rng.standard_normal((7, 2), dtype=np.float32)
    ladder = matmul_ladder(a, b)
    assert [name for name, _, _ in ladder] == LADDER
    assert isinstance(ladder[0][2][0], list)       # the loops time on Python lists
    for name, f, args in ladder:
        check_close(f(*args), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5, name=name)


def test_time_matmuls_refuses_to_time_a_wrong_variant(monkeypatch):
    import fromscratch.lessons.matmul as mm
    original = mm.matmul_ladder
    def broken(a, b):
        return [(n, (lambda *args: np.zeros((2, 4))) if n == 'matmul_einsum' else f, args) for n, f, args in original(a, b)]
    monkeypatch.setattr(mm, 'matmul_ladder', broken)
    with pytest.raises(AssertionError, match='matmul_einsum'):
        mm.time_matmuls(2, 3, 4, repeat=1, loop_repeat=1, min_time=1e-5)


def test_format_seconds_and_speedup():
    assert [format_seconds(s) for s in (2.5, 0.0123, 4.56e-6, 7.8e-8, 1e-3, 1.0)] == \
           ['2.5 s', '12.3 ms', '4.56 µs', '78 ns', '1 ms', '1 s']
    assert [format_speedup(x) for x in (1.0, 2.54, 9.99, 10.0, 1234.5)] == ['1.0x', '2.5x', '10.0x', '10x', '1,234x']


def test_format_table_is_aligned():
    rows = [Timing('matmul_loops', 3.7e-3, 1.0), Timing('numpy @', 4.7e-6, 787.2), Timing('torch @', 1.2e-5, 308.3)]
    text = format_table(rows, title='5x784 @ 784x10')
    lines = text.splitlines()
    assert lines[0] == '5x784 @ 784x10'
    assert lines[1].split()[:3] == ['variant', 'time', 'per'] and set(lines[2]) == {'-'}
    assert len({len(l) for l in lines[1:]}) == 1                 # every row as wide as the header
    assert lines[3].startswith('matmul_loops') and lines[3].endswith('1.0x') and '3.7 ms' in lines[3]
    assert lines[4].endswith('787x') and '4.7 µs' in lines[4]
    # columns line up: the time column ends at the same place in every row
    ends = {l.index(t) + len(t) for l, t in zip(lines[3:], ('3.7 ms', '4.7 µs', '12 µs'))}
    assert len(ends) == 1
    assert format_table(rows).splitlines()[0].startswith('variant')


def test_plot_timings_draws_a_log_bar_per_row():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    rows = [Timing('a', 1e-2, 1.0), Timing('b', 1e-5, 1000.0)]
    ax = plot_timings(rows, title='t')
    assert ax.get_xscale() == 'log' and len(ax.patches) == 2 and ax.get_title() == 't'
    assert [t.get_text() for t in ax.texts] == ['10 ms  (1.0x)', '10 µs  (1,000x)']
    plt.close(ax.figure)
