"""Build the course's documentation site with Sphinx, MyST-NB and the sphinx-book-theme, offline; serve it;
check its links.

    python tools/docs.py build [OUT]                # nbs/*.ipynb -> OUT/ (default _site/)
    python tools/docs.py serve [OUT] [--port 8000]  # serve OUT/ on http://127.0.0.1:PORT/
    python tools/docs.py check [OUT]                # every link and anchor inside OUT/ resolves

`make docs`, `make serve-docs` run the first two. nbdev stays the source of truth: each notebook goes
through nbdev's own processors (front matter from the H1 and `>` summary, `#| hide` cells dropped, a
`show_doc` after every exported symbol) as `nbdev_docs` prepares them for quarto, and this file then turns
what quarto would read into what Sphinx reads:

- a `show_doc` becomes a Python-domain entry (`py:function`, `py:class`, `py:method`) with the symbol's full
  name, signature and docstring, so that Sphinx can link to it and check every link to it;
- the code of `#| export` cells stays on the page (writing it is the lesson), and a hidden cell that only
  imports is shown folded, so that every cell on a page can be copied and run;
- quarto's cell options become MyST-NB's tags (`echo: false` -> remove-input, `code-fold` -> hide-input,
  `fig-alt` -> the figure's alt text), quarto's `{...}` attributes and `:::` divs are converted or dropped;
- a name in backticks that the site documents (`Tensor.backward`, `F.linear`) becomes a link to it, and a
  notebook named in backticks (`05_value`) a link to its page.

Sphinx then builds the processed notebooks (build/docs-src/) from their stored outputs (MyST-NB's
`nb_execution_mode = "off"`: nothing is executed) with the configuration in docs/conf.py, in nitpicky mode
with warnings as errors, so that a broken cross-reference fails the build. The navigation groups the
notebooks into the course's parts by their number (`part_of`), so a new notebook needs no list edited.
"""
import argparse
import ast
import functools
import html
import http.server
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / 'docs'
MEDIA = {'.png', '.jpg', '.jpeg', '.gif', '.svg', '.webp'}

# The course in parts: a notebook's part comes from its number, so notebooks added later find their place.
PARTS = [(6, 'Foundations'), (10, 'The engine'), (14, 'Training'), (None, 'Beyond')]
REFERENCE = 'Reference'


class DocBuildError(Exception):
    "A notebook that could not be turned into a page: the message names the notebook and the cell."


def part_of(name):
    "The course part of a notebook file name: by its number (`07a_x` -> 7), 'Reference' for unnumbered ones."
    m = re.match(r'^(\d+)[a-zA-Z0-9]*_', Path(name).name)
    if not m: return REFERENCE
    n = int(m.group(1))
    return next(title for upper, title in PARTS if upper is None or n < upper)


@contextmanager
def _in_dir(path):
    old = os.getcwd()
    os.chdir(path)
    try: yield
    finally: os.chdir(old)


def course_notebooks(nbs):
    "The notebooks under `nbs` in the order of nbdev's sidebar (`nbdev_sidebar`): sorted, index first."
    from nbdev.doclinks import nbglob
    from nbdev.quarto import _sort
    nbs = Path(nbs)
    with _in_dir(ROOT):
        found = nbglob(nbs, func=lambda d, name: (Path(d), name), skip_folder_re=r'(?:^[_.]|^www\$)')
    return [d / name for d, name in sorted(found, key=_sort)]


def page_name(nb):
    "A notebook's page, as nbdev/quarto name it: `00_testing.ipynb` -> `testing`."
    return re.sub(r'^\d+[a-zA-Z0-9]*_', '', Path(nb).stem.lower())


def _where(path, idx=None):
    p = Path(path).resolve()
    where = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)
    return where if idx is None else f'{where}, cell {idx}'


# ---------------------------------------------------------------------------------------------------
# nbdev's processing of one notebook

_re_directive = re.compile(r'^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$')
_re_nbval = re.compile(r'^\s*#\s*NBVAL_\w+\s*$')
_re_magic = re.compile(r'^\s*%')


