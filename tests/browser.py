"""Headless Chromium driven over the DevTools protocol (websocket-client), shared by the browser tests.

Chromium is a system package (Debian: `apt-get install chromium`; `.ci/run` installs it). Without it the
browser tests are skipped, except under CI (`CI` or `FROMSCRATCH_NO_SKIPS=1` set), where a missing
browser is a failure.
"""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path


def find_chromium():
    for name in (os.environ.get('CHROMIUM'), 'chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'):
        if name and shutil.which(name): return shutil.which(name)


class Chromium:
    "A headless Chromium driven over the DevTools protocol (websocket-client), one tab."
    def __init__(self, exe, profile, log):
        self.proc = subprocess.Popen(
            [exe, '--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run', '--no-default-browser-check',
             '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-extensions',
             '--hide-scrollbars', '--mute-audio', '--remote-debugging-port=0', f'--user-data-dir={profile}',
             '--window-size=1280,900', 'about:blank'],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self.ws = None
        try:
            port_file, deadline = Path(profile) / 'DevToolsActivePort', time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f'Chromium did not start (exit code {self.proc.poll()}); see {log.name}')
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list', timeout=10) as r:
                tab = next(t for t in json.load(r) if t['type'] == 'page')
            import websocket
            self.ws = websocket.create_connection(tab['webSocketDebuggerUrl'], timeout=60, suppress_origin=True)
            self.n, self.events = 0, []
            for domain in ('Page', 'Runtime', 'Log', 'Network'): self.call(f'{domain}.enable')
        except BaseException:
            self.close()
            raise

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({'id': self.n, 'method': method, 'params': params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get('id') == self.n:
                if 'error' in msg: raise RuntimeError(f'{method}: {msg["error"]}')
                return msg.get('result', {})
            if 'method' in msg: self.events.append(msg)

    def wait_for(self, event, timeout=60):
        deadline = time.monotonic() + timeout
        while not any(e['method'] == event for e in self.events):
            if time.monotonic() > deadline: raise TimeoutError(f'no {event} within {timeout}s')
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if 'method' in msg: self.events.append(msg)
        self.ws.settimeout(60)

    def evaluate(self, expression, promise=False):
        r = self.call('Runtime.evaluate', expression=expression, returnByValue=True, awaitPromise=promise)
        if 'exceptionDetails' in r: raise RuntimeError(f'{expression[:80]}...: {r["exceptionDetails"]}')
        return r['result'].get('value')

    def open(self, url):
        "Load `url`, wait for it and for MathJax, and return what went wrong on the way (a list of strings)."
        self.events = []
        self.call('Page.navigate', url=url)
        self.wait_for('Page.loadEventFired')
        self.evaluate('(window.MathJax && MathJax.startup && MathJax.startup.promise) ? '
                      'MathJax.startup.promise.then(() => true) : true', promise=True)
        self.evaluate('new Promise(r => setTimeout(r, 150))', promise=True)
        return self.problems(url)

    def problems(self, base):
        urls, out = {}, []
        host = re.match(r'^https?://[^/]+/', base).group(0)
        for e in self.events:
            m, p = e['method'], e['params']
            if m == 'Network.requestWillBeSent':
                urls[p['requestId']] = u = p['request']['url']
                if not (u.startswith(host) or u.startswith('data:')): out.append(f'request to another host: {u}')
            elif m == 'Network.responseReceived' and p['response']['status'] >= 400:
                out.append(f'HTTP {p["response"]["status"]} for {p["response"]["url"]}')
            elif m == 'Network.loadingFailed':
                out.append(f'failed request {urls.get(p["requestId"], "?")}: {p.get("errorText")}')
            elif m == 'Runtime.exceptionThrown':
                d = p['exceptionDetails']
                out.append(f'exception: {d.get("exception", {}).get("description") or d.get("text")}')
            elif m == 'Runtime.consoleAPICalled' and p['type'] in ('error', 'assert'):
                out.append('console.error: ' + ' '.join(str(a.get('value', a.get('description', ''))) for a in p['args']))
            elif m == 'Log.entryAdded' and p['entry']['level'] == 'error':
                out.append(f'console: {p["entry"]["text"]} {p["entry"].get("url", "")}')
        return out

    def screenshot(self, path, tile=12000):
        """The whole page as PNG: `path`, or `name-1.png`, `name-2.png`, ... for a page taller than `tile` pixels;
        with `tile=None`, what the window shows."""
        import base64
        if tile is None:
            path.write_bytes(base64.b64decode(self.call('Page.captureScreenshot', format='png')['data']))
            return
        size = self.call('Page.getLayoutMetrics')['cssContentSize']
        width, height = int(size['width']), int(size['height']) + 1
        tops = range(0, height, tile)
        for n, top in enumerate(tops, start=1):
            clip = {'x': 0, 'y': top, 'width': width, 'height': min(tile, height - top), 'scale': 1}
            data = self.call('Page.captureScreenshot', format='png', captureBeyondViewport=True, clip=clip,
                             optimizeForSpeed=True)['data']
            name = path if len(tops) == 1 else path.with_name(f'{path.stem}-{n}{path.suffix}')
            name.write_bytes(base64.b64decode(data))

    def close(self):
        try:
            if self.ws is not None: self.ws.close()
        finally:
            os.killpg(self.proc.pid, 15)
            try: self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9); self.proc.wait()
