"""The autograd core: a numpy-backed `Tensor`, PyTorch's `Function`/`Context` contract, grad mode and version counters, and the engine behind `Tensor.backward()`, with the few operations the engine itself applies to gradients."""

import builtins
import sys
import warnings
import weakref

import numpy as np

# ---- dtypes ------------------------------------------------------------------------------------------
float32, float64, float16 = np.dtype('float32'), np.dtype('float64'), np.dtype('float16')
int64, int32, int16, int8, uint8 = (np.dtype(t) for t in ('int64', 'int32', 'int16', 'int8', 'uint8'))
bool = np.dtype('bool')  # shadows the builtin on purpose, like torch.bool; use builtins.bool inside
long, double, half = int64, float64, float16

def default_dtype(data):
    "The dtype PyTorch gives to Python data: bool, int64 for integers, float32 for anything else."
    kind = np.asarray(data).dtype.kind
    return bool if kind == 'b' else int64 if kind in 'iu' else float32 if kind == 'f' else np.asarray(data).dtype

def category(dtype):
    "PyTorch's promotion categories, in order: 0 bool, 1 integer, 2 floating point (3: anything else)."
    return {'b': 0, 'u': 1, 'i': 1, 'f': 2}.get(dtype.kind, 3)

def dtype_of(x):
    "The dtype of a tensor, or the dtype PyTorch gives a Python number."
    if isinstance(x, Tensor): return x.array.dtype
    if isinstance(x, builtins.bool): return bool
    if isinstance(x, int): return int64
    if isinstance(x, float): return float32
    return np.asarray(x).dtype

def result_type(a, b):
    "The dtype of an operation between `a` and `b` (tensors or Python numbers), by PyTorch's promotion rules."
    da, db = dtype_of(a), dtype_of(b)
    if da == db: return da
    ka, kb = category(da), category(db)
    if ka != kb: return da if ka > kb else db
    wa, wb = isinstance(a, Tensor) and a.array.ndim > 0, isinstance(b, Tensor) and b.array.ndim > 0
    if wa != wb: return da if wa else db   # a scalar or 0-d tensor never widens a tensor of its category
    return np.promote_types(da, db)

# ---- grad mode -----------------------------------------------------------------------------------------
class GradMode:
    "Whether operations are recorded for autograd; `switch(mode)` is a context manager that restores it after."
    __slots__ = ('enabled',)
    def __init__(self): self.enabled = True
    def switch(self, mode): return _Switch(self, mode)

class _Switch:
    __slots__ = ('mode', 'owner', 'previous')
    def __init__(self, owner, mode): self.owner, self.mode = owner, builtins.bool(mode)
    def __enter__(self): self.previous, self.owner.enabled = self.owner.enabled, self.mode
    def __exit__(self, *exc): self.owner.enabled = self.previous

grad_mode = GradMode()

def is_grad_enabled():
    "Whether operations are being recorded for autograd."
    return grad_mode.enabled

class no_grad:
    "Context manager and decorator that turns graph recording off."
    mode = False
    def __new__(cls, func=None):
        self = super().__new__(cls)
        return self(func) if callable(func) else self   # lets `@no_grad` work without parentheses
    def __enter__(self): self._switch = grad_mode.switch(self.mode); self._switch.__enter__()
    def __exit__(self, *exc): self._switch.__exit__()
    def __call__(self, func):
        def wrapper(*args, **kwargs):
            with grad_mode.switch(self.mode): return func(*args, **kwargs)
        wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = func.__name__, func.__doc__, func
        return wrapper

class enable_grad(no_grad):
    "Context manager and decorator that turns graph recording on, even inside `no_grad`."
    mode = True

class set_grad_enabled(no_grad):
    "Set grad mode to `mode` now; as a context manager, restore the previous mode on exit."
    def __new__(cls, mode): return object.__new__(cls)
    def __init__(self, mode):
        self.mode, self._previous = builtins.bool(mode), grad_mode.enabled
        grad_mode.enabled = self.mode
    def __enter__(self): pass
    def __exit__(self, *exc): grad_mode.enabled = self._previous
    def __call__(self, func):
        grad_mode.enabled = self._previous      # used as a decorator: only the decorated calls change the mode
        return super().__call__(func)

# ---- version counters --------------------------------------------------------------------------------
class VersionCounter:
    "How many times a tensor's memory was changed in place; views share their base's counter."
    __slots__ = ('value',)
    def __init__(self): self.value = 0
    def bump(self): self.value += 1

# ---- the Tensor ----------------------------------------------------------------------------------------
_NONLEAF_GRAD = ("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                 "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
                 "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
                 "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead.")

