"""The Tensor's own API against torch: creation functions (shapes, dtypes, requires_grad, values, seeding), the
repr, and the dtype rules of in-place writes. (The mutation run of `make mutants` found these unchecked.)"""
import re

import numpy as np
import pytest
import torch

import fromscratch as fs
from engines import dtype_name

from fromscratch.core import default_generator
from fromscratch.testing import compare_errors


@pytest.fixture(autouse=True)
def _keep_the_random_stream():
    "Tests here that seed the generator hand it back as they found it, so later tests draw what they always drew."
    saved = default_generator.numpy
    yield
    default_generator.numpy = saved


def same_kind(ours, theirs):
    "Same shape, dtype, requires_grad and leaf status as the torch tensor."
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert dtype_name(ours) == dtype_name(theirs), (dtype_name(ours), dtype_name(theirs))
    assert ours.requires_grad == theirs.requires_grad and ours.is_leaf and theirs.is_leaf


DETERMINISTIC = {
    'zeros': lambda l: l.zeros(2, 3), 'zeros_tuple': lambda l: l.zeros((2, 3), dtype=l.float64),
    'zeros_grad': lambda l: l.zeros(3, requires_grad=True), 'ones': lambda l: l.ones(4),
    'ones_int': lambda l: l.ones((2,), dtype=l.int64), 'ones_grad': lambda l: l.ones(2, 2, requires_grad=True),
    'full': lambda l: l.full((2, 3), 1.5), 'full_int': lambda l: l.full((2,), 7), 'full_bool': lambda l: l.full((2,), True),
    'full_dtype': lambda l: l.full((3,), 2, dtype=l.float64, requires_grad=True),
    'arange': lambda l: l.arange(5), 'arange_start': lambda l: l.arange(2, 7), 'arange_step': lambda l: l.arange(1, 10, 3),
    'arange_float': lambda l: l.arange(0.5, 3), 'arange_float_step': lambda l: l.arange(0, 1, 0.25),
    'arange_dtype': lambda l: l.arange(4, dtype=l.float64, requires_grad=True),
    'linspace': lambda l: l.linspace(0, 1, 5), 'linspace_dtype': lambda l: l.linspace(-1, 1, 3, dtype=l.float64),
    'linspace_grad': lambda l: l.linspace(0, 2, 4, requires_grad=True),
    'tensor_list': lambda l: l.tensor([[1, 2], [3, 4]]), 'tensor_float': lambda l: l.tensor([1.0, 2.0]),
    'tensor_bool': lambda l: l.tensor([True]), 'tensor_scalar': lambda l: l.tensor(3.5, requires_grad=True),
}


@pytest.mark.parametrize('name', list(DETERMINISTIC))
def test_creation_like_torch(name):
    ours, theirs = DETERMINISTIC[name](fs), DETERMINISTIC[name](torch)
    same_kind(ours, theirs)
    np.testing.assert_allclose(ours.detach().numpy().astype(np.float64), theirs.detach().numpy().astype(np.float64),
                               rtol=1e-7)


LIKE = ['zeros_like', 'ones_like', 'empty_like', 'rand_like', 'randn_like']


@pytest.mark.parametrize('name', LIKE + ['full_like'])
@pytest.mark.parametrize('kw', [{}, dict(dtype='float64'), dict(requires_grad=True), dict(dtype='float64', requires_grad=True)],
                         ids=str)
@pytest.mark.parametrize('src', ['float32', 'float64', 'int64'])
def test_like_functions_keep_shape_and_dtype(name, kw, src):
    if 'rand' in name and src == 'int64' and 'dtype' not in kw: return   # torch: rand of an int dtype raises
    if src == 'int64' and kw.get('requires_grad') and 'dtype' not in kw: return   # int tensors cannot require grad
    args = (2.5,) if name == 'full_like' else ()
    base = np.arange(6).reshape(2, 3).astype(src)
    ours = getattr(fs, name)(fs.tensor(base), *args, **{k: getattr(fs, v) if k == 'dtype' else v for k, v in kw.items()})
    theirs = getattr(torch, name)(torch.tensor(base), *args, **{k: getattr(torch, v) if k == 'dtype' else v for k, v in kw.items()})
    same_kind(ours, theirs)
    if name in ('zeros_like', 'ones_like', 'full_like'):
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


