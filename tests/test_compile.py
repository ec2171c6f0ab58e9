"""`fromscratch.compile` (nbs/21_compile.ipynb): a compiled training step equals the eager step, bit for bit
in float64, over 100 steps (the MNIST MLP with SGD and with Adam, the CNN with BatchNorm's running
statistics); each guard sees what it must and the step is recorded again; each kind of graph break warns
(or, with `fullgraph=True`, raises) naming the line; the passes (dead code, buffers, fused C++ kernels)
change the speed, never a result."""
import contextlib
import io
import warnings

import numpy as np
import pytest

import fromscratch as fs
import fromscratch.nn.functional as F
from fromscratch import nn, optim
from fromscratch.compiler import Unsupported, compile, is_compiling
from fromscratch.train import mnist_cnn

NO_FUSION = dict(fusion=False)


def training(build_model, make_optimizer, seed=0):
    "A float64 model, its optimizer and its training step (zero_grad, backward, step)."
    fs.manual_seed(seed)
    model = build_model().double()
    opt = make_optimizer(model.parameters())
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return model, opt, step


def mlp(): return nn.Sequential(nn.Linear(784, 50), nn.ReLU(), nn.Linear(50, 10))
def sgd(params): return optim.SGD(params, lr=0.1, momentum=0.9)
def adam(params): return optim.Adam(params, lr=1e-3)


def batches(n, size=16, seed=0, features=784):
    rng = np.random.default_rng(seed)
    return [(fs.tensor(rng.standard_normal((size, features))), fs.tensor(rng.integers(0, 10, size)))
            for _ in range(n)]


def same_state(a, b):
    return all(np.array_equal(x.numpy(), y.numpy()) for x, y in
               zip(a.state_dict().values(), b.state_dict().values()))


def run_both(eager_step, compiled_step, data):
    "Each batch through both steps: whether every loss is equal, to the last bit."
    return all(eager_step(x, y).item() == compiled_step(x, y).item() for x, y in data)


@pytest.mark.parametrize('make_optimizer', [sgd, adam], ids=['sgd', 'adam'])
@pytest.mark.parametrize('options', [NO_FUSION, {}], ids=['numpy', 'cpp_fusion'])
def test_the_mlp_step_equals_eager_over_100_steps(make_optimizer, options):
    eager_model, _, eager_step = training(mlp, make_optimizer)
    model, _, step = training(mlp, make_optimizer)
    compiled = compile(step, options=options)
    assert run_both(eager_step, compiled, batches(100))
    assert same_state(eager_model, model)
    assert len(compiled.programs) == 2 and not compiled.breaks and not compiled.refusals
    if options == {}: assert compiled.programs[-1].fusion.endswith('kernels')


@pytest.mark.parametrize('options', [NO_FUSION, {}], ids=['numpy', 'cpp_fusion'])
def test_the_cnn_step_with_running_statistics_equals_eager_over_100_steps(options):
    eager_model, _, eager_step = training(mnist_cnn, sgd)
    model, _, step = training(mnist_cnn, sgd)
    compiled = compile(step, options=options)
    assert run_both(eager_step, compiled, batches(100, size=4))
    assert same_state(eager_model, model)  # running means and variances, batch counts too
    assert model[2].num_batches_tracked.item() == 100
    assert len(compiled.programs) == 2 and not compiled.refusals


def test_every_pass_off_or_on_gives_the_same_steps():
    results = []
    for options in ({'dead_code': False, 'buffers': False, 'fusion': False},
                    {'buffers': False, 'fusion': False}, NO_FUSION):
        model, _, step = training(mlp, sgd)
        compiled = compile(step, options=options)
        results.append([compiled(x, y).item() for x, y in batches(5)])
    assert results[0] == results[1] == results[2]


def test_tensors_from_the_closure_are_read_afresh():
    # the batch lives in the step's closure and changes in place between calls
    model, _, step = training(mlp, sgd)
    eager_model, _, eager_step = training(mlp, sgd)
    (x, y), (xe, ye) = [(fs.zeros(16, 784, dtype=fs.float64), fs.zeros(16, dtype=fs.int64))
                        for _ in range(2)]
    compiled = compile(lambda: step(x, y))
    for new_x, new_y in batches(6):
        for a, b in ((x, xe), (y, ye)):
            with fs.no_grad(): a.copy_(new_x if a.dtype == fs.float64 else new_y); b.copy_(a)
        assert compiled().item() == eager_step(xe, ye).item()
    assert same_state(eager_model, model) and len(compiled.programs) == 2
    assert not any('SEEN' in r for r in compiled.reasons)  # read only: no version guard