class Tensor:
    "A numpy array with autograd: `requires_grad`, `grad`, `grad_fn` and `backward()`."
    __slots__ = ('array', 'grad_fn', '_requires_grad', '_output_nr', '_grad', '_version_counter', '_hooks',
                 '_retains_grad', '_accumulator', '_view', '__weakref__')
    __array_ufunc__ = None       # numpy defers to our operators: `np.float32(2) * t` calls `t.__rmul__`
    __hash__ = object.__hash__   # hashable by identity, though `==` compares elementwise

    def __init__(self, array, requires_grad=False):
        self.array, self.grad_fn, self._requires_grad, self._output_nr, self._grad = array, None, False, 0, None
        self._version_counter = self._hooks = self._accumulator = self._view = None
        self._retains_grad = False
        if requires_grad: self.requires_grad = True

    # what it holds
    shape = property(lambda self: self.array.shape)
    ndim = property(lambda self: self.array.ndim)
    dtype = property(lambda self: self.array.dtype)
    def size(self, dim=None): return self.array.shape if dim is None else self.array.shape[dim]
    def dim(self): return self.array.ndim
    def numel(self): return self.array.size
    def __len__(self): return len(self.array)

    def item(self):
        "The one value of a one-element tensor, as a Python number."
        if self.array.size != 1: raise RuntimeError(f"a Tensor with {self.array.size} elements cannot be converted to Scalar")
        return self.array.item()
    def tolist(self): return self.array.tolist()
    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())
    def __index__(self): return self.item().__index__()
    def __bool__(self):
        if self.array.size != 1: raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self.array.item())

    def numpy(self):
        "The numpy array behind this tensor (shared memory); refused while it requires grad, as in PyTorch."
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self.array

    @property
    def data(self): return Tensor(self.array)
    @data.setter
    def data(self, value): self.array = value.array if isinstance(value, Tensor) else np.asarray(value)

    # autograd state
    @property
    def version_counter(self):
        "This tensor's `VersionCounter`, made when first needed (views share their base's)."
        if self._version_counter is None: self._version_counter = VersionCounter()
        return self._version_counter
    _version = property(lambda self: self.version_counter.value)
    is_leaf = property(lambda self: self.grad_fn is None)
    retains_grad = property(lambda self: self._retains_grad)

    @property
    def requires_grad(self):
        if self._view is not None: self._view.refresh(self)   # a stale view takes its base's history first
        return self._requires_grad
    @requires_grad.setter
    def requires_grad(self, flag):
        if self.grad_fn is not None and not flag:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        if flag and self.array.dtype.kind not in 'fc':
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients "
                               f"(this one is {self.array.dtype}; convert it with .float() first)")
        self._requires_grad = builtins.bool(flag)

    def requires_grad_(self, requires_grad=True):
        "Set `requires_grad` in place and return the tensor."
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        if self.grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(_NONLEAF_GRAD, UserWarning, stacklevel=2)
        return self._grad
    @grad.setter
    def grad(self, grad):
        if grad is not None:
            if not isinstance(grad, Tensor): raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(grad).__name__}")
            if grad.array.dtype != self.array.dtype:
                raise RuntimeError(f"attempting to assign a gradient with dtype '{grad.array.dtype}' to a tensor with "
                                   f"dtype '{self.array.dtype}'. Please ensure that the gradient and the tensor have "
                                   "the same dtype")
            if tuple(grad.shape) != self.array.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(grad.shape)}' to a tensor of size "
                                   f"'{list(self.array.shape)}'. Please ensure that the gradient and the tensor are the "
                                   "same size")
        self._grad = grad

    def detach(self):
        "A tensor sharing this one's data (and version counter), outside the graph."
        out = Tensor(self.array)
        out._version_counter = self.version_counter
        return out

    def detach_(self):
        "Make this tensor a leaf that requires no grad, in place."
        self.grad_fn, self._requires_grad = None, False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        "Compute the gradient of this tensor with respect to the graph's leaves (or `inputs`), into their `.grad`."
        backward((self,), None if gradient is None else (gradient,), retain_graph, create_graph, inputs)

    def __repr__(self):
        a = self.array
        fixed = a.dtype.kind == 'f' and a.size and np.all(np.isfinite(a)) and not np.all(a == np.round(a))
        body = np.array2string(a, separator=', ', prefix='tensor(', precision=4, floatmode='fixed' if fixed else 'maxprec_equal')
        extra = [] if a.dtype in (float32, int64, bool) else [f'dtype=fromscratch.{a.dtype}']
        if a.size == 0: extra.insert(0, f'size={tuple(a.shape)}')
        if self.grad_fn is not None: extra.append(f'grad_fn={self.grad_fn!r}')
        elif self._requires_grad: extra.append('requires_grad=True')
        return 'tensor(' + ', '.join([body] + extra) + ')'

# ---- creating tensors ----------------------------------------------------------------------------------
def tensor(data, dtype=None, requires_grad=False):
    "A new leaf tensor holding a copy of `data` (a number, nested list, numpy array or Tensor)."
    if isinstance(data, Tensor): data = data.array
    if dtype is None and not isinstance(data, np.ndarray): dtype = default_dtype(data)
    return Tensor(np.array(data, dtype=dtype), requires_grad=requires_grad)

