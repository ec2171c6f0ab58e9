"""The picture of a backward pass (06): the replayed walk is the engine's own, on random graphs, and the
graph it draws is torch's graph for the same program."""
import random

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.lessons.engine_trace import backward_steps, graph_of

OPS = [lambda x, y: x * y, lambda x, y: x + y, lambda x, y: x - y, lambda x, _: x.exp(),
       lambda x, _: x.tanh(), lambda x, _: x.sigmoid()]


def program(lib, seed, size=8):
    "A random graph of `size` operations on two leaves, the same in fromscratch and torch, and its names."
    rng = random.Random(seed)
    a = lib.tensor([0.5, -0.25], requires_grad=True, dtype=lib.float64)
    b = lib.tensor([0.75, 0.1], requires_grad=True, dtype=lib.float64)
    names, values = {a: 'a', b: 'b'}, [a, b]
    for i in range(size):
        out = rng.choice(OPS)(rng.choice(values), rng.choice(values[-2:]))
        names[out] = f't{i}'
        values.append(out)
    loss = values[-1].sum()
    names[loss] = 'loss'
    return loss, names


def torch_parents(root):
    "How many edges point at each of torch's nodes, by the name of the node and a number for duplicates."
    counts, seen, stack = {}, set(), [root]
    while stack:
        node = stack.pop()
        if node in seen: continue
        seen.add(node)
        for child, _ in node.next_functions:
            if child is None: continue
            counts[child] = counts.get(child, 0) + 1
            stack.append(child)
    return sorted((type(n).__name__, k) for n, k in counts.items())


def our_parents(root):
    children = graph_of(root)
    counts = {}
    for n, cs in children.items():
        for c in cs: counts[c] = counts.get(c, 0) + 1
    return sorted((n.name(), k) for n, k in counts.items())


@pytest.mark.parametrize('seed', range(20))
def test_the_replay_is_the_engines_walk_on_a_random_graph(seed):
    loss, names = program(fs, seed)
    steps, edges = backward_steps(loss, names)   # raises if the engine ran the nodes in another order
    ran = [s.running for s in steps[1:]]
    assert len(ran) == len(set(ran)) == len(edges)              # each node runs once
    position = {n: i for i, n in enumerate(ran)}
    for n, cs in edges.items():
        for c in cs: assert position[n] < position[c]           # after every node that feeds it
    assert all(k == 0 for k in steps[-1].counts.values()) and steps[-1].ready == []


@pytest.mark.parametrize('seed', range(20))
def test_the_graph_it_counts_is_torchs(seed):
    ours, _ = program(fs, seed)
    theirs, _ = program(torch, seed)
    assert our_parents(ours.grad_fn) == torch_parents(theirs.grad_fn)


def test_the_replay_notices_a_walk_the_engine_did_not_take(monkeypatch):
    # a replay that pushes a node's children in the other order pops them in the other order
    import fromscratch.lessons.engine_trace as trace
    real = trace.graph_of
    monkeypatch.setattr(trace, 'graph_of', lambda root: {n: cs[::-1] for n, cs in real(root).items()})
    a = fs.tensor([1.0], requires_grad=True)
    b, c = a * 2, a.exp()
    p = b * c
    loss = p.sum()
    with pytest.raises(AssertionError, match='the engine ran'):
        trace.backward_steps(loss, {a: 'a', b: 'b', c: 'c', p: 'p', loss: 'loss'})


def test_every_tensor_of_the_graph_must_be_named():
    a = fs.tensor([1.0], requires_grad=True)
    loss = (a.exp() * 2).sum()
    with pytest.raises(ValueError, match='name every tensor'):
        backward_steps(loss, {a: 'a', loss: 'loss'})
