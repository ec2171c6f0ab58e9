"""The training loop and its command line: `fit` learns, `evaluate` and `accuracy` count right, our runs
equal torch's step for step, and `python -m fromscratch.train` works end to end and fails clearly."""
import gzip
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

import fromscratch as fs
import fromscratch.train as cli
from fromscratch import nn, optim
from fromscratch.data import ArrayDataset, DataLoader, to_idx
from fromscratch.testing import check_close
from fromscratch.training import (History, accuracy, evaluate, fit, format_row, mnist_datasets, mnist_mlp,
                                  no_grad_for, plot_history, show_progress, train_epoch)

ROOT = Path(__file__).resolve().parents[1]
RESULT = re.compile(r'^accuracy=(\S+) loss=(\S+) seconds=(\S+)$')
OPTIONS = ['--epochs', '--batch-size', '--lr', '--schedule', '--seed', '--plot', '--full', '--train-size', '--progress',
           '--mirror', '--threads']


def blobs(n=200, seed=0):
    "Two well separated Gaussian blobs in 2-D, labelled 0 and 1, as float32 features and int64 labels."
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.standard_normal((n, 2)) * 0.5 + np.where(y[:, None] == 1, 2.0, -2.0)
    return x.astype(np.float32), y.astype(np.int64)


def line_data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    return x, 2 * x + 1


def torch_copy(model, torch_model):
    "Load our `model`'s weights into `torch_model` and return it."
    torch_model.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    return torch_model


def run_cli(*args, env=None, timeout=300, setup=None):
    "Run `python -m fromscratch.train *args` in a new process; `setup` is Python code run first, in that process."
    cmd = ['-m', 'fromscratch.train'] if setup is None else \
          ['-c', f"import sys\n{setup}\nfrom fromscratch.train import main\nsys.exit(main(sys.argv[1:]))"]
    return subprocess.run([sys.executable, *cmd, *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=timeout)


def one_error_line(r, start='python -m fromscratch.train: error: '):
    "The single line a failed run wrote to stderr (after argparse's usage lines, if any); fails if there is more."
    assert 'Traceback' not in r.stderr and 'Warning' not in r.stderr, r.stderr
    lines = [l for l in r.stderr.splitlines() if not l.startswith(('usage:', ' '))]
    assert len(lines) == 1 and lines[0].startswith(start), r.stderr
    return lines[0]


def closed_port():
    "A local port where nothing listens."
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- accuracy and evaluate

@pytest.mark.parametrize('seed', range(5))
def test_accuracy_matches_a_hand_count(seed):
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(1, 60)), int(rng.integers(2, 12))
    scores, target = rng.standard_normal((n, c)).astype(np.float32), rng.integers(0, c, n)
    hand = sum(int(np.argmax(row) == t) for row, t in zip(scores, target)) / n
    assert accuracy(fs.tensor(scores), fs.tensor(target)) == pytest.approx(hand, abs=1e-7)
    assert accuracy(torch.tensor(scores), torch.tensor(target)) == pytest.approx(hand, abs=1e-7)
    assert isinstance(accuracy(fs.tensor(scores), fs.tensor(target)), float)


def test_accuracy_on_ties_takes_the_first_highest_score_like_torch():
    scores = [[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]]
    for target, expected in [([0, 1], 1.0), ([1, 2], 0.0), ([0, 2], 0.5)]:
        assert accuracy(fs.tensor(scores), fs.tensor(target)) == expected
        assert accuracy(torch.tensor(scores), torch.tensor(target)) == expected


def test_evaluate_weights_each_batch_by_its_size():
    x, y = blobs(53)
    fs.manual_seed(0)
    model = nn.Linear(2, 2)
    loss, acc = evaluate(model, nn.CrossEntropyLoss(), DataLoader(ArrayDataset(x, y), batch_size=10))  # last batch: 3
    with fs.no_grad(): out = model(fs.tensor(x))
    check_close(loss, nn.CrossEntropyLoss()(out, fs.tensor(y)).item(), rtol=1e-5)
    check_close(acc, accuracy(out, fs.tensor(y)), rtol=1e-6)
    tm = torch_copy(model, torch.nn.Linear(2, 2))
    t_loss, t_acc = evaluate(tm, torch.nn.CrossEntropyLoss(), DataLoader(ArrayDataset(x, y), 10, collate_fn=default_collate))
    check_close([loss, acc], [t_loss, t_acc], rtol=1e-5)


def test_evaluate_builds_no_graph_and_restores_training_mode():
    x, y = blobs(20)
    model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 2))
    seen = []
    model.register_forward_hook(lambda m, inp, out: seen.append((m.training, out.grad_fn, fs.is_grad_enabled())))
    loss, acc = evaluate(model, nn.CrossEntropyLoss(), DataLoader(ArrayDataset(x, y), batch_size=8), metric=None)
    assert acc is None and np.isfinite(loss)
    assert seen and all(training is False and grad_fn is None and not enabled for training, grad_fn, enabled in seen)
    assert model.training and all(m.training for m in model.modules())
    assert fs.is_grad_enabled()
    assert all(p.grad is None for p in model.parameters())


