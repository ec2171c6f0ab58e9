"""The dtypes as objects, as torch's: `fs.float32` prints (str and repr) as `fromscratch.float32`, has
`is_floating_point`, `is_complex`, `is_signed` and `itemsize`, is hashable and the one object of its name
(`fs.float is fs.float32`, `t.dtype is fs.float32`), and is accepted wherever a dtype is: factories, `.to`,
`.type`, `finfo`, the default dtype, `nn.Module.to`, `fs.save`/`fs.load`, numpy (whose own dtypes stay numpy's)."""
import copy
import io
import pickle

import numpy as np
import pytest
import torch

import fromscratch as fs
from fromscratch import nn

NAMES = ['float16', 'float32', 'float64', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
         'bool', 'half', 'float', 'double', 'short', 'int', 'long']
# complex tensors are not built (api.ipynb): their dtypes are there, in fromscratch.core, for what a tensor reports
COMPLEX = ['complex64', 'complex128', 'cfloat', 'cdouble']


def torch_name(d): return str(d).replace('fromscratch.', 'torch.')


@pytest.mark.parametrize('name', NAMES + COMPLEX)
def test_a_dtype_is_torchs(name):
    d, td = getattr(fs if name in NAMES else fs.core, name), getattr(torch, name)
    assert str(d) == repr(d) == str(td).replace('torch.', 'fromscratch.') and repr(td) == str(td)
    traits = lambda x: (x.is_floating_point, x.is_complex, x.is_signed, x.itemsize)
    assert traits(d) == traits(td)
    assert isinstance(d, fs.dtype) and type(d) is fs.dtype
    assert d == d and hash(d) == hash(d) and {d: name}[d] == name
    assert pickle.loads(pickle.dumps(d)) is d and copy.deepcopy(d) is d and copy.copy(d) is d


def test_aliases_are_the_same_objects_as_in_torch():
    pairs = [('float', 'float32'), ('double', 'float64'), ('half', 'float16'), ('long', 'int64'), ('int', 'int32'),
             ('short', 'int16'), ('cfloat', 'complex64'), ('cdouble', 'complex128')]
    for alias, name in pairs:
        assert getattr(fs.core, alias) is getattr(fs.core, name) and getattr(torch, alias) is getattr(torch, name)
        assert getattr(fs.core, alias) == getattr(fs.core, name)
    distinct = {getattr(fs.core, n) for n in NAMES + COMPLEX}
    assert len(distinct) == len({getattr(torch, n) for n in NAMES + COMPLEX}) == 14
    assert not hasattr(fs, 'complex64') and fs.tensor([1 + 2j]).dtype is fs.core.complex128  # not built, reported


def test_dtypes_differ_from_each_other_and_from_other_things():
    assert fs.float32 != fs.float64 and fs.int64 != fs.float64 and fs.bool != fs.uint8
    assert fs.float32 != 'float32' and fs.float64 != float and fs.int64 != int and fs.float32 is not None
    with pytest.raises(TypeError): fs.float32 < fs.float64
    with pytest.raises(TypeError): torch.float32 < torch.float64
    # on purpose unlike torch: ours stands for a numpy dtype, and numpy and we agree that they are equal
    assert fs.float32 == np.dtype('float32') == fs.float32 and fs.float32 == np.float32 and np.float32 == fs.float32
    assert fs.float32 != np.dtype('float64') and hash(fs.int64) == hash(np.dtype('int64'))


CASES = {
    'tensor float': lambda l: l.tensor([1.5]), 'tensor int': lambda l: l.tensor([1, 2]),
    'tensor bool': lambda l: l.tensor([True]), 'tensor dtype=': lambda l: l.tensor([1], dtype=l.float64),
    'tensor of uint8 array': lambda l: l.tensor(np.zeros(2, np.uint8)),
    'zeros': lambda l: l.zeros(2), 'ones int': lambda l: l.ones(2, dtype=l.int32), 'full': lambda l: l.full((2,), 7),
    'arange': lambda l: l.arange(3), 'arange float': lambda l: l.arange(0.5, 2, dtype=l.float16),
    'linspace': lambda l: l.linspace(0, 1, 3, dtype=l.float64), 'eye': lambda l: l.eye(2, dtype=l.uint8),
    'rand': lambda l: l.rand(2, dtype=l.float64), 'randn': lambda l: l.randn(2), 'randint': lambda l: l.randint(0, 5, (2,)),
    'empty int16': lambda l: l.empty(2, dtype=l.int16), 'zeros_like': lambda l: l.zeros_like(l.ones(2, dtype=l.int8)),
    'full_like dtype=': lambda l: l.full_like(l.ones(2), 3, dtype=l.float64),
    'to(dtype)': lambda l: l.ones(2).to(l.float64), "to('cpu', dtype)": lambda l: l.ones(2).to('cpu', l.int64),
    'to(dtype=)': lambda l: l.ones(2).to(dtype=l.float16), 'to(tensor)': lambda l: l.ones(2).to(l.zeros(1, dtype=l.int8)),
    'type(dtype)': lambda l: l.ones(2).type(l.float64), "type('torch.LongTensor')": lambda l: l.ones(2).type('torch.LongTensor'),
    'double()': lambda l: l.ones(2).double(), 'long()': lambda l: l.ones(2).long(), 'bool()': lambda l: l.ones(2).bool(),
    'int * float': lambda l: l.tensor([1, 2]) * 2.5, 'int / int': lambda l: l.tensor([1, 2]) / l.tensor([2, 2]),
    'comparison': lambda l: l.ones(2) > 0, 'sum of bools': lambda l: (l.ones(2) > 0).sum(),
    'argmax': lambda l: l.ones(3).argmax(), 'float32 * float64 0-d': lambda l: l.ones(2) * l.tensor(2.0, dtype=l.float64),
    'as_tensor': lambda l: l.as_tensor(np.ones(2, np.float64)), 'from_numpy': lambda l: l.from_numpy(np.ones(2, np.int32)),
}


