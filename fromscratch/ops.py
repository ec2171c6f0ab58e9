"""Every differentiable operation as a `Function`, its forward and its gradient formula side by side, grouped by family (pointwise, reductions, shape and views, linear algebra, indexing, in-place); then the one table that makes them `Tensor` methods and operators."""

import builtins
import math
import string
from collections import namedtuple

import numpy as np

from .core import (Tensor, Function, Add, operands, Expand, SumToSize, expand_to, grad_mode, result_type, category, size_arg, expandable,
                   broadcast_op, broadcast_error, shape_of, sum_to, cast, make_view, view_of, rebase, float32, float64, int64)
from .hooks import register_hook, retain_grad

# ---- helpers shared by the families --------------------------------------------------------------------
def dim_error(d, n):
    "PyTorch's error for a dimension index `d` outside a tensor of `n` dimensions."
    return IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")

def dim_index(d, ndim):
    "One dimension index, wrapped if negative (None for a 0-d tensor, which accepts 0 and -1 like PyTorch)."
    n = builtins.max(ndim, 1)
    if not -n <= d < n: raise dim_error(d, n)
    return d % n if ndim else None

def dim_indices(dim, ndim):
    "The dimensions `dim` names (an int, a tuple, or None for all) as a tuple of non-negative ints."
    if dim is None: return tuple(range(ndim))
    return tuple(d for d in (dim_index(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim)) if d is not None)

def kept_shape(shape, dims):
    "`shape` with the reduced `dims` set to size 1 (the shape `keepdim=True` gives)."
    return tuple(1 if i in dims else s for i, s in enumerate(shape))

def as_float(x):
    "The array `x`, or `x` as float32 if it holds integers or bools (PyTorch's `exp(int)` is a float)."
    return x if x.dtype.kind == 'f' else x.astype(float32)

def alias(t):
    "A tensor sharing `t`'s array and version counter, without its history: an output saved without a cycle."
    out = Tensor(t.array)
    out._version_counter = t.version_counter
    return out

def with_history(ctx, saved):
    "A saved output (an `alias`), given back its history (the node `ctx`) when the backward itself is recorded."
    if not grad_mode.enabled: return saved
    out = Tensor(saved.array)
    out._version_counter, out.grad_fn, out._requires_grad, out._output_nr = saved._version_counter, ctx, True, 0
    return out

def is_bool(v): return v.array.dtype.kind == 'b' if isinstance(v, Tensor) else isinstance(v, builtins.bool)

def sgn(x):
    "The sign of each element of the array `x` as PyTorch computes it: -1, 0 or 1, and 0 for nan."
    return np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype, copy=False)

# ---- pointwise: one tensor -----------------------------------------------------------------------------
class Pointwise(Function):
    "An elementwise function of one tensor: `compute` on its array; `derivative(x, out)`, times the gradient."
    array_backward = True   # each `derivative` below is written with operators, so it runs on arrays and tensors alike
    uses_output = False   # whether `derivative` needs the output (saved without a cycle) or the input
    keeps_ints = False    # whether integers stay integers (abs, relu) or become float32 (exp, log, ...)
    @staticmethod
    def forward(ctx, a):
        f = ctx.function
        with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
            out = Tensor(np.asarray(f.compute(a.array if f.keeps_ints else as_float(a.array))))
        if ctx.needs_input_grad[0]: ctx.save_for_backward(alias(out) if f.uses_output else a)
        return out
    @staticmethod
    def backward(ctx, grad_output):
        saved, = ctx.saved_tensors
        f = ctx.function
        return grad_output * (f.derivative(None, with_history(ctx, saved)) if f.uses_output else f.derivative(saved, None))

def pointwise(name, compute, derivative, doc, uses_output=False, keeps_ints=False):
    "A `Pointwise` op: its forward (`compute`) and its gradient formula (`derivative`) on one line each."
    return type(name, (Pointwise,), dict(compute=staticmethod(compute), derivative=staticmethod(derivative),
                                         uses_output=uses_output, keeps_ints=keeps_ints, __doc__=doc))

def sigmoid_array(x):
    "1 / (1 + e ** -x) without overflow: through e ** -|x|."
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e)

Exp     = pointwise('Exp',     np.exp,        lambda x, out: out,               "e ** x", uses_output=True)
Log     = pointwise('Log',     np.log,        lambda x, out: 1 / x,             "The natural logarithm.")
Sqrt    = pointwise('Sqrt',    np.sqrt,       lambda x, out: 0.5 / out,         "The square root.", uses_output=True)
Tanh    = pointwise('Tanh',    np.tanh,       lambda x, out: 1 - out * out,     "The hyperbolic tangent.", uses_output=True)
Sigmoid = pointwise('Sigmoid', sigmoid_array, lambda x, out: out * (1 - out),   "1 / (1 + e ** -x).", uses_output=True)
Abs     = pointwise('Abs',     np.abs,        lambda x, out: (x > 0) * 1.0 - (x < 0) * 1.0, "|x| (gradient 0 at 0).", keeps_ints=True)
Relu    = pointwise('Relu',    lambda x: np.maximum(x, 0), lambda x, out: ~(out <= 0),
                    "max(x, 0), with relu'(0) = 0 (a nan passes its gradient on).", uses_output=True, keeps_ints=True)

class Neg(Function):
    "-x."
    array_backward = True
    @staticmethod
    def forward(ctx, a):
        if a.array.dtype.kind == 'b':
            raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                               "invert a mask, use the `~` or `logical_not()` operator instead.")
        return Tensor(np.negative(a.array))
    @staticmethod
    def backward(ctx, grad_output): return -grad_output

class Sign(Function):
    "-1, 0 or 1 for each element (0 for nan); its gradient is 0."
    @staticmethod
    def forward(ctx, a): return Tensor(sgn(a.array))
    @staticmethod
    def backward(ctx, grad_output): return Tensor(np.zeros_like(grad_output.array))

class Clamp(Function):
    "Values cut to [min, max] (either may be None); the gradient passes where min <= a <= max."
    array_backward = True
    @staticmethod
    def forward(ctx, a, min=None, max=None):
        if min is None and max is None: raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        x = a.array
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(Tensor(x >= min if max is None else x <= max if min is None else (x >= min) & (x <= max)))
        return Tensor(np.clip(x, min, max).astype(result_type(a, min if max is None else max), copy=False))
    @staticmethod
    def backward(ctx, grad_output): return grad_output * ctx.saved_tensors[0], None, None

# ---- pointwise: two tensors, broadcasting ------------------------------------------------------------------
def check_bool_sub(a, b):
    "PyTorch has no subtraction of bools (in place or not): raise its error."
    if is_bool(a) and is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
                           "or `logical_xor()` operator instead.")
    if is_bool(a) or is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")

class Sub(Function):
    "a - b, broadcasting."
    array_backward = True
    @staticmethod
    def forward(ctx, a, b):
        check_bool_sub(a, b)
        return broadcast_op(np.subtract, a, b)
    @staticmethod
    def backward(ctx, grad_output):
        return (sum_to(grad_output, ctx.input_shape(0)) if ctx.needs_input_grad[0] else None,
                sum_to(-grad_output, ctx.input_shape(1)) if ctx.needs_input_grad[1] else None)

class Mul(Function):
    "a * b, broadcasting."
    array_backward = True
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)
        return broadcast_op(np.multiply, a, b)
    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return (sum_to(grad_output * b, ctx.input_shape(0)) if ctx.needs_input_grad[0] else None,
                sum_to(grad_output * a, ctx.input_shape(1)) if ctx.needs_input_grad[1] else None)