def test_no_grad_for_picks_the_library_of_the_model():
    with no_grad_for(nn.Linear(2, 1)):
        assert not fs.is_grad_enabled() and torch.is_grad_enabled()
    with no_grad_for(torch.nn.Linear(2, 1)):
        assert fs.is_grad_enabled() and not torch.is_grad_enabled()


# ---------------------------------------------------------------- fit and History

def test_fit_learns_on_tiny_data():
    x, y = blobs(200)
    fs.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    train_dl = DataLoader(ArrayDataset(x[:160], y[:160]), batch_size=16, shuffle=True, seed=0)
    valid_dl = DataLoader(ArrayDataset(x[160:], y[160:]), batch_size=64)
    before = evaluate(model, nn.CrossEntropyLoss(), valid_dl)[0]
    h = fit(model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1), train_dl, valid_dl, epochs=5,
            progress=False)
    assert isinstance(h, History)
    assert len(h.train_loss) == 5 * len(train_dl) == 50
    assert [list(r) for r in h.epochs] == [['epoch', 'step', 'train_loss', 'valid_loss', 'accuracy']] * 5
    assert h.column('epoch') == [1, 2, 3, 4, 5] and h.column('step') == [10, 20, 30, 40, 50]
    check_close(h.column('train_loss'), [np.mean(h.train_loss[i:i + 10]) for i in range(0, 50, 10)], rtol=1e-12)
    assert h.epochs[-1]['valid_loss'] < before / 4
    assert np.mean(h.train_loss[-10:]) < np.mean(h.train_loss[:10]) / 4
    assert h.epochs[-1]['accuracy'] >= 0.95
    assert h.seconds > 0


def test_fit_without_validation_or_metric_records_the_training_loss_only():
    x, y = line_data()
    model = nn.Linear(1, 1)
    h = fit(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), DataLoader(ArrayDataset(x, y), 25),
            epochs=2, progress=False)
    assert [list(r) for r in h.epochs] == [['epoch', 'step', 'train_loss']] * 2 and len(h.train_loss) == 8
    h = fit(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), DataLoader(ArrayDataset(x, y), 25),
            DataLoader(ArrayDataset(x, y), 50), metric=None, progress=False)
    assert list(h.epochs[0]) == ['epoch', 'step', 'train_loss', 'valid_loss']


def test_fit_refuses_a_loader_without_batches():
    model = nn.Linear(1, 1)
    with pytest.raises(ValueError, match='no batches'):
        fit(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), [], progress=False)


def test_train_epoch_clears_gradients_after_every_step():
    x, y = line_data(20)
    model = nn.Linear(1, 1)
    losses = train_epoch(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1),
                         DataLoader(ArrayDataset(x, y), batch_size=5))
    assert len(losses) == 4 and all(isinstance(l, float) for l in losses)
    assert all(p.grad is None for p in model.parameters())


def test_log_gets_one_line_per_epoch_and_history_prints_them():
    x, y = blobs(40)
    model = nn.Linear(2, 2)
    lines = []
    h = fit(model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1), DataLoader(ArrayDataset(x, y), 8),
            DataLoader(ArrayDataset(x, y), 40), epochs=3, progress=False, log=lines.append)
    assert len(lines) == 3
    assert re.fullmatch(r'epoch=3 step=15 train_loss=\d+\.\d{4} valid_loss=\d+\.\d{4} accuracy=\d\.\d{4}', lines[-1])
    assert repr(h).splitlines() == [format_row(r, 3) for r in h.epochs]
    assert format_row({'epoch': 2, 'loss': 0.123456}) == 'epoch=2 loss=0.1235'
    assert repr(History()) == 'History (no epochs)'


# ---------------------------------------------------------------- progress bar

class FakeTerminal:
    def __init__(self): self.text = []
    def isatty(self): return True
    def write(self, s): self.text.append(s)
    def flush(self): pass


def test_show_progress_only_on_a_terminal_outside_ci(monkeypatch):
    monkeypatch.delenv('CI', raising=False)
    assert show_progress() is False                       # pytest captures stderr: not a terminal
    assert show_progress(True) is True and show_progress(False) is False
    monkeypatch.setattr(sys, 'stderr', FakeTerminal())
    assert show_progress() is True
    monkeypatch.setenv('CI', 'true')
    assert show_progress() is False and show_progress(True) is True


def test_fit_draws_a_bar_on_stderr_only_when_asked(capsys):
    x, y = line_data(40)
    model = nn.Linear(1, 1)
    args = (model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), DataLoader(ArrayDataset(x, y), 10))
    for progress in (None, False):
        fit(*args, progress=progress)
        assert capsys.readouterr() == ('', '')
    fit(*args, epochs=2, progress=True)
    out, err = capsys.readouterr()
    assert out == '' and 'epoch 1/2' in err and 'epoch 2/2' in err and '/4 [' in err   # 4 batches an epoch


