"""The hand-written layers and gradients of 02_backprop against torch autograd in float64, and the init experiments."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from fromscratch.lessons.backprop import (activation_stats, forward_and_backward, init_mlp, init_weights, lin, lin_grad, mlp,
                                  mse, mse_grad, relu, relu_grad, to_target_shape, torch_grads)
from fromscratch.testing import check_close

RTOL, ATOL = 1e-10, 1e-12
sizes = st.integers(1, 8)
seeds = st.integers(0, 2**32 - 1)


def normal(seed, *shape): return np.random.default_rng(seed).standard_normal(shape)


def torch_mlp(x, w1, b1, w2, b2): return torch.relu(x @ w1 + b1) @ w2 + b2


def torch_loss(x, target, w1, b1, w2, b2):
    out = torch_mlp(x, w1, b1, w2, b2)
    return F.mse_loss(out.squeeze(-1) if out.shape != target.shape else out, target)


# ---------------------------------------------------------------- forward pieces

@settings(max_examples=30, deadline=None)
@given(sizes, sizes, sizes, seeds)
def test_lin_matches_torch(n, n_in, n_out, seed):
    x, w, b = normal(seed, n, n_in), normal(seed + 1, n_in, n_out), normal(seed + 2, n_out)
    t = F.linear(torch.from_numpy(x), torch.from_numpy(w).T, torch.from_numpy(b))
    check_close(lin(x, w, b), t, rtol=RTOL, atol=ATOL)


def test_relu_matches_torch_including_zeros():
    x = np.array([-3.0, -1e-300, -0.0, 0.0, 1e-300, 2.5, np.inf, -np.inf])
    check_close(relu(x), torch.relu(torch.from_numpy(x)), rtol=0, atol=0)
    assert relu(np.float32([-1, 2])).dtype == np.float32


@pytest.mark.parametrize('out_shape,target_shape', [((7, 1), (7,)), ((7,), (7,)), ((3, 4), (3, 4)), ((1, 1), (1,)),
                                                    ((2, 3, 1), (2, 3))])
def test_mse_matches_torch(out_shape, target_shape):
    out, target = normal(0, *out_shape), normal(1, *target_shape)
    t_out = torch.from_numpy(out)
    t_out = t_out.squeeze(-1) if out_shape != target_shape else t_out
    check_close(mse(out, target), F.mse_loss(t_out, torch.from_numpy(target)), rtol=RTOL, atol=0)


@pytest.mark.parametrize('out_shape,target_shape', [((7, 1), (6,)), ((7, 2), (7,)), ((7,), (7, 1)), ((3, 4), (4, 3))])
def test_mse_refuses_mismatched_shapes(out_shape, target_shape):
    msg = f'output of shape {out_shape} does not match target of shape {target_shape}'
    with pytest.raises(ValueError, match=msg.replace('(', r'\(').replace(')', r'\)')):
        mse(np.zeros(out_shape), np.zeros(target_shape))
    with pytest.raises(ValueError):
        mse_grad(np.zeros(out_shape), np.zeros(target_shape))


def test_to_target_shape():
    out = np.arange(3.0)[:, None]
    assert to_target_shape(out, np.zeros(3)).shape == (3,)
    assert to_target_shape(out, np.zeros((3, 1))) is out


@settings(max_examples=25, deadline=None)
@given(sizes, st.integers(1, 40), sizes, sizes, seeds)
def test_mlp_matches_torch(n, n_in, n_hidden, n_out, seed):
    x = normal(seed, n, n_in)
    params = init_mlp(n_in, n_hidden, n_out, seed=seed % 1000)
    t = torch_mlp(*(torch.from_numpy(v) for v in (x, *params)))
    check_close(mlp(x, *params), t, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- torch_grads, the oracle

def test_torch_grads_reads_autograd():
    out, (ga, gb) = torch_grads(lambda a, b: (a * b).sum(), [1.0, 2.0], [3.0, 4.0])
    assert float(out) == 11.0 and ga.tolist() == [3.0, 4.0] and gb.tolist() == [1.0, 2.0]
    out, (g,) = torch_grads(lambda a: a * 2, [1.0, 2.0], grad_output=[10.0, 100.0])
    assert g.tolist() == [20.0, 200.0] and g.dtype == np.float64


def test_torch_grads_unused_input_is_none():
    _, (ga, gb) = torch_grads(lambda a, b: a.sum(), [1.0], [2.0])
    assert ga.tolist() == [1.0] and gb is None


# ---------------------------------------------------------------- gradients against autograd

@settings(max_examples=40, deadline=None)
@given(sizes, sizes, seeds, st.booleans())
def test_mse_grad_matches_autograd(n, m, seed, column):
    target = normal(seed, n) if column else normal(seed, n, m)
    out = normal(seed + 1, n, 1) if column else normal(seed + 1, n, m)
    loss, (g_out, g_target) = torch_grads(lambda o, t: F.mse_loss(o.squeeze(-1) if column else o, t), out, target)
    g = mse_grad(out, target)
    assert g.shape == out.shape
    check_close(g, g_out, rtol=RTOL, atol=ATOL, name='mse_grad')
    check_close(mse(out, target), loss, rtol=RTOL, atol=0)
    check_close(-g.reshape(target.shape), g_target, rtol=RTOL, atol=ATOL)   # and the target's, by symmetry


@settings(max_examples=40, deadline=None)
@given(sizes, sizes, seeds, st.floats(0, 0.5))
def test_relu_grad_matches_autograd(n, m, seed, zero_fraction):
    x = normal(seed, n, m)
    rng = np.random.default_rng(seed + 7)
    x[rng.random(x.shape) < zero_fraction] = 0.0          # exact zeros: the corner where a convention is needed
    g = normal(seed + 1, n, m)
    _, (gx,) = torch_grads(torch.relu, x, grad_output=g)
    check_close(relu_grad(x, g), gx, rtol=RTOL, atol=ATOL, name='relu_grad')


def test_relu_grad_at_zero_is_zero():
    x = np.array([-2.0, -0.0, 0.0, 1e-300, 3.0])
    g = np.array([5.0, 5.0, 5.0, 5.0, -5.0])
    assert relu_grad(x, g).tolist() == [0.0, 0.0, 0.0, 5.0, -5.0]
    _, (gx,) = torch_grads(torch.relu, x, grad_output=g)
    assert gx.tolist() == [0.0, 0.0, 0.0, 5.0, -5.0]
    assert float(relu_grad(0.0, 1.0)) == 0.0
    assert not np.signbit(relu_grad(np.array([-1.0]), np.array([-3.0]))).any()   # no -0.0 where blocked


@settings(max_examples=40, deadline=None)
@given(sizes, sizes, sizes, seeds)
def test_lin_grad_matches_autograd(n, n_in, n_out, seed):
    x, w, b = normal(seed, n, n_in), normal(seed + 1, n_in, n_out), normal(seed + 2, n_out)
    g = normal(seed + 3, n, n_out)
    _, (gx, gw, gb) = torch_grads(lambda x, w, b: x @ w + b, x, w, b, grad_output=g)
    ours = lin_grad(x, w, b, g)
    for name, mine, theirs, like in zip(('grad_x', 'grad_w', 'grad_b'), ours, (gx, gw, gb), (x, w, b)):
        assert mine.shape == like.shape, name
        check_close(mine, theirs, rtol=RTOL, atol=ATOL, name=name)


def test_lin_grad_on_fastbook_shapes():
    x, w, b = normal(0, 200, 784), normal(1, 784, 50) * 0.05, normal(2, 50)
    g = normal(3, 200, 50)
    _, torch_gs = torch_grads(lambda x, w, b: x @ w + b, x, w, b, grad_output=g)
    for mine, theirs in zip(lin_grad(x, w, b, g), torch_gs):
        check_close(mine, theirs, rtol=RTOL, atol=ATOL)


def test_a_wrong_gradient_fails_the_check():
    "The checks above can fail: a bias gradient that is not summed over the batch, or a missing factor 2."
    x, w, b, g = normal(0, 4, 3), normal(1, 3, 2), normal(2, 2), normal(3, 4, 2)
    _, (_, _, gb) = torch_grads(lambda x, w, b: x @ w + b, x, w, b, grad_output=g)
    with pytest.raises(AssertionError, match='shape'):
        check_close(g, gb, rtol=RTOL, atol=ATOL)
    out, target = normal(4, 5, 1), normal(5, 5)
    _, (g_out, _) = torch_grads(lambda o, t: F.mse_loss(o.squeeze(-1), t), out, target)
    with pytest.raises(AssertionError, match='elements differ'):
        check_close(mse_grad(out, target) / 2, g_out, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize('n,n_in,n_hidden,n_out,column', [(200, 784, 50, 1, True), (1, 1, 1, 1, True), (3, 5, 4, 1, False),
                                                          (16, 30, 8, 3, False), (64, 784, 50, 1, True), (7, 2, 20, 1, False)])
def test_forward_and_backward_matches_autograd(n, n_in, n_hidden, n_out, column):
    seed = n * 1000 + n_in
    x = normal(seed, n, n_in)
    target = normal(seed + 1, n) if column else normal(seed + 1, n, n_out)
    params = init_mlp(n_in, n_hidden, n_out, seed=seed)
    params = (params[0], normal(seed + 2, n_hidden) * 0.1, params[2], normal(seed + 3, n_out))  # nonzero biases too
    loss, grads = forward_and_backward(x, target, *params)
    loss_t, (gx, _, gw1, gb1, gw2, gb2) = torch_grads(torch_loss, x, target, *params)
    check_close(loss, loss_t, rtol=RTOL, atol=0, name='loss')
    assert list(grads) == ['x', 'w1', 'b1', 'w2', 'b2']
    for (name, g), theirs, like in zip(grads.items(), (gx, gw1, gb1, gw2, gb2), (x, *params)):
        assert g.shape == like.shape, name
        check_close(g, theirs, rtol=RTOL, atol=ATOL, name=name)


@settings(max_examples=25, deadline=None)
@given(sizes, st.integers(1, 30), sizes, seeds)
def test_forward_and_backward_property(n, n_in, n_hidden, seed):
    x, target = normal(seed, n, n_in), normal(seed + 1, n)
    params = (normal(seed + 2, n_in, n_hidden), normal(seed + 3, n_hidden), normal(seed + 4, n_hidden, 1), normal(seed + 5, 1))
    loss, grads = forward_and_backward(x, target, *params)
    loss_t, (gx, _, gw1, gb1, gw2, gb2) = torch_grads(torch_loss, x, target, *params)
    check_close(loss, loss_t, rtol=RTOL, atol=0, name='loss')
    for (name, g), theirs in zip(grads.items(), (gx, gw1, gb1, gw2, gb2)):
        check_close(g, theirs, rtol=RTOL, atol=ATOL, name=name)


def test_forward_and_backward_leaves_inputs_alone():
    x, target = normal(0, 5, 6), normal(1, 5)
    params = init_mlp(6, 4, 1, seed=0)
    copies = [v.copy() for v in (x, target, *params)]
    forward_and_backward(x, target, *params)
    for before, after in zip(copies, (x, target, *params)):
        assert (before == after).all()


# ---------------------------------------------------------------- initialisation

@pytest.mark.parametrize('method,scale', [('randn', 1.0), ('small', 0.01), ('xavier', 0.1), ('kaiming', np.sqrt(0.02))])
def test_init_weights_scale(method, scale):
    w = init_weights(100, 300, method, rng=0)
    assert w.shape == (100, 300)
    assert abs(w.std() / scale - 1) < 0.02 and abs(w.mean()) < 0.02 * scale


def test_init_weights_seeding_and_errors():
    assert (init_weights(3, 4, 'xavier', rng=1) == init_weights(3, 4, 'xavier', rng=np.random.default_rng(1))).all()
    with pytest.raises(ValueError, match="unknown init method 'he': choose one of 'randn', 'small', 'xavier', 'kaiming'"):
        init_weights(3, 4, 'he')


def test_init_mlp():
    w1, b1, w2, b2 = init_mlp()
    assert [p.shape for p in (w1, b1, w2, b2)] == [(784, 50), (50,), (50, 1), (1,)]
    assert (b1 == 0).all() and (b2 == 0).all()
    assert abs(w1.std() / np.sqrt(2 / 784) - 1) < 0.02
    assert all((a == b).all() for a, b in zip(init_mlp(seed=3), init_mlp(seed=3)))


def x0(seed=1): return np.random.default_rng(seed).standard_normal((200, 100), dtype=np.float32)


def test_activation_stats_shape_and_first_layer():
    x = x0()
    stats = activation_stats(x, 'xavier', n_layers=7)
    assert stats.shape == (7, 2)
    w = init_weights(100, 100, 'xavier', np.random.default_rng(0)).astype(np.float32)
    check_close(stats[0], [(x @ w).astype(np.float64).mean(), (x @ w).astype(np.float64).std()], rtol=1e-6)
    assert (x == x0()).all()                    # the input is not modified


@pytest.mark.parametrize('seed', range(5))
def test_randn_explodes_to_nan(seed):
    std = activation_stats(x0(seed + 1), 'randn', seed=seed)[:, 1]
    assert std[9] > 1e8                          # about 10x per layer
    assert np.isfinite(std[:30]).all() and np.isnan(std[-1])   # float32 overflows to inf, then nan
    assert (np.diff(np.log10(std[:30])) > 0.5).all()


@pytest.mark.parametrize('seed', range(5))
def test_small_init_vanishes(seed):
    std = activation_stats(x0(seed + 1), 'small', seed=seed)[:, 1]
    assert std[9] < 1e-8 and std[-1] < 1e-40     # about 0.1x per layer, underflowing to 0 in float32
    assert std[-1] == 0.0


@pytest.mark.parametrize('seed', range(5))
def test_xavier_keeps_linear_layers_near_one(seed):
    std = activation_stats(x0(seed + 1), 'xavier', seed=seed)[:, 1]
    assert ((0.5 < std) & (std < 2)).all()


@pytest.mark.parametrize('seed', range(5))
def test_xavier_vanishes_through_relu(seed):
    std = activation_stats(x0(seed + 1), 'xavier', use_relu=True, seed=seed)[:, 1]
    assert std[-1] < 1e-5 and std[-1] < std[9] < std[0]


@pytest.mark.parametrize('seed', range(10))
def test_kaiming_keeps_relu_layers_in_a_band(seed):
    stats = activation_stats(x0(seed + 1), 'kaiming', use_relu=True, seed=seed)
    std = stats[:, 1]
    assert ((0.1 < std) & (std < 10)).all(), std
    assert ((stats[:, 0] > 0)).all()                         # ReLU outputs have a positive mean
    # the first layer is where the theory is sharpest: mean sqrt(1/pi) ~ 0.56, std sqrt(1 - 1/pi) ~ 0.83
    assert abs(stats[0, 0] - np.sqrt(1 / np.pi)) < 0.05 and abs(stats[0, 1] - np.sqrt(1 - 1 / np.pi)) < 0.05
