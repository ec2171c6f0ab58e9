"""The exhaustive checks of fromscratch.ops against torch: ops x shapes x broadcasting x dtypes, values and
gradients, second derivatives, numeric gradients, errors, in-place semantics."""
import math
import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fromscratch as fs
from fromscratch import autograd
from fromscratch.core import Tensor, no_grad, grad as fs_grad
from engines import check_both, check_second, check_numeric, run_both, make_inputs, assert_same_value

DTYPES = [np.float64, np.float32]
SHAPES = [(), (5,), (3, 4), (2, 3, 4)]
rng = np.random.default_rng(0)


def arr(shape, kind='any', seed=None):
    "Random float64 test values: 'any', 'pos' (0.5..2), 'away' (|x| >= 0.3: no kinks), 'unique' (no ties)."
    r = np.random.default_rng([len(shape), *shape, ['any', 'pos', 'away', 'unique'].index(kind), seed or 0])
    if kind == 'pos': x = r.uniform(0.5, 2.0, shape)
    elif kind == 'away': x = r.choice([-1.0, 1.0], shape) * r.uniform(0.3, 2.0, shape)
    elif kind == 'unique':
        n = math.prod(shape)
        x = (r.permutation(n) * 0.37 - n * 0.15 + r.uniform(0, 0.01, n)).reshape(shape)
    else: x = r.standard_normal(shape)
    return np.asarray(x, dtype=np.float64)


# ----------------------------------------------------------------------------------------------------------------
# elementwise unary maths, every shape and dtype

UNARY = {
    'exp': (lambda x: x.exp(), 'any'),
    'fs.exp': (lambda x: (fs.exp if isinstance(x, Tensor) else torch.exp)(x), 'any'),
    'log': (lambda x: x.log(), 'pos'),
    'sqrt': (lambda x: x.sqrt(), 'pos'),
    'abs': (lambda x: x.abs(), 'away'),
    'relu': (lambda x: x.relu(), 'away'),
    'sigmoid': (lambda x: x.sigmoid(), 'any'),
    'tanh': (lambda x: x.tanh(), 'any'),
    'clamp': (lambda x: x.clamp(-0.5, 0.5), 'away'),
    'clamp_min_only': (lambda x: x.clamp(min=0.1), 'away'),
    'clamp_max_only': (lambda x: x.clamp(max=0.2), 'away'),
    'clamp_min': (lambda x: x.clamp_min(0.1), 'away'),
    'pow2': (lambda x: x.pow(2), 'any'),
    'pow3': (lambda x: x ** 3, 'any'),
    'pow_half': (lambda x: x ** 0.5, 'pos'),
    'pow_neg': (lambda x: x ** -1.5, 'pos'),
    'pow0': (lambda x: x ** 0, 'any'),
    'rpow': (lambda x: 2 ** x, 'any'),
    'neg': (lambda x: -x, 'any'),
    'abs_builtin': (lambda x: abs(x), 'away'),
    'sign_mix': (lambda x: x * x.sign(), 'away'),
}


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('name', list(UNARY))
def test_unary(name, shape, dtype):
    fn, kind = UNARY[name]
    check_both(fn, arr(shape, kind), dtype=dtype)


def test_relu_at_zero_and_abs_at_zero_like_torch():
    x = np.array([-1.0, 0.0, 0.0, 2.0])
    check_both(lambda t: t.relu(), x)
    check_both(lambda t: t.abs(), x)
    check_both(lambda t: t.clamp(0.0, 2.0), x)   # gradient passes at the ends of the interval


def test_sigmoid_is_stable_for_large_inputs():
    x = np.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0])
    for dtype in DTYPES:
        with warnings.catch_warnings():
            warnings.simplefilter('error')     # no overflow warning from numpy
            r = check_both(lambda t: t.sigmoid(), x, dtype=dtype)
        assert np.isfinite(r.grads_ours[0].array).all()


def test_elementwise_functions_as_functions():
    x = arr((3, 4), 'pos')
    for f, g in ((fs.exp, torch.exp), (fs.log, torch.log), (fs.sqrt, torch.sqrt), (fs.abs, torch.abs),
                 (fs.relu, torch.relu), (fs.sigmoid, torch.sigmoid), (fs.tanh, torch.tanh)):
        check_both(lambda t: f(t) if isinstance(t, Tensor) else g(t), x)
    check_both(lambda t: (fs.clamp if isinstance(t, Tensor) else torch.clamp)(t, 0.7, 1.5), x)
    check_both(lambda t: (fs.pow if isinstance(t, Tensor) else torch.pow)(t, 3), x)


def test_integer_inputs_to_float_functions_give_float32():
    i = np.array([1, 2, 3])
    for f in (lambda t: t.exp(), lambda t: t.log(), lambda t: t.sqrt(), lambda t: t.sigmoid(), lambda t: t.tanh(),
              lambda t: t.abs(), lambda t: t.relu(), lambda t: -t):
        check_both(f, i, dtype=None)


# ----------------------------------------------------------------------------------------------------------------
# binary arithmetic, broadcasting patterns, scalars on either side

BROADCASTS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
              ((), (3,)), ((3,), ()), ((), ()), ((2, 1, 4), (3, 1)), ((1,), (2, 3)), ((5,), (5,))]

BINARY = {
    'add': (lambda a, b: a + b, 'any', 'any'),
    'sub': (lambda a, b: a - b, 'any', 'any'),
    'mul': (lambda a, b: a * b, 'any', 'any'),
    'div': (lambda a, b: a / b, 'any', 'away'),
    'pow': (lambda a, b: a ** b, 'pos', 'any'),
    'add_alpha': (lambda a, b: a.add(b, alpha=2.5), 'any', 'any'),
    'sub_alpha': (lambda a, b: a.sub(b, alpha=0.5), 'any', 'any'),
    'maximum': (lambda a, b: a.maximum(b), 'unique', 'unique'),
    'minimum': (lambda a, b: a.minimum(b), 'unique', 'unique'),
    'max_tensor': (lambda a, b: a.max(b), 'unique', 'unique'),
    'where': (lambda a, b: (fs.where if isinstance(a, Tensor) else torch.where)(a > 0, a, b), 'away', 'any'),
}


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shapes', BROADCASTS, ids=str)
@pytest.mark.parametrize('name', list(BINARY))
def test_binary(name, shapes, dtype):
    fn, ka, kb = BINARY[name]
    check_both(fn, arr(shapes[0], ka, 1), arr(shapes[1], kb, 2), dtype=dtype)


@pytest.mark.parametrize('name', ['add', 'sub', 'mul', 'div', 'pow'])
def test_binary_only_one_side_requires_grad(name):
    fn, ka, kb = BINARY[name]
    for k in (0, 1):
        check_both(fn, arr((3, 4), ka, 1), arr((4,), kb, 2), grad_args={k})


SCALAR_EXPRS = {
    'x+2': lambda x: x + 2, '2+x': lambda x: 2 + x, 'x-2': lambda x: x - 2, '2-x': lambda x: 2 - x,
    'x*3': lambda x: x * 3, '3*x': lambda x: 3 * x, 'x/3': lambda x: x / 3, '3/x': lambda x: 3 / x,
    'x**2': lambda x: x ** 2, '2**x': lambda x: 2 ** x, 'x**2.5': lambda x: x ** 2.5, '0.5**x': lambda x: 0.5 ** x,
    'x*1.5+0.25': lambda x: x * 1.5 + 0.25, 'x*True': lambda x: x * True, 'np.float64*x': lambda x: np.float64(2.0) * x,
    'x*np.float32': lambda x: x * np.float32(0.5),
}


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('name', list(SCALAR_EXPRS))
def test_python_scalars_on_either_side(name, dtype):
    check_both(SCALAR_EXPRS[name], arr((3, 4), 'pos'), dtype=dtype)


INT_DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
SCALARS = [2, 2.5, True, None]


