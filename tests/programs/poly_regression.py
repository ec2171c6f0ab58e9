# In the style of pytorch/examples' "regression": fit a polynomial of degree 4 from random samples by
# building polynomial features with cat, a single nn.Linear, smooth_l1_loss, and a hand-written SGD
# step on param.data, until the loss of a batch falls below a threshold; then print both polynomials.
import numpy as np
import torch

F = torch.nn.functional
rng = np.random.default_rng(111)
torch.set_default_dtype(torch.float64)

POLY_DEGREE = 4
W_target = torch.tensor(rng.standard_normal((POLY_DEGREE, 1))) * 5
b_target = torch.tensor(rng.standard_normal(1)) * 5


def make_features(x):
    "a matrix with columns [x, x^2, x^3, x^4]"
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x): return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    result = 'y = '
    for i, w in enumerate(W):
        result += '{:+.2f} x^{} '.format(w, i + 1)
    result += '{:+.2f}'.format(b[0])
    return result


def get_batch(batch_size=32):
    random = torch.tensor(rng.standard_normal(batch_size))
    x = make_features(random)
    y = f(x)
    return x, y


fc = torch.nn.Linear(W_target.size(0), 1)
with torch.no_grad():
    fc.weight.copy_(torch.tensor(rng.uniform(-0.5, 0.5, (1, POLY_DEGREE))))
    fc.bias.copy_(torch.tensor(rng.uniform(-0.5, 0.5, 1)))

losses = []
for batch_idx in range(1, 5001):
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.01 * param.grad)
    if batch_idx % 100 == 0: losses.append(loss)
    if loss < 1e-3: break

RESULT = {
    'features of 2': make_features(torch.tensor([2.0])).tolist(),
    'batches': batch_idx,
    'final loss': loss,
    'losses every 100 batches': losses[:10],
    'learned': poly_desc(fc.weight.view(-1).tolist(), fc.bias.tolist()),
    'actual': poly_desc(W_target.view(-1).tolist(), b_target.tolist()),
    'weights': fc.weight.view(-1).tolist() + fc.bias.tolist(),
    'smooth_l1 by hand': torch.allclose(
        F.smooth_l1_loss(fc(batch_x), batch_y),
        torch.where((fc(batch_x) - batch_y).abs() < 1, 0.5 * (fc(batch_x) - batch_y) ** 2,
                    (fc(batch_x) - batch_y).abs() - 0.5).mean()),
}
