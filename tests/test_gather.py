"""gather, scatter_add, index_select and masked_fill (07_ops, the indexing family) against torch: values,
gradients of every input that has one, node names and errors."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.testing import compare_errors

rng = np.random.default_rng(0)
X, S = rng.standard_normal((3, 4)), rng.standard_normal((3, 5))
CASES = {
    'gather along 1, a repeat': lambda L, x, s: L.gather(x, 1, L.tensor([[0, 3], [1, 1], [2, 0]])),
    'gather along 0, smaller index': lambda L, x, s: x.gather(0, L.tensor([[2, 0]])),
    'gather, a negative dim': lambda L, x, s: x.gather(-1, L.tensor([[3], [0], [1]])),
    'gather, int32 index': lambda L, x, s: x.gather(1, L.tensor([[1], [0], [3]], dtype=L.int32)),
    'scatter_add along 1, repeats': lambda L, x, s: x.scatter_add(1, L.tensor([[0, 0], [3, 1], [2, 2]]), s[:, :2]),
    'scatter_add along 0': lambda L, x, s: L.scatter_add(x, 0, L.tensor([[0, 2, 0, 1]]), s[:1, :4]),
    'index_select, repeats': lambda L, x, s: x.index_select(1, L.tensor([3, 3, 0])),
    'index_select, a 0-d index': lambda L, x, s: L.index_select(x, 0, L.tensor(1)),
    'masked_fill, a broadcast mask': lambda L, x, s: x.masked_fill(L.tensor([[True], [False], [True]]), 2.5),
    'masked_fill, a tensor value': lambda L, x, s: L.masked_fill(x, L.tensor([True, False, False, True]), s[0, 0] * 3),
}


def run(L, name):
    x = L.tensor(X, dtype=L.float64, requires_grad=True)
    s = L.tensor(S, dtype=L.float64, requires_grad=True)
    out = CASES[name](L, x, s)
    w = L.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)), dtype=L.float64)
    (out * w).sum().backward()
    node = out.grad_fn.name() if L is fs else type(out.grad_fn).__name__
    return out.detach().numpy(), x.grad.numpy(), None if s.grad is None else s.grad.numpy(), node


@pytest.mark.parametrize('name', list(CASES))
def test_picking_and_placing_agree_with_torch(name):
    ours, theirs = run(fs, name), run(torch, name)
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    assert (ours[2] is None) == (theirs[2] is None)
    if ours[2] is not None: np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)
    assert ours[3] == theirs[3]


def test_masked_fill_casts_its_value_to_the_tensors_dtype():
    for L in (fs, torch):
        out = L.arange(6).reshape(2, 3).masked_fill(L.tensor([True, False, True]), 2.5)
        assert out.tolist() == [[2, 1, 2], [2, 4, 2]] and str(out.dtype).endswith('int64')


@pytest.mark.parametrize('mistake', ['float index', 'index past the end', 'index too large', 'float mask',
                                     'a vector value', 'a matrix for index_select', 'a negative index',
                                     'a negative scatter index', 'a negative index_select index',
                                     'index_select past the end'])
def test_mistakes_get_torchs_errors(mistake):
    f = {'float index': lambda L: L.ones(2, 3).gather(1, L.tensor([[0.0], [2.0]])),
         'index past the end': lambda L: L.ones(2, 3).gather(1, L.tensor([[0], [3]])),
         'index too large': lambda L: L.ones(2, 3).gather(0, L.tensor([[0, 1, 1, 0]])),
         'float mask': lambda L: L.ones(3).masked_fill(L.tensor([1.0, 0.0, 1.0]), 0.0),
         'a vector value': lambda L: L.ones(3).masked_fill(L.tensor([True, False, True]), L.tensor([1.0, 2.0])),
         'a matrix for index_select': lambda L: L.ones(2, 3).index_select(1, L.tensor([[0]])),
         'a negative index': lambda L: L.ones(2, 3).gather(1, L.tensor([[-1], [0]])),  # no wrapping
         'a negative scatter index': lambda L: L.ones(2, 3).scatter_add(1, L.tensor([[-1], [0]]), L.ones(2, 1)),
         'a negative index_select index': lambda L: L.ones(2, 3).index_select(1, L.tensor([-1])),
         'index_select past the end': lambda L: L.ones(2, 3).index_select(1, L.tensor([0, 3]))}[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))


def test_the_forward_mode_rules_agree_with_torch():
    x, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    i = np.array([[0, 3], [1, 1], [2, 0]])
    def run(L, T):
        f = lambda x: (L.gather(x, 1, L.tensor(i)).sum() + L.masked_fill(x, L.tensor([True, False, False, True]), 1.0).sum()
                       + L.index_select(x, 1, L.tensor([2, 2])).sum() + L.scatter_add(x, 1, L.tensor(i), x[:, :2]).sum())
        return T.jvp(f, (L.tensor(x),), (L.tensor(t),))[1].item()
    assert np.isclose(run(fs, fs.func), run(torch, torch.func))
