"""Run one expression on fromscratch tensors and on torch tensors made from the same numpy arrays, and compare.

Shared by the test files (tests/ is on sys.path when pytest runs them: `from engines import check_both`).

    check_both(lambda x, w: (x @ w).relu().sum(1), X, W)              # values, dtypes and input gradients
    check_both(lambda x: x.max(dim=0), X, rtol=0)                      # tuples / named tuples of outputs too
    check_second(lambda x: x.exp() * x, X)                             # second derivatives
    check_numeric(lambda x: x.sigmoid(), X)                            # backward vs central differences

Arguments that are numpy arrays become tensors (float arrays: leaves that require grad, unless
`requires_grad=False` or the index is not in `grad_args`); anything else (Python numbers, tuples, strings,
None) is passed unchanged to both engines. `fn` receives the tensors in order and returns a tensor, a number,
or a (named) tuple/list of them.
"""
import importlib

import numpy as np
import torch

import fromscratch  # noqa: F401  (registers the operations on Tensor)

import fromscratch.core as _engine
Tensor = _engine.Tensor

FLOAT64_TOL = dict(rtol=1e-10, atol=1e-12)
FLOAT32_TOL = dict(rtol=1e-4, atol=1e-5)


def tolerances(dtype):
    "The default (rtol, atol) for comparing results computed in `dtype`."
    t = FLOAT32_TOL if np.dtype(dtype) != np.float64 else FLOAT64_TOL
    return t['rtol'], t['atol']


def make_inputs(values, dtype=np.float64, requires_grad=True, grad_args=None):
    "Two lists, fromscratch and torch, built from the same numpy arrays; other values are shared unchanged."
    ours, theirs = [], []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray):
            a = v.astype(dtype) if (v.dtype.kind == 'f' and dtype is not None) else v.copy()
            rg = requires_grad and a.dtype.kind == 'f' and (grad_args is None or i in grad_args)
            ours.append(Tensor(a.copy(), requires_grad=rg))
            theirs.append(torch.tensor(a.copy(), requires_grad=rg))
        else:
            ours.append(v)
            theirs.append(v)
    return ours, theirs


def flatten_outputs(out):
    "The tensors (and numbers) in an output: a tensor, a number, or a (named) tuple or list of them."
    if isinstance(out, (tuple, list)): return [o for x in out for o in flatten_outputs(x)]
    return [out]


def _np(x):
    if isinstance(x, Tensor): return x.array
    if isinstance(x, torch.Tensor): return x.detach().numpy(force=True)   # force: torch's lazy zeros (ZeroTensor)
    return np.asarray(x)


def dtype_name(x):
    "The dtype of a fromscratch or torch tensor as a plain name: 'float32', 'int64', 'bool'."
    if isinstance(x, Tensor): return x.array.dtype.name
    if isinstance(x, torch.Tensor): return str(x.dtype).replace('torch.', '')
    return type(x).__name__


def assert_same_value(ours, theirs, rtol, atol, name='output', check_dtype=True):
    "Same shape, same dtype name (for tensors), values close (nan where torch has nan)."
    a, b = _np(ours), _np(theirs)
    assert a.shape == b.shape, f"{name}: shape {a.shape} vs torch {b.shape}"
    if check_dtype and isinstance(theirs, torch.Tensor):
        assert dtype_name(ours) == dtype_name(theirs), f"{name}: dtype {dtype_name(ours)} vs torch {dtype_name(theirs)}"
    if a.dtype.kind == 'b' or b.dtype.kind == 'b' or a.dtype.kind in 'iu':
        assert np.array_equal(a, b), f"{name}: {a} vs torch {b}"
        return
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ok = np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        i = np.unravel_index(np.argmax(~ok), a.shape) if a.ndim else ()
        raise AssertionError(f"{name}: {int((~ok).sum())} of {a.size} elements differ (rtol={rtol}, atol={atol}); "
                             f"at {tuple(int(j) for j in i)}: {a64[i]!r} vs torch {b64[i]!r}")


