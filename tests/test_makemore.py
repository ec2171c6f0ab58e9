"""The names sample and its text tools (fromscratch.text), the lessons of 12b_makemore against torch, and
`python -m fromscratch.train --model gpt`."""
import gzip
import hashlib
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch.lessons.makemore import (
    batch_norm_backward,
    bn_mlp_backward,
    bn_mlp_forward,
    bn_mlp_params,
    cross_entropy_backward,
    embedding_backward,
    mlp_logits,
    mlp_params,
    sample_words,
)
from fromscratch.testing import check_close
from fromscratch.text import (
    NAMES_PATH,
    NAMES_SHA256,
    CharVocab,
    DamagedNamesError,
    bigram_counts,
    bigram_loss,
    bigram_pairs,
    bigram_probs,
    context_windows,
    name_sequences,
    names_sample,
    read_names_sample,
    split_words,
)
from fromscratch.train import TRAIN_NAMES

torch.set_num_threads(1)


@pytest.fixture(scope='module')
def words(): return names_sample()


@pytest.fixture(scope='module')
def vocab(words): return CharVocab(words)


def test_the_sample_is_the_census_lists_checked_by_its_hash():
    lists = read_names_sample()
    assert list(lists) == ['first names', 'surnames']
    assert len(lists['surnames']) == 88_799 and len(lists['first names']) == 5_163
    assert lists['surnames'][:3] == ['smith', 'johnson', 'williams']
    assert all(re.fullmatch('[a-z]+', w) for ws in lists.values() for w in ws)
    assert len(set(lists['first names'])) == len(lists['first names'])
    assert hashlib.sha256(gzip.decompress(NAMES_PATH.read_bytes())).hexdigest() == NAMES_SHA256


def test_names_sample_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of"): names_sample('middle names')


@pytest.mark.parametrize('damage', ['flip a bit', 'truncate', 'not gzip', 'missing'])
def test_a_damaged_sample_says_how_to_restore_it(tmp_path, damage):
    path = tmp_path / 'names_sample.txt.gz'
    text = bytearray(gzip.decompress(NAMES_PATH.read_bytes()))
    if damage == 'flip a bit':
        text[1000] ^= 4
        path.write_bytes(gzip.compress(bytes(text)))
    elif damage == 'truncate': path.write_bytes(NAMES_PATH.read_bytes()[:5000])
    elif damage == 'not gzip': path.write_bytes(bytes(text[:100]))
    with pytest.raises(DamagedNamesError, match='git checkout -- fromscratch/names_sample.txt.gz'):
        read_names_sample(path)


def test_char_vocab_numbers_the_boundary_first_and_round_trips(words, vocab):
    assert len(vocab) == 27 and vocab.itos[0] == '.' and vocab.stoi['a'] == 1 and vocab.stoi['z'] == 26
    for w in words[:500]: assert vocab.decode(vocab.encode(w)) == w
    assert repr(vocab) == "CharVocab('.abcdefghijklmnopqrstuvwxyz')"
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['1', 'é'\]"): vocab.encode('sé1')
    with pytest.raises(ValueError, match='boundary'): CharVocab(['a.b'])


def test_split_is_seeded_disjoint_and_complete(words):
    train, valid = split_words(words)
    assert len(train) == TRAIN_NAMES == 79_919 and len(valid) == 8_880
    assert sorted(train + valid) == sorted(words)
    assert split_words(words) == (train, valid) and split_words(words, seed=1) != (train, valid)
    assert split_words(['a', 'b', 'c'], valid_fraction=0.0) == (
        [['a', 'b', 'c'][i] for i in np.random.default_rng(0).permutation(3)], [])


def test_bigram_counts_equal_a_plain_loop(words, vocab):
    sample = words[:300]
    loop = np.zeros((27, 27), np.int64)
    for w in sample:
        ids = [0, *vocab.encode(w), 0]
        for a, b in zip(ids, ids[1:]): loop[a, b] += 1
    assert (bigram_counts(sample, vocab) == loop).all()
    first, second = bigram_pairs(sample, vocab)
    assert len(first) == sum(len(w) + 1 for w in sample)