@pytest.mark.parametrize('name', ['rand', 'randn'])
def test_random_creation(name):
    f = getattr(fs, name)
    for args, kw in (((2, 3), {}), (((4,),), dict(dtype=fs.float64)), ((3,), dict(requires_grad=True))):
        t, tt = f(*args, **kw), getattr(torch, name)(*args, **{k: (torch.float64 if k == 'dtype' else v) for k, v in kw.items()})
        same_kind(t, tt)
    fs.manual_seed(3); a = f(1000)
    fs.manual_seed(3); b = f(1000)
    fs.manual_seed(4); c = f(1000)
    assert np.array_equal(a.numpy(), b.numpy()) and not np.array_equal(a.numpy(), c.numpy())
    if name == 'rand': assert 0 <= a.numpy().min() and a.numpy().max() < 1 and 0.4 < a.numpy().mean() < 0.6
    else: assert -0.2 < a.numpy().mean() < 0.2 and 0.8 < a.numpy().std() < 1.2
    assert fs.manual_seed(5) is not None


def test_randint():
    fs.manual_seed(0)
    t, tt = fs.randint(2, 5, (200,)), torch.randint(2, 5, (200,))
    same_kind(t, tt)
    assert set(t.tolist()) == {2, 3, 4}
    same_kind(fs.randint(0, 3, (2, 2), dtype=fs.float32), torch.randint(0, 3, (2, 2), dtype=torch.float32))
    same_kind(fs.randint(0, 3, (2,), dtype=fs.float64, requires_grad=True),
              torch.randint(0, 3, (2,), dtype=torch.float64, requires_grad=True))
    fs.manual_seed(1); a = fs.randint(0, 1000, (50,))
    fs.manual_seed(1); b = fs.randint(0, 1000, (50,))
    assert a.tolist() == b.tolist()


REPRS = [lambda l: l.tensor([1.5, 2.25, -3.0]), lambda l: l.tensor([1, 2, 3]), lambda l: l.tensor([True, False]),
         lambda l: l.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=l.float64, requires_grad=True), lambda l: l.tensor(2.5),
         lambda l: l.zeros(0, 3), lambda l: l.tensor([1, 2], dtype=l.int32), lambda l: l.ones(2, dtype=l.float16),
         lambda l: l.tensor([123456.789, 0.001]), lambda l: l.tensor([0.5, 2.0], requires_grad=True),
         lambda l: l.tensor([[1, 2], [3, 4]], dtype=l.float64), lambda l: l.zeros(2, 0, dtype=l.float64)]


@pytest.mark.parametrize('k', range(len(REPRS)))
def test_repr_like_torch(k):
    assert repr(REPRS[k](fs)) == repr(REPRS[k](torch)).replace('torch.', 'fromscratch.')


def test_repr_of_a_result_names_its_node():
    y = fs.tensor([0.5, 2.0], requires_grad=True) * 2
    assert repr(y) == repr(torch.tensor([0.5, 2.0], requires_grad=True) * 2) == 'tensor([1., 4.], grad_fn=<MulBackward0>)'
    assert repr(y.grad_fn) == '<MulBackward0>'


@pytest.mark.parametrize('da', ['bool', 'int32', 'int64', 'float32', 'float64'])
@pytest.mark.parametrize('db', ['bool', 'int64', 'float32', 'float64'])
@pytest.mark.parametrize('op', ['add_', 'mul_', 'sub_', 'div_', 'copy_'])
def test_inplace_dtype_rules_like_torch(da, db, op):
    "An in-place write keeps the tensor's dtype, and refuses a result of a higher kind (float into int), like torch."
    a, b = np.array([1, 2, 0]).astype(da), np.array([1, 1, 2]).astype(db)
    outcomes = []
    for lib in (torch, fs):
        x, y = lib.tensor(a.copy()), lib.tensor(b.copy())
        try:
            getattr(x, op)(y)
            outcomes.append((dtype_name(x), x.tolist()))
        except RuntimeError as e:
            outcomes.append((type(e).__name__, str(e).split()[0]))
    assert outcomes[0] == outcomes[1], outcomes


WRITES = {'copy_': lambda t, v: t.copy_(v * 2), 'fill_': lambda t, v: t.fill_(v.sum()), 'setitem': lambda t, v: t.__setitem__(1, v[0]),
          'add_': lambda t, v: t.add_(v), 'sub_alpha': lambda t, v: t.sub_(v, alpha=3), 'mul_': lambda t, v: t.mul_(v),
          'div_': lambda t, v: t.div_(v + 3)}


