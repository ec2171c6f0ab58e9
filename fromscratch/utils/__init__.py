"""fromscratch.utils: PyTorch's `torch.utils` names. `utils.data`: datasets, samplers, `DataLoader`, `random_split`;
`utils.benchmark`: `Timer` and its `Measurement`; `utils.cpp_extension`: `load_inline` for C++ on numpy arrays (imported on demand, as in torch:
`from fromscratch.utils import cpp_extension`).

This file is written by hand, like the package's top `__init__.py`; `utils/data.py` is written by hand too, and nbdev
exports `utils/cpp_extension.py` from nbs/20_extension.ipynb and `utils/benchmark.py` from
nbs/01_matmul.ipynb.
"""
from . import benchmark, data
