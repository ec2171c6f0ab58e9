"""`fromscratch.nn.conv` against torch: conv2d, unfold/fold, the poolings and the conv modules, in shapes, strides,
paddings, dilations, groups, dtypes, first and second gradients, and their error messages."""
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import nn
from fromscratch.testing import check_close

RNG = np.random.default_rng(0)


def pair(fn_ours, fn_torch, arrays, grad_seed=1, **kw):
    "Run both functions on the same float arrays; return ours and torch's (output, *input gradients) after one backward."
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fss = [fs.tensor(a, requires_grad=True) for a in arrays]
    t_out, f_out = fn_torch(*ts, **kw), fn_ours(*fss, **kw)
    assert f_out.is_contiguous() == t_out.is_contiguous()      # `.view` works on ours where it works on torch's
    g = np.random.default_rng(grad_seed).standard_normal(tuple(t_out.shape)).astype(arrays[0].dtype)
    t_out.backward(torch.tensor(g)); f_out.backward(fs.tensor(g))
    return [f_out, *[t.grad for t in fss]], [t_out, *[t.grad for t in ts]]


def assert_pair(ours, theirs, dtype=np.float64):
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    for i, (a, e) in enumerate(zip(ours, theirs)):
        assert a.dtype == fs.float64 if dtype == np.float64 else a.dtype == fs.float32
        check_close(a, e, name=f'item {i}', **tol)


CONV_CASES = [  # (input shape, out channels, kernel, stride, padding, dilation, groups)
    ((2, 3, 7, 6), 4, 3, 1, 0, 1, 1),
    ((1, 1, 5, 5), 2, 1, 1, 0, 1, 1),
    ((2, 4, 9, 8), 6, (3, 2), (2, 1), (1, 2), (1, 2), 2),
    ((1, 6, 5, 5), 6, 3, 1, 'same', 2, 3),
    ((2, 2, 6, 7), 4, (2, 4), 1, 'same', 1, 1),
    ((3, 2, 5, 5), 2, 1, 1, 'valid', 1, 2),
    ((2, 3, 8, 8), 3, 3, 3, 2, 1, 3),
    ((1, 4, 6, 5), 8, (1, 3), (1, 2), (0, 1), (1, 1), 4),
    ((4, 1, 5, 5), 2, 5, 1, 0, 1, 1),
    ((2, 2, 4, 4), 4, 2, 2, 1, 2, 2),
]