def true_divide(x, y):
    "x / y on arrays, as PyTorch divides: integers give float32, and dividing by 0 gives inf or nan."
    if np.result_type(x, y).kind != 'f': x, y = np.asarray(x, float32), np.asarray(y, float32)
    with np.errstate(divide='ignore', invalid='ignore'): return np.true_divide(x, y)

class Div(Function):
    "a / b, broadcasting; true division, so integers give float32 as in PyTorch."
    array_backward = True
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        return broadcast_op(true_divide, a, b)
    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return (sum_to(grad_output / b, ctx.input_shape(0)) if ctx.needs_input_grad[0] else None,
                sum_to(-grad_output * (a / b / b), ctx.input_shape(1)) if ctx.needs_input_grad[1] else None)

def power(x, y):
    "`x ** y` on arrays; a float `x` to the Python power 1/2 or -1/2 is a square root, as in PyTorch."
    with np.errstate(divide='ignore', invalid='ignore'):
        if isinstance(x, np.ndarray) and x.dtype.kind == 'f' and isinstance(y, float) and y in (0.5, -0.5):
            return np.sqrt(x) if y == 0.5 else 1 / np.sqrt(x)   # sqrt(-inf) is nan and 1/sqrt(-0.0) is -inf
        return np.power(x, y)

def bool_pow(a, b):
    "bool ** bool: PyTorch has no such kernel, except a bool tensor to a Python bool power (x ** 0 = 1, x ** 1 = x)."
    if isinstance(a, Tensor) and not isinstance(b, Tensor):
        return Tensor(a.array.copy() if b else np.ones_like(a.array))
    raise NotImplementedError("\"pow\" not implemented for 'Bool'")

class Pow(Function):
    "a ** b, broadcasting; either side may be a Python number."
    @staticmethod
    def forward(ctx, a, b):
        if is_bool(a) and is_bool(b): return bool_pow(a, b)
        ctx.save_for_backward(a, b)
        return broadcast_op(power, a, b)
    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        ga = gb = None
        if ctx.needs_input_grad[0]:     # b * a ** (b - 1), and 0 where b is 0 (even at a = 0)
            if isinstance(b, Tensor): ga = where(b == 0, 0.0, grad_output * b * a ** (b - 1))
            else: ga = grad_output * 0.0 if b == 0 else grad_output * b * a ** (b - 1)
            ga = sum_to(ga, ctx.input_shape(0))
        if ctx.needs_input_grad[1]:     # a ** b * log(a), and 0 where a is 0 and b >= 0
            base = a if isinstance(a, Tensor) else Tensor(np.asarray(a, dtype=b.dtype))
            gb = sum_to(grad_output * where((base == 0) & (b >= 0), 0.0, a ** b * base.log()), ctx.input_shape(1))
        return ga, gb

class Maximum(Function):
    "The elementwise maximum of `a` and `b`; ties split the gradient in halves, like PyTorch."
    array_backward = True
    largest = True
    @staticmethod
    def forward(ctx, a, b):
        out = broadcast_op(np.maximum if ctx.function.largest else np.minimum, a, b)
        x, y = (t.array if isinstance(t, Tensor) else t for t in (a, b))
        a_loses, b_loses = (x < y, x > y) if ctx.function.largest else (x > y, x < y)
        tie = np.equal(x, y)
        # each side's share of the gradient: 1 where it won, 1/2 at a tie, 0 where it lost (a nan loses nowhere)
        ctx.save_for_backward(Tensor(np.asarray(1 - a_loses - 0.5 * tie)), Tensor(np.asarray(1 - b_loses - 0.5 * tie)))
        return out
    @staticmethod
    def backward(ctx, grad_output):
        share_a, share_b = ctx.saved_tensors
        return (sum_to(grad_output * share_a, ctx.input_shape(0)) if ctx.needs_input_grad[0] else None,
                sum_to(grad_output * share_b, ctx.input_shape(1)) if ctx.needs_input_grad[1] else None)

class Minimum(Maximum):
    "The elementwise minimum of `a` and `b`; ties split the gradient in halves, like PyTorch."
    largest = False

class Where(Function):
    "Elements of `a` where `cond` is true, of `b` elsewhere (broadcasting)."
    @staticmethod
    def forward(ctx, cond, a, b):
        c = cond.array if isinstance(cond, Tensor) else np.asarray(cond)
        ctx.save_for_backward(Tensor(c))
        return broadcast_op(lambda x, y: np.where(c, x, y), a, b)
    @staticmethod
    def backward(ctx, grad_output):
        c, = ctx.saved_tensors
        return (None, sum_to(where(c, grad_output, 0.0), ctx.input_shape(1)) if ctx.needs_input_grad[1] else None,
                sum_to(where(c, 0.0, grad_output), ctx.input_shape(2)) if ctx.needs_input_grad[2] else None)

def where(condition, input=None, other=None):
    "`input` where `condition` holds, `other` elsewhere; with only `condition`, the indices where it holds."
    if input is None and other is None: return tuple(Tensor(i) for i in np.nonzero(condition.array))
    if input is None or other is None:
        raise TypeError("where() received an invalid combination of arguments: give `condition` alone, or "
                        "`condition, input, other`")
    return Where.apply(condition, input, other)

def comparison(ufunc):
    "A comparison or logical operator: elementwise, broadcasting, a `bool` tensor outside the graph."
    def compare(self, other):
        if not isinstance(other, (Tensor, int, float, np.ndarray, np.generic)): return NotImplemented
        return broadcast_op(ufunc, self, other)
    compare.__name__ = ufunc.__name__
    return compare

def logical_not(input):
    "`~x`: not for bools, bitwise not for integers."
    return Tensor(np.logical_not(input.array) if input.array.dtype == np.bool_ else ~input.array)

def exp(input): "e to the power of each element."; return Exp.apply(input)
def log(input): "The natural logarithm of each element."; return Log.apply(input)
def sqrt(input): "The square root of each element."; return Sqrt.apply(input)
def abs(input): "The absolute value of each element."; return Abs.apply(input)
def relu(input): "max(x, 0) for each element."; return Relu.apply(input)
def sigmoid(input): "1 / (1 + exp(-x)) for each element."; return Sigmoid.apply(input)
def tanh(input): "The hyperbolic tangent of each element."; return Tanh.apply(input)
def sign(input): "-1, 0 or 1 for each element."; return Sign.apply(input)
def neg(input): "-x for each element."; return Neg.apply(input)
def clamp(input, min=None, max=None): "Each element cut to [min, max]."; return Clamp.apply(input, min, max)
def clamp_min(input, min): "Each element cut from below at `min`."; return Clamp.apply(input, min, None)
def pow(input, exponent): "`input ** exponent`."; return Pow.apply(input, exponent)
def maximum(input, other): "The elementwise maximum of two tensors."; return Maximum.apply(input, other)
def minimum(input, other): "The elementwise minimum of two tensors."; return Minimum.apply(input, other)
def add(input, other, alpha=1): "`input + alpha * other`."; return Add.apply(input, other if alpha == 1 else other * alpha)
def sub(input, other, alpha=1): "`input - alpha * other`."; return Sub.apply(input, other if alpha == 1 else other * alpha)
def mul(input, other): "`input * other`."; return Mul.apply(input, other)
def div(input, other): "`input / other`, true division."; return Div.apply(input, other)

