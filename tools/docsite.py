"""Build the course's documentation site as static HTML that works offline, and serve it.

    python tools/docsite.py build [OUT]                # nbs/*.ipynb -> OUT/ (default _site/)
    python tools/docsite.py serve [OUT] [--port 8000]  # serve OUT/ on http://127.0.0.1:PORT/

`make docs` and `make serve-docs` run these. Users who have quarto can build the same pages with nbdev's
own `nbdev_docs` / `nbdev_preview` instead (configured by _quarto.yml): this builder exists because
quarto cannot be installed everywhere, and it follows nbdev where it can:

- the pages are the notebooks of nbs/ in nbdev's sidebar order (`nbdev_sidebar`: file order, index
  first), read from the folder each time, so a new notebook appears without editing any list;
- each notebook goes through nbdev's own processors (`FilterDefaults`: front matter from the H1 and
  `>` summary, `#| hide` cells dropped, directives removed, `show_doc` added after every exported
  symbol and executed), as `nbdev_docs` prepares them for quarto, with two changes for a course: the
  code of `#| export` cells stays on the page (nbdev's site shows only its API reference), and cells
  that nbdev re-runs for `show_doc` keep the outputs stored in the notebook (the ones nbval checks);
- the result is rendered with nbconvert's markdown and highlighting filters into one Jinja template,
  with MathJax 3 (from the `django-static-mathjax` wheel) copied into the site, so that no page loads
  anything from another host. No notebook is executed.

A notebook that cannot be processed stops the build with a DocBuildError that names the notebook and the
cell (its index in the notebook file, counting from 0).
"""
import argparse
import base64
import copy
import functools
import html
import http.server
import json
import os
import re
import shutil
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / 'docsite_assets'
MEDIA = {'.png', '.jpg', '.jpeg', '.gif', '.svg', '.webp', '.avif', '.ico', '.mp4', '.webm', '.pdf'}


class DocBuildError(Exception):
    "A notebook that could not be turned into a page: the message names the notebook and the cell."


# ---------------------------------------------------------------------------------------------------
# Which notebooks, in which order

def course_notebooks(nbs):
    "The notebooks under `nbs` in the order of nbdev's sidebar (`nbdev_sidebar`): sorted, index first."
    from nbdev.doclinks import nbglob
    from nbdev.quarto import _sort
    nbs = Path(nbs)
    found = nbglob(nbs, func=lambda d, name: (Path(d), name), skip_folder_re=r'(?:^[_.]|^www\$)')
    return [d / name for d, name in sorted(found, key=_sort)]


def page_url(nb, nbs):
    "Where nbdev/quarto put a notebook's page: `00_testing.ipynb` -> `testing.html`, index -> `index.html`."
    from nbdev.doclinks import _nbpath2html
    return _nbpath2html(Path(nb).relative_to(nbs)).as_posix()


# ---------------------------------------------------------------------------------------------------
# Reading and processing one notebook with nbdev

def _where(path, idx=None):
    where = str(Path(path).resolve().relative_to(ROOT)) if Path(path).resolve().is_relative_to(ROOT) else str(path)
    return where if idx is None else f'{where}, cell {idx}'


def _check_cells(path, raw):
    "Fail early, naming the cell, on a notebook whose cells are not what nbformat 4 describes."
    if not isinstance(raw, dict) or not isinstance(raw.get('cells'), list):
        raise DocBuildError(f'{_where(path)}: not a notebook (no list of cells)')
    for i, cell in enumerate(raw['cells']):
        bad = None
        if not isinstance(cell, dict): bad = 'is not a JSON object'
        elif cell.get('cell_type') not in ('code', 'markdown', 'raw'): bad = f"has an unknown cell_type {cell.get('cell_type')!r}"
        elif 'source' not in cell: bad = "has no 'source'"
        elif not isinstance(cell['source'], str) and not (
                isinstance(cell['source'], list) and all(isinstance(s, str) for s in cell['source'])):
            bad = "has a 'source' that is neither a string nor a list of strings"
        elif cell['cell_type'] == 'code' and not (
                isinstance(cell.get('outputs', []), list) and all(isinstance(o, dict) and 'output_type' in o
                                                                 for o in cell.get('outputs', []))):
            bad = "has malformed 'outputs' (each needs an 'output_type')"
        if bad: raise DocBuildError(f'{_where(path, i)} (the {_ordinal(i + 1)} cell) {bad}')


