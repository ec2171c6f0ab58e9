"""The convolution family under `torch.func`'s transforms, against torch: every op's batching rule (`vmap`, with
each argument batched or not) and forward-mode rule (`jvp`), per-sample gradients of CNNs (the torch.func
tutorial) in float64 over strides, paddings, dilations, groups and poolings, Jacobians and Hessians through a
conv net, class targets that vary with the sample, and the clean errors of what stays unsupported."""
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import func
from fromscratch.testing import check_close

TOL = dict(rtol=1e-10, atol=1e-12)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def both(arrays):
    "The same float64 arrays as our tensors and as torch's."
    return [fs.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


def check_vmap(ours, theirs, arrays, in_dims=0, out=None):
    "vmap(ours) and torch.func.vmap(theirs) on the same arrays agree (every output, when a tuple)."
    mine, tt = both(arrays)
    a = func.vmap(ours, in_dims=in_dims)(*mine)
    b = torch.func.vmap(theirs, in_dims=in_dims)(*tt)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert tuple(x.shape) == tuple(y.shape)
        check_close(x, y, **TOL)


def check_jvp(ours, theirs, arrays, mask=None, seed=1):
    "jvp of ours and of theirs along the same random tangents (zeros where `mask` is False) agree."
    mask = mask or [True] * len(arrays)
    tangents = [rand(*np.shape(a), seed=seed + i) * m for i, (a, m) in enumerate(zip(arrays, mask))]
    (mine, tt), (mt, ttt) = both(arrays), both(tangents)
    p, t = func.jvp(ours, tuple(mine), tuple(mt))
    q, u = torch.func.jvp(theirs, tuple(tt), tuple(ttt))
    check_close(p, q, **TOL)
    check_close(t, u, **TOL)


# ---------------------------------------------------------------------------------------------------------------
# conv2d: each of input, weight and bias batched or shared; forward mode in each of them

CONV_OPTS = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
    dict(padding='same', dilation=2, groups=4),
    dict(padding='valid', stride=3),
]


@pytest.mark.parametrize('opts', CONV_OPTS)
@pytest.mark.parametrize('dims', [(0, 0, 0), (0, None, None), (None, 0, None), (None, None, 0), (0, None, 0),
                                  (None, 0, 0), (1, 0, None), (2, 3, 0)])
