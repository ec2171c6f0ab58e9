# In the style of fastbook's "A Neural Net from the Foundations": gradients written by hand and kept
# as attributes of the tensors (`t.g`), then the same net as small classes, then checked with autograd.
import numpy as np
import torch

rng = np.random.default_rng(17)
x = torch.tensor(rng.standard_normal((64, 20)), dtype=torch.float64)
y = torch.tensor(rng.standard_normal(64), dtype=torch.float64)
w1 = torch.tensor(rng.standard_normal((20, 12)) / np.sqrt(20), dtype=torch.float64)
b1 = torch.zeros(12, dtype=torch.float64)
w2 = torch.tensor(rng.standard_normal((12, 1)) / np.sqrt(12), dtype=torch.float64)
b2 = torch.zeros(1, dtype=torch.float64)


def lin(x, w, b): return x @ w + b
def relu(x): return x.clamp_min(0.)
def mse(output, targ): return (output.squeeze(-1) - targ).pow(2).mean()


def mse_grad(inp, targ):
    inp.g = 2. * (inp.squeeze() - targ).unsqueeze(-1) / inp.shape[0]


def relu_grad(inp, out):
    inp.g = (inp > 0).float() * out.g


def lin_grad(inp, out, w, b):
    inp.g = out.g @ w.t()
    w.g = (inp.unsqueeze(-1) * out.g.unsqueeze(1)).sum(0)
    b.g = out.g.sum(0)


def forward_and_backward(inp, targ):
    l1 = lin(inp, w1, b1)
    l2 = relu(l1)
    out = lin(l2, w2, b2)
    loss = mse(out, targ)
    mse_grad(out, targ)
    lin_grad(l2, out, w2, b2)
    relu_grad(l1, l2)
    lin_grad(inp, l1, w1, b1)
    return loss


loss = forward_and_backward(x, y)
by_hand = {'w1': w1.g, 'b1': b1.g, 'w2': w2.g, 'b2': b2.g, 'x': x.g}


class Relu:
    def __call__(self, inp):
        self.inp = inp
        self.out = inp.clamp_min(0.)
        return self.out

    def backward(self): self.inp.g = (self.inp > 0).float() * self.out.g


class Lin:
    def __init__(self, w, b): self.w, self.b = w, b

    def __call__(self, inp):
        self.inp = inp
        self.out = inp @ self.w + self.b
        return self.out

    def backward(self):
        self.inp.g = self.out.g @ self.w.t()
        self.w.g = self.inp.t() @ self.out.g
        self.b.g = self.out.g.sum(0)


class Mse:
    def __call__(self, inp, targ):
        self.inp, self.targ = inp, targ
        self.out = (inp.squeeze() - targ).pow(2).mean()
        return self.out

    def backward(self):
        self.inp.g = 2. * (self.inp.squeeze() - self.targ).unsqueeze(-1) / self.targ.shape[0]


class Model:
    def __init__(self, w1, b1, w2, b2):
        self.layers = [Lin(w1, b1), Relu(), Lin(w2, b2)]
        self.loss = Mse()

    def __call__(self, x, targ):
        for layer in self.layers: x = layer(x)
        return self.loss(x, targ)

    def backward(self):
        self.loss.backward()
        for layer in reversed(self.layers): layer.backward()


model = Model(w1, b1, w2, b2)
class_loss = model(x, y)
model.backward()
by_class = {'w1': w1.g, 'b1': b1.g, 'w2': w2.g, 'b2': b2.g, 'x': x.g}

for t in (x, w1, b1, w2, b2): t.requires_grad_()
autograd_loss = mse(lin(relu(lin(x, w1, b1)), w2, b2), y)
autograd_loss.backward()
by_autograd = {'w1': w1.grad, 'b1': b1.grad, 'w2': w2.grad, 'b2': b2.grad, 'x': x.grad}

RESULT = {
    'loss': [loss.item(), class_loss.item(), autograd_loss.item()],
    'by hand': {k: v.tolist() for k, v in by_hand.items()},
    'largest difference from autograd': max(
        max((by_hand[k] - by_autograd[k]).abs().max().item(), (by_class[k] - by_autograd[k]).abs().max().item())
        for k in by_hand) < 1e-12,
    'attribute kept': hasattr(w1, 'g') and w1.g is by_class['w1'],
}
