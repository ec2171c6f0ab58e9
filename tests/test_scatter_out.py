"""scatter and the in-place writers (scatter_, scatter_add_, masked_fill_), strides and storage, `out=`,
`dtype=` and numpy's spellings (`axis`, `keepdims`, numpy's own functions) against torch: values, dtypes,
gradients in float64, node names, version counters and errors with torch's messages."""
import warnings

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.core import Tensor
from fromscratch.testing import compare_errors, error_of
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


# ----------------------------------------------------------------------------------------------------------------
# out=: every function form that takes it, against torch

A = np.array([[1.5, -2.5, 3.5], [0.5, 1.5, 2.5]])
B = np.array([[2.0, 1.0, -1.0], [4.0, 0.5, 2.0]])

FORMS = {   # name: the call, given the library L, two float tensors a, b and any keyword arguments (out=)
    'add': lambda L, a, b, **k: L.add(a, b, alpha=2, **k), 'sub': lambda L, a, b, **k: L.sub(a, b, **k),
    'mul': lambda L, a, b, **k: L.mul(a, 3, **k), 'div': lambda L, a, b, **k: L.div(a, b, **k),
    'divide': lambda L, a, b, **k: L.divide(a, b, **k), 'pow': lambda L, a, b, **k: L.pow(a.abs(), b, **k),
    'pow (number base)': lambda L, a, b, **k: L.pow(2, b, **k),
    'floor_divide': lambda L, a, b, **k: L.floor_divide(a, b, **k),
    'maximum': lambda L, a, b, **k: L.maximum(a, b, **k), 'minimum': lambda L, a, b, **k: L.minimum(a, b, **k),
    'square': lambda L, a, b, **k: L.square(a, **k), 'outer': lambda L, a, b, **k: L.outer(a[0], b[1], **k),
    'exp': lambda L, a, b, **k: L.exp(a, **k), 'log': lambda L, a, b, **k: L.log(a.abs(), **k),
    'sqrt': lambda L, a, b, **k: L.sqrt(a.abs(), **k), 'rsqrt': lambda L, a, b, **k: L.rsqrt(a.abs(), **k),
    'sigmoid': lambda L, a, b, **k: L.sigmoid(a, **k), 'tanh': lambda L, a, b, **k: L.tanh(a, **k),
    'sin': lambda L, a, b, **k: L.sin(a, **k), 'cos': lambda L, a, b, **k: L.cos(a, **k),
    'log1p': lambda L, a, b, **k: L.log1p(a.abs(), **k), 'expm1': lambda L, a, b, **k: L.expm1(a, **k),
    'var': lambda L, a, b, **k: L.var(a, 0, **k), 'std': lambda L, a, b, **k: L.std(a, 1, keepdim=True, **k),
    'std (all)': lambda L, a, b, **k: L.std(a, **k),
    'eq': lambda L, a, b, **k: L.eq(a, b, **k), 'ne': lambda L, a, b, **k: L.ne(a, 1.5, **k),
    'lt': lambda L, a, b, **k: L.lt(a, b, **k), 'le': lambda L, a, b, **k: L.le(a, b, **k),
    'gt': lambda L, a, b, **k: L.gt(a, b, **k), 'ge': lambda L, a, b, **k: L.ge(a, b, **k),
    'logical_not': lambda L, a, b, **k: L.logical_not(a, **k),
    'abs': lambda L, a, b, **k: L.abs(a, **k), 'neg': lambda L, a, b, **k: L.neg(a, **k),
    'sign': lambda L, a, b, **k: L.sign(a, **k), 'clamp': lambda L, a, b, **k: L.clamp(a, -1, 1, **k),
    'clip': lambda L, a, b, **k: L.clip(a, min=0, **k), 'clamp_min': lambda L, a, b, **k: L.clamp_min(a, 0, **k),
    'clamp_max': lambda L, a, b, **k: L.clamp_max(a, 0, **k),
    'matmul': lambda L, a, b, **k: L.matmul(a, b.T, **k), 'matmul (vectors)': lambda L, a, b, **k: L.matmul(a[0], b[0], **k),
    'mm': lambda L, a, b, **k: L.mm(a.T, b, **k), 'bmm': lambda L, a, b, **k: L.bmm(a[None], b.T[None], **k),
    'dot': lambda L, a, b, **k: L.dot(a[0], b[0], **k),
    'softmax': lambda L, a, b, **k: L.softmax(a, 1, **k), 'log_softmax': lambda L, a, b, **k: L.log_softmax(a, 0, **k),
    'logsumexp': lambda L, a, b, **k: L.logsumexp(a, 1, **k),
    'norm': lambda L, a, b, **k: L.norm(a, **k), 'norm (dim)': lambda L, a, b, **k: L.norm(a, 1, 0, **k),
    'gather': lambda L, a, b, **k: L.gather(a, 1, L.tensor([[2, 0], [1, 1]]), **k),
    'scatter_add': lambda L, a, b, **k: L.scatter_add(a, 1, L.tensor([[2, 0], [1, 1]]), b, **k),
    'scatter': lambda L, a, b, **k: L.scatter(a, 1, L.tensor([[2, 0], [1, 1]]), b, **k),
    'scatter (value)': lambda L, a, b, **k: L.scatter(a, 1, L.tensor([[2, 0], [1, 1]]), 7.0, **k),
    'index_select': lambda L, a, b, **k: L.index_select(a, 1, L.tensor([2, 2, 0]), **k),
    'argmax': lambda L, a, b, **k: L.argmax(a, **k), 'argmin': lambda L, a, b, **k: L.argmin(a, 0, **k),
    'argmax (keepdim)': lambda L, a, b, **k: L.argmax(a, 1, True, **k),
    'cat': lambda L, a, b, **k: L.cat([a, b], **k), 'concat': lambda L, a, b, **k: L.concat([a, b], 1, **k),
    'concatenate': lambda L, a, b, **k: L.concatenate([a, b], dim=0, **k),
    'stack': lambda L, a, b, **k: L.stack([a, b], 1, **k),
    'where': lambda L, a, b, **k: L.where(a > 0, a, b, **k),
    'all': lambda L, a, b, **k: L.all(a > 0, **k), 'any': lambda L, a, b, **k: L.any(a > 0, 1, **k),
    'sum': lambda L, a, b, **k: L.sum(a, 0, **k), 'sum (two dims)': lambda L, a, b, **k: L.sum(a, (0, 1), **k),
    'sum (dtype)': lambda L, a, b, **k: L.sum(a, 1, True, dtype=L.float64, **k),
    'prod': lambda L, a, b, **k: L.prod(a, 1, **k), 'cumsum': lambda L, a, b, **k: L.cumsum(a, 0, **k),
    'mean': lambda L, a, b, **k: L.mean(a, 1, **k), 'mean (all)': lambda L, a, b, **k: L.mean(a, **k),
    'mean (dtype)': lambda L, a, b, **k: L.mean(a, 0, dtype=L.float64, **k),
    'max': lambda L, a, b, **k: L.max(a, **k), 'min': lambda L, a, b, **k: L.min(a, **k),
    'max (tensor)': lambda L, a, b, **k: L.max(a, b, **k), 'min (tensor)': lambda L, a, b, **k: L.min(a, b, **k),
}
TUPLE_FORMS = {
    'max (dim)': lambda L, a, b, **k: L.max(a, 1, **k), 'min (dim)': lambda L, a, b, **k: L.min(a, 0, True, **k),
}
NOT_DIFFERENTIABLE = {'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_not', 'argmax', 'argmin', 'argmax (keepdim)',
                      'all', 'any'}
