"""The documentation site as the README builds and serves it (`make docs`, `make serve-docs`): Sphinx with
MyST-NB and the sphinx-book-theme, from the notebooks' stored outputs, offline.

The site is built once per session (the `site` fixture). Its links are checked, and headless Chromium opens
every page, at a laptop's width and at a phone's, and fails on a console error, a request that leaves the
machine, raw markup in the text, a missing image or an image without alt text, or a page wider than the
phone's screen; screenshots of every page go to build/screenshots/. Small builds of notebooks made for the
purpose check the strict mode (a broken cross-reference fails the build) and that a new notebook finds its
part of the course by its number. Without Chromium the browser tests are skipped, except under CI.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / 'build' / 'screenshots'
sys.path.insert(0, str(ROOT / 'tools'))
import docs  # noqa: E402

PHONE = 420


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make(target, **make_vars):
    "The README's `make TARGET`, run in this interpreter's environment (taken as installed: it is)."
    venv = Path(sys.prefix)
    return ['make', '--no-print-directory', '-o', str(venv / '.fromscratch-installed'), target, f'VENV={venv}',
            *[f'{k}={v}' for k, v in make_vars.items()]]


def scratch_dir():
    "A fresh folder under build/ (inside the project, so that nbdev finds settings.ini)."
    (ROOT / 'build').mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT / 'build', prefix='docs-'))


@pytest.fixture(scope='session')
def site():
    "The site `make docs` builds, once per session."
    tmp = scratch_dir()
    out = tmp / 'site'
    try:
        cmd = make('docs', SITE=out, DOCS_SRC=tmp / 'src') if shutil.which('make') else \
            [sys.executable, str(ROOT / 'tools' / 'docs.py'), 'build', str(out), '--src', str(tmp / 'src')]
        started = time.monotonic()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f'{" ".join(map(str, cmd))} failed:\n{r.stdout[-5000:]}\n{r.stderr[-5000:]}'
        print(f'\nmake docs: {time.monotonic() - started:.0f} s')
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope='session')
def pages(site):
    return json.loads((site / 'pages.json').read_text())


# ---------------------------------------------------------------------------------------------------
# The built files

def test_every_notebook_has_a_page_in_its_part(site, pages):
    from bs4 import BeautifulSoup
    nbs = docs.course_notebooks(ROOT / 'nbs')
    assert [p['source'] for p in pages] == [nb.relative_to(ROOT / 'nbs').as_posix() for nb in nbs]
    soup = BeautifulSoup((site / 'index.html').read_text(), 'html.parser')
    nav = soup.select_one('nav.bd-docs-nav')
    parts = {c.get_text(strip=True): [a['href'].removesuffix('.html') for a in c.find_next_sibling('ul').select('a')]
             for c in nav.select('p.caption')}
    assert list(parts) == ['Foundations', 'The engine', 'Training', 'Beyond', 'Reference']
    for p in pages:
        assert (site / f'{p["page"]}.html').exists()
        if p['page'] != 'index': assert p['page'] in parts[docs.part_of(p['source'])], p
    assert parts['Reference'] == ['api', 'reference'] and parts['Foundations'][0] == 'testing'
    assert docs.part_of('00_testing.ipynb') == 'Foundations' and docs.part_of('07a_x.ipynb') == 'The engine'
    assert docs.part_of('12a_train.ipynb') == 'Training' and docs.part_of('19_distributed.ipynb') == 'Beyond'
    assert docs.part_of('20_extension.ipynb') == 'Beyond' and docs.part_of('api.ipynb') == 'Reference'


def test_links_and_anchors_resolve(site):
    assert docs.check_links(site) == []


def test_no_page_loads_from_another_host(site):
    for f in site.glob('*.html'):
        html = f.read_text()
        for tag in re.findall(r'<(?:script|link|img|iframe|source)\b[^>]*>', html):
            assert not re.search(r'(?:src|href)="(?:https?:)?//', tag), f'{f.name}: {tag}'


def test_pages_do_not_depend_on_the_machine_that_built_them(site):
    "No path of this checkout and no object address: a default such as `layers=nn` is shown by its name."
    for f in site.glob('*.html'):
        text = re.sub(r'<[^>]+>', '', f.read_text())
        assert str(ROOT) not in text and not re.search(r' at 0x[0-9a-f]{6,}', text), f.name
    assert 'layers=fromscratch.nn' in re.sub(r'<[^>]+>|\s', '', (site / 'train.html').read_text())


def test_signature_shows_defaults_by_name():
    import numpy as np
    def f(a, m=np, k=np.float32, h=len, x=1.5, s='x'): pass
    assert docs.signature(f) == "(a, m=numpy, k=numpy.float32, h=builtins.len, x=1.5, s='x')"
    from fromscratch.data import random_split
    assert docs.signature(random_split) == '(dataset, lengths, generator=fromscratch.default_generator)'


def test_api_reference_names_import_paths(site):
    "Each public name by its import path, with signature and docstring and a link to the notebook that builds it."
    from bs4 import BeautifulSoup
    soup = BeautifulSoup((site / 'reference.html').read_text(), 'html.parser')
    sig = lambda dt: re.sub(r'^\s*(?:class|property)\s+', '', dt.get_text('')).strip()
    entries = {re.sub(r'\(.*|#$', '', sig(dt)):
               (dt, dt.find_next_sibling('dd')) for dt in soup.select('dl.py > dt')}
    covered = docs.covered_names(ROOT / 'nbs' / 'api.ipynb')
    want = {f"{area.split(' ')[0].replace('torch', 'fromscratch', 1)}.{n}" for area, ns in covered.items() for n in ns}
    assert set(entries) == want and len(want) >= 382
    for path, (dt, dd) in entries.items():       # every entry says where the course builds it, with a link
        assert 'Built in' in dd.get_text() and dd.find('a', class_='reference internal'), path
    dt, dd = entries['fromscratch.nn.functional.linear']
    assert sig(dt).startswith('fromscratch.nn.functional.linear(input, weight, bias=None)')
    assert 'fused' in dd.get_text() and dd.find('a', href='functional.html#fromscratch.nn.functions.affine.linear')
    assert sig(entries['fromscratch.Tensor.backward'][0]).startswith(
        'fromscratch.Tensor.backward(gradient=None, retain_graph=None, create_graph=False, inputs=None)')
    # internal helpers are left out
    assert not [p for p in entries if re.search(r'legacy_reduction|check_device|fromscratch\.core\.', p)]


def test_show_doc_becomes_api_entries_and_code_stays(site):
    from bs4 import BeautifulSoup
    soup = BeautifulSoup((site / 'testing.html').read_text(), 'html.parser')
    for name in ('to_numpy', 'check_close', 'compare_with_torch'):
        assert soup.find('dt', id=f'fromscratch.testing.{name}'), name
    text = soup.select_one('article').get_text()
    assert 'def check_close(actual, expected' in text       # the exported code is on the page
    assert '#| export' not in text and '#| default_exp' not in text and '#| hide' not in text
    # the hidden import cell is shown, folded, so that the page's code runs as copied
    folded = [d for d in soup.select('details') if 'from fastcore.test import test_fail' in d.get_text()]
    assert folded, 'the import cell is not on the page'
    # a download link to the original notebook
    link = soup.find('a', class_='download')
    assert link and (site / link['href']).read_text() == (ROOT / 'nbs' / '00_testing.ipynb').read_text()


def test_notebook_names_and_documented_names_are_links(site):
    from bs4 import BeautifulSoup
    soup = BeautifulSoup((site / 'index.html').read_text(), 'html.parser')
    hrefs = {a.get_text(): a['href'] for a in soup.select('article a')}
    assert hrefs.get('05_value') == 'value.html' and hrefs.get('08_autograd') == 'autograd.html'
    assert any(h.startswith('testing.html#fromscratch.testing.check_close') for h in hrefs.values()), hrefs


# ---------------------------------------------------------------------------------------------------
# Strictness and new notebooks, on small sets of notebooks made for the purpose

def small_site(tmp, *extra):
    nbs = tmp / 'nbs'
    nbs.mkdir()
    for name in ('index.ipynb', '00_testing.ipynb'): shutil.copy2(ROOT / 'nbs' / name, nbs / name)
    shutil.copytree(ROOT / 'nbs' / 'images', nbs / 'images')
    for name, cells in extra: nbformat.write(nbformat.v4.new_notebook(cells=cells), nbs / name)
    # the index links every notebook of the course: keep the links to the ones this site has
    index = nbformat.read(nbs / 'index.ipynb', as_version=4)
    present = {p.name for p in nbs.glob('*.ipynb')}
    for cell in index.cells:
        cell.source = re.sub(r'\[(\w+)\]\((\w+\.ipynb)\)',
                             lambda m: m[0] if m[2] in present else f'`{m[1]}`', cell.source)
    nbformat.write(index, nbs / 'index.ipynb')
    return nbs


def lesson(title, *more):
    return [nbformat.v4.new_markdown_cell(f'# {title}\n\n> A lesson made for a test.'), *more]


def test_broken_cross_reference_fails_the_build():
    tmp = scratch_dir()
    try:
        nbs = small_site(tmp, ('19_broken.ipynb', lesson('Broken', nbformat.v4.new_markdown_cell(
            'See {py:func}`fromscratch.no_such_function` and [the missing page](missing.ipynb).'))))
        with pytest.raises(docs.DocBuildError, match='sphinx-build failed') as e:
            docs.build(tmp / 'site', nbs, quiet=True, src=tmp / 'src')
        assert 'fromscratch.no_such_function' in str(e.value) and 'missing' in str(e.value)
        assert len(re.findall('WARNING', str(e.value))) == 2, str(e.value)
        assert not (tmp / 'site').exists() and not (tmp / 'src-html').exists()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_new_notebooks_land_in_their_part():
    tmp = scratch_dir()
    try:
        maths = nbformat.v4.new_markdown_cell('Some maths: $e^{i\\pi} + 1 = 0$, and `check_close` links.')
        code = nbformat.v4.new_code_cell('print(6 * 7)', outputs=[nbformat.v4.new_output('stream', text='42\n')])
        nbs = small_site(tmp, ('19_distributed.ipynb', lesson('Distributed', maths, code)),
                         ('20_extension.ipynb', lesson('Extension')))
        out = docs.build(tmp / 'site', nbs, quiet=True, src=tmp / 'src')
        from bs4 import BeautifulSoup
        nav = BeautifulSoup((out / 'index.html').read_text(), 'html.parser').select_one('nav.bd-docs-nav')
        parts = {c.get_text(strip=True): [a['href'] for a in c.find_next_sibling('ul').select('a')]
                 for c in nav.select('p.caption')}
        assert parts == {'Foundations': ['testing.html'], 'Beyond': ['distributed.html', 'extension.html']}
        html = (out / 'distributed.html').read_text()
        assert '42' in html and 'class="math' in html and 'testing.html#fromscratch.testing.check_close' in html
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# In a browser

@pytest.fixture(scope='session')
def served(site):
    "The site served by the README's `make serve-docs`, on a free port of 127.0.0.1."
    port = free_port()
    cmd = make('serve-docs', SITE=site, PORT=port, SERVE_ARGS='--quiet') if shutil.which('make') else \
        [sys.executable, str(ROOT / 'tools' / 'docs.py'), 'serve', str(site), '--port', str(port), '--quiet']
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
  const main = document.querySelector('article') || document.querySelector('main');
  const prose = main.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, mjx-container, .cell_output, textarea').forEach(e => e.remove());
  const text = prose.textContent;
  const box = e => e.getBoundingClientRect();
  return {
    h1: (main.querySelector('h1') || {}).textContent,
    images: [...document.querySelectorAll('article img')].map(i => ({src: i.currentSrc || i.src, alt: i.alt,
             figure: i.classList.contains('fs-figure'),
             w: i.naturalWidth, h: i.naturalHeight, bw: box(i).width, complete: i.complete})),
    math: document.querySelectorAll('article mjx-container').length,
    mathSource: document.querySelectorAll('article .math').length,
    mathErrors: document.querySelectorAll('article mjx-merror, article [data-mml-node="merror"]').length,
    raw: [/\{target=/, /:::/, /\{py:\w+\}/, /\{doc\}/, /\{download\}/, /\$\$/, /\\\(|\\\[/, /(^|[\s(])\$[^\s$][^$\n]*\$/,
          /```/].filter(r => r.test(text)).map(String),
    toc: document.querySelectorAll('.bd-toc-nav a, #pst-page-toc-nav a, .page-toc a').length,
    width: document.documentElement.scrollWidth,
  };
})()"""


