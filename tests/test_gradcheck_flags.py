"""autograd.gradcheck's and gradgradcheck's flags against torch's: forward mode, undefined gradients,
batched gradients (vmap), fast mode, reentrancy, dtypes, the zero grad_output, and the flags' own errors."""
import inspect
import warnings

import numpy as np
import pytest
import torch

import fromscratch as fs


def pair(*shape, seed=0, low=0.5, high=1.5):
    a = np.random.default_rng(seed).uniform(low, high, shape) * np.random.default_rng(seed + 1).choice([-1, 1], shape)
    return fs.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


GOOD = {
    'sin * sum': (lambda t: t.sin() * t.sum(), 1),
    'two outputs': (lambda t: (t.exp(), (t * t).sum()), 1),
    'matmul tanh': (lambda a, b: (a @ b).tanh(), 2),
    'softmax': (lambda t: t.softmax(-1), 1),
    'broadcast': (lambda a, b: a * b[0] + b, 2),
    'index and cat': (lambda a, b: fs_or_torch(a).cat([a[0], b.reshape(-1)]) * 2, 2),
    'an integer output too': (lambda t: (t * t, t.argmax()), 1),
    'max and where': (lambda a, b: fs_or_torch(a).where(a > 0, a, b) + a.max(), 2),
}


def fs_or_torch(t): return fs if isinstance(t, fs.Tensor) else torch


def good_inputs(name):
    n = GOOD[name][1]
    shapes = {'matmul tanh': [(2, 3), (3, 2)], 'broadcast': [(2, 3), (2, 3)], 'index and cat': [(2, 3), (2, 3)],
              'max and where': [(2, 3), (2, 3)]}.get(name, [(2, 3)] * n)
    pairs = [pair(*s, seed=3 * k) for k, s in enumerate(shapes)]
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


FLAGS = {
    'default': {},
    'forward': dict(check_forward_ad=True),
    'forward only': dict(check_forward_ad=True, check_backward_ad=False),
    'batched': dict(check_batched_grad=True),
    'batched forward': dict(check_forward_ad=True, check_batched_forward_grad=True),
    'fast': dict(fast_mode=True),
    'fast forward': dict(fast_mode=True, check_forward_ad=True),
    'no undefined check': dict(check_undefined_grad=False),
    'dtypes and nondet_tol': dict(check_grad_dtypes=True, nondet_tol=1e-10),
    'masked': dict(masked=True),
}


@pytest.mark.parametrize('flags', list(FLAGS))
@pytest.mark.parametrize('name', list(GOOD))
def test_good_functions_pass_every_flag_in_both(name, flags):
    ours, theirs = good_inputs(name)
    f = GOOD[name][0]
    assert fs.autograd.gradcheck(f, ours, **FLAGS[flags]) is True
    assert torch.autograd.gradcheck(f, theirs, **FLAGS[flags]) is True


GG_FLAGS = {'default': {}, 'fwd over rev': dict(check_fwd_over_rev=True),
            'fwd over rev only': dict(check_fwd_over_rev=True, check_rev_over_rev=False,
                                      check_undefined_grad=False),
            'batched': dict(check_batched_grad=True), 'non-contiguous seeds': dict(gen_non_contig_grad_outputs=True),
            'fast': dict(fast_mode=True)}


@pytest.mark.parametrize('flags', list(GG_FLAGS))
@pytest.mark.parametrize('name', ['sin * sum', 'two outputs', 'matmul tanh', 'softmax'])
def test_gradgradcheck_flags_pass_in_both(name, flags):
    ours, theirs = good_inputs(name)
    f = GOOD[name][0]
    assert fs.autograd.gradgradcheck(f, ours, **GG_FLAGS[flags]) is True
    assert torch.autograd.gradgradcheck(f, theirs, **GG_FLAGS[flags]) is True