def split_directives(source):
    "The `#| name: value` lines at the top of a code cell as a dict, and the code without them."
    lines, opts = source.splitlines(), {}
    while lines and (lines[0].lstrip().startswith('#|') or not lines[0].strip()):
        if m := _re_directive.match(lines.pop(0)): opts[m.group(1)] = m.group(2).strip('"\'')
    for l in lines:        # a solution cell starts with `# Solution k`: its `#| fig-alt:` follows that line
        if (m := _re_directive.match(l)) and m.group(1) == 'fig-alt': opts['fig-alt'] = m.group(2).strip('"\'')
    code = '\n'.join(l for l in lines if not _re_nbval.match(l) and not _re_directive.match(l)).strip('\n')
    return opts, code


def only_imports(code):
    "Does this code only import (and set up magics)? Such a cell is shown, folded, even when nbdev hides it."
    body = '\n'.join(l for l in code.splitlines() if not _re_magic.match(l))
    try: tree = ast.parse(body)
    except SyntaxError: return False
    return bool(tree.body) and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body)


def keep_export_code(cell):
    "nbdev's `rm_export`, except that the code of `#| export` cells stays on the page: writing it is the lesson."
    if cell.directives_ and (cell.directives_.keys() & {'hide', 'default_exp'}): del cell['source']


def processors():
    "nbdev's documentation processors (`FilterDefaults`), less the quarto-only ones and the execution of cells."
    from nbdev import processors as p
    from nbdev.frontmatter import FrontmatterProc
    return [FrontmatterProc, p.populate_language, p.add_show_docs, p.strip_ansi, p.hide_line, p.filter_stream_,
            p.rm_header_dash, keep_export_code, p.clean_magics, p.hide_]


def process_notebook(path):
    "Read the notebook at `path` and run nbdev's processors over it; returns nbdev's notebook object."
    from execnb.nbio import dict2nb
    from nbdev.process import NBProcessor
    try: raw = json.loads(Path(path).read_text(encoding='utf-8'))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DocBuildError(f'{_where(path)}: not a readable notebook: {e}') from e
    if not isinstance(raw, dict) or not isinstance(raw.get('cells'), list):
        raise DocBuildError(f'{_where(path)}: not a notebook (no list of cells)')
    for i, cell in enumerate(raw['cells']):
        ok = isinstance(cell, dict) and cell.get('cell_type') in ('code', 'markdown', 'raw') and 'source' in cell
        if ok and cell['cell_type'] == 'code':
            ok = isinstance(cell.get('outputs', []), list) and all(isinstance(o, dict) and 'output_type' in o
                                                                  for o in cell.get('outputs', []))
        if not ok: raise DocBuildError(f'{_where(path, i)}: not a valid cell (cell_type, source and outputs)')
        src = ''.join(cell['source']) if isinstance(cell['source'], list) else cell['source']
        if cell['cell_type'] == 'code':
            opts, code = split_directives(src)
            if 'hide' in opts and only_imports(code):       # shown, folded: the page's code then runs as copied
                cell['source'] = code
                cell.setdefault('metadata', {})['fs_imports'] = True
    nb = dict2nb(raw)
    nb['path_'] = str(path)
    for i, cell in enumerate(nb.cells): cell['src_idx_'] = i
    with warnings.catch_warnings(), _in_dir(ROOT):
        warnings.filterwarnings('ignore')
        try: NBProcessor(path, procs=processors(), nb=nb).process()
        except DocBuildError: raise
        except Exception as e: raise DocBuildError(f'{_where(path)}: nbdev could not process it: {e}') from e
    return nb


# ---------------------------------------------------------------------------------------------------
# The API: what show_doc and the reference page show

def _settings():
    from configparser import ConfigParser
    cfg = ConfigParser(delimiters=['='], interpolation=None)
    cfg.read(ROOT / 'settings.ini', encoding='utf-8')
    return cfg['DEFAULT']


def resolve(dotted):
    "The object a dotted name (`fromscratch.nn.functional.linear`, `fromscratch.Tensor.sum`) stands for."
    parts = dotted.split('.')
    for i in range(len(parts), 0, -1):
        try: obj = importlib.import_module('.'.join(parts[:i]))
        except ImportError: continue
        for p in parts[i:]: obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


