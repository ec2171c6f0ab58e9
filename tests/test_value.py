"""`fromscratch.lessons.value`: every op, random expression graphs, reuse, long chains and the drawing, against torch in float64."""
import math
import operator
import random

import pytest
import torch
from hypothesis import given, settings, strategies as st

from fromscratch.testing import check_close
from fromscratch.lessons.value import Value, as_value, backward, draw_graph, graph_columns, topo_order

RTOL, ATOL = 1e-12, 1e-12
SETTINGS = settings(max_examples=40, deadline=None)


def leaf(x): return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def run_both(f, *xs, rtol=RTOL, atol=ATOL):
    "Run `f` on Values and on float64 torch leaves; check the result and every input's gradient agree."
    vs = [Value(x) for x in xs]
    out = f(*vs); out.backward()
    ts = [leaf(x) for x in xs]
    t = f(*ts); t.backward()
    grads_t = [0.0 if u.grad is None else u.grad.item() for u in ts]
    check_close([out.data, *(v.grad for v in vs)], [t.item(), *grads_t], rtol=rtol, atol=atol, name='[result, *grads]')
    return vs


def floats(lo, hi): return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def away_from_zero(lo, hi):
    "Floats in [lo, hi] or [-hi, -lo]: safe to divide by and to raise to negative powers."
    return st.builds(lambda m, s: m * s, floats(lo, hi), st.sampled_from([-1.0, 1.0]))


# ---- one op at a time ------------------------------------------------------------------------------

BINARY = {'+': operator.add, '-': operator.sub, '*': operator.mul, '/': operator.truediv}


@pytest.mark.parametrize('op', list(BINARY))
@SETTINGS
@given(x=floats(-50, 50), y=away_from_zero(1e-3, 50))
def test_binary_op_value_value(op, x, y):
    run_both(BINARY[op], x, y)


@pytest.mark.parametrize('op', list(BINARY))
@SETTINGS
@given(x=away_from_zero(1e-3, 50), c=away_from_zero(1e-3, 50))
def test_binary_op_with_a_python_number_on_either_side(op, x, c):
    f = BINARY[op]
    run_both(lambda v: f(v, c), x)
    run_both(lambda v: f(c, v), x)
    run_both(lambda v: f(int(c) or 1, v), x)   # ints work too


UNARY = {
    'neg': (operator.neg, floats(-50, 50)),
    'exp': (lambda v: v.exp(), floats(-30, 30)),
    'log': (lambda v: v.log(), floats(1e-6, 1e6)),
    'tanh': (lambda v: v.tanh(), floats(-5, 5)),
    'relu': (lambda v: v.relu(), floats(-50, 50)),
}


@pytest.mark.parametrize('name', list(UNARY))
@SETTINGS
@given(data=st.data())
def test_unary_op(name, data):
    f, values = UNARY[name]
    run_both(f, data.draw(values))


@SETTINGS
@given(x=away_from_zero(1e-2, 20), k=st.sampled_from([-3, -2, -1, 0, 1, 2, 3, 4, 2.0, -1.0]))
def test_pow_integer_exponent(x, k):
    run_both(lambda v: v ** k, x)


@SETTINGS
@given(x=floats(1e-2, 50), k=floats(-3, 3))
def test_pow_float_exponent(x, k):
    run_both(lambda v: v ** k, x)


@pytest.mark.parametrize('x', [-2.0, -0.0, 0.0, 1e-300, 3.0])
def test_relu_at_and_around_zero_like_torch(x):
    vs = run_both(lambda v: v.relu(), x)
    assert vs[0].grad == (1.0 if x > 0 else 0.0)


def test_ops_record_their_name_and_inputs():
    x, y = Value(2.0), Value(3.0)
    for out, op, children in [(x + y, '+', (x, y)), (x * y, '*', (x, y)), (x ** 2, '**2', (x,)),
                              (x ** -1, '**-1', (x,)), (x.exp(), 'exp', (x,)), (x.log(), 'log', (x,)),
                              (x.tanh(), 'tanh', (x,)), (x.relu(), 'relu', (x,))]:
        assert out.op == op and type(out.children) is tuple
        assert len(out.children) == len(children) and all(a is b for a, b in zip(out.children, children))


