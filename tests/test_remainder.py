"""`%` / remainder, fmod and `//` / floor_divide (07_ops, the arithmetic family) against torch: signs of both
operands, numbers on either side, broadcasting, dtypes, gradients in float64 (first and second, reverse and
forward mode), node names, and torch's errors (bools, integer division by 0, no derivative)."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import Tensor
from fromscratch.testing import compare_errors
from engines import check_both, check_second

SHAPES = [((5,), (5,)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ())]


def lib(t): return fs if isinstance(t, Tensor) else torch


def operands(sa, sb, seed=0):
    "Dividends of both signs; divisors of both signs away from 0; no quotient near an integer (a jump)."
    r = np.random.default_rng(seed)
    b = r.choice([-1, 1], sb) * r.uniform(0.5, 2.0, sb)
    q = r.choice([-1, 1], np.broadcast_shapes(sa, sb)) * (r.integers(0, 4, np.broadcast_shapes(sa, sb))
                                                          + r.uniform(0.1, 0.9))
    a = (q * b)[tuple(slice(0, n) for n in sa)] if sa else np.asarray((q * b).flat[0])
    return np.asarray(a).reshape(sa), b


@pytest.mark.parametrize('op', ['remainder', 'fmod', '%'])
@pytest.mark.parametrize('shapes', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_values_and_gradients_of_both_operands(op, shapes, dtype):
    a, b = operands(*shapes)
    if op == '%': f = lambda x, y: x % y
    else: f = lambda x, y: getattr(lib(x), op)(x, y)
    check_both(f, a, b, dtype=dtype)


@pytest.mark.parametrize('op', ['remainder', 'fmod'])
@pytest.mark.parametrize('number', [2.5, -1.5, 3, -2])
def test_a_number_as_the_divisor(op, number):
    a, _ = operands((3, 4), (3, 4), seed=1)
    check_both(lambda x: getattr(x, op)(number), a)
    check_both(lambda x: getattr(lib(x), op)(x, number), a)


@pytest.mark.parametrize('number', [7, -7.5, 0.0])
def test_a_number_as_the_dividend_has_no_derivative(number):
    _, b = operands((4,), (4,), seed=2)
    check_both(lambda y: number % y, b, grads=False)
    check_both(lambda y: lib(y).remainder(number, y), b, grads=False)
    x, tx = fs.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
    assert (number % x).grad_fn.name() == 'NotImplemented' and (number % tx).grad_fn.name().endswith('NotImplemented')
    compare_errors(lambda: (number % x).sum().backward(), lambda: (number % tx).sum().backward())


@pytest.mark.parametrize('dtype', ['int64', 'int32', 'int16', 'uint8'])
def test_integers_stay_integers(dtype):
    a = np.array([-7, -3, 0, 2, 7, 9]).astype(dtype)
    b = np.array([2, -2, 3, -1, 3, 4]).astype(dtype)
    if dtype == 'uint8': a, b = np.abs(a).astype(dtype), np.abs(b).astype(dtype)
    for f in (lambda x, y: x % y, lambda x, y: lib(x).fmod(x, y), lambda x, y: x // y,
              lambda x, y: x % 3, lambda x, y: x % 2.5, lambda x, y: lib(x).fmod(x, 2), lambda x, y: x // 2.5,
              lambda x, y: 11 % y):
        check_both(f, a, b, dtype=None, requires_grad=False)


def test_mixed_dtypes_promote_as_torch_does():
    a64 = np.array([-7.5, 3.25, 9.0])
    for f in (lambda x, y: x.float() % y, lambda x, y: x.float() % y.double(),
              lambda x, y: x.long() % y, lambda x, y: lib(x).fmod(x.int(), y.long()),
              lambda x, y: x.float() % lib(x).tensor(2.0, dtype=lib(x).float64)):
        check_both(f, a64, np.array([2.0, -2.0, 4.0]), requires_grad=False)


def test_zeros_infinities_and_nans_like_torch():
    a = np.array([-1.0, 1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 5.0, -5.0, 4.0])
    for b in (0.0, np.inf, -np.inf, np.nan, 2.0, -2.0):
        with np.errstate(all='ignore'):
            for f in (lambda x: x % b, lambda x: lib(x).fmod(x, b), lambda x: x // b):
                check_both(f, a, requires_grad=False)


@pytest.mark.parametrize('case', ['int % 0', 'int % zeros', 'fmod(int, 0)', 'int // 0', 'bool % bool', 'bool // bool',
                                  'fmod(bool, bool)', 'fmod(number, tensor)', 'shapes'])
def test_errors_in_torchs_words(case):
    f = {'int % 0': lambda L: L.tensor([7, 1]) % 0,
         'int % zeros': lambda L: L.tensor([7, 1]) % L.tensor([1, 0]),
         'fmod(int, 0)': lambda L: L.fmod(L.tensor([7]), 0),
         'int // 0': lambda L: L.tensor([7]) // 0,
         'bool % bool': lambda L: L.tensor([True]) % L.tensor([True]),
         'bool // bool': lambda L: L.tensor([True]) // L.tensor([True]),
         'fmod(bool, bool)': lambda L: L.fmod(L.tensor([True]), L.tensor([True])),
         'fmod(number, tensor)': lambda L: L.fmod(5, L.tensor([3])),
         'shapes': lambda L: L.ones(3) % L.ones(4)}[case]
    if case == 'fmod(number, tensor)':   # torch lists its overloads after this line
        compare_errors(lambda: f(fs), lambda: f(torch), same_message=False)
        assert str(pytest.raises(TypeError, f, fs).value) in str(pytest.raises(TypeError, f, torch).value)
    elif case == 'shapes':
        ours, theirs = pytest.raises(RuntimeError, f, fs), pytest.raises(RuntimeError, f, torch)
        assert str(ours.value).startswith(str(theirs.value))
    else:
        compare_errors(lambda: f(fs), lambda: f(torch))


def test_node_names():
    def names(L):
        a, b = L.tensor([5.5], requires_grad=True), L.tensor([2.0], requires_grad=True)
        outs = (a % 2, a % b, L.remainder(a, b), L.fmod(a, 2), L.fmod(a, b), a.fmod(L.tensor(2.0)), 5 % b, a // 2)
        return [o.grad_fn.name().replace('torch::autograd::', '') for o in outs]
    assert names(fs) == names(torch)


def test_floor_divide_has_no_derivative_in_either_mode():
    x, tx = fs.tensor([1.5, -2.5], requires_grad=True), torch.tensor([1.5, -2.5], requires_grad=True)
    compare_errors(lambda: (x // 1.0).sum().backward(), lambda: (tx // 1.0).sum().backward())
    def forward(L):
        with L.autograd.forward_ad.dual_level():
            d = L.autograd.forward_ad.make_dual(L.ones(2), L.ones(2))
            return d // 2
    compare_errors(lambda: forward(fs), lambda: forward(torch))
    def forward_of_number(L):
        with L.autograd.forward_ad.dual_level():
            return 5 % L.autograd.forward_ad.make_dual(L.ones(2), L.ones(2))
    compare_errors(lambda: forward_of_number(fs), lambda: forward_of_number(torch))


@pytest.mark.parametrize('op', ['remainder', 'fmod'])
def test_second_derivatives(op):
    a, b = operands((3, 4), (4,), seed=3)
    check_second(lambda x, y: getattr(lib(x), op)(x * x, y) * y, a, b)


@pytest.mark.parametrize('op', ['remainder', 'fmod'])
@pytest.mark.parametrize('which', ['both', 'dividend', 'divisor'])
def test_forward_mode_tangents(op, which):
    a, b = operands((3, 4), (4,), seed=4)
    r = np.random.default_rng(5)
    ta, tb = r.standard_normal(a.shape), r.standard_normal(b.shape)
    def tangent(L):
        x, y = L.tensor(a), L.tensor(b)
        if which == 'dividend': return L.func.jvp(lambda x: getattr(L, op)(x, y), (x,), (L.tensor(ta),))[1]
        if which == 'divisor': return L.func.jvp(lambda y: getattr(L, op)(x, y), (y,), (L.tensor(tb),))[1]
        return L.func.jvp(getattr(L, op), (x, y), (L.tensor(ta), L.tensor(tb)))[1]
    np.testing.assert_allclose(tangent(fs).numpy(), tangent(torch).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('name', ['remainder_', 'fmod_', 'floor_divide_', '%=', '//='])
@pytest.mark.parametrize('other', [2.5, -3, 'tensor'])
def test_in_place_forms(name, other):
    a, b = operands((3, 4), (4,), seed=6)
    def run(L):
        x = L.tensor(a)
        y = L.tensor(b) if other == 'tensor' else other
        before, same = x, x
        if name == '%=': x %= y
        elif name == '//=': x //= y
        else: getattr(x, name)(y)
        return x.numpy().copy(), x is before, same._version
    ours, theirs = run(fs), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:] == theirs[1:] == (True, 1)


def test_in_place_forms_keep_the_dtype_or_refuse():
    for f in (lambda L: L.tensor([7, -7]).remainder_(2), lambda L: L.tensor([7, -7]).fmod_(-3)):
        assert f(fs).tolist() == f(torch).tolist()
    ours = pytest.raises(RuntimeError, lambda: fs.tensor([7, -7]).remainder_(1.5))
    theirs = pytest.raises(RuntimeError, lambda: torch.tensor([7, -7]).remainder_(1.5))
    assert "can't be cast to the desired output type" in str(ours.value) and \
           "can't be cast to the desired output type" in str(theirs.value)


def test_in_place_remainder_gradients():
    a, b = operands((3, 4), (4,), seed=7)
    check_both(lambda x, y: (x * 1).remainder_(y), a, b)
    check_both(lambda x, y: (x * 1).fmod_(y * 2), a, b)


@pytest.mark.parametrize('expr', ['a % b', 'fmod(a, b)', 'a % 1.5', '7 % b', 'a // b'])
def test_under_vmap_and_per_sample_gradients(expr):
    a, b = operands((5, 3), (3,), seed=8)
    f = {'a % b': lambda L, x, y: x % y, 'fmod(a, b)': lambda L, x, y: L.fmod(x, y),
         'a % 1.5': lambda L, x, y: x % 1.5, '7 % b': lambda L, x, y: 7 % (x * 0 + y),
         'a // b': lambda L, x, y: x // y}[expr]
    def run(L):
        x, y = L.tensor(a), L.tensor(b)
        values = L.func.vmap(lambda r: f(L, r, y))(x).numpy()
        if expr in ('7 % b', 'a // b'): return values, None
        grads = L.func.vmap(L.func.grad(lambda r, s: (f(L, r, s) * r).sum(), argnums=(0, 1)),
                            in_dims=(0, None))(x, y)
        return values, [g.numpy() for g in grads]
    ours, theirs = run(fs), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    if theirs[1] is not None:
        for g, tg in zip(ours[1], theirs[1]): np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)
