"""`fromscratch.func` against `torch.func` in float64: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap (each op's
batching rule, in_dims/out_dims, nesting, errors), functional_call, and their compositions (per-sample gradients included)."""
import numpy as np
import pytest
import torch

import fromscratch as fs
import fromscratch.func as ff
import fromscratch.nn.functional as F
from fromscratch import nn
from fromscratch.core import forward_mode

RNG = np.random.default_rng(0)


def pair(*shape, positive=False, seed=None):
    a = np.random.default_rng(seed).standard_normal(shape) if seed is not None else RNG.standard_normal(shape)
    if positive: a = np.abs(a) + 0.5
    return fs.tensor(a), torch.tensor(a)


def close(ours, theirs, rtol=1e-9, atol=1e-11):
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs): close(o, t, rtol, atol)
        return
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for k in theirs: close(ours[k], theirs[k], rtol, atol)
        return
    assert not ours.requires_grad, 'a transform at the top hands back plain tensors'
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def lib(x): return fs if isinstance(x, fs.Tensor) else torch
def fn(x): return F if isinstance(x, fs.Tensor) else torch.nn.functional

SCALAR_FNS = {
    'cubic': lambda x: (x ** 3).sum(),
    'sin_x2': lambda x: (x.sin() * x ** 2).sum(),
    'softmax_log': lambda x: (x.softmax(-1) * x).sum(),
    'logsumexp': lambda x: x.logsumexp(-1).sum(),
    'norm_tanh': lambda x: x.tanh().norm() + x.exp().mean(),
    'var_max': lambda x: x.var() + x.max() * 0.5,
}


@pytest.mark.parametrize('shape', [(4,), (2, 3)], ids=str)
@pytest.mark.parametrize('name', SCALAR_FNS)
def test_grad_grad_and_value_hessian(name, shape):
    f = SCALAR_FNS[name]
    x, xt = pair(*shape)
    close(ff.grad(f)(x), torch.func.grad(f)(xt))
    g, v = ff.grad_and_value(f)(x)
    gt, vt = torch.func.grad_and_value(f)(xt)
    close(g, gt); close(v, vt)
    close(ff.hessian(f)(x), torch.func.hessian(f)(xt), rtol=1e-8)


def test_argnums_and_aux():
    f = lambda x, y, z: ((x * y).sin().sum() + (y ** 2 * z).sum(), x.mean())
    (x, xt), (y, yt), (z, zt) = pair(3), pair(3), pair(3)
    for argnums in (0, 1, (0, 2), (2, 1), -1):
        ours, aux = ff.grad(f, argnums, has_aux=True)(x, y, z)
        theirs, auxt = torch.func.grad(f, argnums, has_aux=True)(xt, yt, zt)
        close(ours, theirs); close(aux, auxt)


def test_grad_of_trees_and_unused_inputs():
    f = lambda p: (p['w'] * p['b'][0]).sum() + p['b'][1].exp().sum()
    p = {'w': pair(3, seed=1)[0], 'b': (pair(3, seed=2)[0], pair(2, seed=3)[0])}
    pt = {'w': pair(3, seed=1)[1], 'b': (pair(3, seed=2)[1], pair(2, seed=3)[1])}
    close(ff.grad(f)(p), torch.func.grad(f)(pt))
    x, xt = pair(3)
    close(ff.grad(lambda x, y: (y * 2).sum(), 0)(x, x), torch.func.grad(lambda x, y: (y * 2).sum(), 0)(xt, xt))


def test_grad_of_grad_and_jvp_of_grad():
    x, xt = pair(4)
    v, vt = pair(4)
    f = SCALAR_FNS['sin_x2']
    gg = lambda g: lambda x: g(lambda y: g(f)(y).sin().sum())(x)
    close(gg(ff.grad)(x), gg(torch.func.grad)(xt))
    ours = ff.jvp(ff.grad(f), (x,), (v,))
    theirs = torch.func.jvp(torch.func.grad(f), (xt,), (vt,))
    close(ours, theirs)


def test_vjp():
    f = lambda x, y: (x[:, None] * y).tanh()
    (x, xt), (y, yt) = pair(3), pair(3, 4)
    out, vjp_fn = ff.vjp(f, x, y)
    outt, vjp_fnt = torch.func.vjp(f, xt, yt)
    close(out, outt)
    c, ct = pair(3, 4)
    close(vjp_fn(c), vjp_fnt(ct))
    close(vjp_fn(c), vjp_fnt(ct))       # vjp_fn can be called again
    o, fn_, aux = ff.vjp(lambda x: (x.exp(), x.sum()), x, has_aux=True)
    ot, fnt, auxt = torch.func.vjp(lambda x: (x.exp(), x.sum()), xt, has_aux=True)
    close(aux, auxt); close(fn_(pair(3, seed=5)[0]), fnt(pair(3, seed=5)[1]))


def test_jvp():
    f = lambda x, y: ((x @ y).sigmoid(), x.sum(0))
    (x, xt), (y, yt), (u, ut), (w, wt) = pair(2, 3), pair(3, 4), pair(2, 3), pair(3, 4)
    close(ff.jvp(f, (x, y), (u, w)), torch.func.jvp(f, (xt, yt), (ut, wt)))
    out, t, aux = ff.jvp(lambda x: (x.exp(), x.max()), (x,), (u,), has_aux=True)
    outt, tt, auxt = torch.func.jvp(lambda x: (x.exp(), x.max()), (xt,), (ut,), has_aux=True)
    close((out, t, aux), (outt, tt, auxt))


