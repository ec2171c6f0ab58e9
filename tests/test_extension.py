"""The C++ extensions of nbs/20_extension.ipynb: torch's `load_inline` (through `torch_load_inline`) and ours.

Compiles are slow, so each extension is built once per session (the torch one in the user's extension
cache, shared with the notebook); the tests of the cache and of killed builds compile small sources in
temporary folders.
"""
import math
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fromscratch as fs
from fromscratch.testing import check_close
from fromscratch.utils import cpp_extension as ce

SQRT1_2 = 0.70710678118654752440
TWICE = 'extern "C" void twice(const double* x, double* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = 2 * x[i]; }'
TWICE_SOURCE = '#include <cstdint>\n' + TWICE


def exact_gelu(xs):
    "GELU in float64 from Python's math.erfc, element by element (the same argument rounding as the kernel's)."
    return np.array([v * 0.5 * math.erfc(-v * SQRT1_2) for v in np.asarray(xs, dtype=np.float64).ravel()]).reshape(np.shape(xs))


def exact_gelu_grad(xs):
    "Phi(x) + x phi(x) in float64, element by element."
    return np.array([0.5 * math.erfc(-v * SQRT1_2) + v * math.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)
                     for v in np.asarray(xs, dtype=np.float64).ravel()]).reshape(np.shape(xs))


@pytest.fixture(scope='session')
def torch_gelu():
    return ce.gelu_torch_function()


@pytest.fixture(scope='session')
def ours():
    return ce.gelu_extension()


def compiler_log(tmp_path):
    "A CXX that logs each call to a file and then runs the real compiler: how we count compiles."
    log, wrapper = tmp_path / 'compiles.log', tmp_path / 'logging-c++'
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {ce.find_compiler()} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


def compiles(log): return len(log.read_text().splitlines()) if log.exists() else 0


# ---------------------------------------------------------------- torch's extension

def test_torch_gradcheck(torch_gelu):
    torch.manual_seed(0)
    for shape in [(), (7,), (3, 4), (2, 3, 4)]:
        x = (4 * torch.randn(shape, dtype=torch.float64)).requires_grad_()
        assert torch.autograd.gradcheck(torch_gelu.apply, (x,))
    x = torch.randn(4, 5, dtype=torch.float64)
    assert torch.autograd.gradcheck(torch_gelu.apply, (x.t().requires_grad_(),))       # not contiguous