@pytest.mark.parametrize('case', CONV_CASES)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('bias', [True, False])
def test_conv2d_matches_torch(case, dtype, bias):
    shape, o, k, s, p, d, g = case
    kh, kw = (k, k) if isinstance(k, int) else k
    arrays = [RNG.standard_normal(shape).astype(dtype), RNG.standard_normal((o, shape[1] // g, kh, kw)).astype(dtype)]
    if bias: arrays.append(RNG.standard_normal(o).astype(dtype))
    opts = dict(stride=s, padding=p, dilation=d, groups=g)
    assert_pair(*pair(F.conv2d, TF.conv2d, arrays, **opts), dtype=dtype)


def test_conv2d_unbatched_and_dtype():
    x, w = RNG.standard_normal((3, 6, 6)), RNG.standard_normal((2, 3, 3, 3))
    assert_pair(*pair(F.conv2d, TF.conv2d, [x, w], padding=1))
    out = F.conv2d(fs.randn(1, 1, 5, 5), fs.randn(1, 1, 3, 3))
    assert out.dtype == fs.float32 and out.shape == (1, 1, 3, 3)


@pytest.mark.parametrize('case', CONV_CASES[::3])
def test_conv2d_second_order_matches_torch(case):
    shape, o, k, s, p, d, g = case
    kh, kw = (k, k) if isinstance(k, int) else k
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal((o, shape[1] // g, kh, kw)), RNG.standard_normal(o)
    opts = dict(stride=s, padding=p, dilation=d, groups=g)

    def run(lib, conv):
        xs = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = conv(*xs, **opts)
        gx, gw = lib.autograd.grad((out ** 2).sum(), xs[:2], create_graph=True)
        ((gx ** 2).sum() + (gw ** 3).sum()).backward()
        return [t.grad for t in xs]
    for a, e in zip(run(fs, F.conv2d), run(torch, TF.conv2d)): check_close(a, e, rtol=1e-9, atol=1e-10)


def test_conv2d_gradcheck_and_gradgradcheck():
    x, w, b = (fs.tensor(RNG.standard_normal(s), requires_grad=True) for s in ((1, 2, 5, 4), (2, 1, 3, 2), (2,)))
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1), groups=2)
    assert fs.autograd.gradcheck(fn, (x, w, b))
    # the gradient as a function of (x, w) checked by finite differences: gradgradcheck
    g = fs.tensor(RNG.standard_normal(tuple(fn(x, w, b).shape)))
    grads = lambda x, w: fs.autograd.grad(fn(x, w, b), (x, w), g, create_graph=True)
    assert fs.autograd.gradcheck(grads, (x, w))


@pytest.mark.parametrize('opts', [dict(kernel_size=3), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
                                  dict(kernel_size=1, stride=2), dict(kernel_size=(3, 1), padding=(1, 0), dilation=2)])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_unfold_fold_match_torch(opts, dtype):
    x = RNG.standard_normal((2, 3, 7, 6)).astype(dtype)
    assert_pair(*pair(F.unfold, TF.unfold, [x], **opts), dtype=dtype)
    cols = TF.unfold(torch.tensor(x), **opts).numpy()
    assert_pair(*pair(lambda c: F.fold(c, (7, 6), **opts), lambda c: TF.fold(c, (7, 6), **opts), [cols]), dtype=dtype)
    assert_pair(*pair(lambda c: F.fold(c, (7, 6), **opts), lambda c: TF.fold(c, (7, 6), **opts), [cols[0]]), dtype=dtype)
    assert_pair(*pair(F.unfold, TF.unfold, [x[0]], **opts), dtype=dtype)


def test_fold_and_unfold_gradgrad():
    c = fs.tensor(RNG.standard_normal((1, 4, 25)), requires_grad=True)
    assert fs.autograd.gradcheck(lambda c: F.fold(c, (4, 4), 2, padding=1), (c,))
    x = fs.tensor(RNG.standard_normal((1, 2, 4, 4)), requires_grad=True)
    assert fs.autograd.gradcheck(lambda x: F.unfold(x, 2, padding=1) ** 2, (x,))


MAXPOOL_CASES = [((2, 3, 7, 6), dict(kernel_size=2)), ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
                 ((3, 8, 9), dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True)),
                 ((1, 1, 5, 5), dict(kernel_size=2, ceil_mode=True)), ((2, 2, 8, 8), dict(kernel_size=3, stride=1, padding=1)),
                 ((1, 2, 9, 7), dict(kernel_size=(2, 3), stride=(3, 2), dilation=(2, 2)))]


@pytest.mark.parametrize('shape,opts', MAXPOOL_CASES)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_max_pool2d_matches_torch(shape, opts, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    assert_pair(*pair(F.max_pool2d, TF.max_pool2d, [x], **opts), dtype=dtype)
    _, ours = F.max_pool2d(fs.tensor(x), return_indices=True, **opts)
    _, theirs = TF.max_pool2d(torch.tensor(x), return_indices=True, **opts)
    assert ours.dtype == fs.int64 and (ours.numpy() == theirs.numpy()).all()


def test_max_pool2d_ties_and_second_order():
    x = np.zeros((1, 1, 4, 4)); x[0, 0, 1, 1] = x[0, 0, 0, 1] = 1.0     # ties: the first maximum gets the gradient
    assert_pair(*pair(F.max_pool2d, TF.max_pool2d, [x], kernel_size=2))
    xt = fs.tensor(RNG.standard_normal((1, 2, 5, 5)), requires_grad=True)
    assert fs.autograd.gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1) ** 2, (xt,))
    g, = fs.autograd.grad((F.max_pool2d(xt, 2) ** 3).sum(), xt, create_graph=True)
    tx = torch.tensor(xt.detach().numpy(), requires_grad=True)
    tg, = torch.autograd.grad((TF.max_pool2d(tx, 2) ** 3).sum(), tx, create_graph=True)
    check_close(fs.autograd.grad((g ** 2).sum(), xt)[0], torch.autograd.grad((tg ** 2).sum(), tx)[0])


AVGPOOL_CASES = [((2, 3, 7, 6), dict(kernel_size=2)), ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
                 ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
                 ((3, 8, 9), dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), ceil_mode=True)),
                 ((1, 1, 5, 5), dict(kernel_size=2, ceil_mode=True, padding=1)), ((1, 2, 5, 5), dict(kernel_size=2, divisor_override=3)),
                 ((2, 2, 6, 6), dict(kernel_size=3, stride=1, padding=1, count_include_pad=False))]


