"""fromscratch.utils.data against torch.utils.data: datasets, samplers, DataLoader's options, collation, random_split.
Shuffled orders come from a different random generator than torch's, so for them the tests check the semantics
(every index once per epoch, sizes, reproducibility); everything else is compared with torch value for value."""
import itertools
import subprocess
import sys
import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import fromscratch as fs
import fromscratch.data
import fromscratch.utils.data
from fromscratch.utils.data import (ArrayDataset, BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset,
                                    RandomSampler, Sampler, SequentialSampler, Subset, TensorDataset, default_collate,
                                    default_convert, random_split)

TU = torch.utils.data
TORCH_NAMES = ['Dataset', 'TensorDataset', 'Subset', 'random_split', 'Sampler', 'SequentialSampler', 'RandomSampler',
               'BatchSampler', 'default_collate', 'default_convert', 'DataLoader', 'ConcatDataset', 'IterableDataset',
               'ChainDataset']


def same(ours, theirs):
    "Our batch equals torch's: the same structure (list, dict, namedtuple...), and tensors of the same dtype, shape, values."
    if isinstance(theirs, (torch.Tensor, fs.Tensor)):              # torch's, or another batch of ours
        assert isinstance(ours, fs.Tensor), type(ours)
        assert str(ours.dtype) == str(theirs.dtype).removeprefix('torch.') and ours.shape == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs: same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (type(ours), type(theirs))
        for o, t in zip(ours, theirs): same(o, t)
    elif isinstance(theirs, np.ndarray): assert type(ours) is np.ndarray and ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    else: assert ours == theirs and type(ours) is type(theirs)


# ---------------------------------------------------------------- where the names live

def test_names_are_torchs_and_the_same_objects_as_in_fromscratch_data():
    for name in TORCH_NAMES:
        assert hasattr(TU, name) and name in fromscratch.utils.data.__all__
        assert getattr(fromscratch.utils.data, name) is getattr(fromscratch.data, name)
    assert fs.utils.data is fromscratch.utils.data and fs.Generator is fs.core.Generator


@pytest.mark.parametrize('code', ['import fromscratch as fs; fs.utils.data.DataLoader',
                                  'import fromscratch.utils.data; fromscratch.utils.data.random_split',
                                  'from fromscratch.utils.data import DataLoader, TensorDataset',
                                  'import fromscratch.utils.data as d; import fromscratch.data; assert d.Subset is fromscratch.data.Subset'])
def test_importable_as_torchs(code):
    subprocess.run([sys.executable, '-c', code], check=True)


def test_a_torch_program_runs_by_changing_its_imports():
    "The same data pipeline and training loop, once on torch and once on fromscratch: the same losses."
    program = '''
ds = TensorDataset(lib.tensor(X, dtype=lib.float32), lib.tensor(Y, dtype=lib.float32))
train, valid = Subset(ds, list(range(48))), Subset(ds, list(range(48, 60)))
model = lib.nn.Linear(3, 1)
with lib.no_grad(): model.weight.copy_(lib.tensor(W0)); model.bias.zero_()
opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
losses = []
for epoch in range(3):
    for xb, yb in DataLoader(train, batch_size=10, num_workers=0):
        loss = lib.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        losses.append(loss.item())
    with lib.no_grad():
        losses.append(sum(lib.nn.functional.mse_loss(model(xb), yb).item() for xb, yb in DataLoader(valid, batch_size=6)))
'''
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    Y, W0 = X @ [[1.0], [-2.0], [0.5]] + 0.1, rng.standard_normal((1, 3))
    results = []
    for lib, data in ((torch, torch.utils.data), (fs, fs.utils.data)):
        scope = dict(lib=lib, X=X, Y=Y, W0=W0, TensorDataset=data.TensorDataset, Subset=data.Subset, DataLoader=data.DataLoader)
        exec(program, scope)
        results.append(scope['losses'])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5)


# ---------------------------------------------------------------- datasets

def test_tensor_dataset_like_torchs():
    x, y = np.arange(12.0).reshape(6, 2), np.arange(6)
    ours, theirs = TensorDataset(fs.tensor(x), fs.tensor(y)), TU.TensorDataset(torch.tensor(x), torch.tensor(y))
    assert len(ours) == len(theirs) == 6
    for i in (0, 5, -1, slice(1, 4), [4, 0]): same(list(ours[i]), list(theirs[i]))
    with pytest.raises(AssertionError) as a: TensorDataset(fs.zeros(3), fs.zeros(4))
    with pytest.raises(AssertionError) as b: TU.TensorDataset(torch.zeros(3), torch.zeros(4))
    assert str(a.value) == str(b.value) == 'Size mismatch between tensors'