def signature(obj):
    "The call signature without annotations (PyTorch's docs show none either), or '' where there is none."
    target = obj.fget if isinstance(obj, property) else obj
    try: sig = inspect.signature(target)
    except (TypeError, ValueError): return '' if not callable(target) else '(*args, **kwargs)'
    params = [p.replace(annotation=inspect.Parameter.empty, default=_shown(p.default, target)) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


class _Named:
    "A default shown by its name: `layers=fromscratch.nn`, not a repr with the path of this machine's checkout."
    def __init__(self, name): self.name = name
    def __repr__(self): return self.name


def _shown(default, owner):
    "A default as the reader would write it: a module, class or function by its name, a module-level object too."
    if default is inspect.Parameter.empty: return default
    if inspect.ismodule(default): return _Named(default.__name__)
    if inspect.isclass(default) or inspect.isfunction(default) or inspect.isbuiltin(default):
        return _Named(_public_path(default, default.__qualname__) or f'{default.__module__}.{default.__qualname__}')
    module = inspect.getmodule(owner)
    if module is not None and ' at 0x' in repr(default):          # an object with an address: its global name
        for name, value in vars(module).items():
            if value is default: return _Named(_public_path(default, name) or f'{module.__name__}.{name}')
    return default


def _public_path(obj, name):
    "The shortest import path of fromscratch's that gives `obj` as `name` (`fromscratch.data.default_collate`)."
    import sys
    homes = [m for m, mod in list(sys.modules.items()) if m.split('.')[0] == 'fromscratch'
             and not any(part.startswith('_') for part in m.split('.')) and getattr(mod, name, None) is obj]
    return f'{min(homes, key=lambda m: (m.count("."), len(m)))}.{name}' if homes else None


def kind_of(obj, owner=None):
    if inspect.isclass(obj): return 'class'
    if isinstance(owner, type):
        raw = inspect.getattr_static(owner, obj.__name__ if hasattr(obj, '__name__') else '', None)
        if isinstance(raw, (property,)) or not callable(obj): return 'property'
        if isinstance(raw, staticmethod): return 'staticmethod'
        if isinstance(raw, classmethod): return 'classmethod'
        return 'method'
    return 'function' if callable(obj) else 'data'


def docstring(obj):
    doc = inspect.getdoc(obj) or ''
    if inspect.isclass(obj) and obj.__doc__ is None: doc = ''
    return doc.strip()


def directive(kind, fullname, obj, doc, extra='', noindex=False, contents=True):
    "A MyST block for one documented object (`contents=False`: not in the page's toc)."
    sig = signature(obj) if kind in ('class', 'function', 'method', 'staticmethod', 'classmethod') else ''
    if (kind in ('method', 'classmethod') and inspect.isfunction(obj)) or inspect.ismethod(obj):
        sig = re.sub(r'^\((?:self|cls)(?:, |(?=\)))', '(', sig)       # bound or not, shown as it is called
    if kind == 'class' and sig == '(*args, **kwargs)': sig = ''
    opts = [':no-index:'] if noindex else []
    if not contents: opts.append(':no-contents-entry:')
    if kind in ('staticmethod', 'classmethod'): kind, opts = 'method', opts + [f':{kind}:']
    body = '\n\n'.join(x for x in (doc, extra) if x)
    fence = '````' if '```' in body else ':::'
    head = f'{fence}{{py:{kind}}} {fullname}{sig}'
    return '\n'.join([head, *opts, '', body, fence]) if body else '\n'.join([head, *opts, fence])


# ---------------------------------------------------------------------------------------------------
# From a processed notebook to the notebook MyST-NB reads

_re_quarto_attr = re.compile(r'(?<=[)\]])\{(?:target|style|\.|#|fig-|width|height)[^}\n]*\}')
_re_div = re.compile(r'^(:{3,})\s*(\{[^}\n]*\})?\s*$')
_CALLOUTS = {'note': 'note', 'tip': 'tip', 'warning': 'warning', 'important': 'important', 'caution': 'caution'}
_re_backtick = re.compile(r'(?<![`\w\]])`([^`\n]+)`(?![`(\w])')


def quarto_to_myst(md):
    "Quarto's link attributes (`{target=\"_blank\"}`) dropped, its callouts as MyST admonitions, other divs unwrapped."
    md = _re_quarto_attr.sub('', md)
    out, stack, fence = [], [], None
    for line in md.split('\n'):
        if re.match(r'^\s*(```|~~~)', line):
            fence = None if fence else line.strip()[:3]
        m = None if fence else _re_div.match(line)
        if not m: out.append(line); continue
        attrs = m.group(2) or ''
        if attrs:                                            # an opening div
            kind = re.search(r'\.callout-(\w+)', attrs)
            stack.append(bool(kind))
            if kind: out.append(':::{' + _CALLOUTS.get(kind.group(1), 'note') + '}')
        elif stack and stack.pop(): out.append(':::')         # the end of a callout; other divs just unwrap
    return '\n'.join(out)


class Linker:
    "Names in backticks that the site documents become links to them; notebook names, links to their pages."
    def __init__(self, targets, pages):
        self.targets, self.pages = targets, pages          # {written name: full name}, {notebook stem: page}

    def link(self, text):
        name = text[:-2] if text.endswith('()') else text
        if name in self.targets: return f'{{py:obj}}`{text} <{self.targets[name]}>`'
        stem = re.sub(r'\.ipynb$', '', name.removeprefix('nbs/'))
        if stem in self.pages: return f'[`{text}`]({self.pages[stem]}.ipynb)'
        return None

    def relink(self, link):
        "A markdown link to a notebook (`[x](05_value.ipynb)`), pointed at its page."
        m = re.match(r'^(\[[^\]\n]*\]\()(?:nbs/)?([\w.-]+?)\.ipynb(#[^)\s]*)?\)$', link)
        if not (m and m.group(2) in self.pages): return link
        return f'{m.group(1)}{self.pages[m.group(2)]}.ipynb{m.group(3) or ""})'

    def __call__(self, md):
        out = []
        for i, chunk in enumerate(re.split(r'(^(?:```|~~~)[\s\S]*?^(?:```|~~~)\s*$)', md, flags=re.M)):
            if i % 2: out.append(chunk); continue
            pieces = re.split(r'(\[[^\]\n]*\]\([^)\n]*\)|<[^>\n]+>|\$\$[\s\S]*?\$\$|\$[^$\n]+\$)', chunk)
            for j, piece in enumerate(pieces):
                if j % 2 == 0:
                    piece = _re_backtick.sub(lambda m: self.link(m.group(1)) or m.group(0), piece)
                elif piece.startswith('['): piece = self.relink(piece)
                out.append(piece)
        return ''.join(out)


def alt_text(opts, code, where):
    "The alt text of a cell's figure: quarto's `#| fig-alt:`, else the titles the code gives it."
    if opts.get('fig-alt'): return opts['fig-alt']
    titles = re.findall(r"(?:set_title|suptitle|plt\.title)\(\s*f?(['\"])(.+?)\1", code)
    if titles: return 'Figure: ' + '; '.join(t for _, t in titles)
    raise DocBuildError(f'{where}: a figure without alt text: add `#| fig-alt: what the figure shows` to the cell')


def _text(x): return ''.join(x) if isinstance(x, list) else str(x)


# A heading that JupyterLab shows collapsed (its cell metadata) folds every cell up to
# the next heading of its level or higher: an exercise's solution, prose and code. On
# the page, the same cells are one closed <details> whose summary is the heading.
COLLAPSED = 'jp-MarkdownHeadingCollapsed'
_re_heading = re.compile(r'^(#{1,6})[ \t]+(.*?)[ \t#]*$')


def _outside_fences(md):
    fence = None
    for line in md.split('\n'):
        if re.match(r'^\s*(```|~~~)', line): fence = None if fence else line.strip()[:3]
        elif not fence: yield line


def heading_level(md):
    "The level of a markdown cell's highest heading (JupyterLab folds by it), or None."
    levels = [len(m.group(1)) for l in _outside_fences(md)
              if (m := _re_heading.match(l))]
    return min(levels) if levels else None


def fold_heading(md):
    "A collapsed heading cell as (the heading's text, the rest of the cell)."
    lines = md.split('\n')
    i = next(i for i, l in enumerate(lines) if _re_heading.match(l))
    rest = '\n'.join(lines[:i] + lines[i + 1:]).strip()
    return _re_heading.match(lines[i]).group(2), rest


class Page:
    "One notebook turned into a MyST-NB notebook, and the objects its show_doc entries document."
    def __init__(self, path, nbs):
        self.path, self.rel = Path(path), Path(path).relative_to(nbs)
        self.name = 'index' if self.rel.stem == 'index' else page_name(self.rel)
        self.part = None if self.name == 'index' else part_of(self.rel.name)
        self.nb = process_notebook(path)
        fm = dict(getattr(self.nb, 'frontmatter_', {}) or {})
        self.title, self.description = str(fm.get('title') or self.rel.stem), str(fm.get('description') or '')
        self.documented = []          # (full name, object, kind, source cell index) of each show_doc
        self._find_documented()

    def _find_documented(self):
        "The object each show_doc stands for: the symbol, in the module its exported cell went to."
        lib = _settings().get('lib_name', 'fromscratch')
        default, module = None, None
        from nbdev.processors import _default_exp
        from execnb.nbio import read_nb
        default = _default_exp(read_nb(self.path))      # nbdev drops the `#| default_exp` cell itself
        self.modules = [f'{lib}.{default.removesuffix(".__init__")}'] if default else []
        for cell in self.nb.cells:
            d = cell.get('directives_') or {}
            exp = next((d[k] for k in ('export', 'exports', 'exporti') if k in d), None)
            if exp is not None: module = exp[0] if exp else default
            if not cell.get('has_sd'): continue
            name = re.match(r'show_doc\((.+)\)', cell.source).group(1)
            full = f'{lib}.{module.removesuffix(".__init__")}.{name}'      # `#| default_exp optim.__init__`
            try: obj = resolve(full)
            except (ImportError, AttributeError) as e:
                raise DocBuildError(f'{_where(self.path, cell.get("src_idx_"))}: show_doc({name}): '
                                    f'{full} cannot be imported: {e}') from e
            owner = resolve(full.rpartition('.')[0]) if '.' in name else None
            cell['fs_doc'] = (full, obj, kind_of(obj, owner))
            self.documented.append(cell['fs_doc'])

    def myst_notebook(self, linker, indexed, download):
        "The notebook MyST-NB builds: title, download link, cells with MyST markup, show_docs as API entries."
        import nbformat
        v4 = nbformat.v4
        head = f'# {self.title}\n\n'
        if self.description: head += f'{{.lead}}\n{linker(quarto_to_myst(self.description))}\n\n'
        head += f'{{download}}`Download this notebook ({self.rel.name}) <{download}>`'
        cells = [v4.new_markdown_cell(head)]
        fold = None            # the level of the collapsed heading whose fold is open
        for cell in self.nb.cells:
            where = _where(self.path, cell.get('src_idx_'))
            if cell.get('fs_doc'):
                full, obj, kind = cell['fs_doc']
                first = full not in indexed
                indexed.add(full)
                # a lesson's contents list its sections, the reference page the names
                entry = directive(kind, full, obj, linker(docstring(obj)),
                                  noindex=not first, contents=False)
                cells.append(v4.new_markdown_cell(entry))
                continue
            src = cell.get('source')
            if src is None or cell.cell_type == 'raw': continue
            if cell.cell_type == 'markdown':
                level = heading_level(src)
                if fold and level and level <= fold:
                    cells.append(v4.new_markdown_cell('</details>'))
                    fold = None
                if level and cell.metadata.get(COLLAPSED):  # folded in the lab too
                    title, rest = fold_heading(src)
                    summary = f'<summary>{html.escape(title)}</summary>'
                    fold_open = f'<details class="fs-fold">\n{summary}'
                    cells.append(v4.new_markdown_cell(fold_open))
                    fold, src = level, rest
                if src.strip() and not src.startswith('<!-- WARNING'):
                    md = v4.new_markdown_cell(linker(quarto_to_myst(src)))
                    if cell.get('attachments'): md['attachments'] = dict(cell.attachments)
                    cells.append(md)
                continue
            opts, code = split_directives(src)
            tags = []
            if opts.get('include') == 'false': continue
            if opts.get('echo') == 'false': tags.append('remove-input')
            if opts.get('output') == 'false': tags.append('remove-output')
            hidden = cell.metadata.get('jupyter') or {}           # folded in Jupyter: folded on the page
            if 'code-fold' in opts or cell.metadata.get('fs_imports') or hidden.get('source_hidden'):
                tags.append('hide-input')
            if hidden.get('outputs_hidden'): tags.append('hide-output')
            outputs = [dict(o) for o in cell.get('outputs', [])]
            meta = {'tags': tags} if tags else {}
            if any('image/png' in o.get('data', {}) or 'image/svg+xml' in o.get('data', {}) for o in outputs):
                meta['mystnb'] = {'image': {'alt': alt_text(opts, code, where), 'classes': 'fs-figure'}}
            if not code.strip() and not outputs: continue
            c = v4.new_code_cell(code, metadata=meta)
            c.outputs = [nbformat.from_dict(o) for o in outputs]
            cells.append(c)
        if fold: cells.append(v4.new_markdown_cell('</details>'))
        nb = v4.new_notebook(cells=cells)
        nb.metadata = {'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'},
                       'language_info': {'name': 'python'}}
        return nb


