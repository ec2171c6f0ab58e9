"""Our `load_inline` with every C type ctypes can pass (nbs/20_extension.ipynb): each number type under its
usual spellings, by value, as a returned value and through a pointer (a numpy array of its dtype), `char`,
`const char*` strings in and out, `char*` buffers, `void*` memory; and the checks that keep ctypes from
passing a number that does not fit, or a value of the wrong kind."""
import ctypes

import numpy as np
import pytest

from fromscratch.utils import cpp_extension as ce

# C spellings, beyond the table's own, and the table's name for each
SPELLINGS = {'unsigned': 'unsigned int', 'signed': 'int', 'signed int': 'int', 'short int': 'short',
             'unsigned short int': 'unsigned short', 'long int': 'long', 'signed long': 'long',
             'long long int': 'long long', 'unsigned long long int': 'unsigned long long',
             'unsigned long int': 'unsigned long'}
NUMBERS = [t for t in ce.C_SCALARS if t != 'char'] + list(SPELLINGS)


def ident(t): return t.replace(' ', '_')


def number_functions(t):
    "Echo a value, read an array's element, write one: the three ways a C type crosses over."
    i = ident(t)
    return (f'extern "C" {t} echo_{i}({t} x) {{ return x; }}\n'
            f'extern "C" {t} read_{i}(const {t}* x, size_t k) {{ return x[k]; }}\n'
            f'extern "C" void write_{i}({t}* x, size_t k, {t} v) {{ x[k] = v; }}\n')


SOURCE = '#include <cstddef>\n#include <cstdint>\n#include <cstring>\n#include <sys/types.h>\n' + ''.join(
    number_functions(t) for t in NUMBERS) + r'''
extern "C" char echo_char(char c) { return c; }
extern "C" size_t count_char(const char* text, char c) { size_t n = 0; for (; *text; ++text) n += *text == c; return n; }
extern "C" size_t length(const char* text) { return text ? std::strlen(text) : 0; }
extern "C" const char* greeting(bool loud) { return loud ? "HELLO, C" : "hello, c"; }
extern "C" char* first_word(char* text) { char* space = std::strchr(text, ' '); if (space) *space = 0; return text; }
extern "C" void shout(char* text, size_t n) { for (size_t i = 0; i < n; ++i) if (text[i] >= 'a' && text[i] <= 'z') text[i] -= 32; }
extern "C" void copy_memory(void* to, const void* from, size_t n) { std::memcpy(to, from, n); }
'''
FUNCTIONS = [f'{kind}_{ident(t)}' for t in NUMBERS for kind in ('echo', 'read', 'write')] + [
    'echo_char', 'count_char', 'length', 'greeting', 'first_word', 'shout', 'copy_memory']


@pytest.fixture(scope='module')
def lib(tmp_path_factory):
    return ce.load_inline('fs_test_types', SOURCE, FUNCTIONS, build_directory=tmp_path_factory.mktemp('types'))


def table_name(t): return SPELLINGS.get(t, t)


def dtype_of(t): return np.dtype(ce.C_SCALARS[table_name(t)])


