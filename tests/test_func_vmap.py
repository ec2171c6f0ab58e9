"""`fromscratch.vmap` against `torch.vmap`: trees in `in_dims` and `out_dims`, keyword arguments, `out_dims=None`,
`chunk_size`, `randomness` ('error', 'same', 'different', nested), and every error with torch's words."""
import collections
import functools

import numpy as np
import pytest
import torch

import fromscratch as fs
import fromscratch.func as ff
import fromscratch.nn.functional as F

RNG = np.random.default_rng(0)
Pair = collections.namedtuple('Pair', 'u v')


def plain(x):
    "A result as numpy arrays in the same structure (tuples, lists, dicts, named tuples), to compare across libraries."
    if isinstance(x, (fs.Tensor, torch.Tensor)): return ('tensor', x.detach().numpy())
    if isinstance(x, tuple) and hasattr(type(x), '_fields'): return (type(x).__name__, [plain(v) for v in x])
    if isinstance(x, (tuple, list)): return (type(x).__name__, [plain(v) for v in x])
    if isinstance(x, dict): return ('dict', {k: plain(v) for k, v in x.items()})
    return ('leaf', x)


def same(a, b):
    assert a[0] == b[0], (a, b)
    if a[0] == 'tensor':
        assert a[1].shape == b[1].shape, (a[1].shape, b[1].shape)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-14)
    elif a[0] == 'dict':
        assert list(a[1]) == list(b[1])
        for k in a[1]: same(a[1][k], b[1][k])
    elif a[0] == 'leaf': assert a[1] == b[1]
    else:
        assert len(a[1]) == len(b[1])
        for x, y in zip(a[1], b[1]): same(x, y)


def outcome(f):
    try: return plain(f())
    except Exception as e: return ('error', type(e).__name__, str(e))


def agree(case, *arrays):
    "case(lib, *tensors) run on fromscratch and on torch: the same result, or the same error word for word."
    ours = outcome(lambda: case(fs, *[fs.tensor(a) for a in arrays]))
    theirs = outcome(lambda: case(torch, *[torch.tensor(a) for a in arrays]))
    if theirs[0] == 'error' or ours[0] == 'error': assert ours == theirs
    else: same(ours, theirs)
    return theirs


X, Y, Z = RNG.standard_normal((3, 2)), RNG.standard_normal((2, 3)), RNG.standard_normal((3,))