def test_batches_of_a_tensor_dataset_carry_gradients_like_torchs():
    x = np.random.default_rng(0).standard_normal((10, 3))
    w, tw = fs.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for (xb,), (txb,) in zip(DataLoader(TensorDataset(w), batch_size=4), TU.DataLoader(TU.TensorDataset(tw), batch_size=4)):
        assert xb.requires_grad and txb.requires_grad
        (xb ** 2).sum().backward(); (txb ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())


def test_subset_like_torchs():
    data = [(i, 2.0 * i) for i in range(10)]
    ours, theirs = Subset(data, [7, 2, 5]), TU.Subset(data, [7, 2, 5])
    assert len(ours) == len(theirs) == 3 and ours[0] == theirs[0] == (7, 14.0) and ours[-1] == theirs[-1]
    arr = np.arange(10)
    assert Subset(arr, [7, 2, 5])[[0, 2]].tolist() == TU.Subset(arr, [7, 2, 5])[[0, 2]].tolist() == [7, 5]
    same(list(DataLoader(ours, batch_size=2)), list(TU.DataLoader(theirs, batch_size=2)))


def test_subset_of_an_array_dataset_keeps_the_fast_path():
    calls = []
    class Counting(ArrayDataset):
        def __getitem__(self, i): calls.append(i); return super().__getitem__(i)
    ds = Counting(np.arange(20), np.arange(20) * 10)
    fast = list(DataLoader(Subset(ds, list(range(19, -1, -2))), batch_size=3))
    assert calls == [] and [b[0].tolist() for b in fast] == [[19, 17, 15], [13, 11, 9], [7, 5, 3], [1]]
    slow = list(DataLoader(Subset(ds, list(range(19, -1, -2))), batch_size=3, collate_fn=lambda s: default_collate(s)))
    same(fast, slow)
    no_batch = list(DataLoader(Subset(list(zip(range(20), range(0, 200, 10))), list(range(19, -1, -2))), batch_size=3))
    same(fast, no_batch)


# ---------------------------------------------------------------- the loader's options, against torch

SIZES = [0, 1, 7, 64, 100]


@pytest.mark.parametrize('n', SIZES)
@pytest.mark.parametrize('batch_size', [1, 3, 64, 1000, None])
@pytest.mark.parametrize('drop_last', [False, True])
def test_sequential_loaders_equal_torchs(n, batch_size, drop_last):
    x = np.random.default_rng(n).standard_normal((n, 2)).astype(np.float32)
    y = np.arange(n)
    def make(lib, data):
        ds = data.TensorDataset(lib.tensor(x), lib.tensor(y))
        return data.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
    if batch_size is None and drop_last:
        with pytest.raises(ValueError) as a: make(fs, fs.utils.data)
        with pytest.raises(ValueError) as b: make(torch, TU)
        assert str(a.value) == str(b.value)
        return
    ours, theirs = make(fs, fs.utils.data), make(torch, TU)
    assert len(ours) == len(theirs)
    same(list(ours), list(theirs))
    same(list(ours), list(DataLoader(ArrayDataset(x, y), batch_size=batch_size, drop_last=drop_last)))


@pytest.mark.parametrize('sampler', [[5, 1, 1, 3], range(9, -1, -3), [], SequentialSampler(range(10))], ids=str)
def test_a_given_sampler_like_torch(sampler):
    x = np.arange(10.0)
    for bs in (1, 2, None):
        ours = DataLoader(ArrayDataset(x), batch_size=bs, sampler=sampler)
        theirs = TU.DataLoader(TU.TensorDataset(torch.tensor(x)), batch_size=bs, sampler=sampler)
        assert len(ours) == len(theirs)
        same(list(ours), list(theirs))


def test_a_given_batch_sampler_like_torch():
    x, batches = np.arange(10.0), [[3, 1], [0], [9, 8, 7, 6]]
    same(list(DataLoader(ArrayDataset(x), batch_sampler=batches)), list(TU.DataLoader(TU.TensorDataset(torch.tensor(x)), batch_sampler=batches)))
    loader = DataLoader(ArrayDataset(x), batch_sampler=BatchSampler(range(10), 4, True))
    assert len(loader) == 2 and loader.batch_size is None and loader.drop_last is False


