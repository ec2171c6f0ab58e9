"""`fromscratch.nn.utils`: PyTorch's module path (`torch.nn.utils`) for the gradient-clipping functions that
`nbs/09_nn.ipynb` defines in `fromscratch.nn`.

This file is written by hand, like `fromscratch/__init__.py`: it only gathers names, so that code written as
`torch.nn.utils.clip_grad_norm_(...)` or `from torch.nn.utils import clip_grad_value_` runs unchanged.
"""
from . import clip_grad_norm_, clip_grad_value_

__all__ = ['clip_grad_norm_', 'clip_grad_value_']