IN_DIMS = {   # (function, in_dims, arguments built from x (3, 2), y (2, 3), z (3,))
    'int': (lambda a, b: a * b.sum(), 0, lambda x, y, z: (x, x)),
    'short tuple': (lambda a, b: a, (0,), lambda x, y, z: (x, x)),
    'long tuple': (lambda a, b: a, (0, 1, 2), lambda x, y, z: (x, x)),
    'dict': (lambda d: d['a'] * 2 + d['b'].sum(), ({'a': 0, 'b': None},), lambda x, y, z: ({'a': x, 'b': y},)),
    'dict both mapped': (lambda d: d['a'] + d['b'].T, ({'a': 0, 'b': 1},), lambda x, y, z: ({'a': x, 'b': y},)),
    'dict missing key': (lambda d: d['a'], ({'a': 0},), lambda x, y, z: ({'a': x, 'b': y},)),
    'dict other key': (lambda d: d['a'], ({'a': 0, 'c': 1},), lambda x, y, z: ({'a': x, 'b': y},)),
    'dict as in_dims': (lambda d: d['a'], {'a': 0, 'b': 1}, lambda x, y, z: ({'a': x, 'b': y},)),
    'list as in_dims': (lambda d: d['a'], [0], lambda x, y, z: ({'a': x, 'b': y},)),
    'None as in_dims': (lambda a: a, None, lambda x, y, z: (x,)),
    'str as in_dims': (lambda a: a, 'x', lambda x, y, z: (x,)),
    'float in_dim': (lambda d: d['a'], (1.0,), lambda x, y, z: ({'a': x, 'b': y},)),
    'str in_dim': (lambda d: d['a'], ('a',), lambda x, y, z: ({'a': x, 'b': y},)),
    'nested': (lambda p: p[0] + p[1][0] * p[1][1].sum(), ((0, (1, None)),), lambda x, y, z: ((x, (y, y)),)),
    'nested sizes differ': (lambda p: p[0], ((0, 1),), lambda x, y, z: ((x, (y.T, y)),)),
    'list in tuple': (lambda p: p[0] + p[1], ([0, 0],), lambda x, y, z: ([x, x],)),
    'list for tuple': (lambda p: p[0], ([0, 0],), lambda x, y, z: ((x, x),)),
    'tuple for list': (lambda p: p[0], ((0, 0),), lambda x, y, z: ([x, x],)),
    'list too long': (lambda p: p[0], ([0, 0, 0],), lambda x, y, z: ([x, x],)),
    'number not mapped': (lambda p, q: p[0] * p[1] + q, ((0, None), None), lambda x, y, z: ((x, 3.0), z[:2])),
    'number mapped': (lambda p, q: p[0] + q, ((0, 0), None), lambda x, y, z: ((x, 3), z)),
    'number mapped by a leaf': (lambda p, q: p[0] + q, (0, None), lambda x, y, z: ((x, 3), z)),
    'None argument mapped': (lambda a, b: a, 0, lambda x, y, z: (x, None)),
    'None argument': (lambda a, b: a, (0, None), lambda x, y, z: (x, None)),
    'named tuple': (lambda p: p.u + p.v, 0, lambda x, y, z: (Pair(x, x),)),
    'named tuple in_dims': (lambda p: p.u + p.v, (Pair(0, None),), lambda x, y, z: (Pair(x, x[0]),)),
    'tuple for named tuple': (lambda p: p.u, ((0, None),), lambda x, y, z: (Pair(x, x[0]),)),
    'named tuple for tuple': (lambda p, q: q, (Pair(0, 0), 0), lambda x, y, z: ((x, x), x)),
    'empty tuple argument': (lambda p, q: q, ((), 0), lambda x, y, z: ((), x)),
    'empty dict argument': (lambda p, q: q, ({}, 0), lambda x, y, z: ({}, x)),
    'strings not mapped': (lambda p, q: q, (None, 0), lambda x, y, z: ({'a': 'hello'}, x)),
    'strings mapped': (lambda p, q: q, (0, 0), lambda x, y, z: ({'a': 'hello'}, x)),
    'nothing mapped': (lambda a: a, (None,), lambda x, y, z: (x,)),
    'in_dim too large': (lambda a: a, 2, lambda x, y, z: (x,)),
    'in_dim too small': (lambda a: a, -3, lambda x, y, z: (x,)),
    'negative in_dim': (lambda a: a * 2, -1, lambda x, y, z: (x,)),
    '0-d': (lambda a: a, 0, lambda x, y, z: (z[0],)),
    'number argument': (lambda a: a, 0, lambda x, y, z: (3.0,)),
    'sizes differ': (lambda a, b: a, 0, lambda x, y, z: (x, y)),
    'sizes differ in a tree': (lambda p: p, 0, lambda x, y, z: ((x, y, x),)),
}


@pytest.mark.parametrize('name', IN_DIMS)
def test_in_dims_trees_and_their_errors_as_torch(name):
    f, in_dims, args = IN_DIMS[name]
    agree(lambda lib, x, y, z: lib.vmap(f, in_dims=in_dims)(*args(x, y, z)), X, Y, Z)


def test_no_inputs_and_the_names_of_functions_in_errors():
    def named(a): return a
    class Linear2(torch.nn.Module):  # torch's and ours print a Linear alike: Linear(in_features=...)
        pass
    for func in (lambda: 1, named):
        agree(lambda lib: lib.vmap(func)())
    for make in (lambda lib: named, lambda lib: (lambda a: a), lambda lib: functools.partial(lambda a, b: a, b=1),
                 lambda lib: lib.nn.Linear(2, 2).double()):
        agree(lambda lib, x: lib.vmap(make(lib), out_dims=None)(x), X)


def test_keyword_arguments_are_passed_unbatched():
    f = lambda a, *, k, scale=1.0: a * k.sum() * scale
    agree(lambda lib, x, z: lib.vmap(f)(x, k=z, scale=2.0), X, Z)
    agree(lambda lib, x, z: lib.vmap(lambda a, k: a[:, None] * k)(x, k=z), X, Z)   # k is not mapped: (2, 1) * (3,)
    agree(lambda lib, x, z: lib.vmap(lambda a, k: (a, k))(x, k=z), X, Z)          # an unmapped output: expanded