def _ordinal(n): return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _source_idx(cells, cell):
    "The index in the notebook file of `cell`, or of the cell it was made from (a `show_doc` nbdev added)."
    last = None
    for c in cells:
        if 'src_idx_' in c: last = c.src_idx_
        if c is cell: return cell.get('src_idx_', last)
    return cell.get('src_idx_', last)


def _describe(path, cells, cell, proc, exc):
    idx = _source_idx(cells, cell) if cell is not None else None
    name = getattr(proc, 'nbdev_name', None) or getattr(proc, '__name__', type(proc).__name__)
    cause = exc.__cause__ if exc.__cause__ is not None and str(exc).startswith('Error') else exc
    msg = f'{_where(path, idx)}: nbdev processor `{name}` failed: {type(cause).__name__}: {cause}'
    exported = {'export', 'exports', 'exporti'} & set(cell.get('directives_', {})) if cell is not None else set()
    imports = cell is not None and re.search(r'^\s*(import|from)\s', cell.get('source') or '', re.M)
    if name == 'exec_show_docs' and cell is not None and 'src_idx_' in cell and imports and not exported:
        msg += ('\n  nbdev runs every cell that imports something while it builds the API reference (show_doc), '
                'and this cell also uses names that only cells nbdev does not run define. Keep imports in cells '
                'of their own (STYLE.md: imports only in the import cells), as `nbdev_docs` needs too.')
    elif name == 'exec_show_docs' and isinstance(cause, SystemExit):
        msg += ('\n  nbdev runs exported cells, with `__name__ == "__main__"`, to build the API reference: add '
                '`#| eval: false` to a cell that starts a script (it is still exported), as `nbdev_docs` needs too.')
    if cell is not None and cell.get('source'):
        lines = cell.source.splitlines()
        msg += '\n' + '\n'.join(f'    | {l}' for l in lines[:12]) + ('\n    | ...' if len(lines) > 12 else '')
    return msg


@contextmanager
def _in_dir(path):
    old = os.getcwd()
    os.chdir(path)
    try: yield
    finally: os.chdir(old)


def keep_export_code(cell):
    "nbdev's `rm_export`, except that the code of `#| export` cells stays on the page: writing it is the lesson."
    if cell.directives_ and (cell.directives_.keys() & {'hide', 'default_exp'}): del cell['source']


def doc_processors():
    """The processors `nbdev_docs` runs (settings.ini's `skip_procs`/`procs` included), showing exported code
    and keeping the outputs stored in the notebook."""
    from nbdev.processors import FilterDefaults, exec_show_docs, rm_export

    class exec_show_docs_stored(exec_show_docs):
        """nbdev's `exec_show_docs`, which runs exported and importing cells to build the API reference, except
        that a cell it re-runs keeps the outputs stored in the notebook: the page shows what nbval checked."""
        nbdev_name = 'exec_show_docs'

        def __call__(self, cell):
            stored = copy.deepcopy(cell.get('outputs')) if 'src_idx_' in cell else None
            super().__call__(cell)
            if stored is not None: cell['outputs'] = stored

    swap = {rm_export: keep_export_code, exec_show_docs: exec_show_docs_stored}
    return [swap.get(p, p) for p in FilterDefaults().procs()]


def _definition_order(cells):
    "nbdev adds the `show_doc` cells for a cell that defines several symbols last first: put them in order."
    out, run = [], []
    for c in cells + [None]:
        if c is not None and c.get('has_sd'): run.append(c); continue
        out += run[::-1]
        run = []
        if c is not None: out.append(c)
    return out