class Twins:
    "The same step, eager and compiled, from the same weights; `run` checks they agree."
    def __init__(self, build_model=mlp, make_optimizer=sgd, **compile_kwargs):
        self.eager_model, self.eager_opt, self.eager_step = training(build_model, make_optimizer)
        self.model, self.opt, step = training(build_model, make_optimizer)
        self.compiled = compile(step, **compile_kwargs)
        self.data = iter(batches(50, seed=1))
    def run(self, x=None, y=None):
        if x is None: x, y = next(self.data)
        assert self.eager_step(x, y).item() == self.compiled(x, y).item()
        assert same_state(self.eager_model, self.model)
        return len(self.compiled.programs)
    def both(self, f):
        for m in (self.eager_model, self.model): f(m)


def warmed():
    t = Twins()
    assert [t.run() for _ in range(3)] == [1, 2, 2]
    return t


def test_another_batch_size_is_recorded_again_and_the_first_found_again():
    t = warmed()
    x, y = batches(1, size=8)[0]
    assert t.run(x, y) == 3 and t.compiled.reasons[-1] == 'a0.array.shape == (16, 784)'
    assert t.run() == 3 and t.run(x, y) == 3


def test_a_parameter_changed_in_place_outside_the_step_is_seen():
    t = warmed()
    def halve(m):
        with fs.no_grad(): m[0].weight.mul_(0.5)
    t.both(halve)
    assert t.run() == 2  # recorded again, the stale recording replaced
    assert 'SEEN[' in t.compiled.reasons[-1] and 'p0_weight' in t.compiled.reasons[-1]
    assert t.run() == 2


def test_requires_grad_flipped_is_seen():
    t = warmed()
    t.both(lambda m: m[2].bias.requires_grad_(False))
    n = t.run()
    assert t.compiled.reasons[-1] == 'T_p2_bias._requires_grad is True'
    t.run(); t.run()  # (the first call found the bias's last .grad, the next none)
    t.both(lambda m: m[2].bias.requires_grad_(True))
    t.run()
    assert t.compiled.reasons[-1] == 'T_p2_bias._requires_grad is False' and n >= 3


def test_a_tensor_hook_added_is_seen_and_runs_in_the_program():
    t = warmed()
    handles = []
    t.both(lambda m: handles.append(m[0].weight.register_hook(lambda g: g * 2)))
    n = t.run()
    assert t.compiled.reasons[-1] == 'T_p0_weight._hooks is None' and t.run() == n
    for h in handles: h.remove()
    t.run()


def test_a_module_forward_hook_added_is_seen():
    t = warmed()
    handles = []
    t.both(lambda m: handles.append(m[1].register_forward_hook(lambda mod, a, out: out * 0.5)))
    n = t.run()
    assert 'ReLU' in t.compiled.reasons[-1] and t.run() == n
    for h in handles: h.remove()
    t.run()


def test_training_and_eval_mode_are_seen():
    t = Twins(mnist_cnn)
    for _ in range(3): t.run(*batches(1, size=4)[0])
    t.both(lambda m: m.eval())
    t.run(*batches(1, size=4, seed=5)[0])
    assert t.compiled.reasons[-1].endswith('.training is True')


def test_grad_mode_is_seen():
    fs.manual_seed(0)
    model = mlp().double()
    forward = compile(lambda x: model(x).sum())
    x = batches(1)[0][0]
    with fs.no_grad():
        for _ in range(2): assert forward(x).item() == model(x).sum().item()
    assert len(forward.programs) == 1
    with fs.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        forward(x)  # a forward that records a graph, returned: refused, eager from now on
    assert forward.reasons == ['grad_mode.enabled is False'] and forward.eager


def test_the_learning_rate_is_read_at_each_replay():
    t = warmed()
    for o in (t.eager_opt, t.opt):
        for g in o.param_groups: g['lr'] = 0.01
    assert t.run() == 2 and t.run() == 2


