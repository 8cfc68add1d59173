"""C simulation of the HLS emitter's C++: ops lowered to the tensor IR, emitted, compiled with
g++ and run through ctypes, against the interpreter on the same function.

Tolerances: a kernel of ``+ - * /``, compares and selects is bit-exact with the
interpreter (each C operation rounds in float32 as numpy's does: an ISO mode contracts
nothing, x86-64 evaluates in SSE, the loops keep the IR's order); one through ``expf``
(Sigmoid, Softmax) may differ by the math libraries' own error, glibc's and numpy's
each within about an ulp of the exact value, so a few ulps after a division (4
allowed). Integers are exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import (
    Buffer, For, Logical, Not, PrimFunc, Store, Var, call, cast, const, lt, maximum, minimum, run_func, select, seq,
)
from hetero.core.ir.tir.expr import binary, bitcast, ne
from hetero.core.lower import lower_node
from hetero.errors import CodegenError
from hetero.plugins.fpga_hls import csim
from hetero.plugins.fpga_hls.csim import compile_kernel, find_gxx
from hetero.plugins.fpga_hls.emit import HlsKernel, emit_hls

pytestmark = pytest.mark.skipif(find_gxx() is None, reason=csim.INSTALL_HINT)
RNG = np.random.default_rng(15)
CONSTANTS: dict[str, dict[str, np.ndarray]] = {}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("csim")


def random(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def both(func: PrimFunc, inputs: dict[str, np.ndarray], cache: Path) -> tuple[dict, dict]:
    """``func`` run by C simulation and by the interpreter, on ``inputs`` (and the lowered
    node's constants) and zeroed outputs."""
    given = {**CONSTANTS.get(func.name, {}), **inputs}
    arrays = {b.name: given.get(b.name, np.zeros(b.shape, b.dtype)) for b in func.params}
    kernel = compile_kernel(emit_hls(func), cache=cache)
    return kernel.run(arrays), run_func(func, arrays)


def lowered(build) -> tuple[PrimFunc, str]:  # noqa: ANN001 - build(g) adds node "n"
    """The lowering of node ``n`` that ``build`` adds, and its output's name; its constants
    are kept for :func:`both`."""
    g = GraphBuilder("g")
    build(g)
    node = g.build().node("n")
    func = lower_node(node)
    CONSTANTS[func.name] = {v.name: v.data for v in node.inputs if v is not None and v.data is not None}
    return func, node.outputs[0].name


def test_relu_is_exact(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.Relu(g.input("x", (3, 7)), name="n")))
    x = random((3, 7))
    x[0, :3] = [np.nan, -0.0, np.inf]
    got, ref = both(func, {"x": x}, cache)
    np.testing.assert_array_equal(got[out], ref[out])


def test_add_with_broadcast_is_exact(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.Add(g.input("x", (2, 3, 4)), g.input("y", (3, 1)), name="n")))
    got, ref = both(func, {"x": random((2, 3, 4)), "y": random((3, 1))}, cache)
    np.testing.assert_array_equal(got[out], ref[out])


def test_sigmoid_within_four_ulps(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.Sigmoid(g.input("x", (64,)), name="n")))
    got, ref = both(func, {"x": 8 * random((64,))}, cache)
    np.testing.assert_array_max_ulp(got[out], ref[out], maxulp=4)


def test_softmax_of_several_stages_within_four_ulps(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.Softmax(g.input("x", (3, 10)), axis=1, name="n")))
    assert emit_hls(func).source.count("// stage ") == 4
    got, ref = both(func, {"x": 4 * random((3, 10))}, cache)
    np.testing.assert_array_max_ulp(got[out], ref[out], maxulp=4)


def test_matmul_is_exact(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.MatMul(g.input("a", (5, 16)), g.input("b", (16, 7)), name="n")))
    got, ref = both(func, {"a": random((5, 16)), "b": random((16, 7))}, cache)
    np.testing.assert_array_equal(got[out], ref[out])


def test_gemm_is_exact(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.Gemm(g.input("a", (6, 4)), g.input("b", (5, 4)), g.input("c", (5,)),
                                                  alpha=0.5, beta=2.0, transB=1, name="n")))
    got, ref = both(func, {"a": random((6, 4)), "b": random((5, 4)), "c": random((5,))}, cache)
    np.testing.assert_array_equal(got[out], ref[out])


def test_conv3x3_with_padding_is_exact(cache: Path) -> None:
    def build(g: GraphBuilder) -> None:
        w = g.constant(random((4, 3, 3, 3)), "w")
        g.output(g.Conv(g.input("x", (1, 3, 6, 6)), w, pads=[1, 1, 1, 1], name="n"))

    func, out = lowered(build)
    got, ref = both(func, {"x": random((1, 3, 6, 6))}, cache)
    np.testing.assert_array_equal(got[out], ref[out])