def test_no_bar_in_ci_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv('CI', '1')
    fake = FakeTerminal()
    monkeypatch.setattr(sys, 'stderr', fake)
    x, y = line_data(40)
    model = nn.Linear(1, 1)
    fit(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), DataLoader(ArrayDataset(x, y), 10))
    assert fake.text == []


# ---------------------------------------------------------------- plots

def test_plot_history_draws_train_and_valid_losses():
    from matplotlib.figure import Figure
    h = History()
    h.train_loss = [3.0, 2.0, 1.5, 1.0]
    h.epochs = [{'epoch': 1, 'step': 2, 'train_loss': 2.5, 'valid_loss': 2.2},
                {'epoch': 2, 'step': 4, 'train_loss': 1.25, 'valid_loss': 1.1}]
    ax = plot_history(h, Figure().subplots(), label='ours')
    train, valid = ax.get_lines()
    assert train.get_xdata().tolist() == [1, 2, 3, 4] and train.get_ydata().tolist() == h.train_loss
    assert list(valid.get_xdata()) == [2, 4] and list(valid.get_ydata()) == [2.2, 1.1]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ['ours train', 'ours valid']
    h.epochs = [{k: v for k, v in r.items() if k != 'valid_loss'} for r in h.epochs]
    assert len(plot_history(h, Figure().subplots()).get_lines()) == 1


def test_training_modules_import_without_torch_tqdm_or_matplotlib():
    code = ("import sys, fromscratch.training, fromscratch.train\n"
            "print(sorted({'torch', 'tqdm', 'matplotlib'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == '[]'


# ---------------------------------------------------------------- the seed's line and MNIST, against torch

def test_linear_regression_recovers_2_and_1_like_torch():
    x, y = line_data()
    fs.manual_seed(0)
    model = nn.Linear(1, 1)
    tm = torch_copy(model, torch.nn.Linear(1, 1))
    ds = ArrayDataset(x, y)
    h = fit(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), DataLoader(ds, 10, shuffle=True, seed=0),
            epochs=20, metric=None, progress=False)
    th = fit(tm, torch.nn.MSELoss(), torch.optim.SGD(tm.parameters(), lr=0.1),
             DataLoader(ds, 10, shuffle=True, seed=0, collate_fn=default_collate), epochs=20, metric=None, progress=False)
    assert model.weight.item() == pytest.approx(2, abs=1e-4) and model.bias.item() == pytest.approx(1, abs=1e-4)
    check_close(h.train_loss, th.train_loss, rtol=1e-4, atol=1e-6, name='losses')
    check_close(model.weight, tm.weight, rtol=1e-5)
    check_close(model.bias, tm.bias, rtol=1e-5)


@pytest.fixture(scope='module')
def mnist_small():
    return mnist_datasets(train_size=1600)


def test_mnist_datasets_are_standardised_float32(mnist_small):
    train_ds, valid_ds = mnist_small
    (x, y), (xv, yv) = train_ds.arrays, valid_ds.arrays
    assert x.shape == (1600, 784) and xv.shape == (1000, 784) and x.dtype == xv.dtype == np.float32
    assert y.dtype == yv.dtype == np.int64
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-4
    assert abs(float(xv.mean())) < 0.1 and abs(float(xv.std()) - 1) < 0.1   # the training mean and std, not its own


@pytest.mark.parametrize('size', [0, -1, 4001])
def test_mnist_datasets_refuse_a_train_size_beyond_the_images(size):
    with pytest.raises(ValueError, match=f"train_size must be between 1 and 4,000 .*got {size:,}"):
        mnist_datasets(train_size=size)


@pytest.mark.parametrize('seed', [0, 1])
def test_mnist_losses_equal_torch_step_for_step(mnist_small, seed):
    train_ds, valid_ds = mnist_small
    fs.manual_seed(seed)
    model = mnist_mlp()
    tm = torch_copy(model, torch.nn.Sequential(torch.nn.Linear(784, 50), torch.nn.ReLU(), torch.nn.Linear(50, 10)))
    ours = fit(model, nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.1),
               DataLoader(train_ds, 32, shuffle=True, seed=seed), DataLoader(valid_ds, 1000), epochs=2, progress=False)
    theirs = fit(tm, torch.nn.CrossEntropyLoss(), torch.optim.SGD(tm.parameters(), lr=0.1),
                 DataLoader(train_ds, 32, shuffle=True, seed=seed, collate_fn=default_collate),
                 DataLoader(valid_ds, 1000, collate_fn=default_collate), epochs=2, progress=False)
    assert len(ours.train_loss) == 100
    assert ours.train_loss[-1] < ours.train_loss[0] / 2
    check_close(ours.train_loss, theirs.train_loss, rtol=0, atol=1e-4, name='losses')
    check_close(ours.column('valid_loss'), theirs.column('valid_loss'), rtol=0, atol=1e-4, name='valid losses')
    check_close(ours.column('accuracy'), theirs.column('accuracy'), rtol=0, atol=2e-3, name='accuracies')
    for (k, v), tv in zip(model.state_dict().items(), tm.state_dict().values()):
        check_close(v, tv, rtol=1e-3, atol=1e-5, name=k)