# The innermost elements that reach past the phone's edge outside any scrolling box, with their text.
_PAST_THE_EDGE = r"""JSON.stringify([...document.querySelectorAll('body *')].filter(e =>
  e.getBoundingClientRect().right > %d && !e.querySelector('*') && ![...function* () {
    for (let a = e.parentElement; a; a = a.parentElement) yield getComputedStyle(a).overflowX }()
  ].some(o => o != 'visible')).slice(0, 3).map(e => e.tagName + ' ' + e.textContent.trim().slice(0, 100)))"""


def phone(browser, on):
    if on: browser.call('Emulation.setDeviceMetricsOverride', width=PHONE, height=860, deviceScaleFactor=1, mobile=True)
    else: browser.call('Emulation.clearDeviceMetricsOverride')
    browser.evaluate('new Promise(r => setTimeout(r, 200))', promise=True)


def test_browse_every_page(browser, site, pages, served):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob('*.png'): old.unlink()
    names = [p['page'] for p in pages] + ['reference']
    failures = []
    for i, name in enumerate(names):
        url = served + f'{name}.html'
        problems = browser.open(url)
        facts = browser.evaluate(_PAGE_FACTS)
        browser.screenshot(SHOTS / f'{i:02d}-{name}.png', tile=None)
        failures += [f'{name}: {x}' for x in problems]
        for img in facts['images']:
            if not (img['complete'] and img['w'] > 0 and img['h'] > 0 and img['bw'] > 0):
                failures.append(f'{name}: image {img["src"][:100]} did not load: {img}')
            if not img['alt'].strip() or img['alt'] == 'TODO' or 'made by cell' in img['alt']:
                failures.append(f'{name}: image {img["src"][-40:]} has no alt text saying what it shows')
            if img['figure'] and img['w'] < 1.9 * img['bw'] and not img['src'].endswith('.svg'):
                failures.append(f'{name}: figure {img["src"][-40:]} is {img["w"]} px drawn {img["bw"]:.0f} px wide: '
                                'not at 2x (re-run the notebook with tools/refresh.py, which stores figures at 2x)')
        if facts['mathSource'] and not facts['math']: failures.append(f'{name}: maths was not typeset')
        if facts['mathErrors']: failures.append(f'{name}: {facts["mathErrors"]} maths errors')
        if facts['raw']: failures.append(f'{name}: raw markup in the text: {facts["raw"]}')
        if not facts['h1']: failures.append(f'{name}: no title')
        if name not in ('index',) and facts['toc'] == 0: failures.append(f'{name}: no "on this page" contents')
        phone(browser, True)
        width = browser.evaluate('document.documentElement.scrollWidth')
        if width > PHONE: failures.append(f'{name}: {width} px wide on a {PHONE} px phone screen, '
                                          f'past the edge: {browser.evaluate(_PAST_THE_EDGE % PHONE)}')
        if i < 3 or name == 'reference': browser.screenshot(SHOTS / f'{i:02d}-{name}-phone.png', tile=None)
        failures += [f'{name} (phone): {x}' for x in browser.problems(served)]
        phone(browser, False)
    assert not failures, '\n'.join(failures)
    for i, name in enumerate(names): assert (SHOTS / f'{i:02d}-{name}.png').exists()


