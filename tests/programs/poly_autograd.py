"""The same cubic, with autograd computing the gradients and the updates under no_grad."""
import math
import torch

x = torch.linspace(-math.pi, math.pi, 500, dtype=torch.float64)
y = torch.sin(x)
coefficients = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.1, -0.2, 0.05, 0.3)]
a, b, c, d = coefficients
lr, losses = 1e-6, []
for t in range(400):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    losses.append(loss.item())
    loss.backward()
    with torch.no_grad():
        for p in coefficients:
            p -= lr * p.grad
            p.grad = None
RESULT = {'losses': losses[::40], 'final': [p.item() for p in coefficients],
          'is_leaf': all(p.is_leaf for p in coefficients), 'requires_grad': loss.requires_grad}