class Generator:
    "The random number generator behind `rand`, `randn`, `randint` and `nn.init` (numpy's PCG64)."
    def __init__(self, seed=0): self.manual_seed(seed)
    def manual_seed(self, seed):
        self.numpy = np.random.default_rng(seed)
        return self

default_generator = Generator(0)

def manual_seed(seed):
    "Seed the generator behind `rand`, `randn`, `randint`, the `nn.init` functions and shuffling `DataLoader`s."
    return default_generator.manual_seed(seed)

def size_arg(size):
    "Sizes given as `f(2, 3)` or `f((2, 3))`, as a tuple."
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)

def _new(array, requires_grad):
    return Tensor(array, requires_grad=requires_grad)

def zeros(*size, dtype=None, requires_grad=False):
    "A tensor of zeros (float32 unless `dtype` says otherwise)."
    return _new(np.zeros(size_arg(size), dtype=dtype or float32), requires_grad)

def ones(*size, dtype=None, requires_grad=False):
    "A tensor of ones (float32 unless `dtype` says otherwise)."
    return _new(np.ones(size_arg(size), dtype=dtype or float32), requires_grad)

def empty(*size, dtype=None, requires_grad=False):
    "An uninitialised tensor: its values are whatever was in memory."
    return _new(np.empty(size_arg(size), dtype=dtype or float32), requires_grad)

def full(size, fill_value, dtype=None, requires_grad=False):
    "A tensor of shape `size` filled with `fill_value`, of `fill_value`'s default dtype."
    return _new(np.full(size_arg((size,)), fill_value, dtype=dtype or default_dtype(fill_value)), requires_grad)

def rand(*size, dtype=None, requires_grad=False):
    "Uniform random numbers in [0, 1)."
    return _new(default_generator.numpy.random(size_arg(size), dtype=np.dtype(dtype or float32)), requires_grad)

def randn(*size, dtype=None, requires_grad=False):
    "Standard normal random numbers."
    return _new(default_generator.numpy.standard_normal(size_arg(size), dtype=np.dtype(dtype or float32)), requires_grad)

def randint(low, high, size, dtype=None, requires_grad=False):
    "Random integers in [low, high)."
    a = default_generator.numpy.integers(low, high, size=size_arg((size,)), dtype=np.int64)
    return _new(a if dtype is None else a.astype(dtype), requires_grad)

def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    "Evenly spaced values in [start, end): int64 for integer arguments, float32 otherwise."
    if end is None: start, end = 0, start
    ints = all(isinstance(v, int) for v in (start, end, step))
    return _new(np.arange(start, end, step, dtype=dtype or (int64 if ints else float32)), requires_grad)

def linspace(start, end, steps, dtype=None, requires_grad=False):
    "`steps` evenly spaced values from `start` to `end`, both included."
    return _new(np.linspace(start, end, steps, dtype=dtype or float32), requires_grad)

def zeros_like(t, dtype=None, requires_grad=False):
    "Zeros with the shape (and dtype) of `t`."
    return zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)

def ones_like(t, dtype=None, requires_grad=False):
    "Ones with the shape (and dtype) of `t`."
    return ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)

def empty_like(t, dtype=None, requires_grad=False):
    "An uninitialised tensor with the shape (and dtype) of `t`."
    return empty(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)

def full_like(t, fill_value, dtype=None, requires_grad=False):
    "`fill_value` everywhere, with the shape (and dtype) of `t`."
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)

def rand_like(t, dtype=None, requires_grad=False):
    "Uniform random numbers with the shape (and dtype) of `t`."
    return rand(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)

def randn_like(t, dtype=None, requires_grad=False):
    "Normal random numbers with the shape (and dtype) of `t`."
    return randn(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)

# ---- Function and Context: the nodes of the graph --------------------------------------------------------
_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
          "have already been freed). Saved intermediate values of the graph are freed when you call "
          ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
          "graph a second time or if you need to access saved tensors after calling backward.")