# ---------------------------------------------------------------- the command line

def test_cli_end_to_end(tmp_path):
    plot = tmp_path / 'loss.png'
    r = run_cli('--train-size', '300', '--epochs', '2', '--batch-size', '32', '--lr', '0.1', '--seed', '1',
                '--plot', str(plot))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith('epoch=1 step=10 ') and lines[1].startswith('epoch=2 step=20 ')
    m = RESULT.match(lines[-1])
    assert m, lines[-1]
    acc, loss, seconds = map(float, m.groups())
    assert 0 <= acc <= 1 and loss > 0 and seconds >= 0
    assert lines[1].endswith(f'valid_loss={loss:.4f} accuracy={acc:.4f}')
    assert plot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and plot.stat().st_size > 5000
    assert 'batch/s' not in r.stderr and 'Traceback' not in r.stderr   # not a terminal: no bar


def test_cli_same_seed_same_run_and_bar_when_asked(capsys):
    def result(*args):
        assert cli.main(['--train-size', '200', '--epochs', '1', *args]) == 0
        out, err = capsys.readouterr()
        return out.splitlines()[-1].rsplit(' ', 1)[0], err
    first, err = result('--seed', '3')
    assert err == ''
    again, err = result('--seed', '3', '--progress', 'always')
    assert again == first and 'epoch 1/1' in err and 'batch/s' in err
    other, _ = result('--seed', '4', '--progress', 'never')
    assert other != first


def test_cli_help_explains_every_option():
    r = run_cli('--help')
    assert r.returncode == 0 and r.stdout.startswith('usage: python -m fromscratch.train')
    for option in OPTIONS:
        assert re.search(rf'^\s+{option}\b.*\S', r.stdout, re.M), option
    assert 'accuracy=<float> loss=<float> seconds=<float>' in ' '.join(r.stdout.split())


@pytest.mark.parametrize('args, message', [
    (['--epochs', '0'], 'argument --epochs: must be greater than 0, got 0'),
    (['--epochs', '-2'], 'argument --epochs: must be greater than 0'),
    (['--epochs', '2.5'], "argument --epochs: expected a whole number, got '2.5'"),
    (['--batch-size', '0'], 'argument --batch-size: must be greater than 0'),
    (['--batch-size', 'many'], "argument --batch-size: expected a whole number, got 'many'"),
    (['--lr', '0'], 'argument --lr: must be greater than 0'),
    (['--lr', '-0.1'], 'argument --lr: must be greater than 0, got -0.1'),
    (['--lr', 'nan'], 'argument --lr: must be greater than 0, got nan'),
    (['--lr', 'inf'], 'argument --lr: must be greater than 0, got inf'),
    (['--lr', '1e400'], 'argument --lr: must be greater than 0, got 1e400'),
    (['--lr', 'fast'], "argument --lr: expected a number, got 'fast'"),
    (['--schedule', 'cosine'], "argument --schedule: invalid choice: 'cosine'"),
    (['--seed', '-1'], 'argument --seed: must be at least 0, got -1'),
    (['--seed', '1.5'], "argument --seed: expected a whole number, got '1.5'"),
    (['--train-size', '0'], 'argument --train-size: must be greater than 0'),
    (['--train-size', '4001'], 'argument --train-size: the sample has 4,000 training images, got 4,001'),
    (['--full', '--train-size', '60001'], 'argument --train-size: the full set has 60,000 training images, got 60,001'),
    (['--progress', 'sometimes'], "argument --progress: invalid choice: 'sometimes'"),
    (['--threads', '0'], 'argument --threads: must be greater than 0, got 0'),
    (['--threads', '-2'], 'argument --threads: must be greater than 0, got -2'),
    (['--threads', 'all'], "argument --threads: expected a whole number, got 'all'"),
    (['--plot', 'loss.jpg'], "argument --plot: give a file name ending in .png, not 'loss.jpg'"),
    (['--plot', ''], "argument --plot: give a file name ending in .png, not ''"),
    (['--plot', 'no/such/folder/loss.png'], "argument --plot: the folder 'no/such/folder' does not exist"),
    (['--plot', '/proc/fromscratch-test/loss.png'], "argument --plot: the folder '/proc/fromscratch-test' does not exist"),
    (['--plot', '/proc/loss.png'], "argument --plot: cannot create files in '/proc' ("),     # not even root can
    (['--plot', 'README.md/loss.png'], "argument --plot: 'README.md' is a file, not a folder"),
    (['--mirror', 'http://example.org/'], 'argument --mirror: only used with --full'),
    (['--full', '--mirror', 'example.org/mnist'], "argument --mirror: mirror 'example.org/mnist' is not a URL: give the address"),
    (['--full', '--mirror', 'ftp:/mnist'], "argument --mirror: mirror 'ftp:/mnist' is not a URL"),
    (['--learning-rate', '0.1'], 'unrecognized arguments: --learning-rate 0.1'),
    (['--epoch', '1'], 'unrecognized arguments: --epoch 1'),                    # no abbreviations
    (['--batch', '8'], 'unrecognized arguments: --batch 8'),
    (['--epochs'], 'argument --epochs: expected one argument'),
    (['3'], 'unrecognized arguments: 3'),
])
def test_cli_bad_arguments_exit_2_with_a_message(capsys, args, message, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == '' and err.startswith('usage: python -m fromscratch.train')
    assert f'python -m fromscratch.train: error: {message}' in err
    assert len([l for l in err.splitlines() if not l.startswith(('usage:', ' '))]) == 1


@pytest.mark.parametrize('args, package, message', [
    (['--plot', 'loss.png'], 'matplotlib', 'argument --plot: saving a plot needs matplotlib: pip install matplotlib'),
    (['--progress', 'always'], 'tqdm', 'argument --progress: a progress bar needs tqdm: pip install tqdm'),
])
def test_cli_options_that_need_a_missing_package(args, package, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == package else real(name, *a))
    with pytest.raises(SystemExit) as e: cli.main(args)
    assert e.value.code == 2 and f'python -m fromscratch.train: error: {message}' in capsys.readouterr().err


def test_cli_auto_progress_without_tqdm_draws_no_bar(monkeypatch):
    monkeypatch.setattr(cli, 'show_progress', lambda progress: True)           # as on a terminal
    assert cli.parse_args([]).bars is True
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'tqdm' else real(name, *a))
    assert cli.parse_args([]).bars is False and cli.parse_args(['--progress', 'never']).bars is False