BAD_OPTIONS = [dict(shuffle=True, sampler=[0, 1]), dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], shuffle=True),
               dict(batch_sampler=[[0]], sampler=[0]), dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None, drop_last=True),
               dict(batch_size=0), dict(batch_size=-2), dict(batch_size=2.0), dict(batch_size=True), dict(drop_last=1),
               dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(num_workers=2, prefetch_factor=-1),
               dict(persistent_workers=True)]


@pytest.mark.parametrize('kwargs', BAD_OPTIONS, ids=str)
def test_options_that_do_not_fit_fail_in_torchs_words(kwargs):
    with pytest.raises(ValueError) as theirs: TU.DataLoader(TU.TensorDataset(torch.arange(4)), **kwargs)
    with pytest.raises(ValueError) as ours: DataLoader(ArrayDataset(np.arange(4)), **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_worker_options_change_nothing():
    ds = ArrayDataset(np.arange(50), np.arange(50) % 7)
    plain = list(DataLoader(ds, batch_size=8))
    workers = DataLoader(ds, batch_size=8, num_workers=4, pin_memory=True, prefetch_factor=3, persistent_workers=True,
                         worker_init_fn=lambda i: None, timeout=5)
    same(list(workers), plain)
    assert workers.num_workers == 4


def test_attributes_like_torchs():
    ours, theirs = DataLoader(ArrayDataset(np.arange(10)), batch_size=3), TU.DataLoader(TU.TensorDataset(torch.arange(10)), batch_size=3)
    assert type(ours.sampler).__name__ == type(theirs.sampler).__name__ == 'SequentialSampler'
    assert type(ours.batch_sampler).__name__ == type(theirs.batch_sampler).__name__ == 'BatchSampler'
    assert ours.batch_size == theirs.batch_size == 3 and ours.drop_last is theirs.drop_last is False
    assert ours.collate_fn is default_collate and theirs.collate_fn is TU.default_collate
    shuffled = DataLoader(ArrayDataset(np.arange(10)), shuffle=True, generator=fs.Generator())
    assert type(shuffled.sampler) is RandomSampler and shuffled.sampler.generator is shuffled.generator
    assert DataLoader(ArrayDataset(np.arange(10)), batch_size=None).collate_fn is default_convert


# ---------------------------------------------------------------- shuffling: the semantics

@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200), bs=st.integers(1, 70), drop_last=st.booleans(), seed=st.integers(0, 2**32))
def test_every_index_once_per_epoch_and_torchs_sizes(n, bs, drop_last, seed):
    loader = DataLoader(ArrayDataset(np.arange(n)), batch_size=bs, shuffle=True, drop_last=drop_last, generator=fs.Generator().manual_seed(seed))
    torch_loader = TU.DataLoader(TU.TensorDataset(torch.arange(n)), batch_size=bs, shuffle=True, drop_last=drop_last)
    assert len(loader) == len(torch_loader)
    orders = []
    for _ in range(2):
        batches = [b[0].tolist() for b in loader]
        assert [len(b) for b in batches] == [len(b[0]) for b in torch_loader]
        seen = sum(batches, [])
        assert len(seen) == len(set(seen)) == (n - n % bs if drop_last else n)
        orders.append(seen)
    if n > 8 and not drop_last: assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1]) == list(range(n))


def test_the_same_generator_seed_replays_the_same_epochs():
    def epochs(generator, k=3):
        dl = DataLoader(ArrayDataset(np.arange(40)), batch_size=6, shuffle=True, generator=generator)
        return [[b[0].tolist() for b in dl] for _ in range(k)]
    a, b, c = epochs(fs.Generator().manual_seed(5)), epochs(fs.Generator().manual_seed(5)), epochs(fs.Generator().manual_seed(6))
    assert a == b and a != c and len({str(e) for e in a}) == 3
    shared = fs.Generator().manual_seed(5)                      # one generator, two loaders: they take turns drawing from it
    dl1 = DataLoader(ArrayDataset(np.arange(40)), batch_size=6, shuffle=True, generator=shared)
    dl2 = DataLoader(ArrayDataset(np.arange(40)), batch_size=6, shuffle=True, generator=shared)
    assert [b[0].tolist() for b in dl1] == a[0] and [b[0].tolist() for b in dl2] == a[1]


def test_without_a_generator_manual_seed_replays_like_torchs():
    for lib, data in ((fs, fs.utils.data), (torch, TU)):
        def run(seed):
            lib.manual_seed(seed)
            dl = data.DataLoader(data.TensorDataset(lib.arange(30)), batch_size=30, shuffle=True)
            return [next(iter(dl))[0].tolist() for _ in range(3)]
        assert run(1) == run(1) and run(1) != run(2) and len({str(e) for e in run(1)}) == 3


