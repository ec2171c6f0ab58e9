"""Forward mode (`fromscratch.autograd.forward_ad`) against `torch.autograd.forward_ad`: every op's `jvp` rule in float64,
several shapes and broadcasting; levels, errors, and forward mode composed with reverse mode."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch.autograd.forward_ad import dual_level, make_dual, unpack_dual


def run(lib, fwd, fn, xs, vs, tangent_mask):
    "fn(lib, *inputs) with the inputs made dual where `tangent_mask` says; the primal and tangent of the result."
    T = (lambda a: fs.tensor(a)) if lib is fs else (lambda a: torch.tensor(a))
    with fwd.dual_level():
        ins = [fwd.make_dual(T(x), T(v)) if m else T(x) for x, v, m in zip(xs, vs, tangent_mask)]
        out = fn(lib, *ins)
        p, t = fwd.unpack_dual(out)
        return p.detach().numpy().copy(), (None if t is None else t.detach().numpy().copy())


def check(fn, *shapes, seed=0, mask=None, positive=False, rtol=1e-9, atol=1e-11):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s) for s in shapes]
    if positive: xs = [np.abs(x) + 0.5 for x in xs]
    vs = [rng.standard_normal(s) for s in shapes]
    mask = mask or [True] * len(shapes)
    p1, t1 = run(fs, fs.autograd.forward_ad, fn, xs, vs, mask)
    p2, t2 = run(torch, fwAD, fn, xs, vs, mask)
    np.testing.assert_allclose(p1, p2, rtol=rtol, atol=atol)
    assert (t1 is None) == (t2 is None)
    if t1 is not None:
        assert t1.shape == t2.shape
        np.testing.assert_allclose(t1, t2, rtol=rtol, atol=atol)


UNARY = {
    'neg': lambda m, a: -a, 'exp': lambda m, a: a.exp(), 'tanh': lambda m, a: a.tanh(), 'sigmoid': lambda m, a: a.sigmoid(),
    'relu': lambda m, a: a.relu(), 'abs': lambda m, a: a.abs(), 'sin': lambda m, a: a.sin(), 'cos': lambda m, a: a.cos(),
    'square': lambda m, a: a.square(), 'pow3': lambda m, a: a ** 3, 'rpow': lambda m, a: 2.0 ** a, 'sign': lambda m, a: a.sign(),
    'clamp': lambda m, a: a.clamp(-0.5, 0.5), 'clamp_min': lambda m, a: a.clamp_min(0.1), 'clamp_max': lambda m, a: a.clamp_max(0.1),
    'expm1': lambda m, a: a.expm1(), 'sum': lambda m, a: a.sum(), 'mean': lambda m, a: a.mean(),
    'sum_dim': lambda m, a: a.sum(-1), 'sum_keep': lambda m, a: a.sum(0, keepdim=True), 'mean_dim': lambda m, a: a.mean(-1),
    'max': lambda m, a: a.max(), 'min': lambda m, a: a.min(), 'max_dim': lambda m, a: a.max(-1)[0],
    'min_dim_keep': lambda m, a: a.min(0, keepdim=True)[0], 'var': lambda m, a: a.var(), 'std_dim': lambda m, a: a.std(-1),
    'var_keep': lambda m, a: a.var(0, keepdim=True, unbiased=False), 'norm': lambda m, a: a.norm(),
    'norm1_dim': lambda m, a: a.norm(1, -1), 'logsumexp': lambda m, a: a.logsumexp(-1), 'softmax': lambda m, a: a.softmax(-1),
    'log_softmax': lambda m, a: a.log_softmax(0), 'prod': lambda m, a: a.prod(), 'prod_dim': lambda m, a: a.prod(-1),
    'cumsum': lambda m, a: a.cumsum(-1), 'reshape': lambda m, a: a.reshape(-1), 'view': lambda m, a: a.view(-1, 1),
    'flatten': lambda m, a: a.flatten(), 'unsqueeze': lambda m, a: a.unsqueeze(1), 'squeeze': lambda m, a: a.unsqueeze(0).squeeze(0),
    'T': lambda m, a: a.T if a.ndim == 2 else a.t(), 'transpose': lambda m, a: a.transpose(0, -1), 'expand': lambda m, a: a.expand(2, *a.shape),
    'index': lambda m, a: a[1:], 'index_int': lambda m, a: a[m.tensor([0, 0, 1])], 'index_bool': lambda m, a: a[a > 0],
    'clone': lambda m, a: a.clone(), 'repeat': lambda m, a: a.repeat(2, 1) if a.ndim == 2 else a.repeat(2),
    'einsum_trace': lambda m, a: m.einsum('ij->j', a) if a.ndim == 2 else m.einsum('i->', a),
    'square_then_exp_sum': lambda m, a: (a * a).exp().sum(), 'to_float32': lambda m, a: a.float(),
}
POSITIVE = {'log': lambda m, a: a.log(), 'sqrt': lambda m, a: a.sqrt(), 'rsqrt': lambda m, a: a.rsqrt(),
            'log1p': lambda m, a: a.log1p(), 'pow_half': lambda m, a: a ** 0.5, 'div_by': lambda m, a: 1 / a}


@pytest.mark.parametrize('shape', [(4,), (3, 5)], ids=str)
@pytest.mark.parametrize('name', UNARY)
def test_unary(name, shape):
    rtol = 1e-6 if name == 'to_float32' else 1e-9
    check(UNARY[name], shape, rtol=rtol, atol=1e-6 if name == 'to_float32' else 1e-11)


@pytest.mark.parametrize('name', POSITIVE)
def test_positive(name): check(POSITIVE[name], (3, 4), positive=True)


BINARY = {
    'add': lambda m, a, b: a + b, 'sub': lambda m, a, b: a - b, 'mul': lambda m, a, b: a * b, 'div': lambda m, a, b: a / b,
    'maximum': lambda m, a, b: m.maximum(a, b), 'minimum': lambda m, a, b: m.minimum(a, b),
    'where': lambda m, a, b: m.where(a > b, a, b), 'add_alpha': lambda m, a, b: a.add(b, alpha=2),
    'clamp_tensors': lambda m, a, b: m.clamp(a, min=b, max=b + 1),
}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3))]


@pytest.mark.parametrize('shapes', SHAPES, ids=str)
@pytest.mark.parametrize('mask', [[True, True], [True, False], [False, True]], ids=str)
@pytest.mark.parametrize('name', BINARY)
def test_binary(name, shapes, mask): check(BINARY[name], *shapes, mask=mask)


@pytest.mark.parametrize('mask', [[True, True], [True, False], [False, True]], ids=str)
def test_pow_tensor_exponent(mask): check(lambda m, a, b: a ** b, (3, 4), (4,), mask=mask, positive=True)


@pytest.mark.parametrize('shapes', [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 2)), ((2, 3, 4), (4,)), ((2, 3, 4), (1, 4, 2))], ids=str)
@pytest.mark.parametrize('mask', [[True, True], [True, False], [False, True]], ids=str)
def test_matmul(shapes, mask): check(lambda m, a, b: a @ b, *shapes, mask=mask)


@pytest.mark.parametrize('mask', [[True, True], [False, True]], ids=str)
def test_einsum(mask): check(lambda m, a, b: m.einsum('ij,jk->ik', a, b), (2, 3), (3, 4), mask=mask)


@pytest.mark.parametrize('dim', [0, 1, -1])
@pytest.mark.parametrize('mask', [[True, True], [True, False], [False, True]], ids=str)
def test_cat_stack(dim, mask):
    check(lambda m, a, b: m.cat([a, b], dim), (2, 3), (2, 3), mask=mask)
    check(lambda m, a, b: m.stack([a, b], dim), (2, 3), (2, 3), mask=mask)


@pytest.mark.parametrize('mask', [[True, True, True], [True, False, False], [False, True, False], [False, False, True]], ids=str)
def test_linear(mask): check(lambda m, x, w, b: (F if m is fs else torch.nn.functional).linear(x, w, b), (5, 3), (4, 3), (4,), mask=mask)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_cross_entropy(reduction):
    target = [1, 0, 3, 2, 1]
    fn = lambda m, x: (F if m is fs else torch.nn.functional).cross_entropy(x, m.tensor(target), reduction=reduction)
    check(fn, (5, 4))
    nll = lambda m, x: (F if m is fs else torch.nn.functional).nll_loss(x.log_softmax(1), m.tensor(target), reduction=reduction)
    check(nll, (5, 4))


@pytest.mark.parametrize('mask', [[True, True], [True, False]], ids=str)
def test_mse_loss(mask): check(lambda m, a, b: (F if m is fs else torch.nn.functional).mse_loss(a, b), (4, 3), (4, 3), mask=mask)


def test_a_small_mlp():
    def mlp(m, x, w1, b1, w2):
        f = F if m is fs else torch.nn.functional
        return f.cross_entropy(f.linear(f.linear(x, w1, b1).relu(), w2), m.tensor([0, 2, 1]))
    check(mlp, (3, 4), (5, 4), (5,), (3, 5))
    check(mlp, (3, 4), (5, 4), (5,), (3, 5), mask=[False, True, False, False])


def test_only_tangent_inputs_are_dual():
    check(lambda m, a, b: (a * b).sum() + b.exp().sum(), (3,), (3,), mask=[False, True])
    check(lambda m, a: a.detach() * 2, (3,))       # detach drops the tangent: None in both


def test_errors_as_torch():
    with pytest.raises(RuntimeError, match="no level exists"): make_dual(fs.ones(3), fs.ones(3))
    with dual_level():
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[3\] while the given forward gradient is of size \[4\]"):
            make_dual(fs.ones(3), fs.ones(4))
        with pytest.raises(ValueError, match="Expected primal to be floating point"): make_dual(fs.arange(3), fs.ones(3))
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            with dual_level(): pass
        with pytest.raises(NotImplementedError, match="Trying to use forward AD with aten::floor_divide that does not support it."):
            fs.floor_divide(make_dual(fs.ones(2), fs.ones(2)), 2)


def test_levels_drop_tangents_and_unpack_outside():
    x = fs.ones(2, dtype=fs.float64)
    p, t = unpack_dual(x)
    assert p is x and t is None
    with dual_level() as level:
        assert level == 0
        y = make_dual(x, fs.ones(2, dtype=fs.float64)) * 3
        assert np.array_equal(unpack_dual(y).tangent.numpy(), [3.0, 3.0])
        assert unpack_dual(unpack_dual(y).primal).tangent is None
    assert unpack_dual(y).tangent is None
    with dual_level(): assert unpack_dual(y).tangent is None        # a new level does not revive it
    assert type(unpack_dual(y)).__name__ == 'UnpackedDualTensor' and unpack_dual(y)._fields == ('primal', 'tangent')


def test_no_grad_still_carries_tangents():
    with dual_level():
        with fs.no_grad(): y = make_dual(fs.ones(2), fs.ones(2)).exp()
        assert unpack_dual(y).tangent is not None


def test_forward_over_reverse_hvp():
    rng = np.random.default_rng(1)
    x0, v0 = rng.standard_normal(4), rng.standard_normal(4)
    f = lambda x: (x.sin() * x ** 2).sum() + x.exp().prod()
    x = fs.tensor(x0, requires_grad=True)
    with dual_level():
        xd = make_dual(x, fs.tensor(v0))
        g, = fs.autograd.grad(f(xd), xd, create_graph=True)
        ours = unpack_dual(g).tangent.detach().numpy()
    xt = torch.tensor(x0)
    theirs = torch.func.jvp(torch.func.grad(f), (xt,), (torch.tensor(v0),))[1].numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)


def test_reverse_over_forward():
    "The gradient of a directional derivative with respect to the direction and the point."
    rng = np.random.default_rng(2)
    x0, v0 = rng.standard_normal(3), rng.standard_normal(3)
    def jvp_of(lib, fwd, x, v):
        with fwd.dual_level(): return fwd.unpack_dual((fwd.make_dual(x, v).tanh() ** 2).sum()).tangent
    x, v = fs.tensor(x0, requires_grad=True), fs.tensor(v0, requires_grad=True)
    gx, gv = fs.autograd.grad(jvp_of(fs, fs.autograd.forward_ad, x, v), (x, v))
    xt, vt = torch.tensor(x0, requires_grad=True), torch.tensor(v0, requires_grad=True)
    gxt, gvt = torch.autograd.grad(jvp_of(torch, fwAD, xt, vt), (xt, vt))
    np.testing.assert_allclose(gx.numpy(), gxt.numpy(), rtol=1e-9)
    np.testing.assert_allclose(gv.numpy(), gvt.numpy(), rtol=1e-9)


def test_dual_is_differentiable_and_keeps_reverse_mode():
    x = fs.tensor([1.0, 2.0], dtype=fs.float64, requires_grad=True)
    with dual_level():
        y = (make_dual(x, fs.ones(2, dtype=fs.float64)) ** 2).sum()
        y.backward()
    assert np.array_equal(x.grad.numpy(), [2.0, 4.0])


def test_custom_function_needs_its_own_jvp():
    class Cube(fs.autograd.Function):
        @staticmethod
        def forward(ctx, x): ctx.save_for_backward(x); return x ** 3
        @staticmethod
        def backward(ctx, g): x, = ctx.saved_tensors; return 3 * x ** 2 * g
    class CubeJvp(Cube):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)  # as in torch, jvp's saved_tensors are these
            return x ** 3
        @staticmethod
        def jvp(ctx, t): x, = ctx.saved_tensors; return 3 * x ** 2 * t
    x, v = fs.tensor([1.0, -2.0], dtype=fs.float64), fs.tensor([0.5, 1.0], dtype=fs.float64)
    with dual_level():
        with pytest.raises(NotImplementedError, match="You must implement the jvp function for custom autograd.Function"):
            Cube.apply(make_dual(x, v))
        assert np.allclose(unpack_dual(CubeJvp.apply(make_dual(x, v))).tangent.numpy(), [1.5, 12.0])
        assert unpack_dual(Cube.apply(x)).tangent is None        # no tangent in: no rule needed


def _set(i, v): return lambda lib, p, q: (lambda r: (r.__setitem__(i(lib), v(lib, q)), r)[1])(p * 1)

IN_PLACE = {
    'add_': lambda lib, p, q: (p * 1).add_(q, alpha=2), 'add_ into a plain tensor': lambda lib, p, q: lib.ones(3, dtype=lib.float64).add_(p),
    'sub_': lambda lib, p, q: (p * 1).sub_(q), 'mul_': lambda lib, p, q: (p * 1).mul_(q), 'mul_ by a number': lambda lib, p, q: (p * 1).mul_(3),
    'div_': lambda lib, p, q: (p * 1).div_(q), '+=': lambda lib, p, q: (lambda r: r.__iadd__(q))(p * 1),
    '*= plain': lambda lib, p, q: (lambda r: r.__imul__(lib.tensor([2.0, 0.5, -1.0], dtype=lib.float64)))(p * 1),
    'copy_ a dual': lambda lib, p, q: lib.zeros(3, dtype=lib.float64).copy_(p),
    'copy_ a plain tensor over a dual': lambda lib, p, q: (p * 1).copy_(lib.ones(3, dtype=lib.float64)),
    'copy_ broadcast': lambda lib, p, q: lib.zeros(2, 3, dtype=lib.float64).copy_(q),
    'fill_': lambda lib, p, q: (p * 1).fill_(2.0), 'zero_': lambda lib, p, q: (p * 1).zero_(),
    'setitem a dual value': _set(lambda lib: 1, lambda lib, q: q[0]), 'setitem a number': _set(lambda lib: lib.tensor([0, 2]), lambda lib, q: 7.0),
    'setitem a slice': _set(lambda lib: slice(1, None), lambda lib, q: q[:2] * 2),
    'setitem into a plain tensor': lambda lib, p, q: (lambda r: (r.__setitem__(slice(1, None), q[:2]), r)[1])(lib.ones(3, dtype=lib.float64)),
    'the dual itself': lambda lib, p, q: p.add_(1), 'twice': lambda lib, p, q: (p * 1).mul_(q).add_(p),
}

@pytest.mark.parametrize('name', list(IN_PLACE))
def test_in_place_changes_of_dual_tensors_update_the_tangent_as_torch(name):
    op, results = IN_PLACE[name], []
    for lib, fw in ((fs, fs.autograd.forward_ad), (torch, torch.autograd.forward_ad)):
        with fw.dual_level():
            p = fw.make_dual(lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64), lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64))
            q = fw.make_dual(lib.tensor([4.0, 5.0, 6.0], dtype=lib.float64), lib.tensor([1.0, 1.0, -3.0], dtype=lib.float64))
            primal, tangent = fw.unpack_dual(op(lib, p, q))
            results.append((primal.numpy().copy(), None if tangent is None else tangent.numpy().copy()))
    (ours, ours_t), (theirs, theirs_t) = results
    np.testing.assert_allclose(ours, theirs)
    assert (ours_t is None) == (theirs_t is None)
    if theirs_t is not None: np.testing.assert_allclose(ours_t, theirs_t)


def _through_views(x, w):
    x[1:3].mul_(w[:2])
    x.view(2, 2)[1].add_(w[2:] * w[2:])


@pytest.mark.parametrize('change', [lambda x, w: x.mul_(w), _through_views], ids=['the tensor', 'through views'])
def test_in_place_change_of_a_dual_keeps_both_modes(change):
    "In place with a tensor that also requires grad (directly, or through views): the tangent and the gradient as torch's."
    got = []
    for lib, fw in ((fs, fs.autograd.forward_ad), (torch, torch.autograd.forward_ad)):
        w = lib.tensor([1.0, -2.0, 0.5, 3.0], dtype=lib.float64, requires_grad=True)
        with fw.dual_level():
            x = fw.make_dual(w * 1, lib.tensor([1.0, 0.0, 2.0, -1.0], dtype=lib.float64))
            change(x, w)
            t = fw.unpack_dual(x).tangent.detach().numpy().copy()
            (x ** 2).sum().backward()
        got.append((x.detach().numpy().copy(), t, w.grad.numpy().copy()))
    for a, b in zip(*got): np.testing.assert_allclose(a, b)


VIEW_CHANGES = {   # an in-place change through a view of x (a dual 2x3 tensor, or a plain one for 'plain base')
    'row mul_': lambda lib, x, d: x[0].mul_(2),
    'the brief: x[0].mul_(2) on make_dual itself': None,
    'view of a view add_': lambda lib, x, d: x.view(6)[4:].add_(d(2)),
    'column through the transpose': lambda lib, x, d: x.T[2].mul_(x[1, :2] * 1),
    'a dual into a plain base': 'plain',
    'copy_ a plain tensor into a view': lambda lib, x, d: x[:, 1].copy_(lib.ones(2, dtype=lib.float64)),
    'zero_ a view': lambda lib, x, d: x[1, 1:].zero_(),
    'fill_ a view with a dual': lambda lib, x, d: x[0, :2].fill_(d(1)[0]),
    'setitem into a view': lambda lib, x, d: x[1].__setitem__(slice(0, 2), d(2)),
    'twice, then the base': lambda lib, x, d: (x[0].add_(d(3)), x[1:].mul_(x[0] * 1), x.mul_(-1)),
    'a strided slice': lambda lib, x, d: x[:, ::2].mul_(d(2)),
    'a view read after its base changed': 'kept',
}


def view_changes(lib, fw, name):
    "The primal and tangent of x (and of its views, where the case keeps one) after the change `name`."
    T = lambda *a: lib.tensor(np.array(a, dtype=np.float64).reshape(-1))
    with fw.dual_level():
        d = lambda n, s=0.5: fw.make_dual(lib.arange(1.0, n + 1, dtype=lib.float64) * s, lib.arange(n, dtype=lib.float64) - 1)
        tangent = lib.tensor([[1.0, -1.0, 2.0], [0.5, 3.0, -2.0]], dtype=lib.float64)
        x = fw.make_dual(lib.arange(6.0, dtype=lib.float64).reshape(2, 3), tangent)
        change, seen = VIEW_CHANGES[name], [x]
        if change == 'plain':
            x = lib.zeros(2, 3, dtype=lib.float64)
            x[1].copy_(d(3))
            seen = [x, x[1]]
        elif change == 'kept':
            kept, col = x[1], x[:, 0]
            x.mul_(d(3).reshape(1, 3) * 1)
            seen = [x, kept, col]
        elif change is None:
            v = x[0]
            v.mul_(2)
            seen = [x, v, tangent]      # torch writes the tangent in place: ours keeps the one given
        else: change(lib, x, d)
        out = []
        for t in seen:
            p, tt = fw.unpack_dual(t)
            out.append((p.detach().numpy().copy(), None if tt is None else tt.detach().numpy().copy()))
        return out


@pytest.mark.parametrize('name', list(VIEW_CHANGES))
def test_in_place_changes_through_views_update_the_base_tangent_as_torch(name):
    ours, theirs = view_changes(fs, fs.autograd.forward_ad, name), view_changes(torch, fwAD, name)
    if VIEW_CHANGES[name] is None: ours, theirs = ours[:2], theirs[:2]
    for (p, t), (q, u) in zip(ours, theirs):
        np.testing.assert_allclose(p, q)
        assert (t is None) == (u is None)
        if u is not None: np.testing.assert_allclose(t, u)


def test_transforms_through_in_place_changes_of_views():
    "jvp, and jvp of grad (forward over reverse), of a function that writes through views, as torch.func."
    def f(lib):
        def fn(x):
            y = x * 1
            y[1:].mul_(x[:-1])
            y.view(2, 2)[:, 0].add_(x[2:].sin() * x[:2])
            return y.sum() * y
        return fn
    x, v = np.array([0.5, -1.0, 2.0, 0.3]), np.array([1.0, 2.0, -1.0, 0.5])
    ours = fs.func.jvp(f(fs), (fs.tensor(x),), (fs.tensor(v),))
    theirs = torch.func.jvp(f(torch), (torch.tensor(x),), (torch.tensor(v),))
    for a, b in zip(ours, theirs): np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    total = lambda lib, F: F.grad(lambda x: f(lib)(x).sum())
    ours = fs.func.jvp(total(fs, fs.func), (fs.tensor(x),), (fs.tensor(v),))
    theirs = torch.func.jvp(total(torch, torch.func), (torch.tensor(x),), (torch.tensor(v),))
    for a, b in zip(ours, theirs): np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