@pytest.mark.parametrize('n_in,n_out', [(2, 6), (6, 2), (3, 3)])
def test_jacrev_jacfwd_wide_and_tall(n_in, n_out):
    A, At = pair(n_out, n_in)
    f = lambda x: (A if isinstance(x, fs.Tensor) else At) @ x.tanh() + x.sum() ** 2
    x, xt = pair(n_in)
    close(ff.jacrev(f)(x), torch.func.jacrev(f)(xt))
    close(ff.jacfwd(f)(x), torch.func.jacfwd(f)(xt))


def test_jacobians_of_matrices_and_argnums():
    f = lambda x, y: (x @ y).relu() * x.sum()
    (x, xt), (y, yt) = pair(2, 3), pair(3, 2)
    for argnums in (0, 1, (0, 1)):
        close(ff.jacrev(f, argnums)(x, y), torch.func.jacrev(f, argnums)(xt, yt))
        close(ff.jacfwd(f, argnums)(x, y), torch.func.jacfwd(f, argnums)(xt, yt))


# ---- vmap: every batching rule against torch.vmap, several in_dims

VMAP_FNS = {
    'exp': (lambda x: x.exp(), [(3, 4)]), 'relu_abs': (lambda x: x.relu() - x.abs(), [(3, 4)]),
    'sigmoid_tanh': (lambda x: x.sigmoid() * x.tanh(), [(3, 4)]), 'log_sqrt': (lambda x: (x.abs() + 1).log() + (x.abs() + 1).sqrt(), [(3, 4)]),
    'add_bcast': (lambda x, y: x + y, [(3, 4), (4,)]), 'sub_mul': (lambda x, y: (x - y) * y, [(3, 4), (3, 1)]),
    'div_pow': (lambda x, y: x / (y.abs() + 1) ** 2, [(3, 4), (4,)]), 'max_min': (lambda x, y: lib(x).maximum(x, y) + lib(x).minimum(x, y), [(3, 4), (4,)]),
    'where_gt': (lambda x, y: lib(x).where(x > y, x, y * 2), [(3, 4), (3, 4)]), 'clamp': (lambda x: x.clamp(-0.5, 0.5), [(3, 4)]),
    'sum_all': (lambda x: x.sum(), [(3, 4)]), 'sum_dim': (lambda x: x.sum(-1), [(3, 4)]), 'sum_keep': (lambda x: x.sum(0, keepdim=True), [(3, 4)]),
    'mean': (lambda x: x.mean(), [(3, 4)]), 'mean_dims': (lambda x: x.mean((0, 1)), [(3, 4)]), 'var_std': (lambda x: x.var(1) + x.std(), [(3, 4)]),
    'norm': (lambda x: x.norm(dim=0), [(3, 4)]), 'max_all': (lambda x: x.max(), [(3, 4)]), 'max_dim': (lambda x: x.max(1)[0], [(3, 4)]),
    'min_keep': (lambda x: x.min(0, keepdim=True)[0], [(3, 4)]), 'logsumexp': (lambda x: x.logsumexp(1), [(3, 4)]),
    'softmax': (lambda x: x.softmax(0), [(3, 4)]), 'log_softmax': (lambda x: x.log_softmax(-1), [(3, 4)]),
    'prod_cumsum': (lambda x: x.prod(1) + x.cumsum(1)[:, -1], [(3, 4)]), 'reshape': (lambda x: x.reshape(2, -1), [(3, 4)]),
    'view_flatten': (lambda x: x.view(-1) + x.flatten(), [(3, 4)]), 'unsqueeze_squeeze': (lambda x: x.unsqueeze(1).squeeze(1), [(3, 4)]),
    'permute_T': (lambda x: x.permute(1, 0) + x.T, [(4, 4)]), 'transpose': (lambda x: x.transpose(0, 1), [(3, 4)]),
    'expand': (lambda x: x[:1].expand(3, 4) * x, [(3, 4)]), 'index': (lambda x: x[1:, ::2], [(3, 4)]),
    'index_int': (lambda x: x[[0, 2, 2]], [(3, 4)]), 'index_none': (lambda x: x[None, 0], [(3, 4)]),
    'repeat': (lambda x: x.repeat(2, 1), [(3, 4)]), 'cat': (lambda x, y: lib(x).cat([x, y], 1), [(3, 4), (3, 2)]),
    'stack': (lambda x, y: lib(x).stack([x, y], -1), [(3, 4), (3, 4)]),
    'matmul_mv': (lambda x, y: x @ y, [(3, 4), (4,)]), 'matmul_mm': (lambda x, y: x @ y, [(3, 4), (4, 2)]),
    'matmul_vv': (lambda x, y: x @ y, [(4,), (4,)]), 'matmul_vm': (lambda x, y: x @ y, [(4,), (4, 2)]),
    'matmul_batch': (lambda x, y: x @ y, [(2, 3, 4), (4, 5)]), 'einsum': (lambda x, y: lib(x).einsum('ij,jk->ik', x, y), [(3, 4), (4, 2)]),
    'linear': (lambda x, w: fn(x).linear(x, w), [(3, 4), (2, 4)]), 'linear_bias': (lambda x, w, b: fn(x).linear(x, w, b), [(4,), (2, 4), (2,)]),
    'mse': (lambda x, y: fn(x).mse_loss(x, y), [(3, 4), (3, 4)]), 'soft_ce': (lambda x, y: fn(x).cross_entropy(x, y.softmax(-1)), [(3, 4), (3, 4)]),
    'float32': (lambda x: x.float(), [(3, 4)]), 'eq_not': (lambda x: (~(x > 0)) * x, [(3, 4)]),
}


def batched_inputs(shapes, dims, size=5, seed=0):
    rng = np.random.default_rng(seed)
    arrays = []
    for s, d in zip(shapes, dims):
        a = rng.standard_normal(s)
        if d is not None: a = np.stack([rng.standard_normal(s) for _ in range(size)], d)
        arrays.append(a)
    return arrays


