"""The training loop and its command line: `fit` learns, `evaluate` and `accuracy` count right, our runs
equal torch's step for step, and `python -m fromscratch.train` works end to end and fails clearly."""
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

import fromscratch as fs
import fromscratch.train as cli
from fromscratch import nn, optim
from fromscratch.data import ArrayDataset, DataLoader
from fromscratch.testing import check_close
from fromscratch.training import (History, accuracy, evaluate, fit, format_row, mnist_datasets, mnist_mlp,
                                  no_grad_for, plot_history, show_progress, train_epoch)

ROOT = Path(__file__).resolve().parents[1]
RESULT = re.compile(r'^accuracy=(\S+) loss=(\S+) seconds=(\S+)$')
OPTIONS = ['--epochs', '--batch-size', '--lr', '--seed', '--plot', '--full', '--train-size', '--progress', '--mirror']


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


def run_cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, '-m', 'fromscratch.train', *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=timeout)


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
    (['--lr', 'fast'], "argument --lr: expected a number, got 'fast'"),
    (['--seed', '-1'], 'argument --seed: must be at least 0, got -1'),
    (['--train-size', '0'], 'argument --train-size: must be greater than 0'),
    (['--progress', 'sometimes'], "argument --progress: invalid choice: 'sometimes'"),
    (['--plot', 'loss.jpg'], 'argument --plot: the plot is a PNG image'),
    (['--plot', 'no/such/folder/loss.png'], "argument --plot: the folder 'no/such/folder' does not exist"),
    (['--mirror', 'http://example.org/'], 'argument --mirror: only used with --full'),
    (['--learning-rate', '0.1'], 'unrecognized arguments: --learning-rate 0.1'),
    (['--epochs'], 'argument --epochs: expected one argument'),
])
def test_cli_bad_arguments_exit_2_with_a_message(capsys, args, message):
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == '' and err.startswith('usage: python -m fromscratch.train')
    assert f'python -m fromscratch.train: error: {message}' in err


def test_cli_plot_into_a_folder_path_is_refused(tmp_path, capsys):
    (tmp_path / 'curve.png').mkdir()
    with pytest.raises(SystemExit) as e:
        cli.main(['--plot', str(tmp_path / 'curve.png')])
    assert e.value.code == 2 and 'is a folder' in capsys.readouterr().err


@pytest.mark.skipif(hasattr(os, 'geteuid') and os.geteuid() == 0, reason='root may write anywhere')
def test_cli_plot_into_a_read_only_folder_is_refused(tmp_path, capsys):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(SystemExit) as e:
            cli.main(['--plot', str(tmp_path / 'loss.png')])
    finally:
        tmp_path.chmod(0o700)
    assert e.value.code == 2 and 'no permission' in capsys.readouterr().err


def test_cli_bad_arguments_in_a_real_process_exit_2_without_traceback():
    r = run_cli('--batch-size', '-3')
    assert r.returncode == 2 and r.stdout == ''
    assert 'error: argument --batch-size: must be greater than 0' in r.stderr and 'Traceback' not in r.stderr


def test_cli_full_without_network_fails_clearly(tmp_path):
    port = closed_port()
    r = run_cli('--full', '--mirror', f'http://127.0.0.1:{port}/', '--mirror', f'http://127.0.0.1:{port}/other/',
                env={'FROMSCRATCH_CACHE': str(tmp_path / 'cache')}, timeout=120)
    assert r.returncode == 1 and r.stdout == ''
    assert r.stderr.startswith('python -m fromscratch.train: error: Could not download the full MNIST set')
    assert f'127.0.0.1:{port}' in r.stderr and 'Without --full, the embedded sample needs no network.' in r.stderr
    assert 'Traceback' not in r.stderr
    assert not (tmp_path / 'cache').exists()    # nothing left behind
