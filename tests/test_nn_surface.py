"""The wider `nn` surface against torch: more activations, dropout, normalisation, embeddings, one_hot, the
binary and L1 losses, class weights and label smoothing, ModuleList/ModuleDict, layers with buffers,
Module.to with devices, backward hooks, and nn.utils gradient clipping."""
import importlib
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import nn
from fromscratch.core import Tensor
from fromscratch.testing import check_close
from engines import check_both, check_second

RNG = np.random.default_rng(0)


def ours_or_torch(ours, theirs):
    "A function that calls `ours` on fromscratch tensors and `theirs` on torch tensors."
    return lambda *a, **k: (ours if isinstance(a[0], Tensor) else theirs)(*a, **k)


def lib_of(x): return fs if isinstance(x, Tensor) else torch


def same_error(ours, theirs, exc, match=None):
    "Both raise `exc`; ours with torch's message (`match`: the part compared, torch's message by default)."
    with pytest.raises(exc) as e_t: theirs()
    with pytest.raises(exc) as e: ours()
    expected = match if match is not None else str(e_t.value)
    assert expected in str(e.value), (str(e.value), str(e_t.value))


GRID = np.array([[-3.0, -1.0, -0.5, 0.0], [0.5, 1.0, 2.5, 6.0], [-8.0, 1e-3, -1e-3, 20.0]])


# ---------------------------------------------------------------- activations

ACTIVATIONS = {
    'gelu': (lambda x: ours_or_torch(F.gelu, TF.gelu)(x)),
    'gelu_tanh': (lambda x: ours_or_torch(F.gelu, TF.gelu)(x, approximate='tanh')),
    'silu': (lambda x: ours_or_torch(F.silu, TF.silu)(x)),
    'leaky_relu': (lambda x: ours_or_torch(F.leaky_relu, TF.leaky_relu)(x)),
    'leaky_relu_0.2': (lambda x: ours_or_torch(F.leaky_relu, TF.leaky_relu)(x, 0.2)),
    'leaky_relu_neg': (lambda x: ours_or_torch(F.leaky_relu, TF.leaky_relu)(x, negative_slope=-0.5)),
    'relu': (lambda x: ours_or_torch(F.relu, TF.relu)(x)),
    'erf': (lambda x: ours_or_torch(F.Erf.apply, torch.erf)(x)),
}


@pytest.mark.parametrize('name', list(ACTIVATIONS))
def test_activations_match_torch(name):
    fn = ACTIVATIONS[name]
    check_both(fn, GRID)
    check_both(fn, GRID, dtype=np.float32)
    check_both(fn, RNG.standard_normal((2, 3, 4)))
    check_both(fn, np.array(0.7))
    check_second(lambda x: fn(x) * x, GRID)


@pytest.mark.parametrize('name', ['relu', 'leaky_relu', 'silu'])
def test_inplace_activations(name):
    f = {'relu': (F.relu, TF.relu), 'leaky_relu': (F.leaky_relu, TF.leaky_relu), 'silu': (F.silu, TF.silu)}[name]
    fn = lambda x: ours_or_torch(*f)(x * 1.5, inplace=True) * x
    check_both(fn, GRID)
    check_second(fn, GRID)
    h = fs.tensor(GRID, requires_grad=True) * 1
    assert f[0](h, inplace=True) is h and h.grad_fn is not None
    x = fs.tensor(GRID)
    out = f[0](x, inplace=True)
    assert out is x
    check_close(x, f[1](torch.tensor(GRID)), rtol=1e-12)
    same_error(lambda: f[0](fs.tensor(GRID, requires_grad=True), inplace=True),
               lambda: f[1](torch.tensor(GRID, requires_grad=True), inplace=True), RuntimeError)


def test_inplace_relu_after_a_saved_output_fails_like_torch():
    for lib in (fs, torch):
        x = lib.tensor(GRID, requires_grad=True)
        y = lib.nn.functional.relu(x.sigmoid(), inplace=True)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'): y.sum().backward()


def test_gelu_errors_and_erf_values():
    same_error(lambda: F.gelu(fs.ones(2), approximate='foo'), lambda: TF.gelu(torch.ones(2), approximate='foo'), RuntimeError)
    x = np.linspace(-6, 6, 49)
    check_close(F.Erf.apply(fs.tensor(x)), [math.erf(v) for v in x], rtol=0, atol=0)
    assert F.gelu(fs.ones(3)).dtype == np.float32 and F.Erf.apply(fs.ones(3, dtype=fs.float64)).dtype == np.float64


def test_gelu_is_one_node():
    y = F.gelu(fs.randn(3, requires_grad=True))
    assert y.grad_fn.name() == 'GELUFunctionBackward'


@pytest.mark.parametrize('fn', [F.softmax, F.log_softmax])
@pytest.mark.parametrize('ndim', [1, 2, 3, 4])
def test_softmax_implicit_dim_like_torch(fn, ndim):
    a = RNG.standard_normal((2, 3, 4, 5)[:ndim])
    theirs = getattr(TF, fn.__name__)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        out, out_t = fn(fs.tensor(a)), theirs(torch.tensor(a))
    check_close(out, out_t, rtol=1e-12)
    assert [str(w.message) for w in caught][0] == [str(w.message) for w in caught][1]
    assert all(w.filename == __file__ for w in caught)
    check_close(fn(fs.tensor(a), dim=0, dtype=fs.float32), theirs(torch.tensor(a), dim=0, dtype=torch.float32), rtol=1e-6)
    assert fn(fs.tensor(a), 0, dtype=fs.float32).dtype == np.float32


def test_activation_modules_repr_and_values():
    def layers(lib):
        return [lib.ReLU(), lib.ReLU(inplace=True), lib.LeakyReLU(), lib.LeakyReLU(0.2, True), lib.GELU(), lib.GELU('tanh'),
                lib.SiLU(), lib.SiLU(inplace=True), lib.Softmax(dim=1), lib.LogSoftmax(-1), lib.Identity(3, foo=4),
                lib.Flatten(), lib.Flatten(0, 1), lib.Sigmoid(), lib.Tanh()]
    for ours, theirs in zip(layers(nn), layers(torch.nn)):
        assert repr(ours) == repr(theirs)
        check_both(lambda x: (ours if isinstance(x, Tensor) else theirs)(x * 1), GRID)
    with pytest.warns(UserWarning, match='Implicit dimension choice for softmax'): nn.Softmax()(fs.ones(2, 3))
    x = fs.ones(2)
    assert nn.Identity()(x) is x


# ---------------------------------------------------------------- dropout

def test_dropout_semantics():
    fs.manual_seed(0)
    x = fs.full((400, 500), 3.0, dtype=fs.float64, requires_grad=True)
    for p in (0.1, 0.5, 0.9):
        x.grad = None
        y = F.dropout(x, p)
        out = y.detach().numpy()
        frac = (out == 0).mean()
        assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / out.size), (p, frac)
        assert np.array_equal(np.unique(out), [0.0, 3.0 / (1 - p)]) or np.allclose(np.unique(out), [0.0, 3.0 / (1 - p)], rtol=1e-15)
        y.sum().backward()
        assert np.array_equal(x.grad.numpy(), out / 3.0)          # the mask, scaled: the gradient of input * mask
        assert y.grad_fn is not None
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x and F.dropout(x, 0.0, training=True) is x
    z = F.dropout(x, 1.0)
    assert (z.detach().numpy() == 0).all() and z.requires_grad
    x.grad = None; z.sum().backward()
    assert (x.grad.numpy() == 0).all()
    assert F.dropout(fs.ones(0, 3), 0.5).shape == (0, 3)


def test_dropout_dtype_and_scaling_like_torch():
    y, y_t = F.dropout(fs.ones(200, 200), 0.1), TF.dropout(torch.ones(200, 200), 0.1)
    assert y.dtype == np.float32
    assert np.array_equal(np.unique(y.numpy()), np.unique(y_t.numpy()))        # 0 and 1/(1-p) computed in float32, as torch