@pytest.mark.parametrize('name', VMAP_FNS)
def test_vmap_rule(name):
    f, shapes = VMAP_FNS[name]
    combos = [(0,) * len(shapes), (-1,) + (None,) * (len(shapes) - 1)]
    if len(shapes) > 1: combos.append((None,) + (0,) * (len(shapes) - 1))
    for dims in combos:
        arrays = batched_inputs(shapes, dims)
        ours = ff.vmap(f, in_dims=dims)(*[fs.tensor(a) for a in arrays])
        theirs = torch.func.vmap(f, in_dims=dims)(*[torch.tensor(a) for a in arrays])
        close(ours, theirs, rtol=1e-6 if name == 'float32' else 1e-9, atol=1e-6 if name == 'float32' else 1e-11)


def test_vmap_is_the_loop_over_samples():
    f = lambda x, w: (x @ w).tanh().sum(0)
    X, W = pair(7, 3, 4), pair(4, 2)
    out = ff.vmap(f, in_dims=(0, None))(X[0], W[0])
    loop = fs.stack([f(X[0][i], W[0]) for i in range(7)])
    np.testing.assert_allclose(out.numpy(), loop.numpy(), rtol=1e-12)


def test_vmap_out_dims_trees_and_nesting():
    (x, xt), (y, yt) = pair(5, 3), pair(4, 3)
    f = lambda a, b: {'dot': (a * b).sum(), 'outer': a[:, None] * b}
    inner = lambda m: lambda a: m.vmap(lambda b: f(a, b))(y if m is ff else yt)
    close(ff.vmap(inner(ff))(x), torch.func.vmap(inner(torch.func))(xt))
    close(ff.vmap(lambda a: (a.exp(), a.sum()), out_dims=(1, 0))(x), torch.func.vmap(lambda a: (a.exp(), a.sum()), out_dims=(1, 0))(xt))
    close(ff.vmap(lambda a: fs.ones(2, dtype=fs.float64))(x), torch.ones(5, 2, dtype=torch.float64))   # an output that does not vary


def test_vmap_errors():
    x, y = fs.ones(3, 2), fs.ones(4, 2)
    with pytest.raises(ValueError, match=r"Expected all tensors to have the same size in the mapped dimension, got sizes \[3, 4\]"):
        ff.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        ff.vmap(lambda a, b: a + b, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="so expected in_dim to satisfy -2 <= in_dim < 2"):
        ff.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(RuntimeError, match=r"calling \.item\(\) on a Tensor"):
        ff.vmap(lambda a: a.sum().item())(x)
    with pytest.raises(NotImplementedError, match="there is no batching rule for GELUFunction"): ff.vmap(F.gelu)(x)


def test_vmap_of_grad_jacrev_hessian_vjp_and_jvp():
    X, Xt = pair(5, 4)
    x, xt = pair(4)
    f = SCALAR_FNS['sin_x2']
    g = lambda x: x.sin() * x[0]
    close(ff.vmap(ff.grad(f))(X), torch.func.vmap(torch.func.grad(f))(Xt))
    close(ff.vmap(ff.jacrev(g))(X), torch.func.vmap(torch.func.jacrev(g))(Xt))
    close(ff.vmap(ff.hessian(f))(X), torch.func.vmap(torch.func.hessian(f))(Xt), rtol=1e-8)
    out, vjp_fn = ff.vjp(g, x)
    close(ff.vmap(vjp_fn)(fs.eye(4, dtype=fs.float64))[0], torch.func.jacrev(g)(xt))          # a batch of cotangents
    close(ff.vmap(lambda v: ff.jvp(g, (x,), (v,))[1])(fs.eye(4, dtype=fs.float64)), torch.func.jacfwd(g)(xt).T)
    close(ff.vmap(lambda a: ff.jvp(g, (a,), (a,))[1])(X), torch.func.vmap(lambda a: torch.func.jvp(g, (a,), (a,))[1])(Xt))


def models():
    fs.manual_seed(0)
    ours = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).double()
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    with torch.no_grad():
        for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()): q.copy_(torch.tensor(p.detach().numpy()))
    return ours, theirs


def test_functional_call():
    model, tmodel = models()
    params = {k: v.detach() * 2 for k, v in model.named_parameters()}
    tparams = {k: v.detach() * 2 for k, v in tmodel.named_parameters()}
    x, xt = pair(5, 4)
    close(ff.functional_call(model, params, (x,)), torch.func.functional_call(tmodel, tparams, (xt,)))
    close(ff.functional_call(model, params, x), torch.func.functional_call(tmodel, tparams, xt))
    np.testing.assert_allclose(model(x).detach().numpy(), tmodel(xt).detach().numpy(), rtol=1e-12)   # its own weights are back
    with pytest.raises(RuntimeError, match="Missing key"): ff.functional_call(model, {'0.weight': params['0.weight']}, (x,), strict=True)


def test_per_sample_gradients_like_the_torch_func_tutorial():
    model, tmodel = models()
    X, Xt = pair(8, 4)
    labels = np.random.default_rng(3).integers(0, 3, 8)
    Y, Yt = fs.tensor(np.eye(3)[labels]), torch.tensor(np.eye(3)[labels])
    def loss(m, mod, f):
        def compute(params, x, y):
            return f.cross_entropy(m.func.functional_call(mod, params, (x[None],)), y[None])
        return compute
    params = {k: v.detach() for k, v in model.named_parameters()}
    tparams = {k: v.detach() for k, v in tmodel.named_parameters()}
    ours = ff.vmap(ff.grad(loss(fs, model, F)), in_dims=(None, 0, 0))(params, X, Y)
    theirs = torch.func.vmap(torch.func.grad(loss(torch, tmodel, torch.nn.functional)), in_dims=(None, 0, 0))(tparams, Xt, Yt)
    close(ours, theirs)
    one = ff.grad(loss(fs, model, F))(params, X[3], Y[3])      # the loop's answer for one sample
    close({k: v[3] for k, v in ours.items()}, {k: torch.tensor(v.numpy()) for k, v in one.items()})
    t, tt = fs.tensor(labels), torch.tensor(labels)     # class-index targets, unbatched: the fused cross_entropy's batching rule
    X3, X3t = pair(5, 8, 4)
    for reduction in ('mean', 'sum', 'none'):
        ours = ff.vmap(lambda x: F.cross_entropy(ff.functional_call(model, params, (x,)), t, reduction=reduction))(X3)
        theirs = torch.func.vmap(lambda x: torch.nn.functional.cross_entropy(
            torch.func.functional_call(tmodel, tparams, (x,)), tt, reduction=reduction))(X3t)
        close(ours, theirs)