def test_conv2d_under_vmap(opts, dims):
    b, shapes = 3, [(2, 4, 7, 6), (8, 4 // opts.get('groups', 1), 3, 2), (8,)]
    arrays = []
    for i, (shape, d) in enumerate(zip(shapes, dims)):
        if d is None: arrays.append(rand(*shape, seed=i))
        else: arrays.append(np.moveaxis(rand(b, *shape, seed=i), 0, d).copy())
    check_vmap(partial(F.conv2d, **opts), partial(TF.conv2d, **opts), arrays, in_dims=dims)


def test_conv2d_under_vmap_unbatched_images_and_no_bias():
    x, w = rand(3, 4, 6, 5), rand(3, 6, 2, 3, 3, seed=1)
    check_vmap(lambda x, w: F.conv2d(x, w, groups=2, padding=1),
               lambda x, w: TF.conv2d(x, w, groups=2, padding=1), [x, w])


def test_conv2d_under_nested_vmap():
    x, w = rand(2, 3, 1, 4, 6, 6), rand(2, 5, 4, 3, 3, seed=1)
    ours = func.vmap(func.vmap(partial(F.conv2d, stride=2), in_dims=(0, None)), in_dims=(0, 0))
    theirs = torch.func.vmap(torch.func.vmap(partial(TF.conv2d, stride=2), in_dims=(0, None)), in_dims=(0, 0))
    check_close(ours(fs.tensor(x), fs.tensor(w)), theirs(torch.tensor(x), torch.tensor(w)), **TOL)


@pytest.mark.parametrize('opts', CONV_OPTS)
@pytest.mark.parametrize('mask', [[True, True, True], [True, False, False], [False, True, False], [False, False, True],
                                  [False, True, True]])
def test_conv2d_jvp(opts, mask):
    arrays = [rand(2, 4, 7, 6), rand(8, 4 // opts.get('groups', 1), 3, 2, seed=1), rand(8, seed=2)]
    check_jvp(partial(F.conv2d, **opts), partial(TF.conv2d, **opts), arrays, mask)


def test_conv2d_unbatched_image_jvp_and_vmap_of_jvp():
    x, w = rand(4, 6, 6), rand(2, 4, 3, 3, seed=1)
    check_jvp(partial(F.conv2d, padding=1), partial(TF.conv2d, padding=1), [x, w])
    tx = rand(5, 4, 6, 6, seed=3)           # a batch of directions at once: the columns of a Jacobian
    ours = func.vmap(lambda t: func.jvp(lambda x: F.conv2d(x, fs.tensor(w)), (fs.tensor(x),), (t,))[1])(fs.tensor(tx))
    theirs = torch.func.vmap(lambda t: torch.func.jvp(lambda x: TF.conv2d(x, torch.tensor(w)), (torch.tensor(x),),
                                                      (t,))[1])(torch.tensor(tx))
    check_close(ours, theirs, **TOL)


# ---------------------------------------------------------------------------------------------------------------
# unfold and fold (Im2col and Col2im), and the poolings (MaxPool2dFunction, Gather, ScatterAdd, Im2col, matmul)

UNFOLD_OPTS = [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
               dict(kernel_size=3, padding=(0, 1), stride=2)]


@pytest.mark.parametrize('opts', UNFOLD_OPTS)
@pytest.mark.parametrize('unbatched', [False, True])
def test_unfold_and_fold_under_vmap_and_jvp(opts, unbatched):
    x = rand(3, 2, 3, 7, 6)[:, 0] if unbatched else rand(3, 2, 3, 7, 6)
    check_vmap(partial(F.unfold, **opts), partial(TF.unfold, **opts), [x])
    check_jvp(partial(F.unfold, **opts), partial(TF.unfold, **opts), [x[0]])
    cols = TF.unfold(torch.tensor(x[0]), **opts).numpy()
    batched_cols = np.stack([cols * (i + 1) for i in range(3)])
    check_vmap(partial(F.fold, output_size=(7, 6), **opts), partial(TF.fold, output_size=(7, 6), **opts),
               [batched_cols])
    check_jvp(partial(F.fold, output_size=(7, 6), **opts), partial(TF.fold, output_size=(7, 6), **opts), [cols])


POOLS = [
    ('max_pool2d', dict(kernel_size=2)),
    ('max_pool2d', dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ('max_pool2d', dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1))),
    ('max_pool2d', dict(kernel_size=2, return_indices=True)),
    ('avg_pool2d', dict(kernel_size=2)),
    ('avg_pool2d', dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ('avg_pool2d', dict(kernel_size=(3, 2), stride=1, padding=(1, 0), divisor_override=3)),
    ('adaptive_avg_pool2d', dict(output_size=(4, 3))),
    ('adaptive_avg_pool2d', dict(output_size=(None, 2))),
]


@pytest.mark.parametrize('name,opts', POOLS)
@pytest.mark.parametrize('batch_dim', [0, 2])
def test_poolings_under_vmap(name, opts, batch_dim):
    x = np.moveaxis(rand(4, 2, 3, 7, 6), 0, batch_dim).copy()
    check_vmap(partial(getattr(F, name), **opts), partial(getattr(TF, name), **opts), [x], in_dims=batch_dim)


@pytest.mark.parametrize('name,opts', [p for p in POOLS if not p[1].get('return_indices')])
@pytest.mark.parametrize('shape', [(2, 3, 7, 6), (3, 5, 5)])
def test_poolings_jvp(name, opts, shape):
    check_jvp(partial(getattr(F, name), **opts), partial(getattr(TF, name), **opts), [rand(*shape)])


def test_max_pool2d_indices_under_vmap_are_torchs():
    x = rand(3, 2, 2, 6, 7)
    _, ours = func.vmap(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True))(fs.tensor(x))
    _, theirs = torch.func.vmap(lambda x: TF.max_pool2d(x, 3, 2, 1, return_indices=True))(torch.tensor(x))
    assert ours.dtype == fs.int64 and np.array_equal(ours.numpy(), theirs.numpy())


def test_max_pool2d_under_vmap_was_a_crash_and_now_runs():
    # a function under vmap sees a sample without values: the positions of the maxima are found inside the op
    x = fs.randn(4, 1, 2, 6, 6, dtype=fs.float64)
    out = func.vmap(lambda x: F.max_pool2d(x, 2))(x)
    check_close(out, TF.max_pool2d(torch.tensor(x.numpy()).flatten(0, 1), 2).unflatten(0, (4, 1)), **TOL)


def test_pool_backward_ops_under_vmap_and_jvp():
    "Rows of the Jacobian of a pooling, by a batched backward: ScatterAdd, Col2im and the matmuls under vmap."
    x = rand(2, 3, 6, 5)
    for name, opts in POOLS:
        if opts.get('return_indices'): continue
        ours = func.jacrev(partial(getattr(F, name), **opts))(fs.tensor(x))
        theirs = torch.func.jacrev(partial(getattr(TF, name), **opts))(torch.tensor(x))
        check_close(ours, theirs, **TOL)
        ours = func.jacfwd(func.grad(lambda x: (getattr(F, name)(x, **opts) ** 3).sum()))(fs.tensor(x))
        theirs = torch.func.jacfwd(torch.func.grad(lambda x: (getattr(TF, name)(x, **opts) ** 3).sum()))(torch.tensor(x))
        check_close(ours, theirs, **TOL)


PADS = [((1, 2), 'constant', 1.5), ((2, 1, 3, 0), 'reflect', None), ((-1, 2, 1, -1), 'reflect', None),
        ((3, 0, 1, 2), 'replicate', None), ((-1, 4, 2, 2), 'circular', None), ((1, 2, 2, 1, 1, 0), 'reflect', None)]


@pytest.mark.parametrize('amounts,mode,value', PADS)
@pytest.mark.parametrize('batch_dim', [0, 1])
def test_pad_under_vmap_and_jvp(amounts, mode, value, batch_dim):
    x = np.moveaxis(rand(3, 2, 3, 4, 5), 0, batch_dim).copy()
    opts = dict(pad=amounts, mode=mode, value=value)
    check_vmap(partial(F.pad, **opts), partial(TF.pad, **opts), [x], in_dims=batch_dim)
    check_jvp(partial(F.pad, **opts), partial(TF.pad, **opts), [rand(2, 3, 4, 5)])


# ---------------------------------------------------------------------------------------------------------------
# per-sample gradients of CNNs: the torch.func tutorial, over the options of the layers

def make_cnn(lib, conv, pool, pool_opts, classes=3):
    "Conv2d → BatchNorm2d → ReLU → pooling → Conv2d → ReLU → global mean → Linear, in `lib` (fs or torch)."
    nn, Fn = lib.nn, (F if lib is fs else TF)
    c_in, c_mid, c_out, k, opts = conv
    first, second = nn.Conv2d(c_in, c_mid, k, **opts), nn.Conv2d(c_mid, c_out, 2, groups=opts.get('groups', 1))
    norm, head = nn.BatchNorm2d(c_mid), nn.Linear(c_out, classes)
    layers = nn.ModuleDict(dict(first=first, norm=norm, second=second, head=head))
    def forward(x):
        x = getattr(Fn, pool)(Fn.relu(layers['norm'](layers['first'](x))), **pool_opts)
        return layers['head'](Fn.relu(layers['second'](x)).mean((2, 3)))
    return layers, forward


CNNS = [   # (in, mid, out channels, kernel, conv options), pooling, its options, image shape
    ((1, 4, 6, 3, dict(padding=1)), 'max_pool2d', dict(kernel_size=2), (1, 8, 8)),
    ((2, 4, 4, 3, dict(stride=2, padding=1, groups=2)), 'avg_pool2d', dict(kernel_size=2, stride=1), (2, 9, 8)),
    ((3, 6, 6, (3, 2), dict(dilation=(2, 1), padding=(2, 1), groups=3)), 'max_pool2d',
     dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (3, 10, 9)),
    ((1, 3, 4, 5, dict(padding='same')), 'avg_pool2d', dict(kernel_size=3, padding=1, count_include_pad=False),
     (1, 7, 7)),
    ((2, 4, 2, 2, dict(stride=(1, 2), bias=False)), 'max_pool2d', dict(kernel_size=(2, 1), dilation=(1, 1)),
     (2, 8, 9)),
    ((1, 2, 2, 3, dict(padding=(1, 0))), 'adaptive_avg_pool2d', dict(output_size=(3, 4)), (1, 6, 7)),
    ((2, 4, 4, 3, dict(padding=1, padding_mode='reflect')), 'max_pool2d', dict(kernel_size=2), (2, 7, 8)),
    ((1, 4, 2, 3, dict(padding='same', dilation=2, padding_mode='circular')), 'avg_pool2d', dict(kernel_size=2),
     (1, 8, 8)),
]


def twin_cnns(conv, pool, pool_opts):
    "Our CNN in float64, in evaluation mode with running statistics of its own, and torch's with the same state."
    fs.manual_seed(0)
    ours, forward = make_cnn(fs, conv, pool, pool_opts)
    ours.to(fs.float64)
    ours['norm'].running_mean.copy_(fs.tensor(rand(conv[1], seed=7) * 0.1))
    ours['norm'].running_var.copy_(fs.tensor(rand(conv[1], seed=8) ** 2 + 0.5))
    theirs, tforward = make_cnn(torch, conv, pool, pool_opts)
    theirs.double().load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    ours.eval(); theirs.eval()
    return (ours, forward), (theirs, tforward)


def cnn_case(case, n):
    "Case `case` of CNNS: for each library its model, forward and parameters; n images and labels."
    conv, pool, pool_opts, image = CNNS[case]
    twins = twin_cnns(conv, pool, pool_opts)
    x, y = rand(n, *image, seed=case), np.random.default_rng(case).integers(0, 3, n)
    return [(m, f, {k: v.detach() for k, v in m.named_parameters()}) for m, f in twins] + [x, y]


def sample_loss(lib, model, forward):
    "The loss of one sample as a function of the parameters: functional_call, as the tutorial writes it."
    fc, Fn = (func.functional_call, F) if lib is fs else (torch.func.functional_call, TF)
    buffers = dict(model.named_buffers())
    class Call(lib.nn.Module):   # forward as a module's, so that functional_call swaps the parameters in
        def __init__(self): super().__init__(); self.m = model
        def forward(self, x): return forward(x)
    call = Call()
    def loss(params, x, y):
        out = fc(call, ({f'm.{k}': v for k, v in params.items()}, {f'm.{k}': v for k, v in buffers.items()}),
                 (x.unsqueeze(0),))
        return Fn.cross_entropy(out, y.unsqueeze(0))
    return loss


@pytest.mark.parametrize('case', range(len(CNNS)))
def test_per_sample_gradients_of_cnns_match_torch(case):
    (ours, forward, params), (theirs, tforward, tparams), x, y = cnn_case(case, 5)
    got = func.vmap(func.grad(sample_loss(fs, ours, forward)), in_dims=(None, 0, 0))(params, fs.tensor(x),
                                                                                      fs.tensor(y))
    want = torch.func.vmap(torch.func.grad(sample_loss(torch, theirs, tforward)), in_dims=(None, 0, 0))(
        tparams, torch.tensor(x), torch.tensor(y))
    assert set(got) == set(want)
    for k in want:
        assert tuple(got[k].shape) == (5, *want[k].shape[1:])
        check_close(got[k], want[k], name=k, **TOL)
    # and each is the gradient of that one sample's loss, as a loop over the samples would give it
    one = func.grad(sample_loss(fs, ours, forward))(params, fs.tensor(x[3]), fs.tensor(y[3]))
    for k in one: check_close(got[k][3], one[k], name=k, **TOL)


@pytest.mark.parametrize('case', [0, 2, 3])
def test_jacobians_hessian_and_jvp_through_a_cnn_match_torch(case):
    (ours, forward, params), (theirs, tforward, tparams), x, y = cnn_case(case, 4)
    loss, tloss = sample_loss(fs, ours, forward), sample_loss(torch, theirs, tforward)
    logits = lambda x: forward(x.unsqueeze(0))[0]
    tlogits = lambda x: tforward(x.unsqueeze(0))[0]
    for ours_t, theirs_t in [(func.jacrev, torch.func.jacrev), (func.jacfwd, torch.func.jacfwd)]:
        check_close(ours_t(logits)(fs.tensor(x[0])), theirs_t(tlogits)(torch.tensor(x[0])), **TOL)
    # the Hessian of one sample's loss in its image, and in the second convolution's weight
    check_close(func.hessian(loss, argnums=1)(params, fs.tensor(x[1]), fs.tensor(y[1])),
                torch.func.hessian(tloss, argnums=1)(tparams, torch.tensor(x[1]), torch.tensor(y[1])), **TOL)
    name = 'second.weight'
    h = func.hessian(lambda w: loss({**params, name: w}, fs.tensor(x[1]), fs.tensor(y[1])))(params[name])
    th = torch.func.hessian(lambda w: tloss({**tparams, name: w}, torch.tensor(x[1]), torch.tensor(y[1])))(
        tparams[name])
    check_close(h, th, **TOL)
    # a directional derivative in every parameter at once, and a batch of Hessian-vector products
    v = {k: rand(*p.shape, seed=i + 20) for i, (k, p) in enumerate(params.items())}
    _, ours_t = func.jvp(lambda p: loss(p, fs.tensor(x[2]), fs.tensor(y[2])), (params,),
                         ({k: fs.tensor(a) for k, a in v.items()},))
    _, theirs_t = torch.func.jvp(lambda p: tloss(p, torch.tensor(x[2]), torch.tensor(y[2])), (tparams,),
                                 ({k: torch.tensor(a) for k, a in v.items()},))
    check_close(ours_t, theirs_t, **TOL)
    ours_h = func.vmap(lambda x, y: func.jvp(lambda p: func.grad(loss)(p, x, y), (params,),
                                             ({k: fs.tensor(a) for k, a in v.items()},))[1])(fs.tensor(x), fs.tensor(y))
    theirs_h = torch.func.vmap(lambda x, y: torch.func.jvp(lambda p: torch.func.grad(tloss)(p, x, y), (tparams,),
                                                           ({k: torch.tensor(a) for k, a in v.items()},))[1])(
        torch.tensor(x), torch.tensor(y))
    for k in theirs_h: check_close(ours_h[k], theirs_h[k], name=k, **TOL)


# ---------------------------------------------------------------------------------------------------------------
# class targets that vary with the sample (the tutorial's labels), and what stays unsupported says so

@pytest.mark.parametrize('loss', ['cross_entropy', 'nll_loss'])
@pytest.mark.parametrize('dims', [(0, 0), (None, 0), (0, None)])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_class_losses_with_batched_targets(loss, dims, reduction):
    x, t = rand(4, 5, 3), np.random.default_rng(1).integers(0, 3, (4, 5))
    args = [x if dims[0] == 0 else x[0], t if dims[1] == 0 else t[0]]
    ours = func.vmap(partial(getattr(F, loss), reduction=reduction), in_dims=dims)(*map(fs.tensor, args))
    theirs = torch.func.vmap(partial(getattr(TF, loss), reduction=reduction), in_dims=dims)(*map(torch.tensor, args))
    check_close(ours, theirs, **TOL)


def test_batched_targets_nested_and_per_pixel():
    x, t = rand(2, 3, 4, 3, 2, 2), np.random.default_rng(1).integers(0, 3, (2, 3, 4, 2, 2))
    ours = func.vmap(func.vmap(F.cross_entropy))(fs.tensor(x), fs.tensor(t))
    theirs = torch.func.vmap(torch.func.vmap(TF.cross_entropy))(torch.tensor(x), torch.tensor(t))
    check_close(ours, theirs, **TOL)
    ours = func.vmap(func.vmap(F.nll_loss, in_dims=(0, None)), in_dims=(None, 0))(fs.tensor(x[0]), fs.tensor(t[:, 0]))
    theirs = torch.func.vmap(torch.func.vmap(TF.nll_loss, in_dims=(0, None)), in_dims=(None, 0))(
        torch.tensor(x[0]), torch.tensor(t[:, 0]))
    check_close(ours, theirs, **TOL)


def test_a_batched_target_out_of_range_is_torchs_error():
    x, t = fs.randn(2, 4, 3), fs.tensor([[0, 1, 2, 1], [0, 3, 1, 1]])
    with pytest.raises(IndexError, match="Target 3 is out of bounds."): func.vmap(F.cross_entropy)(x, t)
    with pytest.raises(IndexError, match="Target -1 is out of bounds."): func.vmap(F.nll_loss)(x, -t)


def test_ops_without_a_rule_name_themselves():
    x = fs.randn(3, 2, 4, 5, 5)
    # batch norm in training mode: its running statistics would be one for every sample
    with pytest.raises(NotImplementedError, match="no batching rule for BatchNormFunction"):
        func.vmap(lambda x: F.batch_norm(x, None, None, training=True))(x)
    with pytest.raises(NotImplementedError, match="cross_entropy and nll_loss with class weights or ignored"):
        func.vmap(F.cross_entropy)(fs.randn(2, 3, 4), fs.tensor([[0, 1, -100], [1, 1, 1]]))
    with pytest.raises(NotImplementedError, match="with class weights or ignored targets"):
        func.vmap(partial(F.cross_entropy, weight=fs.ones(4)))(fs.randn(2, 3, 4), fs.tensor([[0, 1, 2], [1, 1, 1]]))


def test_library_code_that_reads_a_samples_values_names_itself():
    # a check or a position computed in Python, outside an op, cannot see a sample's values under vmap: the
    # error names the library function that tried (torch would fall back to a loop), never numpy's internals
    x, t = fs.randn(3, 4, 5), fs.tensor(np.random.default_rng(0).integers(0, 5, (3, 4)))
    w = fs.randn(5, 2)   # drawn outside: vmap refuses random draws inside by default, as torch's does
    for fn, name in [(lambda a, i: F.one_hot(i, 5), 'one_hot'), (lambda a, i: F.embedding(i, w), 'embedding'),
                     (lambda a, i: fs.where(a > 0)[0], 'where')]:
        with pytest.raises(NotImplementedError, match=f"vmap: there is no batching rule for {name} yet"):
            func.vmap(fn)(x, t)
    from fromscratch.func import LogicalArray
    sample = LogicalArray((2, 3), np.float64)
    for read in (lambda: np.asarray(sample), lambda: sample[0], lambda: sample.min(), lambda: float(sample)):
        with pytest.raises(NotImplementedError, match="vmap: a sample has a shape but no values"): read()
    assert not hasattr(sample, '__array_interface__') and sample.ndim == 2 and sample.size == 6
