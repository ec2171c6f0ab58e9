# In the style of the tutorial "Forward-mode Automatic Differentiation": dual tensors inside a
# dual_level, unpack_dual's primal and tangent, a module's parameters made dual (by setattr and by
# functional_call), a custom Function with a jvp, and torch.func.jvp.
import numpy as np
import torch

fwAD = torch.autograd.forward_ad
nn = torch.nn

rng = np.random.default_rng(31)
torch.set_default_dtype(torch.float64)

primal = torch.tensor(rng.standard_normal((4, 4)))
tangent = torch.tensor(rng.standard_normal((4, 4)))
plain_tensor = torch.tensor(rng.standard_normal((4, 4)))


def fn(x, y): return x ** 2 + y ** 2


with fwAD.dual_level():
    dual_input = fwAD.make_dual(primal, tangent)
    unpacked = fwAD.unpack_dual(dual_input)
    tangent_is_kept = unpacked.tangent is tangent
    plain_has_no_tangent = fwAD.unpack_dual(plain_tensor).tangent is None
    dual_output = fn(dual_input, plain_tensor)
    jvp = fwAD.unpack_dual(dual_output).tangent
    primal_out = fwAD.unpack_dual(dual_output).primal
    as_tuple = tuple(x is not None for x in fwAD.unpack_dual(dual_output))
after_level = fwAD.unpack_dual(dual_output).tangent is None

# a module: replace its parameters by dual tensors
model = nn.Linear(5, 5)
with torch.no_grad():
    for p in model.parameters(): p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape))))
inp = torch.tensor(rng.standard_normal((16, 5)))
params = {name: p for name, p in model.named_parameters()}
tangents = {name: torch.tensor(rng.standard_normal(tuple(p.shape))) for name, p in params.items()}

with fwAD.dual_level():
    for name, p in params.items():
        delattr(model, name)
        setattr(model, name, fwAD.make_dual(p, tangents[name]))
    out = model(inp)
    jvp_setattr = fwAD.unpack_dual(out).tangent

model = nn.Linear(5, 5)
with torch.no_grad():
    for name, p in model.named_parameters(): p.copy_(params[name])
functional_call = torch.func.functional_call
with fwAD.dual_level():
    dual_params = {name: fwAD.make_dual(p, tangents[name]) for name, p in params.items()}
    out = functional_call(model, dual_params, inp)
    jvp_functional = fwAD.unpack_dual(out).tangent
by_hand = inp @ tangents['weight'].t() + tangents['bias']


# a custom Function with a forward-mode formula
class Fn(torch.autograd.Function):
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


fn_primal = torch.tensor(rng.standard_normal((3, 3)))
fn_tangent = torch.tensor(rng.standard_normal((3, 3)))
with fwAD.dual_level():
    dual_out = Fn.apply(fwAD.make_dual(fn_primal, fn_tangent))
    fn_jvp = fwAD.unpack_dual(dual_out).tangent

# the functional API
func_out, func_jvp = torch.func.jvp(fn, (primal, plain_tensor), (tangent, torch.zeros_like(tangent)))
_, params_jvp = torch.func.jvp(lambda p: functional_call(model, p, (inp,)), (params,), (tangents,))

RESULT = {
    'tangent kept': tangent_is_kept,
    'plain tensor has no tangent': plain_has_no_tangent,
    'unpacked as a tuple': list(as_tuple),
    'tangent gone after the level': after_level,
    'jvp': jvp.tolist(),
    'jvp is 2 x tangent': torch.allclose(jvp, 2 * primal * tangent),
    'primal': primal_out[0].tolist(),
    'module jvp by setattr': jvp_setattr[:2].tolist(),
    'functional_call agrees': torch.allclose(jvp_setattr, jvp_functional),
    'by hand agrees': torch.allclose(jvp_functional, by_hand),
    'custom jvp': fn_jvp.tolist(),
    'custom jvp is exp times tangent': torch.allclose(fn_jvp, fn_primal.exp() * fn_tangent),
    'func.jvp agrees': torch.allclose(func_jvp, jvp) and torch.allclose(func_out, primal_out),
    'func.jvp over params agrees': torch.allclose(params_jvp, by_hand),
}
