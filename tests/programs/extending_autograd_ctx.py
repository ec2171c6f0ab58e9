# In the style of the docs page "Extending PyTorch", the ctx methods: mark_dirty for a Function that
# changes its input in place, mark_non_differentiable for the indices a sort returns,
# set_materialize_grads(False) so backward sees None for unused outputs, once_differentiable for a
# backward written outside autograd, and generate_vmap_rule so a Function runs under vmap.
import numpy as np
import torch

rng = np.random.default_rng(122)
Function = torch.autograd.Function
once_differentiable = torch.autograd.function.once_differentiable


class AddOneInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class Sort(Function):
    @staticmethod
    def forward(ctx, x):
        values, indices = x.sort()
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        indices, = ctx.saved_tensors
        grad_input = torch.zeros_like(grad_values)
        grad_input.index_add_(0, indices, grad_values)
        return grad_input


class TwoCopies(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x.clone(), x.clone() * 2

    @staticmethod
    def backward(ctx, g1, g2):
        x, = ctx.saved_tensors
        ctx.seen = [g1 is None, g2 is None]
        grad_input = torch.zeros_like(x)
        if g1 is not None: grad_input += g1
        if g2 is not None: grad_input += 2 * g2
        return grad_input


class NumpySquare(Function):
    "backward computes with numpy, so it cannot itself be differentiated"
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tensor(x.detach().numpy() ** 2)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return torch.tensor(2 * x.numpy() * grad_output.numpy())


class ScaledTanh(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, scale):
        return torch.tanh(x) * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.save_for_backward(x)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * (1 - torch.tanh(x) ** 2) * ctx.scale, None


a = torch.tensor(rng.standard_normal(4), dtype=torch.double, requires_grad=True)
b = a * 3
c = AddOneInPlace.apply(b)
c.sum().backward()
in_place = [c is b, b.grad_fn.name() != 'MulBackward0', a.grad.tolist()]
try:
    AddOneInPlace.apply(a)
    leaf_message = ''
except RuntimeError as e:
    leaf_message = str(e)

x = torch.tensor(rng.standard_normal(5), dtype=torch.double, requires_grad=True)
values, indices = Sort.apply(x)
(values * torch.arange(5, dtype=torch.double)).sum().backward()
sort_result = [values.tolist(), indices.tolist(), indices.requires_grad, x.grad.tolist()]

y = torch.tensor(rng.standard_normal(3), dtype=torch.double, requires_grad=True)
first, second = TwoCopies.apply(y)
first.sum().backward()
materialize = [first.grad_fn.seen if hasattr(first.grad_fn, 'seen') else None, y.grad.tolist()]

z = torch.tensor(rng.standard_normal(3), dtype=torch.double, requires_grad=True)
g, = torch.autograd.grad((NumpySquare.apply(z) * z).sum(), z, create_graph=True)
try:
    g.sum().backward()
    once_message = ''
except RuntimeError as e:
    once_message = str(e)

batch = torch.tensor(rng.standard_normal((4, 3)), dtype=torch.double)
vmapped = torch.func.vmap(ScaledTanh.apply, in_dims=(0, None))(batch, 2.0)
grads = torch.func.vmap(torch.func.grad(lambda x: ScaledTanh.apply(x, 2.0).sum()))(batch)

RESULT = {
    'mark_dirty': in_place,
    'in place on a leaf': leaf_message,
    'sort': sort_result,
    'gradcheck sort': torch.autograd.gradcheck(lambda x: Sort.apply(x)[0], (x,)),
    'materialize': materialize,
    'once_differentiable': [g.tolist(), once_message],
    'vmap': torch.allclose(vmapped, torch.tanh(batch) * 2),
    'vmap of grad': torch.allclose(grads, 2 * (1 - torch.tanh(batch) ** 2)),
}
