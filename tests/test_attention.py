"""Attention against torch: F.scaled_dot_product_attention, nn.MultiheadAttention, nn.TransformerEncoderLayer
and nn.TransformerEncoder, in float64, outputs and every gradient, over masks, shapes and options; torch's
errors and warnings; the GPT of 12c_gpt, one training step equal to torch's."""
import warnings

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch import nn
from fromscratch.models.gpt import GPT, gpt_class, gpt_optimizer, gpt_step
from fromscratch.testing import check_close

torch.set_num_threads(1)
RNG = np.random.default_rng(0)


def both(a, requires_grad=False):
    "The array `a` as our tensor and as torch's."
    return (fs.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def close(ours, theirs, what=''):
    ours = ours.detach().numpy() if hasattr(ours, 'detach') else np.asarray(ours)
    theirs = theirs.detach().numpy() if hasattr(theirs, 'detach') else np.asarray(theirs)
    assert ours.shape == theirs.shape, f'{what}: shape {ours.shape} != {theirs.shape}'
    check_close(ours, theirs, rtol=1e-10, atol=1e-12, name=what)


def sdpa_both(shapes, grad_out_seed=1, masks=None, **kwargs):
    "Our and torch's attention on random float64 inputs of `shapes`: outputs and input gradients."
    arrays = [RNG.standard_normal(s) for s in shapes]
    results = []
    for lib in (fs, torch):
        args = [lib.tensor(a, requires_grad=True) for a in arrays]
        extra = {k: lib.tensor(m) for k, m in (masks or {}).items()}
        out = lib.nn.functional.scaled_dot_product_attention(*args, **kwargs, **extra)
        g = np.random.default_rng(grad_out_seed).standard_normal(tuple(out.shape))
        out.backward(lib.tensor(g))
        results.append([out] + [a.grad for a in args])
    return results


SHAPES = [((4, 8), (5, 8), (5, 8)),                      # no batch dimension
          ((2, 4, 8), (2, 5, 8), (2, 5, 6)),             # value width differs
          ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)),
          ((2, 3, 1, 8), (2, 3, 7, 8), (2, 3, 7, 8)),    # one query
          ((1, 2, 3, 4, 8), (1, 2, 3, 4, 8), (1, 2, 3, 4, 8))]


@pytest.mark.parametrize('shapes', SHAPES)
@pytest.mark.parametrize('kind', ['none', 'causal', 'bool', 'float', 'bool+causal', 'scale'])
def test_sdpa_matches_torch(shapes, kind):
    L, S = shapes[0][-2], shapes[1][-2]
    if kind == 'bool+causal' and len(shapes[0]) != 4:   # torch refuses the pair below 4-D
        for lib in (fs, torch):
            q, k, v = (lib.zeros(*s, dtype=lib.float64) for s in shapes)
            with pytest.raises(RuntimeError, match='Explicit attn_mask should not be set when is_causal=True'):
                lib.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=lib.ones(L, S, dtype=lib.bool), is_causal=True)
        return
    masks, kwargs = {}, {}
    if kind in ('causal', 'bool+causal'): kwargs['is_causal'] = True
    if kind in ('bool', 'bool+causal'): masks['attn_mask'] = RNG.random((L, S)) > 0.3
    if kind == 'float': masks['attn_mask'] = RNG.standard_normal((L, S))
    if kind == 'scale': kwargs['scale'] = 0.3
    ours, theirs = sdpa_both(shapes, masks=masks, **kwargs)
    for a, b, what in zip(ours, theirs, ('out', 'dq', 'dk', 'dv')): close(a, b, f'{kind}: {what}')


def test_sdpa_empty_rows_give_zeros_and_zero_gradients_as_torch():
    mask = np.ones((4, 5), dtype=bool)
    mask[[0, 2]] = False
    float_mask = np.where(mask, 0.0, -np.inf)
    for m in (mask, float_mask):
        ours, theirs = sdpa_both(SHAPES[2], masks={'attn_mask': m})
        for a, b in zip(ours, theirs): close(a, b)
        assert (ours[0].detach().numpy()[:, :, [0, 2]] == 0).all()