def test_cli_plot_check_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli.parse_args(['--plot', 'loss.png'])
    assert list(tmp_path.iterdir()) == []                            # the tried file was removed again


def test_cli_plot_into_a_folder_path_is_refused(tmp_path, capsys):
    (tmp_path / 'curve.png').mkdir()
    with pytest.raises(SystemExit) as e:
        cli.main(['--plot', str(tmp_path / 'curve.png')])
    assert e.value.code == 2 and 'is a folder: give a file name ending in .png' in capsys.readouterr().err


def unwritable_folder(tmp_path):
    "A folder that exists but where this process cannot create a file: read-only, or (as root) one of /sys's."
    if hasattr(os, 'geteuid') and os.geteuid() == 0:    # root writes through permission bits, not into /sys
        assert os.path.isdir('/sys'), 'as root this test needs Linux /sys'
        return Path('/sys'), None
    tmp_path.chmod(0o500)
    return tmp_path, lambda: tmp_path.chmod(0o700)


def test_cli_plot_into_a_folder_it_cannot_write_is_refused(tmp_path, capsys):
    folder, restore = unwritable_folder(tmp_path)
    try:
        with pytest.raises(SystemExit) as e:
            cli.main(['--plot', str(folder / 'fromscratch-loss.png')])
    finally:
        if restore: restore()
    assert e.value.code == 2 and f"cannot create files in '{folder}'" in capsys.readouterr().err
    assert not (folder / 'fromscratch-loss.png').exists()


@pytest.mark.parametrize('args, message', [
    (['--batch-size', '-3'], 'argument --batch-size: must be greater than 0, got -3'),
    (['--epoch', '1'], 'unrecognized arguments: --epoch 1'),
    (['--plot', '/proc/fromscratch-test/x.png'], "argument --plot: the folder '/proc/fromscratch-test' does not exist"),
    (['--plot', 'README.md/x.png'], "argument --plot: 'README.md' is a file, not a folder"),
    (['--train-size', '5000'], 'argument --train-size: the sample has 4,000 training images, got 5,000'),
    (['--threads', '0'], 'argument --threads: must be greater than 0, got 0'),
])
def test_cli_bad_arguments_in_a_real_process_exit_2_without_traceback(args, message):
    r = run_cli(*args)
    assert r.returncode == 2 and r.stdout == ''
    assert one_error_line(r) == f'python -m fromscratch.train: error: {message}'


def test_cli_diverging_run_stops_with_one_line(tmp_path):
    r = run_cli('--lr', '1000', '--plot', str(tmp_path / 'loss.png'))
    assert r.returncode == 1
    line = one_error_line(r)                                         # and no numpy RuntimeWarnings
    assert re.fullmatch(r'python -m fromscratch.train: error: training diverged at step (\d+) \(loss=(nan|inf)\): '
                        r'try a smaller --lr', line), line
    step = int(re.search(r'step (\d+)', line).group(1))
    assert len(r.stdout.splitlines()) == (step - 1) // 125            # the epochs finished before it
    assert not (tmp_path / 'loss.png').exists()


