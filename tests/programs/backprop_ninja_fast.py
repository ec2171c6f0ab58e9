# In the style of makemore's "becoming a backprop ninja", exercises 2 to 4: the gradient of
# cross_entropy through the logits in one expression, the gradient of batch normalisation through
# its input in one expression, both checked against autograd, then a training loop that uses only the
# hand-written backward pass (under no_grad) and is compared with the same loop driven by autograd.
import numpy as np
import torch

F = torch.nn.functional
rng = np.random.default_rng(132)
torch.set_default_dtype(torch.float64)

vocab_size, block_size, n_embd, n_hidden, batch_size = 27, 3, 10, 64, 32
n = batch_size
Xnp = rng.integers(0, vocab_size, (200, block_size))
X, Y = torch.tensor(Xnp), torch.tensor((Xnp.sum(1) * 7 + Xnp[:, 0]) % vocab_size)  # a learnable rule


def init():
    "C, W1, b1, W2, b2, bngain, bnbias: normal numbers, each scaled as makemore scales them"
    shapes = [(vocab_size, n_embd), (n_embd * block_size, n_hidden), (n_hidden,), (n_hidden, vocab_size),
              (vocab_size,), (1, n_hidden), (1, n_hidden)]
    scales = [1.0, (5 / 3) / (n_embd * block_size) ** 0.5, 0.1, 0.1, 0.1, 0.1, 0.1]
    params = [torch.tensor(rng.standard_normal(shape)) * scale for shape, scale in zip(shapes, scales)]
    params[5] = params[5] + 1.0
    return params


def forward(params, Xb, Yb):
    C, W1, b1, W2, b2, bngain, bnbias = params
    emb = C[Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmean = hprebn.mean(0, keepdim=True)
    bnvar = hprebn.var(0, keepdim=True, unbiased=True)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = (hprebn - bnmean) * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    loss = F.cross_entropy(logits, Yb)
    return loss, (emb, embcat, hprebn, bnvar_inv, bnraw, hpreact, h, logits)


def backward(params, Xb, Yb, saved):
    C, W1, b1, W2, b2, bngain, bnbias = params
    emb, embcat, hprebn, bnvar_inv, bnraw, hpreact, h, logits = saved
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h ** 2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnbias = dhpreact.sum(0, keepdim=True)
    dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    dW1, db1 = embcat.T @ dhprebn, dhprebn.sum(0)
    demb = (dhprebn @ W1.T).view(-1, n_embd)
    # each row of C receives the gradients of every place it was looked up: a one-hot matmul
    dC = F.one_hot(Xb.view(-1), num_classes=vocab_size).T.to(demb.dtype) @ demb
    return [dC, dW1, db1, dW2, db2, dbngain, dbnbias], dlogits, dhprebn


params = init()
for p in params: p.requires_grad = True
Xb, Yb = X[:n], Y[:n]
loss, saved = forward(params, Xb, Yb)
for t in saved: t.retain_grad()
loss.backward()
with torch.no_grad():
    grads, dlogits, dhprebn = backward(params, Xb, Yb, saved)
one_step = {
    'logits': torch.allclose(dlogits, saved[7].grad),
    'hprebn': torch.allclose(dhprebn, saved[2].grad),
    'parameters': [torch.allclose(g, p.grad) for g, p in zip(grads, params)],
    'largest difference': max((g - p.grad).abs().max().item() for g, p in zip(grads, params)) < 1e-12,
}

# training with the hand-written backward, and the same training with autograd
start = init()
by_hand = [p.detach().clone() for p in start]
by_autograd = [p.detach().clone().requires_grad_() for p in start]
hand_losses, autograd_losses = [], []
for step in range(30):
    ix = torch.tensor(rng.integers(0, X.shape[0], n))
    Xb, Yb = X[ix], Y[ix]
    lr = 0.1 if step < 20 else 0.01
    with torch.no_grad():
        loss, saved = forward(by_hand, Xb, Yb)
        grads, _, _ = backward(by_hand, Xb, Yb, saved)
        for p, g in zip(by_hand, grads): p += -lr * g
    hand_losses.append(loss.item())
    loss, _ = forward(by_autograd, Xb, Yb)
    for p in by_autograd: p.grad = None
    loss.backward()
    with torch.no_grad():
        for p in by_autograd: p += -lr * p.grad
    autograd_losses.append(loss.item())

RESULT = {
    'one step': one_step,
    'hand losses': hand_losses[::5],
    'same as autograd': all(abs(a - b) < 1e-10 for a, b in zip(hand_losses, autograd_losses)),
    'parameters agree': all(torch.allclose(a, b) for a, b in zip(by_hand, by_autograd)),
    'loss went down': hand_losses[-1] < hand_losses[0],
    'final W2 corner': by_hand[3][:2, :4].tolist(),
}
