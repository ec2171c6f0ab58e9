# In the style of the tutorial "Double Backward with Custom Functions": custom Functions whose backward
# is itself differentiable (it is written with differentiable tensor operations on saved tensors),
# saving an input, an output, or intermediate results returned as extra outputs; checked with
# create_graph=True by hand and with gradcheck and gradgradcheck.
import math

import numpy as np
import torch

rng = np.random.default_rng(41)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return grad_out * 2 * x


class Exp(torch.autograd.Function):
    "saves its output rather than its input"
    @staticmethod
    def forward(ctx, x):
        result = torch.exp(x)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_out):
        result, = ctx.saved_tensors
        return result * grad_out


class Sinh(torch.autograd.Function):
    "intermediate results are returned as outputs, so that double backward can follow them"
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.save_for_backward(expx, expnegx)
        return (expx - expnegx) / 2, expx, expnegx

    @staticmethod
    def backward(ctx, grad_out, grad_out_exp, grad_out_negexp):
        expx, expnegx = ctx.saved_tensors
        grad_input = grad_out * (expx + expnegx) / 2
        grad_input += grad_out_exp * expx
        grad_input -= grad_out_negexp * expnegx
        return grad_input


def sinh(x): return Sinh.apply(x)[0]


class SinhSavesDetached(torch.autograd.Function):
    "the intermediates are not outputs: backward works but its gradient misses their dependence on x"
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.expx, ctx.expnegx = expx.detach(), expnegx.detach()
        return (expx - expnegx) / 2

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * (ctx.expx + ctx.expnegx) / 2


x = torch.tensor(rng.standard_normal((3, 3)), dtype=torch.double, requires_grad=True)

# first and second derivatives by create_graph
y = Square.apply(x)
gx, = torch.autograd.grad(y.sum(), x, create_graph=True)
ggx, = torch.autograd.grad(gx.sum(), x)

e = Exp.apply(x)
ge, = torch.autograd.grad(e.sum(), x, create_graph=True)
gge, = torch.autograd.grad(ge.sum(), x)

s = sinh(x)
gs, = torch.autograd.grad(s.sum(), x, create_graph=True)
ggs, = torch.autograd.grad(gs.sum(), x)

wrong = SinhSavesDetached.apply(x)
gw, = torch.autograd.grad(wrong.sum(), x, create_graph=True)
gw_requires_grad = gw.requires_grad

point = x.detach()
RESULT = {
    'square grad is 2x': torch.allclose(gx, 2 * point),
    'square grad requires grad': gx.requires_grad,
    'square second derivative': ggx.tolist(),
    'exp derivatives are exp': torch.allclose(ge, point.exp()) and torch.allclose(gge, point.exp()),
    'sinh first derivative is cosh': torch.allclose(gs, (point.exp() + (-point).exp()) / 2),
    'sinh second derivative is sinh': torch.allclose(ggs, (point.exp() - (-point).exp()) / 2),
    'sinh at 1': sinh(torch.tensor([1.0], dtype=torch.double)).item(),
    'sinh at 1 by math': math.sinh(1.0),
    'gradcheck square': torch.autograd.gradcheck(Square.apply, x),
    'gradgradcheck square': torch.autograd.gradgradcheck(Square.apply, x),
    'gradgradcheck exp': torch.autograd.gradgradcheck(Exp.apply, x),
    'gradcheck sinh': torch.autograd.gradcheck(sinh, x),
    'gradgradcheck sinh': torch.autograd.gradgradcheck(sinh, x),
    'detached version: first derivative still right': torch.allclose(gw, (point.exp() + (-point).exp()) / 2),
    'detached version: its gradient is cut': gw_requires_grad,
    'detached version: gradgradcheck fails': torch.autograd.gradgradcheck(SinhSavesDetached.apply, x,
                                                                          raise_exception=False),
}