def test_stop_on_divergence_counts_training_steps_only():
    calls = iter([1.0, 2.0, 0.5, float('inf')])
    check = cli.StopOnDivergence(lambda out, target: fs.tensor(next(calls)))
    check(None, None)
    with fs.no_grad(): check(None, None)                             # evaluation: not a step
    check(None, None)
    with pytest.raises(cli.TrainingDiverged, match=re.escape('training diverged at step 3 (loss=inf): try a smaller --lr')):
        check(None, None)
    assert issubclass(cli.TrainingDiverged, RuntimeError)


def test_cli_damaged_sample_says_how_to_repair_it(tmp_path):
    good = ROOT / 'fromscratch' / 'mnist_sample.npz'
    for name, blob in [('truncated', good.read_bytes()[:50_000]), ('random', os.urandom(4096)), ('empty', b'')]:
        path = tmp_path / f'{name}.npz'; path.write_bytes(blob)
        r = run_cli('--epochs', '1', setup=f"import fromscratch.data; fromscratch.data.SAMPLE_PATH = {str(path)!r}")
        assert r.returncode == 1 and r.stdout == ''
        line = one_error_line(r)
        assert line.startswith(f'python -m fromscratch.train: error: the MNIST sample {path} is damaged (')
        assert 'pip install --force-reinstall fromscratch' in line and 'git checkout -- fromscratch/mnist_sample.npz' in line


def test_cli_cache_that_cannot_be_a_folder_fails_before_downloading(tmp_path):
    r = run_cli('--full', env={'FROMSCRATCH_CACHE': '/proc/fromscratch-test'})
    assert r.returncode == 1 and r.stdout == ''
    assert one_error_line(r).startswith("python -m fromscratch.train: error: cannot keep the MNIST downloads in "
                                        "'/proc/fromscratch-test/mnist' (cannot create it: ")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args): pass


@contextmanager
def serve(folder):
    "An HTTP server for `folder` on 127.0.0.1 in a thread; yields its base URL."
    server = ThreadingHTTPServer(('127.0.0.1', 0), partial(QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True); thread.start()
    try: yield f'http://127.0.0.1:{server.server_address[1]}/'
    finally: server.shutdown(); server.server_close(); thread.join(5)


def test_cli_corrupted_cache_gives_one_warning_line_per_file(tmp_path):
    rng, files = np.random.default_rng(0), {}
    mirror, cache = tmp_path / 'mirror', tmp_path / 'cache' / 'mnist'
    mirror.mkdir(); cache.mkdir(parents=True)
    arrays = {'train-images-idx3-ubyte.gz': rng.integers(0, 256, (64, 28, 28), dtype=np.uint8),
              'train-labels-idx1-ubyte.gz': rng.integers(0, 10, 64).astype(np.uint8),
              't10k-images-idx3-ubyte.gz': rng.integers(0, 256, (16, 28, 28), dtype=np.uint8),
              't10k-labels-idx1-ubyte.gz': rng.integers(0, 10, 16).astype(np.uint8)}
    for name, a in arrays.items():
        blob = gzip.compress(to_idx(a), mtime=0)
        (mirror / name).write_bytes(blob); (cache / name).write_bytes(blob[:-3])       # every cached copy damaged
        files[name] = dict(size=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    setup = f"import json, fromscratch.data; fromscratch.data.MNIST_FILES = json.loads({json.dumps(files)!r})"
    with serve(mirror) as url:
        r = run_cli('--full', '--mirror', url, '--epochs', '1', '--progress', 'never', setup=setup,
                    env={'FROMSCRATCH_CACHE': str(tmp_path / 'cache')})
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 4 and 'Traceback' not in r.stderr and 'warnings.warn' not in r.stderr
    for line, name in zip(lines, arrays):
        assert line.startswith(f'python -m fromscratch.train: warning: cached {cache / name} does not match its checksum (size is ')
        assert line.endswith('; downloading it again')
    assert RESULT.match(r.stdout.splitlines()[-1])
    for name in arrays: assert (cache / name).read_bytes() == (mirror / name).read_bytes()


def test_cli_plot_that_cannot_be_written_after_training_fails_in_one_line(tmp_path, capsys, monkeypatch):
    folder = tmp_path / 'plots'; folder.mkdir()
    real_train = cli.train
    def train_then_remove_the_folder(args):
        history = real_train(args); shutil.rmtree(folder); return history
    monkeypatch.setattr(cli, 'train', train_then_remove_the_folder)
    assert cli.main(['--train-size', '64', '--epochs', '1', '--plot', str(folder / 'loss.png')]) == 1
    err = capsys.readouterr().err
    assert err.startswith('python -m fromscratch.train: error: [Errno 2] No such file or directory') and err.count('\n') == 1


def test_cli_interrupted(capsys, monkeypatch):
    def interrupted(args): raise KeyboardInterrupt
    monkeypatch.setattr(cli, 'train', interrupted)
    assert cli.main([]) == 130 and capsys.readouterr().err == 'python -m fromscratch.train: interrupted\n'


def test_cli_plot_is_written_atomically(tmp_path):
    (tmp_path / 'loss.png').write_bytes(b'old')
    assert cli.main(['--train-size', '64', '--epochs', '1', '--progress', 'never', '--plot', str(tmp_path / 'loss.png')]) == 0
    assert (tmp_path / 'loss.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['loss.png']


# ---------------------------------------------------------------- the schedule and the defaults

@pytest.mark.parametrize('total, max_lr', [(625, 0.3), (10, 1.0), (7, 0.5), (1, 0.2), (2, 0.2), (33, 3.0)])
def test_the_one_cycle_schedule_sets_torchs_rates_and_leaves_the_momentum_alone(total, max_lr):
    opt, sched = cli.make_optimizer([fs.zeros(1, requires_grad=True)], max_lr, 'one-cycle', total)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=max_lr, total_steps=total, cycle_momentum=False)
    ours, theirs = [], []
    for _ in range(total):
        for o, s, out in ((opt, sched, ours), (topt, tsched, theirs)):
            out.append((o.param_groups[0]['lr'], o.param_groups[0]['momentum'])); o.step(); s.step()
    assert ours == theirs and all(m == 0 for _, m in ours)
    constant, none = cli.make_optimizer([fs.zeros(1, requires_grad=True)], max_lr, 'constant', total)
    assert none is None and constant.param_groups[0]['lr'] == max_lr and constant.param_groups[0]['momentum'] == 0


def test_fit_steps_the_scheduler_like_torch_and_the_cycle_stops_at_its_end():
    x, y = blobs(80)
    fs.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 2))
    tm = torch_copy(model, torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    opt, sched = cli.make_optimizer(model.parameters(), 0.5, 'one-cycle', 20)
    topt = torch.optim.SGD(tm.parameters(), lr=0.5)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.5, total_steps=20, cycle_momentum=False)
    h = fit(model, nn.CrossEntropyLoss(), opt, DataLoader(ArrayDataset(x, y), 8), epochs=2, progress=False, scheduler=sched)
    th = fit(tm, torch.nn.CrossEntropyLoss(), topt, DataLoader(ArrayDataset(x, y), 8, collate_fn=default_collate), epochs=2,
             progress=False, scheduler=tsched)
    check_close(h.train_loss, th.train_loss, rtol=1e-5, atol=1e-6, name='losses')
    for (k, v), tv in zip(model.state_dict().items(), tm.state_dict().values()): check_close(v, tv, rtol=1e-5, atol=1e-6, name=k)
    assert sched.last_epoch == tsched.last_epoch == 20 and sched.get_last_lr() == tsched.get_last_lr()
    with pytest.raises(ValueError) as ours: sched.step()
    with pytest.raises(ValueError) as theirs: tsched.step()
    assert str(ours.value) == 'Tried to step 21 times. The specified number of total steps is 20' == str(theirs.value)


