# In the style of the torch.func tutorial "Neural Tangent Kernels": the empirical NTK of a small net
# between two batches, by contracting Jacobians over the parameters (full, trace and diagonal forms),
# and by NTK-vector products (a vjp followed by a jvp, vmapped over a basis), compared.
import numpy as np
import torch

nn, F = torch.nn, torch.nn.functional
functional_call, vmap, vjp, jvp, jacrev = (torch.func.functional_call, torch.func.vmap, torch.func.vjp,
                                           torch.func.jvp, torch.func.jacrev)

rng = np.random.default_rng(21)
torch.set_default_dtype(torch.float64)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 3)

    def forward(self, x):
        x = torch.tanh(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


net = Net()
with torch.no_grad():
    for p in net.parameters(): p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.6))

x_train = torch.tensor(rng.standard_normal((6, 5)))
x_test = torch.tensor(rng.standard_normal((4, 5)))

params = {k: v.detach() for k, v in net.named_parameters()}


def fnet_single(params, x): return functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)


def empirical_ntk_jacobian_contraction(fnet_single, params, x1, x2, compute='full'):
    jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
    jac1 = [j.flatten(2) for j in jac1.values()]
    jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
    jac2 = [j.flatten(2) for j in jac2.values()]
    if compute == 'full': einsum_expr = 'Naf,Mbf->NMab'
    elif compute == 'trace': einsum_expr = 'Naf,Maf->NM'
    elif compute == 'diagonal': einsum_expr = 'Naf,Maf->NMa'
    else: raise ValueError(compute)
    result = torch.stack([torch.einsum(einsum_expr, j1, j2) for j1, j2 in zip(jac1, jac2)])
    return result.sum(0)


def empirical_ntk_ntk_vps(func, params, x1, x2, compute='full'):
    def get_ntk(x1, x2):
        def func_x1(params): return func(params, x1)
        def func_x2(params): return func(params, x2)

        output, vjp_fn = vjp(func_x1, params)

        def get_ntk_slice(vec):
            vjps = vjp_fn(vec)
            _, jvps = jvp(func_x2, (params,), vjps)
            return jvps

        basis = torch.eye(output.numel(), dtype=output.dtype).view(output.numel(), -1)
        return vmap(get_ntk_slice)(basis)

    result = vmap(vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
    if compute == 'full': return result
    if compute == 'trace': return torch.einsum('NMKK->NM', result)
    if compute == 'diagonal': return torch.einsum('NMKK->NMK', result)
    raise ValueError(compute)


full = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test, 'full')
trace = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test, 'trace')
diagonal = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test, 'diagonal')
full_vps = empirical_ntk_ntk_vps(fnet_single, params, x_train, x_test, 'full')
trace_vps = empirical_ntk_ntk_vps(fnet_single, params, x_train, x_test, 'trace')

# the kernel of a batch with itself is symmetric and positive semidefinite in its trace form
self_kernel = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_train, 'trace')

RESULT = {
    'full shape': list(full.shape),
    'vps agree with the contraction': torch.allclose(full, full_vps) and torch.allclose(trace, trace_vps),
    'trace is the full kernel\'s trace': torch.allclose(trace, torch.einsum('NMaa->NM', full)),
    'diagonal is the full kernel\'s diagonal': torch.allclose(diagonal, torch.einsum('NMaa->NMa', full)),
    'trace': trace.tolist(),
    'a full block': full[1, 2].tolist(),
    'self kernel symmetric': torch.allclose(self_kernel, self_kernel.t()),
    'self kernel diagonal positive': bool((torch.einsum('ii->i', self_kernel) > 0).all()),
}
