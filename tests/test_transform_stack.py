"""Transforms are levels on one stack (`fromscratch.core.forward_mode`): entered and left by `with` blocks,
dual levels that nest inside `func.jvp`, against `torch.func`."""
import numpy as np
import pytest
import torch

import fromscratch as fs
import fromscratch.func as ff
import fromscratch.autograd.forward_ad as fwAD
from fromscratch.core import forward_mode


def f(x): return (x.sin() * x.exp()).sum()


X = np.array([0.3, -0.7, 1.1])
V, W = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])


def close(ours, theirs): np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def ours_and_torch(*arrays):
    return [fs.tensor(a, dtype=fs.float64) for a in arrays], [torch.tensor(a) for a in arrays]


def test_jvp_inside_jvp_runs_on_nested_dual_levels(monkeypatch):
    (x, v, w), (xt, vt, wt) = ours_and_torch(X, V, W)
    monkeypatch.setattr('fromscratch.func.autodiff.jvp_by_reverse', None)  # jvp must not need it
    ours = ff.jvp(lambda x: ff.jvp(f, (x,), (v,))[1], (x,), (w,))[1]
    close(ours, torch.func.jvp(lambda x: torch.func.jvp(f, (x,), (vt,))[1], (xt,), (wt,))[1])


def test_jacfwd_of_jacfwd_is_the_hessian():
    (x,), (xt,) = ours_and_torch(X)
    close(ff.jacfwd(ff.jacfwd(f))(x), torch.func.hessian(f)(xt))
    third = ff.jacfwd(ff.jacfwd(ff.jacfwd(lambda x: (x ** 3).sum())))(x)
    close(third, torch.func.jacfwd(torch.func.jacfwd(torch.func.jacfwd(lambda x: (x ** 3).sum())))(xt))


def test_an_in_place_change_keeps_the_outer_levels_tangents():
    def g(x):
        y = x * 1
        y.mul_(x)
        return y.sin().sum()
    (x, v, w), (xt, vt, wt) = ours_and_torch(X, V, W)
    ours = ff.jvp(lambda x: ff.jvp(g, (x,), (v,))[1], (x,), (w,))[1]
    close(ours, torch.func.jvp(lambda x: torch.func.jvp(g, (x,), (vt,))[1], (xt,), (wt,))[1])


def test_the_stack_is_empty_after_each_transform_even_when_it_raises():
    (x, v), _ = ours_and_torch(X, V)
    def fails(x): raise ValueError('inside')
    for run in (lambda: ff.vmap(fails)(x), lambda: ff.jvp(fails, (x,), (v,)),
                lambda: ff.vmap(lambda x: ff.jvp(fails, (x,), (x,)))(x)):
        with pytest.raises(ValueError, match='inside'): run()
        assert forward_mode.stack == [] and forward_mode.level is None
    ff.jacfwd(ff.jacfwd(f))(x)
    assert forward_mode.stack == [] and forward_mode.level is None


def test_a_dual_level_sits_below_every_vmap_level():
    seen = []
    def look(x):
        seen.append([l.kind for l in forward_mode.stack])
        return ff.jvp(lambda y: (seen.append([l.kind for l in forward_mode.stack]), y * 2)[1], (x,), (x,))[1]
    ff.vmap(look)(fs.ones(2, 3))
    intercepting = [[k for k in kinds if k != 'func'] for kinds in seen]
    assert intercepting == [['vmap'], ['dual', 'vmap']]
    # each running transform also marks itself with a 'func' level, on top, in the order they began
    assert seen == [['vmap', 'func'], ['dual', 'vmap', 'func', 'func']]


def test_func_levels_keep_the_fresh_leaves_and_hand_them_outwards():
    x = fs.tensor([1.0, 2.0], dtype=fs.float64)
    seen = []
    def inner(y):
        seen.append([len(l.fresh) for l in forward_mode.of('func')])
        return (y ** 3).sum()
    g = ff.grad(lambda y: ff.grad(inner)(y).sum())(x)
    # the outer grad's copy of x is a fresh leaf; the inner one's copy has a history (the outer
    # variable), so it is a node and no fresh leaf
    assert seen == [[1, 0]]
    assert forward_mode.stack == [] and not g.requires_grad
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy())


def test_the_public_dual_level_still_refuses_to_nest_as_torch_does():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match='Nested forward mode AD is not supported'):
            with fwAD.dual_level(): pass
    with torch.autograd.forward_ad.dual_level():
        with pytest.raises(RuntimeError, match='Nested forward mode AD is not supported'):
            with torch.autograd.forward_ad.dual_level(): pass