def process_notebook(path):
    "Read the notebook at `path` and run nbdev's documentation processors on it, as `nbdev_docs` does."
    from execnb.nbio import dict2nb
    from nbdev.process import NBProcessor

    class Processor(NBProcessor):
        "nbdev's NBProcessor, with errors that name the notebook and the cell."
        def _process_cell(self, proc, cell):
            try: super()._process_cell(proc, cell)
            except DocBuildError: raise
            except Exception as e: raise DocBuildError(_describe(path, self.nb.cells, cell, proc, e)) from e

        def _proc(self, proc):
            try: super()._proc(proc)
            except DocBuildError: raise
            except Exception as e: raise DocBuildError(_describe(path, self.nb.cells, None, proc, e)) from e

    try: raw = json.loads(Path(path).read_text(encoding='utf-8'))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DocBuildError(f'{_where(path)}: not a readable notebook: {e}') from e
    _check_cells(path, raw)
    nb = dict2nb(raw)
    nb['path_'] = str(path)
    for i, cell in enumerate(nb.cells): cell['src_idx_'] = i
    with warnings.catch_warnings(), _in_dir(ROOT):
        warnings.filterwarnings('ignore', message='Found cells containing imports')
        in_test, os.environ['IN_TEST'] = os.environ.get('IN_TEST'), '1'   # as nbdev's docs build (serve_drv) sets it
        try:
            procs = doc_processors()                      # reads settings.ini (skip_procs, procs)
            with _in_dir(Path(path).parent): Processor(path, procs=procs, nb=nb).process()
            nb.cells = _definition_order(nb.cells)
        finally:
            if in_test is None: del os.environ['IN_TEST']
            else: os.environ['IN_TEST'] = in_test
    return nb


# ---------------------------------------------------------------------------------------------------
# Rendering cells to HTML with nbconvert's filters

_re_quarto_opt = re.compile(r'^\s*#\|\s*([\w-]+)\s*:\s*(.*?)\s*$')
_re_directive = re.compile(r'^\s*#\|')
_re_nbval = re.compile(r'^\s*#\s*NBVAL_\w+\s*$')
_re_math = re.compile(r'\$\$.+?\$\$|(?<![\\$\w])\$[^\s$][^$\n]*?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{', re.S)


def split_options(source):
    "Quarto cell options (`#| echo: false`, left in place by nbdev) and the code without them."
    lines, opts = source.splitlines(), {}
    while lines and _re_directive.match(lines[0]):      # nbdev leaves directives in a cell with no code
        if m := _re_quarto_opt.match(lines.pop(0)): opts[m.group(1)] = m.group(2).strip('"\'').lower()
    code = '\n'.join(l for l in lines if not _re_nbval.match(l)).strip('\n')
    return opts, code


def markdown(source, attachments=None):
    "Markdown to HTML with nbconvert's renderer, which leaves `$...$` and `$$...$$` for MathJax."
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
    renderer = IPythonRenderer(escape=False, exclude_anchor_links=True, attachments=attachments or {})
    return MarkdownWithMath(renderer=renderer).render(source)


def inline_markdown(text):
    "One line of markdown (a title, a summary) as HTML without the paragraph around it."
    return re.sub(r'^<p>(.*)</p>$', r'\1', markdown(text).strip(), flags=re.S)


def highlight(code, language='python'):
    from nbconvert.filters.highlight import Highlight2HTML
    lexer = 'ipython3' if language in ('python', 'ipython', '') else language
    return Highlight2HTML(pygments_lexer=lexer)(code, language=lexer)


def _text(x): return ''.join(x) if isinstance(x, list) else str(x)


def _collapse_cr(text):
    "What a terminal shows for text with carriage returns (progress bars): the last write of each line."
    return '\n'.join(line.rsplit('\r', 1)[-1] for line in text.split('\n'))


@dataclass
class PageState:
    "What rendering one page collects: its figures and whether it needs MathJax."
    slug: str
    figures: list = field(default_factory=list)
    math: bool = False

    def figure(self, data, ext, idx):
        name = f'figures/{self.slug}-cell{idx}-{len(self.figures) + 1}.{ext}'
        self.figures.append((name, data))
        return name


