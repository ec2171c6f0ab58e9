"""diagonal, diag and trace (07_ops, the shape family) against torch: offsets, dimensions, batches, dtypes,
views that writes go through, gradients in float64 (first and second, reverse and forward mode), node names
and torch's errors."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import Tensor
from fromscratch.testing import compare_errors
from engines import check_both, check_second


def lib(t): return fs if isinstance(t, Tensor) else torch


def values(shape, seed=0): return np.random.default_rng([seed, *shape]).standard_normal(shape)


@pytest.mark.parametrize('shape', [(3, 4), (4, 3), (3, 3), (1, 5), (0, 3)], ids=str)
@pytest.mark.parametrize('offset', [0, 1, -1, 2, -3, 6, -6])
def test_diagonal_of_a_matrix(shape, offset):
    x = values(shape)
    check_both(lambda t: t.diagonal(offset), x)
    check_both(lambda t: lib(t).diagonal(t, offset=offset), x)
    check_both(lambda t: t.diagonal(offset, 1, 0), x)
    check_both(lambda t: lib(t).diag(t, offset), x)


@pytest.mark.parametrize('dims', [(0, 1), (1, 2), (2, 0), (-1, -2), (0, -1), (2, 1)])
@pytest.mark.parametrize('offset', [0, 1, -2])
def test_diagonal_of_a_batch(dims, offset):
    check_both(lambda t: t.diagonal(offset, *dims), values((2, 3, 4)))
    check_both(lambda t: t.diagonal(offset, *dims).sum(-1), values((4, 2, 3, 5))[0])


@pytest.mark.parametrize('n', [0, 1, 3])
@pytest.mark.parametrize('offset', [0, 2, -1])
def test_diag_of_a_vector(n, offset):
    check_both(lambda t: lib(t).diag(t, offset), values((n,)))
    check_both(lambda t: t.diag(diagonal=offset), values((n,)))


@pytest.mark.parametrize('shape', [(3, 4), (4, 3), (1, 1), (0, 3), (5, 5)], ids=str)
def test_trace(shape):
    check_both(lambda t: t.trace(), values(shape))
    check_both(lambda t: lib(t).trace(t * t), values(shape))


@pytest.mark.parametrize('dtype', ['int64', 'int32', 'uint8', 'float32', 'float16'])
def test_dtypes(dtype):
    x = (np.arange(12).reshape(3, 4) % 7).astype(dtype)
    for f in (lambda t: t.diagonal(1), lambda t: lib(t).diag(t), lambda t: lib(t).diag(t[0], -1), lambda t: t.trace()):
        check_both(f, x, dtype=None, requires_grad=False, rtol=1e-3)


def test_diagonal_is_a_view_that_writes_go_through():
    def run(L):
        x = L.tensor(values((3, 4)), requires_grad=True)
        h = x * 1
        d = h.diagonal(1)
        d.mul_(10)                          # through the view, into h
        d2 = h.diagonal()
        d2[0] = 7.0
        (h * h).sum().backward()
        return h.detach().numpy(), x.grad.numpy(), h._version, d._version
    ours, theirs = run(fs), run(torch)
    for a, b in zip(ours[:2], theirs[:2]): np.testing.assert_allclose(a, b, rtol=1e-12)
    assert ours[2:] == theirs[2:]


def test_diag_of_a_matrix_is_a_copy():
    for L in (fs, torch):
        x = L.zeros(3, 3)
        L.diag(x).add_(1)
        assert x.sum().item() == 0
        x.diagonal().add_(1)
        assert x.sum().item() == 3


def test_node_names():
    def names(L):
        x, v = L.ones(3, 3, requires_grad=True), L.ones(3, requires_grad=True)
        outs = (x.diagonal(), L.diag(x), L.diag(v), x.trace())
        return [o.grad_fn.name() for o in outs]
    assert names(fs) == names(torch)


@pytest.mark.parametrize('expr', ['diagonal', 'diagonal over a batch', 'diag of a vector', 'diag of a matrix', 'trace'])
def test_second_derivatives(expr):
    f, shape = {'diagonal': (lambda t: (t * t).diagonal(1) * t[0, :3], (3, 4)),
                'diagonal over a batch': (lambda t: (t * t).diagonal(0, 2, 1) ** 2, (2, 3, 4)),
                'diag of a vector': (lambda t: lib(t).diag(t * t, -1) * t.sum(), (3,)),
                'diag of a matrix': (lambda t: lib(t).diag(t * t, 1) ** 2, (3, 3)),
                'trace': (lambda t: (t * t).trace() * t, (3, 3))}[expr]
    check_second(f, values(shape))


@pytest.mark.parametrize('expr', ['diagonal', 'diag of a vector', 'diag of a matrix', 'trace'])
def test_forward_mode_tangents(expr):
    f, shape = {'diagonal': (lambda L, t: t.diagonal(-1, 2, 0), (3, 2, 4)),
                'diag of a vector': (lambda L, t: L.diag(t, 1), (3,)),
                'diag of a matrix': (lambda L, t: L.diag(t, -1), (3, 4)),
                'trace': (lambda L, t: t.trace(), (3, 4))}[expr]
    x, v = values(shape, 1), values(shape, 2)
    def tangent(L): return L.func.jvp(lambda t: f(L, t), (L.tensor(x),), (L.tensor(v),))[1].numpy()
    np.testing.assert_allclose(tangent(fs), tangent(torch), rtol=1e-12)


@pytest.mark.parametrize('case', ['same dims', 'same dims, one negative', 'dim out of range', 'diagonal of a vector',
                                  'diagonal of a number', 'diag of a number', 'diag of a 3-d tensor',
                                  'trace of a vector', 'trace of a batch', 'trace of bools'])
def test_errors_in_torchs_words(case):
    f = {'same dims': lambda L: L.ones(3, 4).diagonal(0, 1, 1),
         'same dims, one negative': lambda L: L.ones(3, 4).diagonal(0, 0, -2),
         'dim out of range': lambda L: L.ones(3, 4).diagonal(0, 0, 2),
         'diagonal of a vector': lambda L: L.ones(3).diagonal(),
         'diagonal of a number': lambda L: L.tensor(1.0).diagonal(),
         'diag of a number': lambda L: L.diag(L.tensor(1.0)),
         'diag of a 3-d tensor': lambda L: L.diag(L.ones(2, 2, 2)),
         'trace of a vector': lambda L: L.trace(L.ones(3)),
         'trace of a batch': lambda L: L.ones(2, 2, 2).trace(),
         'trace of bools': lambda L: L.ones(2, 2, dtype=L.bool).trace()}[case]
    compare_errors(lambda: f(fs), lambda: f(torch))