# ---------------------------------------------------------------------------------------------------
# The API reference: PyTorch's public names, as nbs/api.ipynb lists (and checks) them

def covered_names(api_nb):
    "The `COVERED` table of nbs/api.ipynb: {area ('torch.nn'): [names]}, the names checked against torch there."
    nb = json.loads(Path(api_nb).read_text(encoding='utf-8'))
    for cell in nb['cells']:
        if cell['cell_type'] != 'code': continue
        for node in ast.parse(_text(cell['source']).replace('%', '#')).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'COVERED':
                return {k: v.split(', ') for k, v in ast.literal_eval(node.value).items()}
    raise DocBuildError(f'{_where(api_nb)}: no COVERED table to build the API reference from')


def defining_name(obj):
    mod, qual = getattr(obj, '__module__', None), getattr(obj, '__qualname__', None)
    return f'{mod}.{qual}' if mod and qual and '<' not in qual else None


def api_reference(covered, documented, modidx):
    "The reference page (MyST markdown) and the names it documents: {written name: full name}."
    where_built = {full: page for page, objs in documented.items() for full, *_ in objs}
    lines = ['# API reference', '',
             'Every public name of `fromscratch`, by the import path that PyTorch gives it: change `torch` to '
             '`fromscratch` and the same line imports ours. Each entry shows its signature and docstring, and '
             'links to the section of the notebook that builds it. The list is the one {doc}`api` checks '
             'against torch.', '']
    names, indexed = {}, set()
    for area, members in covered.items():
        base = area.split(' ')[0].replace('torch', 'fromscratch', 1)
        title = area.replace('torch', 'fromscratch', 1)
        lines += [f'## `{title}`' if '(' not in title else f'## `{base}` {title[len(base):].strip()}', '']
        owner = resolve(base)
        for name in sorted(members, key=str.lower):
            full = f'{base}.{name}'
            try: obj = getattr(owner, name)
            except AttributeError as e: raise DocBuildError(f'{full} is in nbs/api.ipynb but not in fromscratch') from e
            kind = kind_of(obj, owner if inspect.isclass(owner) else None)
            if not callable(obj) and not isinstance(obj, property) and kind != 'property': kind = 'data'
            dname = defining_name(obj) if kind != 'data' else None
            extra = built_in(dname, where_built, modidx) if dname else ''
            if not extra and inspect.isclass(owner):       # a property, an operator made by a helper: its class
                extra = built_in(defining_name(owner), where_built, modidx)
            if not extra:                                  # made by a factory, or data: the module that exports it
                mod = next((m for m in modidx.get('syms', {}) if name in getattr(resolve(m), '__all__', ())), None) \
                    or (getattr(obj, '__module__', None) if getattr(obj, '__module__', None) in modidx.get('syms', {}) else None)
                extra = built_in(mod, where_built, modidx) if mod else ''
            doc = docstring(obj) if kind != 'data' else f'`{obj!r}`'
            if kind == 'data' and type(obj).__module__.startswith('fromscratch') and type(obj).__doc__:
                doc = f'`{obj!r}`'
            noindex = full in indexed or (dname == full and dname in where_built)
            indexed.add(full)
            lines += [directive(kind, full, obj, doc.split('\n\n')[0], extra, noindex), '']
            short = full.removeprefix('fromscratch.')
            for alias in {short, 'fs.' + short, full}:
                names.setdefault(alias, full)
            if base == 'fromscratch.nn.functional': names.setdefault('F.' + name, full)
    return '\n'.join(lines), names