def render_output(out, page, idx, asis=False):
    "One output of a code cell as HTML."
    from nbconvert.filters import ansi2html
    kind = out.get('output_type')
    if kind == 'stream':
        text = _collapse_cr(_text(out.get('text', '')))
        if not text.strip(): return ''
        return f'<pre class="output stream {html.escape(out.get("name", "stdout"))}">{ansi2html(text.rstrip())}</pre>'
    if kind == 'error':
        tb = '\n'.join(out.get('traceback') or [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"])
        return f'<pre class="output error">{ansi2html(tb)}</pre>'
    data = out.get('data', {})
    if asis and 'text/markdown' in data:
        md = _text(data['text/markdown'])
        page.math = page.math or bool(_re_math.search(md))
        return f'<div class="output doc">{markdown(md)}</div>'
    if 'text/html' in data:
        return f'<div class="output html">{_text(data["text/html"])}</div>'
    if 'image/svg+xml' in data:
        return f'<div class="output image">{_text(data["image/svg+xml"])}</div>'
    for mime, ext in (('image/png', 'png'), ('image/jpeg', 'jpg'), ('image/gif', 'gif')):
        if mime in data:
            raw = base64.b64decode(_text(data[mime]), validate=False)
            meta = out.get('metadata', {}).get(mime, {})
            size = ''.join(f' {k}="{int(meta[k])}"' for k in ('width', 'height') if k in meta)
            alt = f'Figure made by cell {idx} of the notebook'
            src = page.figure(raw, ext, idx)
            return f'<div class="output image"><img src="{ROOT_MARK}{src}" alt="{alt}"{size}></div>'
    if 'text/markdown' in data:
        md = _text(data['text/markdown'])
        page.math = page.math or bool(_re_math.search(md))
        return f'<div class="output markdown">{markdown(md)}</div>'
    if 'text/latex' in data:
        page.math = True
        return f'<div class="output latex">{html.escape(_text(data["text/latex"]))}</div>'
    if 'text/plain' in data:
        return f'<pre class="output result">{ansi2html(_text(data["text/plain"]))}</pre>'
    return ''


def coalesce_streams(outputs):
    "Consecutive writes to the same stream as one output, the way Jupyter shows them."
    out = []
    for o in outputs:
        if (o.get('output_type') == 'stream' and out and out[-1].get('output_type') == 'stream'
                and out[-1].get('name') == o.get('name')):
            out[-1] = {**out[-1], 'text': _text(out[-1].get('text', '')) + _text(o.get('text', ''))}
        else: out.append(o)
    return out


def render_cell(cell, page):
    "One processed cell as HTML ('' for cells the page does not show)."
    idx = cell.get('src_idx_', 'new')
    if cell.cell_type == 'markdown':
        source = cell.source
        page.math = page.math or bool(_re_math.search(source))
        attachments = {k: dict(v) for k, v in (cell.get('attachments') or {}).items()}
        return f'<div class="cell markdown">{markdown(source, attachments)}</div>' if source.strip() else ''
    if cell.cell_type == 'raw':
        fmt = cell.get('metadata', {}).get('format', '') or cell.get('metadata', {}).get('raw_mimetype', '')
        return f'<div class="cell raw">{cell.source}</div>' if 'html' in fmt else ''
    opts, code = split_options(cell.source)
    if opts.get('include') == 'false': return ''
    is_doc = code.lstrip().startswith('show_doc(')
    parts = []
    if code.strip() and opts.get('echo') != 'false':
        parts.append(f'<div class="input">{highlight(code, cell.get("metadata", {}).get("language", "python"))}</div>')
    if opts.get('output') != 'false':
        asis = opts.get('output') == 'asis'
        outs = [render_output(o, page, idx, asis) for o in coalesce_streams(cell.get('outputs', []))]
        if any(outs): parts.append(f'<div class="outputs">{"".join(outs)}</div>')
    if not parts: return ''
    kind = 'doc' if is_doc else 'code'
    return f'<div class="cell {kind}">{"".join(parts)}</div>'


# ---------------------------------------------------------------------------------------------------
# Pages

@dataclass
class Page:
    source: Path            # the notebook, relative to nbs/
    url: str                # its page, relative to the site root
    num: str                # "00" from "00_testing.ipynb" ("12a" from "12a_x.ipynb"), "" for the index
    title: str              # plain text
    title_html: str         # the title's markdown (`code` and all) as HTML
    description: str        # HTML
    body: str = ''          # HTML
    toc: list = field(default_factory=list)
    sections: list = field(default_factory=list)
    math: bool = False
    prev: 'Page' = None
    next: 'Page' = None

    @property
    def root(self): return '../' * self.url.count('/')

    @property
    def label(self): return 'Overview' if Path(self.url).stem == 'index' and not self.num else self.title_html


def _slug(text, used):
    "A heading id the way pandoc (and so quarto, and nbdev's doc links) makes one."
    s = re.sub(r'[^\w\- .]', '', text.strip().lower()).strip().replace(' ', '-')
    s = re.sub(r'^[^a-z_]+', '', s) or 'section'
    base, n = s, 1
    while s in used:
        s, n = f'{base}-{n}', n + 1
    used.add(s)
    return s


ROOT_MARK = 'site-root:'   # links and images made here are relative to the site root until the page is known


def finish_html(body, page, url_of_nb, doc_prefix):
    """Give headings ids and anchors, point links at the site's own pages, and collect the table of
    contents and the text the search box looks through."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(body, 'html.parser')
    used, toc, sections = set(), [], [{'h': page.title, 'a': '', 't': []}]
    # the API reference (show_doc) headings get their symbol's plain id first, for nbdev's links (`#check_close`)
    doc_ids = {id(h): _slug(h.get_text(' ', strip=True), used)
               for d in soup.select('.output.doc') for h in d.find_all(['h2', 'h3', 'h4'])}
    for el in soup.find_all(['h1', 'h2', 'h3', 'h4', 'p', 'li', 'pre', 'td', 'blockquote']):
        if el.name[0] == 'h' and len(el.name) == 2:
            for a in el.find_all('a', class_='anchor-link'): a.decompose()
            text = el.get_text(' ', strip=True)
            el['id'] = doc_ids.get(id(el)) or _slug(text, used)
            anchor = soup.new_tag('a', href=f'#{el["id"]}', attrs={'class': 'anchor', 'aria-label': f'Link to {text}'})
            anchor.string = '#'
            el.append(anchor)
            if el.name == 'h2': toc.append((el['id'], text))
            sections.append({'h': text, 'a': el['id'], 't': []})
        elif not el.find_parent(['li', 'td', 'blockquote', 'pre']):
            classes = el.get('class') or []
            if 'output' in classes and 'doc' not in classes: continue
            sections[-1]['t'].append(' '.join(el.get_text('' if el.name == 'pre' else ' ').split()))
    here = page.source.parent
    for a in soup.find_all('a', href=True):
        href = a['href']
        if doc_prefix and href.startswith(doc_prefix): a['href'] = ROOT_MARK + href[len(doc_prefix):].lstrip('/')
        elif not re.match(r'^[a-z][a-z0-9+.-]*:|^#|^/', href):
            target, _, frag = href.partition('#')
            key = os.path.normpath((here / target).as_posix()).replace(os.sep, '/')
            if target.endswith('.ipynb') and key in url_of_nb:
                a['href'] = ROOT_MARK + url_of_nb[key] + (f'#{frag}' if frag else '')
        if re.match(r'^https?://', a['href']): a['rel'] = 'noopener'
    for tag in soup.find_all(['a', 'img']):
        for attr in ('href', 'src'):
            if tag.get(attr, '').startswith(ROOT_MARK): tag[attr] = page.root + tag[attr][len(ROOT_MARK):]
    for s in sections: s['t'] = ' '.join(s['t'])[:3000]
    return str(soup), toc, [s for s in sections if s['t'] or s['a']]


def build_page(nb_path, nbs, url_of_nb, doc_prefix, out):
    "Process and render one notebook; returns its Page (prev/next are filled in by `build`)."
    nb = process_notebook(nb_path)
    fm = dict(getattr(nb, 'frontmatter_', {}) or {})
    rel = Path(nb_path).relative_to(nbs)
    num = m.group(1) if (m := re.match(r'^(\d+[a-zA-Z0-9]*)_', rel.name)) else ''
    title_html = inline_markdown(str(fm.get('title') or rel.stem))
    title = html.unescape(re.sub(r'<[^>]+>', '', title_html))
    desc = inline_markdown(str(fm['description'])) if fm.get('description') else ''
    page = Page(rel, url_of_nb[rel.as_posix()], num, title, title_html, desc)
    state = PageState(slug=Path(page.url).stem, math=bool(_re_math.search(str(fm.get('description', '')))))
    parts = []
    for cell in nb.cells:
        if cell.cell_type == 'raw' and cell.get('source', '').startswith('---'): continue   # nbdev's front matter
        try: parts.append(render_cell(cell, state))
        except Exception as e:
            raise DocBuildError(f'{_where(nb_path, _source_idx(nb.cells, cell))}: could not render this cell: '
                                f'{type(e).__name__}: {e}') from e
    page.body, page.toc, page.sections = finish_html('\n'.join(p for p in parts if p), page, url_of_nb, doc_prefix)
    page.math = state.math
    for name, data in state.figures:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return page


# ---------------------------------------------------------------------------------------------------
# The site

def _settings():
    from configparser import ConfigParser
    cfg = ConfigParser(delimiters=['='], interpolation=None)
    cfg.read(ROOT / 'settings.ini', encoding='utf-8')
    return cfg['DEFAULT']


def mathjax_file():
    "MathJax 3's single-file TeX-to-SVG build, from the django-static-mathjax wheel (no CDN at view time)."
    import importlib.util
    spec = importlib.util.find_spec('mathjax')
    path = spec and Path(list(spec.submodule_search_locations)[0]) / 'static' / 'mathjax' / 'es5' / 'tex-svg-full.js'
    if not path or not path.exists():
        raise DocBuildError('MathJax is missing: `pip install django-static-mathjax` (part of `pip install -e ".[dev]"`)')
    return path


def copy_assets(out, nbs):
    "The site's CSS, scripts, MathJax and the pictures that notebooks link to from nbs/."
    from pygments.formatters import HtmlFormatter
    dest = out / 'assets'
    dest.mkdir(parents=True, exist_ok=True)
    for f in ASSETS.iterdir():
        if f.suffix in ('.css', '.js', '.svg'): shutil.copy2(f, dest / f.name)
    (dest / 'pygments.css').write_text(HtmlFormatter(style='friendly').get_style_defs('.highlight'), encoding='utf-8')
    mj = mathjax_file()
    (dest / 'mathjax').mkdir(exist_ok=True)
    shutil.copy2(mj, dest / 'mathjax' / mj.name)
    if (mj.parents[1] / 'LICENSE').exists(): shutil.copy2(mj.parents[1] / 'LICENSE', dest / 'mathjax' / 'LICENSE')
    for f in sorted(nbs.rglob('*')):
        rel = f.relative_to(nbs)
        if f.is_file() and f.suffix.lower() in MEDIA and not any(p[0] in '._' for p in rel.parts):
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, out / rel)


def build(out=ROOT / '_site', nbs=ROOT / 'nbs', quiet=False):
    "Build the whole site from the notebooks in `nbs` into `out`; returns the pages in sidebar order."
    out, nbs = Path(out).resolve(), Path(nbs).resolve()
    cfg = _settings()
    with _in_dir(ROOT): notebooks = course_notebooks(nbs)     # nbdev reads settings.ini from the working dir
    if not notebooks: raise DocBuildError(f'{_where(nbs)}: no notebooks to build a site from')
    url_of_nb = {nb.relative_to(nbs).as_posix(): page_url(nb, nbs) for nb in notebooks}
    seen = {}
    for nb, url in url_of_nb.items():
        if url in seen: raise DocBuildError(f'{nb} and {seen[url]} would both be the page {url}: rename one of them')
        seen[url] = nb
    doc_prefix = cfg.get('doc_host', '').rstrip('/') + '/' + cfg.get('doc_baseurl', '').strip('/') + '/'
    final, out = out, out.with_name(out.name + '.building')   # a failed build leaves the last good site alone
    if out.exists(): shutil.rmtree(out)
    out.mkdir(parents=True)
    try: pages = _build_into(out, nbs, notebooks, url_of_nb, doc_prefix, cfg, quiet)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    if final.exists(): shutil.rmtree(final)
    out.rename(final)
    if not quiet: print(f'Built {len(pages)} pages into {final}', flush=True)
    return pages


def _build_into(out, nbs, notebooks, url_of_nb, doc_prefix, cfg, quiet):
    import jinja2
    pages = []
    for nb in notebooks:
        if not quiet: print(f'  {nb.relative_to(nbs)} -> {url_of_nb[nb.relative_to(nbs).as_posix()]}', flush=True)
        pages.append(build_page(nb, nbs, url_of_nb, doc_prefix, out))
    for a, b in zip(pages, pages[1:]): a.next, b.prev = b, a

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ASSETS), autoescape=jinja2.select_autoescape(['j2']))
    template = env.get_template('page.html.j2')
    site = {'title': cfg.get('title', 'fromscratch'), 'description': cfg.get('description', ''),
            'git_url': cfg.get('git_url', '')}
    for page in pages:
        dest = out / page.url
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(template.render(site=site, page=page, pages=pages), encoding='utf-8')
    index = [{'title': p.title, 'url': p.url, 'num': p.num, 'sections': p.sections} for p in pages]
    copy_assets(out, nbs)
    (out / 'assets' / 'search-index.js').write_text(
        'window.SITE_SEARCH_INDEX = ' + json.dumps(index, ensure_ascii=False, separators=(',', ':')) + ';\n',
        encoding='utf-8')
    (out / 'pages.json').write_text(json.dumps(
        [{'url': p.url, 'title': p.title, 'source': p.source.as_posix(), 'math': p.math} for p in pages], indent=1),
        encoding='utf-8')
    return pages


# ---------------------------------------------------------------------------------------------------
# Serving it

class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        "A browser that stops a download (it left the page) is no error of ours."
        if not isinstance(sys.exc_info()[1], ConnectionError): super().handle_error(request, client_address)


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      '.js': 'text/javascript', '.svg': 'image/svg+xml', '.json': 'application/json'}

    def log_message(self, format, *args):
        if not getattr(self.server, 'quiet', False): super().log_message(format, *args)


def make_server(site, port=8000, host='127.0.0.1', quiet=False):
    "An HTTP server for the folder `site` (port 0: any free port)."
    server = _Server((host, port), functools.partial(_Handler, directory=str(site)))
    server.quiet = quiet
    return server


def serve(site=ROOT / '_site', port=8000, host='127.0.0.1', quiet=False):
    "Serve the built site (building it first if it is not there) until interrupted."
    site = Path(site)
    if not (site / 'index.html').exists(): build(site)
    try: server = make_server(site, port, host, quiet)
    except OSError as e:
        raise DocBuildError(f'cannot serve on {host}:{port} ({e.strerror}): choose another port, '
                            f'e.g. `make serve-docs PORT={port + 1}` or `--port {port + 1}`') from e
    print(f'Serving {site} at http://{host}:{server.server_address[1]}/  (Ctrl+C stops it)', flush=True)
    try: server.serve_forever()
    except KeyboardInterrupt: pass
    finally: server.server_close()


def main(argv=None):
    warnings.filterwarnings('ignore', message='pkg_resources is deprecated')   # nbdev 2 still imports it
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = p.add_subparsers(dest='cmd', required=True)
    b = sub.add_parser('build', help='build the site from the notebooks')
    b.add_argument('out', nargs='?', default=str(ROOT / '_site'))
    b.add_argument('--nbs', default=str(ROOT / 'nbs'), help='folder of notebooks (default: nbs/)')
    s = sub.add_parser('serve', help='serve the built site on localhost')
    s.add_argument('site', nargs='?', default=str(ROOT / '_site'))
    s.add_argument('--port', type=int, default=int(os.environ.get('PORT', 8000)))
    s.add_argument('--host', default='127.0.0.1')
    s.add_argument('--quiet', action='store_true', help='do not log each request')
    args = p.parse_args(argv)
    try:
        if args.cmd == 'build': build(args.out, args.nbs)
        else: serve(args.site, args.port, args.host, args.quiet)
    except DocBuildError as e:
        sys.exit(f'docs {args.cmd} failed: {e}')


if __name__ == '__main__':
    main()
