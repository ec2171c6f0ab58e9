"""The cubic as a linear layer on (x, x^2, x^3): nn.Sequential, nn.Flatten, MSELoss and a manual update."""
import math
import numpy as np
import torch

x = torch.linspace(-math.pi, math.pi, 200)
y = torch.sin(x)
xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
rng = np.random.default_rng(0)
with torch.no_grad():                       # the same start in both libraries
    model[0].weight.copy_(torch.tensor(rng.uniform(-0.5, 0.5, (1, 3)), dtype=torch.float32))
    model[0].bias.fill_(0.1)
loss_fn = torch.nn.MSELoss(reduction='sum')
lr, losses = 1e-6, []
for t in range(300):
    loss = loss_fn(model(xx), y)
    losses.append(loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= lr * param.grad
linear = model[0]
RESULT = {'losses': losses[::30], 'weight': linear.weight.flatten().tolist(), 'bias': linear.bias.item(),
          'names': [n for n, _ in model.named_parameters()], 'shape': list(xx.shape)}
