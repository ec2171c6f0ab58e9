"""The documentation site, as the README builds and serves it (`make docs`, `make serve-docs`), read in
headless Chromium page by page; and the builder's promises: nbdev's sidebar order, new notebooks picked
up from the folder, errors that name the notebook and the cell.

The browser test needs Chromium (Debian: `apt-get install chromium`). Without it the test is skipped,
except under CI (the CI variable set), where a missing browser is a failure. Screenshots of every page
go to build/screenshots/.
"""
import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / 'build' / 'screenshots'
sys.path.insert(0, str(ROOT / 'tools'))
import docsite  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make_or_python(target, make_vars, fallback):
    "The README's `make TARGET`, run in this interpreter's environment, or the plain command without make."
    venv = Path(sys.prefix)
    if shutil.which('make'):
        # -o: take the environment as installed (it is: this test runs in it) instead of rebuilding it
        return ['make', '--no-print-directory', '-o', str(venv / '.fromscratch-installed'), target, f'VENV={venv}',
                *[f'{k}={v}' for k, v in make_vars.items()]]
    return [sys.executable, str(ROOT / 'tools' / 'docsite.py'), *fallback]


def scratch_dir():
    "A fresh folder under build/ (inside the project, so that nbdev finds settings.ini)."
    (ROOT / 'build').mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT / 'build', prefix='docsite-'))


# ---------------------------------------------------------------------------------------------------
# The site the README's command builds

@pytest.fixture(scope='module')
def site():
    tmp = scratch_dir()
    out = tmp / 'site'
    try:
        cmd = make_or_python('docs', {'SITE': out}, ['build', str(out)])
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f'{" ".join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}'
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope='module')
def pages(site):
    return json.loads((site / 'pages.json').read_text())


def test_every_notebook_has_a_page_in_sidebar_order(site, pages):
    nbs = docsite.course_notebooks(ROOT / 'nbs')
    assert [p['source'] for p in pages] == [nb.relative_to(ROOT / 'nbs').as_posix() for nb in nbs]
    assert pages[0]['url'] == 'index.html'
    for p in pages:
        html = (site / p['url']).read_text()
        links = re.findall(r'<ol class="pages">(.*?)</ol>', html, re.S)[0]
        assert re.findall(r'href="(?:\.\./)*([^"]+)"', links) == [q['url'] for q in pages], p['url']


def test_sidebar_order_is_nbdevs(tmp_path):
    "quarto users get their sidebar from `nbdev_sidebar`: the offline site lists the pages in its order."
    from nbdev.quarto import nbdev_sidebar
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf): nbdev_sidebar.__wrapped__(path=str(ROOT / 'nbs'), printit=True, force=True)
    theirs = re.findall(r'^\s*- (\S+\.ipynb)\s*$', buf.getvalue(), re.M)
    ours = [nb.relative_to(ROOT / 'nbs').as_posix() for nb in docsite.course_notebooks(ROOT / 'nbs')]
    assert theirs == ours


def test_quarto_config_for_nbdev_docs(tmp_path, monkeypatch):
    "nbdev_docs/nbdev_preview read nbs/_quarto.yml; the top-level _quarto.yml is the same file."
    import yaml
    from nbdev.serve import _proc_file
    top, nbs_yml = ROOT / '_quarto.yml', ROOT / 'nbs' / '_quarto.yml'
    assert top.resolve() == nbs_yml.resolve()
    cfg = yaml.safe_load(nbs_yml.read_text())
    assert cfg['project']['type'] == 'website' and 'sidebar.yml' in cfg['metadata-files']
    assert 'contents' not in cfg['website'].get('sidebar', {}), 'the sidebar comes from nbdev_sidebar, not a list'
    # nbdev's processing step (what nbdev_docs does before quarto runs) copies it into _proc as a real file
    monkeypatch.chdir(ROOT)          # relative paths: _proc_file skips any path with a part that starts with '.'
    _proc_file(Path('nbs/_quarto.yml'), tmp_path, Path('nbs'))
    assert (tmp_path / '_quarto.yml').read_text() == nbs_yml.read_text() and not (tmp_path / '_quarto.yml').is_symlink()


def test_pages_load_nothing_from_other_hosts(site, pages):
    for p in pages:
        html = (site / p['url']).read_text()
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            if re.match(r'^(https?:)?//', url):
                assert re.search(r'<a [^>]*href="' + re.escape(url), html), f'{p["url"]} loads {url}'


def test_show_doc_api_reference_is_on_the_page(site, pages):
    "nbdev's show_doc output for each exported symbol of 00_testing, with its signature and docstring."
    html = (site / 'testing.html').read_text()
    for name in ('to_numpy', 'check_close', 'compare_with_torch'):
        assert re.search(rf'<h3 id="{name}">{name}', html), name
    assert 'check_close (actual, expected, rtol=1e-05, atol=1e-08' in html
    # the exported code itself is on the page, highlighted; directives and `#| hide` cells are not
    assert '<span class="k">def</span><span class="w"> </span><span class="nf">check_close</span>' in html
    from bs4 import BeautifulSoup
    text = BeautifulSoup(html, 'html.parser').get_text()
    assert '#| export' not in text and '#| default_exp' not in text and '#| hide' not in text
    assert 'from fastcore.test import test_fail' not in text and 'def check_close(actual, expected' in text


