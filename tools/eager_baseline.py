"""The eager training step of this tree against the same step of an earlier commit, side by side.

    python tools/eager_baseline.py ded1259                  # batches 64 and 1024, 15 rounds
    python tools/eager_baseline.py ded1259 --rounds 31 --batches 64

"The eager step is no worse than it was" is a ratio of our engine to itself. Measured against torch
it moves with the processor (numpy's OpenBLAS and torch's MKL are different arithmetic, and their
ratio differs from one CPU to the next: tools/BENCHMARK_NOTES.md); measured here it does not. The
commit's package is unpacked into a temporary folder (`git archive`, no work tree is touched); each
engine runs in its own process that imports only numpy and fromscratch, with one BLAS thread and
OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset, like `python -m fromscratch.bench`'s workers. Both build
the same MLP step (784-50-10, cross-entropy, SGD, `zero_grad`, `backward`, `step`) on the same data;
the rounds alternate which engine goes first. It prints, per batch, this tree's seconds per step over
the earlier commit's: the median and the range over the rounds.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The worker: builds the step for a batch size on first use, then times `n` steps per request.
WORKER = r'''
import sys, time
import numpy as np
import fromscratch as fs

def make_step(batch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    fs.manual_seed(0)
    nn = fs.nn
    model = nn.Sequential(nn.Linear(784, 50), nn.ReLU(), nn.Linear(50, 10))
    opt = fs.optim.SGD(model.parameters(), lr=0.01)
    xb, yb = fs.tensor(x), fs.tensor(y)
    def step():
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss
    return step

def kernel():
    "numpy's OpenBLAS kernel, as the benchmark reports it (or threadpoolctl does)."
    try:
        from fromscratch.bench.blas import blas_info
        return blas_info().get('openblas_kernel', 'unknown')
    except ImportError: pass
    try:
        from threadpoolctl import threadpool_info
        return next((i.get('architecture') for i in threadpool_info()
                     if i.get('internal_api') == 'openblas'), None) or 'unknown'
    except ImportError: return 'unknown'

steps = {}
print(kernel(), flush=True)
for line in sys.stdin:
    batch, n = map(int, line.split())
    if batch not in steps:
        steps[batch] = make_step(batch)
        for _ in range(3): steps[batch]()
    start = time.perf_counter()
    for _ in range(n): steps[batch]()
    print((time.perf_counter() - start) / n, flush=True)
'''


def unpacked(rev, into):
    "The package `fromscratch` of commit `rev`, unpacked under `into`."
    archive = subprocess.run(['git', '-C', str(ROOT), 'archive', rev, 'fromscratch'],
                             capture_output=True, check=False)
    if archive.returncode:
        sys.exit(f'eager_baseline: git could not read {rev!r}: {archive.stderr.decode().strip()}')
    subprocess.run(['tar', '-x', '-C', str(into)], input=archive.stdout, check=True)
    return into


class Worker:
    "One engine in its own process, answering 'batch n' with the seconds per step."
    def __init__(self, package_root):
        env = {k: v for k, v in os.environ.items()
               if k not in ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE', 'PYTHONPATH')}
        env.update(PYTHONPATH=str(package_root), OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1',
                   MKL_NUM_THREADS='1')
        self.process = subprocess.Popen([sys.executable, '-c', WORKER], env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.kernel = self.process.stdout.readline().strip()

    def seconds(self, batch, n):
        self.process.stdin.write(f'{batch} {n}\n')
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line: sys.exit('eager_baseline: a worker ended early (its error is above)')
        return float(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def compare(rev, batches=(64, 1024), rounds=15, round_time=0.25):
    """{batch: (median, smallest, largest) over the rounds of this tree's step time over
    `rev`'s in the same round}, and each worker's OpenBLAS kernel."""
    with tempfile.TemporaryDirectory() as tmp:
        workers = {'here': Worker(ROOT), rev: Worker(unpacked(rev, Path(tmp)))}
        try:
            ratios = {}
            for batch in batches:
                calls = max(3, round(round_time / workers['here'].seconds(batch, 3)))
                runs = {k: [] for k in workers}
                for r in range(rounds):
                    for k in (list(workers) if r % 2 == 0 else list(workers)[::-1]):
                        runs[k].append(workers[k].seconds(batch, calls))
                each = [a / b for a, b in zip(runs['here'], runs[rev])]
                ratios[batch] = statistics.median(each), min(each), max(each)
            return ratios, {k: w.kernel for k, w in workers.items()}
        finally:
            for w in workers.values(): w.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('rev', help='the earlier commit (any name git knows)')
    parser.add_argument('--batches', type=int, nargs='+', default=[64, 1024])
    parser.add_argument('--rounds', type=int, default=15)
    args = parser.parse_args(argv)
    ratios, kernels = compare(args.rev, args.batches, args.rounds)
    print(f"numpy's OpenBLAS kernel: {kernels['here']} (here), {kernels[args.rev]} ({args.rev})")
    print(f'eager step, this tree / {args.rev}: median of {args.rounds} alternating rounds (range)')
    for batch, (median, low, high) in ratios.items():
        print(f'  batch {batch:5}: {median:.3f}  ({low:.3f} to {high:.3f})')


if __name__ == '__main__':
    main()