@pytest.mark.parametrize('name', list(WRITES))
def test_writing_a_value_that_requires_grad_into_a_plain_tensor(name):
    "Only the written value requires grad: the write is recorded and the value gets its gradient, as in torch."
    grads = []
    for lib in (torch, fs):
        t, v = lib.zeros(3, dtype=lib.float64), lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        WRITES[name](t, v)
        assert t.requires_grad
        (t * t + t).sum().backward()
        grads.append(v.grad.tolist())
    assert grads[0] == grads[1]


@pytest.mark.parametrize('name', ['copy_', 'add_', 'mul_'])
def test_writing_into_an_expanded_tensor_raises_like_torch(name):
    "Elements of an expanded tensor share memory: an elementwise write into it is refused, in torch's words."
    write = lambda t: getattr(t, name)(t * 0 + 2) if name == 'copy_' else getattr(t, name)(2.0)
    with pytest.raises(RuntimeError) as theirs: write(torch.zeros(3).expand(2, 3))
    with pytest.raises(RuntimeError, match=re.escape(str(theirs.value).split('.')[0])): write(fs.zeros(3).expand(2, 3))


def test_fill_with_a_zero_dim_tensor_and_copy_with_broadcasting_and_casting():
    for lib in (torch, fs):
        x = lib.zeros(2, 3)
        x.fill_(lib.tensor(2.5))
        assert x.tolist() == [[2.5] * 3] * 2
        i = lib.zeros(3, dtype=lib.int64)
        i.copy_(lib.tensor([1.7, -2.2, 3.0]))
        assert i.tolist() == [1, -2, 3]
        x.copy_(lib.tensor([1.0, 2.0, 3.0]))
        assert x.tolist() == [[1.0, 2.0, 3.0]] * 2
    with pytest.raises(RuntimeError) as theirs: torch.zeros(2, 3).copy_(torch.zeros(4))
    with pytest.raises(RuntimeError, match=re.escape(str(theirs.value)[:40])) as err: fs.zeros(2, 3).copy_(fs.zeros(4))
    assert '[2, 3]' in str(err.value) and '[4]' in str(err.value)


def test_size_and_bool_like_torch():
    for lib in (torch, fs):
        t = lib.zeros(2, 3)
        assert tuple(t.size()) == (2, 3) and t.size(1) == 3 and t.size(-2) == 2
        assert bool(lib.tensor([2.0])) is True and bool(lib.tensor(0.0)) is False
        with pytest.raises(RuntimeError, match='Boolean value of Tensor with more than one value is ambiguous'):
            bool(lib.tensor([1.0, 2.0]))


@pytest.mark.parametrize('left', ['float64', 'int64', 'float32'])
@pytest.mark.parametrize('right', ['float32', 'int32', 'float64', 'bool'])
def test_a_zero_dim_tensor_on_the_left_does_not_widen_the_other(left, right):
    for op in (lambda a, b: a * b, lambda a, b: a + b):
        ours = op(fs.tensor(np.array(2, dtype=left)), fs.tensor(np.array([1, 0, 1], dtype=right)))
        theirs = op(torch.tensor(np.array(2, dtype=left)), torch.tensor(np.array([1, 0, 1], dtype=right)))
        assert dtype_name(ours) == dtype_name(theirs)


def test_non_leaf_grad_warning_points_at_the_caller():
    y = fs.tensor([1.0], requires_grad=True) * 2
    with pytest.warns(UserWarning, match='is not a leaf Tensor is being accessed') as record:
        assert y.grad is None
    assert record[0].filename == __file__


def test_retained_grad_accumulates_across_create_graph_backwards():
    grads = []
    for lib in (torch, fs):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        h = x * x
        h.retain_grad()
        (h * h).sum().backward(create_graph=True)
        (h * h * h).sum().backward(create_graph=True)
        grads.append((h.grad.tolist(), h.grad.requires_grad))
    assert grads[0] == grads[1]


