"""scatter and the in-place writers (scatter_, scatter_add_, masked_fill_), strides and storage, `out=`,
`dtype=` and numpy's spellings (`axis`, `keepdims`, numpy's own functions) against torch: values, dtypes,
gradients in float64, node names, version counters and errors with torch's messages."""
import warnings

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import Tensor
from fromscratch.testing import compare_errors
from engines import check_both, check_second, assert_same_value


def lib(t):
    "The library a tensor belongs to: fromscratch or torch."
    return fs if isinstance(t, Tensor) else torch


def values(shape, seed=0):
    return np.random.default_rng([len(shape), *shape, seed]).standard_normal(shape)


# ----------------------------------------------------------------------------------------------------------------
# scatter: values and the gradients of the input and of src, float64

def random_index(shape, dim, size, seed=1, unique=False):
    "An index of `shape` pointing into `size` positions along `dim` (each position once along `dim` if `unique`)."
    r = np.random.default_rng([seed, *shape, dim % len(shape), size])
    if not unique: return r.integers(0, size, shape)
    moved = np.moveaxis(np.zeros(shape, np.int64), dim, -1)
    for k in np.ndindex(moved.shape[:-1]): moved[k] = r.permutation(size)[:moved.shape[-1]]
    return np.moveaxis(moved, -1, dim)


SCATTER_SHAPES = [((5,), 0, (3,)), ((3, 4), 0, (2, 4)), ((3, 4), 1, (3, 2)), ((3, 4), -1, (2, 3)),
                  ((2, 3, 4), 1, (2, 2, 4)), ((2, 3, 4), 2, (1, 3, 2)), ((2, 3, 4), 0, (2, 3, 4))]


@pytest.mark.parametrize('unique', [True, False], ids=['unique', 'repeats'])
@pytest.mark.parametrize('shape,dim,ishape', SCATTER_SHAPES)
def test_scatter_of_a_tensor_agrees_with_torch(shape, dim, ishape, unique):
    index = random_index(ishape, dim, shape[dim], unique=unique)
    r = check_both(lambda x, i, s: x.scatter(dim, i, s), values(shape), index, values(ishape, 2))
    assert r.out_ours.grad_fn.name() == r.out_torch.grad_fn.name() == 'ScatterBackward0'
    if unique: check_second(lambda x, i, s: lib(x).scatter(x * x, dim, i, s * s), values(shape), index,
                            values(ishape, 2))


@pytest.mark.parametrize('shape,dim,ishape', SCATTER_SHAPES)
@pytest.mark.parametrize('value', [2.5, -1, True])
def test_scatter_of_a_value_agrees_with_torch(shape, dim, ishape, value):
    index = random_index(ishape, dim, shape[dim])
    r = check_both(lambda x, i: lib(x).scatter(x, dim, i, value=value), values(shape), index)
    assert r.out_ours.grad_fn.name() == r.out_torch.grad_fn.name() == 'ScatterBackward1'
    check_both(lambda x, i: x.scatter(dim, i, value), values(shape), index)   # the value given by position


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'int32', 'bool'])
def test_scatter_keeps_the_dtype_and_casts_a_value_to_it(dtype):
    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    for value in (2.7, 0, True):
        check_both(lambda x, i: x.scatter(1, i, value), x, np.array([[2, 0], [1, 1]]), requires_grad=False)
    check_both(lambda x, i, s: x.scatter(0, i, s), x, np.array([[1, 0, 1]]), x[::-1].copy(), requires_grad=False)


def test_scatter_of_a_larger_src_takes_its_first_elements_and_gives_the_rest_zero_gradient():
    # torch's backward refuses a src larger than the index ("returned an invalid gradient at index 1");
    # ours pads the gradient with zeros, which is what the function's derivative is
    x, s, i = values((3, 4)), values((3, 5), 1), np.array([[0, 3], [1, 2]])
    check_both(lambda x, i, s: x.scatter(1, i, s), x, i, s, grads=False)
    xs, ss = fs.tensor(x, requires_grad=True), fs.tensor(s, requires_grad=True)
    w = values((3, 4), 2)
    (xs.scatter(1, fs.tensor(i), ss) * fs.tensor(w)).sum().backward()
    expected = np.zeros((3, 5))
    expected[:2, :2] = np.take_along_axis(w[:2], i, 1)
    np.testing.assert_allclose(ss.grad.numpy(), expected)
    ss = fs.tensor(s, requires_grad=True)   # scatter_add: the same rule
    fs.tensor(x).scatter_add(1, fs.tensor(i), ss).sum().backward()
    assert ss.grad.tolist() == [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]
    ts = torch.tensor(s, requires_grad=True)
    with pytest.raises(RuntimeError, match='returned an invalid gradient at index 1'):
        torch.tensor(x).scatter_add(1, torch.tensor(i), ts).sum().backward()