def test_dropout_is_seeded():
    fs.manual_seed(3); a = F.dropout(fs.ones(50, 50), 0.5).numpy()
    fs.manual_seed(3); b = F.dropout(fs.ones(50, 50), 0.5).numpy()
    c = F.dropout(fs.ones(50, 50), 0.5).numpy()
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_dropout_second_derivative_and_inplace():
    fs.manual_seed(1)
    x = fs.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    y = F.dropout(x * x, 0.3)
    g, = fs.autograd.grad(y.sum(), x, create_graph=True)
    mask = (y.detach().numpy() != 0) / 0.7
    check_close(g, 2 * x.detach().numpy() * mask, rtol=1e-12)
    g2, = fs.autograd.grad(g.sum(), x)
    check_close(g2, 2 * mask, rtol=1e-12)
    h = x * 1
    assert F.dropout(h, 0.3, inplace=True) is h
    with pytest.raises(RuntimeError, match='leaf Variable'): F.dropout(x, 0.3, inplace=True)


@pytest.mark.parametrize('p', [-0.1, 1.5, 2])
def test_dropout_p_errors(p):
    same_error(lambda: F.dropout(fs.ones(2), p), lambda: TF.dropout(torch.ones(2), p), ValueError)
    same_error(lambda: nn.Dropout(p), lambda: torch.nn.Dropout(p), ValueError)


def test_dropout_module():
    assert repr(nn.Dropout()) == repr(torch.nn.Dropout()) and repr(nn.Dropout(0.2, True)) == repr(torch.nn.Dropout(0.2, True))
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = fs.ones(8, 4)
    fs.manual_seed(0)
    a, b = model(x).detach().numpy(), model(x).detach().numpy()
    assert not np.array_equal(a, b) and (a == 0).any()
    model.eval()
    assert np.array_equal(model(x).detach().numpy(), model[0](x).detach().numpy())
    assert model[1](x) is x


# ---------------------------------------------------------------- one_hot

@pytest.mark.parametrize('shape', [(), (5,), (3, 4), (2, 0)])
@pytest.mark.parametrize('num_classes', [-1, 7])
def test_one_hot_like_torch(shape, num_classes):
    a = RNG.integers(0, 6, shape)
    if num_classes == -1 and a.size == 0: return
    out, out_t = F.one_hot(fs.tensor(a), num_classes), TF.one_hot(torch.tensor(a), num_classes)
    assert out.dtype == np.int64 and out.shape == tuple(out_t.shape)
    assert np.array_equal(out.numpy(), out_t.numpy())


@pytest.mark.parametrize('make, num_classes', [(lambda lib: lib.tensor([1.0]), -1), (lambda lib: lib.tensor([1], dtype=lib.int32), -1),
                                               (lambda lib: lib.tensor([], dtype=lib.int64), -1), (lambda lib: lib.tensor([-1]), -1),
                                               (lambda lib: lib.tensor([3]), 3), (lambda lib: lib.tensor([2]), 0)])
def test_one_hot_errors_like_torch(make, num_classes):
    same_error(lambda: F.one_hot(make(fs), num_classes), lambda: TF.one_hot(make(torch), num_classes), RuntimeError)


# ---------------------------------------------------------------- layer_norm, batch_norm

@pytest.mark.parametrize('shape, normalized', [((4, 5), (5,)), ((2, 3, 4), (3, 4)), ((2, 3, 4), 4), ((6,), (6,)), ((2, 3, 4), (2, 3, 4))])
@pytest.mark.parametrize('affine', ['both', 'weight', 'none'])
def test_layer_norm_like_torch(shape, normalized, affine):
    ns = (normalized,) if isinstance(normalized, int) else normalized
    x = RNG.standard_normal(shape) * 3 + 1
    w, b = RNG.standard_normal(ns), RNG.standard_normal(ns)
    args = {'both': (w, b), 'weight': (w,), 'none': ()}[affine]
    fn = lambda x, *wb: ours_or_torch(F.layer_norm, TF.layer_norm)(x, ns, *wb, eps=1e-3)
    check_both(fn, x, *args)
    check_second(fn, x, *args)
    check_both(fn, x, *args, dtype=np.float32)


def test_layer_norm_constant_rows_and_errors():
    check_both(lambda x: ours_or_torch(F.layer_norm, TF.layer_norm)(x, (3,)), np.full((2, 3), 5.0))
    same_error(lambda: F.layer_norm(fs.ones(2, 3), (4,)), lambda: TF.layer_norm(torch.ones(2, 3), (4,)), RuntimeError)
    same_error(lambda: F.layer_norm(fs.ones(3, 2), [2, 3]), lambda: TF.layer_norm(torch.ones(3, 2), [2, 3]), RuntimeError)


def _bn(x, rm, rv, w, b, training, momentum):
    if isinstance(x, Tensor): return F.batch_norm(x, rm[0], rm[1], w, b, training, momentum)
    return TF.batch_norm(x, rm[2], rm[3], w, b, training, momentum)


@pytest.mark.parametrize('shape', [(8, 3), (4, 3, 5), (2, 3, 1)])
@pytest.mark.parametrize('training', [True, False])
@pytest.mark.parametrize('stats', [True, False])
def test_batch_norm_functional_like_torch(shape, training, stats):
    if not training and not stats: return         # evaluation needs running statistics
    x, w, b = RNG.standard_normal(shape) * 2 + 1, RNG.standard_normal(3), RNG.standard_normal(3)
    rm0, rv0 = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3)
    running = [fs.tensor(rm0), fs.tensor(rv0), torch.tensor(rm0), torch.tensor(rv0)] if stats else [None] * 4
    check_both(lambda x, w, b: _bn(x, running, None, w, b, training, 0.3), x, w, b)
    if stats:
        check_close(running[0], running[2], rtol=1e-12); check_close(running[1], running[3], rtol=1e-12)
    check_both(lambda x: _bn(x, running, None, None, None, training, 0.3), x)
    check_second(lambda x, w, b: _bn(x, [r if r is None else (r.clone() if isinstance(r, Tensor) else r.clone()) for r in running], None, w, b, training, 0.3), x, w, b)
    if training: check_both(lambda x, w, b: _bn(x, [None] * 4, None, w, b, True, 0.3), x, w, b, dtype=np.float32, rtol=1e-4, atol=1e-5)


def test_batch_norm_errors_like_torch():
    same_error(lambda: F.batch_norm(fs.ones(1, 3), None, None, training=True), lambda: TF.batch_norm(torch.ones(1, 3), None, None, training=True),
               ValueError, 'Expected more than 1 value per channel when training, got input size')
    same_error(lambda: F.batch_norm(fs.ones(2, 4), fs.zeros(3), fs.ones(3), training=True),
               lambda: TF.batch_norm(torch.ones(2, 4), torch.zeros(3), torch.ones(3), training=True), RuntimeError)
    F.batch_norm(fs.ones(1, 3), fs.zeros(3), fs.ones(3))         # one value per channel is fine in evaluation
    for eps, training in ((0.0, True), (-1e-3, False)):
        same_error(lambda: F.batch_norm(fs.ones(2, 3), fs.zeros(3), fs.ones(3), training=training, eps=eps),
                   lambda: TF.batch_norm(torch.ones(2, 3), torch.zeros(3), torch.ones(3), training=training, eps=eps), ValueError)


# ---------------------------------------------------------------- embedding

@pytest.mark.parametrize('padding_idx', [None, 0, 3, -1, -5])
@pytest.mark.parametrize('idx', [[[0, 2, 2], [4, 0, 1]], [3, 3, 3], 2, [[4]]])
def test_embedding_like_torch(padding_idx, idx):
    w = RNG.standard_normal((5, 3))
    fn = lambda w, i: ours_or_torch(F.embedding, TF.embedding)(i, w, padding_idx=padding_idx)
    check_both(fn, w, np.array(idx))
    check_second(lambda w, i: fn(w, i) ** 2, w, np.array(idx))
    check_both(fn, w, np.array(idx, dtype=np.int32))