OUT_ONLY = {'floor_divide', 'softmax', 'log_softmax'}   # torch checks only whether `out` requires grad


def operands(L, dtype='float32', requires_grad=False):
    return (L.tensor(A.astype(dtype), requires_grad=requires_grad),
            L.tensor(B.astype(dtype), requires_grad=requires_grad))


def assert_same(ours, theirs, rtol=1e-6):
    assert_same_value(ours, theirs, rtol, 1e-6)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('name', list(FORMS))
def test_out_resizes_an_empty_tensor_writes_into_it_and_returns_it(name, dtype):
    results = []
    for L in (fs, torch):
        a, b = operands(L, dtype)
        expected = FORMS[name](L, a, b)
        out = L.empty(0, dtype=expected.dtype)
        got = FORMS[name](L, a, b, out=out)
        assert got is out and out._version == 1 and out.shape == expected.shape
        results.append(out)
        assert_same(out, expected, rtol=0)
    assert_same(*results)


@pytest.mark.parametrize('name', list(FORMS))
def test_out_of_the_right_shape_keeps_its_memory_even_transposed(name):
    for L in (fs, torch):
        a, b = operands(L)
        expected = FORMS[name](L, a, b)
        out = L.zeros(tuple(expected.shape), dtype=expected.dtype)
        if out.ndim == 2: out = L.zeros(tuple(expected.shape)[::-1], dtype=expected.dtype).T   # strides (1, n)
        memory, strides = out.data_ptr(), out.stride()
        assert FORMS[name](L, a, b, out=out) is out
        assert (out.data_ptr(), out.stride(), out._version) == (memory, strides, 1)
        assert_same(out, expected, rtol=0)