@pytest.mark.parametrize('op', ['+', '-', '*', '/', '**'])
@pytest.mark.parametrize('da', INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize('db', INT_DTYPES + SCALARS + ['0d-int64', '0d-float64'], ids=str)
def test_dtype_promotion_like_torch(op, da, db):
    "The result dtype (and values) of mixed-dtype operations, tensors, 0-d tensors and Python scalars."
    a = np.array([1, 2, 3]).astype(da)
    if isinstance(db, str):
        b = np.array(2, dtype=np.int64 if 'int' in db else np.float64)
    elif db is None: b = a.copy()
    elif isinstance(db, (bool, int, float)): b = db
    else: b = np.array([2, 1, 2]).astype(db)
    f = {'+': lambda x, y: x + y, '-': lambda x, y: x - y, '*': lambda x, y: x * y, '/': lambda x, y: x / y,
         '**': lambda x, y: x ** y}[op]
    ours, theirs = make_inputs([a, b], dtype=None, requires_grad=False)
    try: expected = f(*theirs)
    except (RuntimeError, TypeError) as e:
        with pytest.raises(type(e)) as err: f(*ours)
        assert str(err.value).startswith(str(e).split('.')[0])
        return
    got = f(*ours)
    assert_same_value(got, expected, 1e-6, 1e-6)
    # and the scalar on the left
    if not isinstance(b, np.ndarray):
        try: expected = f(b, theirs[0])
        except (RuntimeError, TypeError) as e:
            with pytest.raises(type(e)): f(b, ours[0])
            return
        assert_same_value(f(b, ours[0]), expected, 1e-6, 1e-6)


def test_int_true_division_and_mixed_grads():
    check_both(lambda i, j: i / j, np.array([1, 2, 7]), np.array([2, 3, 2]), dtype=None)
    check_both(lambda i, x: i * x + i / x, np.array([1, 2, 7]), arr((3,), 'pos'), dtype=np.float32)
    # a float64 0-d tensor does not widen a float32 tensor, and its gradient comes back in float64
    r = check_both(lambda x, s: x * s, arr((3,)).astype(np.float32), np.array(1.5), dtype=None)
    assert r.grads_ours[1].dtype == np.float64


# ----------------------------------------------------------------------------------------------------------------
# hypothesis: broadcast-compatible shapes and values

@settings(max_examples=40, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4),
       op=st.sampled_from(['add', 'sub', 'mul', 'div', 'maximum']), data=st.data())
def test_hypothesis_broadcasting(shapes, op, data):
    sa, sb = shapes.input_shapes
    floats = st.floats(-3, 3, allow_nan=False, width=64)
    a = data.draw(hnp.arrays(np.float64, sa, elements=floats))
    b = data.draw(hnp.arrays(np.float64, sb, elements=floats))
    if op == 'div': b = np.where(np.abs(b) < 0.25, 1.0, b)
    if op == 'maximum': b = np.asarray(b + 0.123456)   # no ties
    fn = {'add': lambda x, y: x + y, 'sub': lambda x, y: x - y, 'mul': lambda x, y: x * y,
          'div': lambda x, y: x / y, 'maximum': lambda x, y: x.maximum(y)}[op]
    check_both(fn, a, b)


@settings(max_examples=40, deadline=None)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, max_side=4), data=st.data())
def test_hypothesis_reductions(shape, data):
    ndim = len(shape)
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-5, 5, allow_nan=False), unique=True))
    keepdim = data.draw(st.booleans())
    if ndim:
        dims = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                                  unique_by=lambda d: d % ndim))
        dim = dims[0] if len(dims) == 1 and data.draw(st.booleans()) else tuple(dims)
    else: dim = data.draw(st.sampled_from([0, -1, None]))
    check_both(lambda t: t.sum(dim=dim, keepdim=keepdim), x)
    if x.size: check_both(lambda t: t.mean(dim=dim, keepdim=keepdim), x)
    if x.size and isinstance(dim, int) and (not ndim or shape[dim]):
        check_both(lambda t: t.max(dim=dim, keepdim=keepdim), x)
        check_both(lambda t: t.min(dim, keepdim), x)
        check_both(lambda t: t.argmax(dim=dim, keepdim=keepdim), x)
        check_both(lambda t: t.argmin(dim=dim, keepdim=keepdim), x)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_hypothesis_matmul(data):
    n, k, m = (data.draw(st.integers(1, 4)) for _ in range(3))
    batch = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3))
    ba, bb = batch.input_shapes
    sa = data.draw(st.sampled_from([(k,), ba + (n, k)]))
    sb = data.draw(st.sampled_from([(k,), bb + (k, m)]))
    check_both(lambda a, b: a @ b, arr(sa, 'any', 1), arr(sb, 'any', 2))


# ----------------------------------------------------------------------------------------------------------------
# matmul

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((3,), (5, 3, 4)),
                 ((5, 2, 3), (3,)), ((1, 2, 3), (6, 3, 1))]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shapes', MATMUL_SHAPES, ids=str)
def test_matmul(shapes, dtype):
    check_both(lambda a, b: a @ b, arr(shapes[0], 'any', 1), arr(shapes[1], 'any', 2), dtype=dtype)
    check_both(lambda a, b: (fs.matmul if isinstance(a, Tensor) else torch.matmul)(a, b),
               arr(shapes[0], 'any', 1), arr(shapes[1], 'any', 2), dtype=dtype)


def test_matmul_one_side_and_ints():
    for k in (0, 1):
        check_both(lambda a, b: a @ b, arr((4, 3), 'any', 1), arr((3, 2), 'any', 2), grad_args={k})
        check_both(lambda a, b: a @ b, arr((5, 4, 3), 'any', 1), arr((3,), 'any', 2), grad_args={k})
    check_both(lambda a, b: a @ b, np.arange(6).reshape(2, 3), np.arange(3), dtype=None)
    check_both(lambda a, b: a.T @ b, arr((3, 2)), arr((3, 4)))   # non-contiguous operand


@pytest.mark.parametrize('sa,sb', [((5, 784), (785, 10)), ((3,), (4,)), ((2, 3), (4,)), ((3,), (4, 2)),
                                   ((2, 2, 3), (2, 4, 2)), ((2, 2, 3), (3, 3, 2)), ((2, 3), (2, 4, 2)),
                                   ((), (3,)), ((3,), ())])
def test_matmul_errors_name_both_shapes(sa, sb):
    a, b = fs.tensor(np.zeros(sa, np.float32)), fs.tensor(np.zeros(sb, np.float32))
    with pytest.raises(RuntimeError) as ours: a @ b
    with pytest.raises(RuntimeError) as theirs: torch.zeros(sa) @ torch.zeros(sb)
    msg = str(ours.value)
    if len(sa) <= 2 and len(sb) <= 2 and sa and sb:   # torch's own phrase first
        assert msg.startswith(str(theirs.value)), (msg, str(theirs.value))
    if sa and sb:
        ka, kb = sa[-1], sb[0] if len(sb) == 1 else sb[-2]
        names = {f'{ka}', f'{kb}'}
        assert all(n in msg for n in names), msg
        if ka != kb and not (len(sa) <= 2 and len(sb) <= 2):
            assert str(list(sa)) in msg and str(list(sb)) in msg, msg
    else:
        assert '0D' in msg


def test_matmul_error_message_exact():
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(5x784 and 785x10\): the "
                                           r"columns of the first \(784\) must equal the rows of the second \(785\)"):
        fs.zeros(5, 784) @ fs.zeros(785, 10)


@pytest.mark.parametrize('sa,sb', [((3,), (4,)), ((2, 3), (4, 3)), ((2, 3), (2,)), ((5, 2, 3), (4, 1, 1)),
                                   ((1, 3), (2, 4))])
@pytest.mark.parametrize('op', ['+', '-', '*', '/', '**', '<', '==', 'maximum', 'where'])
def test_broadcast_errors_start_with_torch_and_name_both_shapes(sa, sb, op):
    f = {'+': lambda x, y: x + y, '-': lambda x, y: x - y, '*': lambda x, y: x * y, '/': lambda x, y: x / y,
         '**': lambda x, y: x ** y, '<': lambda x, y: x < y, '==': lambda x, y: x == y,
         'maximum': lambda x, y: x.maximum(y),
         'where': lambda x, y: (fs.where if isinstance(x, Tensor) else torch.where)(x > 0, x, y)}[op]
    with pytest.raises(RuntimeError) as theirs: f(torch.ones(*sa), torch.ones(*sb))
    with pytest.raises(RuntimeError) as ours: f(fs.ones(*sa), fs.ones(*sb))
    assert str(ours.value).startswith(str(theirs.value)), (str(ours.value), str(theirs.value))
    assert str(list(sa)) in str(ours.value) and str(list(sb)) in str(ours.value)


# ----------------------------------------------------------------------------------------------------------------
# comparisons

@pytest.mark.parametrize('op', ['==', '!=', '<', '<=', '>', '>='])
@pytest.mark.parametrize('shapes', [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((3,), ())], ids=str)
def test_comparisons(op, shapes):
    f = {'==': lambda a, b: a == b, '!=': lambda a, b: a != b, '<': lambda a, b: a < b, '<=': lambda a, b: a <= b,
         '>': lambda a, b: a > b, '>=': lambda a, b: a >= b}[op]
    a = np.round(arr(shapes[0], 'any', 1))
    b = np.round(arr(shapes[1], 'any', 2))
    check_both(f, a, b, dtype=np.float32)
    check_both(lambda x: f(x, 0.0), a)
    check_both(lambda x: f(1, x), a)
    check_both(lambda x: f(x, 1), np.array([0, 1, 2]), dtype=None)


def test_comparison_results_and_logic():
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    for r in (x > 1, x == 2, x != 1, x <= 1.5):
        assert r.dtype == fs.bool and not r.requires_grad and r.grad_fn is None
    check_both(lambda a, b: (a > 0) & (b > 0) | ~(a > 1), arr((3, 4), 'any', 1), arr((4,), 'any', 2))
    assert (fs.tensor([1.0]) == None) is False   # noqa: E711  like torch


# ----------------------------------------------------------------------------------------------------------------
# reductions

