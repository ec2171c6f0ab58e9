# In the style of the forward-mode AD tutorial's custom Function section: Functions that give a jvp
# formula (with ctx in forward, and with setup_context), used inside a dual_level and checked by
# gradcheck in forward mode only, then in both modes for one that also has a backward.
import numpy as np
import torch

fwAD = torch.autograd.forward_ad

rng = np.random.default_rng(32)


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = torch.exp(foo)
        ctx.result = result
        return result

    @staticmethod
    def jvp(ctx, gI):
        gO = gI * ctx.result
        del ctx.result
        return gO


class ScaledSquare(torch.autograd.Function):
    "scale * x ** 2, with forward written apart from setup_context, and both a jvp and a backward."
    @staticmethod
    def forward(x, scale):
        return scale * x ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.scale = scale
        ctx.save_for_forward(x)
        ctx.save_for_backward(x)

    @staticmethod
    def jvp(ctx, x_t, scale_t):
        x, = ctx.saved_tensors
        return 2 * ctx.scale * x * x_t

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return 2 * ctx.scale * x * grad_out, None


x = torch.tensor(rng.standard_normal((3, 4)), dtype=torch.float64)
t = torch.tensor(rng.standard_normal((3, 4)), dtype=torch.float64)
with fwAD.dual_level():
    exp_tangent = fwAD.unpack_dual(Exp.apply(fwAD.make_dual(x, t))).tangent
    square = ScaledSquare.apply(fwAD.make_dual(x, t), 1.5)
    square_primal, square_tangent = fwAD.unpack_dual(square)

x_leaf = x.clone().requires_grad_()
ScaledSquare.apply(x_leaf, 1.5).sum().backward()

RESULT = {
    'exp tangent': exp_tangent.tolist(),
    'square tangent': square_tangent.tolist(),
    'square tangent by hand': torch.allclose(square_tangent, 3 * x * t),
    'square backward by hand': torch.allclose(x_leaf.grad, 3 * x),
    'gradcheck exp, forward only': torch.autograd.gradcheck(
        Exp.apply, (x.clone().requires_grad_(),), check_forward_ad=True, check_backward_ad=False,
        check_undefined_grad=False, check_batched_grad=False),
    'gradcheck square, both modes': torch.autograd.gradcheck(
        lambda x: ScaledSquare.apply(x, 1.5), (x.clone().requires_grad_(),), check_forward_ad=True),
}