def test_sdpa_broadcasts_a_per_batch_mask_and_grouped_query_heads():
    mask = RNG.random((2, 1, 4, 5)) > 0.2
    ours, theirs = sdpa_both(SHAPES[2], masks={'attn_mask': mask})
    for a, b in zip(ours, theirs): close(a, b)
    ours, theirs = sdpa_both(((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)), enable_gqa=True)
    for a, b in zip(ours, theirs): close(a, b, 'gqa')


def test_sdpa_gqa_needs_a_divisor():
    q, k = fs.randn(1, 3, 2, 4), fs.randn(1, 2, 2, 4)
    with pytest.raises(RuntimeError, match='must divide'):
        fs.nn.functional.scaled_dot_product_attention(q, k, k, enable_gqa=True)


def test_sdpa_dropout_keeps_or_zeroes_whole_weights_and_rescales():
    fs.manual_seed(0)
    q = fs.randn(1, 1, 64, 8)
    v = fs.eye(64).reshape(1, 1, 64, 64)
    # with value = identity, the output is the (dropped) weights themselves
    plain = fs.nn.functional.scaled_dot_product_attention(q, q, v)
    dropped = fs.nn.functional.scaled_dot_product_attention(q, q, v, dropout_p=0.5)
    kept = dropped.numpy() != 0
    assert 0.35 < kept.mean() < 0.65
    check_close(dropped.numpy()[kept], 2 * plain.numpy()[kept], rtol=1e-5, atol=1e-7)


def mha_pair(E=8, H=2, batch_first=True, dtype=torch.float64, seed=0, **kw):
    torch.manual_seed(seed)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=batch_first, **kw).to(dtype)
    ours = nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=fs.float64, **kw)
    ours.load_state_dict({k: fs.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def run_mha(m, lib, q, k, v, masks, **kw):
    q, k, v = (lib.tensor(a, requires_grad=True) for a in (q, k, v))
    out, w = m(q, k, v, **{name: lib.tensor(a) for name, a in masks.items()}, **kw)
    (out * out).sum().backward()
    grads = [q.grad, k.grad, v.grad] + [p.grad for p in m.parameters()]
    return out, w, grads


MHA_CASES = {
    'plain': ({}, {}),
    'causal bool': ({}, {'attn_mask': ~np.tril(np.ones((4, 4), dtype=bool))}),
    'float mask': ({}, {'attn_mask': np.triu(np.full((4, 4), -1e9), 1)}),
    'key padding': ({}, {'key_padding_mask': np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0] * 4, [0] * 4],
                                                      dtype=bool)[:3]}),
    'both masks': ({}, {'attn_mask': ~np.tril(np.ones((4, 4), dtype=bool)),
                        'key_padding_mask': np.array([[0, 0, 0, 1]] * 3, dtype=bool)}),
    'per head mask': ({}, {'attn_mask': RNG.random((6, 4, 4)) > 0.8}),
    'no bias': ({'bias': False}, {}),
    'bias_kv': ({'add_bias_kv': True}, {'attn_mask': ~np.tril(np.ones((4, 4), dtype=bool))}),
    'zero_attn': ({'add_zero_attn': True}, {'key_padding_mask': np.array([[0, 0, 0, 1]] * 3, dtype=bool)}),
    'kdim vdim': ({'kdim': 5, 'vdim': 3}, {}),
}


@pytest.mark.parametrize('case', MHA_CASES)
@pytest.mark.parametrize('batch_first', [True, False])
@pytest.mark.parametrize('need_weights,average', [(True, True), (True, False), (False, True)])
def test_multihead_attention_matches_torch(case, batch_first, need_weights, average):
    kw, masks = MHA_CASES[case]
    ours, theirs = mha_pair(batch_first=batch_first, **kw)
    n, L, S = 3, 4, 4
    shape = lambda width: (n, L, width) if batch_first else (L, n, width)
    q, k, v = (RNG.standard_normal(shape(w)) for w in (8, kw.get('kdim', 8), kw.get('vdim', 8)))
    a = run_mha(ours, fs, q, k, v, masks, need_weights=need_weights, average_attn_weights=average)
    b = run_mha(theirs, torch, q, k, v, masks, need_weights=need_weights, average_attn_weights=average)
    close(a[0], b[0], 'output')
    if need_weights: close(a[1], b[1], 'weights')
    else: assert a[1] is None and b[1] is None
    assert len(a[2]) == len(b[2])
    for x, y in zip(a[2], b[2]): close(x, y, 'gradient')