@pytest.fixture(scope='module')
def served(site):
    "The site served by the README's `make serve-docs`, on a free port of 127.0.0.1."
    port = free_port()
    cmd = make_or_python('serve-docs', {'SITE': site, 'PORT': port, 'SERVE_ARGS': '--quiet'},
                         ['serve', str(site), '--port', str(port), '--quiet'])
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    base = f'http://127.0.0.1:{port}/'
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base, timeout=2) as r:
                    if r.status == 200: break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f'the site server did not answer on {base}: {proc.stdout.read()}')
                time.sleep(0.2)
        yield base
    finally:
        os.killpg(proc.pid, 15)
        try: proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9); proc.wait()


_PAGE_FACTS = r"""(() => {
  const main = document.querySelector('main');
  const prose = main.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, mjx-container').forEach(e => e.remove());
  const box = e => e.getBoundingClientRect();
  return {
    title: document.title,
    h1: (main.querySelector('h1') || {}).textContent,
    sidebar: [...document.querySelectorAll('nav.sidebar .pages a')].map(a => ({href: a.href, current: a.getAttribute('aria-current') === 'page'})),
    pager: [...document.querySelectorAll('nav.pager a')].map(a => ({href: a.href, rel: a.rel})),
    images: [...document.images].map(i => ({src: i.currentSrc || i.src, w: i.naturalWidth, h: i.naturalHeight, bw: box(i).width, bh: box(i).height, complete: i.complete})),
    math: document.querySelectorAll('main mjx-container').length,
    mathErrors: document.querySelectorAll('main mjx-merror, main [data-mml-node="merror"], main [data-mjx-error]').length,
    rawMath: /\$\$|\\\(|\\\[|\\begin\{/.test(prose.textContent),
    brokenAnchors: [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href').slice(1))
                   .filter(id => id && !document.getElementById(decodeURIComponent(id))),
    mainWidth: box(main).width,
  };
})()"""

_SEARCH = r"""(async () => {
  const input = document.getElementById('search-input');
  input.focus(); input.value = %s; input.dispatchEvent(new Event('input'));
  for (let i = 0; i < 100; i++) {
    await new Promise(r => setTimeout(r, 50));
    const links = [...document.querySelectorAll('#search-results a')];
    if (links.length) return links.map(a => a.getAttribute('href'));
  }
  return [];
})()"""


def has_math_source(html):
    "Does the served HTML (outside code) hold TeX for MathJax to typeset?"
    text = re.sub(r'<(pre|code|script)\b.*?</\1>', '', html, flags=re.S)
    return bool(re.search(r'\$\$.+?\$\$|\\\(|\\\[|\\begin\{|(?<![\\$\w])\$[^\s$][^$\n<]*?\$', text, re.S))


def test_browse_every_page(browser, site, pages, served):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob('*.png'): old.unlink()
    urls = [served + p['url'] for p in pages]
    failures, math_pages = [], 0
    for i, (p, url) in enumerate(zip(pages, urls)):
        problems = browser.open(url)
        facts = browser.evaluate(_PAGE_FACTS)
        browser.screenshot(SHOTS / f'{i:02d}-{Path(p["url"]).stem}.png')
        where = f'{p["url"]} (from nbs/{p["source"]})'
        failures += [f'{where}: {x}' for x in problems]
        sidebar = [s['href'] for s in facts['sidebar']]
        if sidebar != urls: failures.append(f'{where}: sidebar links {sidebar} != pages {urls}')
        if [s['href'] for s in facts['sidebar'] if s['current']] != [url]:
            failures.append(f'{where}: the sidebar does not mark this page as the current one')
        want_pager = ([urls[i - 1]] if i else []) + ([urls[i + 1]] if i + 1 < len(urls) else [])
        if [a['href'] for a in facts['pager']] != want_pager:
            failures.append(f'{where}: previous/next links {facts["pager"]} != {want_pager}')
        for img in facts['images']:
            if not (img['complete'] and img['w'] > 0 and img['h'] > 0 and img['bw'] > 0 and img['bh'] > 0):
                failures.append(f'{where}: image {img["src"][:100]} has no size: {img}')
        if has_math_source((site / p['url']).read_text()):
            math_pages += 1
            if facts['math'] == 0: failures.append(f'{where}: maths on the page was not typeset')
        if facts['rawMath']: failures.append(f'{where}: raw TeX delimiters are left in the text')
        if facts['mathErrors']: failures.append(f'{where}: {facts["mathErrors"]} maths errors')
        if facts['brokenAnchors']: failures.append(f'{where}: links to missing anchors {facts["brokenAnchors"]}')
        if not facts['h1'] or not facts['h1'].startswith(p['title']): failures.append(f'{where}: h1 {facts["h1"]!r}')
        if facts['mainWidth'] < 500: failures.append(f'{where}: the text column is only {facts["mainWidth"]}px wide')
    # every sidebar link resolves: each one was opened above; check the server answers each of them too
    for url in urls:
        with urllib.request.urlopen(url, timeout=5) as r: assert r.status == 200, url
    assert math_pages >= 1, 'no page had maths: the notebooks (00_testing at least) use $$...$$'
    assert not failures, '\n'.join(failures)
    for i, p in enumerate(pages):
        assert list(SHOTS.glob(f'{i:02d}-{Path(p["url"]).stem}*.png')), f'no screenshot of {p["url"]}'