@pytest.mark.parametrize('name', list(FORMS))
def test_out_with_other_elements_is_resized_with_torchs_warning(name):
    seen = []
    for L in (fs, torch):
        a, b = operands(L)
        expected = FORMS[name](L, a, b)
        out = L.zeros(7, dtype=expected.dtype)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            FORMS[name](L, a, b, out=out)
        seen.append([str(w.message).split(' (Triggered')[0] for w in caught if 'resized' in str(w.message)][:1])
        assert out.shape == expected.shape
        assert_same(out, expected, rtol=0)
    assert seen[0] == seen[1] and len(seen[0]) == 1


@pytest.mark.parametrize('out_dtype', ['float64', 'float16', 'int64', 'int32', 'bool'])
@pytest.mark.parametrize('name', list(FORMS))
def test_outs_of_other_dtypes_are_cast_or_refused_as_torch_does(name, out_dtype):
    def run(L):
        a, b = operands(L)
        out = L.empty(0, dtype=getattr(L, out_dtype))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            return FORMS[name](L, a, b, out=out)
    if name == 'cumsum' and out_dtype == 'bool':   # torch: "cumsum_out_cpu" not implemented for 'Bool'
        assert run(fs).tolist() == [[True, True, True], [True, True, True]]
        return
    if compare_errors(lambda: run(fs), lambda: run(torch)).ours == 'no error':
        assert_same(run(fs), run(torch), rtol=1e-3 if out_dtype == 'float16' else 1e-6)


@pytest.mark.parametrize('name', list(TUPLE_FORMS))
def test_max_and_min_along_a_dimension_write_values_and_indices(name):
    results = []
    for L in (fs, torch):
        a, b = operands(L)
        values, indices = L.empty(0), L.empty(5, dtype=L.int64)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            got = TUPLE_FORMS[name](L, a, b, out=[values, indices])
        assert got[0] is got.values is values and got[1] is indices and values._version == indices._version == 1
        results.append(got)
    for o, t in zip(*results): assert_same(o, t, rtol=0)
    for mistake in (lambda L: (L.empty(0),), lambda L: (L.empty(0), L.empty(0)),
                    lambda L: (L.empty(0, dtype=L.float64), L.empty(0, dtype=L.int64))):
        compare_errors(lambda: TUPLE_FORMS[name](fs, *operands(fs), out=mistake(fs)),
                       lambda: TUPLE_FORMS[name](torch, *operands(torch), out=mistake(torch)))