class Context:
    "A node of the graph: what a `Function`'s `forward` saved for its `backward`, and the edges to its inputs."
    __slots__ = ('function', 'needs_input_grad', 'edges', 'input_meta', 'output_meta', 'to_save', 'saved_versions',
                 'freed', 'non_differentiable', 'pre_hooks', 'post_hooks', 'arrays', '__dict__', '__weakref__')
    def __init__(self, function, needs_input_grad):
        self.function, self.needs_input_grad = function, needs_input_grad
        self.to_save, self.non_differentiable, self.freed, self.pre_hooks, self.post_hooks = (), (), False, None, None
        self.arrays = False   # while a backward runs on arrays: `saved_tensors` gives the arrays

    def save_for_backward(self, *tensors):
        "Keep `tensors` for the backward; they come back as `saved_tensors`."
        self.to_save = tensors   # and the version of each: a counter made later starts at 0, so None counts as 0
        self.saved_versions = tuple([(t._version_counter.value if t._version_counter else 0) if isinstance(t, Tensor)
                                     else None for t in tensors])

    @property
    def saved_tensors(self):
        "The tensors given to `save_for_backward`, checked to be neither freed nor modified in place."
        if self.freed: raise RuntimeError(_FREED)
        for i, (t, v) in enumerate(zip(self.to_save, self.saved_versions)):
            if v is not None and (t._version_counter.value if t._version_counter else 0) != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.array.dtype} tensor of shape {list(t.shape)}], saved by {self.name()} at index "
                    f"{i}, is at version {t._version_counter.value}; expected version {v} instead. Compute the "
                    "in-place change on a copy (`x = x + ...` instead of `x += ...`), or after the backward.")
        if self.arrays: return tuple([t.array if isinstance(t, Tensor) else t for t in self.to_save])
        return self.to_save

    def input_shape(self, i):
        "The shape the `i`-th input (a tensor) had when this node was recorded: the shape its gradient must have."
        return self.input_meta[i][0]

    def mark_non_differentiable(self, *tensors):
        "Declare outputs that get no `grad_fn` (indices, masks)."
        self.non_differentiable = tensors

    def name(self): return f'{self.function.__name__}Backward'
    def __repr__(self): return f'<{self.name()}>'

    @property
    def next_functions(self):
        "`((node, output_index), ...)`, one pair per tensor input: where this node sends each input's gradient."
        return tuple(e for e, m in zip(self.edges, self.input_meta) if m is not None)

    def release(self):
        "Free what was saved for the backward (after a backward without `retain_graph`)."
        self.to_save, self.freed = (), True

class AccumulateGrad:
    "The node at a leaf: it adds incoming gradients into `variable.grad`."
    __slots__ = ('variable', '__weakref__')
    edges = next_functions = input_meta = ()
    output_meta = (None,)   # one output: the leaf
    pre_hooks = post_hooks = None
    def __init__(self, variable): self.variable = variable
    def name(self): return 'AccumulateGrad'
    def __repr__(self): return '<AccumulateGrad>'

class Function:
    "An operation with a `forward` and a `backward`; `apply` runs it and records it in the graph."
    array_backward = False   # True: `backward` also runs on plain numpy arrays (see `Backward`)
    @staticmethod
    def forward(ctx, *args): raise NotImplementedError('a Function must implement forward(ctx, *args)')
    @staticmethod
    def backward(ctx, *grad_outputs): raise NotImplementedError('a Function must implement backward(ctx, *grads)')

    @classmethod
    def apply(cls, *args):
        "Run `forward` on `args`, with recording off; if any input requires grad, record a node for `backward`."
        if not grad_mode.enabled:
            ctx = UNRECORDED.get((cls, len(args))) or unrecorded(cls, len(args))
            return cls.forward(ctx, *args)
        needs = tuple([isinstance(a, Tensor) and a._requires_grad for a in args])
        if True not in needs and stale_views_need_grad(args):    # a stale view took its base's history again
            needs = tuple([isinstance(a, Tensor) and a._requires_grad for a in args])
        if True not in needs:
            grad_mode.enabled = False
            try: return cls.forward(unrecorded(cls, len(args)), *args)
            finally: grad_mode.enabled = True
        ctx = Context(cls, needs)
        grad_mode.enabled = False       # the forward itself is not recorded
        try: outputs = cls.forward(ctx, *args)
        finally: grad_mode.enabled = True
        return connect(ctx, args, outputs)

class Unrecorded:
    "The context a `forward` gets when nothing is recorded: it saves nothing and no input needs a gradient."
    __slots__ = ('function', 'needs_input_grad', '__dict__')
    def __init__(self, function, n): self.function, self.needs_input_grad = function, (False,) * n
    def save_for_backward(self, *tensors): pass
    def mark_non_differentiable(self, *tensors): pass

UNRECORDED = {}

def unrecorded(function, n):
    "The `Unrecorded` context of `function` with `n` inputs, made once and reused (what a forward notes on it is never read)."
    ctx = UNRECORDED.get((function, n))
    if ctx is None: ctx = UNRECORDED[(function, n)] = Unrecorded(function, n)
    return ctx

def stale_views_need_grad(args):
    "Give the stale views among `args` their base's history again; whether one of them requires grad now."
    found = False
    for a in args:
        if isinstance(a, Tensor) and a._view is not None and a._view.refresh(a): found = found or a._requires_grad
    return found

def edge(t):
    "The `(node, output_index)` pair that a gradient for `t` is sent to: its `grad_fn`, or its leaf's `AccumulateGrad`."
    if t._view is not None: t._view.refresh(t)
    if t.grad_fn is not None: return (t.grad_fn, t._output_nr)
    acc = t._accumulator() if t._accumulator is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._accumulator = weakref.ref(acc)
    return (acc, 0)