_SEARCH = r"""(async () => {
  for (let i = 0; i < 150; i++) {
    await new Promise(r => setTimeout(r, 100));
    const items = [...document.querySelectorAll('#search-results li')];
    if (items.length && !document.querySelector('#search-progress')?.textContent.includes('Preparing')
        && items.every(li => li.querySelector('p.context') || i > 100))
      return items.map(li => ({href: li.querySelector('a').getAttribute('href'),
                               context: (li.querySelector('p.context') || {}).textContent || ''}));
  }
  return [];
})()"""


def test_one_search_field_on_a_laptop(browser, served):
    "The sidebar's field, not a second one in a header bar above it; a phone has the header's search icon."
    visible = 'Array.from(document.querySelectorAll(SEL)).filter(e => e.getClientRects().length).length'
    assert browser.open(served + 'testing.html') == []
    assert browser.evaluate(visible.replace('SEL', '".search-button-field"')) == 1
    phone(browser, True)
    try: assert browser.evaluate(visible.replace('SEL', '".search-button__button"')) == 1
    finally: phone(browser, False)


def test_search_finds_an_exported_function(browser, served):
    problems = browser.open(served + 'search.html?q=check_close')
    hits = browser.evaluate(_SEARCH, promise=True)
    assert problems == [] and any(h['href'].startswith('testing.html') for h in hits), (problems, hits)