REDUCE_DIMS = [dict(), dict(dim=0), dict(dim=-1), dict(dim=(0, 2)), dict(dim=(-1, 0)), dict(dim=1, keepdim=True),
               dict(dim=(0, 1), keepdim=True), dict(dim=None, keepdim=False)]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('kw', REDUCE_DIMS, ids=str)
@pytest.mark.parametrize('name', ['sum', 'mean', 'var', 'std', 'norm'])
def test_reductions(name, kw, dtype):
    x = arr((2, 3, 4))
    # var/std of float32 over 2 elements: torch (Welford) and a two-pass formula round differently
    rtol = 2e-3 if dtype == np.float32 and name in ('var', 'std') else None
    check_both(lambda t: getattr(t, name)(**kw), x, dtype=dtype, rtol=rtol)


@pytest.mark.parametrize('kw', [dict(), dict(dim=0), dict(dim=-1, keepdim=True)], ids=str)
def test_reductions_as_functions(kw):
    x = arr((3, 4))
    for name in ('sum', 'mean'):
        check_both(lambda t: (getattr(fs, name) if isinstance(t, Tensor) else getattr(torch, name))(t, **kw), x)


def test_reduction_corner_cases():
    check_both(lambda t: t.sum(), np.array(3.0))
    check_both(lambda t: t.sum(0), np.array(3.0))
    check_both(lambda t: t.mean(-1, keepdim=True), np.array(3.0))
    check_both(lambda t: t.sum(), np.zeros((0, 3)))
    check_both(lambda t: t.sum(0), np.zeros((0, 3)))
    check_both(lambda t: t.sum(), np.array([True, False, True]), dtype=None)
    check_both(lambda t: t.sum(0), np.array([[1, 2], [3, 4]], dtype=np.int32), dtype=None)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        fs.zeros(2, 3).sum(2)
    with pytest.raises(RuntimeError, match='mean\\(\\): could not infer output dtype'):
        fs.tensor([1, 2]).mean()


@pytest.mark.parametrize('kw', [dict(), dict(unbiased=False), dict(correction=0), dict(correction=2),
                                dict(dim=1), dict(dim=0, unbiased=False, keepdim=True), dict(dim=(0, 1)),
                                dict(dim=-1, correction=0)], ids=str)
def test_var_std(kw):
    x = arr((4, 5))
    check_both(lambda t: t.var(**kw), x)
    check_both(lambda t: t.std(**kw), x)


def test_var_positional_forms():
    x = arr((4, 5))
    check_both(lambda t: t.var(1, False), x)
    check_both(lambda t: t.std(0, True, True), x)


@pytest.mark.parametrize('p', [2, 'fro', 1, 3, 0.5, math.inf, -math.inf, 0])
@pytest.mark.parametrize('kw', [dict(), dict(dim=1), dict(dim=0, keepdim=True), dict(dim=(0, 1))], ids=str)
def test_norm(p, kw):
    x = arr((3, 4), 'unique')
    check_both(lambda t: t.norm(p, **kw), x)


def test_norm_at_zero_has_zero_gradient_like_torch():
    x = np.zeros((2, 3))
    x[0] = [3.0, -4.0, 0.0]
    for p in (2, 1, 3, math.inf):
        check_both(lambda t: t.norm(p, dim=1), x)
    check_both(lambda t: t.norm(), np.zeros(3))
    check_both(lambda t: fs.norm(t) if isinstance(t, Tensor) else torch.norm(t), arr((3, 2)))


# ----------------------------------------------------------------------------------------------------------------
# max / min: ties, dims, indices

@pytest.mark.parametrize('name', ['max', 'min'])
def test_max_min_ties_like_torch(name):
    x = np.array([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0], [-3.0, -3.0, -3.0]])
    if name == 'min': x = -x
    check_both(lambda t: getattr(t, name)(), x)        # whole-tensor: gradient split evenly among ties
    for d in (0, 1, -1):
        check_both(lambda t: getattr(t, name)(dim=d), x)   # with dim: to the returned index
        check_both(lambda t: getattr(t, name)(d, True), x)
    check_both(lambda t: getattr(t, name)(), np.full((2, 2), 4.0))


def test_max_returns_named_tuple_and_marks_indices():
    x = fs.tensor([[1.0, 3.0], [2.0, 0.0]], requires_grad=True)
    r = x.max(dim=1)
    assert type(r).__name__ == 'max' and r.values is r[0] and r.indices is r[1]
    assert r.indices.dtype == fs.int64 and not r.indices.requires_grad and r.values.requires_grad
    assert fs.min(x, 0).indices.tolist() == [0, 1]
    check_both(lambda t: (fs.max(t, 1) if isinstance(t, Tensor) else torch.max(t, 1)), arr((3, 4), 'unique'))
    check_both(lambda t: (fs.max(t) if isinstance(t, Tensor) else torch.max(t)), arr((3, 4), 'unique'))


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shape', [(5,), (3, 4), (2, 3, 4)])
def test_max_min_shapes(shape, dtype):
    x = arr(shape, 'unique')
    for name in ('max', 'min'):
        check_both(lambda t: getattr(t, name)(), x, dtype=dtype)
        for d in range(-len(shape), len(shape)):
            check_both(lambda t: getattr(t, name)(d), x, dtype=dtype)


def test_argmax_argmin():
    x = arr((3, 4, 2), 'unique')
    for name in ('argmax', 'argmin'):
        check_both(lambda t: getattr(t, name)(), x)
        for d in (0, 1, -1):
            check_both(lambda t: getattr(t, name)(d), x)
            check_both(lambda t: getattr(t, name)(dim=d, keepdim=True), x)
        check_both(lambda t: (getattr(fs, name) if isinstance(t, Tensor) else getattr(torch, name))(t, 1), x)
    check_both(lambda t: t.argmax(0), np.array([[1, 1], [1, 0]]), dtype=None)   # ties: the first, like torch


def test_max_of_empty_raises():
    with pytest.raises(RuntimeError, match='Expected reduction dim to be specified'):
        fs.zeros(0).max()


# ----------------------------------------------------------------------------------------------------------------
# softmax family

@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shape,dim', [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1)], ids=str)
@pytest.mark.parametrize('name', ['softmax', 'log_softmax', 'logsumexp'])
def test_softmax_family(name, shape, dim, dtype):
    x = arr(shape) * 3
    check_both(lambda t: getattr(t, name)(dim), x, dtype=dtype)
    if name != 'logsumexp':
        check_both(lambda t: (getattr(fs, name)(t, dim) if isinstance(t, Tensor) else getattr(torch, name)(t, dim)),
                   x, dtype=dtype)
    else: check_both(lambda t: t.logsumexp(dim, keepdim=True), x, dtype=dtype)


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 0.0, -1000.0], [1e4, 1e4, 1e4], [-1e4, -1e4 + 1, 0.0]])
    for dtype in DTYPES:
        for name in ('softmax', 'log_softmax', 'logsumexp'):
            r = check_both(lambda t: getattr(t, name)(1), x, dtype=dtype)
            assert all(np.isfinite(o.array).all() for o in r.flat_ours)
            assert np.isfinite(r.grads_ours[0].array).all()


# ----------------------------------------------------------------------------------------------------------------
# shape operations and views

SHAPE_OPS = {
    'reshape': (lambda t: t.reshape(4, 6), (2, 3, 4)),
    'reshape_tuple': (lambda t: t.reshape((6, -1)), (2, 3, 4)),
    'reshape_neg': (lambda t: t.reshape(-1), (2, 3, 4)),
    'reshape_noncontig': (lambda t: t.transpose(0, 2).reshape(-1, 2), (2, 3, 4)),
    'view': (lambda t: t.view(3, 8), (2, 3, 4)),
    'view_neg': (lambda t: t.view(-1, 4), (2, 3, 4)),
    'view_as': (lambda t: t.view_as(t.sum(0)), (1, 3, 4)),
    'flatten': (lambda t: t.flatten(), (2, 3, 4)),
    'flatten1': (lambda t: t.flatten(1), (2, 3, 4)),
    'flatten_mid': (lambda t: t.flatten(0, 1), (2, 3, 4)),
    'flatten_0d': (lambda t: t.flatten(), ()),
    'T2': (lambda t: t.T, (3, 4)),
    'T1': (lambda t: t.T, (3,)),
    't': (lambda t: t.t(), (3, 4)),
    't1': (lambda t: t.t(), (3,)),
    'mT': (lambda t: t.mT, (2, 3, 4)),
    'transpose': (lambda t: t.transpose(0, 2), (2, 3, 4)),
    'transpose_neg': (lambda t: t.transpose(-1, -2), (2, 3, 4)),
    'transpose_same': (lambda t: t.transpose(1, 1), (2, 3, 4)),
    'permute': (lambda t: t.permute(2, 0, 1), (2, 3, 4)),
    'permute_tuple': (lambda t: t.permute((1, -1, 0)), (2, 3, 4)),
    'unsqueeze0': (lambda t: t.unsqueeze(0), (3, 4)),
    'unsqueeze_end': (lambda t: t.unsqueeze(-1), (3, 4)),
    'unsqueeze_mid': (lambda t: t.unsqueeze(1), (3, 4)),
    'unsqueeze_0d': (lambda t: t.unsqueeze(0), ()),
    'squeeze': (lambda t: t.squeeze(), (1, 3, 1, 4)),
    'squeeze_dim': (lambda t: t.squeeze(2), (1, 3, 1, 4)),
    'squeeze_dim_noop': (lambda t: t.squeeze(1), (1, 3, 1, 4)),
    'squeeze_neg': (lambda t: t.squeeze(-2), (1, 3, 1, 4)),
    'expand': (lambda t: t.expand(2, 3, 4), (3, 1)),
    'expand_neg': (lambda t: t.expand(5, -1, 4), (3, 1)),
    'expand_tuple': (lambda t: t.expand((2, 3)), (3,)),
    'expand_as': (lambda t: t.expand_as(t.sum() + t.sum(1, keepdim=True).expand(3, 4)), (3, 1)),
    'contiguous': (lambda t: t.T.contiguous() * 1, (3, 4)),
    'clone': (lambda t: t.clone(), (3, 4)),
    'chain': (lambda t: t.T.reshape(4, 1, 3).squeeze(1).unsqueeze(0).expand(2, 4, 3).flatten(1).permute(1, 0), (3, 4)),
}


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('name', list(SHAPE_OPS))
def test_shape_ops(name, dtype):
    fn, shape = SHAPE_OPS[name]
    check_both(fn, arr(shape), dtype=dtype)