def test_train_epoch_steps_the_scheduler_after_each_optimizer_step():
    x, y = line_data(30)
    model = nn.Linear(1, 1)
    opt = optim.SGD(model.parameters(), lr=1.0)
    sched = fs.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 ** t)
    seen = []
    class Watch:
        def step(self): seen.append(opt.param_groups[0]['lr']); sched.step()
    train_epoch(model, nn.MSELoss(), opt, DataLoader(ArrayDataset(x, y), 10), Watch())
    assert seen == [1.0, 0.5, 0.25] and opt.param_groups[0]['lr'] == 0.125


def test_cli_defaults_reach_the_target_and_the_readme_shows_them():
    r = run_cli()
    assert r.returncode == 0 and r.stderr == ''
    *epochs, last = r.stdout.splitlines()
    accuracy, loss, seconds = map(float, RESULT.match(last).groups())
    assert len(epochs) == 5 and accuracy >= 0.92
    readme = (ROOT / 'README.md').read_text()
    block = readme.split('$ python -m fromscratch.train\n', 1)[1].split('```', 1)[0].splitlines()
    assert block[:5] == epochs and block[5].rsplit(' ', 1)[0] == last.rsplit(' ', 1)[0]


def test_cli_full_without_network_fails_clearly(tmp_path):
    port = closed_port()
    r = run_cli('--full', '--mirror', f'http://127.0.0.1:{port}/', '--mirror', f'http://127.0.0.1:{port}/other/',
                env={'FROMSCRATCH_CACHE': str(tmp_path / 'cache')}, timeout=120)
    assert r.returncode == 1 and r.stdout == ''
    assert r.stderr.startswith('python -m fromscratch.train: error: Could not download the full MNIST set')
    assert f'127.0.0.1:{port}' in r.stderr and 'Without --full, the embedded sample needs no network.' in r.stderr
    assert 'Traceback' not in r.stderr
    assert not (tmp_path / 'cache').exists()    # nothing left behind


