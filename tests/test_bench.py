"""Tests of fromscratch.bench: the command runs and writes the results, the contenders do the same work as
torch (so the numpy floor and the ratios are honest), and a long training run keeps a flat memory peak.

No test here asserts a speed: timings belong in `python -m fromscratch.bench`, not in tests that a busy
machine would fail.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fromscratch
from fromscratch import bench
from fromscratch.bench import (CONTENDERS, check_targets, format_report, graph_alive, is_flat, library_step,
                               make_step, memory_profile, mlp_grads_numpy, mlp_problem, numpy_step, run_worker,
                               worker_env, Worker)
from fromscratch.testing import check_close

NAMES = ('0.weight', '0.bias', '2.weight', '2.bias')
ROOT = Path(__file__).resolve().parents[1]


# --- the command ---------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def quick_run(tmp_path_factory):
    "One quick run of the command: its JSON results and what it printed."
    path = tmp_path_factory.mktemp('bench') / 'results.json'
    run = subprocess.run([sys.executable, '-m', 'fromscratch.bench', '--quick', '--rounds', '1', '--json', str(path)],
                         capture_output=True, text=True, timeout=300)      # --quick leaves the notebook suite out
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(p.name for p in path.parent.iterdir()) == ['results.json']        # written atomically
    return json.loads(path.read_text()), run.stdout


def test_cli_writes_json_with_every_part(quick_run):
    results, _ = quick_run
    assert {'quick', 'system', 'matmul', 'training_step', 'engine_overhead', 'memory', 'notebooks', 'targets',
            'load'} <= set(results)
    assert results['quick'] is True and results['notebooks'] is None
    assert results['notebooks_skipped'] == '--quick leaves it out: it takes minutes'
    assert results['seconds'] > 0
    assert {'python', 'numpy', 'blas', 'torch', 'cpu', 'cores', 'threads'} <= set(results['system'])
    assert results['system']['threads'] == 1


def test_cli_matmul_ladder(quick_run):
    results, _ = quick_run
    assert [b['shape'] for b in results['matmul']] == [[5, 784, 10], [64, 784, 10]]
    for block in results['matmul']:
        names = [r['name'] for r in block['rows']]
        assert names == ['matmul_loops', 'matmul_elementwise', 'matmul_broadcast', 'matmul_einsum', 'numpy @', 'torch @']
        assert all(r['seconds'] > 0 for r in block['rows']) and block['rows'][0]['speedup'] == 1.0


def test_cli_training_step(quick_run):
    results, _ = quick_run
    assert [r['batch'] for r in results['training_step']] == [64, 1024]
    for r in results['training_step']:
        for key in ('seconds', 'cpu', 'first_loss', 'steps_per_round', 'rounds'):
            assert set(r[key]) == set(CONTENDERS), key
        assert all(v > 0 for v in r['seconds'].values()) and all(len(v) == 1 for v in r['rounds'].values())
        losses = list(r['first_loss'].values())   # the three contenders did the same first step
        check_close(losses, [losses[0]] * 3, rtol=1e-5, name='first losses')


def test_cli_overhead_memory_targets_and_table(quick_run):
    results, out = quick_run
    c = results['engine_overhead']
    assert c['nodes'] > 0 and all(c[e][k] > 0 for e in ('ours', 'torch') for k in ('forward', 'backward'))
    m = results['memory']
    assert m['steps'] == 300 and len(m['peaks']) == m['steps'] // m['window'] and m['flat'] is True
    assert m['graph_alive'] == 0
    assert len(results['targets']) == 5 and all(set(t) == {'what', 'value', 'limit', 'passed'} for t in results['targets'])
    for heading in ('1. matmul ladder, 5x784 @ 784x10', '2. one training step', '3. engine overhead per node',
                    '4. memory', '5. notebook suite: skipped (--quick leaves it out: it takes minutes)', 'targets',
                    'the benchmark took'):
        assert heading in out, heading
    assert 'PASS' in out or 'MISS' in out


def test_cli_help_lists_options_and_hides_worker():
    run = subprocess.run([sys.executable, '-m', 'fromscratch.bench', '--help'], capture_output=True, text=True)
    assert run.returncode == 0
    for option in ('--quick', '--json', '--rounds', '--skip-notebooks', '--threads'): assert option in run.stdout
    assert '--worker' not in run.stdout and '--spec' not in run.stdout


def run_bench(*args, setup=''):
    "`python -m fromscratch.bench *args` in a new process, after the Python code `setup`."
    code = f"import sys\n{setup}\nfrom fromscratch.bench import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, timeout=120)


def one_error_line(r):
    "The one error line of a failed run; fails on a traceback, more lines, or any sign that work had started."
    assert 'Traceback' not in r.stderr and 'matmul ladder ...' not in r.stderr, r.stderr
    lines = [l for l in r.stderr.splitlines() if not l.startswith(('usage:', ' '))]
    assert len(lines) == 1 and lines[0].startswith('python -m fromscratch.bench: error: '), r.stderr
    return lines[0][len('python -m fromscratch.bench: error: '):]


@pytest.mark.parametrize('args, message', [
    (['--rounds', '0'], 'argument --rounds: must be greater than 0, got 0'),
    (['--rounds', '-3'], 'argument --rounds: must be greater than 0, got -3'),
    (['--rounds', 'many'], "argument --rounds: expected a whole number, got 'many'"),
    (['--threads', '-1'], 'argument --threads: must be at least 0, got -1'),
    (['--threads', '1.5'], "argument --threads: expected a whole number, got '1.5'"),
    (['--json', 'no/such/folder/r.json'], "argument --json: the folder 'no/such/folder' does not exist"),
    (['--json', '/proc/fromscratch-test/r.json'], "argument --json: the folder '/proc/fromscratch-test' does not exist"),
    (['--json', '/proc/r.json'], "argument --json: cannot create files in '/proc' ("),
    (['--json', 'README.md/r.json'], "argument --json: 'README.md' is a file, not a folder"),
    (['--json', 'nbs'], 'argument --json: nbs is a folder: give a file name'),
    (['--quik'], 'unrecognized arguments: --quik'),
    (['--thread', '2'], 'unrecognized arguments: --thread 2'),                  # no abbreviations
    (['--worker', 'step', '--spec', '{oops'], 'argument --spec: not JSON ('),
])
def test_cli_bad_arguments_exit_2_before_any_work(args, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(bench, 'run_benchmarks', lambda *a, **k: pytest.fail('the benchmark started'))
    with pytest.raises(SystemExit) as e: bench.main(args)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == '' and f'python -m fromscratch.bench: error: {message}' in err
    assert len([l for l in err.splitlines() if not l.startswith(('usage:', ' '))]) == 1


@pytest.mark.parametrize('args, message', [
    (['--rounds', '-3'], 'argument --rounds: must be greater than 0, got -3'),
    (['--threads', '-1'], 'argument --threads: must be at least 0, got -1'),
    (['--json', '/proc/fromscratch-test/r.json'], "argument --json: the folder '/proc/fromscratch-test' does not exist"),
])
def test_cli_bad_arguments_in_a_real_process(args, message):
    r = run_bench(*args)
    assert r.returncode == 2 and r.stdout == '' and one_error_line(r) == message


def test_cli_without_torch_says_what_to_install():
    r = run_bench('--quick', setup="sys.modules['torch'] = None      # as if torch were not installed")
    assert r.returncode == 1 and r.stdout == ''
    assert one_error_line(r) == ('the benchmark measures our engine against torch, which is not installed: '
                                 'pip install torch (the CPU build is enough)')


def test_cli_dead_worker_is_one_line(capsys, monkeypatch, tmp_path):
    real = bench.run_worker
    monkeypatch.setattr(bench, 'run_worker', lambda kind, spec, threads=1: real('memory', dict(window=5, threads=1)))
    assert bench.main(['--quick', '--json', str(tmp_path / 'r.json')]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ['matmul ladder ...', "python -m fromscratch.bench: error: the memory worker died (exit code 1): KeyError: 'steps'"]
    assert not (tmp_path / 'r.json').exists()


def test_cli_results_that_cannot_be_written_after_the_run(capsys, monkeypatch, tmp_path):
    folder = tmp_path / 'out'; folder.mkdir()
    def run_then_remove_the_folder(*args, **kwargs):
        shutil.rmtree(folder); return fake_results()
    monkeypatch.setattr(bench, 'run_benchmarks', run_then_remove_the_folder)
    assert bench.main(['--json', str(folder / 'r.json')]) == 1
    err = capsys.readouterr().err
    assert err.startswith('python -m fromscratch.bench: error: [Errno 2] No such file or directory') and err.count('\n') == 1


def test_cli_interrupted(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs): raise KeyboardInterrupt
    monkeypatch.setattr(bench, 'run_benchmarks', interrupted)
    assert bench.main(['--json', str(tmp_path / 'r.json')]) == 130
    assert capsys.readouterr().err == 'python -m fromscratch.bench: interrupted\n'


@pytest.mark.parametrize('args, notebooks', [([], None), (['--quick'], None), (['--skip-notebooks'], False),
                                             (['--quick', '--skip-notebooks'], False)])
def test_cli_times_the_notebooks_only_in_the_full_run(args, notebooks, monkeypatch, tmp_path):
    seen = {}
    def record(quick, rounds, threads, notebooks, log):
        seen.update(quick=quick, notebooks=notebooks); return fake_results()
    monkeypatch.setattr(bench, 'run_benchmarks', record)
    assert bench.main([*args, '--json', str(tmp_path / 'r.json')]) == 0
    assert seen == {'quick': '--quick' in args, 'notebooks': notebooks}
    assert json.loads((tmp_path / 'r.json').read_text())['notebooks'] == fake_results()['notebooks']


def test_skip_reasons():
    assert bench._skip_reason(quick=True, notebooks=False) == '--quick leaves it out: it takes minutes'
    assert bench._skip_reason(quick=False, notebooks=False) == '--skip-notebooks'
    assert bench._skip_reason(quick=False, notebooks=True).startswith('no nbs/ folder')
    text = format_report({**fake_results(), 'notebooks': None, 'notebooks_skipped': '--skip-notebooks'})
    assert '5. notebook suite: skipped (--skip-notebooks)' in text


def test_round_ratios_give_the_spread():
    result = {'rounds': {'ours': [{'seconds': 2.0}, {'seconds': 3.0}], 'numpy': [{'seconds': 1.0}, {'seconds': 1.0}]}}
    assert bench.round_ratios(result, 'numpy') == [2.0, 3.0]


def test_importing_bench_does_not_import_torch():
    code = "import sys, fromscratch.bench; print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    run = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ['False', 'False']


# --- workers and their environment ------------------------------------------------------------------------------

def test_worker_env_pins_threads_and_drops_openblas_overrides(monkeypatch):
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'Haswell')
    monkeypatch.setenv('OPENBLAS_L2_SIZE', '1048576')
    monkeypatch.setenv('OMP_NUM_THREADS', '7')
    env = worker_env(1)
    assert all(env[k] == '1' for k in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'))
    assert 'OPENBLAS_CORETYPE' not in env and 'OPENBLAS_L2_SIZE' not in env
    env = worker_env(0)                           # the libraries' defaults: thread variables left as they are
    assert env['OMP_NUM_THREADS'] == '7' and 'OPENBLAS_CORETYPE' not in env


def test_worker_reports_blas_and_pins_threads():
    result = run_worker('matmul', dict(shapes=[(2, 3, 4)], timing=dict(repeat=1, loop_repeat=1, min_time=1e-5), threads=1))
    assert [b['shape'] for b in result['ladders']] == [[2, 3, 4]] and len(result['ladders'][0]['rows']) == 6
    system = result['system']
    assert system['numpy'] == np.__version__ and system['blas']
    if 'blas_threads' in system: assert system['blas_threads'] == 1


def test_dead_worker_says_why():
    with pytest.raises(bench.WorkerDied, match="the memory worker died .*KeyError: 'steps'"):
        run_worker('memory', dict(window=5, threads=1))


def test_step_worker_serves_batch_sizes_in_turn():
    worker = Worker('step', dict(contender='numpy', threads=1))
    try:
        for batch in (8, 16):
            ready = worker.ask({'batch': batch})
            assert ready['estimate'] > 0 and np.isfinite(ready['loss'])
            timed = worker.ask({'steps': 3})
            assert set(timed) == {'seconds', 'cpu'} and timed['seconds'] > 0
        with pytest.raises(RuntimeError, match="unknown contender 'jax'"):
            bad = Worker('step', dict(contender='jax', threads=1))
            try: bad.ask({'batch': 4})
            finally: bad.close()
    finally: worker.close()


def test_unknown_contender():
    with pytest.raises(ValueError, match='choose one of ours, numpy, torch'): make_step('jax', 4)


# --- the contenders do the same work -----------------------------------------------------------------------------

def torch_loss_and_grads(x, y, params, dtype=torch.float32):
    ps = [torch.tensor(params[k], dtype=dtype, requires_grad=True) for k in NAMES]
    z = torch.relu(torch.tensor(x, dtype=dtype) @ ps[0].T + ps[1]) @ ps[2].T + ps[3]
    loss = torch.nn.functional.cross_entropy(z, torch.from_numpy(y))
    loss.backward()
    return loss, [p.grad for p in ps]


@pytest.mark.parametrize('batch', [1, 7, 64, 300])
@pytest.mark.parametrize('seed', [0, 1])
def test_numpy_floor_matches_torch_float64(batch, seed):
    x, y, params = mlp_problem(batch, seed)
    x, params = x.astype(np.float64), {k: v.astype(np.float64) for k, v in params.items()}
    loss, grads = mlp_grads_numpy(x, y, *(params[k] for k in NAMES))
    loss_t, grads_t = torch_loss_and_grads(x, y, params, torch.float64)
    check_close(loss, loss_t, rtol=1e-12, atol=1e-12, name='loss')
    for name, g, gt in zip(NAMES, grads, grads_t): check_close(g, gt, rtol=1e-10, atol=1e-12, name=name)


def test_numpy_floor_matches_torch_float32_with_big_logits():
    x, y, params = mlp_problem(64, 3)
    params = {k: v * (40 if k.endswith('weight') else 1) for k, v in params.items()}   # logits in the hundreds
    loss, grads = mlp_grads_numpy(x, y, *(params[k] for k in NAMES))
    loss_t, grads_t = torch_loss_and_grads(x, y, params)
    assert np.isfinite(loss) and all(np.isfinite(g).all() for g in grads)
    check_close(loss, loss_t, rtol=1e-4, name='loss')
    for name, g, gt in zip(NAMES, grads, grads_t): check_close(g, gt, rtol=1e-3, atol=1e-4, name=name)


def test_numpy_floor_relu_gradient_at_zero_is_zero():
    x, y, params = mlp_problem(8, 0)
    params = dict(params, **{'0.bias': np.zeros(50, np.float32)})
    x = np.zeros_like(x)                                  # every hidden pre-activation is exactly 0
    _, grads = mlp_grads_numpy(x, y, *(params[k] for k in NAMES))
    _, grads_t = torch_loss_and_grads(x, y, params)
    assert not grads[1].any()
    for name, g, gt in zip(NAMES, grads, grads_t): check_close(g, gt, rtol=1e-5, atol=1e-7, name=name)


def test_the_three_steps_train_alike():
    "Five SGD steps of each contender give the same losses, step for step."
    x, y, params = mlp_problem(32, 2)
    steps = {'numpy': numpy_step(x, y, params), 'torch': library_step(torch, x, y, params),
             'ours': library_step(fromscratch, x, y, params)}
    losses = {c: [step().item() for _ in range(5)] for c, step in steps.items()}
    assert losses['numpy'][-1] < losses['numpy'][0]
    check_close(losses['numpy'], losses['torch'], rtol=1e-5, name='numpy vs torch')
    check_close(losses['ours'], losses['torch'], rtol=1e-5, name='ours vs torch')


def test_numpy_step_leaves_the_given_weights_alone():
    x, y, params = mlp_problem(16)
    before = {k: v.copy() for k, v in params.items()}
    step = numpy_step(x, y, params)
    step(); step()
    assert all(np.array_equal(params[k], before[k]) for k in params)


def test_problem_is_fixed_by_its_seed():
    a, b, c = mlp_problem(64, 5), mlp_problem(64, 5), mlp_problem(64, 6)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and not np.array_equal(a[0], c[0])
    x, y, params = a
    assert x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1 and y.dtype == np.int64
    assert {k: v.shape for k, v in params.items()} == {'0.weight': (50, 784), '0.bias': (50,), '2.weight': (10, 50),
                                                       '2.bias': (10,)}
    assert np.abs(params['0.weight']).max() <= 1 / np.sqrt(784)


# --- memory ----------------------------------------------------------------------------------------------------

def test_memory_stays_flat_over_300_steps():
    # in a worker, as the command runs it: one BLAS thread (threads spinning on a busy machine are slow)
    m = run_worker('memory', dict(steps=300, window=50, threads=1))
    assert len(m['peaks']) == 6 and m['flat'] is True
    assert is_flat(m['peaks']), [p // 1024 for p in m['peaks']]
    assert m['graph_alive'] == 0


def test_graph_is_freed_after_each_step():
    assert graph_alive(make_step('ours', 64)) == 0


def test_flatness_check_catches_a_leak():
    step, kept = make_step('ours', 16), []
    def leaky():
        loss = step()
        kept.append(loss)                                 # keeps every step's graph alive
        return loss
    bench_step = bench.make_step
    try:
        bench.make_step = lambda contender, batch, seed=0, threads=1: leaky
        m = memory_profile(steps=60, window=20, batch=16)
    finally: bench.make_step = bench_step
    assert not is_flat(m['peaks'])
    assert graph_alive(leaky) > 0


def test_is_flat():
    assert is_flat([1_000_000, 1_000_000, 1_040_000])
    assert not is_flat([1_000_000, 1_000_000, 1_200_000])


# --- targets and report ------------------------------------------------------------------------------------------

def fake_results(ours=1.0):
    step = lambda batch: {'batch': batch, 'seconds': {'ours': ours, 'numpy': 1.0, 'torch': 1.0},
                          'cpu': {'ours': ours, 'numpy': 1.0, 'torch': 1.0}, 'rounds': {c: [1.0] for c in CONTENDERS}}
    return {'quick': False, 'system': dict(python='3', numpy='2', blas='x', cpu='cpu', cores=2, threads=1, openblas_env=''),
            'training_step': [step(64), step(1024)],
            'memory': {'steps': 100, 'window': 50, 'batch': 64, 'peaks': [1000, 1000], 'flat': True, 'graph_alive': 0},
            'notebooks': {'seconds': 301.0, 'summary': '12 passed'}}


def test_check_targets_pass_and_miss():
    checks = {what: ok for what, _, _, ok in check_targets(fake_results(0.85))}
    assert checks == {'step, batch 64: ours/torch (wall)': True, 'step, batch 1024: ours/torch (wall)': True,
                      'step, batch 64: ours/numpy (wall)': True, 'step, batch 1024: ours/numpy (wall)': True,
                      'memory: peak growth over the run (KiB)': True, 'notebook suite (seconds)': False}
    assert [ok for *_, ok in check_targets(fake_results(1.2))][:4] == [False, False, True, False]


def test_format_report_shows_every_part():
    text = format_report(fake_results())
    assert '1 thread per worker' in text and '12 passed' in text and text.count('MISS') == 2