# ---- reductions --------------------------------------------------------------------------------------------
def sum_dtype(x): return int64 if x.dtype.kind in 'biu' else None   # integers and bools sum to int64

class Sum(Function):
    "The sum over `dim` (None: all), keeping the reduced dimensions as size 1 if `keepdim`."
    array_backward = True
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        x = a.array
        ctx.shape, ctx.dims = x.shape, dim_indices(dim, x.ndim)
        return Tensor(np.asarray(np.add.reduce(x, axis=ctx.dims, dtype=sum_dtype(x), keepdims=keepdim)))
    @staticmethod
    def backward(ctx, grad_output):
        return expand_to(grad_output.reshape(kept_shape(ctx.shape, ctx.dims)), ctx.shape), None, None

class Mean(Function):
    "The mean over `dim` (None: all); floating-point tensors only, like PyTorch."
    array_backward = True
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        if a.array.dtype.kind != 'f':
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                               f"or complex dtype. Got: {a.array.dtype} (convert with .float() first)")
        ctx.shape, ctx.dims = a.array.shape, dim_indices(dim, a.array.ndim)
        ctx.n = math.prod(a.array.shape[d] for d in ctx.dims)
        with np.errstate(invalid='ignore', divide='ignore'):
            return Tensor(np.asarray(np.add.reduce(a.array, axis=ctx.dims, keepdims=keepdim) / ctx.n, dtype=a.array.dtype))
    @staticmethod
    def backward(ctx, grad_output):
        return expand_to(grad_output.reshape(kept_shape(ctx.shape, ctx.dims)) / ctx.n, ctx.shape), None, None

def empty_dim_error(name, d): return IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")

