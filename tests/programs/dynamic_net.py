"""A dynamic graph: the number of times a layer is reused changes from step to step (Python control flow)."""
import math
import random
import torch


class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d, self.e = (torch.nn.Parameter(torch.tensor(v)) for v in (0.1, -0.2, 0.05, 0.3, 0.01))

    def forward(self, x, extra):
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, 4 + extra):          # a different graph every step
            y = y + self.e * x ** exp
        return y


chooser = random.Random(0)                       # the same choices in both runs
x = torch.linspace(-math.pi, math.pi, 300)
y = torch.sin(x)
model = DynamicNet()
criterion = torch.nn.MSELoss(reduction='sum')
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
losses = []
for t in range(200):
    loss = criterion(model(x, chooser.randint(0, 2)), y)
    losses.append(loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
RESULT = {'losses': losses[::20], 'e': model.e.item(), 'grad_e_is_set': model.e.grad is not None}