def test_search_results_show_no_raw_tex(browser, served):
    "Results for a word from the maths-heavy lessons quote their text without TeX delimiters."
    problems = browser.open(served + 'search.html?q=gradient')
    hits = browser.evaluate(_SEARCH, promise=True)
    browser.screenshot(SHOTS / 'search.png', tile=None)
    assert problems == [] and len(hits) >= 10, (problems, hits)
    contexts = [h['context'] for h in hits if h['context']]
    assert contexts and not [c for c in contexts if re.search(r'\\[()\[\]]|\$', c)], contexts
    assert not [c for c in contexts if re.match(r'\W*Contents', c)], 'results quote the page contents, not the lesson'


def test_dark_mode(browser, served):
    assert browser.open(served + 'value.html') == []
    mode = browser.evaluate(r"""(async () => {
      const modes = [];
      for (const mode of ['dark', 'light']) {
        document.querySelector(`.theme-change-button[data-mode="${mode}"]`).click();
        await new Promise(r => setTimeout(r, 200));
        modes.push(document.documentElement.dataset.mode + '/' + document.documentElement.dataset.theme + '/' +
                   getComputedStyle(document.body).backgroundColor);
      }
      return modes;
    })()""", promise=True)
    (dark, dark_bg), (light, light_bg) = [m.rsplit('/', 1) for m in mode]
    assert dark == 'dark/dark' and light == 'light/light' and dark_bg != light_bg, mode
    assert browser.problems(served) == []


