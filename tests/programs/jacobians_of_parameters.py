# In the style of the torch.func tutorial on Jacobians and Hessians: the Jacobian of a small model's
# outputs with respect to a dict of its parameters, by reverse and by forward mode, and the Hessian of
# its loss, each as a tree with the parameters' names.
import numpy as np
import torch

functional_call, hessian = torch.func.functional_call, torch.func.hessian
jacfwd, jacrev = torch.func.jacfwd, torch.func.jacrev

rng = np.random.default_rng(3)
torch.set_default_dtype(torch.float64)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape))))
params = {name: p.detach() for name, p in model.named_parameters()}
x = torch.tensor(rng.standard_normal((5, 3)))
y = torch.tensor(rng.standard_normal((5, 2)))


def predict(params, x): return functional_call(model, params, (x,))
def loss(params, x, y): return ((predict(params, x) - y) ** 2).mean()


by_reverse = jacrev(predict)(params, x)
by_forward = jacfwd(predict)(params, x)
grads, value = jacrev(lambda p: (loss(p, x, y), loss(p, x, y)), has_aux=True)(params)
h = hessian(loss)(params, x, y)
h_input = hessian(loss, argnums=1)(params, x, y)

RESULT = {
    'jacobian shapes': {k: list(v.shape) for k, v in by_reverse.items()},
    'reverse equals forward': all(torch.allclose(by_reverse[k], by_forward[k]) for k in params),
    'jacobian': {k: v.reshape(-1)[:6].tolist() for k, v in by_reverse.items()},
    'gradient': {k: v.tolist() for k, v in grads.items()},
    'loss': value.item(),
    'hessian blocks': sorted(f'{a}/{b}:{list(h[a][b].shape)}' for a in h for b in h[a]),
    'hessian of the last bias': h['2.bias']['2.bias'].tolist(),
    'hessian by the input, trace': (h_input.reshape(15, 15) * torch.eye(15)).sum().item(),
}