def test_dropout_draws_what_eager_draws():
    def with_dropout(): return nn.Sequential(nn.Linear(784, 50), nn.ReLU(), nn.Dropout(0.5),
                                             nn.Linear(50, 10))
    t = Twins(with_dropout)  # (both draw from the one generator: each its own turn)
    fs.manual_seed(7)
    eager = [t.eager_step(x, y).item() for x, y in batches(6)]
    fs.manual_seed(7)
    assert [t.compiled(x, y).item() for x, y in batches(6)] == eager
    assert same_state(t.eager_model, t.model) and len(t.compiled.programs) == 2
    fs.manual_seed(8)  # a new generator: the guard sees it
    eager = [t.eager_step(x, y).item() for x, y in batches(2, seed=3)]
    fs.manual_seed(8)
    assert [t.compiled(x, y).item() for x, y in batches(2, seed=3)] == eager
    assert 'generator' in t.compiled.reasons[-1] and len(t.compiled.programs) == 3


def test_a_failed_check_of_the_data_runs_that_call_eagerly():
    t = warmed()
    x, y = batches(1, seed=9)[0]
    bad = fs.tensor(np.where(np.arange(16) == 3, 10, y.numpy()))
    with pytest.raises(IndexError, match='Target 10 is out of bounds'): t.compiled(x, bad)
    assert t.run() == 2 and not t.compiled.breaks


def warning_of(f, *args):
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter('always')
        out = f(*args)
    breaks = [w for w in caught if 'graph break' in str(w.message)]
    assert len(breaks) == 1, [str(w.message) for w in caught]
    return breaks[0], out


w = fs.tensor([0.5, -1.0, 2.0], requires_grad=True)

def reads_item(x):
    loss = (x * w).sum()
    value = loss.item()  # reads
    return loss * value

def reads_bool(x):
    loss = (x * w).sum()
    flag = bool(loss)  # reads
    return loss * flag

def reads_in_if(x):
    loss = (x * w).sum()
    if loss > 0:  # reads
        loss = loss * 2
    return loss

def prints(x):
    loss = (x * w).sum()
    print(loss)  # reads
    return loss

def reads_numpy(x):
    out = (x * w).detach()
    return out.numpy().sum()  # reads


READERS = [(reads_item, '`.item()`'), (reads_bool, 'truth value'), (reads_in_if, 'truth value'),
           (prints, 'printed'), (reads_numpy, '`.numpy()`')]


def reading_line(f):
    import inspect
    lines, first = inspect.getsourcelines(f)
    return first + next(i for i, line in enumerate(lines) if '# reads' in line)


@pytest.mark.parametrize('f,what', READERS, ids=[f.__name__ for f, _ in READERS])
def test_a_graph_break_warns_once_naming_the_line_and_runs_eagerly(f, what):
    x = fs.tensor([1.0, 2.0, 3.0])
    compiled = compile(f)
    caught, out = warning_of(compiled, x)
    assert caught.filename == __file__ and caught.lineno == reading_line(f)
    assert what in str(caught.message) and 'eagerly' in str(caught.message)
    with contextlib.redirect_stdout(io.StringIO()):
        expected = f(x)
        with warnings.catch_warnings():
            warnings.simplefilter('error')  # no second warning
            again = compiled(x)
    values = lambda v: v.detach().numpy() if isinstance(v, fs.Tensor) else v
    assert np.array_equal(values(out), values(expected)) and np.array_equal(values(again), values(expected))
    assert compiled.eager and compiled.programs == [] and len(compiled.breaks) == 1
    assert f'{__file__}:{reading_line(f)}' in repr(compiled.explain())


@pytest.mark.parametrize('f,what', READERS, ids=[f.__name__ for f, _ in READERS])
def test_with_fullgraph_a_graph_break_raises_naming_the_line(f, what):
    with pytest.raises(Unsupported) as e, contextlib.redirect_stdout(io.StringIO()):
        compile(f, fullgraph=True)(fs.tensor([1.0, 2.0, 3.0]))
    message = str(e.value)
    assert what in message and f'File "{__file__}", line {reading_line(f)}' in message
    import linecache
    assert linecache.getline(__file__, reading_line(f)).strip() in message


def test_explain_shows_the_program_its_guards_and_why_it_was_recorded_again():
    t = warmed()
    text = repr(t.compiled.explain())
    assert text.startswith('training.<locals>.step: 2 recordings, 0 graph breaks')
    assert 'recorded again because this guard failed: T_p0_weight._grad is None' in text
    assert 'def replay(args, kwargs):' in text and 'if not (a0.array.shape == (16, 784)): return MISS' in text
    assert 'kernels' in text or 'fusion' not in text