@pytest.mark.parametrize('where', ['input', 'out'])
@pytest.mark.parametrize('name', list(FORMS) + list(TUPLE_FORMS))
def test_out_refuses_anything_that_requires_grad_unless_grad_mode_is_off(name, where):
    form = {**FORMS, **TUPLE_FORMS}[name]

    def run(L, grad_mode=True):
        a, b = operands(L, requires_grad=where == 'input')
        out = form(L, a, b)
        outs = tuple(L.empty(0, dtype=o.dtype) for o in (out if isinstance(out, tuple) else (out,)))
        if where == 'out':
            if not outs[0].is_floating_point(): return None   # an integer out cannot require grad
            outs[0].requires_grad_()
        with L.set_grad_enabled(grad_mode):
            got = form(L, a, b, out=outs if len(outs) > 1 else outs[0])
        return got, outs
    errors = compare_errors(lambda: run(fs), lambda: run(torch))
    refused = name not in NOT_DIFFERENTIABLE and (where == 'input' and name not in OUT_ONLY
                                                  or where == 'out' and run(fs, False) is not None)
    assert (errors.ours != 'no error') == refused
    ours, theirs = run(fs, grad_mode=False), run(torch, grad_mode=False)
    if ours is not None:
        for o, t in zip(ours[1], theirs[1]):
            assert_same(o, t, rtol=0)
            assert o.requires_grad == t.requires_grad and o.grad_fn is None
            if name not in OUT_ONLY: assert t.grad_fn is None   # (torch's gets a NotImplemented node there)


def test_out_mistakes_get_torchs_errors():
    mistakes = {
        'a list for out': lambda L: L.add(L.ones(2), 1, out=[1]),
        'an expanded out': lambda L: L.add(L.ones(2, 3), 1, out=L.empty(1).expand(2, 3)),
        'a view of a leaf that requires grad': lambda L: L.add(L.ones(2), 1, out=L.ones(3, requires_grad=True)[:2]),
        'an int result into bool': lambda L: L.add(L.ones(2, dtype=L.int64), 1, out=L.empty(0, dtype=L.bool)),
        'a float into int32': lambda L: L.add(L.ones(2, dtype=L.int64), 1.5, out=L.empty(0, dtype=L.int32)),
        'true division of ints into ints': lambda L: L.div(L.ones(2, dtype=L.int64), 2, out=L.empty(0, dtype=L.int64)),
        'matmul of ints into int32': lambda L: L.matmul(L.ones(2, 2, dtype=L.int64), L.ones(2, 2, dtype=L.int64),
                                                        out=L.empty(0, dtype=L.int32)),
        'neg of ints into int32': lambda L: L.neg(L.ones(2, dtype=L.int64), out=L.empty(0, dtype=L.int32)),
        'cumsum in float64 into float32': lambda L: L.cumsum(L.ones(2), 0, dtype=L.float64, out=L.empty(0)),
        'softmax into half': lambda L: L.softmax(L.ones(2), 0, out=L.empty(0, dtype=L.float16)),
        'cat of ints and floats into int64': lambda L: L.cat([L.ones(2, dtype=L.int64), L.ones(2)],
                                                           out=L.empty(0, dtype=L.int64)),
        'where of ints into floats': lambda L: L.where(L.ones(2) > 0, L.ones(2, dtype=L.int64),
                                                       L.ones(2, dtype=L.int64), out=L.empty(0)),
        'all of uint8 into float': lambda L: L.all(L.ones(2, dtype=L.uint8), out=L.empty(0)),
    }
    for name, f in mistakes.items():
        compare_errors(lambda: f(fs), lambda: f(torch))


@pytest.mark.parametrize('out_dtype', ['int64', 'float64', 'bool', 'int32'])
@pytest.mark.parametrize('name', ['sum', 'prod', 'cumsum'])
def test_sum_prod_and_cumsum_compute_in_outs_dtype(name, out_dtype):
    if (name, out_dtype) == ('cumsum', 'bool'): return   # torch has no cumsum kernel for bools
    results = []
    for L in (fs, torch):
        x = L.tensor(A)
        out = L.empty(0, dtype=getattr(L, out_dtype))
        results.append(getattr(L, name)(x, 1, out=out))
    assert_same(*results, rtol=0)


def test_out_may_be_an_input_and_uint8_all_writes_uint8():
    for L in (fs, torch):
        c = L.tensor([1.0, 2.0])
        assert L.mul(c, c, out=c) is c and c.tolist() == [1.0, 4.0] and c._version == 1
        u = L.tensor([1, 0, 3], dtype=L.uint8)
        assert L.all(u, out=L.empty(0, dtype=L.uint8)).tolist() == 0