def test_embedding_errors_like_torch():
    w, w_t = fs.randn(5, 3), torch.randn(5, 3)
    for idx in ([5], [-1]):
        same_error(lambda: F.embedding(fs.tensor(idx), w), lambda: TF.embedding(torch.tensor(idx), w_t), IndexError)
    same_error(lambda: F.embedding(fs.tensor([1.0]), w), lambda: TF.embedding(torch.tensor([1.0]), w_t), RuntimeError,
               "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got")
    for pad in (5, -6):
        same_error(lambda: F.embedding(fs.tensor([1]), w, pad), lambda: TF.embedding(torch.tensor([1]), w_t, pad), AssertionError)
        same_error(lambda: nn.Embedding(5, 3, pad), lambda: torch.nn.Embedding(5, 3, pad), AssertionError)
    with pytest.raises(NotImplementedError): F.embedding(fs.tensor([1]), w, max_norm=1.0)


def test_embedding_module():
    for kw in ({}, {'padding_idx': 2}, {'padding_idx': -1}, {'max_norm': 1.0, 'norm_type': 1.0}, {'scale_grad_by_freq': True, 'sparse': True}):
        assert repr(nn.Embedding(7, 4, **kw)) == repr(torch.nn.Embedding(7, 4, **kw))
    fs.manual_seed(0)
    emb = nn.Embedding(2000, 8, padding_idx=1)
    w = emb.weight.detach().numpy()
    assert emb.weight.dtype == np.float32 and emb.padding_idx == 1 and (w[1] == 0).all()
    rest = np.delete(w, 1, axis=0)
    assert abs(rest.mean()) < 0.02 and abs(rest.std() - 1) < 0.02                   # N(0, 1), as torch
    out = emb(fs.tensor([[1, 5, 5]]))
    out.sum().backward()
    g = emb.weight.grad.numpy()
    assert (g[1] == 0).all() and (g[5] == 2).all() and g.sum() == 16
    assert [n for n, _ in emb.named_parameters()] == ['weight']
    assert nn.Embedding(3, 2, dtype=fs.float64).weight.dtype == np.float64
    with pytest.raises(RuntimeError, match='CPU only'): nn.Embedding(3, 2, device='cuda')


def test_embedding_from_pretrained():
    table = fs.tensor(RNG.standard_normal((4, 3)))
    for freeze in (True, False):
        e, e_t = nn.Embedding.from_pretrained(table, freeze=freeze), torch.nn.Embedding.from_pretrained(torch.tensor(table.numpy()), freeze=freeze)
        assert e.weight.requires_grad == e_t.weight.requires_grad == (not freeze)
        assert repr(e) == repr(e_t)
        check_close(e(fs.tensor([3, 0])), e_t(torch.tensor([3, 0])), rtol=0)
    e = nn.Embedding.from_pretrained(table, padding_idx=1)
    check_close(e.weight[1], table[1], rtol=0)                    # not zeroed, as in torch
    same_error(lambda: nn.Embedding.from_pretrained(fs.ones(3)), lambda: torch.nn.Embedding.from_pretrained(torch.ones(3)), AssertionError)
    with pytest.raises(AssertionError, match='Shape of weight does not match'): nn.Embedding(3, 3, _weight=fs.ones(3, 2))


# ---------------------------------------------------------------- regression and binary losses

@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_l1_loss_like_torch(reduction):
    x, y = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    y[0, :2] = x[0, :2]                                                      # ties: gradient 0, as torch
    fn = lambda x, y: ours_or_torch(F.l1_loss, TF.l1_loss)(x, y, reduction=reduction)
    check_both(fn, x, y)
    check_both(fn, x, y, dtype=np.float32)
    check_both(fn, x, RNG.standard_normal(5))
    check_close(nn.L1Loss(reduction=reduction)(fs.tensor(x), fs.tensor(y)), torch.nn.L1Loss(reduction=reduction)(torch.tensor(x), torch.tensor(y)), rtol=1e-12)


def test_l1_and_mse_broadcast_warning():
    for ours, theirs in ((F.l1_loss, TF.l1_loss), (F.mse_loss, TF.mse_loss)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            ours(fs.ones(3, 1), fs.ones(3)); theirs(torch.ones(3, 1), torch.ones(3))
        assert str(caught[0].message) == str(caught[1].message).replace('torch.Size', 'fromscratch.Size')
        assert caught[0].filename == __file__


@pytest.mark.parametrize('name', ['mse_loss', 'l1_loss', 'binary_cross_entropy', 'binary_cross_entropy_with_logits'])
@pytest.mark.parametrize('size_average, reduce', [(None, None), (False, None), (None, False), (True, True), (False, True)])
def test_legacy_reduction_flags(name, size_average, reduce):
    x, t = RNG.uniform(0.1, 0.9, (3, 4)), RNG.uniform(0, 1, (3, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        out = getattr(F, name)(fs.tensor(x), fs.tensor(t), size_average=size_average, reduce=reduce)
        out_t = getattr(TF, name)(torch.tensor(x), torch.tensor(t), size_average=size_average, reduce=reduce)
    check_close(out, out_t, rtol=1e-12)
    messages = [str(w.message) for w in caught]
    assert messages[:len(messages) // 2] == messages[len(messages) // 2:]


def test_legacy_flags_by_position_and_in_modules():
    x, t = fs.tensor([[1.0, 2.0]]), fs.tensor([[0.0, 0.0]])
    with pytest.warns(UserWarning, match="reduction='sum'"): assert F.mse_loss(x, t, False).item() == 5.0
    with pytest.warns(UserWarning, match="reduction='sum'"): m, m_t = nn.MSELoss(size_average=False), torch.nn.MSELoss(size_average=False)
    assert m.reduction == m_t.reduction == 'sum'
    with pytest.warns(UserWarning): assert nn.CrossEntropyLoss(reduce=False).reduction == 'none'


BCE_X = np.array([[0.0, 1.0, 0.5, 1e-30], [0.999, 0.2, 1.0, 0.0], [0.3, 0.7, 0.05, 0.95]])
BCE_T = np.array([[1.0, 1.0, 0.3, 0.0], [0.0, 0.2, 0.0, 0.0], [1.0, 0.0, 0.5, 1.0]])


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('weight', [None, (4,), (3, 4), (3, 1)])
def test_binary_cross_entropy_like_torch(reduction, weight):
    w = None if weight is None else RNG.uniform(0.5, 2.0, weight)
    fn = lambda x, t, *w: ours_or_torch(F.binary_cross_entropy, TF.binary_cross_entropy)(x, t, *w, reduction=reduction)
    args = () if w is None else (w,)
    check_both(fn, BCE_X, BCE_T, *args, grad_args=(0, 1))                   # the clipped edges included
    inner_x, inner_t = RNG.uniform(0.05, 0.95, (3, 4)), RNG.uniform(0, 1, (3, 4))
    check_second(fn, inner_x, inner_t, *args, grad_args=(0, 1), rtol=1e-8)  # torch's double backward shifts by 1e-12
    check_both(fn, inner_x, inner_t, *args, grad_args=(0, 1), dtype=np.float32)
    check_close(nn.BCELoss(None if w is None else fs.tensor(w), reduction=reduction)(fs.tensor(inner_x), fs.tensor(inner_t)),
                torch.nn.BCELoss(None if w is None else torch.tensor(w), reduction=reduction)(torch.tensor(inner_x), torch.tensor(inner_t)), rtol=1e-12)


def test_binary_cross_entropy_errors_like_torch():
    same_error(lambda: F.binary_cross_entropy(fs.tensor([0.5, 1.5]), fs.tensor([0.0, 1.0])),
               lambda: TF.binary_cross_entropy(torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0])), RuntimeError)
    same_error(lambda: F.binary_cross_entropy(fs.tensor([0.5, math.nan]), fs.tensor([0.0, 1.0])),
               lambda: TF.binary_cross_entropy(torch.tensor([0.5, math.nan]), torch.tensor([0.0, 1.0])), RuntimeError)
    same_error(lambda: F.binary_cross_entropy(fs.tensor([0.5, 0.5]), fs.tensor([[0.0, 1.0]])),
               lambda: TF.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([[0.0, 1.0]])), ValueError,
               'Using a target size (fromscratch.Size([1, 2])) that is different to the input size (fromscratch.Size([2])) is deprecated')
    same_error(lambda: F.binary_cross_entropy(fs.tensor([0.5]), fs.tensor([0.0], dtype=fs.float64)),
               lambda: TF.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([0.0], dtype=torch.float64)), RuntimeError)
    same_error(lambda: F.binary_cross_entropy(fs.tensor([0.5]), fs.tensor([0.0]), weight=fs.ones(1, requires_grad=True)),
               lambda: TF.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([0.0]), weight=torch.ones(1, requires_grad=True)), RuntimeError)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('weights', ['none', 'weight', 'pos_weight', 'both'])
