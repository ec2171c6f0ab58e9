"""fromscratch: a neural net and PyTorch's `.backward()`, built from scratch.

This file is written by hand (nbdev exports every other module from its notebook in nbs/). It gathers
PyTorch's public names, so that `import fromscratch as fs` reads like `import torch as torch`, and it
imports numpy-only modules: torch, matplotlib and tqdm are imported inside the functions that need them.
"""
__version__ = "0.1.0"

from .core import (Tensor, tensor, zeros, ones, empty, full, rand, randn, randint, arange, linspace,
                   zeros_like, ones_like, empty_like, full_like, rand_like, randn_like, manual_seed, Generator, default_generator,
                   no_grad, enable_grad, set_grad_enabled, is_grad_enabled, result_type,
                   float16, float32, float64, half, double, int8, int16, int32, int64, long, uint8, bool)
from .ops import (cat, concat, concatenate, stack, where, einsum, matmul, maximum, minimum, softmax, log_softmax,
                  sum, mean, max, min, argmax, argmin, var, std, norm, exp, log, sqrt, abs, relu, sigmoid, tanh,
                  clamp, clamp_min, pow, logsumexp, sign)
from . import autograd, nn, optim, utils, data
from .serialization import save, load