# ---------------------------------------------------------------- threads, pipes and notices

# In the child: report the threads of numpy's OpenBLAS as the run starts, asked of the library itself
# (not through fromscratch), and the thread variables that processes started by the run inherit.
REPORT_THREADS = """
import ctypes, os
import fromscratch.train as cli
def blas_threads():
    for path in {l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l.lower() and '/' in l}:
        lib = ctypes.CDLL(path)
        for name in ('scipy_openblas_get_num_threads64_', 'openblas_get_num_threads'):
            if hasattr(lib, name): return getattr(lib, name)()
real_train = cli.train
def train(args, *rest):
    print('threads', blas_threads(), os.environ['OMP_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'],
          file=sys.stderr)
    return real_train(args, *rest)
cli.train = train
"""


@pytest.mark.skipif(not os.path.exists('/proc/self/maps'), reason='reads the loaded libraries from /proc')
@pytest.mark.parametrize('env_threads, args, expected', [
    ('2', [], '1'),                          # the default pins one thread, whatever the shell says
    (None, ['--threads', '2'], '2'),         # numpy started with its own default
    ('1', ['--threads', '2'], '2'),
])
def test_cli_threads_are_what_was_asked(env_threads, args, expected):
    env = {k: v for k, v in os.environ.items() if k not in cli.THREAD_VARS}
    if env_threads: env.update({k: env_threads for k in cli.THREAD_VARS})
    r = subprocess.run([sys.executable, '-c', f"import sys\n{REPORT_THREADS}\nsys.exit(cli.main(sys.argv[1:]))",
                        '--train-size', '64', '--epochs', '1', *args],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [f'threads {expected} {expected} {expected}'], r.stderr
    assert RESULT.match(r.stdout.splitlines()[-1])


def test_blas_threads_follow_set_blas_threads(monkeypatch):
    for k in cli.THREAD_VARS: monkeypatch.setenv(k, '1')         # restored after the test
    if cli.blas_threads() is None: pytest.skip("numpy's BLAS is not an OpenBLAS found in /proc/self/maps")
    try: assert [cli.set_blas_threads(n) for n in (2, 1)] == [2, 1] and os.environ['OMP_NUM_THREADS'] == '1'
    finally: cli.set_blas_threads(1)


def test_threads_notice():
    assert cli.threads_notice(1, 1) is None
    assert cli.threads_notice(2, 1) == "numpy's BLAS took 1 threads, not the 2 asked for"
    assert cli.threads_notice(3, None).endswith(
        'start with OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3 MKL_NUM_THREADS=3 to pin them')


def test_cli_bad_threads_fail_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(cli, 'set_blas_threads', lambda n: pytest.fail('threads were set'))
    monkeypatch.setattr(cli, 'train', lambda *a: pytest.fail('the run started'))
    with pytest.raises(SystemExit) as e: cli.main(['--threads', '-1'])
    assert e.value.code == 2 and capsys.readouterr().out == ''


@pytest.mark.parametrize('args, notice', [
    (['--train-size', '3', '--epochs', '2'],
     'one batch per epoch: --batch-size 32 is at least the 3 training images, so each of the 2 epochs is one step'),
    (['--train-size', '100', '--batch-size', '100000', '--epochs', '2'],
     'one batch per epoch: --batch-size 100,000 is at least the 100 training images, so each of the 2 epochs is one step'),
])
def test_cli_one_batch_per_epoch_is_said_in_one_line(args, notice, capsys):
    assert cli.main([*args, '--progress', 'never']) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f'python -m fromscratch.train: warning: {notice}']
    assert [l.split()[1] for l in out.splitlines()[:-1]] == ['step=1', 'step=2']


def test_no_notice_when_an_epoch_has_two_batches():
    assert cli.one_batch_notice(cli.parse_args(['--train-size', '33'])) is None
    assert cli.one_batch_notice(cli.parse_args(['--full', '--batch-size', '60000'])) is not None


def test_cli_into_a_pipe_closed_before_it_writes_exits_quietly():
    read, write = os.pipe()
    os.close(read)                                    # the reader is gone before the first line
    try:
        r = subprocess.run([sys.executable, '-m', 'fromscratch.train', '--train-size', '300', '--epochs', '3'],
                           stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally: os.close(write)
    assert r.returncode == 0 and r.stderr == '', r.stderr


def test_cli_into_head_exits_quietly():
    train = subprocess.Popen([sys.executable, '-m', 'fromscratch.train', '--train-size', '300', '--epochs', '4'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    head = subprocess.run(['head', '-1'], stdin=train.stdout, capture_output=True, text=True, timeout=120)
    train.stdout.close()
    err = train.stderr.read().decode(); train.stderr.close()
    assert train.wait(timeout=120) == 0, err
    assert head.stdout.startswith('epoch=1 step=10 ') and head.stdout.count('\n') == 1
    assert 'Broken pipe' not in err and 'error' not in err and 'Traceback' not in err, err