@pytest.mark.parametrize('case', ['0-d input, 0-d index', '0-d input, 1-d index', 'a 0-d index', 'an empty index',
                                  'an empty 2-d index', 'int32 index', 'keyword arguments'])
def test_scatter_edge_cases_agree_with_torch(case):
    f, args = {
        '0-d input, 0-d index': (lambda x, i, s: x.scatter(0, i, s), (np.array(1.5), np.array(0), np.array(2.5))),
        '0-d input, 1-d index': (lambda x, i, s: x.scatter(-1, i, s), (np.array(1.5), np.array([0, 0]),
                                                                       np.array([2.5, 3.5]))),
        'a 0-d index': (lambda x, i, s: x.scatter(0, i, s), (values((3,)), np.array(2), np.array(7.0))),
        'an empty index': (lambda x, i, s: x.scatter(0, i, s), (values((3,)), np.zeros(0, np.int64),
                                                                values((2,)))),
        'an empty 2-d index': (lambda x, i: x.scatter(0, i, 1.0), (values((3,)), np.zeros((1, 0), np.int64))),
        'int32 index': (lambda x, i, s: x.scatter(1, i, s), (values((2, 3)), np.array([[2], [0]], np.int32),
                                                            values((2, 1)))),
        'keyword arguments': (lambda x, i, s: lib(x).scatter(x, dim=1, index=i, src=s),
                              (values((2, 3)), np.array([[2], [0]]), values((2, 1)))),
    }[case]
    # torch's backward refuses a gradient for the src of an empty index (as for a src larger than the index)
    check_both(f, *args, grad_args={0} if case == 'an empty index' else None)


@pytest.mark.parametrize('reduce', ['add', 'multiply'])
@pytest.mark.parametrize('dtype', ['float64', 'int64', 'bool'])
@pytest.mark.parametrize('src', ['tensor', 'value'])
def test_scatter_with_reduce_agrees_with_torch_and_has_no_gradient(reduce, dtype, src):
    x = np.array([[1, 2, 3], [0, 1, 0]]).astype(dtype)
    i = np.array([[0, 0, 2], [1, 1, 1]])
    other = (np.array([[3, 2, 0], [1, 1, 2]]).astype(dtype),) if src == 'tensor' else ()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter('always')
        fn = (lambda x, i, s: x.scatter(1, i, s, reduce=reduce)) if other else \
            (lambda x, i: x.scatter(1, i, 2.7, reduce=reduce))
        check_both(fn, x, i, *other, requires_grad=False)
    assert ('deprecated' in ' '.join(str(w.message) for w in seen)) == (src == 'tensor')
    if dtype == 'float64':
        for L in (fs, torch):
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                out = L.tensor(x, requires_grad=True).scatter(1, L.tensor(i), 2.0, reduce=reduce)
            name = out.grad_fn.name() if L is fs else type(out.grad_fn).__name__
            assert name == 'NotImplemented'
            with pytest.raises(RuntimeError, match='derivative for aten::scatter is not implemented'):
                out.sum().backward()