class Max(Function):
    "The largest element; the gradient is shared evenly among ties."
    array_backward = True
    largest = True
    @staticmethod
    def forward(ctx, a):
        x, largest = a.array, ctx.function.largest
        if x.size == 0:
            raise RuntimeError(f"{'max' if largest else 'min'}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
        out = np.asarray(x.max() if largest else x.min())
        if ctx.needs_input_grad[0]:
            mask = np.isnan(x) if np.isnan(out) else x == out   # a nan maximum: shared among the nans
            ctx.save_for_backward(Tensor(mask / mask.sum(dtype=x.dtype)))
        return Tensor(out)
    @staticmethod
    def backward(ctx, grad_output): return ctx.saved_tensors[0] * grad_output

class Min(Max):
    "The smallest element; the gradient is shared evenly among ties."
    largest = False

class MaxDim(Function):
    "The largest elements along `dim` and their indices; the gradient goes to those indices."
    largest = True
    @staticmethod
    def forward(ctx, a, dim, keepdim=False):
        x, d, largest = a.array, dim_index(dim, a.array.ndim), ctx.function.largest
        if d is None:    # a 0-d tensor: itself, at index 0
            indices = Tensor(np.zeros((), int64))
            ctx.mark_non_differentiable(indices)
            return Tensor(x.copy()), indices
        if x.shape[d] == 0: raise empty_dim_error('max' if largest else 'min', d)
        idx = np.expand_dims((np.argmax if largest else np.argmin)(x, axis=d), d)
        values = np.take_along_axis(x, idx, axis=d)
        ctx.dim, ctx.keepdim, ctx.shape = d, keepdim, x.shape
        ctx.save_for_backward(Tensor(idx))
        if not keepdim: values, idx = values.squeeze(d), idx.squeeze(d)
        indices = Tensor(idx)
        ctx.mark_non_differentiable(indices)
        return Tensor(values), indices
    @staticmethod
    def backward(ctx, grad_output, grad_indices):
        if not hasattr(ctx, 'dim'): return grad_output, None, None
        idx, = ctx.saved_tensors
        onehot = np.zeros(ctx.shape, dtype=bool)
        np.put_along_axis(onehot, idx.array, True, axis=ctx.dim)
        g = grad_output if ctx.keepdim else grad_output.unsqueeze(ctx.dim)
        return Tensor(onehot) * g, None, None

class MinDim(MaxDim):
    "The smallest elements along `dim` and their indices; the gradient goes to those indices."
    largest = False

max_result = namedtuple('max', ['values', 'indices'])
min_result = namedtuple('min', ['values', 'indices'])

def max(input, dim=None, keepdim=False):
    "The largest element; or, along `dim`, a named tuple `(values, indices)`; or `maximum(input, dim)` for a tensor."
    if isinstance(dim, Tensor): return maximum(input, dim)
    if dim is None: return Max.apply(input)
    return max_result(*MaxDim.apply(input, dim, keepdim))

def min(input, dim=None, keepdim=False):
    "The smallest element; or, along `dim`, a named tuple `(values, indices)`; or `minimum(input, dim)` for a tensor."
    if isinstance(dim, Tensor): return minimum(input, dim)
    if dim is None: return Min.apply(input)
    return min_result(*MinDim.apply(input, dim, keepdim))

def arg_reduce(f, input, dim, keepdim):
    "`np.argmax` or `np.argmin` of `input` (flattened if `dim` is None), checked like PyTorch."
    x = input.array
    if dim is None:
        if x.size == 0: raise IndexError(f"{f.__name__}(): Expected reduction dim to be specified for input.numel() == 0.")
        i = np.asarray(f(x))
        return Tensor(i.reshape((1,) * x.ndim) if keepdim else i)
    d = dim_index(dim, x.ndim)
    if d is not None and x.shape[d] == 0: raise empty_dim_error(f.__name__, d)
    return Tensor(np.asarray(f(x, axis=d, keepdims=keepdim)) if d is not None else np.zeros((), int64))

def argmax(input, dim=None, keepdim=False):
    "The index of the largest element (of the flattened tensor if `dim` is None)."
    return arg_reduce(np.argmax, input, dim, keepdim)

def argmin(input, dim=None, keepdim=False):
    "The index of the smallest element (of the flattened tensor if `dim` is None)."
    return arg_reduce(np.argmin, input, dim, keepdim)

class Var(Function):
    "The variance over `dim` (None: all), divided by n - correction; its subclass `Std` takes the square root."
    root = False
    @staticmethod
    def forward(ctx, a, dim, correction, keepdim):
        x = a.array
        if x.dtype.kind != 'f': raise RuntimeError("std and var only support floating point and complex dtypes")
        ctx.dims = dim_indices(dim, x.ndim)
        ctx.kept, ctx.whole = kept_shape(x.shape, ctx.dims), dim is None or x.ndim == 0
        ctx.dof = math.prod(x.shape[d] for d in ctx.dims) - correction
        d = x - x.mean(axis=ctx.dims, keepdims=True) if x.size else x
        with np.errstate(divide='ignore', invalid='ignore'):
            out = np.asarray((d * d).sum(axis=ctx.dims, keepdims=keepdim) / builtins.max(ctx.dof, 0), x.dtype)
            if ctx.function.root: out = np.sqrt(out)
        out = Tensor(out)
        ctx.save_for_backward(a, alias(out) if ctx.function.root else None)
        return out
    @staticmethod
    def backward(ctx, grad_output):
        x, saved = ctx.saved_tensors
        g = grad_output.reshape(ctx.kept)
        if ctx.function.root:   # d std = d var / (2 std), and 0 where std is 0
            out = with_history(ctx, saved).reshape(ctx.kept)
            g = where(out == 0, 0.0, g / (2 * out))
        if ctx.dof > 0 or not ctx.whole:   # 2 / dof: infinite for dof = 0, negative for dof < 0
            return g * (2 / ctx.dof if ctx.dof else math.inf) * (x - x.mean(ctx.dims, keepdim=True)), None, None, None
        mean = x.array.mean() if x.array.size else 0   # all elements and dof <= 0: inf, times 0 (nan) at the mean
        return g * Tensor(np.where(x.array == mean, np.nan, np.inf).astype(x.dtype)), None, None, None

class Std(Var):
    "The standard deviation over `dim`: the square root of the variance."
    root = True

def correction_of(dim, unbiased, correction):
    "`dim` and the correction from the ways PyTorch accepts them: `x.var(False)`, `unbiased=`, `correction=`."
    if isinstance(dim, builtins.bool): dim, unbiased = None, dim
    return dim, (1 if unbiased else 0) if correction is None else correction

def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    "The variance over `dim` (None: all), divided by n - correction (correction 1 unless `unbiased=False`)."
    return Var.apply(input, *correction_of(dim, unbiased, correction), keepdim)

def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    "The standard deviation: the square root of `var`."
    return Std.apply(input, *correction_of(dim, unbiased, correction), keepdim)

def empty_norm_error(p, dim, shape):
    "PyTorch's error for a norm without an identity (p = inf or p < 0) over an empty dimension."
    p = 'inf' if p == math.inf else '-inf' if p == -math.inf else f'{p:g}'
    if dim is None:
        return RuntimeError(f"linalg.vector_norm cannot compute the {p} norm on an empty tensor because the operation "
                            "does not have an identity")
    d = next(d for d in ((dim,) if isinstance(dim, int) else dim) if shape[d] == 0)
    return RuntimeError(f"linalg.vector_norm cannot compute the {p} norm on the dimension {d} because this dimension is "
                        "empty and the operation does not have an identity")

class Norm(Function):
    "The p-norm over `dim` (None: all elements): p a number, inf or -inf; the 2-norm by default."
    @staticmethod
    def forward(ctx, a, p=2, dim=None, keepdim=False):
        x = a.array
        if x.dtype.kind != 'f':
            raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {x.dtype}")
        ctx.p, ctx.dims = p, dim_indices(dim, x.ndim)
        ctx.kept = kept_shape(x.shape, ctx.dims)
        if (p < 0 or p == math.inf) and builtins.any(x.shape[d] == 0 for d in ctx.dims): raise empty_norm_error(p, dim, x.shape)
        ax = np.abs(x)
        if p == 2: out = np.sqrt(np.sum(x * x, axis=ctx.dims, keepdims=keepdim))
        elif p == math.inf: out = ax.max(axis=ctx.dims, keepdims=keepdim)
        elif p == -math.inf: out = ax.min(axis=ctx.dims, keepdims=keepdim)
        elif p == 0: out = np.sum(x != 0, axis=ctx.dims, keepdims=keepdim).astype(x.dtype)
        else:
            with np.errstate(divide='ignore'): out = np.sum(ax ** p, axis=ctx.dims, keepdims=keepdim) ** (1 / p)
        out = Tensor(np.asarray(out))
        ctx.save_for_backward(a, alias(out))
        return out
    @staticmethod
    def backward(ctx, grad_output):
        x, saved = ctx.saved_tensors
        n, g, p = with_history(ctx, saved).reshape(ctx.kept), grad_output.reshape(ctx.kept), ctx.p
        if p == 0: return None, None, None, None   # piecewise constant: no gradient at all, as in PyTorch
        if p == 2: return g * where(n == 0, 0.0, x / n), None, None, None
        s = Tensor(sgn(x.array))
        if p in (math.inf, -math.inf):   # shared among the ties, or among the nans if there are any
            ties = Tensor((np.abs(x.array) == n.array) | np.isnan(x.array))
            return s * ties * (g / ties.sum(ctx.dims, keepdim=True)), None, None, None
        if p == 1: return s * g, None, None, None
        scaled = s * x.abs() ** (p - 1)
        if p < 1: scaled = where(x == 0, 0.0, scaled)
        return scaled * where(n == 0, 0.0, g / n ** (p - 1)), None, None, None

def norm(input, p='fro', dim=None, keepdim=False):
    "The p-norm of all elements or over `dim` ('fro' and 2: the Euclidean norm)."
    return Norm.apply(input, 2 if p in ('fro', None) else p, dim, keepdim)

class LogSumExp(Function):
    "log(exp(a).sum(dim)), computed after subtracting the maximum."
    @staticmethod
    def forward(ctx, a, dim, keepdim=False):
        x = as_float(a.array)
        ctx.dims = dim_indices(dim, x.ndim)
        ctx.kept = kept_shape(x.shape, ctx.dims)
        m = np.max(x, axis=ctx.dims, keepdims=True) if x.size else np.zeros(ctx.kept, x.dtype)
        m = np.where(np.isfinite(m), m, 0)
        with np.errstate(divide='ignore'): out = np.log(np.exp(x - m).sum(axis=ctx.dims, keepdims=True)) + m   # log 0 = -inf
        out = Tensor(out if keepdim else out.reshape([s for i, s in enumerate(x.shape) if i not in ctx.dims]))
        ctx.save_for_backward(a, alias(out))
        return out
    @staticmethod
    def backward(ctx, grad_output):
        x, saved = ctx.saved_tensors
        out = with_history(ctx, saved).reshape(ctx.kept)
        return grad_output.reshape(ctx.kept) * (x - out).exp(), None, None

def logsumexp(input, dim, keepdim=False):
    "log(exp(x).sum(dim)), numerically stable."
    return LogSumExp.apply(input, dim, keepdim)

class Softmax(Function):
    "exp(a) / exp(a).sum(dim), computed after subtracting the maximum."
    @staticmethod
    def forward(ctx, a, dim):
        x, ctx.dim = as_float(a.array), dim_index(dim, a.array.ndim)
        e = np.exp(x - x.max(axis=ctx.dim, keepdims=True, initial=-np.inf))
        e /= e.sum(axis=ctx.dim, keepdims=True)
        out = Tensor(e)
        ctx.save_for_backward(alias(out))
        return out
    @staticmethod
    def backward(ctx, grad_output):
        s = with_history(ctx, ctx.saved_tensors[0])
        return s * (grad_output - (grad_output * s).sum(dim=ctx.dim, keepdim=True)), None

class LogSoftmax(Function):
    "a - log(exp(a).sum(dim)), computed after subtracting the maximum."
    @staticmethod
    def forward(ctx, a, dim):
        x, ctx.dim = as_float(a.array), dim_index(dim, a.array.ndim)
        shifted = x - x.max(axis=ctx.dim, keepdims=True, initial=-np.inf)
        shifted -= np.log(np.exp(shifted).sum(axis=ctx.dim, keepdims=True))
        out = Tensor(shifted)
        ctx.save_for_backward(alias(out))
        return out
    @staticmethod
    def backward(ctx, grad_output):
        out = with_history(ctx, ctx.saved_tensors[0])
        return grad_output - out.exp() * grad_output.sum(dim=ctx.dim, keepdim=True), None

def sum(input, dim=None, keepdim=False): "The sum of all elements, or over `dim` (an int or a tuple)."; return Sum.apply(input, dim, keepdim)
def mean(input, dim=None, keepdim=False): "The mean of all elements, or over `dim` (an int or a tuple)."; return Mean.apply(input, dim, keepdim)
def softmax(input, dim): "exp(x) / exp(x).sum(dim), numerically stable."; return Softmax.apply(input, dim)
def log_softmax(input, dim): "log(softmax(x, dim)), numerically stable."; return LogSoftmax.apply(input, dim)

# ---- shape and views ----------------------------------------------------------------------------------------
def infer_shape(shape, numel):
    "`shape` with a -1 replaced by the size that makes `numel` elements; checked like PyTorch."
    shape = tuple(shape)
    if -1 in shape:
        i = shape.index(-1)
        rest = shape[:i] + shape[i + 1:]
        if -1 in rest: raise RuntimeError("only one dimension can be inferred")
        known = math.prod(rest)
        if known and numel % known == 0: shape = shape[:i] + (numel // known,) + shape[i + 1:]
    if math.prod(shape) != numel or builtins.min(shape, default=0) < 0:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape

class Reshape(Function):
    "The same elements in a new shape: a view when the memory allows (`view=True`: only as a view)."
    array_backward = True
    @staticmethod
    def forward(ctx, a, shape, view=False):
        ctx.shape = a.array.shape
        shape = infer_shape(shape, a.array.size)
        try: out = np.reshape(a.array, shape, copy=False if view else None)
        except ValueError: raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead.") from None
        return view_of(a, out, lambda t: Reshape.apply(t, shape))
    @staticmethod
    def backward(ctx, grad_output): return grad_output.reshape(ctx.shape), None, None

def reshape(input, *shape):
    "The same elements in a new shape (-1: infer one size); a view if possible, else a copy."
    shape = infer_shape(size_arg(shape), input.array.size)
    return input if shape == input.array.shape else Reshape.apply(input, shape)

def view(input, *shape):
    "The same memory seen with a new shape; an error if the memory layout does not allow it."
    return Reshape.apply(input, size_arg(shape), True)

def flatten(input, start_dim=0, end_dim=-1):
    "Dimensions `start_dim` to `end_dim` merged into one."
    s = input.array.shape
    if not s: return reshape(input, 1)
    i, j = dim_index(start_dim, len(s)), dim_index(end_dim, len(s))
    return reshape(input, s[:i] + (math.prod(s[i:j + 1]),) + s[j + 1:])

def unsqueeze(input, dim):
    "A new dimension of size 1 at `dim`."
    n = input.array.ndim + 1
    if not -n <= dim < n: raise dim_error(dim, n)
    d = dim % n
    return Reshape.apply(input, input.array.shape[:d] + (1,) + input.array.shape[d:])

def squeeze(input, dim=None):
    "The size-1 dimensions (or those of them in `dim`) removed."
    s = input.array.shape
    dims = dim_indices(dim, len(s))
    new = tuple(n for i, n in enumerate(s) if not (i in dims and n == 1))
    return input if new == s else Reshape.apply(input, new)

class Permute(Function):
    "The dimensions reordered: dimension i of the output is dimension dims[i] of the input (a view)."
    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return make_view(Tensor(a.array.transpose(dims)), a, lambda t: Permute.apply(t, dims))
    @staticmethod
    def backward(ctx, grad_output): return Permute.apply(grad_output, tuple(np.argsort(ctx.dims).tolist())), None

def permute(input, *dims):
    "The dimensions reordered (a view)."
    dims, n = size_arg(dims), input.array.ndim
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal to "
                           f"len(dims) = {len(dims)}")
    dims = tuple(dim_index(d, n) for d in dims)
    if len(set(dims)) != n: raise RuntimeError("permute(): duplicate dims are not allowed.")
    return Permute.apply(input, dims)

def transpose(input, dim0, dim1):
    "Dimensions `dim0` and `dim1` swapped (a view)."
    n = input.array.ndim
    if n == 0: return input
    dims = list(range(n))
    d0, d1 = dim_index(dim0, n), dim_index(dim1, n)
    dims[d0], dims[d1] = d1, d0
    return Permute.apply(input, tuple(dims))

def t(input):
    "The transpose of a matrix (a 0-D or 1-D tensor is returned as it is)."
    if input.array.ndim > 2: raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.array.ndim}D")
    return transpose(input, 0, 1) if input.array.ndim == 2 else input