def test_binary_cross_entropy_with_logits_like_torch(reduction, weights):
    x = np.array([[0.0, 3.0, -3.0, 50.0], [-50.0, 800.0, -800.0, 1e-3], [0.5, -0.5, 2.0, -7.0]])
    t = RNG.uniform(0, 1, (3, 4)); t[0, :2] = [0.0, 1.0]
    kw = {'none': {}, 'weight': {'weight': RNG.uniform(0.5, 2, 4)}, 'pos_weight': {'pos_weight': RNG.uniform(0.5, 3, 4)},
          'both': {'weight': RNG.uniform(0.5, 2, (3, 4)), 'pos_weight': RNG.uniform(0.5, 3, 4)}}[weights]
    names = list(kw)
    def fn(x, t, *ws):
        return ours_or_torch(F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits)(x, t, reduction=reduction, **dict(zip(names, ws)))
    check_both(fn, x, t, *kw.values(), grad_args=(0, 1))
    check_both(fn, x, t, *kw.values(), grad_args=(0, 1), dtype=np.float32)
    check_second(fn, x[:, [0, 2, 3]] / 20 + x[:, [0, 2, 3]] * 0, t[:, [0, 2, 3]], *[v[..., [0, 2, 3]] for v in kw.values()], grad_args=(0, 1))
    module = lambda lib: lib.nn.BCEWithLogitsLoss(reduction=reduction, **{k: lib.tensor(v) for k, v in kw.items()})
    check_close(module(fs)(fs.tensor(x), fs.tensor(t)), module(torch)(torch.tensor(x), torch.tensor(t)), rtol=1e-12)
    assert list(module(fs).state_dict()) == list(module(torch).state_dict())


def test_binary_cross_entropy_with_logits_errors_like_torch():
    same_error(lambda: F.binary_cross_entropy_with_logits(fs.tensor([0.5, 0.5]), fs.tensor([[0.0, 1.0]])),
               lambda: TF.binary_cross_entropy_with_logits(torch.tensor([0.5, 0.5]), torch.tensor([[0.0, 1.0]])), ValueError,
               'Target size (fromscratch.Size([1, 2])) must be the same as input size (fromscratch.Size([2]))')
    for name in ('weight', 'pos_weight'):
        same_error(lambda: F.binary_cross_entropy_with_logits(fs.tensor([0.5]), fs.tensor([0.0]), **{name: fs.ones(1, requires_grad=True)}),
                   lambda: TF.binary_cross_entropy_with_logits(torch.tensor([0.5]), torch.tensor([0.0]), **{name: torch.ones(1, requires_grad=True)}),
                   RuntimeError)
    with fs.no_grad():
        F.binary_cross_entropy_with_logits(fs.tensor([0.5]), fs.tensor([0.0]), pos_weight=fs.ones(1, requires_grad=True))


# ---------------------------------------------------------------- class weights and label smoothing

CE_X = RNG.standard_normal((6, 5)) * 3
CE_T = np.array([0, 4, -100, 2, 2, 1])
CE_W = RNG.uniform(0.2, 2.0, 5)
CE_KWARGS = [{}, {'weight': CE_W}, {'label_smoothing': 0.2}, {'weight': CE_W, 'label_smoothing': 0.2},
             {'weight': CE_W, 'label_smoothing': 1.0}, {'weight': CE_W, 'ignore_index': 2}, {'label_smoothing': 0.1, 'ignore_index': 4}]


def with_lib(x, kw):
    "`kw` with its `weight` as a tensor of `x`'s library and dtype."
    if 'weight' not in kw: return kw
    w = kw['weight'].astype(np.dtype(str(x.dtype).split('.')[-1]))
    return dict(kw, weight=lib_of(x).tensor(w))


def targets_for(kw, t):
    return np.where(t == -100, kw.get('ignore_index', -100), t)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('kw', CE_KWARGS, ids=[str(sorted(k)) for k in CE_KWARGS])
def test_cross_entropy_weights_and_smoothing_like_torch(reduction, kw):
    ce = lambda x, t: ours_or_torch(F.cross_entropy, TF.cross_entropy)(x, t, reduction=reduction, **with_lib(x, kw))
    t = targets_for(kw, CE_T)
    check_both(ce, CE_X, t)
    check_second(ce, CE_X, t)
    check_both(ce, CE_X, t, dtype=np.float32)
    x3, t3 = RNG.standard_normal((3, 5, 2, 2)), targets_for(kw, np.array([[[0, 4], [-100, 2]], [[1, 1], [3, 0]], [[2, 2], [4, -100]]]))
    check_both(ce, x3, t3)
    check_both(ce, CE_X[0], np.array(3))
    if 'label_smoothing' not in kw:
        nll = lambda x, t: ours_or_torch(F.nll_loss, TF.nll_loss)(x, t, reduction=reduction, **with_lib(x, kw))
        check_both(nll, CE_X, t)
        check_second(lambda x, t: nll(x, t) * 2, CE_X, t)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('kw', [{}, {'weight': CE_W}, {'label_smoothing': 0.2}, {'weight': CE_W, 'label_smoothing': 0.3}])
def test_cross_entropy_probability_targets_with_weights_and_smoothing(reduction, kw):
    ce = lambda x, t: ours_or_torch(F.cross_entropy, TF.cross_entropy)(x, t, reduction=reduction, **with_lib(x, kw))
    probs = np.exp(CE_X) / np.exp(CE_X).sum(1, keepdims=True)
    check_both(ce, CE_X, probs)
    check_second(ce, CE_X, probs)
    x3 = RNG.standard_normal((2, 5, 3))
    check_both(ce, x3, np.exp(x3) / np.exp(x3).sum(1, keepdims=True))


@pytest.mark.parametrize('kw', [{'weight': np.zeros(3)}, {'weight': np.zeros(3), 'label_smoothing': 0.1}, {'weight': np.ones(3)},
                                {'label_smoothing': 0.2}, {'weight': np.array([1.0, 0.0, 2.0]), 'label_smoothing': 0.2}])
@pytest.mark.parametrize('t', [[0, 1], [-100, -100], [0, -100]])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_cross_entropy_degenerate_weights_like_torch(kw, t, reduction):
    x = np.array([[0.3, -1.0, 2.0], [1.0, 1.0, 0.0]])
    ce = lambda x, t: ours_or_torch(F.cross_entropy, TF.cross_entropy)(x, t, reduction=reduction, **with_lib(x, kw))
    check_both(ce, x, np.array(t))


@pytest.mark.parametrize('kw', [{'weight': np.array([1.0, 0.0, 1.0])}, {'label_smoothing': 0.2}, {'weight': np.array([1.0, 0.0, 1.0]), 'label_smoothing': 0.2}])
@pytest.mark.parametrize('reduction', ['mean', 'none'])
def test_cross_entropy_infinite_logits_like_torch(kw, reduction):
    x = np.array([[0.0, -np.inf, 1.0], [2.0, 1.0, 0.0]])
    ce = lambda x, t: ours_or_torch(F.cross_entropy, TF.cross_entropy)(x, t, reduction=reduction, **with_lib(x, kw))
    check_both(ce, x, np.array([0, 2]), grads=False)


