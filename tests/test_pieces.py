"""split, chunk, unbind, tensor_split and repeat_interleave (07_ops, the pieces family) against torch: the
pieces over shapes, dims (negative too), sizes and dtypes, each a view with torch's node name; gradients in
float64 (unused pieces get zeros; gradcheck and second order); forward mode; vmap against torch.func.vmap,
with the batching rules of sort, argsort, topk, tril, triu and index_select; nanoGPT's attention, split into
q, k, v, gradients included; torch's refusal to change a piece in place; torch's errors in torch's words."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwAD

import fromscratch as fs
import fromscratch.nn as nn
from fromscratch import func
from fromscratch.autograd import forward_ad as fwAD
from fromscratch.testing import compare_errors, error_of

SHAPES = [(5,), (4, 6), (2, 3, 5), (0, 3), (3, 0, 2)]
DTYPES = ['float32', 'float64', 'int64', 'bool']


def data(shape, dtype='float64', seed=0):
    "Numbers of `shape` in `dtype`, different enough that a piece in the wrong place shows."
    a = np.random.default_rng(seed).standard_normal(shape) * 3
    return (a > 0) if dtype == 'bool' else a.astype(dtype)


def dims_of(shape):
    "Every dimension of `shape`, from the front and from the back."
    return list(range(-len(shape), len(shape)))


def same_pieces(ours, theirs):
    "Two tuples of pieces: as many, each of the same shape, dtype and values."
    assert type(ours) is tuple and type(theirs) is tuple
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape)
        assert str(t.dtype) == str(o.dtype).replace('fromscratch', 'torch')
        np.testing.assert_array_equal(o.numpy(), t.numpy())


def all_views(pieces, x):
    "Every piece shares memory with `x` (an empty one has none to share)."
    return all(np.shares_memory(p.array, x.array) or p.numel() == 0 or x.numel() == 0 for p in pieces)


# ---------------------------------------------------------------------------------------------------------------
# the pieces: values, shapes, dtypes, views

def sizes_to_try(n):
    """What to split a dimension of `n` by: every int size torch accepts there and one past it, and lists
    (and tuples) of sizes adding up to `n`, with zeros among them."""
    lists = [[n], [0, n], [n, 0, 0]]
    if n >= 2: lists += [[1, n - 1], [n - 2, 1, 1]]
    if n >= 3: lists += [[1, 1, n - 2], [2, 0, n - 2]]
    return ([0] if n == 0 else list(range(1, n + 2))) + lists + [tuple(s) for s in lists]


def cut_like_torch(name, shape, dtype, arguments):
    """`name` (split, chunk, tensor_split) as a function and as a method, along every dimension, by each of
    `arguments(n)` (an array: as a tensor): torch's pieces, each a view of the tensor."""
    a = data(shape, dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    for dim in dims_of(shape):
        for arg in arguments(shape[dim]):
            mine, its = (L.tensor(arg) if isinstance(arg, np.ndarray) else arg for L in (fs, torch))
            ours = getattr(fs, name)(x, mine, dim)
            same_pieces(ours, getattr(torch, name)(tx, its, dim))
            same_pieces(getattr(x, name)(mine, dim=dim), getattr(tx, name)(its, dim=dim))
            assert all_views(ours, x)


def index_lists(n):
    "Cut positions for `tensor_split` along a dimension of `n`: sorted, unsorted, negative, past the end."
    return [[], [0], [n], [1], [1, 1], [n // 2, n], [n, 0], [-1], [-n, 1], [2, -1], [n + 3], [1, n + 1, 2]]


def tensor_cuts(n):
    "`tensor_split`'s arguments: sections and indices, as ints, lists, tuples and int64 tensors."
    sections, indices = list(range(1, n + 4)), index_lists(n)
    return (sections + indices + [tuple(i) for i in indices] + [np.array(k) for k in sections]
            + [np.array(i, dtype=np.int64) for i in indices])


@pytest.mark.parametrize('shape', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('name, arguments', [('split', sizes_to_try), ('chunk', lambda n: range(1, n + 4)),
                                             ('tensor_split', tensor_cuts)], ids=['split', 'chunk', 'tensor_split'])
def test_cuts_like_torch(shape, dtype, name, arguments):
    "chunk: fewer chunks than asked where the size does not allow as many; of an empty dimension, all, empty."
    cut_like_torch(name, shape, dtype, arguments)


@pytest.mark.parametrize('shape', SHAPES + [(1,), (1, 1, 1)], ids=str)
@pytest.mark.parametrize('dtype', DTYPES)
def test_unbind_like_torch(shape, dtype):
    a = data(shape, dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    for dim in dims_of(shape):
        ours = fs.unbind(x, dim)
        same_pieces(ours, torch.unbind(tx, dim))
        same_pieces(x.unbind(dim=dim), tx.unbind(dim=dim))
        assert all_views(ours, x)
    same_pieces(x.unbind(), tx.unbind())
    if shape[0]:  # iterating gives the same rows
        for row, piece in zip(x, x.unbind()): np.testing.assert_array_equal(row.numpy(), piece.numpy())


def test_sizes_given_as_tensors_and_numpy_ints():
    a = data((5, 6))
    x, tx = fs.tensor(a), torch.tensor(a)
    same_pieces(x.split(fs.tensor(2)), tx.split(torch.tensor(2)))
    same_pieces(x.split(fs.tensor(2.7)), tx.split(torch.tensor(2.7)))   # torch cuts a float size to an int
    same_pieces(x.split([fs.tensor(2), 3]), tx.split([torch.tensor(2), 3]))
    same_pieces(x.split([np.int64(1), 4]), tx.split([np.int64(1), 4]))
    same_pieces(x.chunk(np.int64(2), np.int64(1)), tx.chunk(np.int64(2), np.int64(1)))
    same_pieces(x.unbind(np.int64(1)), tx.unbind(np.int64(1)))
    same_pieces(x.tensor_split((1, fs.tensor(3))), tx.tensor_split((1, torch.tensor(3))))
    same_pieces(x.tensor_split(np.int64(4), 1), tx.tensor_split(np.int64(4), 1))


def test_keyword_arguments_like_torch():
    a = data((4, 6))
    x, tx = fs.tensor(a), torch.tensor(a)
    same_pieces(fs.split(x, split_size_or_sections=4, dim=1), torch.split(tx, split_size_or_sections=4, dim=1))
    same_pieces(fs.split(tensor=x, split_size_or_sections=[1, 3]), torch.split(tensor=tx, split_size_or_sections=[1, 3]))
    same_pieces(x.split(split_size=3, dim=-1), tx.split(split_size=3, dim=-1))
    same_pieces(fs.chunk(input=x, chunks=3, dim=1), torch.chunk(input=tx, chunks=3, dim=1))
    same_pieces(fs.unbind(input=x, dim=1), torch.unbind(input=tx, dim=1))
    same_pieces(fs.tensor_split(x, 3, dim=1), torch.tensor_split(tx, 3, dim=1))


def test_a_piece_is_a_view_of_the_tensor():
    "Writing into a piece (nothing recorded) writes into the tensor, and the versions are shared, as in torch."
    ours, theirs = fs.zeros(4, 6), torch.zeros(4, 6)
    for x in (ours, theirs):
        x.split(2)[1].add_(1); x.chunk(3, 1)[2].add_(2); x.unbind(1)[0].add_(3); x.tensor_split([1, 3])[2].add_(4)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours._version == theirs._version


# ---------------------------------------------------------------------------------------------------------------
# node names, gradients, forward mode

CUTS = {
    'split(2)': lambda x: x.split(2),
    'split(2, 1)': lambda x: x.split(2, 1),
    'split(10, -1)': lambda x: x.split(10, -1),
    'split([1, 0, 3])': lambda x: x.split([1, 0, 3]),
    'split([2, 4], -1)': lambda x: x.split([2, 4], -1),
    'chunk(3)': lambda x: x.chunk(3),
    'chunk(4, 1)': lambda x: x.chunk(4, 1),
    'unbind()': lambda x: x.unbind(),
    'unbind(-1)': lambda x: x.unbind(-1),
    'tensor_split(3, 1)': lambda x: x.tensor_split(3, 1),
    'tensor_split([1, -1])': lambda x: x.tensor_split([1, -1]),
}


@pytest.mark.parametrize('name', list(CUTS))
def test_node_names_like_torch(name):
    "One node for all the pieces of a cut (each its own output of it); tensor_split: one slice node per piece."
    a = data((4, 6))
    x, tx = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ours, theirs = CUTS[name](x), CUTS[name](tx)
    assert [p.grad_fn.name() for p in ours] == [p.grad_fn.name() for p in theirs]
    if not name.startswith('tensor_split'):
        assert len({id(p.grad_fn) for p in ours}) == 1
        assert [p._output_nr for p in ours] == [p.output_nr for p in theirs]
    assert all(not p.is_leaf and p.requires_grad for p in ours)


def test_chunk_of_an_empty_dimension_is_split_with_sizes_like_torch():
    x, tx = fs.zeros(0, 3, requires_grad=True), torch.zeros(0, 3, requires_grad=True)
    for cut in (lambda x: x.chunk(3), lambda x: x.chunk(2, 1), lambda x: x.split(0), lambda x: x.split(2)):
        assert [p.grad_fn.name() for p in cut(x * 1)] == [p.grad_fn.name() for p in cut(tx * 1)]


def weighted(pieces, used):
    "A scalar of the pieces at positions `used`, each element weighted differently (the others unused)."
    total = 0
    for i in used:
        p = pieces[i]
        w = np.linspace(1.0, 2.0, p.numel()).reshape(tuple(p.shape)) * (i + 1)
        total = total + (p * p * (fs.tensor(w) if isinstance(p, fs.Tensor) else torch.tensor(w))).sum()
    return total


@pytest.mark.parametrize('name', list(CUTS))
def test_gradients_in_float64_like_torch(name):
    "Every piece used, or only some (the others' gradients are zeros), in float64."
    a = data((4, 6), seed=1)
    n = len(CUTS[name](torch.tensor(a)))
    for used in (range(n), [n - 1], [0, n - 1][: min(n, 2)], [i for i in range(n) if i % 2]):
        if not list(used): continue
        x, tx = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        weighted(CUTS[name](x), used).backward()
        weighted(CUTS[name](tx), used).backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize('name', list(CUTS))
def test_gradcheck_and_second_order(name):
    a = data((4, 6), seed=2)
    f = lambda x: fs.stack([p.sum() * p.mean() for p in CUTS[name](x) if p.numel()])
    x = fs.tensor(a, requires_grad=True)
    assert fs.autograd.gradcheck(f, (x,))
    assert fs.autograd.gradgradcheck(f, (x,))


def test_gradients_through_a_view_of_a_transposed_tensor():
    a = data((3, 5), seed=3)
    x, tx = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for t in (x, tx):
        q, k = t.t().split([2, 3])
        (q.sum(0) * k[:2].sum(0) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)


@pytest.mark.parametrize('name', list(CUTS))
def test_forward_mode_like_torch(name):
    "The tangent of each piece is the same piece of the tangent (torch.func.jvp and dual tensors)."
    rng = np.random.default_rng(4)
    a, v = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    ours = func.jvp(lambda x: CUTS[name](x), (fs.tensor(a),), (fs.tensor(v),))
    theirs = torch.func.jvp(lambda x: CUTS[name](x), (torch.tensor(a),), (torch.tensor(v),))
    for o, t in zip(ours, theirs): same_pieces(tuple(o), tuple(t))
    with fwAD.dual_level():
        pieces = CUTS[name](fwAD.make_dual(fs.tensor(a), fs.tensor(v)))
        tangents = tuple(fwAD.unpack_dual(p).tangent for p in pieces)
    with tfwAD.dual_level():
        tpieces = CUTS[name](tfwAD.make_dual(torch.tensor(a), torch.tensor(v)))
        ttangents = tuple(tfwAD.unpack_dual(p).tangent for p in tpieces)
    same_pieces(tangents, ttangents)


# ---------------------------------------------------------------------------------------------------------------
# nanoGPT's attention: q, k, v = self.c_attn(x).split(self.n_embd, dim=2)

def attention_block(lib, n_embd=8, n_head=2, seed=0):
    "nanoGPT's CausalSelfAttention, written for either library, with the same float64 weights."
    class CausalSelfAttention(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = lib.nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = lib.nn.Linear(n_embd, n_embd)
            self.n_head, self.n_embd = n_head, n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
            mask = lib.tril(lib.ones(T, T)).view(1, 1, T, T)
            att = att.masked_fill(mask == 0, float('-inf')).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    block = CausalSelfAttention()
    rng = np.random.default_rng(seed)
    for name, p in block.named_parameters():
        with lib.no_grad(): p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    return block


def test_nanogpt_attention_splits_q_k_v_like_torch():
    ours, theirs = attention_block(fs).double(), attention_block(torch).double()
    a = np.random.default_rng(9).standard_normal((2, 5, 8))
    x, tx = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    w = np.random.default_rng(10).standard_normal((2, 5, 8))
    (y * fs.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == tn
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


# ---------------------------------------------------------------------------------------------------------------
# repeat_interleave

@pytest.mark.parametrize('shape', [(), (3,), (2, 3), (2, 0, 3), (2, 3, 2)], ids=str)
@pytest.mark.parametrize('dtype', DTYPES)
def test_repeat_interleave_by_an_int_like_torch(shape, dtype):
    a = data(shape, dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    for repeats in (0, 1, 3):
        for dim in [None] + dims_of(shape):
            ours, theirs = x.repeat_interleave(repeats, dim), tx.repeat_interleave(repeats, dim)
            same_pieces((ours,), (theirs,))
            same_pieces((fs.repeat_interleave(x, repeats, dim=dim),), (torch.repeat_interleave(tx, repeats, dim=dim),))


@pytest.mark.parametrize('shape', [(), (3,), (2, 3), (2, 0, 3), (2, 3, 2)], ids=str)
@pytest.mark.parametrize('dtype', DTYPES)
def test_repeat_interleave_by_counts_like_torch(shape, dtype):
    a = data(shape, dtype)
    x, tx = fs.tensor(a), torch.tensor(a)
    rng = np.random.default_rng(5)
    for dim in [None] + (dims_of(shape) if shape else []):
        n = int(np.prod(shape)) if dim is None else shape[dim]
        for counts in (rng.integers(0, 4, n), np.array([2]), np.array(3), rng.integers(0, 3, n).astype(np.int32)):
            ours = x.repeat_interleave(fs.tensor(counts), dim)
            same_pieces((ours,), (tx.repeat_interleave(torch.tensor(counts), dim),))
            total = int(np.broadcast_to(counts.reshape(-1), (n,)).sum())
            same_pieces((x.repeat_interleave(fs.tensor(counts), dim, output_size=total),),
                        (tx.repeat_interleave(torch.tensor(counts), dim, output_size=total),))


def test_repeat_interleave_of_counts_alone_gives_positions_like_torch():
    for counts in ([2, 0, 3], [], [1], [0, 0]):
        for dtype in ('int64', 'int32'):
            c = np.array(counts, dtype=dtype)
            same_pieces((fs.repeat_interleave(fs.tensor(c)),), (torch.repeat_interleave(torch.tensor(c)),))
            same_pieces((fs.tensor(c).repeat_interleave(),), (torch.repeat_interleave(torch.tensor(c)),))
    same_pieces((fs.repeat_interleave(fs.tensor([1, 2]), output_size=3),),
                (torch.repeat_interleave(torch.tensor([1, 2]), output_size=3),))


REPEATS = {
    'repeat_interleave(2)': lambda L, x: x.repeat_interleave(2),
    'repeat_interleave(3, 1)': lambda L, x: x.repeat_interleave(3, 1),
    'repeat_interleave(2, -1)': lambda L, x: x.repeat_interleave(2, dim=-1),
    'repeat_interleave(0, 0)': lambda L, x: x.repeat_interleave(0, 0),
    'repeat_interleave(counts, 0)': lambda L, x: x.repeat_interleave(L.tensor([2, 0, 3]), 0),
    'repeat_interleave(counts, 1)': lambda L, x: x.repeat_interleave(L.tensor([1, 3, 0, 2]), 1),
    'repeat_interleave(counts)': lambda L, x: x.repeat_interleave(L.tensor(np.arange(12) % 3)),
    'repeat_interleave(one count, 0)': lambda L, x: x.repeat_interleave(L.tensor([2]), 0),
}


@pytest.mark.parametrize('name', list(REPEATS))
def test_repeat_interleave_gradients_nodes_and_forward_mode_like_torch(name):
    rng = np.random.default_rng(6)
    a, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x, tx = fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = REPEATS[name](fs, x), REPEATS[name](torch, tx)
    assert y.grad_fn.name() == ty.grad_fn.name()
    w = np.linspace(1.0, 2.0, ty.numel()).reshape(tuple(ty.shape))
    (y * y * fs.tensor(w)).sum().backward()
    (ty * ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)
    f = lambda x: REPEATS[name](fs, x) * 2
    if ty.numel():  # (an empty output has nothing to check)
        assert fs.autograd.gradcheck(f, (fs.tensor(a, requires_grad=True),))
        assert fs.autograd.gradgradcheck(lambda x: f(x) ** 2, (fs.tensor(a, requires_grad=True),))
    ours = func.jvp(lambda x: REPEATS[name](fs, x), (fs.tensor(a),), (fs.tensor(v),))
    theirs = torch.func.jvp(lambda x: REPEATS[name](torch, x), (torch.tensor(a),), (torch.tensor(v),))
    same_pieces(tuple(ours), tuple(theirs))


# ---------------------------------------------------------------------------------------------------------------
# vmap, against torch.func.vmap

def check_vmap(f, arrays, in_dims=0, tol=0.0):
    "vmap(f) on our tensors and torch.func.vmap(f) on torch's (f takes the library first) agree."
    ours = func.vmap(lambda *t: f(fs, *t), in_dims=in_dims)(*[fs.tensor(a) for a in arrays])
    theirs = torch.func.vmap(lambda *t: f(torch, *t), in_dims=in_dims)(*[torch.tensor(a) for a in arrays])
    ours, theirs = (ours if isinstance(ours, tuple) else (ours,)), (theirs if isinstance(theirs, tuple) else (theirs,))
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape) and str(t.dtype) == str(o.dtype).replace('fromscratch', 'torch')
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=tol, atol=tol)


VMAPPED = {
    'split(2, 1)': lambda L, t: t.split(2, 1),
    'split([1, 3], -2)': lambda L, t: t.split([1, 3], -2),
    'split(3)': lambda L, t: L.split(t, 3),
    'chunk(2, -1)': lambda L, t: t.chunk(2, -1),
    'chunk(3, 0)': lambda L, t: L.chunk(t, 3, 0),
    'unbind(1)': lambda L, t: t.unbind(1),
    'unbind(-2)': lambda L, t: L.unbind(t, -2),
    'tensor_split(2, 1)': lambda L, t: t.tensor_split(2, 1),
    'tensor_split([1, -1], -1)': lambda L, t: t.tensor_split([1, -1], -1),
    'repeat_interleave(2, 1)': lambda L, t: t.repeat_interleave(2, 1),
    'repeat_interleave(2)': lambda L, t: t.repeat_interleave(2),
    'repeat_interleave(counts, 0)': lambda L, t: t.repeat_interleave(L.tensor([1, 0, 2, 1]), 0),
    'sort(1)': lambda L, t: tuple(L.sort(t, 1)),
    'sort(-1, descending)': lambda L, t: tuple(t.sort(-1, descending=True)),
    'sort(dim=0, stable=True)': lambda L, t: tuple(t.sort(dim=0, stable=True)),
    'argsort(0)': lambda L, t: L.argsort(t, 0),
    'argsort(-1, descending)': lambda L, t: t.argsort(-1, descending=True),
    'topk(2)': lambda L, t: tuple(t.topk(2)),
    'topk(3, 0, largest=False)': lambda L, t: tuple(L.topk(t, 3, 0, largest=False)),
    'tril()': lambda L, t: L.tril(t),
    'tril(-1)': lambda L, t: t.tril(-1),
    'triu(1)': lambda L, t: L.triu(t, 1),
    'index_select(1, idx)': lambda L, t: L.index_select(t, 1, L.tensor([4, 0, 4])),
    'index_select(-2, idx)': lambda L, t: t.index_select(-2, L.tensor([3, 1])),
}


@pytest.mark.parametrize('name', list(VMAPPED))
@pytest.mark.parametrize('in_dims', [0, 1, 2])
def test_vmap_like_torch(name, in_dims):
    "Samples of shape (4, 5), the batch of 3 along each dimension in turn."
    a = np.moveaxis(data((3, 4, 5), seed=7), 0, in_dims).copy()
    check_vmap(VMAPPED[name], [a], in_dims)


@pytest.mark.parametrize('name', ['split(2, 1)', 'unbind(1)', 'sort(1)', 'topk(2)', 'tril()', 'chunk(2, -1)',
                                  'repeat_interleave(2, 1)', 'tensor_split(2, 1)', 'index_select(1, idx)'])
def test_nested_vmap_like_torch(name):
    a = data((2, 3, 4, 5), seed=8)
    f = VMAPPED[name]
    ours = func.vmap(func.vmap(lambda t: f(fs, t)), in_dims=1)(fs.tensor(a))
    theirs = torch.func.vmap(torch.func.vmap(lambda t: f(torch, t)), in_dims=1)(torch.tensor(a))
    same_pieces(ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,))


@pytest.mark.parametrize('name', ['sort', 'sort(0)', 'argsort', 'topk(1)', 'topk(1, -1, largest=False)'])
def test_vmap_over_0d_samples_sorts_each_number_like_torch(name):
    f = {'sort': lambda L, t: tuple(L.sort(t)), 'sort(0)': lambda L, t: tuple(t.sort(0, descending=True)),
         'argsort': lambda L, t: L.argsort(t), 'topk(1)': lambda L, t: tuple(t.topk(1)),
         'topk(1, -1, largest=False)': lambda L, t: tuple(t.topk(1, -1, largest=False))}[name]
    check_vmap(f, [data((4,), seed=9)])


def test_vmap_over_int_and_bool_samples_like_torch():
    for dtype in ('int64', 'bool'):
        a = data((3, 4, 5), dtype)
        for name in ('split(2, 1)', 'unbind(1)', 'tril()', 'triu(1)', 'repeat_interleave(counts, 0)', 'chunk(3, 0)'):
            check_vmap(VMAPPED[name], [a])
    check_vmap(VMAPPED['sort(1)'], [data((3, 4, 5), 'int64')])


def test_vmap_with_batched_and_shared_arguments():
    "index_select's index and repeat_interleave's counts shared by every sample; the tensor batched or not."
    a, b = data((3, 4, 5), seed=10), data((4, 5), seed=11)
    both = lambda L, t, s: (t.split(2, 1)[0] + s.split(2, 1)[1][:, :2], L.sort(t + s, 0).values)
    check_vmap(both, [a, b], in_dims=(0, None), tol=1e-15)
    check_vmap(lambda L, s, t: L.tril(s) * t.unbind(0)[1], [b, a], in_dims=(None, 0))


def test_per_sample_gradients_through_the_pieces_like_torch():
    "vmap of grad: each sample's gradient through split, unbind, sort, topk, tril and repeat_interleave."
    a, w = data((6, 4, 5), seed=12), data((4, 5), seed=13)

    def loss(L, x, w):
        q, k = (x * w).split([1, 3])
        rows = x.unbind(1)
        v = L.sort(x, 1).values * L.tril(w) + x.topk(2, 0).values.sum(0)
        return (q.sum() * k.sum() + (rows[0] * rows[-1]).sum() + (v ** 2).sum()
                + x.repeat_interleave(L.tensor([2, 0, 1, 1]), 0).pow(2).sum())

    ours = func.vmap(func.grad(lambda x, w: loss(fs, x, w), argnums=(0, 1)), in_dims=(0, None))(
        fs.tensor(a), fs.tensor(w))
    theirs = torch.func.vmap(torch.func.grad(lambda x, w: loss(torch, x, w), argnums=(0, 1)), in_dims=(0, None))(
        torch.tensor(a), torch.tensor(w))
    for o, t in zip(ours, theirs): np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def test_jacrev_and_jacfwd_of_a_split_like_torch():
    a = data((3, 4), seed=14)
    f = lambda x: (lambda p: p[0] * p[1].sum() + p[2] ** 2)(x.split(1))
    for ours_t, theirs_t in ((func.jacrev, torch.func.jacrev), (func.jacfwd, torch.func.jacfwd)):
        o, t = ours_t(f)(fs.tensor(a)), theirs_t(f)(torch.tensor(a))
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-14, atol=1e-14)


def test_vmap_refuses_counts_that_vary_with_the_sample():
    "torch runs them sample by sample (a slow fallback with a warning); we refuse, naming what is missing."
    x, counts = fs.ones(3, 4), fs.tensor([[1, 2, 0, 1]] * 3)
    with pytest.raises(NotImplementedError, match='repeats that vary with the sample'):
        func.vmap(lambda t, c: t.repeat_interleave(c, 0))(x, counts)
    with pytest.raises(NotImplementedError, match='repeats that vary with the sample'):
        func.vmap(lambda c: fs.repeat_interleave(c))(counts)


# ---------------------------------------------------------------------------------------------------------------
# in-place changes of the pieces: torch's refusals

def refusal(lib, how):
    x = lib.tensor(data((4, 6), seed=15), requires_grad=True)
    y = x * 1
    if how == 'mul_ of a split piece': y.split(2)[1].mul_(2)
    elif how == 'add_ of a chunk': y.chunk(3, 1)[0].add_(1)
    elif how == 'zero_ of an unbound row': y.unbind()[2].zero_()
    elif how == 'setitem into a piece': y.split([1, 3])[1][0] = 5.0
    elif how == 'a view of a piece': y.split(2)[0].view(-1).mul_(2)
    elif how == 'a piece of a leaf': x.split(2)[0].mul_(2)
    elif how == 'a piece of an untracked tensor': lib.ones(4, 6).split(2)[0].mul_(x[0])
    elif how == 'base changed, piece used':
        q = y.split(2)[0]
        y.add_(1)
        return q * 2
    elif how == 'sibling changed without grad, piece used':
        q, k = y.split(2)
        with lib.no_grad(): k.add_(1)
        return q * 2
    elif how == 'base changed, unbound row used':
        q = y.unbind(1)[3]
        y.mul_(3)
        return q.sum()


@pytest.mark.parametrize('how', ['mul_ of a split piece', 'add_ of a chunk', 'zero_ of an unbound row',
                                 'setitem into a piece', 'a view of a piece', 'a piece of a leaf',
                                 'a piece of an untracked tensor', 'base changed, piece used',
                                 'sibling changed without grad, piece used', 'base changed, unbound row used'])
def test_changing_a_piece_in_place_is_refused_like_torch(how):
    """The same error; for `piece[0] = value` the same refusal, naming the piece's op where torch names the
    view it writes through (`Select`: torch writes `piece[0]` with `copy_`, ours the piece with `IndexPut`)."""
    same_message = how != 'setitem into a piece'
    compare_errors(lambda: refusal(fs, how), lambda: refusal(torch, how), same_message=same_message)
    if not same_message:
        assert 'This view is the output of a function that returns multiple views.' in error_of(
            lambda: refusal(fs, how))


def test_pieces_change_in_place_where_nothing_is_recorded_like_torch():
    "No grad anywhere, or grad mode off: a piece is written like any view, into its base."
    results = []
    for lib in (fs, torch):
        x = lib.tensor(data((4, 6), seed=16), requires_grad=True)
        z = lib.tensor(data((4, 6), seed=17))
        z.split(2)[0].mul_(2)
        z.unbind(1)[1].add_(1)
        with lib.no_grad():
            y = x * 1
            y.chunk(2, 1)[1].zero_()
        results.append((z.numpy().copy(), y.numpy().copy(), z._version))
    for o, t in zip(*results): np.testing.assert_array_equal(o, t)


def test_a_base_changed_before_the_pieces_were_made_is_fine():
    "The refusal is only for pieces made before the change: after it, the gradient flows through it."
    grads = []
    for lib in (fs, torch):
        x = lib.tensor(data((4, 6), seed=18), requires_grad=True)
        y = x * 1
        y.mul_(x)
        q, k = y.split(2)
        (q * k).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-14)


# ---------------------------------------------------------------------------------------------------------------
# torch's errors, in torch's words

MISTAKES = {
    'sizes that do not add up': lambda L: L.ones(5, 6).split([2, 2]),
    'sizes that add up too far, along a negative dim': lambda L: L.ones(5, 6).split([2, 5], dim=-1),
    'no sizes': lambda L: L.ones(5, 6).split([]),
    'a negative size in the list': lambda L: L.ones(5, 6).split([6, -1]),
    'a negative size': lambda L: L.ones(5, 6).split(-1),
    'a negative size and a bad dim': lambda L: L.ones(5, 6).split(-1, dim=5),
    'a bad dim with a list': lambda L: L.ones(5, 6).split([-1], dim=5),
    'a zero size': lambda L: L.ones(5, 6).split(0),
    'split of a dim out of range': lambda L: L.ones(5, 6).split(2, dim=2),
    'split of a 0-d tensor': lambda L: L.tensor(1.0).split(1),
    'split of a 0-d tensor by sizes': lambda L: L.tensor(1.0).split([1]),
    'a float in the list': lambda L: L.ones(5, 6).split([2.0, 3.0]),
    'a float size': lambda L: L.split(L.ones(5, 6), 2.0),
    'a tensor of sizes': lambda L: L.ones(5, 6).split(L.tensor([2, 3])),
    'no chunks': lambda L: L.ones(5, 6).chunk(0),
    'negative chunks': lambda L: L.ones(5, 6).chunk(-1),
    'no chunks and a bad dim': lambda L: L.ones(5, 6).chunk(0, dim=5),
    'chunk of a dim out of range': lambda L: L.ones(5, 6).chunk(2, 2),
    'chunk of a 0-d tensor': lambda L: L.tensor(1.0).chunk(1),
    'a float number of chunks': lambda L: L.chunk(L.ones(5, 6), 2.0),
    'a bool number of chunks': lambda L: L.chunk(L.ones(5, 6), True),
    'a float dim for chunk': lambda L: L.chunk(L.ones(5, 6), 2, 1.0),
    'unbind of a dim out of range': lambda L: L.ones(5, 6).unbind(2),
    'unbind of a negative dim out of range': lambda L: L.ones(5, 6).unbind(-3),
    'unbind of a 0-d tensor': lambda L: L.tensor(1.0).unbind(),
    'unbind of a 0-d tensor at -1': lambda L: L.tensor(1.0).unbind(-1),
    'unbind of a 0-d tensor at 1': lambda L: L.tensor(1.0).unbind(1),
    'a float dim for unbind': lambda L: L.unbind(L.ones(5, 6), 1.0),
    'a bool dim for unbind': lambda L: L.unbind(L.ones(5, 6), True),
    'no sections': lambda L: L.ones(5, 6).tensor_split(0),
    'negative sections': lambda L: L.ones(5, 6).tensor_split(-1),
    'no sections as a tensor': lambda L: L.ones(5, 6).tensor_split(L.tensor(0)),
    'no sections and a bad dim': lambda L: L.ones(5, 6).tensor_split(0, 5),
    'tensor_split of a 0-d tensor': lambda L: L.tensor(1.0).tensor_split(2),
    'tensor_split of a 0-d tensor and a bad dim': lambda L: L.tensor(1.0).tensor_split(0, 5),
    'float indices in a tensor': lambda L: L.ones(5, 6).tensor_split(L.tensor([1.0])),
    'int32 indices in a tensor': lambda L: L.ones(5, 6).tensor_split(L.tensor([1], dtype=L.int32)),
    'a matrix of indices': lambda L: L.ones(5, 6).tensor_split(L.tensor([[1]])),
    'a float matrix of indices': lambda L: L.ones(5, 6).tensor_split(L.tensor([[1.0]])),
    'negative repeats': lambda L: L.ones(2, 3).repeat_interleave(-1),
    'negative repeats and an output size': lambda L: L.ones(2, 3).repeat_interleave(-1, 0, output_size=4),
    'repeat along a dim out of range': lambda L: L.ones(2, 3).repeat_interleave(2, dim=2),
    'repeat along a negative dim out of range': lambda L: L.ones(2, 3).repeat_interleave(2, dim=-3),
    'repeat a 0-d tensor along 0': lambda L: L.tensor(2.0).repeat_interleave(2, 0),
    'repeat a 0-d tensor along -1': lambda L: L.tensor(2.0).repeat_interleave(2, -1),
    'repeat a 0-d tensor along -2': lambda L: L.tensor(2.0).repeat_interleave(2, -2),
    'a wrong output size': lambda L: L.ones(2, 3).repeat_interleave(2, dim=1, output_size=5),
    'a wrong output size without dim': lambda L: L.ones(2, 3).repeat_interleave(3, output_size=7),
    'counts of the wrong length': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2, 3]), 0),
    'counts of the wrong length along 1': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2]), 1),
    'counts of the wrong length along -1': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2]), -1),
    'counts of the wrong length, flattened': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2])),
    'no counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([], dtype=L.int64), 0),
    'negative counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, -1]), 0),
    'float counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1.0, 2.0]), 0),
    'float counts of the wrong length': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1.0, 2.0, 3.0]), 0),
    'negative float counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1.0, -2.0]), 0),
    'bool counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([True, False]), 0),
    'uint8 counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2], dtype=L.uint8), 0),
    'int16 counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2], dtype=L.int16), 0),
    'a matrix of counts': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([[1, 2]]), 0),
    'a matrix of counts and a bad dim': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([[1]]), 3),
    'float counts and a bad dim': lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1.0]), 3),
    'counts and a 0-d tensor along 0': lambda L: L.tensor(2.0).repeat_interleave(L.tensor([2]), 0),
    'counts and a 0-d tensor along -1': lambda L: L.tensor(2.0).repeat_interleave(L.tensor([2]), -1),
    'counts that do not give the output size': lambda L: L.ones(2, 3).repeat_interleave(
        L.tensor([1, 2]), 0, output_size=4),
    'counts alone, a matrix': lambda L: L.repeat_interleave(L.tensor([[1, 2]])),
    'counts alone, 0-d': lambda L: L.repeat_interleave(L.tensor(3)),
    'counts alone, floats': lambda L: L.repeat_interleave(L.tensor([1.0, 2.0])),
    'counts alone, negative': lambda L: L.repeat_interleave(L.tensor([1, -2])),
    'counts alone, a wrong output size': lambda L: L.repeat_interleave(L.tensor([1, 2]), output_size=4),
}