def edge_values(t):
    "Values at the ends of the type's range (and a few inside it)."
    d = dtype_of(t)
    if d.kind == 'b': return [True, False]
    if d.kind == 'f':
        info = np.finfo(d)
        return [0.0, -1.5, float(info.max), float(info.tiny), 1 / 3]
    info = np.iinfo(d)
    return [int(info.min), int(info.max), 0, 1, int(info.max) // 3]


@pytest.mark.parametrize('t', NUMBERS)
def test_declarations_read_every_spelling(t):
    i = ident(t)
    assert ce.parse_declaration(SOURCE, f'echo_{i}') == (table_name(t), [table_name(t)])
    assert ce.parse_declaration(SOURCE, f'read_{i}') == (table_name(t), [f'const {table_name(t)}*', 'size_t'])
    assert ce.parse_declaration(SOURCE, f'write_{i}') == ('void', [f'{table_name(t)}*', 'size_t', table_name(t)])


@pytest.mark.parametrize('t', NUMBERS)
def test_numbers_cross_unchanged(lib, t):
    i, d = ident(t), dtype_of(t)
    for v in edge_values(t):
        back = getattr(lib, f'echo_{i}')(v)
        expected = float(np.array(v, dtype=d)) if d.kind == 'f' else v  # a float parameter rounds to its type
        assert back == expected and type(back) is type(expected), (t, v, back)
    values = np.array(edge_values(t), dtype=d)
    for k, v in enumerate(edge_values(t)):
        assert getattr(lib, f'read_{i}')(values, k) == values[k]
    out = np.zeros(len(values), dtype=d)
    for k, v in enumerate(values.tolist()): getattr(lib, f'write_{i}')(out, k, v)
    np.testing.assert_array_equal(out, values, strict=True)


@pytest.mark.parametrize('t', [t for t in NUMBERS if dtype_of(t).kind in 'iu'])
def test_integers_that_do_not_fit_are_refused(lib, t):
    echo, info = getattr(lib, f'echo_{ident(t)}'), np.iinfo(dtype_of(t))
    for v in (int(info.min) - 1, int(info.max) + 1, 2 ** 70):
        with pytest.raises(OverflowError, match=rf'echo_{ident(t)}\(\): argument 0 \({table_name(t)}\) must be in '
                                                rf'\[{info.min}, {info.max}\], got {v}'):
            echo(v)
    with pytest.raises(TypeError): echo(1.5)        # an integer type takes integers only
    assert echo(np.int8(3)) == 3 and echo(True) == 1


def test_bools_and_floats_take_their_kind(lib):
    with pytest.raises(TypeError, match=r'echo_bool\(\): argument 0 \(bool\) must be True or False, not int'):
        lib.echo_bool(1)
    assert lib.echo_bool(np.bool_(True)) is True
    with pytest.raises(TypeError, match=r'argument 0 \(double\) must be a number, not str'): lib.echo_double('1.5')
    assert lib.echo_double(2) == 2.0 and lib.echo_float(np.float32(0.1)) == float(np.float32(0.1))


def test_arrays_are_checked(lib):
    with pytest.raises(TypeError, match=r'read_long\(\): argument 0 \(const long\*\) must be an int64 array, got int32'):
        lib.read_long(np.zeros(2, np.int32), 0)
    with pytest.raises(TypeError, match=r'must be a uint8 array, got int8'): lib.read_uint8_t(np.zeros(2, np.int8), 0)
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match='is read-only, but the function writes to it'):
        lib.write_double(frozen, 0, 1.0)
    with pytest.raises(ValueError, match='is not C-contiguous'): lib.read_float(np.zeros((2, 2), np.float32).T, 0)
    with pytest.raises(TypeError, match='must be a numpy array, not list'): lib.read_double([1.0], 0)


def test_chars_and_strings(lib):
    assert lib.echo_char('a') == 'a' and lib.echo_char(b'z') == 'z'
    for bad in ('ab', '', 7):
        with pytest.raises(TypeError, match=r'echo_char\(\): argument 0 \(char\) must be one character'):
            lib.echo_char(bad)
    assert lib.count_char('fromscratch', 'r') == 2 and lib.count_char(b'aaa', b'a') == 3
    assert lib.length('héllo') == len('héllo'.encode()) and lib.length(b'') == 0 and lib.length(None) == 0
    with pytest.raises(TypeError, match=r'length\(\): argument 0 \(const char\*\) must be a str or bytes, not 3'):
        lib.length(3)
    assert lib.greeting(True) == 'HELLO, C' and lib.greeting(False) == 'hello, c'
    text = bytearray(b'two words\0')
    assert lib.first_word(text) == 'two' and text[:4] == b'two\0'


def test_char_buffers_and_memory(lib):
    word = bytearray(b'gelu in c++')
    lib.shout(word, len(word))
    assert word == b'GELU IN C++'
    codes = np.frombuffer(b'abc', np.uint8).copy()                # a char* buffer may be int8 or uint8
    lib.shout(codes, 3)
    assert codes.tobytes() == b'ABC'
    with pytest.raises(ValueError, match='is read-only'): lib.shout(np.frombuffer(b'abc', np.uint8), 3)
    with pytest.raises(TypeError, match=r'\(char\*\) must be an int8 array, got int16'): lib.shout(np.zeros(2, np.int16), 2)
    src, dst = np.arange(6, dtype=np.float32), np.zeros(6, np.float32)  # void*: any dtype, as bytes
    lib.copy_memory(dst, src, src.nbytes)
    np.testing.assert_array_equal(dst, src)
    dst.flags.writeable = False
    with pytest.raises(ValueError, match=r'argument 0 \(void\*\) is read-only'):
        lib.copy_memory(dst, src, 0)
    lib.copy_memory(src.copy(), dst, 0)  # const void*: a read-only array will do


def test_the_table_has_every_ctypes_number_and_pointers_to_them():
    assert {'long', 'unsigned int', 'unsigned long', 'size_t', 'ssize_t', 'int32_t', 'int64_t', 'uint8_t', 'bool',
            'char', 'float', 'double'} <= set(ce.C_SCALARS)
    for t, c in ce.C_SCALARS.items():
        assert ce.ARGUMENT_TYPES[t].ctypes is c and ce.RETURN_TYPES[t] is c
        assert ce.ARGUMENT_TYPES[f'{t}*'].written and ce.ARGUMENT_TYPES[f'{t}*'].ctypes is ctypes.c_void_p
    assert ce.ARGUMENT_TYPES['const char*'].kind == 'string' and ce.ARGUMENT_TYPES['char*'].kind == 'array'
    with pytest.raises(RuntimeError, match="cannot pass the C type 'double\\*\\*'"):
        ce.parse_declaration('extern "C" void f(double** rows);', 'f')
