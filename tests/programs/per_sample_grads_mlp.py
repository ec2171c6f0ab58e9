# In the style of the torch.func tutorial "Per-sample-gradients", with an MLP: the gradient of each
# sample's loss by a loop of backward passes and by vmap(grad(...)) over functional_call, then what
# per-sample gradients are for: clipping each one before averaging, as differentially private SGD does.
import numpy as np
import torch

nn, F = torch.nn, torch.nn.functional
functional_call, vmap, grad = torch.func.functional_call, torch.func.vmap, torch.func.grad

rng = np.random.default_rng(12)
torch.set_default_dtype(torch.float64)

model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 3))
with torch.no_grad():
    for p in model.parameters(): p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))

batch_size = 16
data = torch.tensor(rng.standard_normal((batch_size, 6)))
targets = torch.tensor(rng.integers(0, 3, batch_size))


def loop_grads():
    grads = []
    for i in range(batch_size):
        model.zero_grad()
        F.cross_entropy(model(data[i:i + 1]), targets[i:i + 1]).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    return [torch.stack(g) for g in zip(*grads)]


by_loop = loop_grads()

params = {k: v.detach() for k, v in model.named_parameters()}


def compute_loss(params, sample, target):
    prediction = functional_call(model, params, (sample.unsqueeze(0),))
    return F.cross_entropy(prediction, target.unsqueeze(0))


per_sample = vmap(grad(compute_loss), in_dims=(None, 0, 0))(params, data, targets)

# clip each sample's whole gradient to norm at most 1, then average
max_norm = 1.0
norms = torch.stack([g.reshape(batch_size, -1).norm(dim=1) for g in per_sample.values()], dim=1).norm(dim=1)
factors = (max_norm / (norms + 1e-6)).clamp(max=1.0)
clipped = {k: (g * factors.reshape(-1, *[1] * (g.dim() - 1))).mean(0) for k, g in per_sample.items()}

# one step of SGD with the clipped gradient
with torch.no_grad():
    before = F.cross_entropy(model(data), targets).item()
    for name, p in model.named_parameters(): p -= 0.5 * clipped[name]
    after = F.cross_entropy(model(data), targets).item()

RESULT = {
    'shapes': {k: list(v.shape) for k, v in per_sample.items()},
    'agree with the loop': all(torch.allclose(a, b) for a, b in zip(by_loop, per_sample.values())),
    'norms': norms.tolist(),
    'clipped samples': int((norms > max_norm).sum().item()),
    'clipped gradient of the last layer': clipped['4.weight'].tolist(),
    'loss before and after': [before, after],
}