def connect(ctx, args, outputs):
    "Attach the node `ctx` to `outputs`, and the edges of the `args` that require grad to the node."
    ctx.edges = tuple([edge(a) if n else (None, 0) for a, n in zip(args, ctx.needs_input_grad)])
    ctx.input_meta = tuple([(a.array.shape, a.array.dtype) if isinstance(a, Tensor) else None for a in args])
    single = not isinstance(outputs, tuple)
    outs = [outputs] if single else list(outputs)
    skip = ctx.non_differentiable
    for i, o in enumerate(outs):
        for a in args:
            if o is a: o = outs[i] = o.detach(); break               # an input returned as is: a new tensor
        if o.array.dtype.kind not in 'fc' or (skip and any(o is t for t in skip)): continue
        o.grad_fn, o._requires_grad, o._output_nr = ctx, True, i
    ctx.output_meta = tuple([(o.array.shape, o.array.dtype) for o in outs])
    return outs[0] if single else tuple(outs)

# ---- the ops the engine applies to gradients -------------------------------------------------------------
def expandable(shape, target):
    "Whether `shape` broadcasts to `target`."
    return len(shape) <= len(target) and all(s == t or s == 1 for s, t in zip(shape[::-1], target[::-1]))

def broadcast_axes(shape, target):
    "The axes of `target` that broadcasting `shape` to it created or stretched: the axes a gradient sums over."
    lead = len(target) - len(shape)
    return tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and target[lead + i] != 1)

def sum_array_to(a, shape):
    "The array `a` summed down to `shape`: the axes that broadcasting created or stretched are summed over."
    axes = broadcast_axes(shape, a.shape)
    return a.sum(axis=axes, keepdims=True).reshape(shape) if axes else a.reshape(shape)

class SumToSize(Function):
    "A broadcast tensor summed back down to `shape`; the gradient expands back."
    array_backward = True
    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.array.shape
        return Tensor(sum_array_to(a.array, shape))
    @staticmethod
    def backward(ctx, grad_output): return expand_to(grad_output, ctx.shape), None

class Expand(Function):
    "Size-1 dimensions repeated to `shape` without copying (a read-only view); the gradient sums back."
    array_backward = True
    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.array.shape
        return make_view(Tensor(np.broadcast_to(a.array, shape)), a, lambda t: Expand.apply(t, shape))
    @staticmethod
    def backward(ctx, grad_output): return sum_to(grad_output, ctx.shape), None

def sum_to(g, shape):
    "`g` (a tensor, or an array in a backward on arrays) summed down to `shape`; itself if it has that shape."
    if g.shape == shape: return g
    return SumToSize.apply(g, shape) if isinstance(g, Tensor) else sum_array_to(np.asarray(g), shape)

def expand_to(g, shape):
    "`g` (a tensor or an array) broadcast to `shape` without copying."
    return Expand.apply(g, shape) if isinstance(g, Tensor) else np.broadcast_to(g, shape)

class Add(Function):
    "a + b, broadcasting, with PyTorch's type promotion; the engine adds gradients with it too."
    array_backward = True
    @staticmethod
    def forward(ctx, a, b): return broadcast_op(np.add, a, b)
    @staticmethod
    def backward(ctx, grad_output):
        return (sum_to(grad_output, ctx.input_shape(0)) if ctx.needs_input_grad[0] else None,
                sum_to(grad_output, ctx.input_shape(1)) if ctx.needs_input_grad[1] else None)

class ToDtype(Function):
    "The values converted to a floating-point `dtype`; the gradient is converted back."
    array_backward = True
    @staticmethod
    def forward(ctx, a, dtype):
        ctx.dtype = a.array.dtype
        return Tensor(a.array.astype(dtype))
    @staticmethod
    def backward(ctx, grad_output): return cast(grad_output, ctx.dtype), None

def cast(t, dtype):
    "`t` in `dtype`: recorded when `t` is a float that requires grad (a conversion to ints or bools never is)."
    dtype = np.dtype(dtype)
    if not isinstance(t, Tensor): return t if t.dtype == dtype else t.astype(dtype)   # an array, in a backward on arrays
    if dtype == t.array.dtype: return t
    if dtype.kind not in 'fc': return Tensor(t.array.astype(dtype))
    return ToDtype.apply(t, dtype)

def shape_of(x): return x.array.shape if isinstance(x, Tensor) else np.shape(x)

def operands(a, b):
    "The numpy values of `a` and `b`, cast to the dtype PyTorch's promotion gives their result."
    x = a.array if isinstance(a, Tensor) else a
    y = b.array if isinstance(b, Tensor) else b
    dx, dy = getattr(x, 'dtype', None), getattr(y, 'dtype', None)
    if dx == dy or (dy is None and dx.kind == 'f') or (dx is None and dy.kind == 'f'): return x, y
    rt = result_type(a, b)
    if dx is not None and dx != rt: x = x.astype(rt)
    if dy is not None and dy != rt: y = y.astype(rt)
    return x, y

def broadcast_op(ufunc, a, b):
    "`ufunc` of `a` and `b` (tensors or numbers) broadcast together, after PyTorch's type promotion."
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.array.dtype == b.array.dtype: x, y = a.array, b.array
    else: x, y = operands(a, b)
    try: out = ufunc(x, y)
    except ValueError: raise broadcast_error(np.shape(x), np.shape(y)) from None
    return Tensor(out if type(out) is np.ndarray else np.asarray(out))    # numpy gives a scalar for 0-d inputs