def test_cross_entropy_positional_weight_and_module_buffers():
    x, t, w = fs.tensor(CE_X), fs.tensor([0, 4, 3, 2, 2, 1]), fs.tensor(CE_W)
    check_close(F.cross_entropy(x, t, w), TF.cross_entropy(torch.tensor(CE_X), torch.tensor(t.numpy()), torch.tensor(CE_W)), rtol=1e-12)
    check_close(F.nll_loss(x.log_softmax(1), t, w), TF.nll_loss(torch.tensor(CE_X).log_softmax(1), torch.tensor(t.numpy()), torch.tensor(CE_W)), rtol=1e-12)
    m, m_t = nn.CrossEntropyLoss(w, label_smoothing=0.1), torch.nn.CrossEntropyLoss(torch.tensor(CE_W), label_smoothing=0.1)
    check_close(m(x, t), m_t(torch.tensor(CE_X), torch.tensor(t.numpy())), rtol=1e-12)
    assert list(m.state_dict()) == list(m_t.state_dict()) == ['weight'] and m.weight is w
    assert list(nn.CrossEntropyLoss().state_dict()) == [] and nn.CrossEntropyLoss().weight is None
    assert list(nn.NLLLoss(w).state_dict()) == list(torch.nn.NLLLoss(torch.tensor(CE_W)).state_dict())
    m.float()
    assert m.weight.dtype == np.float32


def test_cross_entropy_weight_and_smoothing_errors_like_torch():
    x, t = fs.ones(2, 3), fs.tensor([0, 1])
    x_t, t_t = torch.ones(2, 3), torch.tensor([0, 1])
    for w in ((4,), (3, 1)):
        same_error(lambda: F.cross_entropy(x, t, weight=fs.ones(*w)), lambda: TF.cross_entropy(x_t, t_t, weight=torch.ones(*w)), RuntimeError)
        same_error(lambda: F.nll_loss(x, t, weight=fs.ones(*w)), lambda: TF.nll_loss(x_t, t_t, weight=torch.ones(*w)), RuntimeError)
    same_error(lambda: F.cross_entropy(x, t, weight=fs.ones(3, dtype=fs.float64)), lambda: TF.cross_entropy(x_t, t_t, weight=torch.ones(3, dtype=torch.float64)), RuntimeError)
    same_error(lambda: F.cross_entropy(x, t, weight=fs.ones(3, requires_grad=True)), lambda: TF.cross_entropy(x_t, t_t, weight=torch.ones(3, requires_grad=True)), RuntimeError)
    same_error(lambda: F.cross_entropy(x, t, label_smoothing=1.5), lambda: TF.cross_entropy(x_t, t_t, label_smoothing=1.5), RuntimeError)
    for eps in (-0.1, -2.0):          # torch ignores a negative smoothing; so do we
        check_both(lambda x, t: ours_or_torch(F.cross_entropy, TF.cross_entropy)(x, t, label_smoothing=eps), CE_X, np.array([0, 1, 2, 3, 4, 0]))
        check_both(lambda x, t: ours_or_torch(F.cross_entropy, TF.cross_entropy)(x, t, label_smoothing=eps), CE_X, np.full((6, 5), 0.2))
    same_error(lambda: F.cross_entropy(x, fs.ones(2, 3) / 3, ignore_index=1), lambda: TF.cross_entropy(x_t, torch.ones(2, 3) / 3, ignore_index=1), RuntimeError)


def test_default_cross_entropy_path_is_unchanged():
    x = fs.randn(8, 4, requires_grad=True)
    loss = F.cross_entropy(x, fs.tensor([0, 1, 2, 3, 0, 1, 2, 3]))
    node = loss.grad_fn
    assert node.name() == 'CrossEntropyFunctionBackward' and node.smoothing is None
    assert [fn.name() for fn, _ in node.next_functions] == ['AccumulateGrad']


# ---------------------------------------------------------------- ModuleList and ModuleDict

def edits(lib):
    "The same sequence of list edits on a ModuleList of library `lib` (fs.nn or torch.nn); what is seen after each."
    seen = []
    ml = lib.ModuleList([lib.Linear(2, 2), lib.ReLU()])
    def snap(): seen.append(([type(m).__name__ for m in ml], list(ml._modules), [n for n, _ in ml.named_parameters()], repr(ml), len(ml)))
    for edit in (lambda: ml.append(lib.Linear(2, 3)), lambda: ml.extend([lib.Tanh(), lib.Tanh()]), lambda: ml.insert(1, lib.Sigmoid()),
                 lambda: ml.insert(0, lib.Linear(1, 1)), lambda: ml.insert(len(ml), lib.ReLU()), lambda: ml.__iadd__([lib.ReLU()]),
                 lambda: ml.__delitem__(0), lambda: ml.__delitem__(-1), lambda: ml.__delitem__(slice(1, 3)), lambda: ml.pop(1),
                 lambda: ml.__setitem__(-1, lib.Linear(4, 4)), lambda: ml.extend(lib.ModuleList([lib.ReLU()]))):
        edit(); snap()
    seen.append([type(m).__name__ for m in ml[1:]] + [type(ml[1:]).__name__, type(ml[-1]).__name__])
    seen.append(list((ml + lib.ModuleList([lib.ReLU()]))._modules))
    return seen


def test_module_list_like_torch():
    assert edits(nn) == edits(torch.nn)
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList()) == 'ModuleList()'
    rep = lambda lib: repr(lib.ModuleList([lib.Linear(2, 2) for _ in range(3)] + [lib.ReLU()] + [lib.Linear(2, 2)] * 2))
    assert rep(nn) == rep(torch.nn)


def test_module_list_errors_like_torch():
    for lib in (nn, torch.nn):
        ml = lib.ModuleList([lib.ReLU()])
        with pytest.raises(IndexError, match='index 3 is out of range'): ml[3]
        with pytest.raises(IndexError, match='index -2 is out of range'): ml[-2]
        with pytest.raises(IndexError): del ml[5]
        with pytest.raises(TypeError, match='ModuleList.extend should be called with an iterable, but got int'): ml.extend(3)
        with pytest.raises(TypeError): ml['a']


def test_module_list_in_a_model_trains_and_saves():
    def model(lib):
        class Net(lib.Module):
            def __init__(self):
                super().__init__()
                self.blocks = lib.ModuleList([lib.Linear(3, 3) for _ in range(3)])
                self.heads = lib.ModuleDict({'a': lib.Linear(3, 1), 'b': lib.Linear(3, 2)})
            def forward(self, x):
                for b in self.blocks: x = b(x).tanh()
                return self.heads['a'](x).sum() + self.heads['b'](x).sum()
        return Net()
    torch.manual_seed(0)
    net, net_t = model(nn), model(torch.nn)
    net.load_state_dict(net_t.state_dict())
    assert list(net.state_dict()) == list(net_t.state_dict())
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    out, out_t = net(fs.tensor(x)), net_t(torch.tensor(x))
    out.backward(); out_t.backward()
    check_close(out, out_t, rtol=1e-5)
    for (n, p), p_t in zip(net.named_parameters(), net_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-4, atol=1e-6, name=n)
    assert len(list(net.parameters())) == 10
    with pytest.raises(NotImplementedError): net.blocks(fs.ones(1, 3))


def dict_edits(lib):
    seen = []
    d = lib.ModuleDict({'b': lib.Linear(1, 2), 'a': lib.ReLU()})
    def snap(): seen.append((list(d), list(d.keys()), [type(v).__name__ for v in d.values()], [k for k, _ in d.items()], 'a' in d, len(d),
                             list(d.state_dict()), repr(d)))
    for edit in (lambda: d.__setitem__('c', lib.Linear(2, 1)), lambda: d.update([('d', lib.Tanh()), ['e', lib.ReLU()]]),
                 lambda: d.update({'a': lib.Sigmoid(), 'f': lib.Linear(1, 1)}), lambda: d.update(lib.ModuleDict({'g': lib.ReLU()})),
                 lambda: d.pop('b'), lambda: d.__delitem__('c'), lambda: d.clear()):
        edit(); snap()
    return seen


def test_module_dict_like_torch():
    assert dict_edits(nn) == dict_edits(torch.nn)


