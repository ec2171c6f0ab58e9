# In the style of the basics tutorial "Tensors" (and the introduction to tensors of the video series):
# creating tensors from data, numpy and other tensors, their attributes and dtypes, indexing and
# slicing, joining, arithmetic, aggregates to Python numbers, in-place operations, the
# numpy bridge that shares memory, broadcasting, and copies with clone.
import numpy as np
import torch

rng = np.random.default_rng(61)

data = [[1, 2], [3, 4]]
x_data = torch.tensor(data)
np_array = np.array(data)
x_np = torch.from_numpy(np_array)
x_ones = torch.ones_like(x_data)
x_rand = torch.rand_like(x_data, dtype=torch.float)

shape = (2, 3,)
zeros_tensor = torch.zeros(shape)
ones_tensor = torch.ones(shape)
rand_tensor = torch.rand(shape)

tensor = torch.tensor(rng.standard_normal((3, 4)), dtype=torch.float32)
attributes = [list(tensor.shape), tensor.dtype == torch.float32, tensor.device.type, tensor.ndim, tensor.numel()]

t = torch.ones(4, 4)
first_row, first_column, last_column = t[0].tolist(), t[:, 0].tolist(), t[..., -1].tolist()
t[:, 1] = 0
t1 = torch.cat([t, t, t], dim=1)
stacked = torch.stack([t, t])

y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = torch.matmul(tensor, tensor.T)
z1 = tensor * tensor
z2 = tensor.mul(tensor)
z3 = torch.mul(tensor, tensor)

agg = tensor.sum()
agg_item = agg.item()

before = tensor.clone()
tensor.add_(5)
added = torch.equal(tensor, before + 5)

# numpy bridge: shared memory both ways
t = torch.ones(5)
n = t.numpy()
t.add_(1)
tensor_to_numpy = n.tolist()
n = np.ones(5)
t = torch.from_numpy(n)
np.add(n, 1, out=n)
numpy_to_tensor = t.tolist()

# dtypes and conversions
ints = torch.zeros(2, 3, dtype=torch.int16)
doubles = torch.ones(2, 3, dtype=torch.float64) * 3.5
converted = doubles.to(torch.int32)
kinds = [ints.dtype == torch.int16, doubles.dtype == torch.float64, converted.dtype == torch.int32,
         converted.tolist(), x_data.dtype == torch.int64, torch.tensor([1., 2.]).dtype == torch.float32,
         torch.tensor(True).dtype == torch.bool, (torch.tensor([1, 2]) / 2).dtype == torch.float32,
         (torch.tensor([1, 2]) * 2.5).dtype == torch.float32, ints.float().dtype == torch.float32]

# broadcasting, math and comparisons
m = torch.tensor(rng.standard_normal((2, 4)), dtype=torch.float32)
broadcast = (m * torch.tensor([[1.], [2.]]) + torch.tensor([1., 2., 3., 4.])).tolist()
math_ops = [torch.abs(m).tolist(), torch.clamp(m, -0.5, 0.5).tolist(), torch.max(m).item(),
            m.mean(dim=1).tolist(), torch.std(m).item(), (m > 0).tolist(), torch.eq(m, m).all().item()]

# copies: assignment aliases, clone copies, detach keeps memory
a = torch.ones(2, 2)
b = a
c = a.clone()
a[0][1] = 561
alias_and_copy = [b[0][1].item(), c[0][1].item()]
r = torch.ones(2, 2, requires_grad=True)
r_clone = r.clone()
r_detached = r.detach().clone()

RESULT = {
    'x_data': x_data.tolist(),
    'from numpy equal': torch.equal(x_np, x_data),
    'like shapes and dtypes': [x_ones.tolist(), x_rand.dtype == torch.float32, list(x_rand.shape)],
    'rand range': bool(((rand_tensor >= 0) & (rand_tensor < 1)).all()),
    'zeros and ones': [zeros_tensor.tolist(), ones_tensor.tolist()],
    'attributes': attributes,
    'rows and columns': [first_row, first_column, last_column],
    'joined': [t1.tolist(), list(stacked.shape)],
    'matmul agrees': torch.allclose(y1, y2) and torch.allclose(y1, y3),
    'y1': y1.tolist(),
    'mul agrees': torch.equal(z1, z2) and torch.equal(z1, z3),
    'sum': [agg_item, type(agg_item).__name__],
    'add_ in place': added,
    'tensor to numpy shares': tensor_to_numpy,
    'numpy to tensor shares': numpy_to_tensor,
    'dtypes': kinds,
    'broadcast': broadcast,
    'math': math_ops,
    'alias and copy': alias_and_copy,
    'clone keeps the graph, detach drops it': [r_clone.requires_grad, r_clone.grad_fn is not None,
                                               r_detached.requires_grad],
}
