"""`grad_fn.next_functions` lists the inputs of each node as torch's does: one `(node, index)` pair per input of
the operation, `(None, 0)` for one that needs no gradient (a tensor without grad, an integer tensor, a Python
number PyTorch wraps in a tensor, an absent optional tensor), and nothing for an argument that is no input of
the node (a mask, a condition, an index, a number PyTorch takes as a plain scalar)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fromscratch as fs
import fromscratch.nn.functional as F


def functional(lib): return F if lib is fs else TF


def operands(lib):
    "Leaves that require grad (a, b, v, m, x4, w4, s, bias), a float tensor that does not (c), integer and bool tensors."
    rng = np.random.default_rng(0)
    grad = lambda *shape: lib.tensor(rng.standard_normal(shape), requires_grad=True)
    return dict(a=grad(3, 4), b=grad(3, 4), v=grad(4), m=grad(4, 2), x4=grad(1, 2, 4, 4), w4=grad(3, 2, 2, 2),
                s=grad(), bias=grad(3),
                c=lib.tensor(rng.standard_normal((3, 4))), k=lib.tensor([1, 2, 3, 4]), i=lib.tensor([2, 0, 1]),
                i2=lib.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 1, 1, 1]]), mask=lib.tensor(rng.standard_normal((3, 4)) > 0))


def setitem(t, index, value):
    t[index] = value
    return t


OPS = {
    # a Python number, on either side of a binary op: torch wraps it in a tensor, an input with no gradient
    'a * 2': lambda l, o: o['a'] * 2, '2 * a': lambda l, o: 2 * o['a'], 'a + 2': lambda l, o: o['a'] + 2,
    '2 + a': lambda l, o: 2 + o['a'], 'a - 2': lambda l, o: o['a'] - 2, 'a / 2': lambda l, o: o['a'] / 2,
    'a * 2.5': lambda l, o: o['a'] * 2.5, 'a * True': lambda l, o: o['a'] * True,
    'a.add(2, alpha=3)': lambda l, o: o['a'].add(2, alpha=3), 'a.sub(2, alpha=3)': lambda l, o: o['a'].sub(2, alpha=3),
    'a.mul(2)': lambda l, o: o['a'].mul(2), 'a.div(2)': lambda l, o: o['a'].div(2),
    # ... except where torch takes it as a scalar: no input at all
    '2 - a': lambda l, o: 2 - o['a'], 'a ** 2': lambda l, o: o['a'] ** 2, '2 ** a': lambda l, o: 2 ** o['a'],
    'a.clamp(0, 1)': lambda l, o: o['a'].clamp(0, 1), 'a.clamp(min=0)': lambda l, o: o['a'].clamp(min=0.0),
    'a.masked_fill(mask, 0)': lambda l, o: o['a'].masked_fill(o['mask'], 0.0),
    # a tensor without grad, float or integer, on either side
    'a * c': lambda l, o: o['a'] * o['c'], 'c * a': lambda l, o: o['c'] * o['a'], 'a + c': lambda l, o: o['a'] + o['c'],
    'a - c': lambda l, o: o['a'] - o['c'], 'c / a': lambda l, o: o['c'] / o['a'], 'a ** c': lambda l, o: o['a'] ** o['c'],
    'a * k': lambda l, o: o['a'] * o['k'], 'k * a': lambda l, o: o['k'] * o['a'], 'a + k': lambda l, o: o['a'] + o['k'],
    'k / a': lambda l, o: o['k'] / o['a'], 'c @ m': lambda l, o: o['c'] @ o['m'], 'a @ m': lambda l, o: o['a'] @ o['m'],
    'maximum(a, c)': lambda l, o: l.maximum(o['a'], o['c']), 'minimum(c, a)': lambda l, o: l.minimum(o['c'], o['a']),
    'a ** b': lambda l, o: o['a'] ** o['b'], 'a * b': lambda l, o: o['a'] * o['b'],
    'cat([a, c, b])': lambda l, o: l.cat([o['a'], o['c'], o['b']]), 'stack([c, a])': lambda l, o: l.stack([o['c'], o['a']]),
    # tensor bounds: both bounds are inputs, an absent one too
    'a.clamp(min=c)': lambda l, o: o['a'].clamp(min=o['c']), 'a.clamp(max=c)': lambda l, o: o['a'].clamp(max=o['c']),
    'a.clamp(c, c + 1)': lambda l, o: o['a'].clamp(o['c'], o['c'] + 1),
    # masks, conditions and indices are no inputs; a number in a branch of where is one
    'where(mask, a, c)': lambda l, o: l.where(o['mask'], o['a'], o['c']),
    'where(mask, a, b)': lambda l, o: l.where(o['mask'], o['a'], o['b']),
    'where(mask, a, 0)': lambda l, o: l.where(o['mask'], o['a'], 0.0),
    'where(mask, 0, a)': lambda l, o: l.where(o['mask'], 0.0, o['a']),
    'a.masked_fill(mask, tensor)': lambda l, o: o['a'].masked_fill(o['mask'], l.tensor(2.0, dtype=l.float64)),
    'a.masked_fill(mask, leaf)': lambda l, o: o['a'].masked_fill(o['mask'], o['s']),
    'a[i]': lambda l, o: o['a'][o['i']], 'a[mask]': lambda l, o: o['a'][o['mask']],
    'a.gather(1, i2)': lambda l, o: o['a'].gather(1, o['i2']), 'a.index_select(0, i)': lambda l, o: o['a'].index_select(0, o['i']),
    'c.scatter_add(1, i2, a)': lambda l, o: o['c'].scatter_add(1, o['i2'], o['a']),
    'nll_loss(a, i)': lambda l, o: functional(l).nll_loss(o['a'], o['i']),
    'cross_entropy(a, i, weight)': lambda l, o: functional(l).nll_loss(o['a'], o['i'], weight=o['v'].detach().abs()),
    # in place, on a copy: the number written is an input
    't[0] = 1.0': lambda l, o: setitem(o['a'].clone(), 0, 1.0), 't[i] = 1.0': lambda l, o: setitem(o['a'].clone(), o['i'], 1.0),
    't[i] = c': lambda l, o: setitem(o['a'].clone(), o['i'], o['c']),
    't.add_(2)': lambda l, o: o['a'].clone().add_(2), 't.mul_(c)': lambda l, o: o['a'].clone().mul_(o['c']),
    't.copy_(c)': lambda l, o: o['a'].clone().copy_(o['c']), 'c.copy_(b)': lambda l, o: o['c'].clone().copy_(o['b']),
    # an absent bias or weight is an input of the node
    'conv2d(x, w)': lambda l, o: functional(l).conv2d(o['x4'], o['w4']),
    'conv2d(x, w, bias)': lambda l, o: functional(l).conv2d(o['x4'], o['w4'], o['bias']),
    'batch_norm(a, no affine)': lambda l, o: functional(l).batch_norm(o['a'], None, None, training=True),
    'batch_norm(a, v, v)': lambda l, o: functional(l).batch_norm(o['a'], None, None, o['v'], o['v'], training=True),
}


def inputs(out):
    "The node's `next_functions`, each as the short name of the node it leads to (None for none) and the index."
    return [(None if f is None else f.name().split('::')[-1], i) for f, i in out.grad_fn.next_functions]


@pytest.mark.parametrize('name', list(OPS))
def test_next_functions_like_torch(name):
    ours, theirs = OPS[name](fs, operands(fs)), OPS[name](torch, operands(torch))
    assert inputs(ours) == inputs(theirs)


def test_the_leaf_behind_a_number_operand():
    a, ta = fs.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    (node, index), nothing = (a * 2).grad_fn.next_functions
    (tnode, tindex), tnothing = (ta * 2).grad_fn.next_functions
    assert node.variable is a and tnode.variable is ta and index == tindex == 0
    assert repr(node) == '<AccumulateGrad>' and nothing == tnothing == (None, 0)
    assert (2 + a).grad_fn.next_functions[0][0] is node  # the leaf's one AccumulateGrad, first as in torch


def custom(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y, n): return x * k + y
        @staticmethod
        def backward(ctx, g): return g * 2, None, g, None
    return Scale


def test_a_custom_function_lists_its_tensor_arguments():
    ours = custom(fs).apply(fs.ones(2, requires_grad=True), 2.0, fs.ones(2), fs.tensor([1, 2]))
    theirs = custom(torch).apply(torch.ones(2, requires_grad=True), 2.0, torch.ones(2), torch.tensor([1, 2]))
    assert inputs(ours) == inputs(theirs) == [('AccumulateGrad', 0), (None, 0), (None, 0)]


def test_number_operands_do_not_change_values_or_gradients():
    a, ta = fs.tensor([1.0, -2.0, 3.0], requires_grad=True), torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    ((2 + a) * (3 * a) - 1 + a / 4).sum().backward()
    ((2 + ta) * (3 * ta) - 1 + ta / 4).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
