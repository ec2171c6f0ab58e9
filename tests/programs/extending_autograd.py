# In the style of the docs page "Extending PyTorch" (extending torch.autograd): a LinearFunction with
# forward and setup_context apart and needs_input_grad in backward, wrapped in an nn.Module; a
# MulConstant with a non-tensor argument whose gradient is None; a cube that also returns its
# derivative (tracked, so double backward works; or marked non-differentiable, so it does not);
# each checked by gradcheck and gradgradcheck and against the built-in ops.
import numpy as np
import torch

rng = np.random.default_rng(121)
Function = torch.autograd.Function


class LinearFunction(Function):
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class Linear(torch.nn.Module):
    def __init__(self, input_features, output_features, bias=True):
        super().__init__()
        self.input_features = input_features
        self.output_features = output_features
        self.weight = torch.nn.Parameter(torch.empty(output_features, input_features, dtype=torch.double))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(output_features, dtype=torch.double))
        else:
            self.register_parameter('bias', None)
        with torch.no_grad():
            self.weight.copy_(torch.tensor(rng.uniform(-0.1, 0.1, (output_features, input_features))))
            if self.bias is not None:
                self.bias.copy_(torch.tensor(rng.uniform(-0.1, 0.1, output_features)))

    def forward(self, input): return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self):
        return 'input_features={}, output_features={}, bias={}'.format(
            self.input_features, self.output_features, self.bias is not None)


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, constant = inputs
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


class MyCube(Function):
    "returns x ** 3 and its derivative 3 x ** 2; backward uses dx, which autograd tracks as an output"
    @staticmethod
    def forward(x):
        result = x ** 3
        dx = 3 * x ** 2
        return result, dx

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        result, dx = output
        ctx.save_for_backward(x, dx)

    @staticmethod
    def backward(ctx, grad_output, grad_dx):
        x, dx = ctx.saved_tensors
        return grad_output * dx + grad_dx * 6 * x


def my_cube(x):
    result, dx = MyCube.apply(x)
    return result


class MyCubeMarked(MyCube):
    "the same, with dx marked non-differentiable: backward is right once, but not twice"
    @staticmethod
    def setup_context(ctx, inputs, output):
        MyCube.setup_context(ctx, inputs, output)
        ctx.mark_non_differentiable(output[1])


input = (torch.tensor(rng.standard_normal((6, 5)), dtype=torch.double, requires_grad=True),
         torch.tensor(rng.standard_normal((3, 5)), dtype=torch.double, requires_grad=True),
         torch.tensor(rng.standard_normal(3), dtype=torch.double, requires_grad=True))
linear_check = torch.autograd.gradcheck(LinearFunction.apply, input, eps=1e-6, atol=1e-4)
no_bias_check = torch.autograd.gradcheck(lambda x, w: LinearFunction.apply(x, w, None), input[:2])

# only the weight needs a gradient: needs_input_grad skips the others
x = input[0].detach()
w = input[1].detach().requires_grad_()
LinearFunction.apply(x, w, None).pow(2).sum().backward()
same_as_builtin = torch.allclose(w.grad, torch.autograd.grad(torch.nn.functional.linear(x, w).pow(2).sum(), w)[0])

layer = Linear(5, 3)
out = layer(input[0])
out.sum().backward()

scaled = MulConstant.apply(input[0], 2.5)
g, = torch.autograd.grad(scaled.sum(), input[0])

x = torch.tensor(rng.standard_normal(4), dtype=torch.double, requires_grad=True)
result, dx = MyCube.apply(x)
result.sum().backward()
marked_result, marked_dx = MyCubeMarked.apply(x)

RESULT = {
    'gradcheck LinearFunction': linear_check,
    'gradcheck without bias': no_bias_check,
    'weight grad as the built-in linear': same_as_builtin,
    'module repr': repr(layer),
    'module output': out.tolist(),
    'module weight grad': layer.weight.grad.tolist(),
    'module bias grad': layer.bias.grad.tolist(),
    'MulConstant': [scaled[0].tolist(), g[0].tolist()],
    'gradcheck MulConstant': torch.autograd.gradcheck(lambda t: MulConstant.apply(t, -1.5), (input[2],)),
    'cube grad is dx': torch.allclose(x.grad, dx),
    'requires grad: result, dx, marked result, marked dx': [result.requires_grad, dx.requires_grad,
                                                            marked_result.requires_grad, marked_dx.requires_grad],
    'gradcheck my_cube': torch.autograd.gradcheck(my_cube, (x,)),
    'gradgradcheck my_cube': torch.autograd.gradgradcheck(my_cube, (x,)),
    'gradcheck marked': torch.autograd.gradcheck(lambda x: MyCubeMarked.apply(x)[0], (x,)),
    'gradgradcheck marked fails': torch.autograd.gradgradcheck(lambda x: MyCubeMarked.apply(x)[0], (x,),
                                                              raise_exception=False),
}
