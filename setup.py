"""Packaging for fromscratch: everything is read from nbdev's settings.ini."""
from configparser import ConfigParser
from pathlib import Path

import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read(Path(__file__).parent / 'settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
lic = licenses[cfg['license']]
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable']
py_versions = ['3.10', '3.11', '3.12', '3.13']
min_python = cfg['min_python']

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=(Path(__file__).parent / 'README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    license=lic[0],
    url=cfg['git_url'],
    keywords=cfg['keywords'].split(),
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'License :: ' + lic[1],
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: ' + v for v in py_versions[py_versions.index(min_python):]],
    packages=setuptools.find_packages(include=['fromscratch', 'fromscratch.*']),
    include_package_data=True,
    package_data={'fromscratch': ['*.npz']},   # the embedded MNIST sample
    install_requires=cfg['requirements'].split(),
    extras_require={'dev': cfg['dev_requirements'].split()},
    python_requires='>=' + min_python,
    zip_safe=False,
    entry_points={'nbdev': [f"{cfg['lib_name']}={cfg['lib_name']}._modidx:d"]},  # nbdev's doc links
)