def reversed_dims(input): return Permute.apply(input, tuple(range(input.array.ndim))[::-1])
def matrix_transpose(input): return transpose(input, -2, -1)

def expand(input, *sizes):
    "Size-1 dimensions repeated to `sizes` (-1 keeps a size), without copying."
    sizes, s = size_arg(sizes), input.array.shape
    if len(sizes) < len(s):
        raise RuntimeError(f"expand({list(s)}, size={list(sizes)}): the number of sizes provided "
                           f"({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({len(s)})")
    lead = len(sizes) - len(s)
    shape = tuple(s[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(sizes))
    for i in range(len(s)):
        if s[i] != 1 and s[i] != shape[lead + i]:
            raise RuntimeError(f"The expanded size of the tensor ({shape[lead + i]}) must match the existing size "
                               f"({s[i]}) at non-singleton dimension {lead + i}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(s)}")
    return input if shape == s else Expand.apply(input, shape)

def sum_to_size(input, *size):
    "Sum this tensor down to `size`, the inverse of broadcasting (`expand`) `size` to this tensor's shape."
    size = size_arg(size)
    if not expandable(size, input.array.shape):
        raise RuntimeError(f"size {list(size)} is not expandable to size {list(input.array.shape)}.")
    return sum_to(input, size)

class Clone(Function):
    "A copy of the data in new (row-major) memory."
    @staticmethod
    def forward(ctx, a): return Tensor(np.array(a.array, order='C'))
    @staticmethod
    def backward(ctx, grad_output): return grad_output

def clone(input): "A copy in new memory."; return Clone.apply(input)
def contiguous(input): "Itself if its memory is row-major, else a row-major copy."; return input if input.array.flags.c_contiguous else Clone.apply(input)

def promoted(tensors):
    "The tensors' arrays converted to the dtype PyTorch's promotion gives to all of them together."
    dtype = tensors[0].array.dtype
    for t in tensors[1:]: dtype = result_type(Tensor(np.empty((1,), dtype)), t)
    return [t.array if t.array.dtype == dtype else t.array.astype(dtype) for t in tensors]

class Cat(Function):
    "Tensors joined along an existing dimension `dim`."
    @staticmethod
    def forward(ctx, dim, *tensors):
        arrays = promoted(tensors)
        first = arrays[0].shape
        ctx.dim = d = dim_index(dim, len(first))
        for i, a in enumerate(arrays[1:], 1):
            if a.ndim != len(first):
                raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} and {a.ndim}")
            for k in range(a.ndim):
                if k != d and a.shape[k] != first[k]:
                    raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size {first[k]} "
                                       f"but got size {a.shape[k]} for tensor number {i} in the list.")
        ctx.sizes = [a.shape[d] for a in arrays]
        return Tensor(np.concatenate(arrays, axis=d))
    @staticmethod
    def backward(ctx, grad_output):
        grads, start, pre = [None], 0, (slice(None),) * ctx.dim
        for n, needs in zip(ctx.sizes, ctx.needs_input_grad[1:]):
            grads.append(Index.apply(grad_output, pre + (slice(start, start + n),)) if needs else None)
            start += n
        return tuple(grads)