def built_in(dname, where_built, modidx):
    "Where the notebooks build `dname`: its own entry, else its class's, else its notebook (nbdev's index)."
    parts = dname.split('.')
    for i in range(len(parts), 2, -1):
        owner = '.'.join(parts[:i])
        if owner in where_built:
            return f'Built in {{doc}}`{where_built[owner]}`, at {{py:obj}}`{owner.removeprefix("fromscratch.")} <{owner}>`.'
    url = modidx.get('syms', {}).get('.'.join(parts[:2]), {}).get(dname, (None,))[0]
    for i in range(len(parts), 1, -1):
        if url: break
        url = next((u for u, _ in modidx.get('syms', {}).get('.'.join(parts[:i]), {}).values()), None)
    if url: return f'Built in {{doc}}`{url.split(".html")[0]}`.'
    page = next((modidx.get('pages', {}).get('.'.join(parts[:i])) for i in range(len(parts), 1, -1)
                 if '.'.join(parts[:i]) in modidx.get('pages', {})), None)      # the notebook the module comes from
    return f'Built in {{doc}}`{page}`.' if page else ''


# ---------------------------------------------------------------------------------------------------
# The site

def prepare(src, nbs=ROOT / 'nbs', quiet=False):
    "Write the processed notebooks, the reference page and the index's navigation into `src`."
    src, nbs = Path(src), Path(nbs).resolve()
    if src.exists(): shutil.rmtree(src)
    (src / '_notebooks').mkdir(parents=True)
    notebooks = course_notebooks(nbs)
    if not notebooks: raise DocBuildError(f'{_where(nbs)}: no notebooks to build a site from')
    pages = []
    for nb in notebooks:
        if not quiet: print(f'  {nb.relative_to(nbs)}', flush=True)
        pages.append(Page(nb, nbs))
    seen = {}
    for p in pages:
        if p.name in seen: raise DocBuildError(f'{p.rel} and {seen[p.name]} would both be the page {p.name}.html')
        seen[p.name] = p.rel
    try:
        from fromscratch._modidx import d as modidx
    except ImportError: modidx = {}
    documented = {p.name: p.documented for p in pages}
    modidx = {**modidx, 'pages': {m: p.name for p in pages for m in p.modules}}
    api = nbs / 'api.ipynb'
    ref, names = api_reference(covered_names(api), documented, modidx) if api.exists() else ('', {})
    # names a lesson writes in backticks: full names, the lesson's short names where unambiguous, the API's paths
    targets, short = dict(names), {}
    for objs in documented.values():
        for full, *_ in objs:
            targets.setdefault(full, full)
            qual = full.split('.', 2)[-1] if full.count('.') >= 2 else full
            for n in {qual, '.'.join(qual.split('.')[-2:]) if '.' in qual else qual}:
                short.setdefault(n, set()).add(full)
    for n, fulls in short.items():
        if len(fulls) == 1 and n not in targets: targets[n] = next(iter(fulls))
    linker = Linker(targets, {p.rel.stem: p.name for p in pages})
    import nbformat
    indexed = set(n for n, f in names.items() if n == f)  # API entries that are the canonical ones
    indexed = {f for f in indexed if not any(f == d[0] for objs in documented.values() for d in objs)}
    for p in pages:
        shutil.copy2(p.path, src / '_notebooks' / p.rel.name)
        nb = p.myst_notebook(linker, indexed, f'_notebooks/{p.rel.name}')
        if p.name == 'index': nb.cells.append(nbformat.v4.new_markdown_cell(toctrees(pages, bool(ref))))
        nbformat.write(nb, src / f'{p.name}.ipynb')
    if ref: (src / 'reference.md').write_text(ref, encoding='utf-8')
    for f in sorted(nbs.rglob('*')):
        rel = f.relative_to(nbs)
        if f.is_file() and f.suffix.lower() in MEDIA and not any(q[0] in '._' for q in rel.parts):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, src / rel)
    (src / 'pages.json').write_text(json.dumps(
        [{'page': p.name, 'source': p.rel.as_posix(), 'title': p.title, 'part': p.part} for p in pages], indent=1))
    return pages