def test_search_box_finds_an_exported_function(browser, served):
    assert browser.open(served + 'index.html') == []
    hits = browser.evaluate(_SEARCH % json.dumps('check_close'), promise=True)
    assert any(h.startswith('testing.html') for h in hits), hits
    assert browser.problems(served) == []


# ---------------------------------------------------------------------------------------------------
# The builder's promises, on notebooks made for the purpose

def small_notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_new_notebook_appears_in_the_sidebar():
    "A notebook added to nbs/ gets a page, a sidebar entry and prev/next links, with no list edited."
    tmp = scratch_dir()
    try:
        nbs = tmp / 'nbs'
        shutil.copytree(ROOT / 'nbs', nbs, ignore=shutil.ignore_patterns('.ipynb_checkpoints', '_*', '*.yml'))
        extra = small_notebook(
            nbformat.v4.new_markdown_cell('# An extra lesson\n\n> Added to check the sidebar.'),
            nbformat.v4.new_markdown_cell('Some maths: $e^{i\\pi} + 1 = 0$.'),
            nbformat.v4.new_code_cell('print(6 * 7)', outputs=[nbformat.v4.new_output('stream', text='42\n')]))
        nbformat.write(extra, nbs / '99_extra_lesson.ipynb')
        out = tmp / 'site'
        pages = docsite.build(out, nbs, quiet=True)
        urls = [p.url for p in pages]
        names = sorted(f.name for f in nbs.glob('*.ipynb') if f.name != 'index.ipynb')
        k = urls.index('extra_lesson.html')
        assert k == 1 + names.index('99_extra_lesson.ipynb')          # the index first, then in file order
        assert len(pages) == len(list(nbs.glob('*.ipynb')))
        for p in pages:
            assert 'href="extra_lesson.html"' in (out / p.url).read_text(), p.url
        html = (out / 'extra_lesson.html').read_text()
        assert '<h1>An extra lesson</h1>' in html and '42' in html and 'tex-svg-full.js' in html
        assert f'href="{pages[k - 1].url}" rel="prev"' in html
        assert 'href="extra_lesson.html" rel="next"' in (out / pages[k - 1].url).read_text()
        if k + 1 < len(pages): assert f'href="{pages[k + 1].url}" rel="next"' in html
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize('case', ['export_fails', 'malformed_cell', 'bad_json'])
def test_broken_notebook_names_notebook_and_cell(case):
    tmp = scratch_dir()
    try:
        nbs = tmp / 'nbs'
        nbs.mkdir()
        nbformat.write(small_notebook(nbformat.v4.new_markdown_cell('# Home')), nbs / 'index.ipynb')
        path = nbs / '01_broken.ipynb'
        cells = [nbformat.v4.new_code_cell('#| default_exp broken'),
                 nbformat.v4.new_markdown_cell('# Broken\n\n> A notebook that cannot be processed.'),
                 nbformat.v4.new_code_cell('#| export\ndef f(x):\n    return x\n\nraise ValueError("boom at import")')]
        nbformat.write(small_notebook(*cells), path)
        if case == 'malformed_cell':
            raw = json.loads(path.read_text())
            raw['cells'][2]['source'], raw['cells'][2]['outputs'] = 'x = 1', None
            path.write_text(json.dumps(raw))
            expected = [r'01_broken\.ipynb, cell 2', "outputs"]
        elif case == 'bad_json':
            path.write_text(path.read_text()[:-20])
            expected = [r'01_broken\.ipynb', 'not a readable notebook', 'line']
        else:
            expected = [r'01_broken\.ipynb, cell 2', 'ValueError', 'boom at import', r'\| raise ValueError']
        (tmp / 'site').mkdir()
        (tmp / 'site' / 'index.html').write_text('the last good build')
        with pytest.raises(docsite.DocBuildError) as e:
            docsite.build(tmp / 'site', nbs, quiet=True)
        for pattern in expected: assert re.search(pattern, str(e.value)), (pattern, str(e.value))
        # a failed build leaves the site that was there alone
        assert (tmp / 'site' / 'index.html').read_text() == 'the last good build'
        assert not (tmp / 'site.building').exists()
        if case != 'export_fails': return
        # and the command line says the same, without a traceback
        r = subprocess.run([sys.executable, str(ROOT / 'tools' / 'docsite.py'), 'build', str(tmp / 'site2'),
                            '--nbs', str(nbs)], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 1 and 'Traceback' not in r.stderr
        for pattern in expected: assert re.search(pattern, r.stderr), (pattern, r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
