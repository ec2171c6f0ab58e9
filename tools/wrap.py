"""Wrap the code of notebooks at 88 characters a line (black's width), touching only what is too long.

    python tools/wrap.py                        # every notebook in nbs/
    python tools/wrap.py nbs/01_matmul.ipynb    # just these
    python tools/wrap.py --check                # list the lines still too long; exit 1 if any

The site's column and a laptop's lab show 88 characters of code without a sideways scroll. Reformatting
whole notebooks with black would rewrite every cell; this rewrites only the statements that hold a line
over the limit (with black, which checks that the code still means the same), and folds long comments
onto lines of their own. What black cannot split (a long string in a docstring, say) is listed by
`--check` for a person to reword.
"""
import ast
import io
import re
import sys
import textwrap
import tokenize
from pathlib import Path

import black
import nbformat

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 88
MAGIC = re.compile(r'^(\s*)([%!].*)$')


def mode(width):
    return black.Mode(line_length=width, string_normalization=False, preview=True,
                      enabled_features={black.Preview.string_processing})


def too_long(lines):
    "The numbers of the lines over the limit; `#|` directives (nbdev's, Quarto's) are one line each."
    return {n for n, line in enumerate(lines, 1) if len(line) > WIDTH and not line.startswith('#|')}


def statements(tree):
    "Every statement of the module, nested ones included."
    return [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]


def targets(tree, lines):
    "The innermost statements that hold a line over the limit (comment lines left out), outermost kept."
    found = []
    for n in too_long(lines):
        if lines[n - 1].lstrip().startswith('#'): continue
        holding = [s for s in statements(tree) if first_line(s) <= n <= s.end_lineno
                   and s.col_offset == indentation(lines[first_line(s) - 1])    # a line of its own
                   and not lines[first_line(s) - 1].lstrip().startswith('elif ')]   # not a branch
        if holding: found.append(min(holding, key=lambda s: s.end_lineno - first_line(s)))
    spans = sorted({(first_line(s), s.end_lineno, s) for s in found}, key=lambda t: (t[0], -t[1]))
    kept = []
    for start, end, s in spans:
        if kept and start <= kept[-1][1]: continue          # inside one already kept
        kept.append((start, end, s))
    return kept


def indentation(line): return len(line) - len(line.lstrip())


def split_semicolons(source):
    "Simple statements that share a line too long, `a = 1; b = 2`, each on a line of its own."
    lines = source.split('\n')
    tree = ast.parse(source)
    by_line = {}
    for s in statements(tree):
        if s.lineno == s.end_lineno and not hasattr(s, 'body'): by_line.setdefault(s.lineno, []).append(s)
    for n in sorted(too_long(lines), reverse=True):
        shared = sorted(by_line.get(n, []), key=lambda s: s.col_offset)
        line = lines[n - 1]
        if len(shared) < 2 or shared[0].col_offset != indentation(line): continue
        if any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in shared): continue
        raw = line.encode()
        parts = [raw[s.col_offset:s.end_col_offset].decode() for s in shared]
        tail = raw[shared[-1].end_col_offset:].decode().strip()
        if tail and not tail.startswith('#'): continue
        if tail: parts[-1] += '  ' + tail
        lines[n - 1:n] = [' ' * indentation(line) + part for part in parts]
    return '\n'.join(lines)


DOCSTRING = re.compile(r'^(\s*)"([^"\\]*(?:\\.[^"\\]*)*)"$')


def wrap_docstrings(source):
    "A one-line docstring too long for its line becomes a triple-quoted one over several lines."
    lines = source.split('\n')
    tree = ast.parse(source)
    for node in sorted(ast.walk(tree), key=lambda n: -getattr(n, 'lineno', 0)):   # bottom up
        body = getattr(node, 'body', None)
        if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body): continue
        doc = body[0]
        if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str) and doc.lineno == doc.end_lineno): continue
        n = doc.lineno
        m = DOCSTRING.match(lines[n - 1])
        if len(lines[n - 1]) <= WIDTH or not m: continue
        indent, text = m.groups()
        wrapped = textwrap.wrap(text, WIDTH - len(indent) - 3, break_long_words=False,
                                break_on_hyphens=False)
        wrapped[0] = '"""' + wrapped[0]
        wrapped[-1] += '"""'
        lines[n - 1:n] = [indent + w for w in wrapped]
    return '\n'.join(lines)


def first_line(stmt):
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, 'decorator_list', [])])


def reformat(lines, start, end, stmt):
    "The lines start..end (1-based) reformatted by black at the statement's indentation, or None."
    block = lines[start - 1:end]
    indent = len(block[0]) - len(block[0].lstrip())
    if stmt.col_offset != indent: return None                   # shares its line with another statement
    tail = lines[end - 1].encode()[stmt.end_col_offset:].decode().strip()
    if tail and not tail.startswith('#'): return None
    try: new = black.format_str(textwrap.dedent('\n'.join(block)) + '\n', mode=mode(WIDTH - indent))
    except Exception: return None
    return [(' ' * indent + line) if line else '' for line in new.rstrip('\n').split('\n')]


def fold_comments(source):
    "Long comments become comment lines of their own, above the code they were beside, wrapped."
    lines = source.split('\n')
    try: tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError): return source
    for tok in reversed(tokens):
        if tok.type != tokenize.COMMENT or tok.string.startswith('#|'): continue
        n, col = tok.start
        line = lines[n - 1]
        if len(line) <= WIDTH: continue
        code = line[:col].rstrip()
        indent = ' ' * (len(line) - len(line.lstrip()))
        text = tok.string.lstrip('#').strip()
        wrapped = textwrap.wrap(text, WIDTH - len(indent) - 2, break_long_words=False,
                                break_on_hyphens=False) or ['']
        lines[n - 1:n] = [f'{indent}# {w}' for w in wrapped] + ([code] if code else [])
    return '\n'.join(lines)


def wrap_source(source):
    "A code cell's source with its long statements reformatted and its long comments folded."
    if not too_long(source.split('\n')): return source
    masked = [MAGIC.sub(r'\1# fromscratch-magic \2', line) for line in source.split('\n')]
    try: tree = ast.parse('\n'.join(masked))
    except SyntaxError: return source
    text = wrap_docstrings(split_semicolons('\n'.join(masked)))
    lines = text.split('\n')
    for start, end, stmt in reversed(targets(ast.parse(text), lines)):
        new = reformat(lines, start, end, stmt)
        if new is not None: lines[start - 1:end] = new
    out = fold_comments('\n'.join(lines))
    return re.sub(r'^(\s*)# fromscratch-magic ', r'\1', out, flags=re.M)


def wrap_notebook(path):
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type != 'code': continue
        new = wrap_source(cell.source)
        if new != cell.source: cell.source, changed = new, True
    if changed: nbformat.write(nb, path)
    return changed


def still_too_long(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != 'code': continue
        for n, line in enumerate(cell.source.split('\n'), 1):
            if len(line) > WIDTH and not line.startswith('#|'): yield i, n, line


def main(args):
    check = '--check' in args
    paths = [Path(a) for a in args if a != '--check'] or sorted((ROOT / 'nbs').glob('*.ipynb'))
    if check:
        long = [(p, *hit) for p in paths for hit in still_too_long(p)]
        for p, i, n, line in long: print(f'{p.name} cell {i} line {n} ({len(line)}): {line.strip()[:70]}')
        sys.exit(1 if long else 0)
    for p in paths:
        if wrap_notebook(p): print(f'wrapped {p.name}')


if __name__ == '__main__':
    main(sys.argv[1:])