# ---------------------------------------------------------------------------------------------------
# For those who have quarto: nbdev's own site from the same notebooks

def test_quarto_config_for_nbdev_docs(tmp_path, monkeypatch):
    "nbdev_docs/nbdev_preview read nbs/_quarto.yml; the top-level _quarto.yml is the same file."
    import yaml
    from nbdev.serve import _proc_file
    top, nbs_yml = ROOT / '_quarto.yml', ROOT / 'nbs' / '_quarto.yml'
    assert top.resolve() == nbs_yml.resolve()
    cfg = yaml.safe_load(nbs_yml.read_text())
    assert cfg['project']['type'] == 'website' and 'sidebar.yml' in cfg['metadata-files']
    assert 'contents' not in cfg['website'].get('sidebar', {}), 'the sidebar comes from nbdev_sidebar, not a list'
    monkeypatch.chdir(ROOT)          # relative paths: _proc_file skips any path with a part that starts with '.'
    _proc_file(Path('nbs/_quarto.yml'), tmp_path, Path('nbs'))
    assert (tmp_path / '_quarto.yml').read_text() == nbs_yml.read_text()


def test_page_order_is_nbdevs():
    "quarto users get their sidebar from `nbdev_sidebar`: this site lists the notebooks in its order."
    import contextlib
    import io
    from nbdev.quarto import nbdev_sidebar
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf): nbdev_sidebar.__wrapped__(path=str(ROOT / 'nbs'), printit=True, force=True)
    theirs = re.findall(r'^\s*- (\S+\.ipynb)\s*$', buf.getvalue(), re.M)
    assert theirs == [nb.relative_to(ROOT / 'nbs').as_posix() for nb in docs.course_notebooks(ROOT / 'nbs')]