OUT_DIMS = {
    'int': (lambda a: a * 2, 1), 'negative': (lambda a: a, -1), 'too large': (lambda a: a, 2), 'too small': (lambda a: a, -3),
    'one-tuple': (lambda a: a, (1,)), 'two-tuple for one': (lambda a: a, (1, 0)), 'list for one': (lambda a: a, [1]),
    'None on batched': (lambda a: a, None), 'None in tuple on batched': (lambda a: a, (None,)),
    'None on unbatched': (lambda a: a.sum() * 0 + 1, None), 'constant None': (lambda a: fs.ones(2) if isinstance(a, fs.Tensor) else torch.ones(2), None),
    'tuple': (lambda a: (a * 2, a.sum()), (1, 0)), 'tuple None': (lambda a: (a, a.sum()), (0, None)),
    'tuple with a number': (lambda a: (a, 3), (0, None)), 'number mapped': (lambda a: (a, 3), 0),
    'None output': (lambda a: None, 0), 'None in a tuple': (lambda a: (a, None), 0),
    'dict': (lambda a: {'k': a, 'n': a.sum()}, {'k': 1, 'n': 0}), 'dict short': (lambda a: {'k': a, 'n': a.sum()}, 0),
    'list and dict': (lambda a: [a, {'z': a}], [1, {'z': 0}]), 'list and dict None': (lambda a: [a, {'z': a}], [1, {'z': None}]),
    'list for tuple': (lambda a: (a,), [1]), 'tuple for list': (lambda a: [a], (1,)), 'short tuple': (lambda a: (a, a), (1,)),
    'tuple for dict': (lambda a: [a, {'z': a}], (1, 0)), 'named tuple': (lambda a: Pair(a, a.sum()), Pair(1, 0)),
    'tuple for named tuple': (lambda a: Pair(a, a.sum()), (1, 0)), 'string out_dims': (lambda a: a, 'a'),
    'string in a tuple': (lambda a: (a, a), (0, 'x')), 'a number out': (lambda a: 3, None), 'a string out': (lambda a: 'x', None),
    'empty tuple': (lambda a: (), 0),
}


@pytest.mark.parametrize('name', OUT_DIMS)
def test_out_dims_trees_and_their_errors_as_torch(name):
    f, out_dims = OUT_DIMS[name]
    agree(lambda lib, x: lib.vmap(f, out_dims=out_dims)(x), X)


def test_out_dims_none_on_a_tensor_batched_by_an_outer_vmap():
    agree(lambda lib, x, y: lib.vmap(lambda b: lib.vmap(lambda a: b, out_dims=None)(x))(y), X, Y)
    agree(lambda lib, x, y: lib.vmap(lambda b: lib.vmap(lambda a: b * a.sum())(x))(y), X, Y)


CHUNKED = {   # function, vmap's keywords, whether it takes the unmapped z
    'tuple out': (lambda a: (a * 2, a.sum()), dict(out_dims=(1, 0))),
    'unmapped input': (lambda a, b: a + b, dict(in_dims=(0, None))),
    'in_dims 1, out_dims -1': (lambda a, b: a[:, None] * b, dict(in_dims=(1, None), out_dims=-1)),
    'dict out': (lambda a: {'s': a.sum(), 'a': a}, {}),
}


@pytest.mark.parametrize('chunk_size', [1, 2, 3, 5, 6, 100])
@pytest.mark.parametrize('name', CHUNKED)
def test_chunks_give_the_same_result(name, chunk_size):
    f, kw = CHUNKED[name]
    x5 = RNG.standard_normal((5, 2))
    args = (lambda x, z: (x, z[:2])) if 'in_dims' in kw else (lambda x, z: (x,))
    whole = agree(lambda lib, x, z: lib.vmap(f, **kw)(*args(x, z)), x5, Z)
    chunks = agree(lambda lib, x, z: lib.vmap(f, chunk_size=chunk_size, **kw)(*args(x, z)), x5, Z)
    same(whole, chunks)


