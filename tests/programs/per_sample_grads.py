# In the style of the torch.func tutorial "Per-sample-gradients": a small CNN, the gradient of the loss
# of each sample by a loop of single-sample backward passes, then all at once with
# vmap(grad(...)) over functional_call, and the two compared.
import numpy as np
import torch

nn, F = torch.nn, torch.nn.functional
functional_call, vmap, grad = torch.func.functional_call, torch.func.vmap, torch.func.grad

rng = np.random.default_rng(11)
torch.set_default_dtype(torch.float64)


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 6, 3, 1)
        self.fc1 = nn.Linear(6 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def loss_fn(predictions, targets): return F.nll_loss(predictions, targets)


model = SimpleCNN()
with torch.no_grad():
    for p in model.parameters(): p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.4))

batch_size = 8
data = torch.tensor(rng.standard_normal((batch_size, 1, 8, 8)))
targets = torch.tensor(rng.integers(0, 5, batch_size))


def compute_grad(sample, target):
    sample, target = sample.unsqueeze(0), target.unsqueeze(0)
    loss = loss_fn(model(sample), target)
    return torch.autograd.grad(loss, list(model.parameters()))


def compute_sample_grads(data, targets):
    sample_grads = [compute_grad(data[i], targets[i]) for i in range(batch_size)]
    sample_grads = zip(*sample_grads)
    return [torch.stack(shards) for shards in sample_grads]


per_sample_grads = compute_sample_grads(data, targets)

params = {k: v.detach() for k, v in model.named_parameters()}
buffers = {k: v.detach() for k, v in model.named_buffers()}


def compute_loss(params, buffers, sample, target):
    batch, targets = sample.unsqueeze(0), target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    return loss_fn(predictions, targets)


ft_compute_grad = grad(compute_loss)
ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)

# the mean of the per-sample gradients is the gradient of the batch's mean loss
model.zero_grad()
loss_fn(model(data), targets).backward()

RESULT = {
    'names': list(ft_per_sample_grads),
    'shapes': [list(g.shape) for g in ft_per_sample_grads.values()],
    'agree with the loop': all(torch.allclose(a, b, atol=1e-10, rtol=1e-8)
                               for a, b in zip(per_sample_grads, ft_per_sample_grads.values())),
    'mean is the batch gradient': all(torch.allclose(g.mean(0), p.grad)
                                      for g, p in zip(per_sample_grads, model.parameters())),
    'per-sample gradient norms': [torch.stack([g[i].norm() for g in ft_per_sample_grads.values()]).norm().item()
                                  for i in range(batch_size)],
    'fc2 bias gradients': ft_per_sample_grads['fc2.bias'].tolist(),
}