def test_torch_matches_torch_gelu_and_the_exact_values(torch_gelu):
    x = torch.linspace(-12, 12, 2001, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    g = torch.randn(2001, dtype=torch.float64)
    out, ref = torch_gelu.apply(x), TF.gelu(x_ref)
    out.backward(g); ref.backward(g)
    check_close(out, ref, rtol=1e-12, atol=1e-15, name='forward')
    check_close(x.grad, x_ref.grad, rtol=1e-12, atol=1e-14, name='backward')
    xs = np.array([-37.0, -30.0, -10.0, -6.0, -1e-3, 0.0, 1e-3, 0.7, 5.0, 40.0])
    check_close(torch_gelu.apply(torch.from_numpy(xs)), exact_gelu(xs), rtol=1e-14, atol=0, name='exact forward')
    xg = torch.from_numpy(xs).requires_grad_()
    torch_gelu.apply(xg).sum().backward()
    check_close(xg.grad, exact_gelu_grad(xs), rtol=1e-13, atol=1e-300, name='exact backward')


def test_torch_float32(torch_gelu):
    x = torch.linspace(-6, 6, 101)
    out = torch_gelu.apply(x)
    assert out.dtype == torch.float32
    check_close(out, exact_gelu(x.double().numpy()), rtol=1e-5, atol=1e-30)


def test_torch_double_backward_is_refused(torch_gelu):
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    v = torch.ones(3, dtype=torch.float64, requires_grad=True)         # as in gradgradcheck: the gradient is a function of v
    g, = torch.autograd.grad(torch_gelu.apply(x), x, grad_outputs=v, create_graph=True)
    with pytest.raises(RuntimeError, match='trying to differentiate twice a function that was marked with @once_differentiable'):
        g.sum().backward()


def test_torch_errors(torch_gelu):
    ext = ce.gelu_torch_extension()
    with pytest.raises(RuntimeError, match='does not match'):
        ext.gelu_backward(torch.ones(3, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match='not implemented for'):
        ext.gelu_forward(torch.ones(3, dtype=torch.int64))


def test_torch_build_folder_is_keyed_by_the_source(torch_gelu):
    folder = Path(ce.gelu_torch_extension().__file__).parent
    assert folder.name.startswith('fs_gelu_torch_') and (folder / 'main.cpp').exists()
    assert not (folder / 'lock').exists()
    assert 'gelu_backward_loop' in (folder / 'main.cpp').read_text()


def run_python(code, timeout, **env):
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


def test_torch_stale_lock_does_not_hang(torch_gelu):
    "torch's own load_inline waits forever on a `lock` file left by a killed build; ours clears it."
    folder = Path(ce.gelu_torch_extension().__file__).parent
    (folder / 'lock').touch()
    try:
        done = run_python("""
            import torch
            from fromscratch.utils.cpp_extension import gelu_torch_function
            print(gelu_torch_function().apply(torch.tensor([-10.0], dtype=torch.float64)).item())""", timeout=90)
    finally:
        stale = (folder / 'lock').exists()
        (folder / 'lock').unlink(missing_ok=True)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(-7.619853024160526e-23, rel=1e-12)
    assert not stale


def test_build_lock_dies_with_its_process(tmp_path):
    holder = subprocess.Popen([sys.executable, '-c', 'import time\nfrom fromscratch.utils.cpp_extension import build_lock\n'
                               f'with build_lock({str(tmp_path)!r}):\n    print("holding", flush=True); time.sleep(600)'],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'holding'
        import fcntl
        with open(tmp_path / '.build.lock', 'a') as f:          # held: a non-blocking attempt fails
            with pytest.raises(BlockingIOError): fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.send_signal(signal.SIGKILL); holder.wait()
    start = time.monotonic()
    with ce.build_lock(tmp_path): pass
    assert time.monotonic() - start < 5


def test_torch_load_inline_without_tools(monkeypatch, tmp_path):
    monkeypatch.setenv('CXX', str(tmp_path / 'no-such-c++'))
    with pytest.raises(RuntimeError, match='CXX is set to'):
        ce.torch_load_inline('fs_never_built', 'int f() { return 1; }', ['f'], build_directory=tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match='pip install ninja, or on Debian/Ubuntu apt-get install ninja-build'):
        ce.find_ninja(search_path=str(tmp_path))
    assert ce.find_ninja().endswith('ninja')


# ---------------------------------------------------------------- our extension

def test_ours_gradcheck(ours):
    rng = np.random.default_rng(0)
    for shape in [(), (7,), (3, 4), (2, 3, 4)]:
        x = fs.tensor(4 * rng.standard_normal(shape), requires_grad=True)
        assert fs.autograd.gradcheck(ce.gelu_cpp, (x,))
    x = fs.tensor(rng.standard_normal((4, 5)))
    assert fs.autograd.gradcheck(ce.gelu_cpp, (x.t().requires_grad_(),))               # not contiguous


def test_ours_higher_derivatives(ours):
    rng = np.random.default_rng(3)
    x = fs.tensor(3 * rng.standard_normal((3, 4)), requires_grad=True)
    assert fs.autograd.gradgradcheck(ce.gelu_cpp, (x,))
    assert fs.autograd.gradcheck(lambda g, x: ce.GELUExtensionBackward.apply(g, x),
                                 (fs.tensor(rng.standard_normal(5), requires_grad=True), fs.tensor(rng.standard_normal(5), requires_grad=True)))
    xs = np.linspace(-5, 5, 41)
    ys, ts = fs.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
    y, t = ce.gelu_cpp(ys), TF.gelu(ts)
    for order in (1, 2, 3):
        y, = fs.autograd.grad(y.sum(), ys, create_graph=True)
        t, = torch.autograd.grad(t.sum(), ts, create_graph=True)
        check_close(y, t, rtol=1e-11, atol=1e-14, name=f'derivative {order}')
    x1 = fs.tensor(xs, requires_grad=True)
    ce.gelu_cpp(x1).sum().backward()                     # without create_graph the backward records nothing
    assert x1.grad.grad_fn is None and not x1.grad.requires_grad


def test_ours_matches_torch_and_the_exact_values(ours, torch_gelu):
    xs = np.linspace(-12, 12, 2001)
    g = np.random.default_rng(1).standard_normal(2001)
    x = fs.tensor(xs, requires_grad=True)
    out = ce.gelu_cpp(x)
    out.backward(fs.tensor(g))
    x_ref = torch.tensor(xs, requires_grad=True)
    ref = TF.gelu(x_ref)
    ref.backward(torch.tensor(g))
    check_close(out, ref, rtol=1e-12, atol=1e-15, name='forward')
    check_close(x.grad, x_ref.grad, rtol=1e-12, atol=1e-14, name='backward')
    check_close(out, fs.nn.functional.gelu(fs.tensor(xs)), rtol=1e-12, atol=1e-15, name='against F.gelu')
    exact = np.array([-37.0, -30.0, -10.0, -6.0, -1e-3, 0.0, 1e-3, 0.7, 5.0, 40.0])
    check_close(ce.gelu_forward_array(exact), exact_gelu(exact), rtol=1e-14, atol=0, name='exact forward')
    check_close(ce.gelu_backward_array(np.ones_like(exact), exact), exact_gelu_grad(exact), rtol=1e-13, atol=1e-300)
    both = np.linspace(-40, 40, 1001)     # the same machine code in both extensions
    assert np.array_equal(ce.gelu_forward_array(both), torch_gelu.apply(torch.from_numpy(both)).numpy())


def test_ours_float32(ours):
    xs = np.linspace(-6, 6, 101, dtype=np.float32)
    out = ce.gelu_cpp(fs.tensor(xs))
    assert out.dtype == fs.float32
    check_close(out, exact_gelu(xs.astype(np.float64)), rtol=1e-5, atol=1e-30)
    grad = ce.gelu_backward_array(np.ones(101, dtype=np.float32), xs)
    assert grad.dtype == np.float32
    check_close(grad, exact_gelu_grad(xs.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_ours_module_checks_its_arguments(ours):
    f = ours.gelu_forward_f64
    x, out = np.ones((2, 3)), np.empty((2, 3))
    assert f(x, out, 6) is None and np.allclose(out, exact_gelu(x))
    with pytest.raises(TypeError, match=r'argument 0 \(const double\*\) must be a float64 array, got float32'):
        f(x.astype(np.float32), out, 6)
    with pytest.raises(TypeError, match=r'must be a float32 array, got float64'):
        ours.gelu_forward_f32(x, out.astype(np.float32), 6)
    with pytest.raises(ValueError, match='not C-contiguous'): f(x.T, out, 6)
    with pytest.raises(ValueError, match='not C-contiguous'): f(x, np.empty((3, 2)).T, 6)
    with pytest.raises(ValueError, match='read-only'): f(x, np.broadcast_to(out, (2, 3)), 6)
    with pytest.raises(TypeError, match=r'takes 3 arguments \(2 given\)'): f(x, out)
    with pytest.raises(TypeError, match='must be a numpy array, not list'): f(x.tolist(), out, 6)
    with pytest.raises(TypeError): f(x, out, 6.0)                # a float is not a length
    read_only = x.copy(); read_only.flags.writeable = False
    f(read_only, out, 6)                                          # const: a read-only input is fine
    assert 'const double*' in repr(f) and f.__name__ == 'gelu_forward_f64'


def test_ours_shape_and_dtype_errors(ours):
    with pytest.raises(RuntimeError, match=r"grad_output of shape \[3\] does not match the input's shape \[4\]"):
        ce.gelu_backward_array(np.ones(3), np.ones(4))
    with pytest.raises(RuntimeError, match='"gelu_forward" not implemented for \'int64\''):
        ce.gelu_cpp(fs.tensor([1, 2]))
    assert ce.gelu_forward_array(np.ones((0, 3))).shape == (0, 3)
    x = np.random.default_rng(2).standard_normal((3, 4))
    check_close(ce.gelu_forward_array(x.T), exact_gelu(x.T), rtol=1e-14)        # copied to contiguous first


def test_parse_declaration():
    src = ('extern "C" double dot(const double *a, const double * b, int64_t n) { return 0; }\n'
           'extern "C" void fill(float* out, int n, float value);\n'
           'extern "C" int nothing(void) { return 1; }\n'
           'extern "C" int unnamed(int64_t, double*);\n')
    assert ce.parse_declaration(src, 'dot') == ('double', ['const double*', 'const double*', 'int64_t'])
    assert ce.parse_declaration(src, 'fill') == ('void', ['float*', 'int', 'float'])
    assert ce.parse_declaration(src, 'nothing') == ('int', [])
    assert ce.parse_declaration(src, 'unnamed') == ('int', ['int64_t', 'double*'])
    with pytest.raises(RuntimeError, match='no extern "C" function named dots'): ce.parse_declaration(src, 'dots')
    with pytest.raises(RuntimeError, match='no extern "C" function named ot'): ce.parse_declaration(src, 'ot')
    with pytest.raises(RuntimeError, match="cannot pass the C type 'std::vector<double>'"):
        ce.parse_declaration('extern "C" double total(std::vector<double> v);', 'total')
    with pytest.raises(RuntimeError, match="cannot pass the C type '__int128'"):
        ce.parse_declaration('extern "C" __int128 f(double x);', 'f')


def test_scalars_and_return_values(tmp_path):
    src = ('#include <cstdint>\n'
           'extern "C" double dot(const double* a, const double* b, int64_t n) { double s = 0; for (int64_t i = 0; i < n; ++i) s += a[i] * b[i]; return s; }\n'
           'extern "C" void fill(float* out, int n, float value) { for (int i = 0; i < n; ++i) out[i] = value; }\n')
    m = ce.load_inline('fs_test_scalars', [src], {'dot': 'The dot product.', 'fill': ''}, build_directory=tmp_path)
    a, b = np.arange(5.0), np.linspace(1, 2, 5)
    assert m.dot(a, b, 5) == pytest.approx(float(a @ b), rel=1e-15)
    assert m.dot.__doc__ == 'The dot product.' and m.fill.__doc__ is None
    out = np.zeros(4, dtype=np.float32)
    m.fill(out, 4, 2.5)
    assert out.tolist() == [2.5] * 4
    assert m.__name__ == 'fs_test_scalars' and Path(m.__file__).parent == tmp_path


# ---------------------------------------------------------------- building, caching, failing

def test_no_compiler(monkeypatch, tmp_path):
    monkeypatch.delenv('CXX', raising=False)
    monkeypatch.setenv('PATH', str(tmp_path))                     # a PATH with no compiler on it
    with pytest.raises(RuntimeError, match=r'no C\+\+ compiler found \(looked for c\+\+, g\+\+, clang\+\+; set CXX.*apt-get install g\+\+'):
        ce.load_inline('fs_test_nocompiler', TWICE_SOURCE, ['twice'], build_directory=tmp_path / 'build')
    monkeypatch.setenv('CXX', '/no/such/compiler')
    with pytest.raises(RuntimeError, match="CXX is set to '/no/such/compiler'"):
        ce.load_inline('fs_test_nocompiler', TWICE_SOURCE, ['twice'], build_directory=tmp_path / 'build')
    assert not any((tmp_path / 'build').glob('*.so'))


def test_compile_error_carries_the_compilers_message(tmp_path):
    with pytest.raises(RuntimeError) as e:
        ce.load_inline('fs_test_broken', 'extern "C" double f(double x) { return 2 * undeclared_name; }', ['f'], build_directory=tmp_path)
    text = str(e.value)
    assert text.startswith("Error building extension 'fs_test_broken':")
    assert 'undeclared_name' in text and 'error' in text and 'fs_test_broken.cpp:1:' in text
    assert list(tmp_path.iterdir()) == []                          # no library and no temporary folder left


def test_misspelt_function_fails_before_compiling(tmp_path):
    wrapper, log = compiler_log(tmp_path)
    os.environ["CXX"] = str(wrapper)
    try:
        with pytest.raises(RuntimeError, match='no extern "C" function named twise'):
            ce.load_inline('fs_test_typo', TWICE_SOURCE, ['twise'], build_directory=tmp_path / 'build')
    finally: del os.environ['CXX']
    assert compiles(log) == 0


def test_second_load_does_not_recompile(tmp_path, monkeypatch):
    wrapper, log = compiler_log(tmp_path)
    monkeypatch.setenv('CXX', str(wrapper))
    build = tmp_path / 'build'
    first = ce.load_inline('fs_test_cache', TWICE_SOURCE, ['twice'], build_directory=build)
    assert compiles(log) == 1
    mtime = Path(first.__file__).stat().st_mtime_ns
    second = ce.load_inline('fs_test_cache', TWICE_SOURCE, ['twice'], build_directory=build)
    assert compiles(log) == 1 and second.__file__ == first.__file__ and Path(first.__file__).stat().st_mtime_ns == mtime
    x, out = np.arange(4.0), np.empty(4)
    second.twice(x, out, 4)
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    # a new source or new flags: a new key, a new library next to the old one
    changed = ce.load_inline('fs_test_cache', TWICE_SOURCE + '\n// changed', ['twice'], build_directory=build)
    flagged = ce.load_inline('fs_test_cache', TWICE_SOURCE, ['twice'], build_directory=build, extra_cflags=['-O1'])
    assert compiles(log) == 3 and len({first.__file__, changed.__file__, flagged.__file__}) == 3
    assert sorted(p.suffix for p in build.iterdir() if not p.name.startswith('.')) == ['.so'] * 3
    assert [p for p in build.iterdir() if p.name.startswith('.')] == []


def test_default_build_directory_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv('FROMSCRATCH_EXTENSIONS_DIR', str(tmp_path / 'cache'))
    m = ce.load_inline('fs_test_root', TWICE_SOURCE, ['twice'])
    assert Path(m.__file__).parent == tmp_path / 'cache' == ce.extensions_root()
    monkeypatch.delenv('FROMSCRATCH_EXTENSIONS_DIR')
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    assert ce.extensions_root() == tmp_path / 'xdg' / 'fromscratch' / 'extensions'


SLOW_COMPILERS = {   # a CXX that stops (until it is killed) before compiling, or after writing half the library
    'before compiling': 'touch {started}\nsleep 60\nexec {cxx} "$@"\n',
    'while writing': ('{cxx} "$@" || exit 1\nfor a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
                      'truncate -s 4096 "$out"\ntouch {started}\nsleep 60\n')}


@pytest.mark.parametrize('when', SLOW_COMPILERS)
def test_killed_build_leaves_no_library_and_the_next_load_works(tmp_path, when):
    "Kill a build in the compiler: only its temporary folder is left, and the next load compiles and works."
    slow, started, build = tmp_path / 'slow-c++', tmp_path / 'started', tmp_path / 'build'
    slow.write_text('#!/bin/sh\n' + SLOW_COMPILERS[when].format(started=started, cxx=ce.find_compiler()))
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    load = ('import numpy as np\nfrom fromscratch.utils.cpp_extension import load_inline\n'
            f'm = load_inline("fs_test_killed", {TWICE_SOURCE!r}, ["twice"], build_directory={str(build)!r})\n'
            'out = np.empty(2); m.twice(np.array([1.0, 2.5]), out, 2); print(out.tolist())\n')
    proc = subprocess.Popen([sys.executable, '-c', load], env={**os.environ, 'CXX': str(slow)}, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline and proc.poll() is None: time.sleep(0.05)
        assert started.exists(), 'the build never reached the compiler'
    finally:
        os.killpg(proc.pid, signal.SIGKILL); proc.wait()         # the process group: python and the compiler under it
    leftovers = list(build.iterdir())
    assert [p.name.startswith('.fs_test_killed-') and p.is_dir() for p in leftovers] == [True]
    assert not list(build.glob('*.so'))
    if when == 'while writing': assert [p.stat().st_size for p in leftovers[0].glob('*.so')] == [4096]
    done = run_python(load, timeout=120)                       # in a process of its own: a half library could crash it
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '[2.0, 5.0]'


def test_a_library_that_does_not_load_is_rebuilt(tmp_path):
    "A file under the library's name that is not a library (which our builds never leave) is compiled again."
    build = tmp_path / 'build'
    path = ce.build_library('fs_test_garbage', TWICE_SOURCE, build_directory=build)   # built, not loaded here: a library
    whole = path.read_bytes()                         # overwritten in place while loaded crashes its process (SIGBUS)
    (build / 'garbage').write_bytes(b'not a shared library')
    os.replace(build / 'garbage', path)
    done = run_python(f"""
        import numpy as np
        from fromscratch.utils.cpp_extension import load_inline
        m = load_inline("fs_test_garbage", {TWICE_SOURCE!r}, ["twice"], build_directory={str(build)!r})
        out = np.empty(2); m.twice(np.array([1.0, 2.5]), out, 2); print(out.tolist())""", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '[2.0, 5.0]'
    assert path.read_bytes()[:4] == whole[:4] == b'\x7fELF'
