"""The course as a learner opens it: `make lab` starts JupyterLab on nbs/, opens the learning path, and
every notebook opens straight onto the project's Python kernel, with no dialog and no news prompt.

The browser part needs Chromium (see tests/browser.py); a screenshot of an opened notebook is saved in
build/screenshots/.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / 'build' / 'screenshots'
NOTEBOOKS = sorted((ROOT / 'nbs').glob('*.ipynb'))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def lab_command(port, token):
    "The README's `make lab`, pointed at this interpreter's environment, without a browser: (command, extra env)."
    # expose_app_in_browser: the tests read the notebook's cells from JupyterLab's own objects (its
    # windowed notebook puts only the cells on screen in the page)
    args = (f'--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token} '
            '--ServerApp.port_retries=0 --LabApp.expose_app_in_browser=True')
    venv = Path(sys.prefix)
    if shutil.which('make'):
        # -o: take the environment as installed (it is: this test runs in it) instead of rebuilding it
        return ['make', '--no-print-directory', '-o', str(venv / '.fromscratch-installed'), 'lab',
                f'VENV={venv}', f'LAB_ARGS={args}'], {}
    root = ['--allow-root'] if os.geteuid() == 0 else []
    return ([str(venv / 'bin' / 'jupyter'), 'lab', '--notebook-dir=nbs', *root, *args.split()],
            {'JUPYTER_CONFIG_PATH': str(ROOT / 'tools' / 'jupyter')})


def get_json(url, timeout=5, method='GET', body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=timeout) as r: return json.load(r) if r.status != 204 else None


class Lab:
    "A running `make lab` on a free loopback port: `url(path)` adds the token; `stop()` ends it by process id."
    def __init__(self, home):
        self.port, self.token = free_port(), 'fromscratch-test'
        # a fresh Jupyter config and runtime folder: the learner's own settings and workspaces are not read
        env = {**os.environ, 'JUPYTER_RUNTIME_DIR': str(home / 'runtime'), 'JUPYTER_CONFIG_DIR': str(home / 'config')}
        env.pop('JUPYTER_CONFIG_PATH', None)
        cmd, extra = lab_command(self.port, self.token)
        env.update(extra)
        self.log = open(home / 'lab.log', 'w')
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            try: get_json(self.url('/api/status')); break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f'JupyterLab did not answer on port {self.port}: {(home / "lab.log").read_text()[-2000:]}')
                time.sleep(0.5)

    def url(self, path):
        return f'http://127.0.0.1:{self.port}{path}{"&" if "?" in path else "?"}token={self.token}'

    def stop(self):
        try: os.killpg(self.proc.pid, 15)
        except ProcessLookupError: pass
        try: self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9); self.proc.wait()
        self.log.close()


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp('lab'))
    try: yield server
    finally: server.stop()


# ---- the notebooks name the kernel ------------------------------------------------------------------

@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_names_the_standard_python3_kernel(path):
    # without a kernelspec JupyterLab asks "Select Kernel" each time the notebook is opened
    spec = nbformat.read(path, as_version=4).metadata.get('kernelspec')
    assert spec is not None, f'{path.name} has no kernelspec: JupyterLab would ask which kernel to use'
    assert spec['name'] == 'python3' and spec['language'] == 'python', spec


def test_the_environment_has_the_python3_kernel():
    # `python3` is ipykernel's kernel of the environment the lab runs in (plain `jupyter lab` included)
    out = subprocess.run([str(Path(sys.prefix) / 'bin' / 'jupyter'), 'kernelspec', 'list', '--json'],
                         capture_output=True, text=True, check=True).stdout
    spec = json.loads(out)['kernelspecs']['python3']
    assert Path(spec['resource_dir']).is_relative_to(sys.prefix), spec['resource_dir']
    assert spec['spec']['argv'][0] in ('python', 'python3', sys.executable)   # jupyter_client runs it with its own Python


# ---- the server -------------------------------------------------------------------------------------

def test_lab_serves_the_notebooks(lab):
    names = {item['name'] for item in get_json(lab.url('/api/contents'))['content']}
    expected = {p.name for p in NOTEBOOKS}
    assert expected <= names, f'missing from the server: {expected - names}'


def test_lab_starts_on_the_learning_path(lab):
    req = urllib.request.Request(lab.url('/'), method='GET')
    opener = urllib.request.build_opener(type('NoRedirect', (urllib.request.HTTPRedirectHandler,),
                                              {'redirect_request': lambda *a, **k: None}))
    with pytest.raises(urllib.error.HTTPError) as e: opener.open(req, timeout=5)
    assert e.value.code == 302 and e.value.headers['Location'].startswith('/lab/tree/index.ipynb')


def test_lab_asks_no_news_and_checks_no_updates(lab):
    schema = get_json(lab.url('/lab/api/settings/@jupyterlab/apputils-extension:notification'))['schema']
    defaults = {k: v.get('default') for k, v in schema['properties'].items()}
    assert defaults['fetchNews'] == 'false' and defaults['checkForUpdates'] is False


def run_in_kernel(lab, code, timeout=60):
    "Start a `python3` kernel through the server's REST API, run `code` over its websocket, return (stdout, reply)."
    import websocket
    kernel = get_json(lab.url('/api/kernels'), method='POST', body={'name': 'python3'})
    ws = websocket.create_connection(lab.url(f'/api/kernels/{kernel["id"]}/channels').replace('http', 'ws', 1),
                                     timeout=timeout, suppress_origin=True)
    try:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({'header': {'msg_id': msg_id, 'msg_type': 'execute_request', 'username': 'test',
                                       'session': uuid.uuid4().hex, 'version': '5.3'},
                            'parent_header': {}, 'metadata': {}, 'channel': 'shell', 'buffers': [],
                            'content': {'code': code, 'silent': False, 'store_history': False,
                                        'user_expressions': {}, 'allow_stdin': False}}))
        stdout, reply, idle = [], None, False
        deadline = time.monotonic() + timeout
        while not (reply and idle):
            assert time.monotonic() < deadline, 'the kernel did not answer'
            msg = json.loads(ws.recv())
            if msg.get('parent_header', {}).get('msg_id') != msg_id: continue
            kind = msg['header']['msg_type']
            if kind == 'stream' and msg['content']['name'] == 'stdout': stdout.append(msg['content']['text'])
            elif kind == 'error': stdout.append('\n'.join(msg['content']['traceback']))
            elif kind == 'execute_reply': reply = msg['content']
            elif kind == 'status' and msg['content']['execution_state'] == 'idle': idle = True
        return ''.join(stdout), reply
    finally:
        ws.close()
        get_json(lab.url(f'/api/kernels/{kernel["id"]}'), method='DELETE')


def test_a_cell_runs_on_the_projects_kernel(lab):
    out, reply = run_in_kernel(lab, 'import sys\nimport fromscratch as fs\n'
                                    'x = fs.tensor([1.0, 2.0], requires_grad=True)\n(x * x).sum().backward()\n'
                                    'print(x.grad.tolist(), sys.prefix)')
    assert reply['status'] == 'ok', out
    grads, prefix = out.strip().rsplit(' ', 1)
    assert grads == '[2.0, 4.0]' and Path(prefix) == Path(sys.prefix), out   # the venv that runs these tests


# ---- in a browser ------------------------------------------------------------------------------------

_STATE = """JSON.stringify({
  tabs: [...document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab')].map(t => t.innerText.trim()),
  current: (document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current') || {}).innerText,
  dialogs: [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.trim().slice(0, 300)),
  toasts: [...document.querySelectorAll('.Toastify__toast')].map(t => t.innerText.trim().slice(0, 300)),
  kernel: (document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-KernelName') || {}).innerText,
  cells: document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length,
  files: [...document.querySelectorAll('.jp-DirListing-itemName')].map(e => e.innerText.trim()),
})"""


def wait_for_notebook(browser, name, timeout=60):
    "Poll the page until `name` is the current tab with its cells drawn and a kernel named; fail on any dialog."
    deadline, state = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        state = json.loads(browser.evaluate(_STATE))
        assert not state['dialogs'], f'a dialog appeared over {name}: {state["dialogs"]}'
        if state.get('current') == name and state['cells'] and state.get('kernel') not in (None, '', 'No Kernel'):
            return state
        time.sleep(0.25)
    raise AssertionError(f'{name} did not open with a kernel within {timeout} s: {state}')


def still_no_dialog(browser, name, seconds=3):
    "Watch a little longer: a kernel dialog or a news prompt can come a moment after the notebook is drawn."
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        state = json.loads(browser.evaluate(_STATE))
        assert not state['dialogs'], f'a dialog appeared over {name}: {state["dialogs"]}'
        assert not state['toasts'], f'a notification appeared over {name}: {state["toasts"]}'
        time.sleep(0.25)
    return state


def test_lab_opens_the_index_and_the_file_browser_on_nbs(browser, lab):
    browser.events = []
    browser.call('Page.navigate', url=lab.url('/'))
    state = wait_for_notebook(browser, 'index.ipynb')
    state = still_no_dialog(browser, 'index.ipynb')
    assert {p.name for p in NOTEBOOKS} <= set(state['files']), state['files']
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(SHOTS / 'lab-index.png')


@pytest.mark.parametrize('name', ['05_value.ipynb', '12_training.ipynb'])
def test_a_notebook_opens_ready_to_run_without_a_dialog(browser, lab, name):
    browser.events = []
    browser.call('Page.navigate', url=lab.url(f'/lab/tree/{name}'))
    state = wait_for_notebook(browser, name)
    assert state.get('kernel') == 'Python 3 (ipykernel)', state
    still_no_dialog(browser, name)
    # the page asked nothing of any host but the lab itself
    others = [p for p in browser.problems(lab.url('/')) if 'another host' in p]
    assert others == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(SHOTS / f'lab-{Path(name).stem}.png')


# ---- opening and saving a notebook leaves it unchanged ------------------------------------------------

def test_notebooks_store_the_metadata_jupyterlab_writes():
    # JupyterLab renames the kernel, adds `language_info` and marks folded outputs `collapsed` as soon as a
    # notebook opens: stored otherwise, every lesson would show as changed before the learner typed
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        hint = f'{path.name}: run `python tools/clean.py` (nbdev_clean alone renames the kernel)'
        assert nb.metadata.kernelspec.display_name == 'Python 3 (ipykernel)', hint
        assert nb.metadata.get('language_info', {}).get('name') == 'python', hint
        for cell in nb.cells:
            folded = cell.metadata.get('jupyter', {}).get('outputs_hidden', False)
            if cell.cell_type == 'code' and folded: assert cell.metadata.get('collapsed') is True, hint


def load_lab_config():
    "Run tools/jupyter/jupyter_server_config.py as Jupyter does, with a stand-in for its config object `c`."
    from traitlets.config import Config
    c, path = Config(), ROOT / 'tools' / 'jupyter' / 'jupyter_server_config.py'
    exec(compile(path.read_text(), str(path), 'exec'), {'c': c, '__file__': str(path)})
    return c


def test_a_lab_on_another_python_keeps_the_stored_version(tmp_path):
    hook = load_lab_config().ContentsManager.pre_save_hook
    stored = nbformat.read(NOTEBOOKS[0], as_version=4)
    (tmp_path / 'nb.ipynb').write_text(nbformat.writes(stored), encoding='utf-8')
    manager = type('Manager', (), {'root_dir': str(tmp_path)})()
    content = nbformat.reads(nbformat.writes(stored), as_version=4)
    content.metadata.language_info.version = '3.99.0'
    hook(model={'type': 'notebook', 'content': content}, path='nb.ipynb', contents_manager=manager)
    assert content.metadata.language_info.version == stored.metadata.language_info.version
    # anything else that changed is saved as it is
    content.metadata.language_info.update(version='3.99.0', name='julia')
    hook(model={'type': 'notebook', 'content': content}, path='nb.ipynb', contents_manager=manager)
    assert content.metadata.language_info.version == '3.99.0'


_DIRTY = """(document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current') || {className: ''})
  .className.includes('jp-mod-dirty')"""


@pytest.mark.parametrize('name', ['index.ipynb', '05_value.ipynb', '09_nn.ipynb', '13_bench.ipynb'])
def test_opening_and_saving_a_notebook_leaves_it_unchanged(browser, lab, name):
    import platform
    path = ROOT / 'nbs' / name
    before, stat = path.read_bytes(), path.stat()
    stored = json.loads(before).get('metadata', {}).get('language_info', {}).get('version')
    try:
        browser.events = []
        browser.call('Page.navigate', url=lab.url(f'/lab/tree/{name}'))
        wait_for_notebook(browser, name)
        time.sleep(2)                       # the kernel's language_info arrives after the kernel starts
        if stored == platform.python_version():   # another Python: the lab sees a new version number
            assert not browser.evaluate(_DIRTY), f'{name} shows as changed as soon as it is opened'
        browser.evaluate("document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook').focus()")
        for kind in ('rawKeyDown', 'keyUp'):     # Ctrl+S, as a learner saves
            browser.call('Input.dispatchKeyEvent', type=kind, modifiers=2, key='s', code='KeyS',
                         windowsVirtualKeyCode=83)
        deadline = time.monotonic() + 20
        while path.stat().st_mtime_ns == stat.st_mtime_ns:
            assert time.monotonic() < deadline, f'{name} was not saved'
            time.sleep(0.2)
        time.sleep(0.5)
        after = path.read_bytes()
        assert after == before, f'saving {name} from the lab changed it: {len(after)} bytes, were {len(before)}'
    finally:
        if path.read_bytes() != before: path.write_bytes(before)


# ---- the index links the notebooks, and each notebook opens on its title -------------------------------

def test_the_learning_path_links_every_notebook():
    index = nbformat.read(ROOT / 'nbs' / 'index.ipynb', as_version=4)
    path = next(c.source for c in index.cells if c.source.startswith('## The learning path'))
    rows = [line for line in path.splitlines() if line.startswith('| ') and '---' not in line][1:]
    linked = [re.match(r'\| \[(\w+)\]\((\w+)\.ipynb\) \|', row) for row in rows]
    assert all(linked), [row for row, m in zip(rows, linked) if not m]
    assert all(m[1] == m[2] and (ROOT / 'nbs' / f'{m[2]}.ipynb').exists() for m in linked)
    assert {f'{m[2]}.ipynb' for m in linked} == {p.name for p in NOTEBOOKS} - {'index.ipynb'}


@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_opens_on_its_title_and_summary(path):
    first = nbformat.read(path, as_version=4).cells[0]
    assert first.cell_type == 'markdown' and first.source.startswith('# '), first.source[:80]
    assert re.search(r'^> \S', first.source, re.M), f'{path.name} has no one-line summary under its title'


def test_a_link_in_the_index_opens_its_notebook(browser, lab):
    browser.events = []
    browser.call('Page.navigate', url=lab.url('/lab/tree/index.ipynb'))
    wait_for_notebook(browser, 'index.ipynb')
    link = "document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) a[href*=\"/06_tensor.ipynb\"]')"
    deadline = time.monotonic() + 20
    while not browser.evaluate(f'!!{link}'):
        assert time.monotonic() < deadline, 'the index has no link to 06_tensor.ipynb'
        time.sleep(0.25)
    browser.evaluate(f'{link}.click()')
    wait_for_notebook(browser, '06_tensor.ipynb')


_CELLS = """JSON.stringify(Array.from(window.jupyterapp.shell.widgets('main'))
  .find(w => w.content && w.content.widgets && w.isVisible).content.widgets
  .map(c => [c.model.type, c.isHidden, c.model.sharedModel.getSource().split('\\n')[0]]))"""


def cells_in_lab(browser):
    return [(kind, hidden, first) for kind, hidden, first in json.loads(browser.evaluate(_CELLS))]


@pytest.mark.parametrize('name', ['05_value.ipynb', '12a_train.ipynb'])
def test_a_solution_folds_its_prose_and_code_as_one_in_the_lab(browser, lab, name):
    browser.events = []
    browser.call('Page.navigate', url=lab.url(f'/lab/tree/{name}'))
    wait_for_notebook(browser, name)
    deadline, problems = time.monotonic() + 30, ['not checked']
    while problems and time.monotonic() < deadline:    # the lab folds as it parses the headings
        time.sleep(0.5)
        cells, under, problems = cells_in_lab(browser), None, []
        for kind, hidden, first in cells:
            if kind == 'markdown' and first.startswith('#'):
                under = first if first.startswith('#### Solution') else None
                if under and hidden: problems.append(f'{first} is hidden itself')
            elif under and not hidden: problems.append(f'{under}: {kind} cell {first[:30]!r} shows')
    assert problems == [] and any(f.startswith('#### Solution') for _, _, f in cells), problems
    # opening the headings (as the arrow beside each does) shows every solution cell again
    browser.evaluate("window.jupyterapp.commands.execute('notebook:expand-all-headings')", promise=True)
    time.sleep(1)
    assert not any(hidden for _, hidden, _ in cells_in_lab(browser))