def test_chunks_of_an_unbatched_output_and_bad_chunk_sizes():
    x5 = fs.tensor(RNG.standard_normal((5, 2)))
    c = fs.ones(2)
    a, b = ff.vmap(lambda t: (t, c), out_dims=(0, None), chunk_size=2)(x5)
    assert tuple(b.shape) == (2,) and tuple(a.shape) == (5, 2)   # handed back once, not joined
    for bad in (0, -1):
        agree(lambda lib, x: lib.vmap(lambda t: t, chunk_size=bad)(x), X)
    # an empty batch: torch's chunks fail on an assertion; ours run it unchunked
    assert tuple(ff.vmap(lambda t: t.sum(), chunk_size=2)(x5[:0]).shape) == (0,)


def test_vmap_is_in_the_top_namespace_and_wraps_the_function():
    assert fs.vmap is ff.vmap and torch.vmap is torch.func.vmap
    def named(a):
        "A docstring."
        return a
    for lib in (fs, torch):
        v = lib.vmap(named)
        assert v.__name__ == 'named' and v.__doc__ == 'A docstring.' and v.__wrapped__ is named


# ---- randomness

RANDOM_OPS = {   # each run inside vmap on a batched x of shape (4, 3)
    'randn': lambda lib, x: x + lib.randn(3, dtype=lib.float64),
    'rand': lambda lib, x: x + lib.rand(3, dtype=lib.float64),
    'randint': lambda lib, x: x + lib.randint(0, 1000, (3,)),
    'normal': lambda lib, x: x + lib.normal(0.0, 1.0, (3,), dtype=lib.float64),
    'normal of a tensor': lambda lib, x: x + lib.normal(lib.zeros(3, dtype=lib.float64), 1.0),
    'randn_like': lambda lib, x: lib.randn_like(x),
    'rand_like': lambda lib, x: lib.rand_like(x),
    'dropout': lambda lib, x: (lib.nn.functional if lib is torch else F).dropout(x + 1, 0.5),
    'Dropout': lambda lib, x: lib.nn.Dropout(0.5)(x + 1),
    'dropout of unbatched': lambda lib, x: (x + 1) * (lib.nn.functional if lib is torch else F).dropout(lib.ones(3, dtype=lib.float64), 0.5),
}


@pytest.mark.parametrize('op', RANDOM_OPS)
def test_random_operations_refused_by_default_with_torchs_message(op):
    x = np.zeros((4, 3))
    message = agree(lambda lib, x: lib.vmap(lambda a: RANDOM_OPS[op](lib, a))(x), x)
    assert message[:2] == ('error', 'RuntimeError') and 'randomness error mode' in message[2]


@pytest.mark.parametrize('op', ['uniform_', 'normal_'])
def test_in_place_random_operations_refused_by_default(op):
    agree(lambda lib, x: lib.vmap(lambda a: getattr(a.clone(), op)())(x), np.zeros((4, 3)))
    agree(lambda lib, x: lib.vmap(lambda a: getattr(lib.zeros(3), op)() + a)(x), np.zeros((4, 3)))


def test_an_unknown_randomness_is_refused_and_eval_dropout_draws_nothing():
    agree(lambda lib, x: lib.vmap(lambda a: a, randomness='foo')(x), X)
    agree(lambda lib, x: lib.vmap(lambda a: a, randomness=None)(x), X)
    agree(lambda lib, x: lib.vmap(lib.nn.Dropout(0.5).eval())(x), X)
    agree(lambda lib, x: lib.vmap(lambda a: (lib.nn.functional if lib is torch else F).dropout(a, 0.5, training=False))(x), X)


def varies(t, axis):
    "Whether the values of t change along axis."
    first = np.take(t, [0], axis=axis)
    return not np.all(t == first)


@pytest.mark.parametrize('op', RANDOM_OPS)
@pytest.mark.parametrize('randomness', ['same', 'different'])
def test_same_and_different_as_torch_shapes_and_variation(op, randomness):
    x = np.zeros((4, 3))
    outs = {}
    for lib in (fs, torch):
        lib.manual_seed(0)
        outs[lib] = lib.vmap(lambda a: RANDOM_OPS[op](lib, a), randomness=randomness)(lib.tensor(x)).numpy()
    assert outs[fs].shape == outs[torch].shape == (4, 3)
    for lib in (fs, torch):
        assert varies(outs[lib], 0) == (randomness == 'different'), (lib.__name__, outs[lib])