def toctrees(pages, reference):
    "The index's navigation: one hidden toctree per part of the course, in nbdev's order."
    order = [t for _, t in PARTS] + [REFERENCE]
    blocks = []
    for part in order:
        docs = [p.name for p in pages if p.part == part] + (['reference'] if part == REFERENCE and reference else [])
        if docs: blocks.append('```{toctree}\n:hidden:\n:caption: ' + part + '\n\n' + '\n'.join(docs) + '\n```')
    return '\n\n'.join(blocks)


def build(out=ROOT / '_site', nbs=ROOT / 'nbs', quiet=False, src=None):
    "Build the site into `out` with Sphinx (strict: warnings and broken references fail it)."
    out = Path(out).resolve()
    src = Path(src or ROOT / 'build' / 'docs-src').resolve()
    prepare(src, nbs, quiet)
    # Sphinx writes into a folder beside the sources (MyST-NB keeps its files beside that folder): a failed
    # build leaves the last good site alone, and nothing lands at the top of the project
    staging = src.parent / (src.name + '-html')
    doctrees = src.parent / (src.name + '-doctrees')          # no cache: every build starts from the notebooks
    for d in (staging, doctrees):
        if d.exists(): shutil.rmtree(d)
    cmd = [sys.executable, '-m', 'sphinx', '-b', 'html', '-W', '--keep-going', '-n', '-q', '-c', str(CONF),
           '-d', str(doctrees), str(src), str(staging)]
    r = subprocess.run(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        shutil.rmtree(staging, ignore_errors=True)
        raise DocBuildError(f'sphinx-build failed (exit {r.returncode}):\n{r.stderr.strip()}')
    if r.stderr.strip(): print(r.stderr.strip(), file=sys.stderr)
    shutil.copy2(src / 'pages.json', staging / 'pages.json')
    if out.exists(): shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(staging, out)
    if not quiet: print(f'Built the site into {out}', flush=True)
    return out


# ---------------------------------------------------------------------------------------------------
# Checking the built site's links

class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ('id', 'name'):
            if a.get(k) and (k == 'id' or tag == 'a'): self.ids.add(a[k])
        for k in ('href', 'src'):
            if a.get(k) and not (tag == 'link' and a.get('rel') in ('canonical',)): self.links.append(a[k])


def check_links(site):
    "Every page and anchor that a page of `site` links to exists: a list of what does not."
    site = Path(site)
    parsed = {}

    def page(path):
        if path not in parsed:
            p = _Links()
            p.feed(path.read_text(encoding='utf-8', errors='replace'))
            parsed[path] = p
        return parsed[path]

    problems = []
    for f in sorted(site.rglob('*.html')):
        if f.relative_to(site).parts[0] in ('_static', '_sources'): continue     # the theme's templates
        for link in page(f).links:
            u = urlsplit(link)
            if u.scheme or u.netloc or link.startswith('javascript:') or link.startswith('data:'): continue
            target = (f.parent / unquote(u.path)).resolve() if u.path else f
            if u.path.endswith('/') or (target.is_dir()): target = target / 'index.html'
            rel = f.relative_to(site)
            if not target.exists(): problems.append(f'{rel}: missing {link}'); continue
            if u.fragment and target.suffix == '.html' and unquote(u.fragment) not in page(target).ids:
                problems.append(f'{rel}: no anchor #{u.fragment} in {target.relative_to(site)}')
    return problems


# ---------------------------------------------------------------------------------------------------
# Serving it

class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        "A browser that stops a download (it left the page) is no error of ours."
        if not isinstance(sys.exc_info()[1], ConnectionError): super().handle_error(request, client_address)


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      '.js': 'text/javascript', '.svg': 'image/svg+xml', '.json': 'application/json',
                      '.ipynb': 'application/x-ipynb+json', '.woff2': 'font/woff2'}

    def log_message(self, format, *args):
        if not getattr(self.server, 'quiet', False): super().log_message(format, *args)