def broadcast_error(sa, sb):
    "PyTorch's message for shapes that do not broadcast, followed by both shapes and the rule."
    n = builtins.max(len(sa), len(sb))
    for i in range(1, n + 1):
        p, q = (sa[-i] if i <= len(sa) else 1), (sb[-i] if i <= len(sb) else 1)
        if p != q and p != 1 and q != 1: break
    return RuntimeError(f"The size of tensor a ({p}) must match the size of tensor b ({q}) at non-singleton "
                        f"dimension {n - i}: shapes {list(sa)} and {list(sb)} cannot be broadcast together "
                        "(line them up from the right: each pair of sizes must be equal, or one of them 1)")

# ---- the engine ----------------------------------------------------------------------------------------
def add_grads(a, b):
    "The sum of two gradients, out of place (either may be referenced elsewhere): arrays, or tensors."
    if a is None: return b
    if not isinstance(a, Tensor): return np.asarray(a + b)    # numpy turns a 0-d sum into a scalar
    if a.grad_fn is None and b.grad_fn is None: return Tensor(a.array + b.array)
    return Add.apply(a, b)

def validate(node, grads, arrays):
    "Check the gradients `node`'s backward returned (their number, shapes, dtypes) as PyTorch does; arrays if `arrays`."
    if not isinstance(grads, tuple): grads = (grads,)
    n = len(node.edges)
    if len(grads) != n:
        if len(grads) < n or any(g is not None for g in grads[n:]):
            raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(grads)})")
        grads = grads[:n]
    out = []
    for i, (g, meta, (child, _)) in enumerate(zip(grads, node.input_meta, node.edges)):
        if g is None or child is None: out.append(None); continue     # no gradient, or none wanted
        if arrays: g = g.array if isinstance(g, Tensor) else np.asarray(g)
        elif not isinstance(g, Tensor): g = Tensor(np.asarray(g))
        shape, dtype = meta
        if g.shape != shape:
            if not expandable(shape, g.shape):
                raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {i} - got "
                                   f"{list(g.shape)} but expected shape compatible with {list(shape)}")
            g = sum_to(g, shape)
        out.append(g if g.dtype == dtype else cast(g, dtype))
    return out

def _held_once():
    probe = object()
    return sys.getrefcount(probe)

HELD_ONCE = _held_once()   # what sys.getrefcount says of an object that one variable holds (2 in CPython 3.11)

class CopyGrad(Function):
    "A differentiable copy of a gradient that becomes a `.grad` (PyTorch's `CopyBackwards`)."
    array_backward = True
    @staticmethod
    def forward(ctx, x): return Tensor(x.array.copy())
    @staticmethod
    def backward(ctx, grad_output): return grad_output

def owned(a, refs):
    "Whether the array `a` may become a `.grad` as it is: held by `refs` references only, its own memory, writable."
    return sys.getrefcount(a) <= refs and a.base is None and a.flags.writeable and a.flags.c_contiguous

def accumulate(t, g):
    "Add gradient `g` (an array, or a tensor with its history) into `t.grad`; the caller holds `g` in one variable."
    if isinstance(g, np.ndarray):
        if t._grad is None: t._grad = Tensor(g if owned(g, HELD_ONCE + 2) else g.copy())   # + our argument, owned's
        elif t._grad.grad_fn is None and t._grad.array.flags.writeable: t._grad.array += g
        else: t._grad = add_grads(t._grad, Tensor(g))
    elif t._grad is None:
        a = g.array   # g is held by the caller's variable and our argument; a by g's slot and our variable
        if sys.getrefcount(g) > HELD_ONCE + 1 or not owned(a, HELD_ONCE + 2):
            g = CopyGrad.apply(g) if g.grad_fn is not None else Tensor(a.copy())   # not ours to keep: a copy
        t._grad = g
    elif g.grad_fn is None and t._grad.grad_fn is None and t._grad.array.flags.writeable:
        t._grad.array += g.array
    else:
        t._grad = add_grads(t._grad, g)

def run_hooks(hooks, grad):
    "Pass `grad` (a tensor) through each tensor hook in turn; a hook may return a replacement of the same shape."
    for hook in list(hooks.values()):
        result = hook(grad)
        if result is None: continue
        if not isinstance(result, Tensor): result = Tensor(np.asarray(result))
        if result.array.shape != grad.array.shape:
            raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of value")
        grad = result
    return grad

def as_tensor_grad(g): return g if isinstance(g, Tensor) else Tensor(g)
def like(g, arrays): return g.array if arrays else g

def node_hooks(node, buf, arrays):
    "Run the tensor hooks registered on the outputs of `node`, then `retain_grad`'s store (hooks see tensors)."
    if node.pre_hooks:
        for k, hooks in node.pre_hooks.items():
            if buf[k] is not None: buf[k] = like(run_hooks(hooks, as_tensor_grad(buf[k])), arrays)
    if node.post_hooks:
        for k, store in node.post_hooks.items():
            if buf[k] is not None: store(as_tensor_grad(buf[k]))

