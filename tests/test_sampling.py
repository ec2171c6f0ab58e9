"""multinomial (07_ops, the sampling family): shapes and dtypes equal torch's; frequencies within binomial bounds
at fixed seeds, with and without replacement; distinct draws without replacement; repeatable with the seed
or a Generator; torch's errors. The draws themselves cannot be torch's (another generator)."""
import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.testing import compare_errors


@pytest.mark.parametrize('shape', [(1,), (5,), (3, 5), (1, 4), (0, 5)], ids=str)
@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64'])
@pytest.mark.parametrize('replacement', [False, True])
def test_shapes_and_dtypes_like_torch(shape, dtype, replacement):
    a = np.random.default_rng(0).uniform(0.1, 2.0, shape).astype(dtype)
    for n in range(1, shape[-1] + 3 if replacement else shape[-1] + 1):
        ours = fs.multinomial(fs.tensor(a, requires_grad=dtype != 'float16'), n, replacement)
        theirs = torch.multinomial(torch.tensor(a), n, replacement)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype == fs.int64 and theirs.dtype == torch.int64
        assert not ours.requires_grad and ours.grad_fn is None
        assert ours.numpy().size == 0 or (ours.numpy().min() >= 0 and ours.numpy().max() < shape[-1])


def bound(count, total, p, sigmas=4.5):
    "Whether `count` of `total` draws is within `sigmas` binomial standard deviations of `total * p`."
    return np.all(np.abs(count - total * p) <= sigmas * np.sqrt(total * p * (1 - p)) + 1e-9)


WEIGHTS = [[1.0, 2.0, 3.0, 4.0], [0.5, 0.0, 0.5, 3.0, 0.0], [1e-3, 1.0], [7.0, 7.0, 7.0], [1e300, 3e300]]


@pytest.mark.parametrize('w', WEIGHTS, ids=str)
def test_with_replacement_frequencies_are_the_weights(w):
    fs.manual_seed(1)
    p, n = np.array(w) / np.sum(w), 20000
    draws = fs.multinomial(fs.tensor(w, dtype=fs.float64), n, replacement=True).numpy()
    counts = np.bincount(draws, minlength=len(w))
    assert bound(counts, n, p) and np.all(counts[p == 0] == 0)
    rows = fs.multinomial(fs.tensor([w] * 500, dtype=fs.float64), 40, True).numpy()   # 2-D: each row alike
    assert bound(np.bincount(rows.ravel(), minlength=len(w)), rows.size, p)


@pytest.mark.parametrize('w', WEIGHTS[:4], ids=str)
def test_without_replacement_first_and_second_draws_follow_the_weights(w):
    fs.manual_seed(2)
    p, rows = np.array(w) / np.sum(w), 20000
    draws = fs.multinomial(fs.tensor([w] * rows), 2).numpy()
    assert np.all(draws[:, 0] != draws[:, 1])
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(len(p)) if i != j) for j in range(len(p))])
    assert bound(np.bincount(draws[:, 0], minlength=len(w)), rows, p)
    assert bound(np.bincount(draws[:, 1], minlength=len(w)), rows, second)


def test_without_replacement_draws_are_distinct_and_zero_weights_come_last():
    fs.manual_seed(3)
    w = np.random.default_rng(0).uniform(0, 1, (200, 8)) * (np.random.default_rng(1).random((200, 8)) > 0.4)
    w[:, 0] += 0.1   # every row has a positive weight
    for n in (1, 4, 8):
        draws = fs.multinomial(fs.tensor(w), n).numpy()
        for row, d in zip(w, draws):
            assert len(set(d)) == n
            positive = int((row > 0).sum())
            assert all(row[i] > 0 for i in d[:positive]) and all(row[i] == 0 for i in d[positive:])
    one = np.zeros((3, 5)); one[[0, 1, 2], [4, 0, 2]] = [2.0, 0.5, 1.0]    # one positive weight per row
    for n in (1, 3, 5):
        ours, theirs = fs.multinomial(fs.tensor(one), n), torch.multinomial(torch.tensor(one), n)
        assert ours.numpy()[:, 0].tolist() == theirs.numpy()[:, 0].tolist() == [4, 0, 2]


def test_repeatable_with_the_seed_and_with_a_generator():
    w = fs.tensor([[1.0, 2.0, 3.0], [3.0, 0.0, 1.0]])
    fs.manual_seed(5); a = [fs.multinomial(w, 2).tolist(), w.multinomial(7, replacement=True).tolist()]
    fs.manual_seed(5); b = [fs.multinomial(w, 2).tolist(), w.multinomial(7, replacement=True).tolist()]
    assert a == b
    g1, g2 = fs.Generator().manual_seed(9), fs.Generator().manual_seed(9)
    fs.manual_seed(5)
    assert fs.multinomial(w, 20, True, generator=g1).tolist() == fs.multinomial(w, 20, True, generator=g2).tolist()
    assert fs.multinomial(w, 2).tolist() == a[0]    # the default generator did not move


@pytest.mark.parametrize('mistake', ['a negative weight', 'a nan', 'an inf', 'a row of zeros', 'all zeros',
                                     'too many without replacement', 'no samples', 'negative samples', 'integers',
                                     'bools', 'a 3-d tensor', 'a 0-d tensor', 'float num_samples', 'bool num_samples',
                                     'no categories', 'no categories, with replacement', 'too many categories',
                                     'bad dims before a bad dtype', 'no samples before bad weights'])
def test_mistakes_get_torchs_errors(mistake):
    f = {'a negative weight': lambda L: L.multinomial(L.tensor([1.0, -2.0, 3.0]), 2),
         'a nan': lambda L: L.multinomial(L.tensor([1.0, np.nan]), 1, True),
         'an inf': lambda L: L.tensor([[1.0, 1.0], [np.inf, 1.0]]).multinomial(1),
         'a row of zeros': lambda L: L.multinomial(L.tensor([[1.0, 1.0], [0.0, 0.0]]), 1),
         'all zeros': lambda L: L.multinomial(L.zeros(3), 2, True),
         'too many without replacement': lambda L: L.multinomial(L.ones(3), 4),
         'no samples': lambda L: L.multinomial(L.ones(3), 0),
         'negative samples': lambda L: L.multinomial(L.ones(3), -1, True),
         'integers': lambda L: L.multinomial(L.tensor([1, 2, 3]), 2),
         'bools': lambda L: L.multinomial(L.tensor([True, False]), 1),
         'a 3-d tensor': lambda L: L.multinomial(L.ones(2, 2, 2), 1),
         'a 0-d tensor': lambda L: L.multinomial(L.tensor(1.0), 1),
         'float num_samples': lambda L: L.multinomial(L.ones(3), 2.0),
         'bool num_samples': lambda L: L.multinomial(L.ones(3), True),
         'no categories': lambda L: L.multinomial(L.ones(2, 0), 1),
         'no categories, with replacement': lambda L: L.multinomial(L.ones(2, 0), 1, True),
         'too many categories': lambda L: L.multinomial(L.ones(1).expand(1 << 25), 1),
         'bad dims before a bad dtype': lambda L: L.multinomial(L.ones(2, 2, 2, dtype=L.int64), 0),
         'no samples before bad weights': lambda L: L.multinomial(L.tensor([-1.0, 1.0]), 0)}[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))
