"""`arange` and `linspace` against torch bit for bit (float32, float64, int64, int32, over many starts, ends and
steps), and the fused multiply-add they stand on against exact rational arithmetic."""
import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import ranges
from fromscratch.core.ranges import fma, fused
from fromscratch.testing import compare_errors

# the bytes of the vector register torch's CPU kernels fill at a time, by the kernels torch chose here
REGISTERS = {'AVX2': 32, 'AVX512': 64}
DTYPES = [(fs.float32, torch.float32), (fs.float64, torch.float64), (fs.int64, torch.int64),
          (fs.int32, torch.int32)]


@pytest.fixture
def torch_registers(monkeypatch):
    "Long float ranges depend on torch's register width: use the one of the kernels torch runs on this CPU."
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in REGISTERS:
        pytest.skip(f'torch runs its {capability} kernels here, which fill ranges without fused multiply-adds')
    monkeypatch.setattr(ranges, 'REGISTER_BYTES', REGISTERS[capability])


def bits(a):
    "An array's bytes, so that -0.0 and 0.0 (and every last bit) count as different."
    return np.ascontiguousarray(a).view(np.uint8)


def same_values(ours, theirs, what):
    o, t = ours.numpy(), theirs.numpy()
    assert (o.dtype, o.shape) == (t.dtype, t.shape), (what, o.dtype, o.shape, t.dtype, t.shape)
    wrong = np.flatnonzero(o != t)
    assert np.array_equal(bits(o), bits(t)), (what, wrong[:5], o[wrong[:5]], t[wrong[:5]])


def nearest(x, dtype):
    "The float of `dtype` nearest the Fraction `x`, ties to even: the correctly rounded result."
    f = np.array(float(x)).astype(dtype)
    down, up = np.nextafter(f, dtype(-np.inf)), np.nextafter(f, dtype(np.inf))
    return min((down, f, up), key=lambda c: (abs(Fraction(float(c)) - x), int(np.array(c).view(
        np.int32 if dtype == np.float32 else np.int64)) & 1))


def test_fma_rounds_once():
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 4000)) * 10.0 ** rng.integers(-8, 9, (3, 4000))
    c[:1000] = -(a[:1000] * b[:1000])  # a product and a sum that nearly cancel
    c[1000:1500] = 0.0
    got = fma(a, b, c)
    exact = [nearest(Fraction(x) * Fraction(y) + Fraction(z), np.float64) for x, y, z in zip(a, b, c)]
    assert np.array_equal(got, np.array(exact))


def test_float32_fused_rounds_once():
    rng = np.random.default_rng(2)
    a, c = (rng.standard_normal((2, 4000)) * 10.0 ** rng.integers(-4, 5, (2, 4000))).astype(np.float32)
    b = rng.integers(0, 5000, 4000)
    got = [fused(x, y, z, np.float32) for x, y, z in zip(a, b, c)]
    exact = [nearest(Fraction(float(x)) * int(y) + Fraction(float(z)), np.float32) for x, y, z in zip(a, b, c)]
    assert all(g.dtype == np.float32 and g == e for g, e in zip(got, exact))


def random_range(rng):
    "A start, end and step of one of three kinds: integers, a float step many times over, decimals."
    kind = rng.random()
    if kind < 0.3:
        start, step = rng.randint(-20, 20), rng.choice([1, 2, 3, 5, -1, -2])
        return start, start + step * rng.randint(0, 200) + rng.randint(-1, 1), step
    if kind < 0.6:
        start = rng.uniform(-10, 10)
        step = rng.choice([0.1, 0.3, 0.7, 1e-3, 0.01, rng.uniform(0.001, 1), -0.1, -0.3])
        return start, start + step * rng.randint(1, 1500) + rng.uniform(0, step), step
    start = round(rng.uniform(-10, 10), rng.randint(0, 3))
    step = round(rng.uniform(0.05, 3), rng.randint(1, 3)) * rng.choice([1, -1])
    return start, start + step * rng.randint(0, 100) * rng.random(), step


def test_arange_bit_for_bit(torch_registers):
    rng = random.Random(0)
    for _ in range(600):
        r = random_range(rng)
        for dt, tdt in DTYPES:
            ours, theirs = (lambda: fs.arange(*r, dtype=dt)), (lambda: torch.arange(*r, dtype=tdt))
            try: theirs()
            except (RuntimeError, ValueError):  # against the step, or an int64 step cut to 0
                compare_errors(ours, theirs)
                continue
            same_values(ours(), theirs(), (r, dt))


def test_linspace_bit_for_bit():
    rng = random.Random(1)
    for _ in range(600):
        steps = rng.randint(0, 2000) if rng.random() < 0.3 else rng.randint(0, 40)
        if rng.random() < 0.7: start, end = rng.uniform(-100, 100), rng.uniform(-100, 100)
        else: start, end = rng.randint(-50, 50), rng.randint(-50, 50)
        for dt, tdt in DTYPES:
            same_values(fs.linspace(start, end, steps, dtype=dt), torch.linspace(start, end, steps, dtype=tdt),
                        (start, end, steps, dt))


@pytest.mark.parametrize('args', [(1, 2.5, 0.3), (0, 1, 0.1), (5.0,), (2.5,), (0, 10, 2.5), (-1, 1, 0.5),
                                  (10, 0, -1), (0.5, 5.5, 1.5), (3, 3), (0, 1, 0.25)], ids=str)
def test_arange_default_dtypes(args, torch_registers):
    same_values(fs.arange(*args), torch.arange(*args), args)
    fs.set_default_dtype(fs.float64)
    torch.set_default_dtype(torch.float64)
    try: same_values(fs.arange(*args), torch.arange(*args), args)
    finally:
        fs.set_default_dtype(fs.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize('args', [(0, 1, 7), (0, 1, 1), (2, -3, 0), (-1.3, 2, 33), (0, 10, 5), (1e-3, 1e3, 11)],
                         ids=str)
def test_linspace_default_dtype(args):
    same_values(fs.linspace(*args), torch.linspace(*args), args)
    made, tmade = fs.linspace(*args, requires_grad=True), torch.linspace(*args, requires_grad=True)
    assert (made.requires_grad, made.is_leaf) == (tmade.requires_grad, tmade.is_leaf)


MISTAKES = {
    'step 0': lambda l: l.arange(0, 1, 0), 'to infinity': lambda l: l.arange(0, math.inf),
    'from minus infinity': lambda l: l.arange(-math.inf, 0), 'to nan': lambda l: l.arange(0, math.nan),
    'against the step': lambda l: l.arange(1, 0), 'down against the step': lambda l: l.arange(0, 1, -0.5),
    'too many': lambda l: l.arange(0, 1e300, 1e-300),
    'an int64 step cut to 0': lambda l: l.arange(1, 2.5, 0.3, dtype=l.int64),
    'bool arange': lambda l: l.arange(0.0, 5.0, dtype=l.bool),
    'bool linspace': lambda l: l.linspace(0, 1, 3, dtype=l.bool),
    'negative steps': lambda l: l.linspace(0, 1, -1),
}


@pytest.mark.parametrize('name', list(MISTAKES))
def test_errors_like_torch(name):
    compare_errors(lambda: MISTAKES[name](fs), lambda: MISTAKES[name](torch))