def test_views_share_memory_and_version_counter():
    x = fs.tensor(np.arange(6.0).reshape(2, 3))
    for v in (x.view(6), x.reshape(3, 2), x.T, x.transpose(0, 1), x.permute(1, 0), x.unsqueeze(0), x[0], x[:, 1:],
              x.expand(4, 2, 3), x.flatten(), x.squeeze(), x.t()):
        assert v._version_counter is x._version_counter
        assert np.shares_memory(v.array, x.array)
    x.add_(1)
    assert x.view(6)._version == 1
    # reshape of a non-contiguous tensor copies: a new counter, like torch
    c = x.T.reshape(6)
    assert not np.shares_memory(c.array, x.array)
    with pytest.raises(RuntimeError, match='view size is not compatible'):
        x.T.view(6)
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        x.reshape(4, 2)
    with pytest.raises(RuntimeError, match='only one dimension can be inferred'):
        x.reshape(-1, -1)
    with pytest.raises(RuntimeError, match=r't\(\) expects a tensor with <= 2 dimensions, but self is 3D'):
        fs.zeros(1, 2, 3).t()
    with pytest.raises(RuntimeError, match=r'The expanded size of the tensor \(4\) must match the existing size \(3\)'):
        fs.zeros(3).expand(2, 4)
    with pytest.raises(IndexError, match='Dimension out of range'):
        x.unsqueeze(3)
    t = fs.zeros(2, 3)
    assert t.contiguous() is t and t.is_contiguous() and not t.T.is_contiguous()


def test_inplace_through_a_view_is_seen_by_the_base():
    x = fs.zeros(2, 3)
    x[0].add_(1)
    x.view(6)[5] = 7.0
    tx = torch.zeros(2, 3)
    tx[0].add_(1)
    tx.view(6)[5] = 7.0
    assert_same_value(x, tx, 0, 0)
    assert x._version == tx._version


def _einsum(eq, t): return (fs.einsum if isinstance(t, Tensor) else torch.einsum)(eq, t)


# every kind of view (and a few look-alikes that copy), taken of a (2, 3, 4) tensor
VIEWS = {
    'slice': lambda h: h[1:],
    'step_slice': lambda h: h[:, ::2],
    'negative_slice': lambda h: h[..., -2:],
    'int': lambda h: h[1],
    'int_0d': lambda h: h[1, 2, 3],
    'none_ellipsis': lambda h: h[None, ..., 1:3],
    'view': lambda h: h.view(6, 4),
    'reshape': lambda h: h.reshape(-1),
    'view_as': lambda h: h[0].view_as(h[1].T),
    'flatten': lambda h: h.flatten(1),
    'unsqueeze': lambda h: h.unsqueeze(1),
    'squeeze': lambda h: h[:1].squeeze(0),
    'permute': lambda h: h.permute(2, 0, 1),
    'transpose': lambda h: h.transpose(0, 2),
    'T': lambda h: h[0].T,
    't': lambda h: h[1].t(),
    'mT': lambda h: h.mT,
    'einsum_diagonal': lambda h: _einsum('ii->i', h[0, :, :3]),
    'einsum_permute': lambda h: _einsum('ijk->kji', h),
    'chain': lambda h: h[1:].transpose(1, 2)[:, 1:3].unsqueeze(0).flatten(0, 1).view(2, 3)[1],
    'reshape_copy': lambda h: h.transpose(0, 1).reshape(-1),       # not a view: the base must not change
    'list_index_copy': lambda h: h[[0, 1], 1],
    'mask_copy': lambda h: h[h > 0],
}
COPIES = {'reshape_copy', 'list_index_copy', 'mask_copy'}

VIEW_INPLACE = {
    'mul_': lambda v, w: v.mul_(w),
    'div_': lambda v, w: v.div_(w),
    'add_self': lambda v, w: v.add_(v * 3 + w),
    'sub_alpha': lambda v, w: v.sub_(w, alpha=2),
    'iadd': lambda v, w: v.__iadd__(w * w),
    'copy_': lambda v, w: v.copy_(w * 3),
    'fill_': lambda v, w: v.fill_(2.5),
    'zero_': lambda v, w: v.zero_(),
    'setitem': lambda v, w: v.__setitem__(..., w - 1),
}


def test_views_are_registered_copies_are_not():
    x = fs.tensor(arr((2, 3, 4)), requires_grad=True)
    h = x * 1
    for name, view in VIEWS.items():
        v = view(h)
        shared = np.shares_memory(v.array, h.array)
        assert shared == (name not in COPIES), name
        assert (v._view is not None) == shared, name
        if shared: assert v._view.base is h and v._version_counter is h._version_counter, name
        assert torch.Tensor._is_view(view(torch.tensor(arr((2, 3, 4))))) == shared, name
    assert h._view is None and x._view is None


@pytest.mark.parametrize('op', list(VIEW_INPLACE))
@pytest.mark.parametrize('name', list(VIEWS))
def test_inplace_through_every_kind_of_view(name, op):
    view, f = VIEWS[name], VIEW_INPLACE[op]

    def fn(x, w):
        h = x * 1
        before = h * 2             # taken before the change: must keep the old values
        v = view(h)
        f(v, w)
        return h * x + before, v * v
    check_both(fn, arr((2, 3, 4), 'away', 1), arr((), 'away', 2))


@pytest.mark.parametrize('name', ['slice', 'int', 'view', 'transpose', 'einsum_diagonal', 'chain', 'reshape_copy'])
def test_inplace_through_a_view_of_a_tensor_without_grad(name):
    "Only the written value requires grad: the base joins the graph, as in torch."
    def fn(x, w):
        h = x * 1
        VIEWS[name](h).mul_(w)
        return h * h
    check_both(fn, arr((2, 3, 4), 'away', 1), arr((), 'away', 2), grad_args={1})


@pytest.mark.parametrize('name', ['slice', 'int_0d', 'reshape', 'permute', 'chain'])
def test_inplace_through_a_view_second_derivatives(name):
    def fn(x, w):
        h = x * 1
        VIEWS[name](h).mul_(w * x.sum())
        return h * h * x
    check_second(fn, arr((2, 3, 4), 'away', 1), arr((), 'away', 2))


def test_inplace_through_a_view_twice_and_through_the_base():
    def fn(x, w):
        h = x * 1
        h[0].mul_(w)
        h.T[1:].add_(w * 2)       # a second view of the rebased h
        h.mul_(x)                 # the base itself, after its views were written
        h[1, 1:].div_(w + 3)      # and a view of the new base
        return h
    check_both(fn, arr((2, 3), 'away', 1), arr((), 'away', 2))


@pytest.mark.parametrize('name', sorted(set(VIEWS) - COPIES))
def test_inplace_through_a_view_of_a_leaf_raises(name):
    view = VIEWS[name]
    for f in (lambda v: v.mul_(2), lambda v: v.copy_(v * 0 + 1), lambda v: v.__setitem__(..., 0.5)):
        x, tx = fs.tensor(arr((2, 3, 4)), requires_grad=True), torch.tensor(arr((2, 3, 4)), requires_grad=True)
        with pytest.raises(RuntimeError) as theirs: f(view(tx))
        with pytest.raises(RuntimeError, match=re.escape(
                'a view of a leaf Variable that requires grad is being used in an in-place operation.')):
            f(view(x))
        assert str(theirs.value).startswith('a view of a leaf Variable that requires grad')
        assert_same_value(x, tx, 0, 0)
        assert x._version == tx._version == 0
        # under no_grad it is allowed (an optimizer step, an initialisation), and the leaf stays a leaf
        with no_grad(): f(view(x))
        with torch.no_grad(): f(view(tx))
        assert_same_value(x, tx, 0, 0)
        assert x._version == tx._version == 1 and x.is_leaf and x.grad_fn is None


