"""Report a mutation-testing run (`make mutants`): the kill rate, and every surviving mutant with its change.

    python tools/mutants.py          # after `mutmut run` (configured in setup.cfg)

A mutant is the library with one small change (`<` for `<=`, `+ 1` for `+ 2`, a dropped argument, ...). It is
*killed* when some test fails on it. A mutant that survives is either a missing test or an *equivalent*
change, one that cannot alter any result; tests/mutants.md names the equivalent ones and says why. Exits 1
if a survivor is not explained there.
"""
import ast
import difflib
import fnmatch
import re
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = str(Path(sys.executable).parent / 'mutmut')
NOT_KILLED = ('survived', 'no tests', 'timeout', 'suspicious', 'segfault')


def results():
    "{mutant name: status} from `mutmut results --all true`."
    out = subprocess.run([MUTMUT, 'results', '--all', 'true'], cwd=ROOT, capture_output=True, text=True).stdout
    return dict(m.groups() for m in re.finditer(r'^\s*(\S+): (.+?)\s*$', out, re.M))


@lru_cache(maxsize=None)
def functions(module):
    "{def name: source} of every function in the mutated copy of `module` (mutants/fromscratch/....py)."
    path = ROOT / 'mutants' / Path(*module.split('.')).with_suffix('.py')
    src = path.read_text()
    lines = src.splitlines()
    return {n.name: '\n'.join(lines[n.lineno - 1:n.end_lineno]) for n in ast.walk(ast.parse(src))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def sources(name):
    "The source of the original function and of mutant `name`, with the same def name."
    module, func = name.rsplit('.', 1)
    defs, base = functions(module), func.rsplit('__mutmut_', 1)[0]
    orig, mutant = defs.get(base + '__mutmut_orig'), defs.get(func)
    if orig is None or mutant is None: return None, None
    return orig.replace(base + '__mutmut_orig', base, 1), mutant.replace(func, base, 1)


def change(name):
    "The lines mutant `name` removes from and adds to its function (read from the mutated sources: fast)."
    orig, mutant = sources(name)
    if orig is None: return []
    return [l for l in difflib.unified_diff(orig.splitlines(), mutant.splitlines(), lineterm='', n=0)
            if l[:1] in '-+' and not l.startswith(('---', '+++'))]


def docstring_only(name):
    "Whether mutant `name` changes nothing but its function's docstring, which the trampoline never shows."
    def without_docstring(src):
        f = ast.parse(textwrap.dedent(src)).body[0]
        if f.body and isinstance(f.body[0], ast.Expr) and isinstance(getattr(f.body[0], 'value', None), ast.Constant):
            f.body = f.body[1:]
        return ast.dump(f)
    orig, mutant = sources(name)
    return orig is not None and orig != mutant and without_docstring(orig) == without_docstring(mutant)


def _blank_messages(src):
    "The AST of `src` with the text of every message blanked: in a raise, a warning, an error or a `_check`."
    tree = ast.parse(textwrap.dedent(src))
    blank = lambda v: isinstance(v, ast.JoinedStr) or isinstance(v, ast.Constant) and (isinstance(v.value, str) or v.value is None)

    def clear(node):
        for n in ast.walk(node):
            for field, value in ast.iter_fields(n):
                if blank(value): setattr(n, field, ast.Constant('TEXT'))
                elif isinstance(value, list): setattr(n, field, [ast.Constant('TEXT') if blank(v) else v for v in value])

    def name_of(f): return f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', '')
    function = tree.body[0]
    if function.name.endswith('_error'): clear(function)
    for n in ast.walk(tree):
        if isinstance(n, ast.Raise) or isinstance(n, ast.Call) and name_of(n.func).endswith(('Error', 'Warning', 'warn', '_check')):
            clear(n)
    return ast.dump(tree)


def message_only(name):
    "Whether mutant `name` changes only the text of a message (a string, or a string replaced by None)."
    orig, mutant = sources(name)
    return orig is not None and orig != mutant and _blank_messages(orig) == _blank_messages(mutant)


def explained():
    "{pattern: reason} from tests/mutants.md: bullets '- `name or glob`: why it cannot change a result'."
    text = (ROOT / 'tests' / 'mutants.md').read_text()
    return dict(re.findall(r'^- `([^`]+)`:?\s*(.*)$', text, re.M))


def explanation(name, known):
    "Why mutant `name` may survive: its entry in tests/mutants.md, or that only its docstring changed; else None."
    if docstring_only(name): return 'docstring only'
    if message_only(name): return 'message wording only'
    return next((why for pattern, why in known.items() if fnmatch.fnmatchcase(name, pattern)), None)


def main():
    status = results()
    if not status: sys.exit('no mutation results: run `mutmut run` first (or `make mutants`)')
    known = explained()
    survivors = sorted(k for k, s in status.items() if s in NOT_KILLED)
    why = {name: explanation(name, known) for name in survivors}
    print('surviving mutants (each with its change):')
    for name in survivors:
        print(f'\n{name} ({status[name]}; {why[name] if why[name] in ("docstring only", "message wording only") else "equivalent, see tests/mutants.md" if why[name] else "NOT EXPLAINED"})')
        for line in change(name): print(f'    {line.strip()[:150]}')
    killed = sum(s == 'killed' for s in status.values())
    unchecked = [n for n, s in status.items() if s == 'not checked']   # a partial run (`mutmut run NAMES`)
    unchecked_text = sum(docstring_only(n) or message_only(n) for n in unchecked)
    count = lambda reason: sum(why[n] == reason for n in survivors)
    unexplained = sum(why[n] is None for n in survivors)
    checked = len(status) - len(unchecked)
    print(f'\nmutants: {len(status)}, run: {checked}, killed: {killed}, kill rate: {killed / checked:.1%}')
    if unchecked: print(f'not run: {len(unchecked)} ({unchecked_text} of them change only a docstring or a message)')
    print(f'surviving: {len(survivors)} ({", ".join(f"{k} {sum(status[n] == k for n in survivors)}" for k in NOT_KILLED if any(status[n] == k for n in survivors))})')
    print(f'  docstring only: {count("docstring only")}, message wording only: {count("message wording only")}, '
          f'equivalent (tests/mutants.md): {len(survivors) - unexplained - count("docstring only") - count("message wording only")}, '
          f'NOT EXPLAINED: {unexplained}')
    equivalent = len(survivors) - unexplained - count('message wording only')
    print(f'kill rate among the mutants run that can change a result: {killed / (checked - equivalent):.1%}')
    sys.exit(1 if unexplained or len(unchecked) > unchecked_text else 0)


if __name__ == '__main__':
    main()
