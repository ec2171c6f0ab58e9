# In the style of the micrograd lecture's checks: small scalar expressions whose derivatives are worked
# out by hand (and by nudging the inputs), then compared with what .backward() leaves in .grad; a
# neuron with a tanh, written whole and written through exp; gradients that accumulate when a value
# is used twice; and a tiny MLP of scalar tensors trained by hand-written gradient descent.
import math
import random

import torch

random.seed(141)


def scalar(v): return torch.tensor(v, dtype=torch.float64, requires_grad=True)


# a parabola: its slope at 3 by nudging, by hand and by backward
def f(x): return 3 * x ** 2 - 4 * x + 5


h = 1e-6
x = scalar(3.0)
y = f(x)
y.backward()
parabola = [y.item(), (f(3.0 + h) - f(3.0)) / h, 6 * 3.0 - 4, x.grad.item()]

# three inputs: each one nudged in turn
a, b, c = scalar(2.0), scalar(-3.0), scalar(10.0)
d = a * b + c
d.backward()
nudged = []
for i in range(3):
    values = [2.0, -3.0, 10.0]
    d1 = values[0] * values[1] + values[2]
    values[i] += h
    d2 = values[0] * values[1] + values[2]
    nudged.append(round((d2 - d1) / h, 4))
three_inputs = [d.item(), [a.grad.item(), b.grad.item(), c.grad.item()], nudged]

# a neuron: o = tanh(x1 w1 + x2 w2 + b), with do/dn = 1 - o^2
x1, x2, w1, w2, bias = scalar(1.5), scalar(-0.5), scalar(0.8), scalar(-1.2), scalar(0.3)
n = x1 * w1 + x2 * w2 + bias
o = torch.tanh(n)
o.backward()
n_value = 1.5 * 0.8 + -0.5 * -1.2 + 0.3
local = 1 - math.tanh(n_value) ** 2
neuron_by_hand = [local * 0.8, local * -1.2, local * 1.5, local * -0.5, local]
neuron = [o.item(), [t.grad.item() for t in (x1, x2, w1, w2, bias)]]

# the same neuron with tanh written through exp
x1e, x2e, w1e, w2e, biase = scalar(1.5), scalar(-0.5), scalar(0.8), scalar(-1.2), scalar(0.3)
ne = x1e * w1e + x2e * w2e + biase
e = (2 * ne).exp()
oe = (e - 1) / (e + 1)
oe.backward()
through_exp = [oe.item(), [t.grad.item() for t in (x1e, x2e, w1e, w2e, biase)]]

# a value used more than once: the gradients add up
p = scalar(3.0)
q = p + p
q.backward()
r, s = scalar(-2.0), scalar(3.0)
t1 = r * s
t2 = r + s
u = t1 * t2
u.backward()
reuse = [p.grad.item(), r.grad.item(), s.grad.item(), [s.item() * (r.item() + s.item()) + r.item() * s.item(),
                                                       r.item() * (r.item() + s.item()) + r.item() * s.item()]]


# a tiny MLP of scalar tensors, as micrograd builds it
class Neuron:
    def __init__(self, nin):
        self.w = [scalar(random.uniform(-1, 1)) for _ in range(nin)]
        self.b = scalar(random.uniform(-1, 1))

    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return act.tanh()

    def parameters(self): return self.w + [self.b]


class Layer:
    def __init__(self, nin, nout): self.neurons = [Neuron(nin) for _ in range(nout)]

    def __call__(self, x):
        outs = [n(x) for n in self.neurons]
        return outs[0] if len(outs) == 1 else outs

    def parameters(self): return [p for neuron in self.neurons for p in neuron.parameters()]


class MLP:
    def __init__(self, nin, nouts):
        sz = [nin] + nouts
        self.layers = [Layer(sz[i], sz[i + 1]) for i in range(len(nouts))]

    def __call__(self, x):
        for layer in self.layers: x = layer(x)
        return x

    def parameters(self): return [p for layer in self.layers for p in layer.parameters()]


model = MLP(3, [4, 4, 1])
xs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]]
ys = [1.0, -1.0, -1.0, 1.0]
losses = []
for k in range(25):
    ypred = [model(x) for x in xs]
    loss = sum((yout - ygt) ** 2 for ygt, yout in zip(ys, ypred))
    for prm in model.parameters(): prm.grad = None
    loss.backward()
    for prm in model.parameters(): prm.data += -0.05 * prm.grad
    losses.append(loss.item())

RESULT = {
    'parabola: value, nudged slope, by hand, by backward': parabola,
    'three inputs': three_inputs,
    'neuron': neuron,
    'neuron by hand': neuron_by_hand,
    'neuron agrees with hand': all(abs(g - h) < 1e-12 for g, h in zip(neuron[1], neuron_by_hand)),
    'through exp agrees': abs(through_exp[0] - neuron[0]) < 1e-12 and all(
        abs(g - h) < 1e-12 for g, h in zip(through_exp[1], neuron[1])),
    'reuse': reuse,
    'parameters': len(model.parameters()),
    'losses': losses[::4],
    'predictions': [model(x).item() for x in xs],
}