def test_functions_torch_gives_no_out_take_none_and_methods_take_none():
    for f in (lambda L: L.relu(L.ones(2), out=L.empty(0)), lambda L: L.einsum('i->', L.ones(2), out=L.empty(0)),
              lambda L: L.isnan(L.ones(2), out=L.empty(0)), lambda L: L.reshape(L.ones(2), (2,), out=L.empty(0)),
              lambda L: L.ones(2).add(1, out=L.empty(0)), lambda L: L.ones(2).exp(out=L.empty(0)),
              lambda L: L.ones(2).matmul(L.ones(2), out=L.empty(0))):
        compare_errors(lambda: f(fs), lambda: f(torch), same_message=False)


def test_the_function_forms_are_torchs_names_and_show_out_in_their_signature():
    import inspect
    from fromscratch.ops.arguments import FUNCTION_FORMS
    for name, form in FUNCTION_FORMS.items():
        assert getattr(fs, name) is form and hasattr(torch, name)
        assert 'out' in inspect.signature(form).parameters
    assert set(FUNCTION_FORMS) >= {'add', 'sub', 'mul', 'div', 'matmul', 'mm', 'sum', 'mean', 'exp', 'cat', 'stack',
                                   'where', 'max', 'min', 'pow', 'clamp', 'softmax'}


# ----------------------------------------------------------------------------------------------------------------
# dtype= of the reductions

@pytest.mark.parametrize('dtype', ['float64', 'float32', 'float16'])
@pytest.mark.parametrize('call', ['sum()', 'sum(1)', 'sum((0, 1), True)', 'mean()', 'mean(0)', 'prod(1)',
                                  'cumsum(0)', 'fs.sum', 'fs.mean(0, keepdim=True)'])
def test_reductions_in_a_dtype_agree_with_torch(call, dtype):
    def f(x):
        L = lib(x)
        if call == 'fs.sum': return L.sum(x, dtype=getattr(L, dtype))
        if call == 'fs.mean(0, keepdim=True)': return L.mean(x, 0, keepdim=True, dtype=getattr(L, dtype))
        method, args = call.split('(', 1)
        return getattr(x, method)(*eval('(' + args.rstrip(')') + ',)' if args != ')' else '()'),
                                  dtype=getattr(L, dtype))
    # (the gradient comes back through the cast: computed in `dtype`, then cast to the input's)
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == 'float16' else dict(rtol=1e-6, atol=1e-6) if dtype == 'float32' else {}
    for x_dtype in (np.float32, np.float64):
        r = check_both(f, values((3, 4)), dtype=x_dtype, **tol)
        assert str(r.out_ours.dtype).split('.')[-1] == dtype


@pytest.mark.parametrize('dtype', ['float64', 'float32', 'int64', 'int32'])
@pytest.mark.parametrize('name', ['sum', 'mean', 'prod', 'cumsum'])
def test_reductions_of_integers_in_a_dtype_agree_with_torch(name, dtype):
    x = np.arange(-3, 9).reshape(3, 4)
    f = lambda t: getattr(t, name)(1, dtype=getattr(lib(t), dtype))
    if name == 'mean' and dtype.startswith('int'):
        compare_errors(lambda: f(fs.tensor(x)), lambda: f(torch.tensor(x)))
    else:
        check_both(f, x, requires_grad=False)