def test_errors_as_torch_func():
    x = fs.ones(3)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
        ff.grad(lambda x: x * 2)(x)
    with pytest.raises(RuntimeError, match="Got argnums=2, but only 1 positional inputs"): ff.grad(lambda x: x.sum(), 2)(x)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"): ff.jvp(lambda x: x, x, (x,))
    with pytest.raises(RuntimeError, match="output of function f should be a tuple"): ff.grad(lambda x: x.sum(), has_aux=True)(x)


def test_rules_are_found_for_ops_defined_again():
    "Running a notebook's cells again in one process (as the docs build does) defines its ops again, under the same names."
    again = type('Exp', (fs.ops.Pointwise,), {})
    assert ff.rule_of(again) is ff.rule_of(fs.ops.Exp)
    with pytest.raises(NotImplementedError, match="no batching rule for Unknown"): ff.rule_of(type('Unknown', (), {}))


# ---- jacrev and jacfwd as one batched pass (vmap of vjp / jvp), alone and composed -------------------------------

def test_jacobians_run_the_function_once():
    "One batched pass, not a loop: the function runs once per Jacobian, whatever the number of rows or columns."
    calls = []
    def f(x):
        calls.append(1)
        return (x.sin() * x.sum()).exp()
    x, xt = pair(7)
    close(ff.jacfwd(f)(x), torch.func.jacfwd(f)(xt))
    close(ff.jacrev(f)(x), torch.func.jacrev(f)(xt))
    assert len(calls) == 1 + 1 + 2            # ours: one each; torch.func: one each as well


def test_jacrev_runs_one_batched_backward(monkeypatch):
    "One backward pass on the whole batch of seeds, instead of one per output element."
    calls, original = [], ff.reverse_mode.autograd_grad     # the backward passes the transforms run
    def counting(*args, **kwargs):
        calls.append(1); return original(*args, **kwargs)
    monkeypatch.setattr(ff.reverse_mode, 'autograd_grad', counting)
    A, At = pair(5, 3)
    f = lambda x: (A if isinstance(x, fs.Tensor) else At) @ x.exp()
    x, xt = pair(3)
    close(ff.jacrev(f)(x), torch.func.jacrev(f)(xt))
    assert len(calls) == 1                      # five rows, one backward


@pytest.mark.parametrize('in_shape,out_rows', [((5,), 2), ((2, 3), 4), ((1,), 6), ((4, 1, 2), 3)], ids=str)
def test_batched_jacobians_shapes(in_shape, out_rows):
    n = int(np.prod(in_shape))
    (A, At), (x, xt) = pair(out_rows, n), pair(*in_shape)
    f = lambda x: ((A if isinstance(x, fs.Tensor) else At) @ x.reshape(-1).tanh()).reshape(out_rows, 1) * x.sum()
    for name in ('jacrev', 'jacfwd'):
        close(getattr(ff, name)(f)(x), getattr(torch.func, name)(f)(xt))


def test_jacobians_composed():
    A, At = pair(3, 4)
    g = lambda x: ((A if isinstance(x, fs.Tensor) else At) @ x.tanh()).sin()
    s = lambda x: (x.sin() * x.exp()).sum()
    (x, xt), (X, Xt) = pair(4), pair(5, 4)
    close(ff.jacrev(ff.jacrev(g))(x), torch.func.jacrev(torch.func.jacrev(g))(xt))
    close(ff.jacrev(ff.jacfwd(g))(x), torch.func.jacrev(torch.func.jacfwd(g))(xt))
    close(ff.jacfwd(ff.jacrev(g))(x), torch.func.jacfwd(torch.func.jacrev(g))(xt))
    close(ff.vmap(ff.jacrev(g))(X), torch.func.vmap(torch.func.jacrev(g))(Xt))
    close(ff.vmap(ff.jacfwd(g))(X), torch.func.vmap(torch.func.jacfwd(g))(Xt))
    close(ff.vmap(ff.hessian(s))(X), torch.func.vmap(torch.func.hessian(s))(Xt), rtol=1e-8)
    close(ff.vmap(ff.vmap(ff.jacrev(g)))(X.reshape(5, 1, 4)), torch.func.vmap(torch.func.vmap(torch.func.jacrev(g)))(Xt.reshape(5, 1, 4)))
    close(ff.grad(lambda x: ff.jacrev(g)(x).sum())(x), torch.func.grad(lambda x: torch.func.jacrev(g)(x).sum())(xt))
    close(ff.jvp(ff.jacrev(g), (x,), (X[0],))[1], torch.func.jvp(torch.func.jacrev(g), (xt,), (Xt[0],))[1])


