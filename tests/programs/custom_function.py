"""A custom autograd Function (a smooth ramp, softplus) in both styles, used in a model and checked by gradcheck."""
import torch


class SoftPlus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log(1 + torch.exp(x))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


class Cube(torch.autograd.Function):
    "x ** 3, written in the style where forward takes no ctx and setup_context saves what backward needs."
    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return 3 * x ** 2 * grad_output


x = torch.linspace(-2, 2, 7, dtype=torch.float64, requires_grad=True)
out = (SoftPlus.apply(x) * Cube.apply(x)).sum()
out.backward()
RESULT = {'value': out.item(), 'grad': x.grad.tolist(),
          'gradcheck_softplus': torch.autograd.gradcheck(SoftPlus.apply, (x.detach().requires_grad_(),)),
          'gradcheck_cube': torch.autograd.gradcheck(Cube.apply, (x.detach().requires_grad_(),))}