def test_module_dict_errors_like_torch():
    for lib in (nn, torch.nn):
        d = lib.ModuleDict()
        with pytest.raises(TypeError, match='ModuleDict.update should be called with an iterable of key/value pairs, but got int'): d.update(3)
        with pytest.raises(TypeError, match='ModuleDict update sequence element #0 should be Iterable'): d.update([1])
        with pytest.raises(ValueError, match='ModuleDict update sequence element #0 has length 1; 2 is required'): d.update([('x',)])
        with pytest.raises(KeyError, match="attribute 'train' already exists"): d['train'] = lib.ReLU()
        with pytest.raises(KeyError) as e: d['a.b'] = lib.ReLU()
        assert e.value.args[0] == 'module name can\'t contain ".", got: a.b'
        with pytest.raises(KeyError): d['missing']


# ---------------------------------------------------------------- LayerNorm, BatchNorm1d modules

@pytest.mark.parametrize('args, kw', [((4,), {}), (([2, 4],), {}), ((4,), {'elementwise_affine': False}), ((4,), {'bias': False}),
                                      ((4,), {'eps': 1e-3})])
def test_layer_norm_module_like_torch(args, kw):
    ln, ln_t = nn.LayerNorm(*args, **kw).double(), torch.nn.LayerNorm(*args, **kw).double()
    assert repr(ln) == repr(ln_t)
    assert [n for n, _ in ln.named_parameters()] == [n for n, _ in ln_t.named_parameters()]
    for (n, p), p_t in zip(ln.named_parameters(), ln_t.parameters()):
        assert p.shape == tuple(p_t.shape)
        with fs.no_grad(): p.copy_(fs.tensor(RNG.standard_normal(p.shape)))
        with torch.no_grad(): p_t.copy_(torch.tensor(p.detach().numpy()))
    x = RNG.standard_normal((3, 2, 4))
    xs, xs_t = fs.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (ln(xs) ** 2).sum().backward(); (ln_t(xs_t) ** 2).sum().backward()
    check_close(xs.grad, xs_t.grad, rtol=1e-10, atol=1e-12)
    for (n, p), p_t in zip(ln.named_parameters(), ln_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-10, name=n)


BN_VARIANTS = [{}, {'momentum': None}, {'affine': False}, {'bias': False}, {'track_running_stats': False}, {'momentum': 0.5, 'eps': 1e-3}]


@pytest.mark.parametrize('kw', BN_VARIANTS, ids=[str(k) for k in BN_VARIANTS])
@pytest.mark.parametrize('shape', [(8, 3), (4, 3, 5)])
def test_batch_norm_module_like_torch(kw, shape):
    bn, bn_t = nn.BatchNorm1d(3, **kw).double(), torch.nn.BatchNorm1d(3, **kw).double()
    assert repr(bn) == repr(bn_t)
    assert [n for n, _ in bn.named_parameters()] == [n for n, _ in bn_t.named_parameters()]
    assert [n for n, _ in bn.named_buffers()] == [n for n, _ in bn_t.named_buffers()]
    if bn.weight is not None:
        w = RNG.standard_normal(3)
        with fs.no_grad(): bn.weight.copy_(fs.tensor(w))
        with torch.no_grad(): bn_t.weight.copy_(torch.tensor(w))
    for mode in ('train', 'train', 'train', 'eval', 'train'):
        bn.train(mode == 'train'); bn_t.train(mode == 'train')
        x = RNG.standard_normal(shape) * 2 + 1
        xs, xs_t = fs.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, out_t = bn(xs), bn_t(xs_t)
        check_close(out, out_t, rtol=1e-10, atol=1e-12)
        (out ** 3).sum().backward(); (out_t ** 3).sum().backward()
        check_close(xs.grad, xs_t.grad, rtol=1e-9, atol=1e-10)
        for (n, p), p_t in zip(bn.named_parameters(), bn_t.parameters()): check_close(p.grad, p_t.grad, rtol=1e-9, atol=1e-10, name=n)
        bn.zero_grad(); bn_t.zero_grad()
    sd, sd_t = bn.state_dict(), bn_t.state_dict()
    assert list(sd) == list(sd_t)
    for k in sd:
        check_close(sd[k], sd_t[k], rtol=1e-12, name=k)
        assert sd[k].dtype.name == str(sd_t[k].dtype).replace('torch.', ''), k


def test_batch_norm_module_buffers_and_errors():
    bn = nn.BatchNorm1d(3)
    assert bn.num_batches_tracked.dtype == np.int64 and bn.num_batches_tracked.shape == ()
    bn.double()
    assert bn.running_mean.dtype == np.float64 and bn.num_batches_tracked.dtype == np.int64
    bn_t = torch.nn.BatchNorm1d(3)
    bn_t(torch.randn(5, 3))
    loaded = nn.BatchNorm1d(3)
    loaded.load_state_dict(bn_t.state_dict())
    check_close(loaded.running_var, bn_t.running_var, rtol=1e-6)
    assert loaded.num_batches_tracked.item() == 1
    for x in ((1, 3), (2, 3, 4, 5)):
        same_error(lambda: nn.BatchNorm1d(3)(fs.ones(*x)), lambda: torch.nn.BatchNorm1d(3)(torch.ones(*x)), ValueError,
                   None if len(x) > 2 else 'Expected more than 1 value per channel when training, got input size')
    nn.BatchNorm1d(3).eval()(fs.ones(1, 3))
    with pytest.raises(RuntimeError, match='CPU only'): nn.BatchNorm1d(3, device='cuda:0')
    with pytest.raises(RuntimeError, match='CPU only'): nn.LayerNorm(3, device='mps')


# ---------------------------------------------------------------- Module.to, devices

def test_module_to_like_torch():
    torch.manual_seed(0)
    def model(lib): return lib.Sequential(lib.Linear(2, 3), lib.BatchNorm1d(3))
    m, m_t = model(nn), model(torch.nn)
    m.load_state_dict(m_t.state_dict())
    m(fs.ones(4, 2)).sum().backward(); m_t(torch.ones(4, 2)).sum().backward()
    pairs = [(lambda x: x.to('cpu'), lambda x: x.to('cpu')), (lambda x: x.to(fs.float64), lambda x: x.to(torch.float64)),
             (lambda x: x.to('cpu', fs.float32), lambda x: x.to('cpu', torch.float32)),
             (lambda x: x.to(dtype=fs.float64, device='cpu'), lambda x: x.to(dtype=torch.float64, device='cpu')),
             (lambda x: x.to(fs.ones(1, dtype=fs.float32)), lambda x: x.to(torch.ones(1, dtype=torch.float32))),
             (lambda x: x.to(torch.device('cpu')), lambda x: x.to(torch.device('cpu'))), (lambda x: x.cpu(), lambda x: x.cpu()),
             (lambda x: x.double(), lambda x: x.double()), (lambda x: x.to('cpu:0', non_blocking=True), lambda x: x.to('cpu:0', non_blocking=True))]
    for ours, theirs in pairs:
        assert ours(m) is m and theirs(m_t) is m_t
        for (n, t), (_, t_t) in zip(list(m.state_dict(keep_vars=True).items()), list(m_t.state_dict(keep_vars=True).items())):
            assert t.dtype.name == str(t_t.dtype).replace('torch.', ''), n
        for p, p_t in zip(m.parameters(), m_t.parameters()): assert p.grad.dtype.name == str(p_t.grad.dtype).replace('torch.', '')
    class CpuDevice: type = 'cpu'
    assert m.to(CpuDevice()) is m and m.to(np.float32) is m and m[0].weight.dtype == np.float32


@pytest.mark.parametrize('device', ['cuda', 'cuda:0', 'mps', 0])
def test_module_to_refuses_other_devices(device):
    m = nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match='CPU only'): m.to(device)
    with pytest.raises(RuntimeError, match='CPU only'): nn.Linear(2, 2, device=device)


def test_module_to_meta_but_not_a_layer_made_there():
    assert nn.Linear(2, 2).to(torch.device('meta')).weight.is_meta     # a torch device object is read by its type
    with pytest.raises(RuntimeError, match='CPU only'): nn.Linear(2, 2, device='meta')


def test_module_to_errors():
    same_error(lambda: nn.Linear(2, 2).to(fs.int64), lambda: torch.nn.Linear(2, 2).to(torch.int64), TypeError,
               'nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=')
    with pytest.raises(TypeError, match='unexpected keyword argument'): nn.Linear(2, 2).to(colour='red')