@pytest.mark.parametrize('n,num_samples,replacement', [(10, None, False), (10, 25, False), (10, 3, False), (10, 25, True),
                                                        (10, None, True), (1, 5, False), (7, 100, True)])
def test_random_sampler_sizes_and_coverage(n, num_samples, replacement):
    ours = RandomSampler(range(n), replacement=replacement, num_samples=num_samples, generator=fs.Generator().manual_seed(0))
    theirs = TU.RandomSampler(range(n), replacement=replacement, num_samples=num_samples)
    assert len(ours) == len(theirs)
    got = list(ours)
    assert len(got) == len(list(theirs)) == len(ours) and all(0 <= i < n for i in got)
    if not replacement:
        counts = np.bincount(got, minlength=n)
        k = len(got)
        assert counts.max() - counts.min() <= 1 and counts.min() == k // n       # whole permutations, then part of one
        assert len(set(got[k - k % n:])) == k % n


@pytest.mark.parametrize('kwargs,exc', [(dict(num_samples=0), ValueError), (dict(num_samples=2.5), ValueError),
                                        (dict(replacement=1), TypeError), (dict(), ValueError)], ids=str)
def test_random_sampler_refuses_what_torch_refuses(kwargs, exc):
    data = range(0) if not kwargs else range(5)
    with pytest.raises(exc) as theirs: TU.RandomSampler(data, **kwargs)
    with pytest.raises(exc) as ours: RandomSampler(data, **kwargs)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize('n,bs,drop_last', list(itertools.product([0, 1, 5, 12, 13], [1, 4, 12, 20], [False, True])))
def test_batch_sampler_equals_torchs(n, bs, drop_last):
    order = list(np.random.default_rng(n).permutation(n))
    ours, theirs = BatchSampler(order, bs, drop_last), TU.BatchSampler(order, bs, drop_last)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize('bs,drop_last', [(0, False), (-1, False), (2.0, False), (True, False), ('2', False), (2, 1), (2, None)])
def test_batch_sampler_refuses_what_torch_refuses(bs, drop_last):
    with pytest.raises(ValueError) as theirs: TU.BatchSampler(range(4), bs, drop_last)
    with pytest.raises(ValueError) as ours: BatchSampler(range(4), bs, drop_last)
    assert str(ours.value) == str(theirs.value)


def test_sampler_base_class():
    class Evens(Sampler):
        def __init__(self, n): self.n = n
        def __iter__(self): return iter(range(0, self.n, 2))
        def __len__(self): return (self.n + 1) // 2
    same(list(DataLoader(ArrayDataset(np.arange(9)), batch_size=2, sampler=Evens(9))),
         list(TU.DataLoader(TU.TensorDataset(torch.arange(9)), batch_size=2, sampler=Evens(9))))
    with pytest.raises(NotImplementedError): iter(Sampler())


# ---------------------------------------------------------------- collation

Pair = namedtuple('Pair', 'x y')
DTYPES = ['uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64', 'bool']


def both(make):
    "Collate the samples `make(lib)` gives, for lib ours and torch's, each with its own default_collate."
    return default_collate(make(fs)), TU.default_collate(make(torch))


@pytest.mark.parametrize('dtype', DTYPES)
def test_collate_arrays_and_numpy_scalars_keep_their_dtype(dtype):
    rng = np.random.default_rng(0)
    samples = [((rng.random((2, 3)) * 50).astype(dtype), np.array(rng.random() * 50).astype(dtype)[()]) for _ in range(4)]
    same(default_collate(samples), TU.default_collate(samples))
    same(default_convert(samples[0]), TU.default_convert(samples[0]))


@pytest.mark.parametrize('make', [
    lambda lib: [lib.tensor([1.0, 2.0]) * i for i in range(3)],
    lambda lib: [(lib.tensor([[i, i]]), lib.tensor(i)) for i in range(3)],
    lambda lib: [1, 2, 3], lambda lib: [1.5, 2.0], lambda lib: [True, False], lambda lib: [1, 2.5], lambda lib: [True, 2],
    lambda lib: ['a', 'b'], lambda lib: [b'a', b'b'],
    lambda lib: [{'img': np.full((2, 2), i, np.float32), 'label': i, 'name': f's{i}'} for i in range(3)],
    lambda lib: [Pair(np.array([i, i]), float(i)) for i in range(3)],
    lambda lib: [[i, np.float32(i), (i, 'x')] for i in range(3)],
    lambda lib: [{'a': [Pair(i, 1.0), {'b': np.int16(i)}]} for i in range(2)],
    lambda lib: [(np.zeros((0, 3)), 1)] * 2,
], ids=lambda f: '')
def test_collate_structures_like_torch(make):
    same(*both(make))


