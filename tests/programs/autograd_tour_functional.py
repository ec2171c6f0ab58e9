# In the style of the end of the video series' notebook "The Fundamentals of Autograd": the autograd
# profiler around a loop of tensor operations (which operations ran, and how often), then the
# higher-level torch.autograd.functional API: jacobian, hessian, vjp, jvp, hvp and vhp, checked by hand.
import numpy as np
import torch

rng = np.random.default_rng(92)
torch.set_default_dtype(torch.float64)

x = torch.tensor(rng.uniform(1, 2, (4, 4)))
y = torch.tensor(rng.uniform(1, 2, (4, 4)))
z = torch.ones(4, 4)
with torch.autograd.profiler.profile() as prf:
    for _ in range(10):
        z = (z / x) * y
events = {e.key: e.count for e in prf.key_averages()}
table = prf.key_averages().table(sort_by='self_cpu_time_total')


def exp_adder(x, y): return 2 * x.exp() + 3 * y


inputs = (torch.tensor(rng.uniform(0, 1, 3)), torch.tensor(rng.uniform(0, 1, 3)))
jac_x, jac_y = torch.autograd.functional.jacobian(exp_adder, inputs)
jac_single = torch.autograd.functional.jacobian(lambda x: x.sin() * x, inputs[0])


def pow_reducer(x): return x.pow(3).sum()


hess = torch.autograd.functional.hessian(pow_reducer, inputs[0])
v = torch.ones(3)
vjp_out, vjp_val = torch.autograd.functional.vjp(exp_adder, inputs, v)
jvp_out, jvp_val = torch.autograd.functional.jvp(exp_adder, inputs, (v, v))
_, hvp_val = torch.autograd.functional.hvp(pow_reducer, inputs[0], v)
_, vhp_val = torch.autograd.functional.vhp(pow_reducer, inputs[0], v)
eye = torch.eye(3)

RESULT = {
    'profiled operations': sorted(k for k in events if k in ('aten::div', 'aten::mul')),
    'counts': [events.get('aten::div'), events.get('aten::mul')],
    'table has a header': 'Self CPU' in table,
    'z': z[0].tolist(),
    'jacobian of exp_adder': [jac_x.tolist(), jac_y.tolist()],
    'jacobian by hand': torch.allclose(jac_x, 2 * eye * inputs[0].exp()) and torch.allclose(jac_y, 3 * eye),
    'jacobian of one input': jac_single.tolist(),
    'hessian': hess.tolist(),
    'hessian is 6x on the diagonal': torch.allclose(hess, 6 * eye * inputs[0]),
    'vjp': [t.tolist() for t in vjp_val],
    'jvp': jvp_val.tolist(),
    'outputs agree': torch.allclose(vjp_out, jvp_out),
    'hvp equals vhp for a symmetric hessian': torch.allclose(hvp_val, vhp_val),
    'hvp': hvp_val.tolist(),
}
