"""The checking helpers of nbs/00_testing.ipynb, beyond what the notebook shows."""
import numpy as np
import pytest
import torch

from fromscratch.testing import compare_errors, error_of


def test_error_of_names_the_exception_or_none():
    assert error_of(lambda: 1 // 0) == 'ZeroDivisionError: integer division or modulo by zero'
    assert error_of(lambda: None) == 'no error'


def test_compare_errors_passes_on_the_same_error_and_prints_both():
    same = compare_errors(lambda: torch.ones(3) + torch.ones(4), lambda: torch.ones(3) + torch.ones(4))
    assert same.same and repr(same).splitlines()[-1] == 'same error: True'
    assert repr(same).startswith('ours:  RuntimeError: The size of tensor a (3)')


@pytest.mark.parametrize('ours, theirs, same_message', [
    (lambda: np.ones(3) + np.ones(4), lambda: torch.ones(3) + torch.ones(4), False),   # another type
    (lambda: float(torch.ones(3)), lambda: int('x'), False),                          # ValueError both
    (lambda: None, lambda: torch.ones(3) + torch.ones(4), False),                     # ours does not fail
    (lambda: torch.ones(3) + torch.ones(4), lambda: None, False),                     # torch does not
])
def test_compare_errors_fails_when_they_differ(ours, theirs, same_message):
    kinds = error_of(ours).partition(':')[0], error_of(theirs).partition(':')[0]
    if kinds[0] == kinds[1]:         # the same type, another message: only the full comparison fails
        compare_errors(ours, theirs, same_message=False)
        with pytest.raises(AssertionError, match='the errors differ'): compare_errors(ours, theirs)
    else:
        with pytest.raises(AssertionError, match='the errors differ'):
            compare_errors(ours, theirs, same_message=same_message)


def test_no_error_on_both_sides_agrees():
    assert compare_errors(lambda: 1, lambda: 2).same
