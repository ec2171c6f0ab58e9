# In the style of the torch.func tutorial "Jacobians, Hessians, hvp, vhp, and more": the Jacobian of a
# small layer row by row with vjp, then at once with vmap(vjp) and jacrev; argnums; jacfwd against
# jacrev; batch Jacobians by vmap and by the sum trick; Hessians as jacfwd(jacrev); hvp by jvp of grad.
import numpy as np
import torch

F = torch.nn.functional
vmap, vjp, jvp, grad = torch.func.vmap, torch.func.vjp, torch.func.jvp, torch.func.grad
jacrev, jacfwd, hessian = torch.func.jacrev, torch.func.jacfwd, torch.func.hessian

rng = np.random.default_rng(7)
D = 8


def predict(weight, bias, x): return F.linear(x, weight, bias).tanh()


weight = torch.tensor(rng.standard_normal((D, D)), dtype=torch.float64)
bias = torch.tensor(rng.standard_normal(D), dtype=torch.float64)
x = torch.tensor(rng.standard_normal(D), dtype=torch.float64)

# row by row: one vjp per unit vector
_, vjp_fn = vjp(lambda x: predict(weight, bias, x), x)
unit_vectors = torch.eye(D, dtype=torch.float64)
rows = [vjp_fn(v)[0] for v in unit_vectors]
jacobian_by_rows = torch.stack(rows)

# all rows at once
jacobian_by_vmap, = vmap(vjp_fn)(unit_vectors)
jacobian = jacrev(predict, argnums=2)(weight, bias, x)

# with respect to the weight and the bias together
jac_weight, jac_bias = jacrev(predict, argnums=(0, 1))(weight, bias, x)

# the same by hand: d tanh(Wx+b) / dx = diag(1 - tanh^2) W
by_hand = (1 - predict(weight, bias, x) ** 2).unsqueeze(1) * weight

# forward mode gives the same matrix
jacobian_forward = jacfwd(predict, argnums=2)(weight, bias, x)

# batch Jacobians: vmap over the batch, or the sum trick
batch = torch.tensor(rng.standard_normal((5, D)), dtype=torch.float64)
batch_jacobian = vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, batch)


def predict_summed(x): return predict(weight, bias, x).sum(0)


batch_jacobian_sum_trick = jacrev(predict_summed)(batch).transpose(0, 1)

# Hessians
hess = hessian(predict, argnums=2)(weight, bias, x)
hess_composed = jacfwd(jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
hess_revrev = jacrev(jacrev(predict, argnums=2), argnums=2)(weight, bias, x)


def f(x): return x.sin().sum() + (x ** 3).sum() / 6


def hvp(f, primals, tangents): return jvp(grad(f), primals, tangents)[1]


def hvp_revrev(f, primals, tangents):
    _, vjp_fn = vjp(grad(f), *primals)
    return vjp_fn(*tangents)


tangent = torch.tensor(rng.standard_normal(D), dtype=torch.float64)
hv = hvp(f, (x,), (tangent,))
hv_revrev, = hvp_revrev(f, (x,), (tangent,))
hv_dense = hessian(f)(x) @ tangent
hv_by_hand = (-x.sin() + x) * tangent

RESULT = {
    'jacobian shape': list(jacobian.shape),
    'rows agree': torch.allclose(jacobian_by_rows, jacobian),
    'vmap agrees': torch.allclose(jacobian_by_vmap, jacobian),
    'by hand agrees': torch.allclose(by_hand, jacobian),
    'forward agrees': torch.allclose(jacobian_forward, jacobian),
    'jacobian': jacobian[:3].tolist(),
    'jacobian by weight shape': list(jac_weight.shape),
    'jacobian by weight, a slice': jac_weight[2, 2].tolist(),
    'jacobian by bias is diagonal': (jac_bias * (1 - unit_vectors)).abs().max().item() == 0,
    'batch jacobian shape': list(batch_jacobian.shape),
    'sum trick agrees': torch.allclose(batch_jacobian, batch_jacobian_sum_trick),
    'batch jacobian trace': [(j * unit_vectors).sum().item() for j in batch_jacobian],
    'hessian shape': list(hess.shape),
    'hessians agree': torch.allclose(hess, hess_composed) and torch.allclose(hess, hess_revrev),
    'hessian, first block': hess[0, :2, :2].tolist(),
    'hvp': hv.tolist(),
    'hvp agrees': torch.allclose(hv, hv_revrev) and torch.allclose(hv, hv_dense) and torch.allclose(hv, hv_by_hand),
}