def test_without_a_compiler_the_program_stays_numpys(monkeypatch):
    monkeypatch.setenv('CXX', 'no-such-compiler')
    t = Twins()
    for _ in range(4): t.run()
    assert t.compiled.programs[-1].fusion.startswith('off (CXX is set to')
    assert 'kernel' not in t.compiled.programs[-1].source


def test_side_effects_in_python_happen_while_recording_only():
    seen = []
    model, _, step = training(mlp, sgd)
    def logging_step(x, y):
        loss = step(x, y)
        seen.append(loss)
        return loss
    compiled = compile(logging_step)
    for x, y in batches(5): compiled(x, y)
    assert len(seen) == 2 == len(compiled.programs)


def test_a_forward_alone_is_refused_and_runs_eagerly():
    model = mlp().double()
    forward = compile(lambda x: model(x))
    with pytest.warns(UserWarning, match='whose backward has not run'):
        out = forward(batches(1)[0][0])
    assert out.grad_fn is not None and forward.eager and forward.refusals


def test_the_limit_of_eight_recordings():
    doubled = compile(lambda x: x * 2)
    with pytest.warns(UserWarning, match='8 recordings'):
        for n in range(1, 11): assert np.array_equal(doubled(fs.ones(n)).numpy(), 2 * np.ones(n))
    assert len(doubled.programs) == 8 and doubled.eager


def test_dynamic_is_not_supported_and_is_compiling_tells_a_recording():
    with pytest.raises(NotImplementedError, match='dynamic=True'): compile(lambda x: x, dynamic=True)
    seen = []
    compiled = compile(lambda x: seen.append(is_compiling()) or x * 2)
    compiled(fs.ones(2)); compiled(fs.ones(2))
    assert seen == [True] and not is_compiling()


def test_compile_is_torchs_name_at_the_top():
    assert fs.compile is compile and fs.compiler.compile is compile


def test_the_gpt_step_with_dropout_equals_eager_over_100_steps():
    # models/gpt.py (12c_gpt): AdamW in two groups, gradient clipping, attention's causal mask,
    # dropout drawing from the generator as eager does, targets with ignored (-1) places
    from fromscratch.models.gpt import GPT, gpt_optimizer, gpt_step
    def build():
        fs.manual_seed(0)
        model = GPT(dropout=0.1).double()
        return model, gpt_optimizer(model)
    rng = np.random.default_rng(0)
    data = [(fs.tensor(rng.integers(0, 27, (4, 16))), fs.tensor(rng.integers(-1, 27, (4, 16))))
            for _ in range(100)]
    (eager_model, eager_opt), (model, opt) = build(), build()
    compiled = compile(lambda x, y: gpt_step(model, opt, x, y))
    fs.manual_seed(5)
    eager = [gpt_step(eager_model, eager_opt, x, y).item() for x, y in data]
    fs.manual_seed(5)
    assert [compiled(x, y).item() for x, y in data] == eager
    assert same_state(eager_model, model)
    assert len(compiled.programs) == 2 and not compiled.breaks and not compiled.refusals


def test_a_failed_check_of_the_data_leaves_the_recording_in_use():
    # the library's checks of the data (cross_entropy's ignored targets) come out differently
    # for some batches: those calls run eagerly, and the recording replays the next one
    t = warmed()
    x, y = next(t.data)
    odd = fs.tensor(np.where(np.arange(16) < 4, -100, y.numpy()))  # ignored targets: a check fails
    assert t.run(x, odd) == 2 and t.run() == 2 and not t.compiled.reasons[2:]


def train_lines(argv):
    "The stdout lines of `python -m fromscratch.train argv`, without the seconds."
    from fromscratch.train import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out): assert main(argv + ['--progress', 'never']) == 0
    return [line.split(' seconds=')[0] for line in out.getvalue().splitlines()]


@pytest.mark.parametrize('model', ['mlp', 'cnn'])
def test_train_with_compile_prints_the_same_lines(model):
    quick = ['--model', model, '--train-size', '300' if model == 'mlp' else '100', '--epochs', '2']
    assert train_lines(quick + ['--compile']) == train_lines(quick)


def test_train_gpt_with_compile_prints_the_same_lines():
    quick = ['--model', 'gpt', '--train-size', '320']
    lines = train_lines(quick + ['--compile'])
    assert lines == train_lines(quick) and lines[-1].startswith('loss=')