@pytest.mark.parametrize('shape,opts', AVGPOOL_CASES)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_avg_pool2d_matches_torch(shape, opts, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    assert_pair(*pair(F.avg_pool2d, TF.avg_pool2d, [x], **opts), dtype=dtype)


@pytest.mark.parametrize('shape,size', [((2, 3, 7, 6), 3), ((3, 10, 9), (4, None)), ((1, 2, 5, 5), (7, 2)), ((2, 4, 6, 6), 1),
                                        ((1, 1, 9, 4), (2, 3))])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_adaptive_avg_pool2d_matches_torch(shape, size, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    assert_pair(*pair(F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d, [x], output_size=size), dtype=dtype)


def error_of(f):
    try: f()
    except Exception as e: return e
    raise AssertionError('no error')


ERROR_CASES = [  # (function name, args, kwargs): torch's exception class, and a message that names what is wrong
    ('conv2d', ((2, 4, 5, 5), (8, 3, 3, 3)), {}),
    ('conv2d', ((2, 3), (8, 3, 3, 3)), {}),
    ('conv2d', ((1, 2, 3, 5, 5), (8, 3, 3, 3)), {}),
    ('conv2d', ((2, 3, 2, 2), (8, 3, 3, 3)), {}),
    ('conv2d', ((2, 6, 5, 5), (8, 3, 3, 3)), dict(groups=4)),
    ('conv2d', ((2, 6, 5, 5), (8, 3, 3, 3)), dict(groups=2, stride=2, padding='same')),
    ('conv2d', ((2, 6, 5, 5), (8, 3, 3, 3)), dict(groups=2, padding='foo')),
    ('conv2d', ((2, 6, 5, 5), (8, 3, 3, 3)), dict(groups=2, stride=0)),
    ('conv2d', ((2, 6, 5, 5), (8, 3, 3, 3)), dict(groups=2, padding=-1)),
    ('conv2d', ((2, 6, 5, 5), (8, 3, 3, 3), (3,)), dict(groups=2)),
    ('max_pool2d', ((2,),), dict(kernel_size=2)),
    ('max_pool2d', ((2, 3, 4, 4),), dict(kernel_size=3, padding=2)),
    ('max_pool2d', ((2, 3, 1, 1),), dict(kernel_size=3)),
    ('avg_pool2d', ((2, 3, 4, 4),), dict(kernel_size=3, padding=2)),
    ('avg_pool2d', ((2, 3, 1, 1),), dict(kernel_size=3)),
    ('adaptive_avg_pool2d', ((3, 3),), dict(output_size=2)),
    ('unfold', ((1, 3, 3, 3),), dict(kernel_size=4)),
    ('fold', ((1, 10, 4),), dict(output_size=(3, 3), kernel_size=2)),
    ('fold', ((1, 12, 5),), dict(output_size=(3, 3), kernel_size=2)),
]


@pytest.mark.parametrize('name,shapes,kw', ERROR_CASES)
def test_errors_match_torch(name, shapes, kw):
    args = [np.zeros(s) for s in shapes]
    theirs = error_of(lambda: getattr(TF, name)(*[torch.tensor(a) for a in args], **kw))
    ours = error_of(lambda: getattr(F, name)(*[fs.tensor(a) for a in args], **kw))
    assert type(ours) is type(theirs), (ours, theirs)
    assert str(ours).split('\n')[0] == str(theirs).split('\n')[0]


def test_conv2d_dtype_mismatch_names_both():
    e = error_of(lambda: F.conv2d(fs.zeros(1, 2, 4, 4), fs.zeros(1, 2, 3, 3, dtype=fs.float64)))
    assert isinstance(e, RuntimeError) and 'float32' in str(e) and 'float64' in str(e)


def copy_module(ours, theirs):
    with torch.no_grad():
        for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert n == tn and tuple(p.shape) == tuple(tp.shape)
            tp.copy_(torch.tensor(p.detach().numpy()))


@pytest.mark.parametrize('args,kw', [((3, 4, 3), {}), ((4, 6, (3, 2)), dict(stride=2, padding=1, groups=2)),
                                     ((2, 2, 3), dict(padding='same', dilation=2, bias=False)), ((4, 8, 1), dict(groups=4)),
                                     ((3, 4, 3), dict(padding=1, padding_mode='reflect')),
                                     ((2, 4, (3, 2)), dict(padding=(2, 1), stride=2, padding_mode='replicate')),
                                     ((4, 4, 3), dict(padding='same', dilation=2, groups=2, padding_mode='circular')),
                                     ((2, 2, 2), dict(padding='same', padding_mode='reflect', bias=False))])
def test_conv2d_module_matches_torch(args, kw):
    fs.manual_seed(0)
    ours, theirs = nn.Conv2d(*args, dtype=fs.float64, **kw), torch.nn.Conv2d(*args, dtype=torch.float64, **kw)
    fan_in = ours.weight.shape[1] * math.prod(ours.kernel_size)
    assert float(ours.weight.abs().max()) <= 1 / math.sqrt(fan_in)
    if ours.bias is not None: assert float(ours.bias.abs().max()) <= 1 / math.sqrt(fan_in)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert (ours.kernel_size, ours.stride, ours.padding, ours.dilation) == (theirs.kernel_size, theirs.stride, theirs.padding, theirs.dilation)
    copy_module(ours, theirs)
    x = RNG.standard_normal((2, args[0], 7, 6))
    out, tout = ours(fs.tensor(x)), theirs(torch.tensor(x))
    check_close(out, tout)
    (out ** 2).sum().backward(); (tout ** 2).sum().backward()
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()): check_close(p.grad, tp.grad, name=n)
    assert repr(ours) == repr(theirs)


def test_conv2d_default_init_spread():
    fs.manual_seed(0)
    w = nn.Conv2d(16, 32, 3).weight.detach().numpy()
    bound = 1 / math.sqrt(16 * 9)
    assert abs(w.max()) <= bound and abs(w.min()) <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound       # uniform on [-b, b]: std b/sqrt(3)


@pytest.mark.parametrize('kw', [dict(groups=2), dict(padding='same', stride=2), dict(padding='foo'), dict(padding_mode='foo')])
def test_conv2d_module_errors_match_torch(kw):
    theirs = error_of(lambda: torch.nn.Conv2d(3, 4, 3, **kw))
    ours = error_of(lambda: nn.Conv2d(3, 4, 3, **kw))
    assert type(ours) is type(theirs)
    assert str(ours).split(' one of {')[0] == str(theirs).split(' one of {')[0]    # torch prints a set: any order


def test_channel_mismatch_names_both_shapes():
    e = error_of(lambda: nn.Conv2d(3, 8, 3)(fs.zeros(2, 1, 28, 28)))
    assert isinstance(e, RuntimeError) and '[8, 3, 3, 3]' in str(e) and '[2, 1, 28, 28]' in str(e)


@pytest.mark.parametrize('ours,theirs', [
    (lambda: nn.MaxPool2d(2), lambda: torch.nn.MaxPool2d(2)),
    (lambda: nn.MaxPool2d(3, 2, 1, ceil_mode=True), lambda: torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
    (lambda: nn.AvgPool2d(3, 2, 1), lambda: torch.nn.AvgPool2d(3, 2, 1)),
    (lambda: nn.AvgPool2d(2, count_include_pad=False, padding=1), lambda: torch.nn.AvgPool2d(2, count_include_pad=False, padding=1)),
    (lambda: nn.AdaptiveAvgPool2d((2, 3)), lambda: torch.nn.AdaptiveAvgPool2d((2, 3)))])
def test_pool_modules_match_torch(ours, theirs):
    x = RNG.standard_normal((2, 3, 7, 6))
    assert_pair(*pair(ours(), theirs(), [x]))


def test_batchnorm2d_matches_torch():
    for momentum in (0.1, None):
        ours = nn.BatchNorm2d(3, momentum=momentum, dtype=fs.float64)
        theirs = torch.nn.BatchNorm2d(3, momentum=momentum, dtype=torch.float64)
        with torch.no_grad(): theirs.weight.uniform_(); theirs.bias.uniform_()
        copy_module(ours, theirs)
        for step in range(3):
            x = RNG.standard_normal((4, 3, 5, 5)) * (step + 1) + step
            o, t = pair(ours, theirs, [x])
            assert_pair(o, t)
            check_close(ours.running_mean, theirs.running_mean); check_close(ours.running_var, theirs.running_var)
        assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 3
        ours.eval(); theirs.eval()
        assert_pair(*pair(ours, theirs, [RNG.standard_normal((2, 3, 4, 4))]))
        for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()): check_close(p.grad, tp.grad, name=n)


def test_batchnorm2d_dims_and_state_dict():
    e, te = error_of(lambda: nn.BatchNorm2d(3)(fs.zeros(2, 3, 4))), error_of(lambda: torch.nn.BatchNorm2d(3)(torch.zeros(2, 3, 4)))
    assert type(e) is type(te) and str(e) == str(te)
    assert list(nn.BatchNorm2d(3).state_dict()) == list(torch.nn.BatchNorm2d(3).state_dict())
    with pytest.raises(ValueError): nn.BatchNorm1d(3)(fs.zeros(2, 3, 4, 4))


def test_small_cnn_step_for_step_like_torch():
    "A conv-BN-relu-pool CNN trained by SGD: losses and every parameter equal to torch's, in float64, for 3 steps."
    def build(lib):
        m = lib.nn
        return m.Sequential(m.Conv2d(1, 4, 3, padding=1, stride=2), m.BatchNorm2d(4), m.ReLU(), m.Conv2d(4, 8, 3, padding=1),
                            m.MaxPool2d(2), m.ReLU(), m.AdaptiveAvgPool2d(1), m.Flatten(), m.Linear(8, 10))
    fs.manual_seed(0)
    ours, theirs = build(fs).to(fs.float64), build(torch).double()
    copy_module(ours, theirs)
    opt, topt = fs.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9), torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = RNG.standard_normal((8, 1, 12, 12)), RNG.integers(0, 10, 8)
        loss = F.cross_entropy(ours(fs.tensor(x)), fs.tensor(y))
        tloss = TF.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad(); topt.zero_grad(); loss.backward(); tloss.backward()
        check_close(loss, tloss, rtol=1e-12)
        for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()): check_close(p.grad, tp.grad, rtol=1e-9, atol=1e-12, name=n)
        opt.step(); topt.step()
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()): check_close(p, tp, rtol=1e-9, atol=1e-12, name=n)


