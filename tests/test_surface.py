"""The public surface stays what it was while code moves between modules.

tests/public_surface.json holds every module's public names with their signatures, and `dir()` of a Tensor,
a `grad_fn` and an `AccumulateGrad` node (tools/surface.py writes it). A module may gain names (a new
module gains all of its own); no name a program could use may go, move out of its module or change how it
is called. After a deliberate change to the API, write the file again: `python tools/surface.py >
tests/public_surface.json`.
"""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
import surface  # noqa: E402

STORED = json.loads((ROOT / 'tests' / 'public_surface.json').read_text())


@pytest.fixture(scope='module')
def now():
    return surface.surface()


@pytest.mark.parametrize('module', sorted(STORED['modules']))
def test_every_public_name_is_still_there_and_called_the_same_way(now, module):
    assert module in now['modules'], f'{module} can no longer be imported by that name'
    before, after = STORED['modules'][module], now['modules'][module]
    gone = sorted(set(before) - set(after))
    assert gone == [], f'{module} lost public names: {gone}'
    changed = {n: (before[n], after[n]) for n in before if before[n] != after[n]}
    assert changed == {}, f'{module}: these are called differently now (before, after): {changed}'


@pytest.mark.parametrize('thing', ['Tensor', 'grad_fn', 'AccumulateGrad'])
def test_dir_of_a_tensor_and_of_its_graph_nodes_is_unchanged(now, thing):
    before, after = set(STORED[thing]), set(now[thing])
    assert (sorted(before - after), sorted(after - before)) == ([], []), f'dir() of a {thing}: (gone, new)'


def test_the_surface_check_sees_a_lost_name(now, monkeypatch):
    import fromscratch.ops as ops
    monkeypatch.delattr(ops, 'exp')
    monkeypatch.setattr(ops, '__all__', [n for n in ops.__all__ if n != 'exp'])
    assert 'exp' not in surface.surface()['modules']['fromscratch.ops']
    assert 'exp' in STORED['modules']['fromscratch.ops']