def test_vmap_of_jacrev_with_unmapped_weights_and_argnums():
    f = lambda x, w: (x @ w).tanh() * x.sum()
    (X, Xt), (w, wt) = pair(6, 3), pair(3, 2)
    for argnums in (0, 1, (0, 1)):
        close(ff.vmap(ff.jacrev(f, argnums), in_dims=(0, None))(X, w),
              torch.func.vmap(torch.func.jacrev(f, argnums), in_dims=(0, None))(Xt, wt))
        close(ff.vmap(ff.jacfwd(f, argnums), in_dims=(0, None))(X, w),
              torch.func.vmap(torch.func.jacfwd(f, argnums), in_dims=(0, None))(Xt, wt))


# ---- jvp inside jvp (by reverse mode twice), jvp of grad ----------------------------------------------------------

@pytest.mark.parametrize('name', list(SCALAR_FNS))
def test_jvp_of_jvp_and_jvp_of_grad(name):
    f = SCALAR_FNS[name]
    (x, xt), (v, vt), (w, wt) = pair(2, 3), pair(2, 3), pair(2, 3)
    inner = lambda x: ff.jvp(f, (x,), (v,))[1]
    inner_t = lambda x: torch.func.jvp(f, (x,), (vt,))[1]
    close(ff.jvp(inner, (x,), (w,)), torch.func.jvp(inner_t, (xt,), (wt,)), rtol=1e-8)
    close(ff.jvp(ff.grad(f), (x,), (v,)), torch.func.jvp(torch.func.grad(f), (xt,), (vt,)), rtol=1e-8)
    close(ff.grad(lambda x: ff.jvp(f, (x,), (v,))[1])(x), torch.func.grad(lambda x: torch.func.jvp(f, (x,), (vt,))[1])(xt), rtol=1e-8)


def test_nested_jvp_structures_and_aux():
    f = lambda x, y: ((x * y).sin(), (x.exp() * y.sum()))
    (x, xt), (y, yt), (u, ut), (w, wt), (a, at), (b, bt) = (pair(3) for _ in range(6))
    inner = lambda x, y: ff.jvp(f, (x, y), (u, w))[1]
    inner_t = lambda x, y: torch.func.jvp(f, (x, y), (ut, wt))[1]
    close(ff.jvp(inner, (x, y), (a, b)), torch.func.jvp(inner_t, (xt, yt), (at, bt)))
    g = lambda x: (x.tanh().sum(), x.max())
    inner = lambda x: ff.jvp(g, (x,), (u,), has_aux=True)[1]
    inner_t = lambda x: torch.func.jvp(g, (x,), (ut,), has_aux=True)[1]
    close(ff.jvp(inner, (x,), (a,)), torch.func.jvp(inner_t, (xt,), (at,)))


def test_forward_over_forward_jacobians_and_third_order():
    A, At = pair(3, 4)
    g = lambda x: ((A if isinstance(x, fs.Tensor) else At) @ x.tanh()).sin()
    s = lambda x: (x.sin() * x.exp()).sum()
    (x, xt), (X, Xt) = pair(4), pair(2, 4)
    close(ff.jacfwd(ff.jacfwd(g))(x), torch.func.jacfwd(torch.func.jacfwd(g))(xt))
    close(ff.jacfwd(ff.hessian(s))(x), torch.func.jacfwd(torch.func.hessian(s))(xt), rtol=1e-8)
    close(ff.vmap(ff.jacfwd(ff.jacfwd(g)))(X), torch.func.vmap(torch.func.jacfwd(torch.func.jacfwd(g)))(Xt))
    third = lambda jvp, x: jvp(lambda x: jvp(lambda y: jvp(s, (y,), (x,))[1], (x,), (x,))[1], (x,), (x,))
    close(third(ff.jvp, x), third(torch.func.jvp, xt),
          rtol=1e-8)


def test_forward_ad_levels_still_refuse_to_nest():
    from fromscratch.autograd import forward_ad as fwad
    with fwad.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported at the moment"):
            with fwad.dual_level(): pass


# ---- indexing with a batched index tensor ------------------------------------------------------------------------

BATCHED_INDEX = {
    'a[i], both batched': (lambda a, i: a[i], (0, 0), lambda r: (r.standard_normal((4, 6)), r.integers(-6, 6, (4, 2, 3)))),
    'a[i], a shared': (lambda a, i: a[i], (None, 0), lambda r: (r.standard_normal((5, 3)), r.integers(0, 5, (4, 2)))),
    'a[i, i]': (lambda a, i: a[i, i], (None, 0), lambda r: (r.standard_normal((5, 5)), r.integers(0, 5, (3, 4)))),
    'a[i, j], j shared': (lambda a, i, j: a[i, j], (0, 0, None), lambda r: (r.standard_normal((3, 4, 5)), r.integers(0, 4, (3, 2)), r.integers(0, 5, (2,)))),
    'a[i, :, 1:]': (lambda a, i: a[i, :, 1:], (None, 0), lambda r: (r.standard_normal((5, 3, 4)), r.integers(0, 5, (6,)))),
    'a[i, 2]': (lambda a, i: a[i, 2], (0, 0), lambda r: (r.standard_normal((2, 4, 3)), r.integers(0, 4, (2, 3)))),
    'a[0-d i]': (lambda a, i: a[i] * 2, (0, 0), lambda r: (r.standard_normal((3, 5, 2)), r.integers(0, 5, (3,)))),
    'in_dims=1': (lambda a, i: a[i], (1, 1), lambda r: (r.standard_normal((6, 4)), r.integers(0, 6, (2, 4)))),
}

@pytest.mark.parametrize('name', list(BATCHED_INDEX))
def test_vmap_indexing_with_a_batched_index(name):
    f, in_dims, make = BATCHED_INDEX[name]
    arrays = make(np.random.default_rng(3))
    ours = [fs.tensor(a) for a in arrays]
    theirs = [torch.tensor(a) for a in arrays]
    close(ff.vmap(f, in_dims=in_dims)(*ours), torch.func.vmap(f, in_dims=in_dims)(*theirs))