def test_linear_signature_takes_device_then_dtype():
    lin = nn.Linear(2, 3, True, 'cpu', fs.float64)
    assert lin.weight.dtype == np.float64 and lin.bias.dtype == np.float64
    assert nn.Linear(2, 3, device=torch.device('cpu')).weight.dtype == np.float32


# ---------------------------------------------------------------- backward hooks

def hook_log(lib, build, inputs, loss=lambda out: (out ** 2).sum(), hooks=('full', 'pre', 'children')):
    "Run `build(lib)` on `inputs` with logging backward hooks; return what the hooks saw (names, shapes, values)."
    torch.manual_seed(0)
    model = build(lib)
    torch.manual_seed(0)
    log = []
    def arr(g): return None if g is None else np.asarray(g.detach().numpy() if hasattr(g, 'detach') else g, dtype=np.float64)
    def full(m, gi, go): log.append(('full', type(m).__name__, [arr(g) for g in gi], [arr(g) for g in go]))
    def pre(m, go): log.append(('pre', type(m).__name__, [arr(g) for g in go]))
    if 'full' in hooks: model.register_full_backward_hook(full)
    if 'pre' in hooks: model.register_full_backward_pre_hook(pre)
    if 'children' in hooks:
        for child in model.children(): child.register_full_backward_hook(full)
    T = fs if lib is nn else torch
    if lib is nn:                                         # torch's weights, loaded into ours
        model.load_state_dict(build(torch.nn).state_dict())
    xs = [T.tensor(x, requires_grad=rg) if isinstance(x, np.ndarray) else x for x, rg in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        loss(model(*xs)).backward()
    grads = [arr(x.grad) if hasattr(x, 'grad') else None for x in xs]
    return log, grads, model


def same_log(a, b):
    assert len(a) == len(b), (len(a), len(b))
    for u, v in zip(a, b):
        assert u[:2] == v[:2], (u[:2], v[:2])
        for p, q in zip(sum(u[2:], []), sum(v[2:], [])):
            assert (p is None) == (q is None), (u[:2], p, q)
            if p is not None: check_close(p, q, rtol=1e-5, atol=1e-6)


def seq(lib): return lib.Sequential(lib.Linear(3, 4), lib.ReLU(), lib.Linear(4, 2))


class Two:
    def __call__(self, lib):
        class TwoArgs(lib.Module):
            def forward(self, a, b, k=3): return a * b * k
        return TwoArgs()


class Split:
    def __call__(self, lib):
        class TwoOutputs(lib.Module):
            def forward(self, a): return a * 2, a * 3, 7
        return TwoOutputs()


X3 = RNG.standard_normal((5, 3)).astype(np.float32)
A2, B2 = np.array([1.5, -2.0], np.float32), np.array([0.5, 3.0], np.float32)
HOOK_CASES = {
    'sequential': (seq, [(X3, True)], lambda out: (out ** 2).sum()),
    'sequential_input_without_grad': (seq, [(X3, False)], lambda out: (out ** 2).sum()),
    'linear': (lambda lib: lib.Linear(3, 2), [(X3, True)], lambda out: (out ** 3).sum()),
    'two_args': (Two(), [(A2, True), (B2, False)], lambda out: out.sum()),
    'two_args_swapped': (Two(), [(A2, False), (B2, True)], lambda out: (out * out).sum()),
    'two_args_number': (Two(), [(A2, True), (5.0, None)], lambda out: out.sum()),
    'same_tensor_twice': (Two(), [(A2, True), (A2, True)], lambda out: out.sum()),
    'tuple_output_one_used': (Split(), [(A2, True)], lambda out: out[0].sum()),
    'tuple_output_both_used': (Split(), [(A2, True)], lambda out: (out[0] * out[1]).sum()),
}


@pytest.mark.parametrize('case', list(HOOK_CASES))
def test_backward_hooks_like_torch(case):
    build, inputs, loss = HOOK_CASES[case]
    log, grads, _ = hook_log(nn, build, inputs, loss)
    log_t, grads_t, _ = hook_log(torch.nn, build, inputs, loss)
    same_log(log, log_t)
    for g, g_t in zip(grads, grads_t):
        assert (g is None) == (g_t is None)
        if g is not None: check_close(g, g_t, rtol=1e-5, atol=1e-6)


def test_backward_hooks_replace_gradients_like_torch():
    for lib, T in ((nn, fs), (torch.nn, torch)):
        torch.manual_seed(0)
        lin = seq(lib)
        x = T.tensor(X3, requires_grad=True)
        lin(x).sum().backward()
        plain = x.grad.clone() if T is torch else fs.tensor(x.grad.numpy())
        x.grad = None
        with lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 3,)):
            lin(x).sum().backward()
        check_close(x.grad, 3 * plain.numpy(), rtol=1e-6)
        x.grad = None
        with lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,)), lin[0].register_full_backward_hook(lambda m, gi, go: (gi[0] + 1,)):
            lin(x).sum().backward()
        check_close(x.grad, 2 * plain.numpy() + 1, rtol=1e-6)
        x.grad = None
        seen = []
        lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0 + 5,))
        lin.register_full_backward_hook(lambda m, gi, go: seen.append(gi[0].numpy().copy()))     # sees the replacement
        lin(x).sum().backward()
        assert (seen[0] == 5).all() and (x.grad.numpy() == 5).all()


def test_backward_hook_errors_like_torch():
    for make_hook, register, match in ((lambda: (lambda m, gi, go: (gi[0], gi[0])), 'register_full_backward_hook',
                                        'Backward hook returned an invalid number of grad_input, got 2, but expected 1'),
                                       (lambda: (lambda m, go: (go[0], go[0])), 'register_full_backward_pre_hook',
                                        'Backward pre hook returned an invalid number of grad_output, got 2, but expected 1')):
        for lib, T in ((nn, fs), (torch.nn, torch)):
            lin = lib.Linear(3, 2)
            getattr(lin, register)(make_hook())
            with pytest.raises(RuntimeError, match=match): lin(T.ones(2, 3, requires_grad=True)).sum().backward()


def test_backward_hooks_remove_no_grad_frozen_and_warning():
    calls = []
    lin = nn.Linear(3, 2)
    h = lin.register_full_backward_hook(lambda m, gi, go: calls.append('full'))
    p = lin.register_full_backward_pre_hook(lambda m, go: calls.append('pre'))
    x = fs.ones(2, 3, requires_grad=True)
    lin(x).sum().backward()
    assert calls == ['pre', 'full']
    with fs.no_grad(): assert not lin(x).requires_grad
    h.remove(); p.remove()
    lin(x).sum().backward()
    assert calls == ['pre', 'full'] and not lin._backward_hooks and not lin._backward_pre_hooks
    frozen = nn.Linear(3, 2).requires_grad_(False)
    frozen.register_full_backward_hook(lambda *a: calls.append('frozen'))
    assert not frozen(fs.ones(1, 3)).requires_grad and calls == ['pre', 'full']
    lin.register_full_backward_hook(lambda m, gi, go: calls.append(gi))
    for lib, T in ((nn, fs), (torch.nn, torch)):
        m = lib.Linear(3, 2)
        m.register_full_backward_hook(lambda *a: None)
        with pytest.warns(UserWarning, match='Full backward hook is firing when gradients are computed with respect to module outputs'):
            m(T.ones(1, 3)).sum().backward()


def test_backward_hooks_with_forward_hooks_and_two_calls():
    torch.manual_seed(0)
    state = torch.nn.Linear(3, 3).state_dict()
    for lib, T in ((nn, fs), (torch.nn, torch)):
        lin = lib.Linear(3, 3)
        lin.load_state_dict(state)
        seen = []
        lin.register_forward_hook(lambda m, args, out: out * 2)
        lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi[0].detach().numpy().copy(), go[0].detach().numpy().copy())))
        x = T.tensor(X3, requires_grad=True)
        (lin(lin(x)) ** 2).sum().backward()
        if lib is nn: ours = seen
        else: theirs = seen
    assert len(ours) == len(theirs) == 2
    for (a, b), (c, d) in zip(ours, theirs): check_close(a, c, rtol=1e-5); check_close(b, d, rtol=1e-5)