SCATTER_MISTAKES = {
    'a float index': lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0.0]]), 1.0),
    'a bool index': lambda L: L.zeros(2, 3).scatter(1, L.tensor([[True]]), L.ones(1, 1)),
    'src of another dtype': lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0]]), L.ones(1, 1, dtype=L.float64)),
    'an int src into floats': lambda L: L.zeros(3).scatter(0, L.tensor([0]), L.tensor([2])),
    'index past the end': lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0], [3]]), 1.0),
    'a negative index': lambda L: L.zeros(2, 3).scatter(0, L.tensor([[-1, 0]]), 1.0),
    'index too large outside dim': lambda L: L.zeros(2, 3).scatter(0, L.tensor([[0, 1, 0, 1]]), 1.0),
    'index larger than src': lambda L: L.zeros(3, 2).scatter(0, L.tensor([[0, 1]]), L.ones(3, 1)),
    'index with more dims than self': lambda L: L.zeros(3).scatter(0, L.tensor([[0]]), 1.0),
    'index with fewer dims than self': lambda L: L.zeros(3, 2).scatter(0, L.tensor([0]), 1.0),
    'src with fewer dims than index': lambda L: L.zeros(3, 2).scatter(1, L.tensor([[0, 1]]), L.tensor(2.0)),
    'a 0-d src for a 1-d index of two': lambda L: L.zeros(3).scatter(0, L.tensor([0, 1]), L.tensor(1.0)),
    'dim out of range': lambda L: L.zeros(3, 2).scatter(2, L.tensor([[0]]), 1.0),
    'a 0-d input, dim 1': lambda L: L.tensor(2.0).scatter(1, L.tensor([0]), 1.0),
    'dim checked before the index dtype': lambda L: L.zeros(3).scatter(5, L.tensor([[0.0]]), L.zeros(2, 2)),
    'reduce max': lambda L: L.zeros(3).scatter(0, L.tensor([0]), 1.0, reduce='max'),
    'scatter_add: a float index': lambda L: L.zeros(3).scatter_add(0, L.tensor([0.0]), L.tensor([2.0])),
    'scatter_add: src of another dtype': lambda L: L.zeros(3).scatter_add(0, L.tensor([0]), L.tensor([2])),
    'scatter_add: index larger than src': lambda L: L.zeros(3).scatter_add(0, L.tensor([0, 1, 0]), L.ones(1)),
    'scatter_add: more dims than self': lambda L: L.zeros(3).scatter_add(0, L.tensor([[0]]), L.ones(1, 1)),
    'scatter_add: too large outside dim': lambda L: L.zeros(3, 3).scatter_add(0, L.tensor([[0, 1, 2, 0]]),
                                                                             L.ones(3, 3)),
}


@pytest.mark.parametrize('mistake', list(SCATTER_MISTAKES))
def test_scatter_mistakes_get_torchs_errors(mistake):
    f = SCATTER_MISTAKES[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))


def test_scatter_wants_a_src_or_a_value():
    for f in (lambda L: L.zeros(3).scatter(0, L.tensor([0])),
              lambda L: L.zeros(3).scatter(0, L.tensor([0]), L.ones(1), value=2.0)):
        compare_errors(lambda: f(fs), lambda: f(torch), same_message=False)


def test_one_hot_rows_and_forward_mode_agree_with_torch():
    labels = np.array([2, 0, 3])
    check_both(lambda z, l: z.scatter(1, l[:, None], 1.0), np.zeros((3, 4)), labels, requires_grad=False)
    x, t, s, ts = values((3, 4)), values((3, 4), 1), values((3, 2), 2), values((3, 2), 3)
    i = np.array([[0, 3], [1, 2], [2, 0]])

    def run(L, T):
        f = lambda x, s: (L.scatter(x, 1, L.tensor(i), s).sin().sum() + L.scatter(x, 0, L.tensor([[0, 2]]), 0.5).sum()
                          + x.scatter_add(1, L.tensor(i), s).exp().sum())
        return T.jvp(f, (L.tensor(x), L.tensor(s)), (L.tensor(t), L.tensor(ts)))[1].item()
    assert np.isclose(run(fs, fs.func), run(torch, torch.func))


# ----------------------------------------------------------------------------------------------------------------
# the in-place writers: scatter_, scatter_add_, masked_fill_