def broken(lib, which):
    "Custom Functions, each wrong in one way."
    if which in ('wrong jvp', 'wrong backward'):       # 3x, with one of its two rules saying 2x
        back, fwd = (3, 2) if which == 'wrong jvp' else (2, 3)
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x): return x * 3
            @staticmethod
            def backward(ctx, g): return g * back
            @staticmethod
            def jvp(ctx, t): return t * fwd
    elif which == 'ignores grad_output':
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return (x * x).sum()
            @staticmethod
            def backward(ctx, g): return 2 * ctx.saved_tensors[0]
    elif which == 'drifts':
        class F(lib.autograd.Function):
            calls = 0
            @staticmethod
            def forward(ctx, x): return x * 2
            @staticmethod
            def backward(ctx, g):
                F.calls += 1
                return g * (2 + 1e-9 * F.calls)
    elif which == 'item in backward':
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x): return x * 2
            @staticmethod
            def backward(ctx, g): return g * 2 + 0 * g.sum().item()
    return F


def message(f):
    try: f()
    except Exception as e: return type(e).__name__, str(e)
    return None


CASES = {  # which function, which flags, and the start of the message both libraries give
    'wrong jvp, backward only': ('wrong jvp', {}, None),
    'wrong jvp, forward': ('wrong jvp', dict(check_forward_ad=True),
                           'Jacobian computed with forward mode mismatch for output 0 with respect to input 0,'),
    'wrong jvp, fast forward': ('wrong jvp', dict(check_forward_ad=True, fast_mode=True),
                                'Jacobian computed with forward mode mismatch for output 0 with respect to input 0,'),
    'wrong backward, forward only': ('wrong backward', dict(check_forward_ad=True, check_backward_ad=False), None),
    'wrong backward': ('wrong backward', {}, 'Jacobian mismatch for output 0 with respect to input 0,'),
    'wrong backward, fast': ('wrong backward', dict(fast_mode=True),
                             'Jacobian mismatch for output 0 with respect to input 0,'),
    'ignores grad_output': ('ignores grad_output', {}, 'backward not multiplied by grad_output'),
    'drifts': ('drifts', {}, 'Backward is not reentrant, i.e., running backward with same input and grad_output'),
    'drifts within nondet_tol': ('drifts', dict(nondet_tol=1e-6), None),
    'item in backward, batched': ('item in backward', dict(check_batched_grad=True),
                                  'While computing batched gradients, got: '),   # then each vmap's words
    'item in backward, not batched': ('item in backward', {}, None),
}


@pytest.mark.parametrize('case', list(CASES))
def test_each_check_fails_where_torchs_does(case):
    which, flags, start = CASES[case]
    ours, theirs = pair(3)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        o = message(lambda: fs.autograd.gradcheck(broken(fs, which).apply, ours, **flags))
        t = message(lambda: torch.autograd.gradcheck(broken(torch, which).apply, theirs, **flags))
        ro = fs.autograd.gradcheck(broken(fs, which).apply, ours, raise_exception=False, **flags)
        rt = torch.autograd.gradcheck(broken(torch, which).apply, theirs, raise_exception=False, **flags)
    assert ro == rt == (start is None)
    if start is None: assert o is None and t is None
    else:
        assert o[0] == t[0] == 'GradcheckError'
        assert o[1].startswith(start) and t[1].startswith(start), (o, t)


@pytest.mark.parametrize('flags', [dict(check_forward_ad=False, check_backward_ad=False),
                                   dict(check_batched_grad=True, check_backward_ad=False, check_forward_ad=True),
                                   dict(check_batched_forward_grad=True)])
def test_contradicting_flags_are_errors_even_without_raising(flags):
    ours, theirs = pair(2)
    o = message(lambda: fs.autograd.gradcheck(lambda t: t * 2, ours, raise_exception=False, **flags))
    t = message(lambda: torch.autograd.gradcheck(lambda t: t * 2, theirs, raise_exception=False, **flags))
    assert o == t and o[0] == 'AssertionError'