def test_collate_stacks_tensors_that_need_grad_and_gradients_flow():
    xs, txs = [fs.tensor([1.0, 2.0], requires_grad=True) for _ in range(3)], [torch.tensor([1.0, 2.0], requires_grad=True) for _ in range(3)]
    ours, theirs = default_collate(xs), TU.default_collate(txs)
    (ours * fs.tensor([[1.0, 2.0]])).sum().backward(); (theirs * torch.tensor([[1.0, 2.0]])).sum().backward()
    assert [x.grad.tolist() for x in xs] == [t.grad.tolist() for t in txs]


@pytest.mark.parametrize('samples,exc', [([np.zeros(3), np.zeros(2)], RuntimeError), ([np.zeros((2, 2)), np.zeros((2, 3))], RuntimeError),
                                         ([(1, 2), (1, 2, 3)], RuntimeError), ([[1], [1, 2]], RuntimeError), ([None, None], TypeError),
                                         ([np.array(['a']), np.array(['b'])], TypeError), ([object()], TypeError),
                                         ([np.array([1, 'a'], dtype=object)], TypeError)], ids=str)
def test_collate_refuses_what_torch_refuses_in_its_words(samples, exc):
    with pytest.raises(exc) as theirs: TU.default_collate(samples)
    with pytest.raises(exc) as ours: default_collate(samples)
    assert str(ours.value) == str(theirs.value)


def test_collate_of_unequal_sizes_names_both():
    with pytest.raises(RuntimeError, match=r'stack expects each tensor to be equal size, but got \[3\] at entry 0 and \[2\] at entry 1'):
        default_collate([fs.zeros(3), fs.zeros(2)])


@pytest.mark.parametrize('data', [np.arange(3), (np.arange(2), [np.float32(1), 'a']), {'k': (np.zeros(2), 3)}, Pair(np.ones(1), 2),
                                  np.array(['a', 'b']), 'text', 5, [np.bool_(True)]], ids=str)
def test_default_convert_like_torchs(data):
    same(default_convert(data), TU.default_convert(data))


def test_a_loader_without_batching_converts_each_sample_like_torchs():
    x = np.arange(6.0).reshape(3, 2)
    same(list(DataLoader(ArrayDataset(x, np.arange(3)), batch_size=None)),
         list(TU.DataLoader(list(zip(x, np.arange(3))), batch_size=None)))


# ---------------------------------------------------------------- random_split

@pytest.mark.parametrize('n,lengths', [(10, [3, 7]), (10, [0.3, 0.7]), (10, [1/3, 1/3, 1/3]), (7, [0.5, 0.5]), (100, [0.8, 0.1, 0.1]),
                                       (5, [0.1, 0.9]), (3, [0.25, 0.25, 0.25, 0.25]), (0, [0, 0]), (10, [10]), (1, [1.0]),
                                       (4000, [0.8, 0.2]), (11, [0.6, 0.2, 0.2])], ids=str)
def test_random_split_sizes_like_torchs_and_disjoint(n, lengths):
    with warnings.catch_warnings(record=True) as theirs_w:
        warnings.simplefilter('always')
        theirs = TU.random_split(range(n), lengths)
    with warnings.catch_warnings(record=True) as ours_w:
        warnings.simplefilter('always')
        ours = random_split(range(n), lengths, generator=fs.Generator().manual_seed(n))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert [str(w.message) for w in ours_w] == [str(w.message) for w in theirs_w]
    assert all(type(s) is Subset and s.dataset == range(n) for s in ours)
    everything = [i for s in ours for i in s]
    assert sorted(everything) == list(range(n))


@pytest.mark.parametrize('lengths', [[3, 3], [0.5, 0.6], [-0.1, 1.1], [1.2, -0.2], [11], [0.4, 0.4]], ids=str)
def test_random_split_refuses_what_torch_refuses(lengths):
    with pytest.raises(ValueError) as theirs: TU.random_split(range(10), lengths)
    with pytest.raises(ValueError) as ours: random_split(range(10), lengths)
    assert str(ours.value) == str(theirs.value)