@pytest.mark.parametrize('name', list(CASES))
def test_a_tensor_reports_the_dtype_object(name):
    ours, theirs = CASES[name](fs), CASES[name](torch)
    assert str(ours.dtype) == str(theirs.dtype).replace('torch.', 'fromscratch.')
    assert ours.dtype is getattr(fs, str(ours.dtype).split('.')[-1])          # the one object of its name
    assert isinstance(ours.dtype, fs.dtype)
    assert ours.numpy().dtype == np.dtype(str(theirs.dtype).split('.')[-1])   # its array's dtype is numpy's
    assert type(ours.numpy().dtype) is not fs.dtype and isinstance(np.asarray(ours).dtype, np.dtype)


def test_numpy_takes_our_dtypes_and_keeps_its_own():
    t = fs.tensor([1.0, 2.0])
    assert np.zeros(2, fs.int64).dtype == np.int64 and np.array([1, 2], dtype=fs.float16).dtype == np.float16
    assert np.asarray(t, dtype=fs.float64).dtype == np.float64 and np.ones(2).astype(fs.uint8).dtype == np.uint8
    assert np.asarray(t).dtype is np.dtype('float32') and t.numpy().dtype == np.float32
    assert np.promote_types(fs.int64, fs.float32) == np.float64


def test_default_dtype_and_limits():
    assert fs.get_default_dtype() is fs.float32 and str(fs.get_default_dtype()) == 'fromscratch.float32'
    fs.set_default_dtype(fs.float64); torch.set_default_dtype(torch.float64)
    try:
        assert fs.get_default_dtype() is fs.float64 and fs.tensor([0.5]).dtype is fs.float64
        assert torch_name(fs.get_default_dtype()) == str(torch.get_default_dtype())
    finally:
        fs.set_default_dtype(fs.float32); torch.set_default_dtype(torch.float32)
    with pytest.raises(TypeError, match='only floating-point types are supported as the default type'):
        fs.set_default_dtype(fs.int64)
    for name in ('float16', 'float32', 'float64'):
        assert repr(fs.finfo(getattr(fs, name))) == repr(torch.finfo(getattr(torch, name)))
    for name in ('int8', 'int16', 'int32', 'int64', 'uint8'):
        assert repr(fs.iinfo(getattr(fs, name))) == repr(torch.iinfo(getattr(torch, name)))


def test_result_type_gives_a_dtype_object_like_torch():
    pairs = [(lambda l: l.tensor([1]), 2.5), (lambda l: l.tensor([1.0]), 2), (lambda l: l.tensor([True]), True),
             (lambda l: l.tensor([1], dtype=l.uint8), lambda l: l.tensor([1], dtype=l.int8))]
    for a, b in pairs:
        ours = fs.result_type(a(fs), b(fs) if callable(b) else b)
        theirs = torch.result_type(a(torch), b(torch) if callable(b) else b)
        assert torch_name(ours) == str(theirs) and isinstance(ours, fs.dtype)


def test_modules_take_dtypes():
    m = nn.Linear(2, 3, dtype=fs.float64)
    assert m.weight.dtype is fs.float64
    assert m.to(fs.float32).weight.dtype is fs.float32 and m.to('cpu', fs.float64).bias.dtype is fs.float64
    assert m.to(dtype=fs.float16).weight.dtype is fs.float16 and m.double().weight.dtype is fs.float64
    with pytest.raises(TypeError, match=r'but got desired dtype=fromscratch\.int64'): m.to(fs.int64)
    with pytest.raises(TypeError, match=r'but got desired dtype=torch\.int64'): torch.nn.Linear(2, 3).to(torch.int64)


@pytest.mark.parametrize('name', ['float16', 'float32', 'float64', 'int8', 'int64', 'uint8', 'bool', 'complex64'])
def test_saving_keeps_dtypes(name):
    d = getattr(fs.core, name)
    buf = io.BytesIO()
    fs.save({'t': fs.zeros(3, dtype=d), 'dtype': d, 'many': [fs.float64, fs.int8]}, buf)
    buf.seek(0)
    back = fs.load(buf)
    assert back['t'].dtype is d and back['dtype'] is d and back['many'] == [fs.float64, fs.int8]
    assert back['many'][0] is fs.float64