@pytest.mark.parametrize('name', sorted(COPIES))
def test_inplace_on_a_copy_of_a_leaf_is_allowed(name):
    x, tx = fs.tensor(arr((2, 3, 4)), requires_grad=True), torch.tensor(arr((2, 3, 4)), requires_grad=True)
    VIEWS[name](x).mul_(2); VIEWS[name](tx).mul_(2)
    assert_same_value(x, tx, 0, 0)


def test_inplace_through_an_expanded_view_raises_like_torch():
    leaf, tleaf = fs.tensor(arr((2, 1, 4)), requires_grad=True), torch.tensor(arr((2, 1, 4)), requires_grad=True)
    for f in (lambda e: e.add_(1), lambda e: e.mul_(e * 0 + 2), lambda e: e.copy_(e * 0), lambda e: e[0].mul_(2),
              lambda e: e.__setitem__(0, 1.0)):
        for make, tmake in ((lambda: (leaf * 1).expand(2, 3, 4), lambda: (tleaf * 1).expand(2, 3, 4)),      # recorded
                            (lambda: leaf.detach().expand(2, 3, 4), lambda: tleaf.detach().expand(2, 3, 4))):  # not
            with pytest.raises(RuntimeError) as theirs: f(tmake())
            with pytest.raises(RuntimeError, match='more than one element of the written-to tensor refers to a single '
                                                   'memory location. Please clone'):
                f(make())
            assert 'more than one element of the written-to tensor refers to a single memory location' in str(theirs.value)
        with pytest.raises(RuntimeError, match='a view of a leaf Variable that requires grad'):
            f(leaf.expand(2, 3, 4))
        with pytest.raises(RuntimeError, match='a view of a leaf Variable that requires grad'):
            f(tleaf.expand(2, 3, 4))


def test_inplace_through_a_view_of_a_saved_tensor_raises():
    for lib in (fs, torch):
        x = lib.tensor(arr((2, 3)), requires_grad=True)
        h = x * 1
        y = h * x              # saves h (for x's gradient)
        h.T[1].mul_(2)         # changes h's memory through a view
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            y.sum().backward()



def test_inplace_through_a_view_of_a_column_major_base():
    "`x.T * 1` keeps the transposed layout (numpy and torch), so `h.T.reshape(6)` is a view only because of it."
    def fn(x, w):
        h = x.T * 1
        v = h.T.reshape(6)
        assert np.shares_memory(v.array, h.array) if isinstance(v, Tensor) else v._is_view()
        v[1:4].mul_(w)
        return h * h
    check_both(fn, arr((2, 3), 'away', 1), arr((), 'away', 2))

def test_view_taken_before_an_inplace_change_of_its_base():
    def fn(x, w):
        h = x * 1
        v = h[1:]
        h.mul_(w)
        return v * v
    check_both(fn, arr((3,), 'away', 1), arr((), 'away', 2))


STALE_VIEWS = {   # a view taken earlier, then its memory changed in place another way: torch regenerates its history
    'sibling view': lambda x, w: _stale(x, w, lambda h: h[1:], lambda h: h[:2].mul_(w)),
    'view of a view': lambda x, w: _stale(x, w, lambda h: h[1:][1:].reshape(2, 1), lambda h: h.mul_(w)),
    'through another view': lambda x, w: _stale(x, w, lambda h: h.reshape(2, 2).T, lambda h: h.view(2, 2)[0].add_(w)),
    'several in a row': lambda x, w: _stale(x, w, lambda h: h[::2], lambda h: h.add_(w).mul_(w)[1:3].mul_(x[0])),
    'view of the view changed': lambda x, w: _stale(x, w, lambda h: h[1:], lambda h: h[1:].mul_(w)),
    'used twice after': lambda x, w: _stale(x, w, lambda h: h[1:], lambda h: h.mul_(w), twice=True),
}

def _stale(x, w, view, change, twice=False):
    h = x * 1
    v = view(h)
    change(h)
    return (v * v, v.sum() * w) if twice else v * v

@pytest.mark.parametrize('name', list(STALE_VIEWS))
def test_stale_view_regenerated(name):
    check_both(STALE_VIEWS[name], arr((4,), 'away', 1), arr((), 'away', 2))


def test_stale_view_as_backward_root_and_grad_input():
    for lib in (fs, torch):
        x = lib.tensor(arr((4,), 'away', 1), requires_grad=True)
        w = lib.tensor(arr((), 'away', 2), requires_grad=True)
        h = x * 1
        v = h[1:]
        h.mul_(w)
        v.backward(lib.ones(3, dtype=lib.float64))   # the root itself is stale
        if lib is fs: ours = (x.grad.numpy().copy(), w.grad.item())
        else: np.testing.assert_allclose(x.grad.numpy(), ours[0]); np.testing.assert_allclose(w.grad.item(), ours[1])
    for lib in (fs, torch):   # and as an input of grad: torch takes the new history, so h.mul_(w)'s node
        x = lib.tensor(arr((4,), 'away', 1), requires_grad=True)
        h = x * 1
        v = h[1:]
        h.mul_(2)
        (g,) = (fs_grad if lib is fs else torch.autograd.grad)((v * v).sum(), v)
        if lib is fs: ours = g.numpy().copy()
        else: np.testing.assert_allclose(g.numpy(), ours)


def test_stale_view_of_a_base_that_gains_grad_in_place():
    "A base that needed no grad takes a history from `h.add_(w)`: its earlier view requires grad too, as in torch."
    def fn(x, w):
        h = x * 1
        v = h[1:]
        h.add_(w)
        assert v.requires_grad
        return v * v
    check_both(fn, arr((3,), 'away', 1), arr((), 'away', 2), grad_args=(1,))
    check_both(lambda x, w: _stale(x, w, lambda h: h.T[0], lambda h: h[1].mul_(w)), arr((2, 3), 'away', 1),
               arr((), 'away', 2), grad_args=(1,))


# ----------------------------------------------------------------------------------------------------------------
# dtype conversions

def test_dtype_conversions():
    x = arr((3, 4)) * 3
    for f in (lambda t: t.float(), lambda t: t.double(), lambda t: t.long(), lambda t: t.int(), lambda t: t.bool(),
              lambda t: t.half().double(), lambda t: t.to(torch.float64 if isinstance(t, torch.Tensor) else fs.float64),
              lambda t: t.to(dtype=torch.float32 if isinstance(t, torch.Tensor) else fs.float32),
              lambda t: t.to('cpu'), lambda t: t.float() * t.double(), lambda t: t.type_as(t.double())):
        for dtype in DTYPES:
            check_both(f, x, dtype=dtype, rtol=1e-3 if 'half' in str(f) else None)
    check_both(lambda i: i.float() / 2, np.array([1, 2, 3]), dtype=None)


def test_conversion_to_same_dtype_is_identity_and_int_cuts_graph():
    x = fs.tensor([1.5, 2.5], requires_grad=True)
    assert x.float() is x and x.to(fs.float32) is x
    i = x.long()
    assert i.dtype == fs.int64 and not i.requires_grad and i.grad_fn is None
    d = x.double()
    assert d.grad_fn is not None and d.dtype == fs.float64
    d.sum().backward()
    assert x.grad.dtype == fs.float32 and x.grad.tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------------------------------------------
# indexing

INDEXES = {
    'int': lambda t: t[1], 'neg_int': lambda t: t[-1], 'slice': lambda t: t[1:], 'step': lambda t: t[::2],
    'neg_step_free': lambda t: t[:, -2:], 'tuple': lambda t: t[1, 2], 'none': lambda t: t[None, 1],
    'ellipsis': lambda t: t[..., 1], 'ellipsis_none': lambda t: t[..., None, 0:2],
    'list': lambda t: t[[0, 2, 0]], 'int_tensor': lambda t: t[_idx(t, [2, 0, 0, 1])],
    'two_arrays': lambda t: t[_idx(t, [0, 2, 2]), _idx(t, [1, 1, 1])],
    'array_and_slice': lambda t: t[_idx(t, [1, 1]), 1:],
    'slice_and_array': lambda t: t[:, _idx(t, [3, 3, 0])],
    'bool_mask': lambda t: t[t > 0], 'bool_rows': lambda t: t[_bool(t, [True, False, True])],
    '0d_index': lambda t: t[_idx(t, 1)], '2d_index': lambda t: t[_idx(t, [[0, 1], [1, 1]])],
    'cross_entropy_pick': lambda t: t[_idx(t, [0, 1, 2]), _idx(t, [3, 3, 0])],
}


def _idx(t, values):
    return fs.tensor(values) if isinstance(t, Tensor) else torch.tensor(values)


def _bool(t, values):
    return fs.tensor(values) if isinstance(t, Tensor) else torch.tensor(values)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('name', list(INDEXES))
