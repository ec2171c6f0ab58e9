"""Data parallel training (nbs/19_distributed.ipynb): accumulation and replicas equal the big batch; torch's DDP
and ours in 2 real processes (gloo, loopback) equal it in float64; `no_sync`; our `DistributedSampler` against
torch's; `python -m fromscratch.train --nproc 2` against `--nproc 1`; and the faults: a busy port, a worker that
raises, a worker killed mid-run, each ending the whole group quickly, with no process left behind.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

import fromscratch as fs
from fromscratch import nn
from fromscratch.nn import parallel
from fromscratch.nn.parallel import DistributedDataParallel, accumulate_grads, launch, make_buckets
from fromscratch.utils.data import DistributedSampler

ROOT = Path(__file__).resolve().parents[1]


def problem(n=12, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, 5)), rng.standard_normal((n, 3))
    fs.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3)).double()
    return model, x, y


def big_batch(model, x, y):
    model.zero_grad()
    nn.functional.mse_loss(model(fs.tensor(x)), fs.tensor(y)).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


def assert_grads(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected): np.testing.assert_allclose(a, e, rtol=0, atol=1e-12)


# --- one process ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('n', [12, 30])
def test_accumulation_equals_big_batch_for_every_divisor(n):
    model, x, y = problem(n)
    big = big_batch(model, x, y)
    for k in [k for k in range(1, n + 1) if n % k == 0]:
        model.zero_grad()
        accumulate_grads(model, nn.MSELoss(), fs.tensor(x), fs.tensor(y), k)
        assert_grads([p.grad.numpy() for p in model.parameters()], big)
    with pytest.raises(ValueError, match='do not split a batch of'):
        accumulate_grads(model, nn.MSELoss(), fs.tensor(x), fs.tensor(y), 7)


def test_accumulation_equals_torch():
    model, x, y = problem()
    tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3)).double()
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
    for xb, yb in zip(torch.from_numpy(x).split(4), torch.from_numpy(y).split(4)):
        (torch.nn.functional.mse_loss(tm(xb), yb) / 3).backward()
    accumulate_grads(model, nn.MSELoss(), fs.tensor(x), fs.tensor(y), 3)
    assert_grads([p.grad.numpy() for p in model.parameters()], [p.grad.numpy() for p in tm.parameters()])


def test_buckets_hold_at_most_the_cap_and_keep_order():
    model, _, _ = problem()
    params = list(model.parameters())[::-1]
    for cap in (1, 60, 100, 300, 10**6):
        buckets = make_buckets(params, cap)
        assert [p for b in buckets for p in b.params] == params
        assert all(len(b.params) == 1 or sum(p.array.nbytes for p in b.params) <= cap for b in buckets)
        assert all(b.buffer.dtype == np.float64 and b.buffer.size == sum(p.numel() for p in b.params) for b in buckets)


# --- our DDP in this process, in a group of one ---------------------------------------------------------------

@pytest.fixture
def group_of_one():
    dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_buckets_start_while_backward_runs(group_of_one):
    model, x, y = problem()
    big = big_batch(model, x, y)
    model.zero_grad()
    ddp = DistributedDataParallel(model, bucket_cap_mb=100 / 2**20)
    assert len(ddp.buckets) == 4
    seen = []
    model[0].weight.register_hook(lambda g: seen.append(ddp.launched))   # the first layer's weight: reached last
    nn.functional.mse_loss(ddp(fs.tensor(x)), fs.tensor(y)).backward()
    assert seen and seen[0] >= 2            # buckets of the later layers already sent while backward went on
    assert all(b.work is not None and b.work.is_completed() for b in ddp.buckets)
    assert_grads([p.grad.numpy() for p in model.parameters()], big)


def test_no_sync_accumulates_and_unused_parameter_is_reported(group_of_one):
    model, x, y = problem()
    big = big_batch(model, x, y)
    model.zero_grad()
    ddp = DistributedDataParallel(model)
    with ddp.no_sync():
        (nn.functional.mse_loss(ddp(fs.tensor(x[:6])), fs.tensor(y[:6])) / 2).backward()
    assert ddp.launched == 0
    (nn.functional.mse_loss(ddp(fs.tensor(x[6:])), fs.tensor(y[6:])) / 2).backward()
    assert_grads([p.grad.numpy() for p in model.parameters()], big)
    extra = nn.Sequential(nn.Linear(5, 3), nn.Linear(5, 3)).double()
    ddp2 = DistributedDataParallel(extra)
    ddp2.module[0](fs.tensor(x)).sum().backward()         # the second layer takes no part
    ddp2.syncing = True
    with pytest.raises(RuntimeError, match='Expected to have finished reduction in the prior iteration'):
        ddp2(fs.tensor(x))


# --- two real processes ----------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def two_process_grads():
    model, x, y = problem(12)
    big = big_batch(model, x, y)
    state = [p.detach().numpy().copy() for p in model.parameters()]
    torch_grads = launch(parallel.torch_ddp_grads, 2, (state, x, y, 2))
    ours_small_buckets = launch(parallel.ddp_grads, 2, (state, x, y, 3, 1e-4))
    ours_default = launch(parallel.ddp_grads, 2, (state, x, y, 1))
    return big, torch_grads, ours_small_buckets, ours_default


def test_torch_ddp_with_no_sync_equals_big_batch(two_process_grads):
    big, torch_grads, _, _ = two_process_grads
    for grads in torch_grads: assert_grads(grads, big)


def test_our_ddp_equals_big_batch(two_process_grads):
    big, torch_grads, small, default = two_process_grads
    for grads in small + default: assert_grads(grads, big)
    assert_grads(small[0], torch_grads[0])


# --- the sampler ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('drop_last', [False, True])
def test_sampler_matches_torch_without_shuffle(drop_last):
    for n in range(0, 14):
        for replicas in range(1, 5):
            for rank in range(replicas):
                ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
                theirs = torch.utils.data.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
                assert list(ours) == list(theirs) and len(ours) == len(theirs), (n, replicas, rank)


def test_sampler_matches_torch_given_the_same_order(monkeypatch):
    order = lambda s: torch.randperm(len(s.dataset), generator=torch.Generator().manual_seed(s.seed + s.epoch)).tolist()
    monkeypatch.setattr(DistributedSampler, 'order', order)
    for n, replicas, seed in [(10, 3, 0), (16, 4, 5), (7, 2, 1)]:
        for drop_last in (False, True):
            for rank in range(replicas):
                ours = DistributedSampler(range(n), replicas, rank, seed=seed, drop_last=drop_last)
                theirs = torch.utils.data.DistributedSampler(range(n), replicas, rank, seed=seed, drop_last=drop_last)
                for epoch in range(3):
                    ours.set_epoch(epoch); theirs.set_epoch(epoch)
                    assert list(ours) == list(theirs)


def test_sampler_shards_are_disjoint_and_set_epoch_reshuffles():
    shards = [list(DistributedSampler(range(20), 4, r, seed=3)) for r in range(4)]
    assert sorted(sum(shards, [])) == list(range(20))
    assert shards == [list(DistributedSampler(range(20), 4, r, seed=3)) for r in range(4)]   # the same order everywhere
    s = DistributedSampler(range(20), 4, 0, seed=3)
    s.set_epoch(1)
    assert list(s) != shards[0]
    with pytest.raises(ValueError, match=re.escape('Invalid rank 4, rank should be in the interval [0, 3]')):
        DistributedSampler(range(20), 4, 4)


# --- the command ---------------------------------------------------------------------------------------------------

def train(*args, timeout=240):
    return subprocess.run([sys.executable, '-m', 'fromscratch.train', '--progress', 'never', *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_nproc_2_prints_the_last_line_of_nproc_1():
    runs = [train('--train-size', '1000', '--epochs', '2', '--nproc', n) for n in ('1', '2')]
    for r in runs: assert r.returncode == 0, r.stderr[-2000:]
    one, two = (r.stdout.splitlines()[-1].rsplit(' ', 1)[0] for r in runs)
    assert re.fullmatch(r'accuracy=0\.\d{4} loss=\d+\.\d{4}', one) and one == two
    assert len(runs[1].stdout.splitlines()) == 3                       # only rank 0 prints
    assert [l.split()[:2] for l in runs[0].stdout.splitlines()[:2]] == [l.split()[:2] for l in runs[1].stdout.splitlines()[:2]]


def test_same_order_sampler_shards_the_one_process_order():
    from fromscratch.train import SameOrderSampler
    from fromscratch.utils.data import RandomSampler
    fs.manual_seed(4)
    expected = [list(RandomSampler(range(12))) for _ in range(2)]
    for rank in range(3):
        fs.manual_seed(4)
        s = SameOrderSampler(range(12), 3, rank)
        assert [list(s) for _ in range(2)] == [order[rank::3] for order in expected]


@pytest.mark.parametrize('args, message', [
    (['--nproc', '0'], 'argument --nproc: must be greater than 0, got 0'),
    (['--nproc', 'two'], "argument --nproc: expected a whole number, got 'two'"),
    (['--nproc', '2', '--batch-size', '31'], 'argument --nproc: each batch must split evenly among the processes: 31 images into 2'),
    (['--master-port', '70000'], 'argument --master-port: a port is at most 65535, got 70000')])
def test_nproc_options_are_checked(args, message):
    r = train(*args, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].endswith(message) and r.stdout == ''


def test_command_on_a_busy_port():
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0)); busy.listen()
        port = busy.getsockname()[1]
        r = train('--nproc', '2', '--train-size', '200', '--epochs', '1', '--master-port', str(port), timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (f'python -m fromscratch.train: error: port {port} on 127.0.0.1 is already '
                                                 'in use: choose another one, or 0 for a free one')


def test_command_with_a_diverging_worker():
    r = train('--nproc', '2', '--train-size', '400', '--epochs', '3', '--lr', '1e6', '--schedule', 'constant', timeout=120)
    assert r.returncode == 1 and r.stdout == ''
    assert re.fullmatch(r'python -m fromscratch.train: error: worker \d \(pid \d+\) failed: TrainingDiverged: training diverged '
                        r'at step \d+ \(loss=\S+\): try a smaller --lr', r.stderr.strip().splitlines()[-1])


# --- faults --------------------------------------------------------------------------------------------------------

def children(pid):
    "The pids of the processes whose parent is `pid`."
    out = []
    for d in Path('/proc').iterdir():
        if d.name.isdigit():
            try: stat = (d / 'stat').read_text()
            except OSError: continue
            if int(stat.rsplit(')', 1)[1].split()[1]) == pid: out.append(int(d.name))
    return out


def running(pid):
    "Whether `pid` is a live process (not gone, not a zombie)."
    try: return (Path('/proc') / str(pid) / 'stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError: return False


def assert_all_gone(pids, within=10):
    deadline = time.monotonic() + within
    while any(map(running, pids)) and time.monotonic() < deadline: time.sleep(0.1)
    assert not [p for p in pids if running(p)], 'processes left behind'


def test_busy_port_ends_with_a_clear_message():
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0)); busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(parallel.LaunchError) as e: launch(parallel.ddp_grads, 2, port=port)
    assert str(e.value) == f'port {port} on 127.0.0.1 is already in use: choose another one, or 0 for a free one'


WORKERS = '''
import os, sys, time
import torch, torch.distributed as dist
from fromscratch.nn.parallel import LaunchError, launch

def raises(rank, world_size):
    if rank == 1: raise ValueError('rank 1 gives up')
    dist.all_reduce(torch.zeros(3))       # rank 0 waits here for rank 1, which never comes

def sleeps(rank, world_size):
    dist.all_reduce(torch.zeros(3))       # both have joined
    with open(os.path.join(sys.argv[2], f'{rank}.tmp'), 'w') as f: f.write(str(os.getpid()))
    os.replace(os.path.join(sys.argv[2], f'{rank}.tmp'), os.path.join(sys.argv[2], f'{rank}.pid'))
    time.sleep(300)

if __name__ == '__main__':
    try: launch(globals()[sys.argv[1]], 2, timeout=300)
    except LaunchError as e: print(e, file=sys.stderr); sys.exit(1)
'''


def start(tmp_path, which):
    script = tmp_path / 'workers.py'
    script.write_text(WORKERS)
    return subprocess.Popen([sys.executable, str(script), which, str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def test_worker_that_raises_ends_the_group(tmp_path):
    start_time = time.monotonic()
    p = start(tmp_path, 'raises')
    seen = set()
    while p.poll() is None:
        seen.update(children(p.pid)); time.sleep(0.05)
    err = p.stderr.read()
    assert p.returncode == 1 and time.monotonic() - start_time < 60        # long before the 300 s group timeout
    assert re.fullmatch(r'worker 1 \(pid \d+\) failed: ValueError: rank 1 gives up', err.strip().splitlines()[-1])
    assert len(seen) >= 2
    assert_all_gone(seen)


def test_worker_killed_mid_run_ends_the_group(tmp_path):
    p = start(tmp_path, 'sleeps')
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f'{r}.pid').exists() for r in range(2)):    # both workers joined the group
            assert p.poll() is None and time.monotonic() < deadline, 'the workers did not start'
            time.sleep(0.05)
        pids = {r: int((tmp_path / f'{r}.pid').read_text()) for r in range(2)}
        os.kill(pids[1], signal.SIGKILL)
        killed_at = time.monotonic()
        p.wait(timeout=60)
        assert time.monotonic() - killed_at < 30
    finally:
        if p.poll() is None: p.kill(); p.wait()
    assert p.returncode == 1
    assert p.stderr.read().strip().splitlines()[-1] == f'worker 1 (pid {pids[1]}) was killed by SIGKILL'
    assert_all_gone(pids.values())


def test_terminated_parent_ends_its_workers(tmp_path):
    p = start(tmp_path, 'sleeps')
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f'{r}.pid').exists() for r in range(2)):
            assert p.poll() is None and time.monotonic() < deadline, 'the workers did not start'
            time.sleep(0.05)
        pids = [int((tmp_path / f'{r}.pid').read_text()) for r in range(2)]
        p.terminate()
        p.wait(timeout=30)
    finally:
        if p.poll() is None: p.kill(); p.wait()
    assert p.returncode == 128 + signal.SIGTERM
    assert_all_gone(pids)
