# In the style of the tutorial "Visualizing Gradients": a deep stack of Linear and Sigmoid layers, with
# and without BatchNorm, whose gradients are watched through hooks: forward hooks that retain_grad()
# on each layer's output, full backward hooks that record the norm of the gradient reaching each
# module, and hooks on intermediate tensors that read or change the gradient flowing through them.
import numpy as np
import torch

nn = torch.nn
rng = np.random.default_rng(101)
torch.set_default_dtype(torch.float64)


def fc_layer(in_size, out_size, norm_layer):
    return nn.Sequential(nn.Linear(in_size, out_size), norm_layer(out_size), nn.Sigmoid())


class Net(nn.Module):
    def __init__(self, in_size=6, hidden=8, depth=6, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.Identity
        self.layers = nn.Sequential(
            fc_layer(in_size, hidden, norm_layer),
            *[fc_layer(hidden, hidden, norm_layer) for _ in range(depth - 1)],
        )
        self.out = nn.Linear(hidden, 1)

    def forward(self, x): return self.out(self.layers(x))


x = torch.tensor(rng.standard_normal((16, 6)))
y = torch.tensor(rng.standard_normal((16, 1)))
initial = [(rng.standard_normal(s), rng.standard_normal(s[0])) for s in [(8, 6)] + [(8, 8)] * 5 + [(1, 8)]]


def make(norm_layer):
    model = Net(norm_layer=norm_layer)
    with torch.no_grad():
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        for linear, (w, b) in zip(linears, initial):
            linear.weight.copy_(torch.tensor(w))
            linear.bias.copy_(torch.tensor(b))
    return model


def keep_output(outputs):
    "a forward hook that keeps a module's output, with retain_grad, to read its .grad after backward"
    def hook(module, args, output):
        output.retain_grad()
        outputs[module] = output
    return hook


def record_norms(norms):
    "a full backward hook that records the norms of the gradients leaving and entering a module"
    def hook(module, grad_input, grad_output):
        norms[module] = [grad_output[0].norm().item(), grad_input[0].norm().item()]
    return hook


results = {}
for label, norm_layer in (('plain', None), ('batchnorm', nn.BatchNorm1d)):
    model = make(norm_layer)
    outputs, norms = {}, {}
    forward_handles = [m.register_forward_hook(keep_output(outputs))
                       for m in model.modules() if isinstance(m, nn.Linear)]
    backward_handles = [m.register_full_backward_hook(record_norms(norms))
                        for m in model.modules() if isinstance(m, nn.Sigmoid)]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    linear_grad_norms = [outputs[m].grad.norm().item() for m in outputs]
    weight_grad_norms = [m.weight.grad.norm().item() for m in model.modules() if isinstance(m, nn.Linear)]
    for h in forward_handles + backward_handles: h.remove()
    count = len(norms)
    model(x).sum().backward()
    results[label] = {
        'loss': loss.item(),
        'output gradient norms': linear_grad_norms,
        'weight gradient norms': weight_grad_norms,
        'sigmoid gradient norms': list(norms.values())[::-1],
        'hooks removed': len(norms) == count and len(outputs) == 7,
        'first layer over last layer': weight_grad_norms[0] / weight_grad_norms[-1],
    }
    if label == 'batchnorm':
        results[label]['running mean of the first BatchNorm'] = model.layers[0][1].running_mean.tolist()

# hooks on intermediate tensors: read, then change, the gradient flowing through
a = torch.tensor(rng.standard_normal(4), requires_grad=True)
b = a * 2
seen = []
b.register_hook(lambda grad: seen.append(grad.tolist()))
c = b.sin()
handle = c.register_hook(lambda grad: grad * 10)
c.sum().backward()
changed = a.grad.clone()
a.grad = None
handle.remove()
b = a * 2
b.sin().sum().backward()
results['tensor hooks'] = {
    'seen': seen[0],
    'changed by 10': torch.allclose(changed, 10 * a.grad),
    'grad': a.grad.tolist(),
}

RESULT = results