def test_random_split_reproducible_with_a_generator_or_manual_seed():
    def split(**kwargs): return [s.indices for s in random_split(range(50), [0.5, 0.3, 0.2], **kwargs)]
    assert split(generator=fs.Generator().manual_seed(1)) == split(generator=fs.Generator().manual_seed(1))
    assert split(generator=fs.Generator().manual_seed(1)) != split(generator=fs.Generator().manual_seed(2))
    fs.manual_seed(3); a = split()
    fs.manual_seed(3); b = split()
    c = split()
    assert a == b != c


def test_random_split_of_mnist_trains_through_a_loader():
    x, y = np.arange(200, dtype=np.float32).reshape(100, 2), np.arange(100) % 10
    train, valid = random_split(ArrayDataset(x, y), [0.8, 0.2], generator=fs.Generator().manual_seed(0))
    got = np.concatenate([xb.numpy() for xb, _ in DataLoader(train, batch_size=16)] + [xb.numpy() for xb, _ in DataLoader(valid, batch_size=16)])
    np.testing.assert_array_equal(np.sort(got[:, 0]), x[:, 0])
    xb, yb = next(iter(DataLoader(valid, batch_size=5)))
    np.testing.assert_array_equal(xb.numpy(), x[valid.indices[:5]]); np.testing.assert_array_equal(yb.numpy(), y[valid.indices[:5]])


# ---------------------------------------------------------------- ConcatDataset

def outcome(f):
    "('ok', the result) or (the exception's type name, its message)."
    try: return 'ok', f()
    except Exception as e: return type(e).__name__, str(e)


def concat_parts(lib, data, sizes):
    "TensorDatasets of library `lib` with the given sizes, numbered on from 100 * part."
    return [data.TensorDataset(lib.arange(100 * k, 100 * k + n), lib.arange(n) * 2) for k, n in enumerate(sizes)]


@pytest.mark.parametrize('sizes', [[3], [3, 5], [0, 4], [4, 0], [2, 0, 0, 3, 1], [1, 1, 1], [0, 0, 2], [7, 0]])
def test_concat_dataset_indexes_like_torchs(sizes):
    ours, theirs = ConcatDataset(concat_parts(fs, fs.utils.data, sizes)), TU.ConcatDataset(concat_parts(torch, TU, sizes))
    assert ours.cumulative_sizes == theirs.cumulative_sizes and len(ours) == len(theirs) == sum(sizes)
    n = len(theirs)
    for i in list(range(-n, n)) + [np.int64(n - 1), -np.int64(1)]:
        same(ours[i], theirs[i])
    for i in (n, n + 5, -n - 1, -n - 10):
        assert outcome(lambda: ours[i]) == outcome(lambda: theirs[i])
    assert isinstance(ours.datasets, list) and len(ours.datasets) == len(sizes)


def test_concat_dataset_of_other_datasets_and_through_a_loader_like_torchs():
    parts = [list(range(5)), range(10, 13), np.arange(20, 24)]
    ours, theirs = ConcatDataset(iter(parts)), TU.ConcatDataset(iter(parts))
    assert [ours[i] for i in range(-12, 12)] == [theirs[i] for i in range(-12, 12)]
    x = np.arange(40.0).reshape(20, 2)
    ds = ConcatDataset([ArrayDataset(x[:7], np.arange(7)), ArrayDataset(x[7:], np.arange(7, 20))])
    ds_t = TU.ConcatDataset([TU.TensorDataset(torch.tensor(x[:7]), torch.arange(7)), TU.TensorDataset(torch.tensor(x[7:]), torch.arange(7, 20))])
    for kw in (dict(batch_size=4), dict(batch_size=6, drop_last=True), dict(batch_size=None)):
        same(list(DataLoader(ds, **kw)), list(TU.DataLoader(ds_t, **kw)))
        assert len(DataLoader(ds, **kw)) == len(TU.DataLoader(ds_t, **kw))
    seen = sorted(int(i) for _, yb in DataLoader(ds, batch_size=3, shuffle=True) for i in yb)
    assert seen == list(range(20))
    a, b = random_split(ds, [15, 5], generator=fs.Generator().manual_seed(0))
    assert sorted(a.indices + b.indices) == list(range(20)) and len(DataLoader(a, batch_size=4)) == 4