INPLACE = {
    'scatter_(src)': lambda y, i, v: y.scatter_(1, i, v),
    'scatter_(value)': lambda y, i, v: y.scatter_(1, i, -2.0),
    'scatter_add_': lambda y, i, v: y.scatter_add_(1, i, v),
    'masked_fill_': lambda y, i, v: y.masked_fill_(y > 0, 1.5),
    'masked_fill_, a tensor value': lambda y, i, v: y.masked_fill_(lib(y).tensor([True, False, True]), v[0, 1]),
    'masked_fill_, a broadcast mask': lambda y, i, v: y.masked_fill_(lib(y).tensor([[True], [False]]), 0.0),
}
NODES = {'scatter_(src)': 'ScatterBackward0', 'scatter_(value)': 'ScatterBackward1',
         'scatter_add_': 'ScatterAddBackward0', 'masked_fill_': 'MaskedFillBackward0',
         'masked_fill_, a tensor value': 'MaskedFillBackward1', 'masked_fill_, a broadcast mask': 'MaskedFillBackward0'}


@pytest.mark.parametrize('name', list(INPLACE))
def test_the_inplace_writers_agree_with_torch(name):
    def run(x, i, v):
        y = x * 1
        before = y._version
        out = INPLACE[name](y, i, v)
        assert out is y and y._version == before + 1
        assert (y.grad_fn.name() if isinstance(y, Tensor) else type(y.grad_fn).__name__) == NODES[name]
        return y
    check_both(run, values((2, 3)), np.array([[2, 0], [1, 1]]), values((2, 2), 1))
    check_second(run, values((2, 3)), np.array([[2, 0], [1, 1]]), values((2, 2), 1))


@pytest.mark.parametrize('name', list(INPLACE))
def test_the_inplace_writers_without_a_graph_write_into_the_memory(name):
    for L in (fs, torch):
        x = L.tensor(values((2, 3)))
        view = x[1]
        INPLACE[name](x, L.tensor([[2, 0], [1, 1]]), L.tensor(values((2, 2), 1)))
        assert x.grad_fn is None and x._version == view._version == 1
    check_both(lambda x, i, v: INPLACE[name](x, i, v), values((2, 3)), np.array([[2, 0], [1, 1]]),
               values((2, 2), 1), requires_grad=False)


@pytest.mark.parametrize('name', list(INPLACE))
def test_the_inplace_writers_on_a_view_rewrite_the_base(name):
    def run(x, i, v):
        y = x * 1
        INPLACE[name](y[:, 1:], lib(y).tensor([[0, 0], [1, 1]]), v)
        return y
    r = check_both(run, values((2, 4)), np.array([[2, 0], [1, 1]]), values((2, 2), 1))
    assert r.out_ours.grad_fn.name() == type(r.out_torch.grad_fn).__name__ == 'CopySlices'


@pytest.mark.parametrize('name', list(INPLACE))
def test_the_inplace_writers_refuse_leaves_that_require_grad_but_not_under_no_grad(name):
    def write(L, view=False, grad_mode=True):
        x = L.tensor(values((2, 3)), requires_grad=True)
        with L.set_grad_enabled(grad_mode):
            INPLACE[name](x[:] if view else x, L.tensor([[2, 0], [1, 1]]), L.tensor(values((2, 2), 1)))
        return x
    compare_errors(lambda: write(fs), lambda: write(torch))
    compare_errors(lambda: write(fs, view=True), lambda: write(torch, view=True))
    ours, theirs = write(fs, grad_mode=False), write(torch, grad_mode=False)
    assert_same_value(ours, theirs, 0, 0)
    assert ours.is_leaf and theirs.is_leaf and ours._version == theirs._version == 1


INPLACE_MISTAKES = {
    'a mask larger than the tensor': lambda L: L.zeros(1, 2).masked_fill_(L.tensor([[True], [False]]), 1.0),
    'an int mask': lambda L: L.zeros(2).masked_fill_(L.tensor([1, 0]), 1.0),
    'scatter_ into an expanded tensor': lambda L: L.ones(2).expand(3, 2).scatter_(0, L.tensor([[0, 1]]), 3.0),
    'scatter_add_ into an expanded tensor': lambda L: L.ones(2).expand(3, 2).scatter_add_(
        0, L.tensor([[0, 1]]), L.ones(1, 2)),
    'scatter_: a float index': lambda L: L.zeros(2).scatter_(0, L.tensor([0.0]), 1.0),
    'scatter_: src of another dtype': lambda L: L.zeros(2, dtype=L.int64).scatter_(0, L.tensor([0]), L.ones(1)),
    'the leaf check before the index dtype': lambda L: L.zeros(2, requires_grad=True).scatter_(
        0, L.tensor([0.0]), 1.0),
}