class Stack(Function):
    "Tensors of equal shape joined along a new dimension `dim`."
    @staticmethod
    def forward(ctx, dim, *tensors):
        arrays = promoted(tensors)
        for i, a in enumerate(arrays[1:], 1):
            if a.shape != arrays[0].shape:
                raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(arrays[0].shape)} at "
                                   f"entry 0 and {list(a.shape)} at entry {i}")
        n = arrays[0].ndim + 1
        if not -n <= dim < n: raise dim_error(dim, n)
        ctx.dim = dim % n
        return Tensor(np.stack(arrays, axis=ctx.dim))
    @staticmethod
    def backward(ctx, grad_output):
        pre = (slice(None),) * ctx.dim
        return (None,) + tuple(Index.apply(grad_output, pre + (i,)) if needs else None
                               for i, needs in enumerate(ctx.needs_input_grad[1:]))

def cat(tensors, dim=0):
    "The tensors joined along dimension `dim`."
    tensors = tuple(tensors)
    if not tensors: raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    return Cat.apply(dim, *tensors)

def stack(tensors, dim=0):
    "The tensors (all of one shape) joined along a new dimension `dim`."
    tensors = tuple(tensors)
    if not tensors: raise RuntimeError("stack expects a non-empty TensorList")
    return Stack.apply(dim, *tensors)

concat = concatenate = cat

# ---- dtypes and devices --------------------------------------------------------------------------------------
def to(input, *args, dtype=None, **kwargs):
    "The tensor with `dtype` (a dtype or another tensor's); device arguments like 'cpu' are accepted and ignored."
    for arg in args:
        if isinstance(arg, Tensor): dtype = arg.array.dtype
        elif not isinstance(arg, str) and arg is not None: dtype = arg
    return input if dtype is None else cast(input, dtype)

def to_dtype(dtype): return lambda input: cast(input, dtype)
def type_as(input, other): return cast(input, other.array.dtype)
def on_cpu(input, *args, **kwargs): return input

# ---- linear algebra ---------------------------------------------------------------------------------------------
def matmul_error(sa, sb):
    "An error for `@` of shapes `sa` and `sb` that cannot be multiplied: PyTorch's words, then ours."
    if len(sa) == 0 or len(sb) == 0:
        return RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {len(sa)}D and {len(sb)}D")
    ka, kb = sa[-1], sb[0] if len(sb) == 1 else sb[-2]
    if ka == kb: return broadcast_error(sa[:-2], sb[:-2])   # the batch dimensions are the problem
    if len(sa) == 1 and len(sb) == 1:
        return RuntimeError(f"inconsistent tensor size, expected tensor [{ka}] and src [{kb}] to have the same number "
                            f"of elements, but got {ka} and {kb} elements respectively: a dot product needs two "
                            "vectors of the same length")
    if len(sa) == 2 and len(sb) == 1:
        return RuntimeError(f"size mismatch, got input ({sa[0]}), mat ({sa[0]}x{ka}), vec ({kb}): the columns of the "
                            f"matrix ({ka}) must equal the length of the vector ({kb})")
    if len(sa) <= 2 and len(sb) == 2:
        rows = f"{sa[0]}x{ka}" if len(sa) == 2 else f"1x{ka}"
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows} and {kb}x{sb[1]}): the columns of "
                            f"the first ({ka}) must equal the rows of the second ({kb})")
    return RuntimeError(f"matmul shapes cannot be multiplied ({list(sa)} and {list(sb)}): the last dimension of the "
                        f"first ({ka}) must equal the {'length' if len(sb) == 1 else 'second-to-last dimension'} of "
                        f"the second ({kb})")

class MatMul(Function):
    "a @ b with torch.matmul's rules for 1-D operands and broadcast batch dimensions."
    @staticmethod
    def forward(ctx, a, b):
        x, y = operands(a, b)
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)
        try: return Tensor(np.asarray(np.matmul(x, y)))
        except ValueError: raise matmul_error(np.shape(x), np.shape(y)) from None
    @staticmethod
    def backward(ctx, grad_output):
        (a, b), (sa, sb) = ctx.saved_tensors, (ctx.input_shape(0), ctx.input_shape(1))
        na, nb = ctx.needs_input_grad
        g = grad_output
        if len(sa) == 1 and len(sb) == 1: return g * b if na else None, g * a if nb else None
        if len(sa) == 1: g = g.unsqueeze(-2)             # a vector is a 1-row matrix on the left ...
        if len(sb) == 1: g = g.unsqueeze(-1)             # ... and a 1-column matrix on the right
        ga = gb = None
        if na:
            b2 = b.unsqueeze(-1) if len(sb) == 1 else b
            ga = sum_to(g @ matrix_transpose(b2), (1,) + sa if len(sa) == 1 else sa).reshape(sa)
        if nb:
            a2 = a.unsqueeze(0) if len(sa) == 1 else a
            gb = sum_to(matrix_transpose(a2) @ g, sb + (1,) if len(sb) == 1 else sb).reshape(sb)
        return ga, gb

def matmul(input, other):
    "Matrix product with torch.matmul's rules."
    return MatMul.apply(input, other)

def einsum_explicit(equation, shapes):
    "`equation` with '...' spelled out in unused letters and the output written out (`->`)."
    eq = equation.replace(' ', '')
    lhs, rhs = eq.split('->') if '->' in eq else (eq, None)
    ins = lhs.split(',')
    if len(ins) != len(shapes):
        raise RuntimeError(f"einsum(): more operands were provided than specified in the equation" if len(shapes) > len(ins)
                           else "einsum(): fewer operands were provided than specified in the equation")
    free = [c for c in string.ascii_letters if c not in eq]
    n_ell = builtins.max([len(s) - len(t.replace('...', '')) for t, s in zip(ins, shapes) if '...' in t], default=0)
    ell = ''.join(free[:n_ell])
    ins = [t.replace('...', ell[n_ell - (len(s) - len(t.replace('...', ''))):]) if '...' in t else t
           for t, s in zip(ins, shapes)]
    if rhs is None:
        letters = ''.join(ins)
        rhs = ell + ''.join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return ins, rhs.replace('...', ell)

class Einsum(Function):
    "Sums of products of the operands, described by an equation such as 'ij,jk->ik'."
    @staticmethod
    def forward(ctx, equation, *operands):
        ins, rhs = einsum_explicit(equation, [t.array.shape for t in operands])
        ctx.ins, ctx.rhs, ctx.shapes = ins, rhs, [t.array.shape for t in operands]
        ctx.save_for_backward(*(t if builtins.any(ctx.needs_input_grad[1:i + 1] + ctx.needs_input_grad[i + 2:])
                                else None for i, t in enumerate(operands)))
        arrays = promoted(operands)
        try: out = np.einsum(f"{','.join(ins)}->{rhs}", *arrays, optimize=len(arrays) > 1)
        except ValueError as e: raise RuntimeError(f"einsum(): {e} (equation '{equation}', operand shapes "
                                                   f"{[list(s) for s in ctx.shapes]})") from None
        out = np.asarray(out)   # one operand: numpy may return a view ('ii->i', 'ij->ji'), and so does torch
        return view_of(operands[0], out, lambda t: Einsum.apply(equation, t)) if len(operands) == 1 else Tensor(out)
    @staticmethod
    def backward(ctx, grad_output):
        operands = ctx.saved_tensors
        return (None,) + tuple(einsum_grad(ctx, grad_output, operands, i) if needs else None
                               for i, needs in enumerate(ctx.needs_input_grad[1:]))

