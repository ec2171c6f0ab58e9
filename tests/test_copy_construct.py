"""`fs.tensor(a_tensor)` copies and warns as `torch.tensor(a_tensor)` does: the same UserWarning (fromscratch's
name where torch names torch), pointing at the caller's line; nothing else that `tensor` takes warns."""
import warnings

import numpy as np
import pytest
import torch

import fromscratch as fs


def caught(f):
    "The warnings `f()` gives, and its result."
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter('always')
        out = f()
    return ws, out


SOURCES = {
    'float': lambda l: l.tensor([1.5, -2.0]),
    'requires grad': lambda l: l.tensor([1.5, -2.0], requires_grad=True),
    'a result': lambda l: l.tensor([1.5, -2.0], requires_grad=True) * 2,
    'int': lambda l: l.tensor([[1, 2], [3, 4]]),
    '0-d double': lambda l: l.tensor(3.0, dtype=l.float64),
}


@pytest.mark.parametrize('name', list(SOURCES))
@pytest.mark.parametrize('requires_grad', [False, True])
def test_warns_and_copies_like_torch(name, requires_grad):
    source, tsource = SOURCES[name](fs), SOURCES[name](torch)
    if requires_grad and not source.is_floating_point(): return
    ours, made = caught(lambda: fs.tensor(source, requires_grad=requires_grad))
    theirs, tmade = caught(lambda: torch.tensor(tsource, requires_grad=requires_grad))
    assert [(w.category, str(w.message).replace('fromscratch.', 'torch.')) for w in ours] == \
        [(w.category, str(w.message)) for w in theirs]
    assert len(ours) == 1 and ours[0].filename == __file__  # the caller's line, as torch's
    assert (made.is_leaf, made.requires_grad, made.grad_fn) == (tmade.is_leaf, tmade.requires_grad, None)
    np.testing.assert_array_equal(made.detach().numpy(), tmade.detach().numpy(), strict=True)  # and dtype
    assert not np.shares_memory(made.array, source.array)  # a copy


@pytest.mark.parametrize('data', [[1.0, 2.0], np.arange(3), 2.5, [[True]]], ids=str)
def test_other_data_does_not_warn(data):
    assert caught(lambda: fs.tensor(data))[0] == caught(lambda: torch.tensor(data))[0] == []


def test_the_recommended_copy_does_not_warn():
    t = fs.tensor([1.0, 2.0], requires_grad=True)
    ws, copy = caught(lambda: t.detach().clone().requires_grad_(True))
    assert ws == [] and copy.is_leaf and copy.requires_grad