def test_backward_hooks_second_derivative_like_torch():
    torch.manual_seed(0)
    state = torch.nn.Linear(3, 2).double().state_dict()
    def grads(lib, T):
        lin = lib.Linear(3, 2).double()
        lin.load_state_dict(state)
        lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))
        x = T.tensor(X3.astype(np.float64), requires_grad=True)
        g, = T.autograd.grad((lin(x) ** 3).sum(), x, create_graph=True)
        g2, = T.autograd.grad((g ** 2).sum(), x)
        return g.detach().numpy(), g2.numpy()
    for a, b in zip(grads(nn, fs), grads(torch.nn, torch)): check_close(a, b, rtol=1e-10)


# ---------------------------------------------------------------- nn.utils: gradient clipping

def test_nn_utils_is_a_module_path():
    utils = importlib.import_module('fromscratch.nn.utils')
    assert fs.nn.utils is utils and nn.utils.clip_grad_norm_ is utils.clip_grad_norm_
    from fromscratch.nn.utils import clip_grad_norm_, clip_grad_value_   # noqa: F401


def params_with_grads(dtype=np.float32, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (), (2, 1, 3)]
    ours, theirs = [], []
    for s in shapes:
        w, g = rng.standard_normal(s).astype(dtype), (rng.standard_normal(s) * scale).astype(dtype)
        w, g = np.asarray(w), np.asarray(g)                  # arrays, also for shape (): dtypes as given
        p, p_t = fs.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
        p.grad, p_t.grad = fs.tensor(g), torch.tensor(g)
        ours.append(p); theirs.append(p_t)
    extra, extra_t = fs.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)    # no gradient: left alone
    return ours + [extra], theirs + [extra_t]


@pytest.mark.parametrize('norm_type', [2.0, 1, 3.5, math.inf, -math.inf, 0, '2'])
@pytest.mark.parametrize('max_norm', [0.1, 2.0, 1e6])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_clip_grad_norm_like_torch(norm_type, max_norm, dtype):
    ours, theirs = params_with_grads(dtype)
    n, n_t = nn.utils.clip_grad_norm_(ours, max_norm, float(norm_type)), torch.nn.utils.clip_grad_norm_(theirs, max_norm, float(norm_type))
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    check_close(n, n_t, rtol=rtol)
    assert isinstance(n, Tensor) and n.shape == () and n.dtype == dtype
    for p, p_t in zip(ours, theirs):
        if p_t.grad is None: assert p.grad is None; continue
        check_close(p.grad, p_t.grad, rtol=rtol, atol=1e-30)


def test_clip_grad_norm_one_tensor_no_grads_and_nonfinite():
    ours, theirs = params_with_grads(scale=50.0)
    check_close(nn.utils.clip_grad_norm_(ours[0], 1.0), torch.nn.utils.clip_grad_norm_(theirs[0], 1.0), rtol=1e-6)
    check_close(ours[0].grad, theirs[0].grad, rtol=1e-6)
    empty, empty_t = nn.utils.clip_grad_norm_([fs.ones(2, requires_grad=True)], 1.0), torch.nn.utils.clip_grad_norm_([torch.ones(2, requires_grad=True)], 1.0)
    assert empty.item() == empty_t.item() == 0.0 and empty.dtype == np.float32
    assert nn.utils.clip_grad_norm_([], 1.0).item() == 0.0
    for bad in (math.inf, math.nan):
        p, p_t = fs.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
        p.grad, p_t.grad = fs.tensor([bad, 1.0]), torch.tensor([bad, 1.0])
        same_error(lambda: nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True),
                   lambda: torch.nn.utils.clip_grad_norm_(p_t, 1.0, error_if_nonfinite=True), RuntimeError)
        check_close(nn.utils.clip_grad_norm_(p, 1.0), torch.nn.utils.clip_grad_norm_(p_t, 1.0))
        check_close(p.grad, p_t.grad)


def test_clip_grad_norm_bumps_versions_and_keeps_objects():
    ours, _ = params_with_grads(scale=10.0)
    grads, versions = [p.grad for p in ours[:-1]], [p.grad.version_counter.value for p in ours[:-1]]
    nn.utils.clip_grad_norm_(ours, 0.5)
    assert all(p.grad is g for p, g in zip(ours, grads))
    assert all(p.grad.version_counter.value > v for p, v in zip(ours, versions))
    total = math.sqrt(sum(float((p.grad.numpy().astype(np.float64) ** 2).sum()) for p in ours[:-1]))
    assert abs(total - 0.5) < 1e-5


@pytest.mark.parametrize('clip_value', [0.1, 1, 100.0])
def test_clip_grad_value_like_torch(clip_value):
    ours, theirs = params_with_grads(np.float64, scale=2.0)
    assert nn.utils.clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    for p, p_t in zip(ours, theirs):
        if p_t.grad is not None: check_close(p.grad, p_t.grad, rtol=0)
    single, single_t = params_with_grads(np.float32, scale=5.0)
    nn.utils.clip_grad_value_(single[0], clip_value); torch.nn.utils.clip_grad_value_(single_t[0], clip_value)
    check_close(single[0].grad, single_t[0].grad, rtol=0)
    assert single[0].grad.dtype == np.float32


# ---------------------------------------------------------------- names, and numerical second derivatives of the compositions

def test_namespaces():
    for name in ('ModuleList', 'ModuleDict', 'Dropout', 'Identity', 'Flatten', 'Softmax', 'LogSoftmax', 'LeakyReLU', 'GELU', 'SiLU',
                 'Embedding', 'LayerNorm', 'BatchNorm1d', 'L1Loss', 'BCELoss', 'BCEWithLogitsLoss', 'MSELoss', 'NLLLoss', 'CrossEntropyLoss'):
        assert issubclass(getattr(nn, name), nn.Module) and hasattr(torch.nn, name), name
    for name in ('one_hot', 'dropout', 'gelu', 'silu', 'leaky_relu', 'layer_norm', 'batch_norm', 'l1_loss', 'binary_cross_entropy',
                 'binary_cross_entropy_with_logits', 'embedding', 'cross_entropy', 'nll_loss'):
        assert callable(getattr(F, name)) and hasattr(TF, name), name
    for name in ('to', 'cpu', 'double', 'float', 'requires_grad_', 'named_modules', 'extra_repr', 'register_buffer', 'named_buffers',
                 'register_full_backward_hook', 'register_full_backward_pre_hook'):
        assert callable(getattr(nn.Module, name)), name


COMPOSED = {   # the functions built from other operations: autograd's second derivatives against finite differences
    'silu': (lambda x: F.silu(x), [(3, 4)]),
    'leaky_relu': (lambda x: F.leaky_relu(x * x - 0.5, 0.2) * x, [(3, 4)]),
    'layer_norm': (lambda x, w, b: F.layer_norm(x, (4,), w, b), [(3, 4), (4,), (4,)]),
    'batch_norm': (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(5, 3), (3,), (3,)]),
    'l1_loss': (lambda x, y: F.l1_loss(x * x, y, reduction='sum'), [(3, 4), (3, 4)]),
    'embedding': (lambda w: F.embedding(fs.tensor([[0, 2, 2], [1, 0, 3]]), w * w), [(4, 3)]),   # (a padding row's zero gradient is no derivative)
    'dropout': (lambda x: (fs.manual_seed(0), F.dropout(x * x, 0.4))[1], [(3, 4)]),
    'soft_cross_entropy': (lambda x, q: F.cross_entropy(x, q.softmax(1), label_smoothing=0.2), [(3, 4), (3, 4)]),
}


@pytest.mark.parametrize('name', list(COMPOSED))
def test_composed_second_derivatives_numerically(name):
    fn, shapes = COMPOSED[name]
    rng = np.random.default_rng(1)
    inputs = [fs.tensor(rng.uniform(0.2, 1.5, s) * rng.choice([-1, 1], s), requires_grad=True) for s in shapes]
    assert fs.autograd.gradcheck(fn, inputs)
    assert fs.autograd.gradgradcheck(fn, inputs)