@pytest.mark.parametrize('mistake', list(INPLACE_MISTAKES))
def test_inplace_mistakes_get_torchs_errors(mistake):
    f = INPLACE_MISTAKES[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))


def test_a_saved_tensor_changed_by_scatter_is_caught_at_backward():
    for L in (fs, torch):
        x = L.tensor(values((2, 3)), requires_grad=True)
        y = x * 1
        z = (y * y).sum()
        y.scatter_(1, L.tensor([[0], [1]]), 0.0)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            z.backward()


# ----------------------------------------------------------------------------------------------------------------
# strides, offset, storage

VIEWS = {
    'itself': lambda x: x, 'transpose(0, 2)': lambda x: x.transpose(0, 2), 'transpose(0, 1)': lambda x: x.transpose(0, 1),
    'permute(2, 0, 1)': lambda x: x.permute(2, 0, 1), 'mT': lambda x: x.mT, 'swapaxes(0, 1)': lambda x: x.swapaxes(0, 1),
    '[:, ::2]': lambda x: x[:, ::2], '[1, :, 1::3]': lambda x: x[1, :, 1::3], '[:, 1]': lambda x: x[:, 1],
    '[1]': lambda x: x[1], '[1, 2, 3]': lambda x: x[1, 2, 3], '[:, 1:2]': lambda x: x[:, 1:2],
    '[0, :1, :1]': lambda x: x[0, :1, :1], '[:0]': lambda x: x[:0], '[0].T[1:]': lambda x: x[0].T[1:],
    '[0].expand(5, 3, 4)': lambda x: x[0].expand(5, 3, 4), '[:, :1].expand(2, 3, 4)': lambda x: x[:, :1].expand(2, 3, 4),
    'expand(1, 2, 3, 4)': lambda x: x.expand(1, 2, 3, 4), '[0, 0, 0].expand(3)': lambda x: x[0, 0, 0].expand(3),
    'unsqueeze(1).expand(2, 5, 3, 4)': lambda x: x.unsqueeze(1).expand(2, 5, 3, 4),
    'unsqueeze(0)': lambda x: x.unsqueeze(0), 'unsqueeze(1)': lambda x: x.unsqueeze(1), 'unsqueeze(-1)': lambda x: x.unsqueeze(-1),
    '[None]': lambda x: x[None], '[:, None]': lambda x: x[:, None], '[..., None]': lambda x: x[..., None],
    'transpose(0, 1).unsqueeze(0)': lambda x: x.transpose(0, 1).unsqueeze(0),
    '[:, ::2].unsqueeze(1)': lambda x: x[:, ::2].unsqueeze(1),
    'reshape(6, 4)': lambda x: x.reshape(6, 4), 'reshape(4, 1, 6)': lambda x: x.reshape(4, 1, 6),
    'view(-1)': lambda x: x.view(-1), 'flatten()': lambda x: x.flatten(), 'reshape(24)[3:]': lambda x: x.reshape(24)[3:],
    '[:, :1].squeeze(1)': lambda x: x[:, :1].squeeze(1), '[:, ::2].view(2, 2, 1, 4)': lambda x: x[:, ::2].view(2, 2, 1, 4),
    'transpose(1, 2).reshape(2, 12)': lambda x: x.transpose(1, 2).reshape(2, 12),
    'transpose(0, 1).contiguous()': lambda x: x.transpose(0, 1).contiguous(), 'detach()': lambda x: x.detach(),
    'clone()': lambda x: x.clone(), 'sum(0)': lambda x: x.sum(0), 'x + 1': lambda x: x + 1,
    'transpose(0, 2) + 1': lambda x: x.transpose(0, 2) + 1, 'x.transpose(0, 2).exp()': lambda x: x.transpose(0, 2).exp(),
}