@pytest.mark.parametrize('name', ['sum', 'mean', 'prod', 'cumsum'])
@pytest.mark.parametrize('dtype', ['int64', 'bool'])
def test_an_integer_dtype_for_a_tensor_that_requires_grad_is_torchs_error(name, dtype):
    if (name, dtype) == ('cumsum', 'bool'): return   # torch has no cumsum kernel for bools
    f = lambda L, grad=True: getattr(L.ones(2, 3, requires_grad=grad), name)(0, dtype=getattr(L, dtype))
    compare_errors(lambda: f(fs), lambda: f(torch))
    if name != 'mean':
        with fs.no_grad(), torch.no_grad(): assert_same(f(fs), f(torch), rtol=0)
        assert_same(f(fs, False), f(torch, False), rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# numpy's spellings: axis, keepdims, numpy's functions on a tensor

def methods_taking_dim():
    import inspect
    names = []
    for name, m in sorted(fs.ops.METHODS.items()):
        target = getattr(m, '__wrapped__', m)
        try: params = inspect.signature(target).parameters
        except (TypeError, ValueError): continue
        if 'dim' in params: names.append(name)
    return names


EXTRA = {   # the other arguments a method needs, made in the library L
    'gather': lambda L: (L.tensor([[0, 1, 0], [1, 0, 0]]),),
    'index_select': lambda L: (L.tensor([1, 0]),),
    'scatter': lambda L: (L.tensor([[0, 1, 0], [1, 0, 0]]), 5.0), 'scatter_': lambda L: (L.tensor([[0, 1, 0]]), 5.0),
    'scatter_add': lambda L: (L.tensor([[0, 1, 0]]), L.ones(1, 3, dtype=L.float64)),
    'scatter_add_': lambda L: (L.tensor([[0, 1, 0]]), L.ones(1, 3, dtype=L.float64)),
    'norm': lambda L: (2,), 'repeat_interleave': lambda L: (2,),
}


@pytest.mark.parametrize('kwargs', [{'axis': 1}, {'axis': -1, 'keepdims': True}, {'keepdims': True},
                                    {'axis': 0, 'keepdim': False}], ids=str)
@pytest.mark.parametrize('name', methods_taking_dim())
def test_methods_taking_a_dim_take_numpys_names_where_torch_does(name, kwargs):
    if 'keepdims' in kwargs and name in ('squeeze', 'unsqueeze', 'softmax', 'log_softmax', 'cumsum', 'gather'):
        return  # (no keepdim to spell)
    def run(L):
        x = L.tensor(values((2, 3, 2)))
        return getattr(x, name)(*EXTRA.get(name, lambda L: ())(L), **kwargs)
    ours, theirs = error_of(lambda: run(fs)), error_of(lambda: run(torch))
    if theirs == 'no error':
        assert ours == 'no error', ours
        for o, t in zip(*(r if isinstance(r, tuple) else (r,) for r in (run(fs), run(torch)))):
            assert_same(o, t, rtol=1e-12)
    elif 'keepdims' in kwargs and len(kwargs) == 1 and name in ('sum', 'mean', 'prod', 'max', 'min'):
        assert ours == 'no error'   # torch wants a dim with keepdim there; ours reduces everything
    else:
        assert ours.split(':')[0] == theirs.split(':')[0], (ours, theirs)


def test_both_names_at_once_and_norm_are_refused_as_torch_refuses_them():
    for f in (lambda L: L.ones(2, 3).sum(axis=0, dim=0), lambda L: L.ones(2, 3).mean(0, axis=1),
              lambda L: L.sum(L.ones(2, 3), axis=0, dim=0)):
        compare_errors(lambda: f(fs), lambda: f(torch))
    for f in (lambda L: L.ones(2, 3).norm(axis=0), lambda L: L.norm(L.ones(2, 3), axis=0),
              lambda L: L.ones(2, 3).max(1, keepdims=True, keepdim=True)):
        compare_errors(lambda: f(fs), lambda: f(torch), same_message=False)


FUNCTION_AXES = {
    'sum(axis=0)': lambda L, x, **k: L.sum(x, axis=0, **k),
    'mean(axis=1, keepdims=True)': lambda L, x, **k: L.mean(x, axis=1, keepdims=True, **k),
    'max(axis=0)': lambda L, x, **k: L.max(x, axis=0, **k),
    'softmax(axis=0)': lambda L, x, **k: L.softmax(x, axis=0, **k),
    'cumsum(axis=1)': lambda L, x, **k: L.cumsum(x, axis=1, **k),
    'std(axis=0, keepdims=True)': lambda L, x, **k: L.std(x, axis=0, keepdims=True, **k),
    'argmax(axis=1)': lambda L, x, **k: L.argmax(x, axis=1, **k),
    'logsumexp(axis=1)': lambda L, x, **k: L.logsumexp(x, axis=1, **k),
    'gather(axis=1)': lambda L, x, **k: L.gather(x, axis=1, index=L.tensor([[0], [2]]), **k),
}


@pytest.mark.parametrize('name', list(FUNCTION_AXES))
def test_function_forms_take_numpys_names_with_or_without_out(name):
    f = FUNCTION_AXES[name]
    ours, theirs = f(fs, fs.tensor(A)), f(torch, torch.tensor(A))
    for o, t in zip(*(r if isinstance(r, tuple) else (r,) for r in (ours, theirs))): assert_same(o, t)
    if isinstance(theirs, tuple): return
    out, tout = fs.empty(0, dtype=ours.dtype), torch.empty(0, dtype=theirs.dtype)
    assert f(fs, fs.tensor(A), out=out) is out and f(torch, torch.tensor(A), out=tout) is tout
    assert_same(out, tout)


NUMPY_FUNCTIONS = {   # numpy's function, called on a tensor
    'np.mean(t)': lambda t: np.mean(t), 'np.mean(t, axis=1, keepdims=True)': lambda t: np.mean(t, axis=1, keepdims=True),
    'np.mean(t, dtype=np.float64)': lambda t: np.mean(t, dtype=np.float64),
    'np.sum(t)': lambda t: np.sum(t), 'np.sum(t, axis=0)': lambda t: np.sum(t, axis=0),
    'np.sum(t, axis=(0, 1))': lambda t: np.sum(t, axis=(0, 1)), 'np.sum(t, axis=-1, keepdims=True)':
        lambda t: np.sum(t, axis=-1, keepdims=True),
    'np.max(t)': lambda t: np.max(t), 'np.max(t, axis=1)': lambda t: np.max(t, axis=1),
    'np.amax(t, axis=0, keepdims=True)': lambda t: np.amax(t, axis=0, keepdims=True),
    'np.min(t, axis=0)': lambda t: np.min(t, axis=0), 'np.prod(t)': lambda t: np.prod(t),
    'np.prod(t, axis=1)': lambda t: np.prod(t, axis=1), 'np.std(t)': lambda t: np.std(t),
    'np.std(t, axis=0, ddof=1)': lambda t: np.std(t, axis=0, ddof=1), 'np.var(t, axis=1)': lambda t: np.var(t, axis=1),
    'np.all(t)': lambda t: np.all(t), 'np.any(t, axis=0)': lambda t: np.any(t, axis=0),
    'np.argmax(t)': lambda t: np.argmax(t), 'np.argmax(t, axis=1)': lambda t: np.argmax(t, axis=1),
    'np.argmin(t, axis=0)': lambda t: np.argmin(t, axis=0),
    'np.cumsum(t)': lambda t: np.cumsum(t), 'np.cumsum(t, axis=1)': lambda t: np.cumsum(t, axis=1),
    'np.cumsum(t, axis=0, dtype=np.float64)': lambda t: np.cumsum(t, axis=0, dtype=np.float64),
    'np.cumprod(t, axis=1)': lambda t: np.cumprod(t, axis=1), 'np.clip(t, 0, 1)': lambda t: np.clip(t, 0, 1),
    'np.round(t)': lambda t: np.round(t), 'np.transpose(t)': lambda t: np.transpose(t),
    'np.reshape(t, (3, 2))': lambda t: np.reshape(t, (3, 2)), 'np.squeeze(t[None])': lambda t: np.squeeze(t[None]),
    'np.swapaxes(t, 0, 1)': lambda t: np.swapaxes(t, 0, 1), 'np.take(t, [0, 2])': lambda t: np.take(t, [0, 2]),
    'np.repeat(t, 2)': lambda t: np.repeat(t, 2), 'np.nonzero(t)': lambda t: np.nonzero(t),
    'np.argsort(t)': lambda t: np.argsort(t), 'np.shape(t)': lambda t: np.shape(t), 'np.ndim(t)': lambda t: np.ndim(t),
    'np.median(t)': lambda t: np.median(t), 'np.dot(t, t.T)': lambda t: np.dot(t, t.T),
    'np.concatenate([t, t])': lambda t: np.concatenate([t, t]), 'np.where(t > 0, t, 0)': lambda t: np.where(t > 0, t, 0),
    'np.allclose(t, t)': lambda t: np.allclose(t, t), 'np.unique(t)': lambda t: np.unique(t),
    'np.count_nonzero(t)': lambda t: np.count_nonzero(t), 'np.trace(t)': lambda t: np.trace(t),
    'np.linalg.norm(t)': lambda t: np.linalg.norm(t), 'np.asarray(t)': lambda t: np.asarray(t),
}
TORCH_REFUSES = {'np.mean', 'np.sum', 'np.max', 'np.amax', 'np.min', 'np.prod', 'np.std', 'np.var', 'np.all',
                 'np.any'}   # torch's methods take no `out`, which numpy passes: ours answer as numpy would
UFUNCS = ['np.exp(t)', 'np.maximum(t, 0)', 'np.ptp(t)']   # a tensor of ours takes no part in numpy's ufuncs


def kind(x):
    "What numpy gave: 'tensor' (of either library), or the type's name."
    return 'tensor' if isinstance(x, (Tensor, torch.Tensor)) else type(x).__name__


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'bool'])
@pytest.mark.parametrize('name', list(NUMPY_FUNCTIONS))
def test_numpy_functions_give_for_our_tensors_what_they_give_for_torchs(name, dtype):
    f = NUMPY_FUNCTIONS[name]
    data = (np.array([[1.5, -2.0, 0.0], [3.0, 0.25, 2.0]]) * (1 if dtype == 'bool' else 1)).astype(dtype)
    if dtype in ('int64', 'bool') and name.startswith(('np.mean', 'np.std', 'np.var')):
        return   # torch's mean, std and var refuse integers; numpy would compute in float
    t, tt = fs.tensor(data), torch.tensor(data)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')   # (numpy's DeprecationWarning for torch's __array_wrap__)
        ours = f(t)
        theirs = None if name.split('(')[0] in TORCH_REFUSES else f(tt)
    if theirs is None:
        with pytest.raises(TypeError): f(tt)
        theirs = f(data)   # numpy's own answer for the values
        assert isinstance(ours, Tensor)
    else:
        assert kind(ours) == kind(theirs)
    for o, e in zip(*(r if isinstance(r, tuple) else (r,) for r in (ours, theirs))):
        if isinstance(o, tuple): continue
        assert np.shape(o) == np.shape(e) and np.array_equal(np.asarray(o), np.asarray(e))
        if kind(o) == 'tensor' and kind(e) == 'tensor': assert o.dtype == getattr(fs, str(e.dtype).split('.')[-1])


@pytest.mark.parametrize('name', UFUNCS)
def test_numpys_ufuncs_refuse_our_tensors(name):
    t = fs.tensor(A)
    with pytest.raises(TypeError, match='does not support ufuncs'): eval(name)


def test_numpy_wraps_its_results_as_torch_does_bools_as_uint8():
    for L in (fs, torch):
        x = L.tensor([True, False, True])
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            picked = np.take(x, [0, 2])
        assert str(picked.dtype).endswith('uint8') and picked.tolist() == [1, 1]


@pytest.mark.parametrize('shape', [(), (4,), (3, 4), (2, 0, 3), (2, 3, 4)])
def test_nonzero_agrees_with_torch(shape):
    data = np.random.default_rng(len(shape)).integers(-1, 2, shape)
    check_both(lambda x: x.nonzero(), data, requires_grad=False)
    check_both(lambda x: x.nonzero(as_tuple=True), data, requires_grad=False)
    check_both(lambda x: lib(x).nonzero(x > 0), data, requires_grad=False)
    check_both(lambda x: x.nonzero(), data.astype(float), requires_grad=False)
    check_both(lambda x: x.nonzero(), np.array(0), requires_grad=False)