# ---------------------------------------------------------------------------------------------------
# The conversions, one by one

def test_quarto_markup_becomes_myst():
    card = '[source](https://example.org/x.py#L1){target="_blank" style="float:right; font-size:smaller"}\n\n### f'
    assert docs.quarto_to_myst(card) == '[source](https://example.org/x.py#L1)\n\n### f'
    assert docs.quarto_to_myst('::: {.callout-warning}\nCareful.\n:::') == ':::{warning}\nCareful.\n:::'
    assert docs.quarto_to_myst('::: {.py-2 .px-3 .border}\nA box.\n\n:::') == 'A box.\n'
    assert docs.quarto_to_myst('```\n:::\n```') == '```\n:::\n```'          # code is left alone


def test_cell_options_and_imports():
    opts, code = docs.split_directives('#| echo: false\n#| fig-alt: A line\n# NBVAL_IGNORE_OUTPUT\nplt.plot(x)')
    assert opts == {'echo': 'false', 'fig-alt': 'A line'} and code == 'plt.plot(x)'
    opts, code = docs.split_directives('# Solution 2, continued\n#| fig-alt: Two bars\nplt.bar(x, y)')
    assert opts == {'fig-alt': 'Two bars'} and code == '# Solution 2, continued\nplt.bar(x, y)'
    assert docs.only_imports('import torch\nfrom fastcore.test import test_fail\n%matplotlib inline')
    assert not docs.only_imports('import torch\nx = torch.ones(2)') and not docs.only_imports('shutil.rmtree(work)')
    with pytest.raises(docs.DocBuildError, match='fig-alt'): docs.alt_text({}, 'plt.plot(x)', 'nbs/x.ipynb, cell 3')
    assert docs.alt_text({}, "ax.set_title('loss per step')", '') == 'Figure: loss per step'


def test_names_in_backticks_become_links():
    link = docs.Linker({'check_close': 'fromscratch.testing.check_close'}, {'05_value': 'value'})
    md = 'Use `check_close`, see `05_value` and `nbs/05_value.ipynb`; `x + 1` and [`check_close`](a.html) stay.'
    assert link(md) == ('Use {py:obj}`check_close <fromscratch.testing.check_close>`, see [`05_value`](value.ipynb) '
                        'and [`nbs/05_value.ipynb`](value.ipynb); `x + 1` and [`check_close`](a.html) stay.')
    assert link('```\n`check_close`\n```') == '```\n`check_close`\n```'



# --------------------------------------------------------------------------------------
# Code that fits the column, solutions folded as one, headings found by the search