def test_custom_function_gradient_of_a_shape_that_does_not_broadcast_is_refused():
    class Bad(fs.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x * 1
        @staticmethod
        def backward(ctx, g): return fs.ones(2, 3, 4, dtype=g.dtype)
    for shape in ((3, 4, 2), (2, 3, 4, 5), (1, 3, 4, 1)):
        x = fs.ones(*shape, requires_grad=True)
        with pytest.raises(RuntimeError, match=r'returned an invalid gradient at index 0 - got \[2, 3, 4\] but expected '
                                               r'shape compatible with \[' + ', '.join(map(str, shape))):
            Bad.apply(x).sum().backward()


def test_where_with_one_branch_only_is_refused_like_torch():
    for lib in (torch, fs):
        with pytest.raises(TypeError, match=r'^where\(\) received an invalid combination of arguments'):
            lib.where(lib.tensor([True, False]), lib.tensor([1.0, 2.0]))
    assert [t.tolist() for t in fs.where(fs.tensor([[True, False], [False, True]]))] == \
        [t.tolist() for t in torch.where(torch.tensor([[True, False], [False, True]]))]


def test_argmax_keepdim_without_dim_and_of_a_zero_dim_tensor():
    for name in ('argmax', 'argmin'):
        for make in (lambda l: l.tensor([[1.0, 3.0, 2.0], [0.0, 5.0, 4.0]]), lambda l: l.tensor(3.0)):
            for kw in (dict(keepdim=True), dict(dim=0), dict(dim=-1, keepdim=True), {}):
                ours, theirs = getattr(make(fs), name)(**kw), getattr(make(torch), name)(**kw)
                assert tuple(ours.shape) == tuple(theirs.shape) and ours.tolist() == theirs.tolist(), (name, kw)


def test_to_the_dtype_of_another_tensor():
    for lib in (torch, fs):
        assert dtype_name(lib.ones(2).to(lib.zeros(1, dtype=lib.float64))) == 'float64'
        assert dtype_name(lib.ones(2).to('cpu', lib.float64)) == 'float64'


@pytest.mark.parametrize('sa,sb', [((2, 3), (3, 2, 2)), ((5, 1, 3), (2, 4, 1)), ((3,), (4,)), ((1, 2), (3, 1, 4)),
                                   ((4, 1), (3,)), ((2, 1, 1), (3, 3)), ((6,), (2, 1, 5)), ((3, 2), (3, 3))], ids=str)
def test_broadcast_errors_begin_with_torch_words(sa, sb):
    try: torch.ones(*sa) + torch.ones(*sb)
    except RuntimeError as e: theirs = str(e)
    else: theirs = None
    if theirs is None:
        assert tuple((fs.ones(*sa) + fs.ones(*sb)).shape) == tuple((torch.ones(*sa) + torch.ones(*sb)).shape)
        return
    for f in (lambda a, b: a + b, lambda a, b: a < b):
        with pytest.raises(RuntimeError) as ours: f(fs.ones(*sa), fs.ones(*sb))
        assert str(ours.value).startswith(theirs), (str(ours.value), theirs)
        assert str(list(sa)) in str(ours.value) and str(list(sb)) in str(ours.value)
    big, small = (sa, sb) if len(sa) >= len(sb) else (sb, sa)
    with pytest.raises(RuntimeError) as ours: fs.ones(*big).copy_(fs.ones(*small))
    assert str(list(big)) in str(ours.value) and str(list(small)) in str(ours.value)


@pytest.mark.parametrize('mode', ['no_grad', 'enable_grad', 'set_grad_enabled_false', 'set_grad_enabled_true'])
def test_grad_mode_decorators_pass_every_argument_on(mode):
    results = []
    for lib in (torch, fs):
        deco = {'no_grad': lambda: lib.no_grad(), 'enable_grad': lambda: lib.enable_grad(),
                'set_grad_enabled_false': lambda: lib.set_grad_enabled(False),
                'set_grad_enabled_true': lambda: lib.set_grad_enabled(True)}[mode]()

        @deco
        def f(a, b, *, scale=1.0):
            out = a * b * scale
            return out.requires_grad, lib.is_grad_enabled(), out.tolist()
        x = lib.ones(2, requires_grad=True)
        with lib.no_grad() if mode == 'enable_grad' else lib.enable_grad():
            results.append((f(x, x, scale=2.0), lib.is_grad_enabled()))
    assert results[0] == results[1]


@pytest.mark.parametrize('write', [lambda h, s: h.copy_(s), lambda h, s: h.fill_(2.0), lambda h, s: h.zero_(),
                                   lambda h, s: h.__setitem__(..., s)])
@pytest.mark.parametrize('src_grad', [False, True])
def test_overwritten_history_gets_a_zero_gradient_like_torch(write, src_grad):
    "What an in-place write replaced gets gradient 0 (not None) from the write, as in torch."
    grads = []
    for lib in (torch, fs):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        s = lib.tensor([4.0, 5.0, 6.0], dtype=lib.float64, requires_grad=src_grad)
        h = x * 2
        write(h, s * 1)
        h.sum().backward()
        grads.append((None if x.grad is None else x.grad.tolist(), None if s.grad is None else s.grad.tolist()))
    assert grads[0] == grads[1]


def test_small_corners_the_mutation_run_asked_about():
    "Each line: a behaviour of torch's that no other test pinned down."
    for lib in (torch, fs):
        b = lib.tensor([True, False])
        assert (b ** True).tolist() == [True, False] and (b ** False).tolist() == [True, True]
    for e, n in (('ij,jk', 1), ('ij', 2)):                       # too few / too many operands for the equation
        with pytest.raises(RuntimeError) as theirs: torch.einsum(e, *[torch.ones(2, 2)] * n)
        with pytest.raises(RuntimeError, match=re.escape(str(theirs.value))): fs.einsum(e, *[fs.ones(2, 2)] * n)
    for lib in (torch, fs):                                        # sum_to_size: the sizes as arguments or one tuple
        x = lib.arange(6.0).reshape(2, 3)
        assert x.sum_to_size(1, 3).tolist() == x.sum_to_size((1, 3)).tolist() == [[3.0, 5.0, 7.0]]
        assert x.sum_to_size(3).tolist() == [3.0, 5.0, 7.0]
        with pytest.raises(RuntimeError, match=r'is not expandable to size'): x.sum_to_size(3, 3)
        with pytest.raises(RuntimeError, match=r'cannot compute the inf norm on the dimension 0'):
            lib.zeros(0, 3).norm(float('inf'), dim=(1, 0))
    u = np.array([200, 100], dtype=np.uint8)
    assert dtype_name(fs.tensor(u).sum()) == dtype_name(torch.tensor(u).sum()) == 'int64'
    for a, b in ((np.float32, np.float64), (np.int64, np.float32), (np.int32, np.int64)):
        for f in (lambda l, x, y: l.cat([x, y]), lambda l, x, y: l.stack([x, y]), lambda l, x, y: l.cat([x, x, y])):
            ours = f(fs, fs.tensor(np.ones(2, a)), fs.tensor(np.ones(2, b)))
            assert dtype_name(ours) == dtype_name(f(torch, torch.tensor(np.ones(2, a)), torch.tensor(np.ones(2, b))))
    for lib in (torch, fs):                                        # the old x.var(unbiased) form
        x = lib.tensor([1.0, 2.0, 4.0], dtype=lib.float64)
        assert [x.var(False).item(), x.std(True).item()] == pytest.approx([14 / 9, (7 / 3) ** 0.5])


@pytest.mark.parametrize('name', ['copy_', 'fill_', 'add_', 'sub_', 'mul_', 'div_', 'zero_', 'setitem'])
def test_plain_in_place_writes_count_versions_and_scale_like_torch(name):
    outcome = []
    for lib in (torch, fs):
        x, y = lib.tensor([1.0, 2.0, 3.0]), lib.tensor([2.0, 4.0, 8.0])
        f = {'copy_': lambda: x.copy_(y), 'fill_': lambda: x.fill_(2.0), 'add_': lambda: x.add_(y, alpha=2),
             'sub_': lambda: x.sub_(y, alpha=2), 'mul_': lambda: x.mul_(y), 'div_': lambda: x.div_(y),
             'zero_': lambda: x.zero_(), 'setitem': lambda: x.__setitem__(slice(1, None), 5.0)}[name]
        f(); f()
        outcome.append((x.tolist(), x._version))
    assert outcome[0] == outcome[1]


@pytest.mark.parametrize('sa,sb,message', [
    ((2, 2, 3), (2, 4, 2), 'matmul shapes cannot be multiplied ([2, 2, 3] and [2, 4, 2]): the last dimension of the first (3) '
                           'must equal the second-to-last dimension of the second (4)'),
    ((5, 2, 3), (4, 2), 'matmul shapes cannot be multiplied ([5, 2, 3] and [4, 2]): the last dimension of the first (3) must '
                        'equal the second-to-last dimension of the second (4)'),
    ((2, 2, 3), (3, 3, 2), None), ((3, 2, 3), (2, 3, 2), None)], ids=str)
def test_batched_matmul_errors(sa, sb, message):
    "Our own wording where torch speaks of its kernels (batch2, mat1), torch's own where it names a broadcast."
    with pytest.raises(RuntimeError) as ours: fs.ones(*sa) @ fs.ones(*sb)
    if message: assert str(ours.value) == message
    else:
        with pytest.raises(RuntimeError) as theirs: torch.ones(*sa) @ torch.ones(*sb)
        assert str(ours.value).startswith(str(theirs.value))


@pytest.mark.parametrize('f', [lambda l: -l.tensor([True]), lambda l: l.stack([l.ones(2)], dim=-2), lambda l: l.stack([l.ones(2)], dim=2),
                               lambda l: l.stack([l.ones(2), l.ones(2)], dim=-3), lambda l: l.stack([l.ones(2), l.ones(2)], dim=-1),
                               lambda l: l.ones(2, 3).T.contiguous().is_contiguous(),
                               lambda l: l.tensor([1.0, 2.0], dtype=l.float64).var(0, correction=2),
                               lambda l: l.tensor([1.0, 2.0], dtype=l.float64).std(-1, correction=3)], ids=range(8))
def test_more_corners_like_torch(f):
    try: expected = f(torch)
    except Exception as e:
        with pytest.raises(type(e), match=re.escape(str(e))): f(fs)
        return
    got = f(fs)
    if isinstance(expected, bool): assert got == expected
    else: assert tuple(got.shape) == tuple(expected.shape) and np.allclose(got.numpy(), expected.numpy(), equal_nan=True)


def test_var_of_one_dimension_with_too_few_elements_has_torch_gradient():
    "A 1-D tensor with `dim` given takes the dim formula, 2 (x - mean) / (n - c), even where n - c <= 0."
    grads = []
    for lib in (torch, fs):
        x = lib.tensor([1.0, 2.0, 4.0], dtype=lib.float64, requires_grad=True)
        with __import__('warnings').catch_warnings():
            __import__('warnings').simplefilter('ignore')
            (x.var(0, correction=3) + x.var(-1, correction=4) * 2).backward()
        grads.append(x.grad.tolist())
    assert np.allclose(grads[0], grads[1], equal_nan=True)


def test_engine_corners_like_torch():
    y = fs.tensor([1.0], requires_grad=True) * 2
    assert repr(y.grad_fn.next_functions[0][0]) == '<AccumulateGrad>'
    for lib in (torch, fs):                                         # several outputs, no grad_outputs: all used
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad([(x * x).sum(), (x * 3).sum()], [x])
        assert g.tolist() == [5.0, 7.0]
    x = fs.tensor([1.0, 2.0], dtype=fs.float64, requires_grad=True)   # the index of the output that is wrong
    with pytest.raises(RuntimeError, match=r'Mismatch in shape: grad_output\[1\] has a shape of fromscratch.Size\(\[3\]\)'):
        fs.autograd.grad([x * 1, x * 2], [x], [fs.ones(2, dtype=fs.float64), fs.ones(3, dtype=fs.float64)])

    results = []
    for lib in (torch, fs):
        class Split(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                a, b = x * 2, x * 3
                ctx.mark_non_differentiable(b)
                return a, b
            @staticmethod
            def backward(ctx, ga, gb): return ga * 2
        a, b = Split.apply(lib.tensor([1.0, 2.0], requires_grad=True))
        results.append((a.requires_grad, b.requires_grad))
    assert results[0] == results[1] == (True, False)


@pytest.mark.parametrize('name', ['add_', 'sub_'])
def test_recorded_in_place_writes_with_alpha(name):
    grads = []
    for lib in (torch, fs):
        x, y = (lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in ([1.0, 2.0], [3.0, 5.0]))
        h = x * 1
        getattr(h, name)(y, alpha=2)
        (h * h).sum().backward()
        grads.append((h.tolist(), x.grad.tolist(), y.grad.tolist()))
    assert grads[0] == grads[1]


def test_recorded_copy_of_a_wrong_shape_names_both_shapes():
    h = fs.ones(2, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match=r'The size of tensor a \(3\) must match the size of tensor b \(4\)') as err:
        h.copy_(fs.ones(4))
    assert '[2, 3]' in str(err.value) and '[4]' in str(err.value)


def test_a_stale_view_written_twice_and_a_retained_tensor_deleted_before_backward():
    outcome = []
    for lib in (torch, fs):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64, requires_grad=True)
        h = x * 1
        v = h[0]
        h.mul_(2)                 # v is now stale: its values come from the new h
        v.add_(1)
        v.mul_(3)                 # a second write through the regenerated view
        g = x * 2
        g.retain_grad()
        y = g * 3
        del g                     # the retained tensor is gone before the backward runs
        ((h * h).sum() + y.sum()).backward()
        outcome.append((h.tolist(), x.grad.tolist()))
    assert outcome[0] == outcome[1]


def test_empty_einsum_with_capitals_and_plain_write_errors():
    for lib in (torch, fs):
        e = lib.empty(2, 3)
        assert tuple(e.shape) == (2, 3) and not e.requires_grad and dtype_name(e) == 'float32'
        assert lib.empty((2,), dtype=lib.float64, requires_grad=True).requires_grad
    a = np.arange(6.0).reshape(2, 3)
    for eq in ('Xi->X', 'iX,Xj->ij', 'XY->YX', 'Xi,ij', 'iX'):
        ops = [a] if eq.count(',') == 0 else [a, a.T] if eq != 'Xi,ij' else [a, a.T @ a]
        assert np.allclose(fs.einsum(eq, *[fs.tensor(o) for o in ops]).numpy(),
                           torch.einsum(eq, *[torch.tensor(o) for o in ops]).numpy())
    with pytest.raises(RuntimeError) as err: fs.zeros(2, 3).add_(fs.zeros(4))
    assert '[2, 3]' in str(err.value) and '[4]' in str(err.value)


def test_tensor_of_a_tensor_copies_it():
    for lib in (torch, fs):
        a = lib.tensor([1.0, 2.0])
        with __import__('warnings').catch_warnings():
            __import__('warnings').simplefilter('ignore')     # torch suggests clone().detach()
            b = lib.tensor(a)
        b[0] = 5.0
        assert a.tolist() == [1.0, 2.0] and b.tolist() == [5.0, 2.0] and dtype_name(b) == 'float32'


def test_engine_paths_the_mutation_run_found_unchecked():
    outcome = []
    for lib in (torch, fs):
        class Two(lib.autograd.Function):                   # two outputs, one of them unused downstream
            @staticmethod
            def forward(ctx, x): return x * 2, x * 3
            @staticmethod
            def backward(ctx, ga, gb): return ga * 2 + gb * 3
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        a, b = Two.apply(x)
        a.sum().backward()
        r = [x.grad.tolist()]
        x.grad = None
        y = x * x                                            # the same root twice, and a root below another
        lib.autograd.backward([y, y], [lib.ones(2, dtype=lib.float64), lib.full((2,), 2.0, dtype=lib.float64)])
        r.append(x.grad.tolist())
        x.grad = None
        y1 = x * 3
        y2 = y1 * y1
        lib.autograd.backward([y1, y2], [lib.ones(2, dtype=lib.float64), lib.ones(2, dtype=lib.float64)])
        r.append(x.grad.tolist())
        x.grad = None
        lib.autograd.backward((x * x).sum())                 # no create_graph by default
        r.append(x.grad.requires_grad)
        x.grad = None
        lib.autograd.backward(x * x, lib.ones(2, dtype=lib.float64))   # one tensor, one gradient, not in tuples
        r.append(x.grad.tolist())
        x.grad = None
        (x ** 3).sum().backward(create_graph=True)           # .grad accumulated twice with history...
        (x ** 2).sum().backward(create_graph=True)
        g, = lib.autograd.grad(x.grad.sum(), x)              # ...is differentiable through both
        r.append(g.tolist())
        outcome.append(r)
    assert outcome[0] == outcome[1]


def test_second_derivatives_through_mixed_dtypes():
    "A float32 tensor times a float64 0-d tensor: gradients converted to each input's dtype keep their history."
    from engines import check_second
    check_second(lambda x, s: x * s * s + (x * s).exp(), np.array([0.5, -1.0, 2.0], np.float32), np.array(0.7), dtype=None)


def test_a_gradient_of_another_dtype_is_converted_and_keeps_its_history():
    outcome = []
    for lib in (torch, fs):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        s = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(x * x, x, s * s, create_graph=True)     # a float64 gradient for a float32 output
        h, = lib.autograd.grad(g.sum(), s)
        x2 = lib.tensor([1.0, 2.0], requires_grad=True)
        (x2 * x2).backward(lib.tensor([1.0, 1.0], dtype=lib.float64))
        outcome.append((dtype_name(g), g.tolist(), h.tolist(), dtype_name(x2.grad), x2.grad.tolist()))
    assert outcome[0] == outcome[1]


# ---- what pasted-in code relies on: attributes of its own, and numpy reading a tensor ----------------------------

@pytest.mark.parametrize('make', ['leaf', 'result', 'parameter'])
def test_a_tensor_takes_attributes_of_its_own_as_torchs_does(make):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        t = {'leaf': lambda: x, 'result': lambda: x * 2,
             'parameter': lambda: lib.nn.Parameter(lib.tensor([1.0, 2.0]))}[make]()
        t.g = lib.tensor([3.0, 4.0])
        t.note = 'mine'
        return t.g.tolist(), t.note, hasattr(t.detach(), 'note'), 'note' in vars(t)
    assert run(fs) == run(torch)


def test_numpy_reads_a_tensor_as_torchs_do():
    for lib in (fs, torch):
        t = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
        a = np.asarray(t)
        assert a.dtype == np.float32 and a.tolist() == [[1.0, 2.0], [3.0, 4.0]]
        a[0, 0] = 9.0
        assert t[0, 0].item() == 9.0, 'np.asarray shares the memory'
        assert np.asarray(t, dtype=np.float64).dtype == np.float64
        assert np.asarray(t, dtype=np.float64)[0, 0] == 9.0
    compare_errors(lambda: np.asarray(fs.ones(2, requires_grad=True)),
                   lambda: np.asarray(torch.ones(2, requires_grad=True)))


def test_tensor_of_tensors_that_require_grad_takes_their_values():
    ours = fs.tensor([fs.tensor(1.0, requires_grad=True), fs.tensor(2.0)])
    with pytest.warns(UserWarning):
        theirs = torch.tensor([torch.tensor(1.0, requires_grad=True), torch.tensor(2.0)])
    assert ours.tolist() == theirs.tolist() and not ours.requires_grad
    assert str(ours.dtype) == str(theirs.dtype).replace('torch.', 'fromscratch.')


@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64', None])
def test_finfo_is_torchs(dtype):
    ours = fs.finfo() if dtype is None else fs.finfo(getattr(fs, dtype))
    theirs = torch.finfo() if dtype is None else torch.finfo(getattr(torch, dtype))
    assert repr(ours) == repr(theirs)
    for name in ('bits', 'eps', 'max', 'min', 'tiny', 'smallest_normal', 'resolution', 'dtype'):
        assert getattr(ours, name) == getattr(theirs, name), name


@pytest.mark.parametrize('dtype', ['uint8', 'int8', 'int16', 'int32', 'int64'])
def test_iinfo_is_torchs(dtype):
    ours, theirs = fs.iinfo(getattr(fs, dtype)), torch.iinfo(getattr(torch, dtype))
    assert repr(ours) == repr(theirs)
    assert (ours.bits, ours.max, ours.min, ours.dtype) == (theirs.bits, theirs.max, theirs.min, theirs.dtype)


def test_finfo_and_iinfo_refuse_the_other_kind_of_dtype():
    for ours, theirs in [(lambda: fs.finfo(fs.int64), lambda: torch.finfo(torch.int64)),
                         (lambda: fs.iinfo(fs.float32), lambda: torch.iinfo(torch.float32)),
                         (lambda: fs.iinfo(fs.bool), lambda: torch.iinfo(torch.bool))]:
        compare_errors(ours, theirs, same_message=False)


@pytest.mark.parametrize('make', ['0-d float', '0-d int', 'one element', 'matrix', 'bool', 'float16'])
def test_readings_and_format_specs_are_torchs(make):
    def run(lib):
        t = {'0-d float': lambda: lib.tensor(2.345), '0-d int': lambda: lib.tensor(7),
             'one element': lambda: lib.tensor([1.5]), 'matrix': lambda: lib.ones(2, 3, dtype=lib.float64),
             'bool': lambda: lib.tensor([True, False]), 'float16': lambda: lib.zeros(4, dtype=lib.float16)}[make]()
        specs = []
        for spec in ('', '+.2f', '>8', 'e'):
            try: specs.append(format(t, spec) if t.dim() == 0 or spec == '' else format(t, spec))
            except TypeError as e: specs.append(('TypeError', str(e)))
        return t.nelement(), t.element_size(), t.is_floating_point(), [s if t.dim() == 0 else type(s).__name__ for s in specs]
    assert run(fs) == run(torch)