def test_train_refuses_compile_with_processes(capsys):
    from fromscratch.train import parse_args
    with pytest.raises(SystemExit): parse_args(['--compile', '--nproc', '2'])
    assert 'argument --compile: not with --nproc' in capsys.readouterr().err


def test_the_recording_replayed_last_is_tried_first():
    t = warmed()
    first, second = t.compiled.programs
    assert t.compiled.last is second and list(t.compiled.in_order()) == [second, first]


def exp_twice(write_between):
    "A step that computes exp(3x) twice (x written in place between, if asked), and the same eagerly."
    def step(x):
        a = (x * 3.0).exp().sum()
        if write_between: x.mul_(2.0)
        return a + (x * 3.0).exp().sum()
    return step


@pytest.mark.parametrize('write_between', [False, True], ids=['repeat', 'written_between'])
def test_a_repeated_call_on_arrays_runs_once_unless_its_argument_was_written(write_between):
    step = exp_twice(write_between)
    compiled = compile(step, options=NO_FUSION)
    xs = [fs.tensor(np.random.default_rng(k).standard_normal(5)) for k in range(4)]
    x_eager = [x.clone() for x in xs]
    for x, xe in zip(xs, x_eager):
        assert compiled(x).item() == step(xe).item()
        assert np.array_equal(x.numpy(), xe.numpy())
    source = compiled.programs[-1].source
    assert source.count('exp(') == (2 if write_between else 1)
    assert source.count('multiply(') + source.count(' * ') == (3 if write_between else 1)


def test_arrays_deduplicated_leaves_results_that_are_written_and_empty_arrays():
    from fromscratch.compiler.passes import arrays_deduplicated
    from fromscratch.compiler.program import ALIAS, CALL, OP, Instr, Var
    import operator
    x = Var('x', 'input', (3,), np.dtype(np.float64))
    a, b, c, d, e, f = (Var(n, 'temp', (3,), np.dtype(np.float64)) for n in 'abcdef')
    program = [Instr(CALL, np.exp, (x,), outs=(a,)), Instr(CALL, np.exp, (x,), outs=(b,)),
               Instr(CALL, np.negative, (x,), outs=(c,)), Instr(CALL, np.negative, (x,), outs=(d,)),
               Instr(OP, operator.iadd, (d, 1.0), writes=(d,)),  # d is written: no alias
               Instr(CALL, np.empty_like, (x,), outs=(e,)), Instr(CALL, np.empty_like, (x,), outs=(f,))]
    out = arrays_deduplicated(program)
    assert [i.form for i in out] == [CALL, ALIAS, CALL, CALL, OP, CALL, CALL]
    assert out[1].args == (a,) and b.base is a
    assert d.base is None and f.base is None
    # results the step leaves behind (a .grad each, say) stay two arrays
    a2, b2 = (Var(n, 'temp', (3,), np.dtype(np.float64)) for n in ('a2', 'b2'))
    repeat = [Instr(CALL, np.exp, (x,), outs=(a2,)), Instr(CALL, np.exp, (x,), outs=(b2,))]
    assert [i.form for i in arrays_deduplicated(repeat, live={b2})] == [CALL, CALL]
    # 0.0 and -0.0 are different arguments
    g, h = (Var(n, 'temp', (3,), np.dtype(np.float64)) for n in 'gh')
    out = arrays_deduplicated([Instr(CALL, np.maximum, (x, 0.0), outs=(g,)),
                               Instr(CALL, np.maximum, (x, -0.0), outs=(h,))])
    assert [i.form for i in out] == [CALL, CALL]


def strided_add(out_in_row_order=True):
    "x + y of two (4, 6) float32 views out of row order (x[:, ::2] of a (4, 12), y the transpose of a (6, 4))."
    from fromscratch.compiler.program import CALL, Instr, Var
    f32 = np.dtype(np.float32)
    x = Var('x', 'input', (4, 6), f32, contiguous=False, strides=(12, 2))
    y = Var('y', 'input', (4, 6), f32, contiguous=False, strides=(1, 4))
    r = Var('r', 'temp', (4, 6), f32, contiguous=out_in_row_order,
            strides=(6, 1) if out_in_row_order else (1, 4))
    return [Instr(CALL, np.add, (x, y), outs=(r,))], r