def einsum_grad(ctx, g, operands, i):
    "The gradient for operand `i`: einsum of `g` with the other operands, expanded and put on diagonals."
    own, others = ctx.ins[i], [(t, o) for j, (t, o) in enumerate(zip(ctx.ins, operands)) if j != i]
    sizes = dict(zip(own, ctx.shapes[i]))
    unique = ''.join(dict.fromkeys(own))
    seen = set(ctx.rhs).union(*(set(t) for t, _ in others))
    kept = ''.join(c for c in unique if c in seen)
    r = Einsum.apply(f"{','.join([ctx.rhs] + [t for t, _ in others])}->{kept}", g, *(o for _, o in others))
    for k, c in enumerate(unique):
        if c not in seen: r = r.unsqueeze(k)
    r = expand(r, *(sizes[c] for c in unique))
    if len(unique) == len(own): return r
    spelled, eyes, extra = unique, [], iter(c for c in string.ascii_letters if c not in ''.join(ctx.ins) + ctx.rhs)
    target = ''
    for c in own:   # every repeat of a letter gets a new letter, tied to the first by an identity matrix
        if c in target:
            new = next(extra)
            eyes.append((c + new, Tensor(np.eye(sizes[c], dtype=g.array.dtype))))
            target += new
        else: target += c
    return Einsum.apply(f"{','.join([spelled] + [e for e, _ in eyes])}->{target}", r, *(t for _, t in eyes))

def einsum(equation, *operands):
    "Sums of products of `operands` by Einstein's notation: einsum('ij,jk->ik', a, b) is a @ b."
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    return Einsum.apply(equation, *operands)

# ---- indexing ----------------------------------------------------------------------------------------------------
def numpy_index(idx):
    "An index with tensors replaced by their arrays and lists by arrays, as numpy wants it."
    if isinstance(idx, tuple): return tuple(numpy_index(i) for i in idx)
    if isinstance(idx, Tensor): return idx.array
    if isinstance(idx, list): return np.asarray([i.item() if isinstance(i, Tensor) else i for i in idx])
    return idx

def may_repeat(idx):
    "Whether `idx` holds integer arrays, which may pick the same element more than once."
    return builtins.any(isinstance(i, np.ndarray) and i.dtype.kind in 'iu' for i in (idx if isinstance(idx, tuple) else (idx,)))

class Index(Function):
    "a[idx] for ints, slices, None, Ellipsis, integer and bool tensors."
    @staticmethod
    def forward(ctx, a, idx):
        ctx.shape, ctx.idx = a.array.shape, idx
        out = a.array[idx]
        if not isinstance(out, np.ndarray):   # one element: numpy gives a scalar, `...` gives a 0-d view
            out = a.array[(idx if isinstance(idx, tuple) else (idx,)) + (Ellipsis,)]
        return view_of(a, out, lambda t: Index.apply(t, idx))
    @staticmethod
    def backward(ctx, grad_output): return IndexAdd.apply(grad_output, ctx.idx, ctx.shape), None

class IndexAdd(Function):
    "Zeros of `shape` with `g` added at `idx` (repeated indices accumulate): the backward of indexing."
    @staticmethod
    def forward(ctx, g, idx, shape):
        ctx.idx = idx
        out = np.zeros(shape, dtype=g.array.dtype)
        if may_repeat(idx): np.add.at(out, idx, g.array)
        else: out[idx] = g.array
        return Tensor(out)
    @staticmethod
    def backward(ctx, grad_output): return Index.apply(grad_output, ctx.idx), None, None

def getitem(input, idx): return Index.apply(input, numpy_index(idx))

def iterate(input):
    "The rows of `input`, one after the other (views)."
    if input.array.ndim == 0: raise TypeError("iteration over a 0-d tensor")
    return (Index.apply(input, i) for i in range(len(input.array)))

# ---- in-place -------------------------------------------------------------------------------------------------------
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation.")

def recording(self, other=None):
    "Whether an in-place change of `self` by `other` must be recorded in the graph."
    return grad_mode.enabled and (self._requires_grad or (isinstance(other, Tensor) and other._requires_grad))

class CopySlices(Function):
    "`base` with its region `fn(base)` overwritten by `src`: what an in-place change through a view makes of the base."
    @staticmethod
    def forward(ctx, base, src, fn):
        keep = np.ones_like(base.array, dtype=bool)   # the base's layout, so fn views it the same way
        region = fn(Tensor(keep)).array
        if not np.shares_memory(region, keep): raise RuntimeError(f"{fn} does not take a view")
        region[...] = False
        ctx.fn = fn
        ctx.save_for_backward(Tensor(keep))
        return Tensor(base.array)        # the write itself has already happened, in place
    @staticmethod
    def backward(ctx, grad_output):
        keep, = ctx.saved_tensors
        return grad_output * keep, ctx.fn(grad_output), None

def write_inplace(self, result):
    "Make `self` hold `result`, computed out of place from it: copy, bump the version, take over its history."
    view = self._view
    if grad_mode.enabled:
        if self.grad_fn is None and self._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if view is not None and view.base.grad_fn is None and view.base._requires_grad:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if category(result.array.dtype) > category(self.array.dtype):
        raise RuntimeError(f"result type {result.array.dtype} can't be cast to the desired output type {self.array.dtype}")
    try: np.copyto(self.array, result.array, casting='unsafe')
    except ValueError:   # numpy's "assignment destination is read-only": an expanded tensor
        if self.array.flags.writeable: raise
        raise RuntimeError(OVERLAP) from None
    self.version_counter.bump()
    if result.grad_fn is None: return self
    if view is None: rebase(self, result.grad_fn, result._output_nr)
    else:                                     # the base gets the new history, and the view takes its own from it
        rebase(view.base, CopySlices.apply(view.base, result, view.fn).grad_fn, 0)
        view.refresh(self, force=True)
    return self

def write(self, ufunc, other, alpha=1):
    "`self = ufunc(self, other)` straight into self's memory, unrecorded, with PyTorch's dtype rule; bumps the version."
    x, y = self.array, (other.array if isinstance(other, Tensor) else other)
    if x.dtype.kind != 'f':   # the result must fit self's dtype: no floats into integers, no ints into bools
        rt = float32 if ufunc is np.true_divide and result_type(self, other).kind != 'f' else result_type(self, other)
        if category(rt) > category(x.dtype): raise RuntimeError(f"result type {rt} can't be cast to the desired output type {x.dtype}")
    if not x.flags.writeable: raise RuntimeError(OVERLAP)
    if alpha != 1: y = np.multiply(y, alpha)
    try: ufunc(x, y, out=x, casting='unsafe')
    except ValueError: raise broadcast_error(x.shape, np.shape(y)) from None
    self.version_counter.bump()
    return self

def add_(self, other, alpha=1):
    "self += alpha * other, in place."
    if recording(self, other): return write_inplace(self, self + (other if alpha == 1 else other * alpha))
    return write(self, np.add, other, alpha)

def sub_(self, other, alpha=1):
    "self -= alpha * other, in place."
    check_bool_sub(self, other)
    if recording(self, other): return write_inplace(self, self - (other if alpha == 1 else other * alpha))
    return write(self, np.subtract, other, alpha)

def mul_(self, other):
    "self *= other, in place."
    if not recording(self, other): return write(self, np.multiply, other)
    return write_inplace(self, (clone(self) if isinstance(other, Tensor) and other._requires_grad else self) * other)

def div_(self, other):
    "self /= other, in place."
    if not recording(self, other): return write(self, np.true_divide, other)
    return write_inplace(self, (clone(self) if isinstance(other, Tensor) and other._requires_grad else self) / other)