def layout(v, base):
    "What a view's memory looks like: strides, offset, contiguity, and whether it shares the base's storage."
    same = v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    step = v.data_ptr() - base.data_ptr() if same and v.numel() else None   # bytes from the base's start
    return v.stride(), v.storage_offset(), v.is_contiguous(), same, step


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'bool'])
@pytest.mark.parametrize('name', list(VIEWS))
def test_strides_offsets_and_shared_storage_agree_with_torch(name, dtype):
    x = fs.tensor(np.arange(24).reshape(2, 3, 4).astype(dtype))
    tx = torch.tensor(np.arange(24).reshape(2, 3, 4).astype(dtype))
    v, tv = VIEWS[name](x), VIEWS[name](tx)
    assert layout(v, x) == layout(tv, tx)
    for d in range(-v.ndim, v.ndim): assert v.stride(d) == tv.stride(d) == v.stride(dim=d)


@pytest.mark.parametrize('shape', [(), (1,), (5,), (3, 1), (1, 3), (3, 1, 1), (1, 1), (0,), (0, 3), (3, 0), (2, 0, 3)])
def test_strides_of_new_tensors_agree_with_torch(shape):
    for make in ('zeros', 'ones', 'empty', 'rand'):
        t, tt = getattr(fs, make)(shape), getattr(torch, make)(shape)
        assert (t.stride(), t.storage_offset(), t.is_contiguous(), len(t.untyped_storage())) == \
               (tt.stride(), tt.storage_offset(), tt.is_contiguous(), len(tt.untyped_storage()))


@pytest.mark.parametrize('mistake', ['a dim past the end', 'a dim before the start', 'a 0-d tensor', 'a 0-d tensor, -1'])
def test_stride_of_a_dimension_that_is_not_there_gets_torchs_error(mistake):
    f = {'a dim past the end': lambda L: L.ones(2, 3).stride(2),
         'a dim before the start': lambda L: L.ones(2, 3).stride(-3),
         'a 0-d tensor': lambda L: L.tensor(1.0).stride(0),
         'a 0-d tensor, -1': lambda L: L.tensor(1.0).stride(-1)}[mistake]
    compare_errors(lambda: f(fs), lambda: f(torch))


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'int32', 'bool', 'uint8'])
def test_the_storage_of_a_view_is_its_bases_memory_as_torch_shows_it(dtype):
    def read(L):
        x = L.tensor((np.arange(12) % 3).reshape(3, 4).astype(dtype))
        v = x.T[1:, ::2]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter('always')
            s = v.storage()
        if L is fs:   # (torch warns once in a process, which another test may have used up)
            assert [str(w.message)[:36] for w in seen] == ['TypedStorage is deprecated. It will ']
        u = v.untyped_storage()
        assert s.data_ptr() == u.data_ptr() == x.storage().data_ptr() == x.data_ptr() != v.data_ptr()
        assert list(s) == s.tolist() and s.size() == len(s)
        name = lambda r: r.replace('fromscratch.core.', 'torch.').replace('fromscratch.', 'torch.')
        return (len(s), s.tolist(), s[5], s[-1], str(s.dtype).split('.')[-1], s.element_size(), s.nbytes(),
                str(s.device), len(u), u.tolist(), u[3], name(repr(s)), name(repr(u)), v.data_ptr() - x.data_ptr())
    assert read(fs) == read(torch)


def test_writing_into_the_storage_changes_every_view_and_bumps_no_version():
    for L in (fs, torch):
        x = L.zeros(2, 3)
        row = x[1]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            s = row.storage()
        s[4] = 7.0
        s[-6] = 1.5
        assert x.tolist() == [[1.5, 0, 0], [0, 7.0, 0]] and row.tolist() == [0, 7.0, 0]
        assert x._version == row._version == 0


def test_the_storage_refuses_what_torchs_refuses():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for f in (lambda L: L.ones(2).storage()[2], lambda L: L.ones(2).storage()[-3],
                  lambda L: L.ones(2).storage()[0:1]):
            compare_errors(lambda: f(fs), lambda: f(torch))
        empty, tempty = fs.ones(0).storage(), torch.ones(0).storage()
        assert (len(empty), repr(empty).split('\n')[0]) == (len(tempty), repr(tempty).split('\n')[0])
    assert fs.TypedStorage is fs.core.TypedStorage and fs.UntypedStorage is fs.core.UntypedStorage