def test_indexing(name, dtype):
    check_both(INDEXES[name], arr((3, 4)), dtype=dtype)


def test_repeated_indices_accumulate():
    x = arr((4,))
    r = check_both(lambda t: t[_idx(t, [0, 0, 0, 3, 3])], x)
    g = r.grads_torch[0].numpy()
    assert g[1] == 0 and g[2] == 0       # never picked
    check_both(lambda t: t[[1, 1]].sum() * t[_idx(t, [[1, 1], [1, 2]])], x)
    X = arr((3, 4))
    check_both(lambda t: t[_idx(t, [0, 0, 2]), _idx(t, [1, 1, 1])], X)
    check_both(lambda t: t[_idx(t, [1, 1]), :], X)


def test_indexing_with_numpy_arrays_and_views():
    x = fs.tensor(np.arange(12.0).reshape(3, 4))
    assert x[np.array([0, 2])].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert x[1]._version_counter is x._version_counter           # basic indexing: a view
    assert x[1, 2]._version_counter is x._version_counter and np.shares_memory(x[1, 2].array, x.array)
    assert not np.shares_memory(x[[0, 1]].array, x.array)        # advanced indexing: a copy
    assert [r.tolist() for r in fs.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    with pytest.raises(TypeError, match='iteration over a 0-d tensor'):
        list(fs.tensor(1.0))


def test_setitem_without_graph():
    x = fs.zeros(3, 4)
    tx = torch.zeros(3, 4)
    for t in (x, tx):
        t[0] = 1.0
        t[1, 1:3] = (fs.tensor if t is x else torch.tensor)([5.0, 6.0])
        t[t > 5] = -1.0
        t[[2, 2], [0, 1]] = 9.0
    assert_same_value(x, tx, 0, 0)
    assert x._version == tx._version == 4
    with no_grad():
        w = fs.ones(3, requires_grad=True)
        w[0] = 2.0
        assert w.is_leaf and w.requires_grad and w.tolist() == [2.0, 1.0, 1.0]


def test_setitem_recorded():
    def f(x, v):
        y = x * 1
        y[1:3] = v * 2
        y[0, 0] = 5.0
        return y * y
    check_both(f, arr((4, 3)), arr((3,)))
    check_both(f, arr((4, 3)), arr((3,)), grad_args={1})
    check_both(f, arr((4, 3)), arr((3,)), grad_args={0})

    def g(x, v):
        y = x.clone()
        y[x > 0] = v.sum()
        return y
    check_both(g, arr((3, 3), 'away'), arr((2,)))


def test_setitem_on_leaf_that_requires_grad_raises():
    x = fs.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match='a leaf Variable that requires grad is being used in an in-place operation.'):
        x[0] = 2.0


# ----------------------------------------------------------------------------------------------------------------
# cat, stack, where, einsum

@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('dim', [0, 1, -1])
def test_cat_stack(dim, dtype):
    a, b, c = arr((2, 3), 'any', 1), arr((2, 3), 'any', 2), arr((2, 3), 'any', 3)
    cat = lambda ts, d: (fs.cat if isinstance(ts[0], Tensor) else torch.cat)(ts, dim=d)
    stack = lambda ts, d: (fs.stack if isinstance(ts[0], Tensor) else torch.stack)(ts, dim=d)
    check_both(lambda x, y, z: cat([x, y, z], dim), a, b, c, dtype=dtype)
    check_both(lambda x, y, z: stack([x, y, z], dim), a, b, c, dtype=dtype)
    check_both(lambda x, y: stack((x, y, x), dim) * cat((y, x), dim).sum(), a, b, dtype=dtype, grad_args={0})
    check_both(lambda x, y: cat([x, y[:, :1] if dim else y[:1]], dim), a, b, dtype=dtype)


def test_cat_stack_errors_and_promotion():
    check_both(lambda x, i: (fs.cat if isinstance(x, Tensor) else torch.cat)([x, i]),
               arr((2,)).astype(np.float32), np.array([1, 2]), dtype=None)
    with pytest.raises(RuntimeError, match='Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1 in the list.'):
        fs.cat([fs.zeros(2, 3), fs.zeros(2, 4)])
    with pytest.raises(RuntimeError, match='Tensors must have same number of dimensions: got 2 and 1'):
        fs.cat([fs.zeros(2, 3), fs.zeros(3)])
    with pytest.raises(RuntimeError, match=r'stack expects each tensor to be equal size, but got \[3\] at entry 0 and \[4\] at entry 1'):
        fs.stack([fs.zeros(3), fs.zeros(4)])
    with pytest.raises(ValueError, match='expected a non-empty list of Tensors'):   # torch's class
        fs.cat([])


def test_where():
    w = lambda *a: (fs.where if isinstance(a[1], Tensor) or isinstance(a[0], Tensor) else torch.where)(*a)
    a, b = arr((3, 4), 'any', 1), arr((4,), 'any', 2)
    check_both(lambda x, y: w(x > 0, x, y), a, b)
    check_both(lambda x, y: w(y > 0, x, y), a, b)
    check_both(lambda x: w(x > 0, x, 0.0), a)
    check_both(lambda x: w(x > 0, 1.0, x * 2), a)
    check_both(lambda x, y: w(x > 0, x, y), a.astype(np.float32), b, dtype=None)   # promotion
    check_both(lambda x: x.where(x > 0, -x), a)
    idx = fs.where(fs.tensor([[True, False], [False, True]]))
    assert [i.tolist() for i in idx] == [[0, 1], [0, 1]]


EINSUMS = [('ij,jk->ik', [(2, 3), (3, 4)]), ('ij,jk', [(2, 3), (3, 4)]), ('ij->i', [(2, 3)]), ('ij->', [(2, 3)]),
           ('ij->ji', [(2, 3)]), ('ii->i', [(3, 3)]), ('ii->', [(3, 3)]), ('ii', [(3, 3)]), ('i,i->', [(3,), (3,)]),
           ('i,j->ij', [(3,), (4,)]), ('bij,bjk->bik', [(2, 3, 4), (2, 4, 5)]), ('...ij,...jk->...ik', [(2, 3, 4), (4, 5)]),
           ('b...,b->...', [(2, 3, 4), (2,)]), ('ij,jk,kl->il', [(2, 3), (3, 4), (4, 2)]), ('iij->j', [(2, 2, 3)]),
           ('ij,ij->ij', [(2, 3), (2, 3)]), ('bi,bj->bij', [(2, 3), (2, 4)]), ('i->', [(4,)]),
           (' ij , jk -> ik ', [(2, 3), (3, 4)]), ('iii->i', [(2, 2, 2)]), ('ab,cd->abcd', [(2, 1), (1, 3)])]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('eq,shapes', EINSUMS, ids=str)
def test_einsum(eq, shapes, dtype):
    arrays = [arr(s, 'any', i) for i, s in enumerate(shapes)]
    check_both(lambda *ts: (fs.einsum if isinstance(ts[0], Tensor) else torch.einsum)(eq, *ts), *arrays, dtype=dtype)


def test_einsum_list_form_and_partial_grads():
    a, b = arr((2, 3), 'any', 1), arr((3, 4), 'any', 2)
    check_both(lambda x, y: (fs.einsum if isinstance(x, Tensor) else torch.einsum)('ij,jk->ik', [x, y]), a, b)
    check_both(lambda x, y: (fs.einsum if isinstance(x, Tensor) else torch.einsum)('ij,jk->ik', x, y), a, b, grad_args={1})


# ----------------------------------------------------------------------------------------------------------------
# in-place operations

INPLACE = {
    '+=': lambda t, o: t.__iadd__(o), '-=': lambda t, o: t.__isub__(o), '*=': lambda t, o: t.__imul__(o),
    '/=': lambda t, o: t.__itruediv__(o), 'add_': lambda t, o: t.add_(o), 'sub_': lambda t, o: t.sub_(o),
    'mul_': lambda t, o: t.mul_(o), 'div_': lambda t, o: t.div_(o), 'add_alpha': lambda t, o: t.add_(o, alpha=-0.5),
    'sub_alpha': lambda t, o: t.sub_(o, alpha=3), 'copy_': lambda t, o: t.copy_(o),
    'fill_': lambda t, o: t.fill_(2.5), 'zero_': lambda t, o: t.zero_(),
}


@pytest.mark.parametrize('name', list(INPLACE))
def test_inplace_without_graph(name):
    f = INPLACE[name]
    x, o = arr((3, 4), 'away', 1), arr((4,), 'away', 2)
    ours, theirs = make_inputs([x, o], requires_grad=False)
    r1, r2 = f(*ours), f(*theirs)
    assert r1 is ours[0] and r2 is theirs[0]
    assert_same_value(ours[0], theirs[0], 1e-12, 1e-12)
    assert ours[0]._version == theirs[0]._version == 1
    # with a Python scalar
    ours, theirs = make_inputs([x], requires_grad=False)
    f(ours[0], 2.0) if name != 'copy_' else None
    f(theirs[0], 2.0) if name != 'copy_' else None
    assert_same_value(ours[0], theirs[0], 1e-12, 1e-12)