def test_gradients_through_a_batched_index():
    r = np.random.default_rng(4)
    X, I, w = r.standard_normal((4, 6)), r.integers(0, 6, (4, 3)), r.standard_normal(6)
    f = lambda x, i: (x[i] ** 2 * x[i].sin()).sum()
    close(ff.vmap(ff.grad(f))(fs.tensor(X), fs.tensor(I)), torch.func.vmap(torch.func.grad(f))(torch.tensor(X), torch.tensor(I)))
    g = lambda i: ff.jacrev(lambda x: x[i] * x.sum())(fs.tensor(w))
    gt = lambda i: torch.func.jacrev(lambda x: x[i] * x.sum())(torch.tensor(w))
    close(ff.vmap(g)(fs.tensor(I)), torch.func.vmap(gt)(torch.tensor(I)))
    # repeated indices accumulate, per sample
    J = np.array([[1, 1, 1], [0, 2, 0]])
    close(ff.vmap(ff.grad(f))(fs.tensor(X[:2]), fs.tensor(J)), torch.func.vmap(torch.func.grad(f))(torch.tensor(X[:2]), torch.tensor(J)))


def test_batched_index_cases_left_out_say_so():
    with pytest.raises(NotImplementedError, match="indexing with a batched index tensor is supported for integer indices in front"):
        ff.vmap(lambda a, i: a[:, i])(fs.ones(4, 3, 3), fs.tensor([[0], [1], [2], [0]]))
    with pytest.raises(NotImplementedError, match="indexing with a batched index tensor is supported for integer indices in front"):
        ff.vmap(lambda a, m: a[m])(fs.ones(4, 3), fs.ones(4, 3) > 0)


# ---- custom autograd.Functions under vmap -------------------------------------------------------------------------

def custom_cube(lib, kind):
    "x³·k as a custom Function of `lib` (PyTorch 2 form), with a generated vmap rule ('gen'), its own ('own'), or none."
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(x, k): return x ** 3 * k
        @staticmethod
        def setup_context(ctx, inputs, output): ctx.save_for_backward(inputs[0]); ctx.k = inputs[1]
        @staticmethod
        def backward(ctx, g): x, = ctx.saved_tensors; return 3 * x ** 2 * g * ctx.k, None
    if kind == 'gen': Cube.generate_vmap_rule = True
    if kind in ('own', 'both'):
        Cube.vmap = staticmethod(lambda info, in_dims, x, k: (Cube.apply(x.movedim(in_dims[0], 0) if in_dims[0] else x, k) * 1, 0 if in_dims[0] is not None else None))
    if kind == 'both': Cube.generate_vmap_rule = True
    return Cube


@pytest.mark.parametrize('kind', ['gen', 'own'])
def test_custom_function_under_vmap(kind):
    C, Ct = custom_cube(fs, kind), custom_cube(torch, kind)
    (X, Xt), (w, wt) = pair(4, 3), pair(3)
    close(ff.vmap(lambda x: C.apply(x, 2.0).sin())(X), torch.func.vmap(lambda x: Ct.apply(x, 2.0).sin())(Xt))
    close(ff.vmap(lambda x: C.apply(x, 2.0), in_dims=1)(X), torch.func.vmap(lambda x: Ct.apply(x, 2.0), in_dims=1)(Xt))
    close(ff.vmap(ff.grad(lambda x: C.apply(x, 2.0).sum()))(X), torch.func.vmap(torch.func.grad(lambda x: Ct.apply(x, 2.0).sum()))(Xt))
    close(ff.vmap(lambda x, w: C.apply(w, 0.5) * x, in_dims=(0, None))(X, w),
          torch.func.vmap(lambda x, w: Ct.apply(w, 0.5) * x, in_dims=(0, None))(Xt, wt))
    close(ff.vmap(ff.vmap(lambda x: C.apply(x, 1.5)))(X.reshape(2, 2, 3)), torch.func.vmap(torch.func.vmap(lambda x: Ct.apply(x, 1.5)))(Xt.reshape(2, 2, 3)))


def test_custom_function_generated_rule_backward_outside_vmap():
    C, Ct = custom_cube(fs, 'gen'), custom_cube(torch, 'gen')
    a = RNG.standard_normal((4, 3))
    x, xt = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (ff.vmap(lambda x: C.apply(x, 2.0))(x) ** 2).sum().backward()
    (torch.func.vmap(lambda x: Ct.apply(x, 2.0))(xt) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10)