def call_backward(node, buf, arrays):
    "Run `node`'s backward on the gradients `buf` of its outputs (zeros for the missing); check what it returns."
    f = node.function
    grads = [(np.zeros(*m) if arrays else Tensor(np.zeros(*m))) if g is None else g for g, m in zip(buf, node.output_meta)]
    if arrays and not f.array_backward: grads = [Tensor(g) for g in grads]    # this backward wants tensors
    node.arrays = arrays and f.array_backward
    try: return validate(node, f.backward(node, *grads), arrays)
    finally: node.arrays = False

def dependencies(roots):
    "For every node reachable from `roots`, how many edges point at it: the gradients it must wait for."
    deps, stack, seen = {}, list(roots), set(roots)
    while stack:
        for child, _ in stack.pop().edges:
            if child is None: continue
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return deps, seen

class Backward:
    """One backward pass: the nodes it may run (`wanted`), what it captures (`autograd.grad`) or where it accumulates.

    Without `create_graph` nothing it computes is recorded, so the gradients travel as plain numpy arrays: the
    backward formulas that can (`Function.array_backward`) run on arrays, and only what you see (`.grad`, what a
    hook gets, what `autograd.grad` returns) becomes a Tensor. With `create_graph` they are Tensors, recorded."""
    def __init__(self, roots, seeds, retain_graph, capture=None, targets=None):
        self.roots, self.seeds, self.retain_graph = roots, seeds, retain_graph
        self.capture, self.targets, self.captured = capture, targets, {}

    def run(self, create_graph):
        "Propagate the seeds back through the graph; return the captured gradients (Tensors)."
        self.arrays = not create_graph
        if self.arrays: self.seeds = [g.array for g in self.seeds]
        with grad_mode.switch(create_graph): self.propagate()
        return {k: as_tensor_grad(g) for k, g in self.captured.items()}

    def propagate(self):
        "Run every node once all the gradients it waits for have arrived (dependency counting)."
        starts = [edge(t) for t in self.roots]
        deps, seen = dependencies({n for n, _ in starts})
        buffers = {}
        for (node, nr), g in zip(starts, self.seeds):
            buf = buffers.setdefault(node, [None] * len(node.output_meta))
            buf[nr] = add_grads(buf[nr], g)
        self.wanted = wanted_nodes(seen, self.capture, self.targets)
        ready = [n for n in buffers if deps.get(n, 0) == 0]
        while ready:
            node = ready.pop()
            buf = buffers.pop(node, None)
            if buf is not None and (self.wanted is None or node in self.wanted):
                if isinstance(node, AccumulateGrad): self.leaf(node, buf)
                elif self.interior(node, buf, buffers) and not self.retain_graph: node.release()
            for child, _ in node.edges:
                if child is None: continue
                deps[child] -= 1
                if deps[child] == 0: ready.append(child)

    def interior(self, node, buf, buffers):
        "Run the node's hooks, capture and backward, and pass the gradients on; return whether its backward ran."
        capture, wanted, arrays = self.capture, self.wanted, self.arrays
        if capture is None:
            if node.pre_hooks or node.post_hooks: node_hooks(node, buf, arrays)
        elif any(c in wanted for c, _ in node.edges if c is not None):
            self.keep(node, buf)
            node_hooks(node, buf, arrays)
        else:                                       # nothing wanted below: capture what the hooks left, and stop
            node_hooks(node, buf, arrays)
            self.keep(node, buf)
            return False
        for (child, nr), g in zip(node.edges, call_backward(node, buf, arrays)):
            if child is None or g is None: continue
            cbuf = buffers.get(child)
            if cbuf is None: cbuf = buffers[child] = [None] * len(child.output_meta)
            cbuf[nr] = g if cbuf[nr] is None else add_grads(cbuf[nr], g)
        return True

    def keep(self, node, buf):
        "Capture the gradients of `node`'s outputs that `autograd.grad` asked for."
        for k, g in enumerate(buf):
            key = (node, k)
            if key in self.capture and g is not None: self.captured[key] = add_grads(self.captured.get(key), g)

    def leaf(self, node, buf):
        "At a leaf: run its hooks, then capture the gradient or add it into `.grad`."
        t, g = node.variable, buf.pop()
        if t._hooks: g = like(run_hooks(t._hooks, as_tensor_grad(g)), self.arrays)
        if self.capture is not None:
            if (node, 0) in self.capture: self.captured[(node, 0)] = add_grads(self.captured.get((node, 0)), g)
        elif self.targets is None or node in self.targets:
            accumulate(t, g)

def wanted_nodes(nodes, capture, targets):
    "The nodes from which a captured or targeted node can be reached (None: all of them)."
    goal = set(k[0] for k in capture) if capture is not None else targets
    if goal is None: return None
    wanted, done, stack = set(), set(), [(n, False) for n in nodes]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if node in goal or any(c in wanted for c, _ in node.edges if c is not None): wanted.add(node)
            continue
        if node in done: continue
        done.add(node)
        stack.append((node, True))
        stack.extend((c, False) for c, _ in node.edges if c is not None and c not in done)
    return wanted

