# In the style of the basics tutorial "Automatic Differentiation with torch.autograd" and "A Gentle
# Introduction to torch.autograd": a one-layer net's loss and its grad_fn, backward to the leaves,
# switching tracking off with no_grad and detach, vector-Jacobian products on a non-scalar output,
# gradients that accumulate, and frozen parameters that drop out of the graph.
import numpy as np
import torch

rng = np.random.default_rng(51)

x = torch.ones(5)
y = torch.zeros(3)
w = torch.tensor(rng.standard_normal((5, 3)), dtype=torch.float32, requires_grad=True)
b = torch.tensor(rng.standard_normal(3), dtype=torch.float32, requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
names = [z.grad_fn.name(), loss.grad_fn is not None]
loss.backward()
by_hand_w = (torch.sigmoid(z.detach()) / 3).unsqueeze(0).expand(5, 3)

z = torch.matmul(x, w) + b
tracked = z.requires_grad
with torch.no_grad():
    z = torch.matmul(x, w) + b
untracked = z.requires_grad
z_det = (torch.matmul(x, w) + b).detach()

# vector-Jacobian products: backward of a non-scalar output needs the vector
inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
first_call = inp.grad.clone()
out.backward(torch.ones_like(out), retain_graph=True)
second_call = inp.grad.clone()
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
after_zeroing = inp.grad.clone()
try:
    out.backward()
    message = ''
except RuntimeError as e:
    message = str(e)

# the gentle introduction: Q = 3a^3 - b^2 and its gradients
a = torch.tensor([2., 3.], requires_grad=True)
b2 = torch.tensor([6., 4.], requires_grad=True)
Q = 3 * a ** 3 - b2 ** 2
external_grad = torch.tensor([1., 1.])
Q.backward(gradient=external_grad)

# exclusion from the DAG: freeze a model but its new head
model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6))
for param in model.parameters(): param.requires_grad = False
model[2] = torch.nn.Linear(6, 2)
with torch.no_grad():
    for p in model.parameters(): p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)), dtype=torch.float32))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
data = torch.tensor(rng.standard_normal((3, 4)), dtype=torch.float32)
model(data).sum().backward()
optimizer.step()

c = torch.tensor([1., 2.], requires_grad=True)
d = torch.tensor([3., 4.])
e = c * d

RESULT = {
    'grad_fn names': names,
    'loss': loss.item(),
    'w.grad': w.grad.tolist(),
    'b.grad': b.grad.tolist(),
    'w.grad by hand': torch.allclose(w.grad, by_hand_w),
    'tracked, no_grad, detach': [tracked, untracked, z_det.requires_grad],
    'first call': first_call.tolist(),
    'second call doubles': torch.equal(second_call, 2 * first_call),
    'after zeroing': torch.equal(after_zeroing, first_call),
    'backward of a non-scalar without gradient': message,
    'dQ/da is 9a^2': (9 * a ** 2 == a.grad).tolist(),
    'dQ/db is -2b': (-2 * b2 == b2.grad).tolist(),
    'frozen get no grad': [p.grad is None for p in model.parameters()],
    'head weight after a step': model[2].weight.tolist(),
    'requires_grad flows': [e.requires_grad, (d * 2).requires_grad, e.is_leaf, c.is_leaf],
}