def test_custom_function_under_vmap_errors_as_torch():
    X, Xt = pair(4, 3)
    for kind in ('none', 'both'):
        C, Ct = custom_cube(fs, kind), custom_cube(torch, kind)
        with pytest.raises(RuntimeError) as theirs: torch.func.vmap(lambda x: Ct.apply(x, 2.0))(Xt)
        with pytest.raises(RuntimeError) as ours: ff.vmap(lambda x: C.apply(x, 2.0))(X)
        assert str(ours.value).replace('fromscratch', 'torch') == str(theirs.value), kind
    class Old(fs.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
    class OldT(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 2
    with pytest.raises(RuntimeError) as theirs: torch.func.vmap(OldT.apply)(Xt)
    with pytest.raises(RuntimeError) as ours: ff.vmap(Old.apply)(X)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(NotImplementedError, match="you must either override the vmap staticmethod or set generate_vmap_rule=True"):
        fs.autograd.Function.vmap(None, (0,), X)
    assert Old.apply(X).shape == (4, 3)                     # outside vmap, nothing changes


@pytest.mark.parametrize('transform', ['vmap', 'grad', 'jacrev', 'jacfwd', 'vmap_grad', 'vjp_fn'])
def test_a_weight_the_function_closes_over_keeps_its_history(transform):
    "As torch.func: the result stays differentiable for a tensor the caller made to require grad, even when no input does."
    def run(x, w0):
        L, T = lib(x), (ff if lib(x) is fs else torch.func)
        w = L.tensor(w0, requires_grad=True)
        f = {'vmap': lambda: T.vmap(lambda r: w.exp() * r)(x),
             'grad': lambda: T.grad(lambda r: (w * r * r).sin().sum())(x[0]),
             'jacrev': lambda: T.jacrev(lambda r: (w * r).tanh())(x[0]),
             'jacfwd': lambda: T.jacfwd(lambda r: (w * r).tanh())(x[0]),
             'vmap_grad': lambda: T.vmap(T.grad(lambda r: (w * r).sin().sum()))(x),
             'vjp_fn': lambda: T.vjp(lambda r: (w * r).sin(), x[0])[1](L.ones(3, dtype=x.dtype))[0]}[transform]
        out = f()
        assert out.requires_grad and out.grad_fn is not None
        (out ** 2).sum().backward()
        return out.detach(), w.grad
    x, tx = pair(4, 3)
    w0 = RNG.standard_normal(3)
    (o, g), (to, tg) = run(x, w0), run(tx, w0)
    np.testing.assert_allclose(o.numpy(), to.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-9, atol=1e-11)


def test_results_built_only_from_the_transforms_own_leaves_come_back_plain():
    v = fs.tensor(RNG.standard_normal(3))
    x = fs.tensor(RNG.standard_normal((4, 3)))
    for out in (ff.vmap(ff.grad(lambda r: (v * r).sin().sum()))(x), ff.jacrev(lambda r: (v * r).tanh())(x[0]),
                ff.hessian(lambda r: (v * r).sin().sum())(x[0]), ff.grad(lambda r: (r ** 3).sum())(x[0]),
                ff.vjp(lambda r: (v * r).sin(), x[0])[1](fs.ones(3, dtype=x.dtype))[0]):
        assert not out.requires_grad and out.grad_fn is None
    # the transforms' levels, and the fresh leaves they kept, go once the outermost ends
    assert forward_mode.stack == []
    with pytest.raises(ValueError):
        ff.grad(lambda r: (r.sum() + float('x')))(x[0])
    assert forward_mode.stack == []


@pytest.mark.parametrize('m, n', [(16, 256), (256, 16), (6, 6)])
def test_jacobians_of_a_layer_with_a_constant_weight_match_torch(m, n):
    # jacrev's batched backward hands the input's leaf a batch of gradients (not an array of its own):
    # the engine must not take it for a buffer it may keep
    import torch
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((m, n)) / np.sqrt(n), rng.standard_normal(n)
    ours = lambda t: (fs.tensor(w) @ t).tanh()
    theirs = lambda t: (torch.tensor(w) @ t).tanh()
    for how in ('jacrev', 'jacfwd'):
        got = getattr(fs.func, how)(ours)(fs.tensor(x)).numpy()
        want = getattr(torch.func, how)(theirs)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    got = fs.func.hessian(lambda t: ours(t).sum())(fs.tensor(x)).numpy()
    want = torch.func.hessian(lambda t: theirs(t).sum())(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ---- Jacobians of trees: dicts of parameters, several outputs, argnums tuples, has_aux -------------------------

def _tree_case(lib, name):
    T = torch.func if lib is torch else ff
    rng = np.random.default_rng(5)
    w, b, u = rng.standard_normal(3), rng.standard_normal(()), rng.standard_normal(3)
    p = {'w': lib.tensor(w, dtype=lib.float64), 'b': lib.tensor(b, dtype=lib.float64)}
    x = lib.tensor(u, dtype=lib.float64)
    two = lambda p, x: (p['w'] * x * p['b'], {'s': (p['w'] * x).sum().tanh()})
    aux = lambda p, x: ((p['w'] * x).sin(), [(p['w'] ** 2).sum(), x.sum()])
    nested = lambda q: (q[0]['a'] * q[1][0]).exp().sum() + q[1][1] ** 3
    q = ({'a': x}, (x * 2, p['b']))
    return {
        'jacrev dict': lambda: T.jacrev(two)(p, x),
        'jacfwd dict': lambda: T.jacfwd(two)(p, x),
        'jacrev argnums': lambda: T.jacrev(two, argnums=(0, 1))(p, x),
        'jacfwd argnums': lambda: T.jacfwd(two, argnums=(1, 0))(p, x),
        'jacrev has_aux': lambda: T.jacrev(aux, has_aux=True)(p, x),
        'jacfwd has_aux': lambda: T.jacfwd(aux, argnums=(0, 1), has_aux=True)(p, x),
        'hessian argnums': lambda: T.hessian(lambda a, c: ((a * c).sum() * a.sum()) ** 2, argnums=(0, 1))(x, x * 3),
        'hessian dict': lambda: T.hessian(lambda p: (p['w'] ** 3).sum() * p['b'])(p),
        'jacrev nested': lambda: T.jacrev(nested)(q),
        'jacfwd nested': lambda: T.jacfwd(nested)(q),
    }[name]()


@pytest.mark.parametrize('name', ['jacrev dict', 'jacfwd dict', 'jacrev argnums', 'jacfwd argnums', 'jacrev has_aux',
                                  'jacfwd has_aux', 'hessian argnums', 'hessian dict', 'jacrev nested', 'jacfwd nested'])
def test_jacobians_of_trees_have_torchs_structure_and_values(name):
    ours, theirs = _tree_case(fs, name), _tree_case(torch, name)
    o, build = ff.tree_flatten(ours)
    t, spec = torch.utils._pytree.tree_flatten(theirs)
    assert torch.utils._pytree.tree_flatten(build(list(range(len(o)))))[1] == spec, 'the same tree'
    for a, b in zip(o, t):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
        assert not a.requires_grad


def test_jacfwd_of_a_dict_runs_the_function_once_per_parameter():
    calls = []
    def f(p, x):
        calls.append(1)
        return (p['w'] * x).sin() * p['b']
    p = {'w': fs.tensor([1.0, 2.0], dtype=fs.float64), 'b': fs.tensor(0.5, dtype=fs.float64)}
    ff.jacfwd(f)(p, fs.tensor([0.3, 0.4], dtype=fs.float64))
    assert len(calls) == 2                    # one batched forward pass per leaf of the dict


@pytest.mark.parametrize('which', ['weight', 'bias', 'both', 'input and bias'])
def test_vmap_of_linear_over_its_bias_or_weight(which):
    rng = np.random.default_rng(11)
    x, w, b = rng.standard_normal((5, 3)), rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4))
    def run(lib):
        T, F_ = (torch.func, torch.nn.functional) if lib is torch else (ff, F)
        X, W, B = (lib.tensor(a, dtype=lib.float64) for a in (x, w, b))
        return {'weight': lambda: T.vmap(lambda w: F_.linear(X, w, B[0]))(W),
                'bias': lambda: T.vmap(lambda b: F_.linear(X, W[0], b))(B),
                'both': lambda: T.vmap(lambda w, b: F_.linear(X, w, b))(W, B),
                'input and bias': lambda: T.vmap(lambda x, b: F_.linear(x, W[0], b))(X[:2], B)}[which]()
    close(run(fs), run(torch))


# ---- arguments a transform cannot differentiate by: integer tensors and non-tensors, refused as torch.func does ----

def _error_of(f):
    try: f()
    except Exception as e: return type(e).__name__, str(e).replace('torch.', 'fromscratch.')
    return None


def _bad_argument_cases(lib, bad):
    "Each transform differentiating by `bad`, alone, beside a float tensor, or inside a tuple."
    t, x = lib.func, lib.tensor([1.0, 2.0])
    f = lambda a: (a * 2.0).sum()
    return {
        'grad': lambda: t.grad(f)(bad),
        'grad_and_value': lambda: t.grad_and_value(f)(bad),
        'grad argnums=1': lambda: t.grad(lambda a, b: (a * b).sum(), argnums=1)(x, bad),
        'grad argnums=(0, 1)': lambda: t.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, bad),
        'grad of a tuple': lambda: t.grad(lambda p: (p[0] * p[1]).sum())((x, bad)),
        'vjp': lambda: t.vjp(lambda a: a * 2.0, bad),
        'vjp of two': lambda: t.vjp(lambda a, b: a * b, x, bad),
        'jacrev': lambda: t.jacrev(lambda a: a * 2.0)(bad),
        'vmap of grad': lambda: t.vmap(t.grad(f))(bad if not isinstance(bad, lib.Tensor) else bad[None]),
    }