def torch_mnist_cnn():
    "`fromscratch.train.mnist_cnn`, layer for layer, in torch."
    T = torch.nn
    def block(c_in, c_out, k, **kw): return [T.Conv2d(c_in, c_out, k, bias=False, **kw), T.BatchNorm2d(c_out), T.ReLU()]
    return T.Sequential(T.Unflatten(1, (1, 28, 28)), *block(1, 16, 5, padding=2), T.MaxPool2d(2), *block(16, 32, 3, padding=1),
                        T.MaxPool2d(2), *block(32, 64, 3, stride=2, padding=1), T.Flatten(), T.Linear(64 * 4 * 4, 10))


def test_mnist_cnn_step_for_step_like_torch_in_float64():
    "The CLI's CNN, its optimizer and one-cycle schedule: 6 steps on MNIST batches give torch's losses, gradients and weights."
    from fromscratch.train import MODELS, make_optimizer
    from fromscratch.training import mnist_datasets
    train_ds, _ = mnist_datasets(train_size=6 * 32)
    choice = MODELS['cnn']
    fs.manual_seed(0)
    ours, theirs = choice.build().to(fs.float64), torch_mnist_cnn().double()
    copy_module(ours, theirs)
    opt, sched = make_optimizer(ours.parameters(), choice.lr, 'one-cycle', 6, choice.momentum)
    topt = torch.optim.SGD(theirs.parameters(), lr=choice.lr, momentum=choice.momentum)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=choice.lr, total_steps=6, cycle_momentum=False)
    x_all, y_all = train_ds[:]
    for step in range(6):
        x, y = np.asarray(x_all[step * 32:(step + 1) * 32], np.float64), np.asarray(y_all[step * 32:(step + 1) * 32])
        loss = F.cross_entropy(ours(fs.tensor(x)), fs.tensor(y))
        tloss = TF.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        check_close(loss, tloss, rtol=1e-10, name=f'loss at step {step}')
        opt.zero_grad(); topt.zero_grad(); loss.backward(); tloss.backward()
        for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            check_close(p.grad, tp.grad, rtol=1e-8, atol=1e-12, name=f'{n}.grad at step {step}')
        opt.step(); topt.step(); sched.step(); tsched.step()
    for (n, p), (_, tp) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        check_close(p, tp, rtol=1e-8, atol=1e-12, name=n)
    ours.eval(); theirs.eval()
    check_close(ours(fs.tensor(np.asarray(x_all[:64], np.float64))), theirs(torch.tensor(np.asarray(x_all[:64], np.float64))), rtol=1e-8, atol=1e-10)