def test_a_call_on_views_out_of_row_order_is_a_kernel_that_reads_any_strides():
    from fromscratch.compiler.fusion import FUSED, load_kernels, with_fusion
    instrs, r = strided_add()
    out, kernels = with_fusion(instrs, {r})
    assert [i.form for i in out] == [FUSED] and len(kernels) == 1
    try: kernel = getattr(load_kernels(kernels), kernels[0].name)
    except (RuntimeError, OSError): pytest.skip('no C++ compiler')
    rng = np.random.default_rng(0)
    for x, y in [(rng.standard_normal((4, 12))[:, ::2], rng.standard_normal((6, 4)).T),  # as recorded
                 (rng.standard_normal((4, 18))[:, ::3], rng.standard_normal((4, 6))),  # other strides
                 (rng.standard_normal((8, 6))[::2], rng.standard_normal((4, 6, 2))[:, :, 1])]:
        x, y = x.astype(np.float32), y.astype(np.float32)
        result = np.empty((4, 6), np.float32)
        kernel(x, y, result)
        assert np.array_equal(result, x + y)


def test_a_new_array_out_of_row_order_and_a_single_call_in_row_order_are_not_fused():
    from fromscratch.compiler.fusion import with_fusion
    from fromscratch.compiler.program import CALL, Instr, Var
    instrs, r = strided_add(out_in_row_order=False)  # numpy made it in the inputs' order
    assert with_fusion(instrs, {r}) == (instrs, [])
    f32 = np.dtype(np.float32)
    x, y, s = (Var(n, 'temp', (4, 6), f32, strides=(6, 1)) for n in 'xys')
    instrs = [Instr(CALL, np.add, (x, y), outs=(s,))]  # one call in row order: numpy's own loop
    assert with_fusion(instrs, {s}) == (instrs, [])


def test_a_mask_in_a_kernel_is_a_choice_of_1_or_0_with_numpys_values():
    # g * (x > 0): the bool becomes 1.0 or 0.0 by a choice (which the compiler vectorises)
    from fromscratch.compiler.fusion import kernel_source, load_kernels, with_fusion
    from fromscratch.compiler.program import CALL, Instr, Var
    f64, b = np.dtype(np.float64), np.dtype(np.bool_)
    x, g = (Var(n, 'input', (7,), f64, strides=(1,)) for n in 'xg')
    m, r = Var('m', 'temp', (7,), b, strides=(1,)), Var('r', 'temp', (7,), f64, strides=(1,))
    instrs = [Instr(CALL, np.greater, (x, 0), outs=(m,)), Instr(CALL, np.multiply, (g, m), outs=(r,))]
    _, kernels = with_fusion(instrs, {r})
    assert '? (double)1 : (double)0' in kernel_source(kernels[0])
    try: kernel = getattr(load_kernels(kernels), kernels[0].name)
    except (RuntimeError, OSError): pytest.skip('no C++ compiler')
    xs = np.array([1.0, -1.0, 0.0, -0.0, np.nan, 2.0, -3.0])
    gs = np.array([-1.0, -1.0, np.inf, -2.0, 3.0, np.nan, np.nan])
    out = np.empty(7)
    kernel(xs, gs, out)
    with np.errstate(invalid='ignore'): want = gs * (xs > 0)  # inf * 0: nan
    assert np.array_equal(out, want, equal_nan=True) and np.array_equal(np.signbit(out), np.signbit(want))