def test_dataset_plus_makes_a_concat_dataset_like_torchs():
    for lib, data in ((fs, fs.utils.data), (torch, TU)):
        a, b, c = concat_parts(lib, data, [2, 3, 1])
        ab, abc, a_list = a + b, a + b + c, a + [7, 8]
        assert type(ab) is data.ConcatDataset and ab.cumulative_sizes == [2, 5]
        assert abc.cumulative_sizes == [5, 6] and len(abc.datasets) == 2 and abc.datasets[0] is not ab
        assert a_list.cumulative_sizes == [2, 4] and a_list[-1] == 8


def no_len(base):
    "A subclass of `base` (a Dataset class, ours or torch's) with an index and no length."
    class NoLen(base):
        def __getitem__(self, i): return i
    return NoLen


def test_concat_dataset_refuses_what_torch_refuses():
    Stream, Stream_t = streams(IterableDataset), streams(TU.IterableDataset)
    NoLen, NoLen_t = no_len(Dataset), no_len(TU.Dataset)
    cases = [(lambda: ConcatDataset([]), lambda: TU.ConcatDataset([])),
             (lambda: ConcatDataset(iter([])), lambda: TU.ConcatDataset(iter([]))),
             (lambda: ConcatDataset([TensorDataset(fs.ones(2)), Stream()]), lambda: TU.ConcatDataset([TU.TensorDataset(torch.ones(2)), Stream_t()])),
             (lambda: ConcatDataset([NoLen()]), lambda: TU.ConcatDataset([NoLen_t()])),
             (lambda: ConcatDataset([[1], 5]), lambda: TU.ConcatDataset([[1], 5])),
             (lambda: ConcatDataset(5), lambda: TU.ConcatDataset(5))]
    for ours, theirs in cases:
        a, b = outcome(ours), outcome(theirs)
        assert a[0] != 'ok' and a == b, (a, b)
    ds, ds_t = ConcatDataset([[1, 2], [3]]), TU.ConcatDataset([[1, 2], [3]])
    for idx in ('a', slice(0, 2), None):
        a, b = outcome(lambda: ds[idx]), outcome(lambda: ds_t[idx])
        assert a[0] == b[0] != 'ok' and a == b, (idx, a, b)


def test_concat_dataset_misspelt_attribute_warns_like_torchs():
    for data in (fs.utils.data, TU):
        ds = data.ConcatDataset([[1, 2], [3]])
        with pytest.warns(FutureWarning, match='`cummulative_sizes` attribute is renamed to `cumulative_sizes`') as caught:
            assert ds.cummulative_sizes == [2, 3]
        assert caught[0].filename == __file__


# ---------------------------------------------------------------- IterableDataset, ChainDataset, and a DataLoader over them

def streams(base, n=7, length=True, pairs=True):
    "An IterableDataset subclass of `base` over n samples (an (x, y) pair of numpy values, or an int)."
    class Stream(base):
        def __init__(self, n=n): self.n = n
        def __iter__(self):
            return ((np.arange(3, dtype=np.float32) + i, np.int64(i % 3)) if pairs else i for i in range(self.n))
    if length: Stream.__len__ = lambda self: self.n
    return Stream


@pytest.mark.parametrize('n', [0, 1, 5, 6, 7, 12])
@pytest.mark.parametrize('kwargs', [dict(), dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                                    dict(batch_size=5, collate_fn=lambda b: b), dict(batch_size=2, shuffle=False),
                                    dict(batch_size=4, num_workers=0, pin_memory=False)], ids=str)
@pytest.mark.parametrize('pairs', [True, False])
def test_a_loader_over_a_stream_like_torchs(n, kwargs, pairs):
    ours, theirs = streams(IterableDataset, n, pairs=pairs)(), streams(TU.IterableDataset, n, pairs=pairs)()
    dl, dl_t = DataLoader(ours, **kwargs), TU.DataLoader(theirs, **kwargs)
    assert len(dl) == len(dl_t)
    assert (dl.batch_size, dl.drop_last) == (dl_t.batch_size, dl_t.drop_last)
    for _ in range(2):                                                          # two epochs
        got, want = list(dl), list(dl_t)
        if kwargs.get('collate_fn'): assert [len(b) for b in got] == [len(b) for b in want]
        else: same(got, want)


