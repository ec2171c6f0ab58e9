"""A two-layer net trained with torch.optim: Adam, then RMSprop, then SGD with momentum and a step schedule."""
import numpy as np
import torch

rng = np.random.default_rng(1)
x = torch.tensor(rng.standard_normal((64, 5)), dtype=torch.float64)
y = torch.tensor(rng.standard_normal((64, 2)), dtype=torch.float64)
w1 = rng.standard_normal((16, 5)) * 0.3
w2 = rng.standard_normal((2, 16)) * 0.3


def make_model():
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double()
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(w1)); model[0].bias.zero_()
        model[2].weight.copy_(torch.tensor(w2)); model[2].bias.zero_()
    return model


def train(make_optimizer, steps=50, schedule=None):
    model = make_model()
    optimizer = make_optimizer(model.parameters())
    scheduler = schedule(optimizer) if schedule else None
    loss_fn, losses = torch.nn.MSELoss(), []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if scheduler: scheduler.step()
        losses.append(loss.item())
    return losses[::10] + [losses[-1]]


RESULT = {'adam': train(lambda p: torch.optim.Adam(p, lr=1e-2)),
          'rmsprop': train(lambda p: torch.optim.RMSprop(p, lr=1e-3)),
          'sgd_step_lr': train(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                               schedule=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=10, gamma=0.5))}
