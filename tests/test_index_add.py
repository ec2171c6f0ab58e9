"""index_add and index_add_ (07_ops, the indexing and in-place families) against torch: the function, the
method and the in-place method, repeated indices, alpha, every dimension, 0-d cases, dtypes, gradients of the
input and of the source in float64 (first and second, reverse and forward mode), node names, versions, and
torch's errors in its order."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import Tensor
from fromscratch.testing import compare_errors
from engines import check_both, check_second


def lib(t): return fs if isinstance(t, Tensor) else torch
def idx(t, data, dtype='int64'): return lib(t).tensor(np.array(data, dtype=dtype))
def values(shape, seed=0): return np.random.default_rng([seed, *shape]).standard_normal(shape)


CASES = {   # (self shape, dim, index, source shape)
    'rows, a repeat': ((4, 3), 0, [2, 0, 2], (3, 3)),
    'columns': ((4, 3), 1, [1, 1, 0, 2], (4, 4)),
    'negative dim': ((2, 3, 4), -1, [3, 0], (2, 3, 2)),
    'middle dim': ((2, 3, 4), 1, [2, 0, 2, 1, 2], (2, 5, 4)),
    'a 0-d index': ((4, 3), 0, 1, (1, 3)),
    'no indices': ((4, 3), 0, [], (0, 3)),
    'a vector': ((5,), 0, [4, 4, 4], (3,)),
    'a 0-d self': ((), 0, [0], ()),
}


@pytest.mark.parametrize('case', list(CASES))
@pytest.mark.parametrize('alpha', [1, 2.5, -1])
@pytest.mark.parametrize('form', ['function', 'method', 'in place'])
def test_values_and_gradients_of_input_and_source(case, alpha, form):
    shape, dim, index, sshape = CASES[case]
    def f(x, s):
        i = idx(x, index)
        if form == 'function': return lib(x).index_add(x, dim, i, s, alpha=alpha)
        if form == 'method': return x.index_add(dim, i, s, alpha=alpha)
        return (x * 1).index_add_(dim, i, s, alpha=alpha)
    check_both(f, values(shape, 1), values(sshape, 2))


@pytest.mark.parametrize('dtype', ['float32', 'int64', 'int32', 'bool'])
@pytest.mark.parametrize('alpha', [1, 2, 2.5, -1.5])
def test_dtypes_and_an_alpha_on_integers(dtype, alpha):
    x = (np.arange(12).reshape(4, 3) % 5).astype(dtype)
    s = (np.arange(9).reshape(3, 3) % 4 - 1).astype(dtype)
    if dtype == 'bool' and alpha != 1 and alpha != 2: return   # torch: a float alpha needs floats
    check_both(lambda a, b: a.index_add(0, idx(a, [3, 3, 0]), b, alpha=alpha), x, s, dtype=None,
               requires_grad=False)


def test_an_int32_index():
    check_both(lambda a, b: a.index_add(0, idx(a, [1, 0, 1], 'int32'), b), values((2, 3)), values((3, 3)))


def test_in_place_is_the_same_tensor_one_version_on_with_the_new_node():
    def run(L):
        x = L.tensor(values((4, 3)), requires_grad=True)
        s = L.tensor(values((2, 3)), requires_grad=True)
        h = x * 1
        out = h.index_add_(0, L.tensor([1, 1]), s, alpha=3)
        names = [out.grad_fn.name()] + [f.name().replace('torch::autograd::', '') for f, _ in out.grad_fn.next_functions]
        with L.no_grad(): x.index_add_(0, L.tensor([0]), s[:1])   # a leaf, where nothing records
        return out is h, h._version, x._version, names
    assert run(fs) == run(torch)
    assert run(fs)[3] == ['IndexAddBackward0', 'MulBackward0', 'AccumulateGrad']


def test_in_place_through_a_view():
    def f(x, s):
        h = x * 1
        h[1:].index_add_(1, idx(x, [0, 0]), s)
        return h
    check_both(f, values((3, 4)), values((2, 2)))


def test_node_names():
    def names(L):
        x = L.ones(3, requires_grad=True)
        return [x.index_add(0, L.tensor([0]), L.ones(1)).grad_fn.name(),
                L.index_add(L.ones(3), 0, L.tensor([0]), x[:1]).grad_fn.name()]
    assert names(fs) == names(torch) == ['IndexAddBackward0'] * 2


def test_second_derivatives():
    check_second(lambda x, s: (x * x).index_add(1, idx(x, [2, 0, 2]), s * x[:, :3], alpha=2.0) ** 2,
                 values((3, 4)), values((3, 3)))


@pytest.mark.parametrize('which', ['both', 'self', 'source'])
def test_forward_mode_tangents(which):
    x, s, tx, ts = values((4, 3), 1), values((3, 3), 2), values((4, 3), 3), values((3, 3), 4)
    def tangent(L):
        i, X, S = L.tensor([3, 0, 3]), L.tensor(x), L.tensor(s)
        f = lambda a, b: a.index_add(0, i, b, alpha=-2.0)
        if which == 'self': return L.func.jvp(lambda a: f(a, S), (X,), (L.tensor(tx),))[1]
        if which == 'source': return L.func.jvp(lambda b: f(X, b), (S,), (L.tensor(ts),))[1]
        return L.func.jvp(f, (X, S), (L.tensor(tx), L.tensor(ts)))[1]
    np.testing.assert_allclose(tangent(fs).numpy(), tangent(torch).numpy(), rtol=1e-12)


MISTAKES = {
    'a matrix index': lambda L: L.zeros(3, 4).index_add(0, L.tensor([[0]]), L.ones(1, 4)),
    'a float index': lambda L: L.zeros(3, 4).index_add(0, L.tensor([0.0]), L.ones(1, 4)),
    'a bool index': lambda L: L.zeros(3, 4).index_add(0, L.tensor([True]), L.ones(1, 4)),
    'a source of another dtype': lambda L: L.zeros(3, 4).index_add(0, L.tensor([0]), L.ones(1, 4, dtype=L.float64)),
    'a source slice of the wrong size': lambda L: L.zeros(3, 4).index_add(0, L.tensor([0]), L.ones(1, 3)),
    'more slices than indices': lambda L: L.zeros(3, 4).index_add(0, L.tensor([0]), L.ones(2, 4)),
    'more indices than slices': lambda L: L.zeros(3, 4).index_add(0, L.tensor([0, 1]), L.ones(1, 4)),
    'a source with too few dimensions': lambda L: L.zeros(3, 4).index_add(1, L.tensor([0]), L.ones(3)),
    'an index past the end': lambda L: L.zeros(3, 4).index_add(0, L.tensor([3]), L.ones(1, 4)),
    'a negative index': lambda L: L.zeros(3, 4).index_add(0, L.tensor([-1]), L.ones(1, 4)),
    'dim out of range': lambda L: L.zeros(3, 4).index_add(2, L.tensor([0]), L.ones(1, 4)),
    'a 0-d self, a vector source': lambda L: L.zeros(()).index_add(0, L.tensor([0]), L.ones(1)),
    'a 0-d source, two indices': lambda L: L.zeros(3).index_add(0, L.tensor([0, 0]), L.tensor(2.0)),
    'a 0-d index, a vector source': lambda L: L.zeros(3, 4).index_add(0, L.tensor(1), L.ones(4)),
    'a source of the wrong batch size': lambda L: L.zeros(2, 3, 4).index_add(1, L.tensor([2, 0, 2]), L.ones(2, 3, 1)),
    'in place on a leaf': lambda L: L.ones(3, requires_grad=True).index_add_(0, L.tensor([0]), L.ones(1)),
    'in place on an expanded tensor': lambda L: L.zeros(3, 4).expand(2, 3, 4).index_add_(1, L.tensor([0]),
                                                                                           L.ones(2, 1, 4)),
}


@pytest.mark.parametrize('mistake', list(MISTAKES))
def test_errors_in_torchs_words(mistake):
    compare_errors(lambda: MISTAKES[mistake](fs), lambda: MISTAKES[mistake](torch))