# The code and output blocks the reader sees that need a sideways scroll, with their
# longest line. Folds are opened first: solutions are measured too. With `synthetic`, an
# 88-character line is put into a copy of the page's first code block and of its first
# output, as every line will be once the notebooks' code is wrapped at 88 characters.
_SCROLLING = r"""((synthetic) => {
  document.querySelectorAll('article details').forEach(d => d.open = true);
  if (synthetic) for (const sel of ['div.cell_input pre', 'div.cell_output pre']) {
    const block = document.querySelector('article ' + sel)
      .closest('.cell_input, .cell_output');
    const copy = block.cloneNode(true);
    // one line in the block's first pre; an output of several streams keeps only that one
    copy.querySelectorAll('pre').forEach((pre, i) => i ? pre.remove()
      : pre.textContent = 'x = ' + '1234567 + '.repeat(8) + '1234');
    copy.dataset.synthetic = 1;
    block.after(copy);
  }
  const longest = e => Math.max(...e.textContent.split('\n').map(l => l.length));
  const blocks = [...document.querySelectorAll(
    'article pre, article div.cell_output, article div.output, article .highlight')]
    .filter(e => e.getClientRects().length);
  const made = e => !!e.closest('[data-synthetic]');
  const cells = t => [...t.querySelectorAll('tbody td')];
  return {
    blocks: blocks.length,
    synthetic: blocks.filter(e => made(e) && e.tagName == 'PRE').map(longest),
    scrolling: blocks.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => ({
      longest: longest(e), synthetic: made(e), text: e.textContent.trim().slice(0, 80),
      width: e.scrollWidth, box: e.clientWidth})),
    tables: [...document.querySelectorAll('article table.table')].map(t => ({
      width: t.getBoundingClientRect().width, scroll: t.scrollWidth,
      client: t.clientWidth, box: t.parentElement.clientWidth,
      stacked: cells(t).every(td => getComputedStyle(td).display == 'block'),
      unlabelled: cells(t).filter(td => td.dataset.label === undefined).length})),
  };
})(%s)"""


def window(browser, width):
    browser.call('Emulation.setDeviceMetricsOverride', width=width, height=900,
                 deviceScaleFactor=1, mobile=width < 600)


@pytest.mark.parametrize('width', [1400, 400])
def test_code_and_outputs_fit_the_column(browser, served, width):
    """At a laptop's 1400 px, 88 characters of code (black's width, and every notebook's)
    need no sideways scroll, nor does an 88-character line put into a copy of a real code
    block and output; a longer output line wraps. On a 400 px phone no block scrolls: long
    lines wrap. The learning path's tables fit the column; on the phone they are stacked,
    each cell labelled with its column."""
    window(browser, width)
    try:
        for page in ('tensor', 'index'):
            assert browser.open(served + f'{page}.html') == []
            facts = browser.evaluate(_SCROLLING % ('true' if width > 600 else 'false'))
            assert facts['blocks'] > 10, facts
            scrolling = facts['scrolling']
            if width > 600:
                assert facts['synthetic'] == [88, 88], facts['synthetic']
            assert scrolling == [], f'{page} at {width} px: {scrolling[:5]}'
            for t in facts['tables']:
                assert t['scroll'] <= t['client'] + 1, (page, width, t)
                assert t['width'] <= t['box'] + 1, (page, width, t)
                assert t['stacked'] == (width < 600), (page, width, t)
                assert t['unlabelled'] == 0, (page, width, t)
            if page == 'index': assert len(facts['tables']) >= 1
    finally:
        browser.call('Emulation.clearDeviceMetricsOverride')


_FOLDS = r"""(() => [...document.querySelectorAll('article details.fs-fold')].map(d => {
  const shown = e => e.checkVisibility() && e.getBoundingClientRect().height > 0;
  const count = sel => [...d.querySelectorAll(sel)].filter(shown).length;
  const parts = () => ({code: count('div.cell_input pre'),
                        outputs: count('div.cell_output'),
                        prose: count(':scope > p, :scope > ul, :scope > ol')});
  const closed = {open: d.open, ...parts()};
  d.open = true;
  const code = d.querySelector('div.cell_input pre');
  return {summary: d.querySelector('summary').textContent.trim(), closed,
          opened: parts(), inner: d.querySelectorAll('details').length,
          first: code ? code.textContent.split('\n')[0] : ''};
}))()"""