@pytest.mark.parametrize('name', list(INPLACE))
def test_inplace_on_leaf_requiring_grad(name):
    f = INPLACE[name]
    x, tx = fs.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs: f(tx, torch.ones(3))
    with pytest.raises(RuntimeError, match='a leaf Variable that requires grad is being used in an in-place operation.'):
        f(x, fs.ones(3))
    assert 'a leaf Variable that requires grad' in str(theirs.value)
    # under no_grad it works, bumps the version, and the leaf stays a leaf
    with no_grad(): f(x, fs.full((3,), 2.0))
    with torch.no_grad(): f(tx, torch.full((3,), 2.0))
    assert_same_value(x, tx, 1e-12, 1e-12)
    assert x._version == tx._version == 1 and x.is_leaf and x.requires_grad and x.grad_fn is None


@pytest.mark.parametrize('name', list(INPLACE))
@pytest.mark.parametrize('other_grad', [False, True])
def test_inplace_on_non_leaf_is_recorded(name, other_grad):
    f = INPLACE[name]

    def fn(x, o):
        y = x * 2
        z = y * 1       # uses y before the change: must see the old values
        f(y, o)
        return y * x + z
    check_both(fn, arr((3, 4), 'away', 1), arr((4,), 'away', 2), grad_args={0, 1} if other_grad else {0})


def test_inplace_modifying_a_saved_tensor_raises():
    for f in (lambda y: y.add_(1), lambda y: y.mul_(2), lambda y: y.zero_(), lambda y: y.__setitem__(0, 1.0)):
        x = fs.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()          # exp saves its output
        f(y)
        tx = torch.tensor([1.0, 2.0], requires_grad=True)
        ty = tx.exp()
        f(ty)
        with pytest.raises(RuntimeError) as theirs: ty.sum().backward()
        with pytest.raises(RuntimeError, match='one of the variables needed for gradient computation has been '
                                               'modified by an inplace operation'):
            y.sum().backward()
        assert 'modified by an inplace operation' in str(theirs.value)
    x = fs.tensor([1.0, 2.0], requires_grad=True)
    w = fs.tensor([3.0, 4.0])
    y = x * w           # mul saves w for x's gradient
    w.add_(1)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()


def test_inplace_dtype_and_memory_errors():
    i = fs.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        i += 1.5
    with pytest.raises(RuntimeError) as theirs: torch.tensor([1, 2]).__iadd__(1.5)
    assert "can't be cast to the desired output type" in str(theirs.value)
    i += 2
    assert i.tolist() == [3, 4] and i.dtype == fs.int64
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        i /= 2
    with pytest.raises(RuntimeError) as theirs: torch.tensor([1, 2]).__itruediv__(2)
    assert "can't be cast to the desired output type" in str(theirs.value)
    b = fs.tensor([True, False])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type bool"):
        b += 1
    f = fs.tensor([1.0, 2.0])
    f += fs.tensor([1, 1])
    f *= fs.tensor(2.0, dtype=fs.float64)
    assert f.dtype == fs.float32 and f.tolist() == [4.0, 6.0]
    with pytest.raises(RuntimeError, match='more than one element of the written-to tensor refers to a single memory location'):
        fs.zeros(3).expand(2, 3).add_(1)
    with pytest.raises(RuntimeError, match='The size of tensor a'):
        fs.zeros(3).add_(fs.zeros(4))


def test_iadd_returns_same_object_and_sgd_style_update():
    w = fs.tensor([1.0, 2.0], requires_grad=True)
    ref = w
    with no_grad():
        w -= 0.1 * fs.tensor([1.0, 1.0])
        w.sub_(fs.tensor([1.0, 1.0]), alpha=0.5)
    assert w is ref and w._version == 2 and w.is_leaf
    np.testing.assert_allclose(w.array, [0.4, 1.4], rtol=1e-6)
    g = fs.tensor([1.0, 2.0])
    g.zero_()
    assert g.tolist() == [0.0, 0.0] and g._version == 1


# ----------------------------------------------------------------------------------------------------------------
# second derivatives (create_graph=True): the backward formulas are tensor operations

SECOND = {
    'exp': (lambda x: x.exp(), [(3, 4)], 'any'),
    'log': (lambda x: x.log(), [(3, 4)], 'pos'),
    'sqrt': (lambda x: x.sqrt(), [(3, 4)], 'pos'),
    'tanh': (lambda x: x.tanh(), [(3, 4)], 'any'),
    'sigmoid': (lambda x: x.sigmoid(), [(3, 4)], 'any'),
    'relu_times_x': (lambda x: x.relu() * x, [(3, 4)], 'away'),
    'abs_times_x': (lambda x: x.abs() * x, [(3, 4)], 'away'),
    'mul': (lambda a, b: a * b * a, [(3, 4), (4,)], 'any'),
    'div': (lambda a, b: a / b, [(3, 4), (4,)], 'pos'),
    'pow_scalar': (lambda x: x ** 3, [(3, 4)], 'any'),
    'pow_tensor': (lambda a, b: a ** b, [(3, 4), (4,)], 'pos'),
    'rpow': (lambda x: 2 ** x, [(3, 4)], 'any'),
    'matmul': (lambda a, b: (a @ b) * (a @ b), [(3, 4), (4, 2)], 'any'),
    'matmul_batched': (lambda a, b: (a @ b) ** 2, [(2, 3, 4), (4,)], 'any'),
    'matmul_vec': (lambda a, b: (a @ b) ** 2, [(4,), (2, 4, 3)], 'any'),
    'softmax': (lambda x: x.softmax(1), [(3, 4)], 'any'),
    'log_softmax': (lambda x: x.log_softmax(-1), [(3, 4)], 'any'),
    'logsumexp': (lambda x: x.logsumexp(1), [(3, 4)], 'any'),
    'sum': (lambda x: x.sum(0) ** 2, [(3, 4)], 'any'),
    'mean': (lambda x: x.mean(1, keepdim=True) * x, [(3, 4)], 'any'),
    'var': (lambda x: x.var(1), [(3, 4)], 'any'),
    'std': (lambda x: x.std(0), [(3, 4)], 'any'),
    'norm': (lambda x: x.norm(dim=1), [(3, 4)], 'any'),
    'norm3': (lambda x: x.norm(3), [(3, 4)], 'away'),
    'max': (lambda x: x.max() * x, [(3, 4)], 'unique'),
    'max_dim': (lambda x: x.max(1).values ** 2, [(3, 4)], 'unique'),
    'maximum': (lambda a, b: a.maximum(b) ** 2, [(3, 4), (4,)], 'unique'),
    'indexing': (lambda x: x[_idx(x, [0, 0, 2])] ** 2 + x[1:, ::2].sum() * x[0, 0], [(3, 4)], 'any'),
    'bool_index': (lambda x: x[x > 0] ** 3, [(3, 4)], 'away'),
    'setitem': (lambda x: _set(x), [(3, 4)], 'any'),
    'shape_ops': (lambda x: (x.T.reshape(2, 6).unsqueeze(0).expand(2, 2, 6).flatten() ** 2), [(3, 4)], 'any'),
    'where': (lambda a, b: (fs.where if isinstance(a, Tensor) else torch.where)(a > 0, a * a, b * a), [(3, 4), (4,)], 'away'),
    'cat_stack': (lambda a, b: _cs(a, b) ** 2, [(2, 3), (2, 3)], 'any'),
    'einsum': (lambda a, b: (fs.einsum if isinstance(a, Tensor) else torch.einsum)('ij,jk->ik', a, b) ** 2, [(2, 3), (3, 4)], 'any'),
    'einsum_trace': (lambda a: (fs.einsum if isinstance(a, Tensor) else torch.einsum)('ii->i', a * a) ** 2, [(3, 3)], 'any'),
    'clamp': (lambda x: x.clamp(-0.5, 0.5) * x, [(3, 4)], 'away'),
    'double': (lambda x: x.double() ** 3, [(3, 4)], 'any'),
    'sub_neg': (lambda a, b: (-a - b) * (2 - a), [(3, 4), (4,)], 'any'),
    'inplace': (lambda a, b: _inpl(a, b), [(3, 4), (4,)], 'any'),
}


def _set(x):
    y = x * x
    y[0] = x[1] * 3
    return y


def _cs(a, b):
    if isinstance(a, Tensor): return fs.stack([fs.cat([a, b], 1), fs.cat([b * a, a], 1)])
    return torch.stack([torch.cat([a, b], 1), torch.cat([b * a, a], 1)])


def _inpl(a, b):
    y = a * 1
    y *= b
    y += a * a
    return y


@pytest.mark.parametrize('name', list(SECOND))
def test_second_derivatives(name):
    fn, shapes, kind = SECOND[name]
    check_second(fn, *[arr(s, kind, i) for i, s in enumerate(shapes)])


