"""Fit a cubic to sin(x) on [-pi, pi] with raw tensors: the forward pass, the gradients and the updates by hand."""
import math
import torch

dtype = torch.float32
x = torch.linspace(-math.pi, math.pi, 500, dtype=dtype)
y = torch.sin(x)
a, b, c, d = (torch.tensor(v, dtype=dtype) for v in (0.1, -0.2, 0.05, 0.3))   # fixed start instead of randn
lr, losses = 1e-6, []
for t in range(300):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    losses.append(loss.item())
    grad_y = 2.0 * (y_pred - y)
    a = a - lr * grad_y.sum()
    b = b - lr * (grad_y * x).sum()
    c = c - lr * (grad_y * x ** 2).sum()
    d = d - lr * (grad_y * x ** 3).sum()
RESULT = {'losses': losses[::30], 'coefficients': [a.item(), b.item(), c.item(), d.item()]}