def test_bigram_loss_is_the_mean_negative_log_probability(words, vocab):
    train, valid = split_words(words)
    probs = bigram_probs(bigram_counts(train, vocab))
    check_close(probs.sum(axis=1), np.ones(27), rtol=1e-12)
    nll = [-math.log(probs[a, b]) for w in valid[:200]
           for a, b in zip([0, *vocab.encode(w)], [*vocab.encode(w), 0])]
    check_close(bigram_loss(probs, valid[:200], vocab), np.mean(nll), rtol=1e-12)
    assert 2.5 < bigram_loss(probs, valid, vocab) < 2.6


def test_context_windows_and_name_sequences(vocab):
    X, Y = context_windows(['ab', 'c'], vocab, 2)
    assert X.tolist() == [[0, 0], [0, 1], [1, 2], [0, 0], [0, 3]] and Y.tolist() == [1, 2, 0, 3, 0]
    X, Y = name_sequences(['ab', 'c'], vocab, 4)
    assert X.tolist() == [[0, 1, 2, 0], [0, 3, 0, 0]]
    assert Y.tolist() == [[1, 2, 0, -1], [3, 0, -1, -1]]
    with pytest.raises(ValueError, match="'abcd' has 4 characters; block_size 4 holds at most 3"):
        name_sequences(['abcd'], vocab, 4)


def test_mlp_gradients_equal_torchs(words, vocab):
    X, Y = context_windows(words[:50], vocab, 3)
    p = {k: v.double().requires_grad_() for k, v in mlp_params().items()}
    t = {k: torch.tensor(v.detach().numpy(), requires_grad=True) for k, v in p.items()}
    fs.nn.functional.cross_entropy(mlp_logits(p, fs.tensor(X)), fs.tensor(Y)).backward()
    torch.nn.functional.cross_entropy(mlp_logits(t, torch.tensor(X)), torch.tensor(Y)).backward()
    for k in p: check_close(p[k].grad.numpy(), t[k].grad.numpy(), rtol=1e-10, atol=1e-12, name=k)


@pytest.mark.parametrize('seed', range(4))
@pytest.mark.parametrize('batch', [2, 7, 32])
def test_every_hand_written_gradient_equals_autograds_and_torchs(words, vocab, seed, batch):
    X, Y = (fs.tensor(a[seed * 40:seed * 40 + batch]) for a in context_windows(words[:400], vocab, 3))
    p = {k: v.double().requires_grad_() for k, v in bn_mlp_params(generator=fs.Generator(seed)).items()}
    loss, cache = bn_mlp_forward(p, X, Y)
    manual = bn_mlp_backward(p, cache)
    loss.backward()
    t = {k: torch.tensor(v.detach().numpy(), requires_grad=True) for k, v in p.items()}
    a = torch.nn.functional.embedding(torch.tensor(X.numpy()), t['C']).view(batch, -1) @ t['W1']
    h = torch.nn.functional.batch_norm(a, None, None, t['gain'], t['bias'], training=True).tanh()
    t_loss = torch.nn.functional.cross_entropy(h @ t['W2'] + t['b2'], torch.tensor(Y.numpy()))
    t_loss.backward()
    check_close(loss.item(), t_loss.item(), rtol=1e-12, atol=0)
    for k in p:
        check_close(manual[k].numpy(), p[k].grad.numpy(), rtol=1e-9, atol=1e-12, name=f'{k} autograd')
        check_close(manual[k].numpy(), t[k].grad.numpy(), rtol=1e-9, atol=1e-12, name=f'{k} torch')