def test_children_are_in_argument_order():
    x, y = Value(2.0), Value(3.0)
    for _ in range(20):                           # a set would reorder some of these
        xy, yx = x * y, y * x
        assert xy.children[0] is x and xy.children[1] is y
        assert yx.children[0] is y and yx.children[1] is x
        s = y + x
        assert s.children[0] is y and s.children[1] is x
    c = x + 5
    assert c.children[0] is x and c.children[1].data == 5.0
    r = 5 + x                                     # __radd__: x + 5 under the hood
    assert r.children[0] is x and r.children[1].data == 5.0
    order = topo_order(Value(1.0, label='a') * Value(2.0, label='b') + Value(3.0, label='c'))
    assert [n.label or n.op for n in order] == ['a', 'b', '*', 'c', '+']


def test_python_numbers_become_leaves():
    x = Value(2.0)
    assert as_value(x) is x
    v = as_value(3)
    assert isinstance(v, Value) and v.data == 3.0 and v.children == () and v.grad == 0.0


def test_pow_rejects_a_value_exponent():
    with pytest.raises(TypeError, match='only supports int or float exponents'):
        Value(2.0) ** Value(3.0)


def test_math_errors_are_not_swallowed():
    with pytest.raises(ValueError): Value(-1.0).log()
    with pytest.raises(OverflowError): Value(1000.0).exp()


def test_repr():
    assert repr(Value(0.5)) == 'Value(data=0.5, grad=0)'


# ---- backward on whole graphs --------------------------------------------------------------------

def test_backward_seeds_one_and_is_also_a_function():
    x = Value(3.0)
    y = x * 2
    backward(y)
    assert y.grad == 1.0 and x.grad == 2.0


def test_neuron():
    run_both(lambda x1, x2, w1, w2, b: (w1 * x1 + w2 * x2 + b).tanh(), 1.5, -0.5, 0.8, -1.2, 0.1)


def longer(a, b, c):
    d = a * b + b ** 3
    e = (a - c).relu() * d.tanh()
    f = (a / b).exp() - (c * c + 1).log() + 2 / c
    return (e * f + d) / (1 - b)


@SETTINGS
@given(a=floats(-2, 2), b=floats(-2, 0.5).filter(lambda b: abs(b) > 0.05), c=away_from_zero(0.05, 2))
def test_longer_expression(a, b, c):
    run_both(longer, a, b, c, rtol=1e-10, atol=1e-10)


# Random expression trees over a few leaves. Every op is wrapped so that its input stays in range
# (log of something positive, division by something away from zero, exp of something bounded).
UNARY_SAFE = [
    lambda a: a.tanh(), lambda a: a.relu(), lambda a: (a.tanh()).exp(), lambda a: (a * a + 1).log(),
    lambda a: -a, lambda a: a ** 2, lambda a: 3 - a, lambda a: a * 0.5,
]
BINARY_SAFE = [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / (b * b + 1),
    lambda a, b: (a.tanh() + 2) ** 1.5 * b,
]


def random_expression(rng, n_leaves, depth):
    "A function of `n_leaves` inputs built from random safe ops, the same for Values and torch tensors."
    if depth == 0 or rng.random() < 0.2:
        i = rng.randrange(n_leaves)
        return lambda *xs: xs[i]
    if rng.random() < 0.4:
        op, a = rng.choice(UNARY_SAFE), random_expression(rng, n_leaves, depth - 1)
        return lambda *xs: op(a(*xs))
    op = rng.choice(BINARY_SAFE)
    a, b = random_expression(rng, n_leaves, depth - 1), random_expression(rng, n_leaves, depth - 1)
    return lambda *xs: op(a(*xs), b(*xs))


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), xs=st.lists(floats(-2, 2), min_size=1, max_size=4))
def test_random_expression_trees(seed, xs):
    f = random_expression(random.Random(seed), len(xs), depth=5)
    out = f(*[Value(1.0) for _ in xs])
    if not out.children: return                   # a bare leaf: nothing to differentiate
    # sums of many terms in a different order: allow cancellation a little room, relative to the size
    vs = [Value(x) for x in xs]
    out = f(*vs); out.backward()
    ts = [leaf(x) for x in xs]
    t = f(*ts); t.backward()
    ours = [out.data] + [v.grad for v in vs]
    theirs = [t.item()] + [0.0 if u.grad is None else u.grad.item() for u in ts]
    scale = max(1.0, *(abs(g) for g in theirs))
    check_close(ours, theirs, rtol=RTOL, atol=1e-12 * scale, name='[result, *grads]')


