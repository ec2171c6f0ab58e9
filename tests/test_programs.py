"""PyTorch programs run by changing one import line.

Each file in tests/programs/ is a small program in the style of a PyTorch tutorial, written for torch: it
starts with `import torch`, uses only what that one import gives (`torch.nn`, `torch.optim`,
`torch.utils.data`, `torch.autograd`, ...), draws its random numbers from numpy or Python's `random` with a
fixed seed (so both libraries see the same numbers), and leaves what it computed in a dictionary `RESULT`.
The test runs every program twice in fresh processes, once as written and once with that line changed to
`import fromscratch as torch`, and compares the two results: numbers to a tolerance, everything else exactly.
"""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / 'programs'
IMPORT, OURS = 'import torch\n', 'import fromscratch as torch\n'
# float32 programs agree to about 1e-6 per operation; after hundreds of steps, 1e-4 relative
FLOAT64 = {'poly_autograd', 'custom_function', 'optim_loop', 'maml_step', 'foundations_by_hand', 'jacobians_of_parameters',
           'func_jacobians_hessians', 'neural_tangent_kernels', 'forward_mode_ad', 'double_backward_function',
           'gradient_hooks', 'extending_autograd', 'backprop_ninja', 'backprop_ninja_fast', 'micrograd_checks',
           'per_sample_grads', 'per_sample_grads_mlp', 'poly_regression', 'autograd_tour_functional', 'extending_autograd_ctx',
           'forward_mode_custom_function'}
RUN = """import json, sys
source = sys.stdin.read()
namespace = {'__name__': '__main__', '__file__': sys.argv[1]}
exec(compile(source, sys.argv[1], 'exec'), namespace)
print(json.dumps(namespace['RESULT']))
"""


def program_names(): return sorted(p.stem for p in PROGRAMS.glob('*.py'))


def run_program(name, ours):
    "The RESULT of program `name`, run with torch or (`ours`) with fromscratch in its place."
    path = PROGRAMS / f'{name}.py'
    source = path.read_text()
    assert source.count(IMPORT) == 1, f'{name}: one `import torch` line, please'
    if ours: source = source.replace(IMPORT, OURS)
    run = subprocess.run([sys.executable, '-c', RUN, str(path)], input=source, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{name} with {'fromscratch' if ours else 'torch'} failed:\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def assert_same(ours, theirs, rtol, where='RESULT'):
    "Numbers equal to `rtol` (and a small absolute tolerance), lists and dicts element by element, the rest exactly."
    if isinstance(theirs, bool) or isinstance(theirs, str) or theirs is None:
        assert ours == theirs, f'{where}: {ours!r} != {theirs!r}'
    elif isinstance(theirs, (int, float)):
        assert isinstance(ours, (int, float)) and not isinstance(ours, bool), f'{where}: {ours!r} is not a number'
        assert math.isclose(ours, theirs, rel_tol=rtol, abs_tol=1e-7), f'{where}: {ours!r} != {theirs!r}'
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), f'{where}: {ours!r} != {theirs!r}'
        for i, (a, b) in enumerate(zip(ours, theirs)): assert_same(a, b, rtol, f'{where}[{i}]')
    else:
        assert isinstance(ours, dict) and list(ours) == list(theirs), f'{where}: keys {list(ours)} != {list(theirs)}'
        for k in theirs: assert_same(ours[k], theirs[k], rtol, f'{where}[{k!r}]')


@pytest.mark.parametrize('name', program_names())
def test_program_runs_unchanged_and_agrees_with_torch(name):
    theirs, ours = run_program(name, ours=False), run_program(name, ours=True)
    assert_same(ours, theirs, 1e-9 if name in FLOAT64 else 1e-4)


def test_the_suite_is_there():
    assert len(program_names()) >= 10


def test_assert_same_catches_differences():
    assert_same({'a': [1.0, 2.0], 'b': 'x'}, {'a': [1.0, 2.0 + 1e-8], 'b': 'x'}, 1e-6)
    for ours, theirs in (({'a': 1.0}, {'a': 1.1}), ({'a': [1.0]}, {'a': [1.0, 2.0]}), ({'a': 'x'}, {'a': 'y'}),
                         ({'a': True}, {'a': False}), ({'b': 1.0}, {'a': 1.0}), ({'a': None}, {'a': 1.0})):
        with pytest.raises(AssertionError): assert_same(ours, theirs, 1e-6)