def seed(t, g, i):
    "The starting gradient for output `t`: `g` checked against `t`, or 1 for a one-element output."
    if g is None:
        if t.array.size != 1: raise RuntimeError("grad can be implicitly created only for scalar outputs")
        return Tensor(np.ones_like(t.array))
    if not isinstance(g, Tensor): g = Tensor(np.asarray(g, dtype=t.array.dtype))
    if g.array.shape != t.array.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of fromscratch.Size({list(g.shape)}) and "
                           f"output[{i}] has a shape of fromscratch.Size({list(t.shape)}).")
    return cast(g, t.array.dtype)   # a gradient has its tensor's dtype, as in PyTorch

def _as_tensors(x): return (x,) if isinstance(x, Tensor) else tuple(x)

def _check_roots(tensors):
    for i, t in enumerate(tensors):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")

def _check_inputs(inputs):
    for t in inputs:
        if not t.requires_grad: raise RuntimeError("One of the differentiated Tensors does not require grad")

def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    "Accumulate into `.grad` of the leaves (or of `inputs`) the gradients of `tensors`, seeded with `grad_tensors`."
    tensors = _as_tensors(tensors)
    if grad_tensors is None: grad_tensors = (None,) * len(tensors)
    elif isinstance(grad_tensors, Tensor): grad_tensors = (grad_tensors,)
    _check_roots(tensors)
    seeds = [seed(t, g, i) for i, (t, g) in enumerate(zip(tensors, grad_tensors))]
    targets = None
    if inputs is not None:
        inputs = _as_tensors(inputs)
        if not inputs: raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        _check_inputs(inputs)
        for t in inputs:
            if t.grad_fn is not None: t.retain_grad()
        targets = {edge(t)[0] for t in inputs}
    Backward(tensors, seeds, create_graph if retain_graph is None else retain_graph, targets=targets).run(create_graph)

def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False):
    "The gradients of `outputs` with respect to each of `inputs`, returned as a tuple."
    outputs, inputs = _as_tensors(outputs), _as_tensors(inputs)
    if grad_outputs is None: grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, Tensor): grad_outputs = (grad_outputs,)
    _check_roots(outputs)
    _check_inputs(inputs)
    seeds = [seed(t, g, i) for i, (t, g) in enumerate(zip(outputs, grad_outputs))]
    keys = [edge(t) for t in inputs]
    retain = create_graph if retain_graph is None else retain_graph
    captured = Backward(outputs, seeds, retain, capture=set(keys)).run(create_graph)
    return unused(tuple(captured.get(k) for k in keys), inputs, allow_unused, materialize_grads)

def unused(result, inputs, allow_unused, materialize_grads):
    "Check for inputs that got no gradient: an error, `None`, or zeros (`materialize_grads=True`)."
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None: allow_unused = materialize_grads
    for i, r in enumerate(result):
        if r is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                               "Set allow_unused=True if this is the desired behavior.")
    if not materialize_grads: return result
    return tuple(Tensor(np.zeros_like(t.array)) if r is None else r for r, t in zip(result, inputs))

# ---- views: tensors that share memory ------------------------------------------------------------------------
class View:
    "What a view remembers: the `base` whose memory it shares, the `fn` that makes it from the base, the version it matches."
    __slots__ = ('base', 'fn', 'version')
    def __init__(self, base, fn, version): self.base, self.fn, self.version = base, fn, version

    def refresh(self, view, force=False):
        "If the base changed in place since `view` was made (or if `force`), give `view` the history `fn(base)` again."
        if not force and self.version == view._version_counter.value: return False
        with grad_mode.switch(True): again = self.fn(self.base)
        self.version = view._version_counter.value
        if again.grad_fn is not None: rebase(view, again.grad_fn, again._output_nr)
        return True

def compose(first, then): return lambda t: then(first(t))

def make_view(out, base, fn):
    "Record that `out` is `fn(base)`: a view sharing `base`'s memory and version counter (a view of a view: of the first base)."
    parent = base._view
    if parent is not None: base, fn = parent.base, compose(parent.fn, fn)
    counter = out._version_counter = base.version_counter
    out._view = View(base, fn, counter.value)
    return out

def view_of(a, array, fn):
    "A tensor on `array`; if that shares `a`'s memory, registered as the view `fn(a)`."
    out = Tensor(array)
    return make_view(out, a, fn) if np.may_share_memory(array, a.array) else out

def rebase(t, node, nr):
    "Give `t` a new history; `retain_grad` follows the tensor, hooks stay with the value they were put on."
    old, old_nr = t.grad_fn, t._output_nr
    t.grad_fn, t._output_nr, t._requires_grad = node, nr, True
    if t._retains_grad:
        if old is not None and old.post_hooks: old.post_hooks.pop(old_nr, None)
        t._retains_grad = False
        t.retain_grad()