def test_maxpool_is_exact(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.MaxPool(g.input("x", (1, 2, 7, 7)), kernel_shape=[3, 3],
                                                     strides=[2, 2], pads=[1, 1, 1, 1], name="n")))
    x = random((1, 2, 7, 7))
    x[0, 0, 3, 3] = np.nan
    got, ref = both(func, {"x": x}, cache)
    np.testing.assert_array_equal(got[out], ref[out])


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # numpy's, out of range
def test_cast_to_int8_is_exact_in_and_out_of_range(cache: Path) -> None:
    func, out = lowered(lambda g: g.output(g.Cast(g.input("x", (12,)), to="int8", name="n")))
    x = np.array([0.5, -0.5, 1.9, -1.9, 127.7, -128.9, 300.0, -300.0, 1e10, np.nan, np.inf, -np.inf],
                 np.float32)
    got, ref = both(func, {"x": x}, cache)
    np.testing.assert_array_equal(got[out], ref[out])
    assert got[out][:6].tolist() == [0, 0, 1, -1, 127, -128]


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_div_and_mod_of_negative_numbers_are_exact(cache: Path, op: str) -> None:
    attrs = {"fmod": 0} if op == "Mod" else {}
    func, out = lowered(lambda g: g.output(getattr(g, op)(g.input("x", (8,), "int32"), g.input("y", (8,), "int32"),
                                                          name="n", **attrs)))
    x = np.array([7, -7, 7, -7, -2**31, -2**31, 0, 5], np.int32)
    y = np.array([2, 2, -2, -2, -1, 3, -3, 0], np.int32)
    got, ref = both(func, {"x": x, "y": y}, cache)
    np.testing.assert_array_equal(got[out], ref[out])
    assert got[out].dtype == np.int32


def test_int8_arithmetic_wraps_as_the_interpreter_does(cache: Path) -> None:
    A, B = Buffer("A", (6,), "int8"), Buffer("B", (6,), "int8")
    i = Var("i")
    value = A[i] * A[i] + cast(cast(A[i], "float32") * 2.5, "int8")
    func = PrimFunc("wrap", (A, B), For(i, 6, Store(B, (i,), value)))
    got, ref = both(func, {"A": np.array([127, -128, 100, -100, 3, -3], np.int8)}, cache)
    np.testing.assert_array_equal(got["B"], ref["B"])


def test_a_compile_error_names_the_kernel_and_the_first_gxx_error(cache: Path) -> None:
    good = emit_hls(lowered(lambda g: g.output(g.Relu(g.input("x", (4,)), name="n")))[0])
    broken = HlsKernel(good.top, good.source.replace("{\n", "{\n  undeclared_thing = 1;\n", 1), good.header,
                       good.params)
    with pytest.raises(CodegenError, match=rf"kernel {good.top}: g\+\+ failed: .*error: .*undeclared_thing"):
        compile_kernel(broken, cache=cache)


def test_no_gxx_says_to_install_it(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csim, "find_gxx", lambda: None)
    kernel = emit_hls(lowered(lambda g: g.output(g.Relu(g.input("x", (4,)), name="n")))[0])
    with pytest.raises(CodegenError, match="install it"):
        compile_kernel(kernel, cache=cache)


def test_a_kernel_is_compiled_once_and_then_loaded_from_the_cache(cache: Path) -> None:
    kernel = emit_hls(lowered(lambda g: g.output(g.Relu(g.input("x", (9,)), name="n")))[0])
    first = compile_kernel(kernel, cache=cache)
    stamp = first.library.stat().st_mtime_ns
    again = compile_kernel(kernel, cache=cache)
    assert again.library == first.library and again.library.stat().st_mtime_ns == stamp
    assert not cache.stat().st_mode & 0o022  # private: what it holds is loaded as code


def test_every_expression_class_matches_the_interpreter(cache: Path) -> None:
    """Integer wrap of narrow unsigned types, shifts, bit operations, integer powers (wrapping),
    min/max, floored division on int64 loads, bitcasts, bools, logical
    operators, float16 computed in float, and a float to uint32 conversion: one output each."""
    U, I, L = Buffer("U", (5,), "uint16"), Buffer("I", (5,), "int32"), Buffer("L", (5,), "int64")
    F, H = Buffer("F", (5,), "float32"), Buffer("H", (5,), "float16")
    outs = [Buffer(f"O{k}", (5,), dt) for k, dt in enumerate(
        ["uint16", "int32", "int32", "int64", "uint32", "bool", "float16", "uint32", "int32"])]
    i = Var("i")
    u, n, w, f, h = U[i], I[i], L[i], F[i], H[i]
    values = [
        u * u + binary("shl", u, 3),
        binary("shr", n, 2) + binary("bit_xor", n, 0x55) - binary("bit_and", n, 0xF0) + binary("bit_or", n, 1),
        binary("pow", n, cast(i, "int32")) + maximum(n, 3) - minimum(n, -3),
        w // 3 + w % -4 - w // (w + 7),
        bitcast(f, "uint32"),
        Logical("or", Not(lt(f, 0.0)), ne(n, 5)),
        h * h + call("exp", h),
        cast(f * 1e9, "uint32"),
        cast(select(lt(f, 0.0), const(1, "int8"), const(-2, "int8")), "int32"),
    ]
    body = For(i, 5, seq(*(Store(o, (i,), v) for o, v in zip(outs, values))))
    func = PrimFunc("zoo", (U, I, L, F, H, *outs), body)
    inputs = {"U": np.array([65535, 300, 7, 0, 40000], np.uint16),
              "I": np.array([-7, 5, 2**31 - 1, -2**31, 3], np.int32),
              "L": np.array([-10, 11, -2**62, 2**62, -7], np.int64),
              "F": np.array([-1.5, 0.25, 3.0, -0.0, 4.1], np.float32),
              "H": np.array([1.5, -2.25, 3.0e2, 0.001, 7.0], np.float16)}
    got, ref = both(func, inputs, cache)
    for o in outs:
        np.testing.assert_array_equal(got[o.name], ref[o.name], err_msg=o.name)