@pytest.mark.parametrize('kind', ['int64', 'bool', 'python float', 'python int'])
def test_reverse_mode_transforms_refuse_what_they_cannot_differentiate(kind):
    make = {'int64': lambda lib: lib.tensor([1, 2]), 'bool': lambda lib: lib.tensor([True, False]),
            'python float': lambda lib: 3.0, 'python int': lambda lib: 3}[kind]
    ours, theirs = _bad_argument_cases(fs, make(fs)), _bad_argument_cases(torch, make(torch))
    for name in ours:
        if kind.startswith('python') and name == 'vmap of grad': continue   # vmap refuses first, in its own words
        assert _error_of(ours[name]) == _error_of(theirs[name]) is not None, name


def test_a_non_differentiated_integer_argument_is_fine():
    i, x = fs.tensor([1, 2]), fs.tensor([1.0, 2.0])
    ti, tx = torch.tensor([1, 2]), torch.tensor([1.0, 2.0])
    close(ff.grad(lambda a, b: (a * b).sum())(x, i), torch.func.grad(lambda a, b: (a * b).sum())(tx, ti))
    close(ff.jvp(lambda a: a * i, (x,), (x,))[1], torch.func.jvp(lambda a: a * ti, (tx,), (tx,))[1])


@pytest.mark.parametrize('case', ['jvp int primal', 'jvp int tangent', 'jvp float primal', 'jvp float tangent',
                                  'jacfwd int', 'jacfwd int argnums', 'hessian int'])
def test_forward_mode_transforms_refuse_what_they_cannot_differentiate(case):
    def run(lib):
        t, x, i = lib.func, lib.tensor([1.0, 2.0]), lib.tensor([1, 2])
        f = lambda a: a * 2.0
        return {
            'jvp int primal': lambda: t.jvp(f, (i,), (x,)),
            'jvp int tangent': lambda: t.jvp(f, (x,), (i,)),
            'jvp float primal': lambda: t.jvp(f, (3.0,), (x,)),
            'jvp float tangent': lambda: t.jvp(f, (x,), (1.0,)),
            'jacfwd int': lambda: t.jacfwd(f)(i),
            'jacfwd int argnums': lambda: t.jacfwd(lambda a, b: a * b, argnums=(0, 1))(x, i),
            'hessian int': lambda: t.hessian(lambda a: (a * 2.0).sum())(i),
        }[case]
    assert _error_of(run(fs)) == _error_of(run(torch)) is not None


@pytest.mark.parametrize('allow_unused', [False, True])
def test_autograd_grad_refuses_an_integer_input_as_torch(allow_unused):
    def run(lib):
        x, i = lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([1, 2])
        return lambda: lib.autograd.grad((x * i).sum(), [x, i], allow_unused=allow_unused)
    assert _error_of(run(fs)) == _error_of(run(torch)) == (
        'RuntimeError', 'One of the differentiated Tensors does not require grad')