def _seeds(outs_ours, outs_theirs, rng):
    "Random output gradients, the same numbers for both engines, for every output that requires grad."
    pairs = []
    for o, t in zip(outs_ours, outs_theirs):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            g = rng.standard_normal(t.shape).astype(t.detach().numpy().dtype)
            pairs.append((o, t, Tensor(g.copy()), torch.tensor(g.copy())))
    return pairs


class Both:
    "What `run_both` found: outputs, inputs and gradients of both engines."
    def __init__(self, **kw): self.__dict__.update(kw)


def run_both(fn, *values, dtype=np.float64, requires_grad=True, grad_args=None, seed=0, backward=True):
    "Run `fn` on both engines from the same arrays; seed a backward with the same random output gradients."
    ours_in, torch_in = make_inputs(values, dtype, requires_grad, grad_args)
    out_ours, out_torch = fn(*ours_in), fn(*torch_in)
    flat_ours, flat_torch = flatten_outputs(out_ours), flatten_outputs(out_torch)
    assert len(flat_ours) == len(flat_torch), f"{len(flat_ours)} outputs vs torch {len(flat_torch)}"
    grads_ours = grads_torch = None
    pairs = _seeds(flat_ours, flat_torch, np.random.default_rng(seed)) if backward else []
    if pairs:
        _engine.backward([p[0] for p in pairs], [p[2] for p in pairs])
        torch.autograd.backward([p[1] for p in pairs], [p[3] for p in pairs])
        grads_ours = [t.grad if isinstance(t, Tensor) and t.requires_grad else None for t in ours_in]
        grads_torch = [t.grad if isinstance(t, torch.Tensor) and t.requires_grad else None for t in torch_in]
    return Both(out_ours=out_ours, out_torch=out_torch, flat_ours=flat_ours, flat_torch=flat_torch,
                inputs_ours=ours_in, inputs_torch=torch_in, grads_ours=grads_ours, grads_torch=grads_torch)


def check_both(fn, *values, dtype=np.float64, rtol=None, atol=None, requires_grad=True, grad_args=None, seed=0,
               grads=True, check_dtype=True):
    "Assert that `fn` gives the same outputs (shape, dtype, values, requires_grad) and input gradients on both engines."
    r = run_both(fn, *values, dtype=dtype, requires_grad=requires_grad, grad_args=grad_args, seed=seed, backward=grads)

    def tol(x):   # the default tolerance follows the dtype of what is compared, unless given
        r0, a0 = tolerances(_np(x).dtype if _np(x).dtype.kind == 'f' else np.float64)
        return (r0 if rtol is None else rtol), (a0 if atol is None else atol)
    for k, (o, t) in enumerate(zip(r.flat_ours, r.flat_torch)):
        assert_same_value(o, t, *tol(t), name=f'output {k}', check_dtype=check_dtype)
        if isinstance(t, torch.Tensor):
            assert isinstance(o, Tensor), f"output {k}: {type(o).__name__} where torch gives a tensor"
            assert o.requires_grad == t.requires_grad, f"output {k}: requires_grad {o.requires_grad} vs torch {t.requires_grad}"
    if r.grads_ours is not None:
        for k, (g, tg) in enumerate(zip(r.grads_ours, r.grads_torch)):
            if tg is None:
                assert g is None or np.all(g.array == 0), f"input {k}: a gradient where torch has none"
                continue
            assert g is not None, f"input {k}: no gradient, torch has one"
            assert_same_value(g, tg, *tol(tg), name=f'gradient of input {k}')
    return r