class Copy(Function):
    "`src` broadcast to the shape and dtype of `a`: what `a.copy_(src)` writes; the gradient goes to `src`, none to `a`."
    @staticmethod
    def forward(ctx, a, src):
        try: return Tensor(np.broadcast_to(src.array, a.array.shape).astype(a.array.dtype))
        except ValueError: raise broadcast_error(a.array.shape, src.array.shape) from None
    @staticmethod
    def backward(ctx, grad_output):
        ga = Tensor(np.zeros(ctx.input_shape(0), grad_output.array.dtype)) if ctx.needs_input_grad[0] else None
        return ga, sum_to(grad_output, ctx.input_shape(1)) if ctx.needs_input_grad[1] else None

class Fill(Function):
    "`value` in the shape of `a`: what `fill_` writes; `a` gets a zero gradient, a tensor `value` the sum."
    @staticmethod
    def forward(ctx, a, value):
        return Tensor(np.full(a.array.shape, value.array if isinstance(value, Tensor) else value, dtype=a.array.dtype))
    @staticmethod
    def backward(ctx, grad_output):
        zeros = Tensor(np.zeros(grad_output.array.shape, grad_output.array.dtype))
        return zeros, grad_output.sum() if ctx.needs_input_grad[1] else None

def copy_(self, src):
    "Copy the values of `src` (broadcast to this shape) into this tensor."
    if not isinstance(src, Tensor): src = Tensor(np.asarray(src))
    if recording(self, src): return write_inplace(self, Copy.apply(self, src))
    if not self.array.flags.writeable: raise RuntimeError(OVERLAP)
    try: np.copyto(self.array, src.array, casting='unsafe')
    except ValueError: raise broadcast_error(self.array.shape, src.array.shape) from None
    self.version_counter.bump()
    return self

def fill_(self, value):
    "Set every element to `value`."
    if recording(self, value): return write_inplace(self, Fill.apply(self, value))
    if not self.array.flags.writeable: raise RuntimeError(OVERLAP)
    self.array.fill(value.item() if isinstance(value, Tensor) else value)
    self.version_counter.bump()
    return self

def zero_(self): "Set every element to 0."; return fill_(self, 0)

class IndexPut(Function):
    "A copy of `a` with `value` written at `idx`: what `a[idx] = value` computes."
    @staticmethod
    def forward(ctx, a, idx, value):
        out = a.array.copy()
        out[idx] = value.array if isinstance(value, Tensor) else value
        ctx.idx, ctx.vshape = idx, shape_of(value)
        if ctx.needs_input_grad[0]:
            keep = np.ones(out.shape, dtype=bool)
            keep[idx] = False
            ctx.save_for_backward(Tensor(keep))
        return Tensor(out)
    @staticmethod
    def backward(ctx, grad_output):
        ga = grad_output * ctx.saved_tensors[0] if ctx.needs_input_grad[0] else None
        gv = sum_to(Index.apply(grad_output, ctx.idx), ctx.vshape) if ctx.needs_input_grad[2] else None
        return ga, None, gv

def setitem(self, idx, value):
    "`self[idx] = value`, in place; recorded in the graph when `self` or `value` requires grad."
    idx = numpy_index(idx)
    if recording(self, value):
        write_inplace(self, IndexPut.apply(self, idx, value))
        return
    if not self.array.flags.writeable: raise RuntimeError(OVERLAP)
    self.array[idx] = value.array if isinstance(value, Tensor) else value
    self.version_counter.bump()

# ---- the Tensor's methods and operators: one table -------------------------------------------------------------
def reflected(f):
    "The operator `f` with its operands swapped: what Python calls for `2 - t` (`t.__rsub__(2)`)."
    return lambda self, other: f(other, self)

METHODS = {
    # pointwise
    'exp': exp, 'log': log, 'sqrt': sqrt, 'abs': abs, '__abs__': abs, 'relu': relu, 'sigmoid': sigmoid, 'tanh': tanh,
    'sign': sign, 'neg': neg, '__neg__': neg, 'clamp': clamp, 'clip': clamp, 'clamp_min': clamp_min,
    'pow': pow, '__pow__': pow, '__rpow__': reflected(pow), 'maximum': maximum, 'minimum': minimum,
    'add': add, '__add__': add, '__radd__': reflected(add), 'sub': sub, '__sub__': sub, '__rsub__': reflected(sub),
    'mul': mul, '__mul__': mul, '__rmul__': reflected(mul), 'div': div, 'divide': div, '__truediv__': div,
    '__rtruediv__': reflected(div),
    'where': lambda self, condition, other: Where.apply(condition, self, other),
    'eq': comparison(np.equal), '__eq__': comparison(np.equal), 'ne': comparison(np.not_equal),
    '__ne__': comparison(np.not_equal), 'lt': comparison(np.less), '__lt__': comparison(np.less),
    'le': comparison(np.less_equal), '__le__': comparison(np.less_equal), 'gt': comparison(np.greater),
    '__gt__': comparison(np.greater), 'ge': comparison(np.greater_equal), '__ge__': comparison(np.greater_equal),
    '__and__': comparison(np.bitwise_and), '__rand__': comparison(np.bitwise_and),
    '__or__': comparison(np.bitwise_or), '__ror__': comparison(np.bitwise_or),
    '__xor__': comparison(np.bitwise_xor), '__rxor__': comparison(np.bitwise_xor),
    '__invert__': logical_not, 'logical_not': logical_not,
    # reductions
    'sum': sum, 'mean': mean, 'max': max, 'min': min, 'argmax': argmax, 'argmin': argmin, 'var': var, 'std': std,
    'norm': norm, 'logsumexp': logsumexp, 'softmax': softmax, 'log_softmax': log_softmax,
    # shape and views
    'reshape': reshape, 'view': view, 'flatten': flatten, 'unsqueeze': unsqueeze, 'squeeze': squeeze,
    'view_as': lambda self, other: reshape(self, other.shape), 'reshape_as': lambda self, other: reshape(self, other.shape),
    'permute': permute, 'transpose': transpose, 't': t, 'T': property(reversed_dims), 'mT': property(matrix_transpose),
    'expand': expand, 'expand_as': lambda self, other: expand(self, other.shape), 'sum_to_size': sum_to_size,
    'clone': clone, 'contiguous': contiguous, 'is_contiguous': lambda self: self.array.flags.c_contiguous,
    # dtypes and devices
    'to': to, 'type_as': type_as, 'float': to_dtype(float32), 'double': to_dtype(float64),
    'half': to_dtype(np.float16), 'long': to_dtype(int64), 'int': to_dtype(np.int32), 'bool': to_dtype(np.bool_),
    'cpu': on_cpu, 'cuda': on_cpu,
    # linear algebra
    'matmul': matmul, '__matmul__': matmul, '__rmatmul__': reflected(matmul),
    # indexing
    '__getitem__': getitem, '__setitem__': setitem, '__iter__': iterate,
    # autograd
    'register_hook': register_hook, 'retain_grad': retain_grad,
    # in place
    'add_': add_, '__iadd__': add_, 'sub_': sub_, '__isub__': sub_, 'mul_': mul_, '__imul__': mul_,
    'div_': div_, '__itruediv__': div_, 'copy_': copy_, 'fill_': fill_, 'zero_': zero_,
}

for _name, _method in METHODS.items(): setattr(Tensor, _name, _method)