def test_cli_cnn_reaches_the_target():
    import re, subprocess, sys
    r = subprocess.run([sys.executable, '-m', 'fromscratch.train', '--model', 'cnn', '--progress', 'never'], capture_output=True,
                       text=True, timeout=600, env={**__import__('os').environ, 'OPENBLAS_NUM_THREADS': '1'})
    assert r.returncode == 0 and r.stderr == '', r.stderr
    *epochs, last = r.stdout.splitlines()
    m = re.fullmatch(r'accuracy=(\d\.\d{4}) loss=(\d+\.\d{4}) seconds=(\d+\.\d{2})', last)
    assert m and len(epochs) == 6 and float(m.group(1)) >= 0.975, r.stdout


@pytest.mark.parametrize('shape', [(6, 3), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize('affine', [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_functional_batch_norm_training_matches_torch(shape, affine, dtype):
    "The fused training-mode `F.batch_norm`: output, gradients of input, weight and bias, and the running statistics."
    arrays = [(RNG.standard_normal(shape) * 3 + 1).astype(dtype)]
    if affine[0]: arrays.append(RNG.standard_normal(shape[1]).astype(dtype))
    if affine[1]: arrays.append(RNG.standard_normal(shape[1]).astype(dtype))
    stats = [np.zeros(shape[1], dtype), np.ones(shape[1], dtype)]
    ours_stats, torch_stats = [fs.tensor(s) for s in stats], [torch.tensor(s) for s in stats]
    def ours(x, *wb): return F.batch_norm(x, *ours_stats, *wb, training=True, momentum=0.3)
    def theirs(x, *wb): return TF.batch_norm(x, *torch_stats, *wb, training=True, momentum=0.3)
    assert_pair(*pair(ours, theirs, arrays), dtype=dtype)
    for a, e in zip(ours_stats, torch_stats): check_close(a, e, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_functional_batch_norm_gradgradcheck():
    x, w, b = (fs.tensor(RNG.standard_normal(s), requires_grad=True) for s in ((4, 2, 3, 3), (2,), (2,)))
    fn = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)
    assert fs.autograd.gradcheck(fn, (x, w, b))
    g = fs.tensor(RNG.standard_normal((4, 2, 3, 3)))
    assert fs.autograd.gradcheck(lambda x, w: fs.autograd.grad(fn(x, w, b), (x, w), g, create_graph=True), (x, w))


# ---------------------------------------------------------------------------------------------------------------
# F.pad: the four modes, crops, one to three padded dimensions, the gradient, and torch's errors

PADS = [   # (input shape, pad, mode, value)
    ((2, 3, 4, 5), (1, 2), 'constant', None), ((2, 3, 4, 5), (1, 2, 0, -1), 'constant', 1.5),
    ((2, 3, 4, 5), (1, 1, 1, 1, 1, 1, 1, 1), 'constant', -2.0), ((3, 4), (-1, -2, 2, 0), 'constant', None),
    ((2, 3, 4, 5), (2, 1, 3, 0), 'reflect', None), ((3, 5), (4, 2), 'reflect', None), ((2, 3, 4, 5), (-1, 2, 1, -1), 'reflect', None),
    ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 0), 'reflect', None), ((2, 3, 4, 5), (3, 0, 1, 2), 'replicate', None),
    ((2, 4, 6), (9, 7), 'replicate', None), ((2, 3, 4, 5), (-2, 1, 0, 3), 'replicate', None),
    ((2, 3, 4, 5), (-1, 4, 2, 2), 'circular', None), ((3, 4, 5), (5, 5, 0, 4), 'circular', None),
    ((2, 3, 4, 5), (2, -1, 1, 1), 'circular', None), ((1, 1, 3, 4, 5), (1, 1, 2, 2, 3, 3), 'circular', None),
    ((2, 3, 4, 5), (1, 1, 1, 1), 'reflect', 0.0),
]


@pytest.mark.parametrize('shape,amounts,mode,value', PADS)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_pad_matches_torch(shape, amounts, mode, value, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    assert_pair(*pair(F.pad, TF.pad, [x], pad=amounts, mode=mode, value=value), dtype=dtype)


def test_pad_of_integers_casts_the_value_and_padding_is_differentiable_twice():
    ours, theirs = F.pad(fs.ones(2, 3, dtype=fs.int64), (1, 1), value=2.5), TF.pad(torch.ones(2, 3, dtype=torch.int64), (1, 1), value=2.5)
    assert ours.dtype == fs.int64 and np.array_equal(ours.numpy(), theirs.numpy())
    x = fs.tensor(RNG.standard_normal((1, 2, 3, 4)), requires_grad=True)
    for mode in ('reflect', 'replicate', 'circular', 'constant'):
        assert fs.autograd.gradcheck(lambda x: F.pad(x * x, (2, 1, 2, 0), mode=mode), (x,))
        assert fs.autograd.gradgradcheck(lambda x: F.pad(x * x, (1, 2, 0, 2), mode=mode), (x,))


PAD_ERRORS = [((2, 3), (1,), 'constant', None), ((2, 3), (1, 1, 1, 1, 1, 1), 'constant', None), ((2, 3), (1, 1), 'foo', None),
              ((2, 3, 4), (1, 1), 'reflect', 2.0), ((4,), (1, 1), 'reflect', None), ((2, 3), (1, 1, 1, 1), 'replicate', None),
              ((1, 2, 3, 4), (1, 1), 'circular', None), ((1, 2, 3, 4), (4, 4), 'reflect', None),
              ((1, 2, 3, 4), (0, 0, 3, 1), 'reflect', None), ((1, 2, 3, 4), (0, 0, 4, 0), 'circular', None),
              ((2, 0, 3), (1, 1), 'replicate', None), ((3, 4), (-3, -2), 'constant', None)]


@pytest.mark.parametrize('shape,amounts,mode,value', PAD_ERRORS)
def test_pad_errors_match_torch(shape, amounts, mode, value):
    theirs = error_of(lambda: TF.pad(torch.zeros(shape), amounts, mode=mode, value=value))
    ours = error_of(lambda: F.pad(fs.zeros(*shape), amounts, mode=mode, value=value))
    assert type(ours) is type(theirs) and str(ours) == str(theirs), (ours, theirs)