def test_the_pieces_of_the_hand_written_backward():
    rng = np.random.default_rng(0)
    logits, y = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    z = torch.tensor(logits, requires_grad=True)
    torch.nn.functional.cross_entropy(z, torch.tensor(y)).backward()
    check_close(cross_entropy_backward(fs.tensor(logits), fs.tensor(y)).numpy(), z.grad.numpy(),
                rtol=1e-12, atol=1e-15)
    a, gain, g = rng.standard_normal((6, 3)), rng.standard_normal(3), rng.standard_normal((6, 3))
    at, gt = torch.tensor(a, requires_grad=True), torch.tensor(gain, requires_grad=True)
    bt = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.batch_norm(at, None, None, gt, bt, training=True, eps=1e-5).backward(torch.tensor(g))
    invstd = 1 / np.sqrt(a.var(0, keepdims=True) + 1e-5)
    ahat = (a - a.mean(0, keepdims=True)) * invstd
    da, dgain, dbias = batch_norm_backward(*(fs.tensor(v) for v in (g, ahat, invstd, gain)))
    for ours, theirs in ((da, at.grad), (dgain, gt.grad), (dbias, bt.grad)):
        check_close(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-13)
    X, grad_emb = rng.integers(0, 4, (5, 3)), rng.standard_normal((5, 3, 2))
    expected = np.zeros((4, 2))
    np.add.at(expected, X, grad_emb)
    check_close(embedding_backward(fs.tensor(grad_emb), fs.tensor(X), 4).numpy(), expected, rtol=1e-12)


def test_sample_words_draws_from_the_model_and_stops_at_the_boundary(vocab):
    always_ab = lambda ctx: fs.tensor([0.0, 1.0] + [0.0] * 25) if ctx[-1] == 0 else \
        fs.tensor([0.0, 0.0, 1.0] + [0.0] * 24) if ctx[-1] == 1 else fs.tensor([1.0] + [0.0] * 26)
    assert sample_words(always_ab, vocab, 3) == ['ab', 'ab', 'ab']
    assert all(len(w) == 5 for w in sample_words(lambda ctx: fs.tensor([0.0] + [1.0] * 26), vocab, 3,
                                                 max_length=5))
    a = sample_words(lambda ctx: fs.ones(27), vocab, 5, generator=fs.Generator(3))
    assert a == sample_words(lambda ctx: fs.ones(27), vocab, 5, generator=fs.Generator(3))


def run_train(*args):
    return subprocess.run([sys.executable, '-m', 'fromscratch.train', '--model', 'gpt', *args],
                          capture_output=True, text=True, timeout=1200)


def test_cli_gpt_default_run_beats_the_bigram_by_a_quarter_nat():
    run = run_train('--progress', 'never')
    assert run.returncode == 0, run.stderr
    names_line, last = run.stdout.strip().split('\n')[-2:]
    assert re.fullmatch(r'names:( [a-z]*){5}', names_line)
    m = re.fullmatch(r'loss=(\d+\.\d{4}) bigram=(\d+\.\d{4}) seconds=(\d+\.\d{2})', last)
    assert m, last
    loss, bigram, seconds = map(float, m.groups())
    assert abs(bigram - 2.5652) < 1e-4
    assert loss <= bigram - 0.25
    assert seconds < 600


@pytest.mark.parametrize('args, message', [
    (['--full'], 'argument --full: not for --model gpt, which reads names'),
    (['--mirror', 'https://example.com/mnist/'], 'argument --mirror: only used with --full'),
    (['--nproc', '2'], 'argument --nproc: not for --model gpt, which reads names'),
    (['--train-size', '80000'], 'argument --train-size: the surnames have 79,919 training names, got 80,000'),
    (['--lr', '0'], 'argument --lr'),
])
def test_cli_gpt_bad_options_exit_2_with_one_line(args, message):
    run = run_train(*args)
    assert run.returncode == 2 and message in run.stderr and 'Traceback' not in run.stderr


def test_cli_gpt_short_run_is_seeded_and_says_when_it_diverges(tmp_path):
    a = run_train('--train-size', '640', '--progress', 'never', '--plot', str(tmp_path / 'loss.png'))
    b = run_train('--train-size', '640', '--progress', 'never')
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout.split('seconds=')[0] == b.stdout.split('seconds=')[0]
    assert (tmp_path / 'loss.png').read_bytes()[:4] == b'\x89PNG'
    bad = run_train('--train-size', '640', '--progress', 'never', '--lr', '1e6')
    assert bad.returncode == 1 and 'training diverged' in bad.stderr and 'Traceback' not in bad.stderr