def serve(site=ROOT / '_site', port=8000, host='127.0.0.1', quiet=False):
    "Serve the built site (building it first if it is not there) until interrupted."
    site = Path(site)
    if not (site / 'index.html').exists(): build(site)
    try:
        server = _Server((host, port), functools.partial(_Handler, directory=str(site)))
    except OSError as e:
        raise DocBuildError(f'cannot serve on {host}:{port} ({e.strerror}): choose another port, '
                            f'e.g. `make serve-docs PORT={port + 1}`') from e
    server.quiet = quiet
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
    b.add_argument('--src', default=None, help='where to write the processed sources (default: build/docs-src/)')
    s = sub.add_parser('serve', help='serve the built site on localhost')
    s.add_argument('site', nargs='?', default=str(ROOT / '_site'))
    s.add_argument('--port', type=int, default=int(os.environ.get('PORT', 8000)))
    s.add_argument('--host', default='127.0.0.1')
    s.add_argument('--quiet', action='store_true', help='do not log each request')
    c = sub.add_parser('check', help='check every link and anchor inside the built site')
    c.add_argument('site', nargs='?', default=str(ROOT / '_site'))
    args = p.parse_args(argv)
    try:
        if args.cmd == 'build': build(args.out, args.nbs, src=args.src)
        elif args.cmd == 'serve': serve(args.site, args.port, args.host, args.quiet)
        else:
            problems = check_links(args.site)
            print('\n'.join(problems) or 'every link and anchor resolves')
            sys.exit(1 if problems else 0)
    except DocBuildError as e:
        sys.exit(f'docs {args.cmd} failed: {e}')


if __name__ == '__main__':
    main()