def test_len_of_a_loader_needs_the_datasets_length_like_torchs():
    NoLen, NoLen_t = no_len(Dataset), no_len(TU.Dataset)
    NoLenStream, NoLenStream_t = streams(IterableDataset, length=False), streams(TU.IterableDataset, length=False)
    for make, make_t in ((NoLen, NoLen_t), (NoLenStream, NoLenStream_t)):
        for kw in (dict(), dict(batch_size=3), dict(batch_size=None), dict(batch_size=2, drop_last=True)):
            dl, dl_t = DataLoader(make(), **kw), TU.DataLoader(make_t(), **kw)
            a, b = outcome(lambda: len(dl)), outcome(lambda: len(dl_t))
            assert a == b and a[0] == 'TypeError', (a, b)
            a, b = outcome(lambda: len(list(dl))), outcome(lambda: len(list(dl_t)))
            assert a == b, (a, b)                         # indexed: TypeError at the first batch; a stream: read
    for kw in (dict(shuffle=True), dict(batch_size=2, shuffle=True)):
        a, b = outcome(lambda: DataLoader(NoLen(), **kw)), outcome(lambda: TU.DataLoader(NoLen_t(), **kw))
        assert a[0] == b[0] == 'TypeError' and a[1] == b[1]
    assert outcome(lambda: len(Dataset())) == outcome(lambda: len(TU.Dataset()))


def test_a_loader_over_a_stream_refuses_what_torch_refuses():
    Stream, Stream_t = streams(IterableDataset), streams(TU.IterableDataset)
    for kw in (dict(shuffle=True), dict(shuffle=1), dict(sampler=[0, 1]), dict(sampler=SequentialSampler(range(3))),
               dict(batch_sampler=[[0, 1]]), dict(batch_size=0), dict(batch_size=None, drop_last=True),
               dict(shuffle=True, sampler=[0]), dict(drop_last=1)):
        kw_t = {k: (TU.SequentialSampler(range(3)) if isinstance(v, SequentialSampler) else v) for k, v in kw.items()}
        a, b = outcome(lambda: DataLoader(Stream(), **kw)), outcome(lambda: TU.DataLoader(Stream_t(), **kw_t))
        assert a[0] == b[0] == 'ValueError', (kw, a, b)
        if 'SequentialSampler' not in str(kw): assert a == b
        else: assert a[1].split('sampler=')[0] == b[1].split('sampler=')[0]
    DataLoader(Stream(), shuffle=False); DataLoader(Stream(), shuffle=0)       # accepted, as by torch


def test_iterable_dataset_is_abstract_and_indexless_like_torchs():
    def partial(base):
        class Partial(base): pass
        return Partial
    assert outcome(partial(IterableDataset)) == outcome(partial(TU.IterableDataset))
    assert outcome(partial(IterableDataset))[0] == 'TypeError'
    Stream, Stream_t = streams(IterableDataset, length=False), streams(TU.IterableDataset, length=False)
    for f in (lambda s: s[0], lambda s: len(s)):
        assert outcome(lambda: f(Stream())) == outcome(lambda: f(Stream_t()))
    assert isinstance(Stream(), Dataset) and not isinstance([1], IterableDataset) and not isinstance(TensorDataset(fs.ones(2)), IterableDataset)


def test_chain_dataset_like_torchs():
    S, S_t = streams(IterableDataset, pairs=False), streams(TU.IterableDataset, pairs=False)
    N, N_t = streams(IterableDataset, length=False, pairs=False), streams(TU.IterableDataset, length=False, pairs=False)
    cases = [(lambda: S(3) + S(2), lambda: S_t(3) + S_t(2)), (lambda: ChainDataset([S(2), S(0), S(4)]), lambda: TU.ChainDataset([S_t(2), S_t(0), S_t(4)])),
             (lambda: ChainDataset([]), lambda: TU.ChainDataset([])), (lambda: S(2) + N(3), lambda: S_t(2) + N_t(3)),
             (lambda: ChainDataset([S(2), TensorDataset(fs.arange(2))]), lambda: TU.ChainDataset([S_t(2), TU.TensorDataset(torch.arange(2))])),
             (lambda: ChainDataset([S(2), [5, 6]]), lambda: TU.ChainDataset([S_t(2), [5, 6]])), (lambda: S(2) + S(1) + S(3), lambda: S_t(2) + S_t(1) + S_t(3))]
    for make, make_t in cases:
        ours, theirs = make(), make_t()
        assert type(ours).__name__ == type(theirs).__name__ == 'ChainDataset'
        assert outcome(lambda: len(ours)) == outcome(lambda: len(theirs))
        a, b = outcome(lambda: [int(v) for v in ours]), outcome(lambda: [int(v) for v in theirs])
        assert a == b, (a, b)
        a, b = outcome(lambda: [v.tolist() for v in DataLoader(make(), batch_size=2)]), outcome(lambda: [v.tolist() for v in TU.DataLoader(make_t(), batch_size=2)])
        assert a == b, (a, b)
