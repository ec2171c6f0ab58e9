"""fromscratch.utils: PyTorch's `torch.utils` names. So far `utils.data`: datasets, samplers, `DataLoader`, `random_split`.

This file is written by hand, like the package's top `__init__.py`; nbdev exports `utils/data.py` from nbs/11_data.ipynb.
"""
from . import data