def test_random_expression_trees_shared_subexpressions():
    # the same Python object used in several places: intermediate nodes with many uses
    rng = random.Random(0)
    for trial in range(30):
        def f(x, y, z, trial=trial):
            pick = random.Random(trial)           # the same choices for both engines
            pool = [x, y, z]
            for _ in range(12):
                op = pick.choice(BINARY_SAFE)
                pool.append(op(pick.choice(pool), pick.choice(pool)))
            return sum(pool[3:], pool[-1] * 0)
        run_both(f, *(rng.uniform(-1.5, 1.5) for _ in range(3)))


def test_leaf_used_twice():
    run_both(lambda x: x * x, 3.0)
    run_both(lambda x: x + x, 3.0)
    run_both(lambda x: x * x * x, -1.3)
    run_both(lambda x: x - x, 2.0)
    run_both(lambda x: x / x, 2.0)
    vs = run_both(lambda x, y: x * y + x * 3 + x.tanh() * x, 0.7, -1.1)
    assert vs[0].grad != 0


def test_intermediate_used_twice():
    vs = run_both(lambda x, y: (lambda a: a * a)(x + y), 3.0, -1.0)
    assert [v.grad for v in vs] == [4.0, 4.0]    # 2 (x + y), not (x + y) as `=` would give
    vs = run_both(lambda x: x * 3 + x, 3.0)
    assert vs[0].grad == 4.0
    run_both(lambda x, y: (lambda a: a.exp() * a + a.relu() - a ** 2)(x * y), 0.4, 1.2)


def test_diamond():
    def diamond(x):
        a = x * 2
        return a.tanh() * a.exp()
    run_both(diamond, 0.3)


def test_stacked_diamonds_are_not_exponential():
    # 200 diamonds in a row: 2**200 paths from the root to x, but each node is visited once
    def stacked(x):
        for _ in range(200): x = (x * 0.5).tanh() + x * 0.5
        return x
    run_both(stacked, 0.8)
    x = Value(0.8)
    assert len(topo_order(stacked(x))) < 6 * 200 + 2


def test_topo_order_visits_each_node_once_inputs_first():
    rng = random.Random(1)
    leaves = [Value(rng.uniform(-1, 1)) for _ in range(4)]
    pool = list(leaves)
    for _ in range(300): pool.append(rng.choice(BINARY_SAFE)(rng.choice(pool), rng.choice(pool)))
    root = sum(pool[-20:], pool[0] * 0)
    order = topo_order(root)
    position = {id(n): i for i, n in enumerate(order)}
    assert len(position) == len(order)                            # once each
    assert order[-1] is root
    for n in order:
        assert all(position[id(c)] < position[id(n)] for c in n.children)
    assert [id(n) for n in topo_order(root)] == [id(n) for n in order]  # deterministic


class ValueWithEquality(Value):
    "A Value that compares and hashes by its data, the way a numpy/torch user might expect `==` to work."
    def __eq__(self, other): return isinstance(other, Value) and self.data == other.data
    def __hash__(self): return hash(self.data)


def test_nodes_are_keyed_by_identity():
    x, y = ValueWithEquality(2.0), ValueWithEquality(2.0)   # equal, but two different nodes
    out = x * y
    assert len(topo_order(out)) == 3
    out.backward()
    assert (x.grad, y.grad) == (2.0, 2.0)


def test_backward_twice_accumulates_like_torch():
    f = lambda x, w: (x * w + x * x).tanh() * w
    vs = [Value(0.7), Value(-1.3)]
    out = f(*vs)
    ts = [leaf(0.7), leaf(-1.3)]
    t = f(*ts)
    for _ in range(3):
        out.backward(); t.backward(retain_graph=True)
        check_close([v.grad for v in vs], [u.grad.item() for u in ts], rtol=RTOL, atol=ATOL, name='grads')
    assert out.grad == 1.0                        # the root's own gradient is this call's, not 3


def test_backward_on_a_leaf_accumulates_like_torch():
    x, xt = Value(2.0), leaf(2.0)
    for _ in range(2): x.backward(); xt.backward()
    assert x.grad == xt.grad.item() == 2.0


def test_separate_graphs_accumulate_into_shared_leaves():
    x, xt = Value(1.5), leaf(1.5)
    (x * x).backward(); (x.exp()).backward()
    (xt * xt).backward(); (xt.exp()).backward()
    check_close(x.grad, xt.grad, rtol=RTOL, atol=ATOL)


