"""tools/eager_baseline.py: this tree's eager training step against an earlier commit's, side by side, each
engine in its own process (the measure of "the eager step is no worse than it was" that torch's speed and
the processor do not move)."""
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tool():
    spec = importlib.util.spec_from_file_location('eager_baseline', ROOT / 'tools' / 'eager_baseline.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_git_checkout():
    return shutil.which('git') is not None and subprocess.run(
        ['git', '-C', str(ROOT), 'rev-parse', 'HEAD'], capture_output=True).returncode == 0


needs_git = pytest.mark.skipif(not in_git_checkout(), reason='not a git checkout')


@needs_git
def test_the_same_engine_against_itself_gives_ratios_about_one_for_each_batch():
    ratios, kernels = tool().compare('HEAD', batches=(8, 32), rounds=5, round_time=0.02)
    assert set(ratios) == {8, 32} and set(kernels) == {'here', 'HEAD'}
    for median, low, high in ratios.values():
        assert 0 < low <= median <= high
        assert 0.33 < median < 3  # the same code both sides: only the noise of a shared machine


@needs_git
def test_an_unknown_commit_is_refused_with_gits_reason():
    with pytest.raises(SystemExit) as e:
        tool().main(['no-such-commit-anywhere'])
    assert "git could not read 'no-such-commit-anywhere'" in str(e.value)