@pytest.mark.parametrize('flags', [dict(check_fwd_over_rev=False, check_rev_over_rev=False),
                                   dict(check_rev_over_rev=False, check_fwd_over_rev=True),
                                   dict(check_rev_over_rev=False, check_fwd_over_rev=True, check_undefined_grad=False,
                                        check_batched_grad=True)])
def test_gradgradcheck_contradicting_flags(flags):
    ours, theirs = pair(2)
    o = message(lambda: fs.autograd.gradgradcheck(lambda t: t * t, ours, **flags))
    t = message(lambda: torch.autograd.gradgradcheck(lambda t: t * t, theirs, **flags))
    assert o == t and o[0] == 'AssertionError'


def test_signatures_are_torchs():
    for name in ('gradcheck', 'gradgradcheck'):
        ours, theirs = inspect.signature(getattr(fs.autograd, name)), inspect.signature(getattr(torch.autograd, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
               [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


def test_flags_are_keyword_only_as_in_torch():
    ours, theirs = pair(2)
    o = message(lambda: fs.autograd.gradcheck(lambda t: t * 2, ours, 1e-6))
    t = message(lambda: torch.autograd.gradcheck(lambda t: t * 2, theirs, 1e-6))
    assert o[0] == t[0] == 'TypeError'


def test_no_differentiable_output():
    for f, expected in ((lambda t: t.detach() * 2, 'Numerical gradient for function expected to be zero'),
                        (lambda t: (t.detach() * 0).sum(), None), (lambda t: t.argmax(), None)):
        ours, theirs = pair(2)
        o, t = message(lambda: fs.autograd.gradcheck(f, ours)), message(lambda: torch.autograd.gradcheck(f, theirs))
        assert o == t == (None if expected is None else ('GradcheckError', expected))


def test_undefined_gradients_of_several_outputs_are_zeros():
    "A two-output Function that leaves its gradients unmaterialized, handled right: both libraries pass."
    def make(lib):
        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3
            @staticmethod
            def backward(ctx, g1, g2):
                if g1 is None and g2 is None: return None
                out = 0
                if g1 is not None: out = out + g1 * 2
                if g2 is not None: out = out + g2 * 3
                return out
        return Two
    ours, theirs = pair(3)
    assert fs.autograd.gradcheck(make(fs).apply, ours) and torch.autograd.gradcheck(make(torch).apply, theirs)


def test_a_node_no_gradient_reached_is_not_run_here():
    """The one difference of check_undefined_grad, on purpose: torch calls a backward with None when all its
    gradients are undefined; our engine does not run a node that no gradient reached."""
    def make(lib):
        class OnesForNone(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                ctx.save_for_backward(x)
                return x * 2
            @staticmethod
            def backward(ctx, g): return ctx.saved_tensors[0] * 0 + 1 if g is None else g * 2
        return OnesForNone
    ours, theirs = pair(3)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert fs.autograd.gradcheck(make(fs).apply, ours) is True
        assert torch.autograd.gradcheck(make(torch).apply, theirs, raise_exception=False) is False


def test_the_forward_jacobian_is_the_backward_one():
    x, _ = pair(2, 3)
    f = lambda t: (t.exp() * t.sum(), t.softmax(0))
    from fromscratch.autograd.gradcheck import forward_jacobian, analytical_jacobian
    for a, b in zip(forward_jacobian(f, x), analytical_jacobian(f, x)):
        for c, d in zip(a, b): np.testing.assert_allclose(c, d, rtol=1e-12, atol=1e-12)


def test_gradcheck_leaves_the_inputs_and_grad_mode_alone():
    x, _ = pair(2, 2)
    before = x.detach().numpy().copy()
    assert fs.autograd.gradcheck(lambda t: t.sin(), x, check_forward_ad=True, check_batched_grad=True,
                                 check_batched_forward_grad=True, fast_mode=True)
    assert np.array_equal(x.detach().numpy(), before) and x.grad is None and fs.is_grad_enabled()
    assert not fs.core.forward_mode.stack