# ---- long chains -----------------------------------------------------------------------------------

def chain(n):
    x = Value(1.0)
    y = x
    for _ in range(n): y = y * 1.00001
    return x, y


def test_100k_chain_has_no_recursion_error():
    x, y = chain(100_000)
    y.backward()
    check_close(x.grad, 1.00001 ** 100_000, rtol=1e-9)
    assert len(topo_order(y)) == 200_001


class CountedChildren(tuple):
    "A node's `children` that count how often a graph walk reads them (iterated or reversed)."
    def __new__(cls, children, counts): self = super().__new__(cls, children); self.counts = counts; return self
    def __iter__(self): self.counts['children read'] += 1; return super().__iter__()
    def __reversed__(self): self.counts['children read'] += 1; return iter(self[::-1])   # a slice is a plain tuple


def backward_work(root):
    "Run `root.backward()` with every node instrumented; return how often children were read and local backwards ran."
    counts = {'children read': 0, 'local backwards': 0}
    def counted(f):
        def run(): counts['local backwards'] += 1; f()
        return run
    nodes = topo_order(root)
    for node in nodes: node.children, node._backward = CountedChildren(node.children, counts), counted(node._backward)
    root.backward()
    return len(nodes), counts


@pytest.mark.parametrize('n', [10_000, 100_000])
def test_backward_work_is_linear_in_the_chain(n):
    # no clock: the work is counted. Each node's inputs are read once and its local backward runs once,
    # so ten times the chain is exactly ten times the work (a quadratic walk would read children n^2 times).
    _, y = chain(n)
    nodes, counts = backward_work(y)
    assert nodes == 2 * n + 1                    # n products and the n constants they multiply by, plus x
    assert counts == {'children read': nodes, 'local backwards': nodes}


def test_backward_work_is_linear_in_nodes_not_in_paths():
    # 16 stacked diamonds: 2**16 paths lead back to x, yet every node is still visited once
    x = y = Value(0.3)
    for _ in range(16): y = (y * 0.5).tanh() + y * 0.5
    nodes, counts = backward_work(y)
    assert counts == {'children read': nodes, 'local backwards': nodes}
    xt = yt = leaf(0.3)
    for _ in range(16): yt = (yt * 0.5).tanh() + yt * 0.5
    yt.backward()
    check_close(x.grad, xt.grad.item(), rtol=1e-10)


# ---- the drawing -----------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def agg():
    import matplotlib
    matplotlib.use('Agg')
    return matplotlib


def boxes(fig):
    return [t for t in fig.axes[0].texts if t.get_text()]


def arrows(fig):
    from matplotlib.text import Annotation
    return [t for t in fig.axes[0].texts if isinstance(t, Annotation)]


def test_draw_graph_one_box_per_node_one_arrow_per_input(agg):
    from matplotlib.figure import Figure
    x1, x2 = Value(1.5, label='x1'), Value(-0.5, label='x2')
    w1, w2, b = Value(0.8, label='w1'), Value(-1.2, label='w2'), Value(0.1, label='b')
    out = (w1 * x1 + w2 * x2 + b).tanh()
    out.backward()
    fig = draw_graph(out)
    assert isinstance(fig, Figure)
    nodes = topo_order(out)
    assert len(boxes(fig)) == len(nodes) == 10
    assert len(arrows(fig)) == sum(len(n.children) for n in nodes) == 9
    texts = [t.get_text() for t in boxes(fig)]
    assert any(t.startswith('tanh\n') and 'grad 1' in t for t in texts)
    assert 'w1\ndata 0.8\ngrad 0.1284' in texts
    fig.savefig(__import__('io').BytesIO(), format='png')   # it renders


def test_draw_graph_repeated_input_and_layout(agg):
    x = Value(3.0, label='x')
    sq = x * x
    out = sq + x
    out.backward()
    fig = draw_graph(out)
    assert len(boxes(fig)) == 3 and len(arrows(fig)) == 4
    cols = graph_columns(out)
    assert [[n.label or n.op for n in c] for c in cols] == [['x'], ['*'], ['+']]
    fig.savefig(__import__('io').BytesIO(), format='png')


def test_draw_graph_leaves_pyplot_alone(agg):
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    draw_graph(Value(1.0) + 2)
    assert plt.get_fignums() == before
