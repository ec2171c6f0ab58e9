"""fromscratch: a neural net and PyTorch's `.backward()`, built from scratch.

This file is written by hand (nbdev exports every other module from its notebook in nbs/). It gathers
PyTorch's public names, so that `import fromscratch as fs` reads like `import torch as torch`, and it
imports numpy-only modules: torch, matplotlib and tqdm are imported inside the functions that need them.
`fs.float`, `fs.int`, `fs.bool`, `fs.all`, `fs.any`, `fs.sum`, ... shadow Python's built-ins of the same
names inside this namespace, as in torch's.
"""
__version__ = "0.1.0"

from .core import (Tensor, tensor, zeros, ones, empty, full, rand, randn, randint, arange, linspace, eye, normal,
                   zeros_like, ones_like, empty_like, full_like, rand_like, randn_like, as_tensor, from_numpy,
                   manual_seed, Generator, default_generator, no_grad, enable_grad, set_grad_enabled, is_grad_enabled, result_type,
                   inference_mode, is_inference_mode_enabled, is_inference,
                   is_tensor, Size, TypedStorage, UntypedStorage, get_default_dtype, set_default_dtype, finfo, iinfo,
                   device, set_default_device, get_default_device, cuda, backends,
                   dtype, float16, float32, float64, half, float, double, int8, int16, int32, int64, short, int,
                   long, uint8, uint16, uint32, uint64, bool)
from .ops import (cat, concat, concatenate, stack, where, einsum, matmul, dot, mm, bmm, outer, maximum, minimum,
                  softmax, log_softmax, sum, mean, prod, cumsum, max, min, argmax, argmin, var, std, norm, all, any,
                  exp, log, sqrt, rsqrt, abs, relu, sigmoid, tanh, sin, cos, square, log1p, expm1, clamp, clamp_min,
                  clamp_max, pow, floor_divide, logsumexp, sign, isnan, isinf, isfinite, allclose, equal,
                  repeat, swapaxes, swapdims,
                  # each Tensor method's function form, as torch has them: torch.mul(a, b) is a.mul(b)
                  add, sub, mul, div, neg, eq, ne, lt, le, gt, ge, logical_not, reshape, flatten, squeeze,
                  unsqueeze, permute, transpose, t, clone, nonzero,
                  gather, scatter, scatter_add, index_select, masked_fill, index_add, remainder, fmod,
                  reciprocal, diag, diagonal, trace)
from .ops import sort, argsort, topk, movedim, moveaxis, log2, log10, tril, triu, multinomial
from .ops import split, chunk, unbind, tensor_split, repeat_interleave
# the function forms take torch's `out=` (fs.add(a, b, out=c)); divide, clip, concat, ...: its other names
from .ops.arguments import FUNCTION_FORMS
globals().update(FUNCTION_FORMS)
del FUNCTION_FORMS
from . import autograd, nn, optim, utils, data, func, compiler
from .func import vmap  # torch.vmap is torch.func.vmap
from .compiler import compile  # torch.compile; `fromscratch.compiler` as torch.compiler
from .serialization import save, load
