"""One second-order MAML meta-step on sine regression: an inner SGD step kept in the graph, the outer update through it."""
import numpy as np
import torch

rng = np.random.default_rng(3)
dt = torch.float64


def task():
    amplitude, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)
    x = rng.uniform(-5, 5, (10, 1))
    return torch.tensor(x, dtype=dt), torch.tensor(amplitude * np.sin(x + phase), dtype=dt)


params = [torch.tensor(rng.standard_normal((40, 1)) * 0.5, dtype=dt, requires_grad=True), torch.zeros(40, dtype=dt, requires_grad=True),
          torch.tensor(rng.standard_normal((1, 40)) * 0.2, dtype=dt, requires_grad=True), torch.zeros(1, dtype=dt, requires_grad=True)]


def net(x, p): return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, p[0], p[1])), p[2], p[3])


meta_optimizer = torch.optim.Adam(params, lr=1e-3)
meta_losses = []
for meta_step in range(3):
    meta_loss = 0
    for _ in range(4):
        (xs, ys), (xq, yq) = task(), task()
        inner = torch.nn.functional.mse_loss(net(xs, params), ys)
        grads = torch.autograd.grad(inner, params, create_graph=True)
        adapted = [p - 0.01 * g for p, g in zip(params, grads)]
        meta_loss = meta_loss + torch.nn.functional.mse_loss(net(xq, adapted), yq)
    meta_optimizer.zero_grad()
    (meta_loss / 4).backward()
    meta_optimizer.step()
    meta_losses.append(meta_loss.item() / 4)
RESULT = {'meta_losses': meta_losses, 'grad_norms': [p.grad.norm().item() for p in params]}