def test_third_derivative_of_tanh():
    from fromscratch.core import grad
    x = fs.tensor([0.3, -1.2], dtype=fs.float64, requires_grad=True)
    tx = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    g = x
    tg = tx
    y, ty = x.tanh().sum(), tx.tanh().sum()
    for _ in range(3):
        g, = grad(y, x, create_graph=True)
        tg, = torch.autograd.grad(ty, tx, create_graph=True)
        y, ty = g.sum(), tg.sum()
    assert_same_value(g, tg, 1e-10, 1e-12)


# ----------------------------------------------------------------------------------------------------------------
# every op against central differences (float64)

NUMERIC = {**{k: (v[0], [(3, 4)], v[1]) for k, v in UNARY.items() if k not in ('abs_builtin', 'sign_mix')},
           **{k: (v[0], [(3, 4), (4,)], v[1], v[2]) for k, v in BINARY.items()},
           **{k: (v[0], [v[1]], 'any') for k, v in SHAPE_OPS.items()},
           **{f'index_{k}': (v, [(3, 4)], 'any') for k, v in INDEXES.items() if k != 'bool_mask'},
           'matmul': (lambda a, b: a @ b, [(5, 2, 3), (3,)], 'any'),
           'sum': (lambda x: x.sum((0, 2)), [(2, 3, 2)], 'any'), 'mean': (lambda x: x.mean(1), [(2, 3, 2)], 'any'),
           'max': (lambda x: x.max(), [(3, 4)], 'unique'), 'max_dim': (lambda x: x.max(0), [(3, 4)], 'unique'),
           'min_dim': (lambda x: x.min(1, keepdim=True), [(3, 4)], 'unique'),
           'var': (lambda x: x.var(1), [(3, 4)], 'any'), 'std': (lambda x: x.std(), [(3, 4)], 'any'),
           'norm': (lambda x: x.norm(), [(3, 4)], 'any'), 'norm1': (lambda x: x.norm(1, dim=0), [(3, 4)], 'away'),
           'norm_inf': (lambda x: x.norm(math.inf, dim=1), [(3, 4)], 'unique'),
           'softmax': (lambda x: x.softmax(0), [(3, 4)], 'any'),
           'log_softmax': (lambda x: x.log_softmax(1), [(3, 4)], 'any'),
           'logsumexp': (lambda x: x.logsumexp(1), [(3, 4)], 'any'),
           'cat': (lambda a, b: fs.cat([a, b, a], 1), [(3, 4), (3, 2)], 'any'),
           'stack': (lambda a, b: fs.stack([a, b * 2], -1), [(3, 4), (3, 4)], 'any'),
           'einsum': (lambda a, b: fs.einsum('bij,jk->bk', a, b), [(2, 3, 4), (4, 5)], 'any'),
           'einsum_diag': (lambda a: fs.einsum('ii->i', a), [(3, 3)], 'any'),
           'setitem': (lambda x, v: _setv(x, v), [(3, 4), (4,)], 'any'),
           'double': (lambda x: x.double() * 2, [(3, 4)], 'any')}


def _setv(x, v):
    y = x * 1
    y[1] = v * v
    return y


@pytest.mark.parametrize('name', list(NUMERIC))
def test_numeric_gradients(name):
    spec = NUMERIC[name]
    fn, shapes = spec[0], spec[1]
    kinds = spec[2:] if len(spec) > 3 else [spec[2]] * len(shapes)
    check_numeric(fn, *[arr(s, k, i) for i, (s, k) in enumerate(zip(shapes, kinds))])


def test_numeric_gradcheck_can_fail():
    from fromscratch.core import Function

    class BadExp(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(np.exp(a.array))
        @staticmethod
        def backward(ctx, g): return g * 2
    with pytest.raises(AssertionError, match='central differences'):
        check_numeric(lambda x: BadExp.apply(x), arr((3,)))


def test_check_both_can_fail():
    with pytest.raises(AssertionError):
        check_both(lambda x: x * 2 if isinstance(x, Tensor) else x * 2.0001, arr((3,)))
    from fromscratch.core import Function

    class HalfGrad(Function):
        @staticmethod
        def forward(ctx, a): return Tensor(a.array * 2)
        @staticmethod
        def backward(ctx, g): return g
    with pytest.raises(AssertionError, match='gradient of input 0'):
        check_both(lambda x: HalfGrad.apply(x) if isinstance(x, Tensor) else x * 2, arr((3,)))


# ----------------------------------------------------------------------------------------------------------------
# the fast backward paths (create_graph=False) agree with the recorded ones (create_graph=True)

@pytest.mark.parametrize('name', ['matmul', 'softmax', 'log_softmax', 'sum', 'mean', 'relu_times_x', 'sub_neg',
                                  'indexing', 'sigmoid', 'tanh', 'exp'])
def test_fast_and_recorded_backward_agree(name):
    from fromscratch.core import grad
    fn, shapes, kind = SECOND[name]
    ins = [fs.tensor(arr(s, kind, i), requires_grad=True) for i, s in enumerate(shapes)]
    out = fn(*ins)
    seed = fs.tensor(np.random.default_rng(1).standard_normal(out.shape))
    fast = grad(out, ins, seed, retain_graph=True)
    slow = grad(out, ins, seed, create_graph=True)
    for a, b in zip(fast, slow):
        assert a.grad_fn is None and b.grad_fn is not None
        np.testing.assert_allclose(a.array, b.array, rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------------------------------------------------------------
# graph bookkeeping

def test_save_only_what_is_needed():
    x, w = fs.randn(4, 3), fs.randn(3, 2, requires_grad=True)
    y = x @ w
    a, b = y.grad_fn.to_save
    assert a is x and b is None          # x is needed for w's gradient, w is not needed at all
    y = x * w[:, 0]
    assert y.grad_fn.to_save[1] is None


def test_saved_outputs_make_no_reference_cycle():
    import gc, weakref
    x = fs.randn(3, requires_grad=True)
    for f in (lambda t: t.exp(), lambda t: t.sigmoid(), lambda t: t.tanh(), lambda t: t.softmax(0),
              lambda t: t.log_softmax(0), lambda t: t.sqrt()):
        gc.disable()
        try:
            y = f(x.abs() + 1)
            ref = weakref.ref(y.grad_fn)
            del y
            assert ref() is None       # freed by reference counting alone
        finally: gc.enable()


def test_grad_fn_names_and_next_functions():
    x, w = fs.randn(2, 3, requires_grad=True), fs.randn(3, requires_grad=True)
    y = (x * w).sum()
    assert y.grad_fn.name() == 'SumBackward0'          # PyTorch's names for its built-in ops' nodes
    mul = y.grad_fn.next_functions[0][0]
    assert mul.name() == 'MulBackward0'
    assert [f.name() for f, _ in mul.next_functions] == ['AccumulateGrad', 'AccumulateGrad']


def test_no_grad_records_nothing():
    x = fs.randn(3, requires_grad=True)
    with no_grad():
        for y in (x + 1, x * x, x.exp(), x.sum(), x[0], x.reshape(3, 1), x.softmax(0), x @ x, fs.cat([x, x])):
            assert y.grad_fn is None and not y.requires_grad


def test_public_names():
    import fromscratch.ops as ops
    ns = {}
    exec('from fromscratch.ops import *', ns)
    public = {k for k in ns if not k.startswith('__')}
    assert not any(k.startswith('_') for k in public)
    for name in ('cat', 'stack', 'where', 'einsum', 'softmax', 'log_softmax', 'matmul', 'exp', 'log', 'relu',
                 'sigmoid', 'tanh', 'sum', 'mean', 'max', 'min', 'maximum', 'minimum', 'argmax', 'norm', 'var',
                 'std', 'sqrt', 'abs', 'clamp', 'pow', 'logsumexp'):
        # the package's top level holds the function forms, with torch's `out=` (07_ops), where torch has one
        form = ops.arguments.FUNCTION_FORMS.get(name, getattr(ops, name))
        assert name in public and getattr(fs, name) is form, name
        assert getattr(form, '__wrapped__', form) is getattr(ops, name), name
    assert set(ops.__all__) == public


def test_import_does_not_load_torch():
    import subprocess, sys
    code = "import fromscratch, sys; assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, '-c', code], check=True)


# ----------------------------------------------------------------------------------------------------------------
# the same tables through fromscratch.autograd's gradcheck / gradgradcheck (full Jacobians, float64)

@pytest.mark.parametrize('name', list(NUMERIC))
def test_autograd_gradcheck(name):
    spec = NUMERIC[name]
    fn, shapes = spec[0], spec[1]
    kinds = spec[2:] if len(spec) > 3 else [spec[2]] * len(shapes)
    inputs = [fs.tensor(arr(s, k, i), requires_grad=True) for i, (s, k) in enumerate(zip(shapes, kinds))]
    assert autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('name', list(SECOND))
def test_autograd_gradgradcheck(name):
    fn, shapes, kind = SECOND[name]
    inputs = [fs.tensor(arr(s, kind, i), requires_grad=True) for i, s in enumerate(shapes)]
    assert autograd.gradgradcheck(fn, inputs, atol=1e-5, rtol=1e-4)