def test_multihead_attention_has_torchs_parameters_in_torchs_order():
    for kw in ({}, {'bias': False}, {'add_bias_kv': True}, {'kdim': 5, 'vdim': 3}):
        ours, theirs = mha_pair(**kw)
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
               [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
        assert list(ours.state_dict()) == list(theirs.state_dict())


def test_multihead_attention_initialises_as_torch():
    fs.manual_seed(0)
    m = nn.MultiheadAttention(64, 4)
    w = m.in_proj_weight.detach().numpy()
    bound = np.sqrt(6 / (64 + 3 * 64))          # Xavier-uniform on a (192, 64) matrix
    assert abs(w).max() <= bound and abs(w).max() > 0.95 * bound
    assert (m.in_proj_bias.detach().numpy() == 0).all() and (m.out_proj.bias.detach().numpy() == 0).all()


def test_multihead_attention_unbatched_input():
    for batch_first in (True, False):
        ours, theirs = mha_pair(batch_first=batch_first)
        x = RNG.standard_normal((4, 8))
        pad = np.array([0, 0, 1, 0], dtype=bool)
        a = run_mha(ours, fs, x, x, x, {'key_padding_mask': pad})
        b = run_mha(theirs, torch, x, x, x, {'key_padding_mask': pad})
        for x_, y_ in zip([a[0], a[1], *a[2]], [b[0], b[1], *b[2]]): close(x_, y_)


def test_multihead_attention_all_padded_rows_nan_with_weights_and_zero_without():
    ours, theirs = mha_pair()
    x = RNG.standard_normal((2, 3, 8))
    pad = np.array([[1, 1, 1], [0, 0, 1]], dtype=bool)
    for need in (True, False):
        o = ours(*both(x)[:1] * 3, key_padding_mask=fs.tensor(pad), need_weights=need)
        t = theirs(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(pad), need_weights=need)
        np.testing.assert_allclose(o[0].detach().numpy(), t[0].detach().numpy(), rtol=1e-10, atol=1e-12)
        assert np.isnan(o[0].detach().numpy()[0]).all() == need


def test_multihead_attention_errors_and_warnings_as_torch():
    ours, theirs = mha_pair()
    x = RNG.standard_normal((3, 4, 8))
    for masks in ({'attn_mask': np.ones((5, 5), dtype=bool)},
                  {'attn_mask': np.ones((5, 4, 4), dtype=bool)}):
        messages = []
        for lib, m in ((fs, ours), (torch, theirs)):
            with pytest.raises(RuntimeError) as e:
                m(*[lib.tensor(x)] * 3, **{k: lib.tensor(v) for k, v in masks.items()})
            messages.append(str(e.value).replace('torch.Size', 'fromscratch.Size'))
        assert messages[0] == messages[1]
    for lib, m in ((fs, ours), (torch, theirs)):
        with pytest.warns(UserWarning, match='mismatched key_padding_mask and attn_mask'):
            m(*[lib.tensor(x)] * 3, attn_mask=lib.tensor(np.ones((4, 4), dtype=bool)),
              key_padding_mask=lib.tensor(np.zeros((3, 4))))
        with pytest.raises(RuntimeError, match='Need attn_mask if specifying the is_causal hint'):
            m(*[lib.tensor(x)] * 3, is_causal=True)
    with pytest.raises(AssertionError, match='embed_dim must be divisible by num_heads'):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(AssertionError, match='embed_dim must be divisible by num_heads'):
        torch.nn.MultiheadAttention(10, 3)


def test_multihead_attention_dropout_only_in_training():
    ours, _ = mha_pair(dropout=0.5)
    x = fs.tensor(RNG.standard_normal((2, 4, 8)))
    ours.eval()
    a, b = (ours(x, x, x)[0].detach().numpy() for _ in range(2))
    assert (a == b).all()
    ours.train()
    assert not (ours(x, x, x)[0].detach().numpy() == a).all()


def encoder_pair(norm_first, activation, batch_first=True, bias=True, seed=0):
    torch.manual_seed(seed)
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
              bias=bias)
    t_act = activation if isinstance(activation, str) else torch.nn.GELU(approximate='tanh')
    o_act = activation if isinstance(activation, str) else nn.GELU(approximate='tanh')
    theirs = torch.nn.TransformerEncoderLayer(12, 3, activation=t_act, **kw).double()
    ours = nn.TransformerEncoderLayer(12, 3, activation=o_act, dtype=fs.float64, **kw)
    ours.load_state_dict({k: fs.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize('norm_first', [True, False])
@pytest.mark.parametrize('activation', ['relu', 'gelu', 'gelu-tanh module'])
@pytest.mark.parametrize('batch_first', [True, False])
@pytest.mark.parametrize('masks', ['none', 'causal', 'padding'])
def test_transformer_encoder_layer_matches_torch(norm_first, activation, batch_first, masks):
    ours, theirs = encoder_pair(norm_first, activation if activation != 'gelu-tanh module' else None,
                                batch_first)
    n, L = 2, 5
    x = RNG.standard_normal((n, L, 12) if batch_first else (L, n, 12))
    kw = {}
    if masks == 'causal': kw = dict(src_mask=~np.tril(np.ones((L, L), dtype=bool)), is_causal=True)
    if masks == 'padding': kw = dict(src_key_padding_mask=np.array([[0, 0, 0, 1, 1], [0] * 5], dtype=bool))
    results = []
    for lib, m in ((fs, ours), (torch, theirs)):
        xt = lib.tensor(x, requires_grad=True)
        out = m(xt, **{k: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()})
        (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(out.shape))).sum().backward()
        results.append([out, xt.grad] + [p.grad for p in m.parameters()])
    for a, b in zip(*results): close(a, b)


def test_transformer_encoder_layer_structure_and_bad_activation():
    ours, theirs = encoder_pair(True, None)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for lib in (nn, torch.nn):
        with pytest.raises(RuntimeError, match='activation should be relu/gelu, not tanh'):
            lib.TransformerEncoderLayer(8, 2, activation='tanh')
    ours, theirs = encoder_pair(False, 'relu', bias=False)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_transformer_encoder_stacks_copies_as_torch():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    theirs = torch.nn.TransformerEncoder(layer, 3, norm=torch.nn.LayerNorm(8).double(),
                                         enable_nested_tensor=False)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                                            dtype=fs.float64), 3,
                                 norm=nn.LayerNorm(8, dtype=fs.float64))
    ours.load_state_dict({k: fs.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((2, 5, 8))
    mask = ~np.tril(np.ones((5, 5), dtype=bool))
    a = ours(fs.tensor(x), mask=fs.tensor(mask), is_causal=True)
    b = theirs(torch.tensor(x), mask=torch.tensor(mask), is_causal=True)
    close(a, b)
    fresh = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2)
    w0, w1 = (l.linear1.weight.detach().numpy() for l in fresh.layers)
    assert (w0 == w1).all() and fresh.layers[0].linear1.weight is not fresh.layers[1].linear1.weight


TorchGPT = gpt_class(torch)


@pytest.mark.parametrize('config', [dict(), dict(n_layer=1, n_head=2, n_embd=16, block_size=8)])
def test_gpt_training_step_equals_torchs_in_float64(config):
    fs.manual_seed(0)
    ours = GPT(**config).double()
    theirs = TorchGPT(**config).double()
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    block = ours.block_size
    rng = np.random.default_rng(3)
    for step in range(3):
        X = rng.integers(0, 27, (8, block))
        Y = np.where(rng.random((8, block)) < 0.2, -1, rng.integers(0, 27, (8, block)))
        if step == 0: opt, t_opt = gpt_optimizer(ours), gpt_optimizer(theirs, optim=torch.optim)
        loss = gpt_step(ours, opt, fs.tensor(X), fs.tensor(Y))
        t_loss = gpt_step(theirs, t_opt, torch.tensor(X), torch.tensor(Y), lib=torch)
        check_close(loss.item(), t_loss.item(), rtol=1e-12, atol=0)
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        check_close(p.detach().numpy(), t_params[name].detach().numpy(), rtol=1e-10, atol=1e-12, name=name)


def test_gpt_refuses_a_sequence_longer_than_its_block():
    with pytest.raises(ValueError, match='exceed'):
        GPT(block_size=4)(fs.zeros(1, 5, dtype=fs.int64))