REDUCTION_SHAPES = [(1024, 10), (3, 7), (5, 8), (2, 129), (4, 300), (1000, 1), (2, 4099), (1, 1), (7,),
                    (300,), (5, 1), (1, 9), (4, 3, 5), (6, 2, 1), (2, 70000)]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_a_reduction_by_rows_is_a_kernel_equal_to_numpys_to_the_last_bit(dtype):
    # sums add in numpy's order (pairwise along the last axis, row after row along the first),
    # so they equal numpy's bytes; max and min equal numpy's values, a nan included
    from fromscratch.compiler.fusion import Reduction, load_kernels, reduced_rows
    from fromscratch.compiler.program import METHOD, Instr, Var
    dt, kernels, cases = np.dtype(dtype), [], []
    for shape in REDUCTION_SHAPES:
        x = Var('x', 'temp', shape, dt)
        for op in ('sum', 'max', 'min'):
            for axis, keep in ((-1, False), (0, True), (None, False), (len(shape) - 1, True)):
                ref = getattr(np.zeros(shape, dt), op)(axis=axis, keepdims=keep)
                call = Instr(METHOD, op, (x,), {'axis': axis, 'keepdims': keep},
                             outs=(Var('o', 'temp', ref.shape, dt),))
                kernels.append(Reduction(f'k{len(kernels)}', call, *reduced_rows(call)))
                cases.append((shape, op, axis, keep))
    try: module = load_kernels(kernels, f'fs_reductions_{dt.name}')
    except (RuntimeError, OSError): pytest.skip('no C++ compiler')
    rng = np.random.default_rng(0)
    for k, (shape, op, axis, keep) in zip(kernels, cases):
        for special in (False, True):
            a = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)).astype(dt)
            if special and a.size > 3:  # a -0.0, and for max and min a nan
                a.flat[1] = -0.0
                if op != 'sum': a.flat[2] = np.nan
            want = getattr(a, op)(axis=axis, keepdims=keep)
            got = np.full(np.shape(want), 7.0, dt)
            getattr(module, k.name)(a, got)
            if op == 'sum': assert got.tobytes() == np.asarray(want).tobytes(), (shape, axis)
            else: assert np.array_equal(got, want, equal_nan=True), (shape, op, axis)


def test_integer_max_and_min_are_kernels_and_integer_sums_and_other_reductions_are_not():
    from fromscratch.compiler.fusion import Reduction, load_kernels, reduced_rows
    from fromscratch.compiler.program import METHOD, Instr, Var
    i64, f32 = np.dtype(np.int64), np.dtype(np.float32)
    x = Var('x', 'temp', (9, 4), i64)
    call = lambda op, *args, dt=i64, shape=(), **kw: Instr(
        METHOD, op, (x,) + args, kw, outs=(Var('o', 'temp', shape, dt),))
    assert reduced_rows(call('max')) == (x, 1, 36, True)
    assert reduced_rows(call('min', 0, shape=(4,))) == (x, 9, 4, False)
    assert reduced_rows(call('sum')) is None  # an integer sum: numpy's (it may overflow)
    assert reduced_rows(call('max', axis=1, out=None)) is None  # out=, dtype=, initial=: numpy's
    assert reduced_rows(call('mean', dt=np.dtype(np.float64))) is None
    y = Var('y', 'temp', (2, 3, 4), f32)
    middle = Instr(METHOD, 'sum', (y,), {'axis': 1}, outs=(Var('o', 'temp', (2, 4), f32),))
    assert reduced_rows(middle) is None  # a middle axis: numpy's
    strided = Var('s', 'temp', (3, 4), f32, contiguous=False, strides=(1, 3))
    assert reduced_rows(Instr(METHOD, 'sum', (strided, 0), outs=(Var('o', 'temp', (4,), f32),))) is None
    k = Reduction('imax', call('max', 1, shape=(9,)), *reduced_rows(call('max', 1, shape=(9,))))
    try: kernel = getattr(load_kernels([k], 'fs_int_max'), 'imax')
    except (RuntimeError, OSError): pytest.skip('no C++ compiler')
    a = np.random.default_rng(1).integers(-10**12, 10**12, (9, 4))
    out = np.empty(9, np.int64)
    kernel(a, out)
    assert np.array_equal(out, a.max(1))


def test_one_call_that_spreads_an_array_over_rows_is_fused_one_in_row_order_is_not():
    # (1024, 10) + (10,): numpy runs its loop once per row, a kernel does it in one pass
    from fromscratch.compiler.fusion import FUSED, with_fusion
    from fromscratch.compiler.program import CALL, Instr, Var
    f32 = np.dtype(np.float32)
    z, b, c = Var('z', 'temp', (1024, 10), f32), Var('b', 'input', (10,), f32), Var('c', 'temp', (1024, 1), f32)
    for other in (b, c):
        r = Var('r', 'temp', (1024, 10), f32)
        out, kernels = with_fusion([Instr(CALL, np.subtract, (z, other), outs=(r,))], {r})
        assert [i.form for i in out] == [FUSED] and len(kernels) == 1
    for other in (2.0, Var('s', 'temp', (), f32), Var('w', 'temp', (1024, 10), f32)):
        r = Var('r', 'temp', (1024, 10), f32)
        instrs = [Instr(CALL, np.multiply, (z, other), outs=(r,))]
        assert with_fusion(instrs, {r}) == (instrs, [])