def test_different_draws_what_one_draw_for_the_batch_would_and_same_what_one_sample_would():
    x = fs.zeros(5, 3)
    fs.manual_seed(1); diff = ff.vmap(lambda a: a + fs.randn(3), randomness='different')(x)
    fs.manual_seed(1); whole = fs.randn(5, 3)
    fs.manual_seed(1); same = ff.vmap(lambda a: a + fs.randn(3), randomness='same')(x)
    fs.manual_seed(1); one = fs.randn(3)
    np.testing.assert_array_equal(diff.numpy(), whole.numpy())
    np.testing.assert_array_equal(same.numpy(), np.broadcast_to(one.numpy(), (5, 3)))
    fs.manual_seed(1); moved = ff.vmap(lambda a: a + fs.randn(()), randomness='different', in_dims=1)(fs.zeros(2, 5))
    assert tuple(moved.shape) == (5, 2) and varies(moved.numpy(), 0) and not varies(moved.numpy(), 1)


@pytest.mark.parametrize('inner', ['error', 'same', 'different'])
@pytest.mark.parametrize('outer', ['error', 'same', 'different'])
def test_nested_randomness_varies_along_the_levels_that_say_different(inner, outer):
    y = np.zeros((2, 3))
    results = {}
    for lib in (fs, torch):
        f = lib.vmap(lib.vmap(lambda a: a + lib.randn((), dtype=lib.float64), randomness=inner), randomness=outer)
        results[lib] = outcome(lambda: f(lib.tensor(y)))
    if results[torch][0] == 'error':
        assert results[fs] == results[torch]
        return
    o, t = results[fs][1], results[torch][1]
    assert o.shape == t.shape == (2, 3)
    for axis in (0, 1):
        assert varies(o, axis) == varies(t, axis), (axis, o, t)


def test_chunks_with_randomness():
    x = fs.zeros(5, 3)
    fs.manual_seed(2); whole = ff.vmap(lambda a: a + fs.randn(3), randomness='different')(x)
    fs.manual_seed(2); chunks = ff.vmap(lambda a: a + fs.randn(3), randomness='different', chunk_size=2)(x)
    np.testing.assert_array_equal(whole.numpy(), chunks.numpy())
    fs.manual_seed(2); same = ff.vmap(lambda a: a + fs.randn(3), randomness='same', chunk_size=2)(x)
    assert not varies(same.numpy(), 0)
    torch.manual_seed(2)
    same_t = torch.vmap(lambda a: a + torch.randn(3), randomness='same', chunk_size=2)(torch.zeros(5, 3))
    assert not varies(same_t.numpy(), 0)


def test_a_random_operation_outside_vmap_is_untouched():
    fs.manual_seed(3); a = fs.randn(2, 3)
    fs.manual_seed(3); b = fs.randn(2, 3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    fs.manual_seed(3)
    g = ff.grad(lambda x: (x * fs.randn(3, dtype=fs.float64)).sum())(fs.ones(3, dtype=fs.float64))   # grad has no level of its own for draws
    fs.manual_seed(3)
    np.testing.assert_array_equal(g.numpy(), fs.randn(3, dtype=fs.float64).numpy())


@pytest.mark.parametrize('kwargs', [{}, {'dim': 0}, {'dim': 1}, {'dim': -1, 'keepdim': True}, {'dim': 0, 'keepdim': True}])
def test_argmax_and_argmin_under_vmap_like_torch(kwargs):
    X = np.random.default_rng(7).standard_normal((3, 4, 5))
    f = lambda t: (t.argmax(**kwargs), t.argmin(**kwargs))
    ours, theirs = fs.func.vmap(f)(fs.tensor(X)), torch.func.vmap(f)(torch.tensor(X))
    for o, t in zip(ours, theirs):
        assert o.tolist() == t.tolist() and tuple(o.shape) == tuple(t.shape)


def test_argmax_with_keepdim_and_no_dim_under_vmap_keeps_the_samples_rank():
    "Each sample's result is what the eager call gives it (torch's vmap drops a dimension here)."
    X = np.random.default_rng(8).standard_normal((3, 4, 5))
    ours = fs.func.vmap(lambda t: t.argmax(keepdim=True))(fs.tensor(X))
    assert tuple(ours.shape) == (3, 1, 1)
    assert ours.flatten().tolist() == [fs.tensor(x).argmax().item() for x in X]
