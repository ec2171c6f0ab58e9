"""A Module subclass with its own Parameters and a forward; state_dict, parameters() and train/eval."""
import math
import torch


class Cubic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(0.1))
        self.b = torch.nn.Parameter(torch.tensor(-0.2))
        self.c = torch.nn.Parameter(torch.tensor(0.05))
        self.d = torch.nn.Parameter(torch.tensor(0.3))

    def forward(self, x):
        return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

    def string(self):
        return f'y = {self.a.item():.3f} + {self.b.item():.3f} x + {self.c.item():.3f} x^2 + {self.d.item():.3f} x^3'


x = torch.linspace(-math.pi, math.pi, 400)
y = torch.sin(x)
model = Cubic()
criterion = torch.nn.MSELoss(reduction='sum')
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
losses = []
for t in range(300):
    loss = criterion(model(x), y)
    losses.append(loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()
RESULT = {'losses': losses[::30], 'formula': model.string(), 'keys': list(model.state_dict()),
          'n_parameters': sum(p.numel() for p in model.parameters()), 'training': model.training}