def test_a_solution_folds_its_prose_code_and_outputs_as_one(browser, served):
    "Closed, a solution shows only its summary; opened, its prose, code and output."
    assert browser.open(served + 'optim.html') == []
    folds = browser.evaluate(_FOLDS)
    assert [f['summary'] for f in folds] == [f'Solution {k}' for k in range(1, 6)]
    for f in folds:
        assert f['closed'] == {'open': False, 'code': 0, 'outputs': 0, 'prose': 0}, f
        assert f['opened']['code'] >= 1 and f['opened']['outputs'] >= 1, f
        assert f['first'].startswith(f"# {f['summary']}"), f
        assert f['inner'] == 0, f                     # no second fold inside the fold
    assert folds[0]['opened']['prose'] >= 1


def test_solutions_are_inside_their_folds_on_every_page(site, pages):
    "Every code cell of a solution is in the closed fold of its solution, on all pages."
    from bs4 import BeautifulSoup
    folded = 0
    for p in pages:
        soup = BeautifulSoup((site / f'{p["page"]}.html').read_text(), 'html.parser')
        for pre in soup.select('article div.cell_input pre'):
            m = re.match(r'# (Solution \d+)', pre.get_text())
            if not m: continue
            fold = pre.find_parent('details', class_='fs-fold')
            assert fold is not None, (p['page'], m.group(0))
            assert fold.summary.get_text(strip=True) == m.group(1), p['page']
            assert 'open' not in fold.attrs
            folded += 1
    assert folded >= 100


def test_every_heading_has_one_id(site, pages):
    "A heading has one anchor, its section's id (MyST's slug adds no second one)."
    from bs4 import BeautifulSoup
    problems = []
    heads = ', '.join(f'article section > h{n}' for n in range(1, 7))
    for p in pages + [{'page': 'reference'}]:
        soup = BeautifulSoup((site / f'{p["page"]}.html').read_text(), 'html.parser')
        for h in soup.select(heads):
            ids = [h.parent.get('id'), h.get('id')]
            ids += [e.get('id') for e in h.find_previous_siblings(id=True)]
            ids = [i for i in ids if i]
            if len(ids) != 1:
                problems.append(f'{p["page"]}: {h.get_text(strip=True)[:60]}: {ids}')
    assert problems == [], '\n'.join(problems[:20])
    autograd = (site / 'autograd.html').read_text()
    assert 'id="what-retain-graph-does-not-do"' in autograd
    assert 'what-retain_graph' not in autograd


def test_on_this_page_lists_sections_not_api_entries(site):
    "A lesson's contents are its sections; its names are the reference page's."
    from bs4 import BeautifulSoup
    toc = '#pst-page-toc-nav a, .bd-toc-nav a'
    soup = BeautifulSoup((site / 'autograd.html').read_text(), 'html.parser')
    names = {dt['id'] for dt in soup.select('dl.py > dt[id]')}
    links = [a['href'] for a in soup.select(toc)]
    assert len(names) >= 5 and len(links) >= 10, links
    assert all(h.startswith('#') for h in links), links
    assert not [h for h in links if h[1:] in names or h.startswith('#fromscratch.')]
    assert '#what-retain-graph-does-not-do' in links
    ref = BeautifulSoup((site / 'reference.html').read_text(), 'html.parser')
    entries = [a for a in ref.select(toc) if a['href'].startswith('#fromscratch.')]
    assert len(entries) >= 250


@pytest.mark.parametrize('query, section', [
    ('retain_graph', 'autograd.html#what-retain-graph-does-not-do'),
    ('retain_grad', 'autograd.html#gradients-of-intermediate-tensors-retain-grad'),
    ('graph is used once', 'autograd.html#retain-graph-a-graph-is-used-once'),
])
def test_search_finds_a_section_by_its_heading(browser, served, query, section):
    "A heading's words, code in it included, find its section, linked by its anchor."
    problems = browser.open(served + 'search.html?q=' + urllib.parse.quote(query))
    hits = browser.evaluate(_SEARCH, promise=True)
    assert problems == [], problems
    assert section in [h['href'] for h in hits[:5]], hits[:8]