@pytest.mark.parametrize('mistake', list(MISTAKES))
def test_mistakes_get_torchs_errors(mistake):
    compare_errors(lambda: MISTAKES[mistake](fs), lambda: MISTAKES[mistake](torch))


TYPE_MISTAKES = {
    'a bool size': (lambda L: L.ones(5, 6).split(True), 'split'),
    'a float dim for split': (lambda L: L.ones(5, 6).split(2, 1.0), 'split'),
    'a float dim for split by sizes': (lambda L: L.ones(5, 6).split([2, 3], 1.0), 'split_with_sizes'),
    'a float number of sections': (lambda L: L.ones(5, 6).tensor_split(2.0), 'tensor_split'),
    'float indices': (lambda L: L.ones(5, 6).tensor_split([2.0]), 'tensor_split'),
    'a float dim for tensor_split': (lambda L: L.ones(5, 6).tensor_split(2, 1.0), 'tensor_split'),
    'float repeats': (lambda L: L.ones(2, 3).repeat_interleave(2.0), 'repeat_interleave'),
    'bool repeats': (lambda L: L.ones(2, 3).repeat_interleave(True), 'repeat_interleave'),
    'a list of repeats': (lambda L: L.ones(2, 3).repeat_interleave([1, 2], 0), 'repeat_interleave'),
}


@pytest.mark.parametrize('mistake', list(TYPE_MISTAKES))
def test_arguments_of_the_wrong_type_are_refused_like_torch(mistake):
    "A TypeError naming the function, as torch's; torch lists its overloads after it, which we do not."
    f, name = TYPE_MISTAKES[mistake]
    ours, theirs = error_of(lambda: f(fs)), error_of(lambda: f(torch))
    assert ours.startswith(f'TypeError: {name}(') and theirs.startswith(f'TypeError: {name}('), (ours, theirs)


def test_the_names_are_torchs():
    for name in ('split', 'chunk', 'unbind', 'tensor_split', 'repeat_interleave'):
        assert callable(getattr(fs, name)) and callable(getattr(fs.Tensor, name))
