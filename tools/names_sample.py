"""Rebuild fromscratch/names_sample.txt.gz, the words the package ships for its character-level models.

    pip download names==0.3.0 --no-deps --no-binary :all: -d /tmp/names
    python tools/names_sample.py /tmp/names/names-0.3.0.tar.gz

The words are the name lists of the 1990 US Census that the `names` package (0.3.0, MIT licence, by Trey
Hunner) ships: `dist.male.first` and `dist.female.first` (first names; 331 appear in both lists, and are
kept once) and `dist.all.last` (surnames). Each list is in the census's order, most frequent first. They
are written lower-cased, one word a line, under a header line per list (`# first names` and
`# surnames`), as gzip with no time stamp, so that the file is the same byte for byte on every run.
`fromscratch.text.NAMES_SHA256` is the sha256 of the uncompressed text; rerunning this script after a
change prints the new value to put there.
"""
import gzip
import hashlib
import re
import sys
import tarfile
from pathlib import Path

SDIST_SHA256 = '726e46254f2ed03f1ffb5d941dae3bc67c35123941c29becd02d48d0caa2a671'  # names 0.3.0
OUT = Path(__file__).resolve().parents[1] / 'fromscratch' / 'names_sample.txt.gz'
LISTS = {'first names': ('dist.male.first', 'dist.female.first'), 'surnames': ('dist.all.last',)}


def words_in(text):
    "The first column of a census list, lower-cased: one word of the letters a to z per line."
    words = [line.split()[0].lower() for line in text.splitlines() if line.strip()]
    assert all(re.fullmatch('[a-z]+', w) for w in words), 'a word with a character outside a-z'
    return words


def main(sdist):
    blob = Path(sdist).read_bytes()
    got = hashlib.sha256(blob).hexdigest()
    if got != SDIST_SHA256: sys.exit(f'{sdist}: sha256 {got}, expected {SDIST_SHA256} (names 0.3.0)')
    with tarfile.open(sdist) as tar:
        read = lambda name: tar.extractfile(f'names-0.3.0/names/{name}').read().decode('ascii')
        lines = []
        for header, files in LISTS.items():
            words = list(dict.fromkeys(w for f in files for w in words_in(read(f))))  # first seen, once
            lines += [f'# {header}', *words]
            print(f'{header}: {len(words):,} words')
    text = ('\n'.join(lines) + '\n').encode('ascii')
    OUT.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    print(f'wrote {OUT} ({OUT.stat().st_size:,} bytes); NAMES_SHA256 = {hashlib.sha256(text).hexdigest()!r}')


if __name__ == '__main__':
    main(sys.argv[1])
