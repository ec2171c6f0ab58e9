# In the style of the video series' notebook "The Fundamentals of Autograd": the graph of a small
# computation walked through grad_fn and next_functions, gradients checked against calculus, retain_grad
# on intermediate tensors, autograd in a training step, turning it off and on (requires_grad, no_grad
# as a context and a decorator, detach), in-place operations it refuses, and a vector-Jacobian product.
import math

import numpy as np
import torch

rng = np.random.default_rng(91)

a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
b = torch.sin(a)
c = 2 * b
c.retain_grad()
d = c + 1
out = d.sum()

walk, fn = [], out.grad_fn
while not hasattr(fn, 'variable'):
    walk.append(fn.name())
    fn = [f for f, _ in fn.next_functions if f is not None][0]
leaf_reached = fn.variable is a and fn is d.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]

out.backward()
calculus = torch.allclose(a.grad, 2 * torch.cos(a.detach()), atol=1e-6)


class TinyModel(torch.nn.Module):
    def __init__(self):
        super(TinyModel, self).__init__()
        self.layer1 = torch.nn.Linear(40, 20)
        self.relu = torch.nn.ReLU()
        self.layer2 = torch.nn.Linear(20, 5)

    def forward(self, x): return self.layer2(self.relu(self.layer1(x)))


model = TinyModel()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(p.shape)), dtype=torch.float32))
some_input = torch.tensor(rng.standard_normal((8, 40)), dtype=torch.float32)
ideal_output = torch.tensor(rng.standard_normal((8, 5)), dtype=torch.float32)
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)

before_backward = model.layer2.weight.grad is None
prediction = model(some_input)
loss = (ideal_output - prediction).pow(2).sum()
loss.backward()
grad_slice = model.layer2.weight.grad[0][0:5].tolist()
weight_before = model.layer2.weight[0][0:5].tolist()
optimizer.step()
weight_after = model.layer2.weight[0][0:5].tolist()
optimizer.zero_grad()
after_zero_grad = model.layer2.weight.grad is None

# turning autograd off and on
x = torch.ones(2, 3, requires_grad=True) * 2
y = torch.ones(2, 3, requires_grad=True) * 3
flags = [(x + y).requires_grad]
with torch.no_grad():
    flags.append((x + y).requires_grad)
flags.append((x + y).requires_grad)


def add_tensors1(x, y): return x + y


@torch.no_grad()
def add_tensors2(x, y): return x + y


flags += [add_tensors1(x, y).requires_grad, add_tensors2(x, y).requires_grad, x.detach().requires_grad]
leaf = torch.ones(2, 3, requires_grad=True)
leaf.requires_grad = False
flags.append((leaf * 2).requires_grad)
with torch.no_grad():
    with torch.enable_grad():
        flags.append((x * 2).requires_grad)
torch.set_grad_enabled(False)
flags.append((x * 2).requires_grad)
torch.set_grad_enabled(True)
flags.append((x * 2).requires_grad)

# in-place operations on a leaf that requires grad are refused
a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
try:
    a.add_(1)
    in_place = ''
except RuntimeError as e:
    in_place = str(e)
# ...but are fine on a non-leaf whose value backward does not need
e = a * 3
e.add_(1)
e.sum().backward()

# a vector-Jacobian product from a non-scalar output
v_x = torch.tensor(rng.standard_normal(3), dtype=torch.float32, requires_grad=True)
v_y = v_x * 2
doublings = 1
while v_y.norm() < 1000:
    v_y = v_y * 2
    doublings += 1
v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float32)
v_y.backward(v)

RESULT = {
    'walk': walk,
    'leaf reached': leaf_reached,
    'a.grad is 2 cos a': calculus,
    'c.grad (retained)': c.grad.tolist(),
    'b.grad kept for a leaf only': [b.is_leaf, a.is_leaf],
    'grad before backward is None': before_backward,
    'loss': loss.item(),
    'grad': grad_slice,
    'weight moves by -lr grad': [round((w0 - w1) / g, 4) for w0, w1, g in zip(weight_before, weight_after, grad_slice)],
    'zero_grad sets None': after_zero_grad,
    'requires_grad flags': flags,
    'in-place on a leaf': in_place,
    'grad through an in-place add': a.grad.tolist()[:3],
    'vjp': [doublings, v_x.grad.tolist()],
}
