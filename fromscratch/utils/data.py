"""`fromscratch.utils.data`: PyTorch's `torch.utils.data` names for the datasets, samplers, `DataLoader` and
`random_split` built in nbs/11_data.ipynb (and `DistributedSampler` from nbs/19_distributed.ipynb), so that `from torch.utils.data import DataLoader` becomes
`from fromscratch.utils.data import DataLoader`.

Written by hand, like the package's top `__init__.py`: the classes are exported from the notebook into
`fromscratch.data`, and this module gives the same objects torch's address (as `torch.utils.data` gathers
what its submodules define).
"""
from ..data import (ArrayDataset, BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset,
                    RandomSampler, Sampler, SequentialSampler, Subset, TensorDataset, default_collate, default_convert,
                    random_split)
from ..nn.parallel import DistributedSampler

__all__ = ['Dataset', 'TensorDataset', 'ArrayDataset', 'ConcatDataset', 'IterableDataset', 'ChainDataset', 'Subset',
           'random_split', 'Sampler', 'SequentialSampler', 'RandomSampler', 'BatchSampler', 'default_collate',
           'default_convert', 'DataLoader', 'DistributedSampler']