def check_second(fn, *values, dtype=np.float64, rtol=None, atol=None, seed=0, grad_args=None):
    "Assert that second derivatives (gradients of a random combination of the gradients) agree with torch."
    r0, a0 = tolerances(dtype)
    rtol, atol = (r0 if rtol is None else rtol), (a0 if atol is None else atol)
    ours_in, torch_in = make_inputs(values, dtype, True, grad_args)
    results = []
    for engine, inputs in (('ours', ours_in), ('torch', torch_in)):
        rng_e = np.random.default_rng(seed)
        leaves = [t for t in inputs if getattr(t, 'requires_grad', False)]
        outs = [o for o in flatten_outputs(fn(*inputs)) if getattr(o, 'requires_grad', False)]
        seeds = [rng_e.standard_normal(tuple(o.shape)).astype(_np(o).dtype) for o in outs]
        vs = [rng_e.standard_normal(tuple(t.shape)).astype(_np(t).dtype) for t in leaves]
        if engine == 'ours':
            g1 = _engine.grad(outs, leaves, [Tensor(s) for s in seeds], create_graph=True, allow_unused=True)
            total = None
            for g, v in zip(g1, vs):
                if g is None or not g.requires_grad: continue
                term = (g * Tensor(v)).sum()
                total = term if total is None else total + term
            g2 = _engine.grad(total, leaves, allow_unused=True) if total is not None else [None] * len(leaves)
        else:
            g1 = torch.autograd.grad(outs, leaves, [torch.tensor(s) for s in seeds], create_graph=True, allow_unused=True)
            total = None
            for g, v in zip(g1, vs):
                if g is None or not g.requires_grad: continue
                term = (g * torch.tensor(v)).sum()
                total = term if total is None else total + term
            g2 = torch.autograd.grad(total, leaves, allow_unused=True) if total is not None else [None] * len(leaves)
        results.append((g1, g2))
    (o1, o2), (t1, t2) = results
    for k, (a, b) in enumerate(zip(o1, t1)):
        if b is None: continue
        assert_same_value(a, b, rtol, atol, name=f'first derivative (create_graph=True) of input {k}')
    for k, (a, b) in enumerate(zip(o2, t2)):
        if b is None:
            assert a is None or np.allclose(a.array, 0), f"second derivative of input {k}: torch has none"
            continue
        if a is None:   # no second derivative is a zero one: torch may hand back explicit zeros instead
            assert np.all(_np(b) == 0), f"second derivative of input {k}: none, torch has one"
            continue
        assert_same_value(a, b, rtol, atol, name=f'second derivative of input {k}')


def numeric_gradients(fn, *values, eps=1e-6, seed=0, grad_args=None):
    "(analytic, numeric) gradients of sum(fn(inputs) * v) for random v: backward vs central differences, float64."
    ours_in, _ = make_inputs(values, np.float64, True, grad_args)
    outs = [o for o in flatten_outputs(fn(*ours_in)) if isinstance(o, Tensor) and o.requires_grad]
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(o.shape) for o in outs]
    _engine.backward(outs, [Tensor(v) for v in vs])

    def loss(arrays):
        with _engine.no_grad():
            ins = [Tensor(arrays[i]) if i in arrays else v for i, v in enumerate(ours_in)]
            res = [o for o in flatten_outputs(fn(*ins)) if isinstance(o, Tensor) and o.array.dtype.kind == 'f']
            return sum(float((o.array * v).sum()) for o, v in zip(res, vs))

    analytic, numeric = [], []
    for i, t in enumerate(ours_in):
        if not (isinstance(t, Tensor) and t.requires_grad): continue
        base = t.array.copy()
        num = np.zeros_like(base)
        for j in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[j] += eps
            minus[j] -= eps
            num[j] = (loss({i: plus}) - loss({i: minus})) / (2 * eps)
        analytic.append(np.zeros_like(base) if t.grad is None else t.grad.array)
        numeric.append(num)
    return analytic, numeric


def check_numeric(fn, *values, eps=1e-6, rtol=1e-5, atol=1e-6, seed=0, grad_args=None):
    "Assert that the backward of `fn` matches central differences (float64)."
    analytic, numeric = numeric_gradients(fn, *values, eps=eps, seed=seed, grad_args=grad_args)
    assert analytic, "no input requires grad"
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        ok = np.isclose(a, n, rtol=rtol, atol=atol)
        assert ok.all(), f"input {k}: backward {a[~ok][:5]} vs central differences {n[~ok][:5]}"
