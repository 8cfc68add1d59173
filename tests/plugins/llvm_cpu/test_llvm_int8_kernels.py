"""llvm_cpu's integer kernels: QConv and QMatMul bit for bit against the ops' reference,
and a quantised model run on llvm_cpu alone (``int8=True``) in integer kernels.

Integer sums are exact in any order, so every comparison here is equality: a kernel
that reorders, tiles or vectorizes its sums must still give the reference's int8
results. Zero points sit at the ends of int8 (-128 and 127) as well as inside, since
the shifted operand ``x - x_zero`` then reaches ±255, the case that does not fit int8.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings, strategies as st

import hetero
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.ir import GraphBuilder, Graph
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.errors import OptionError
from hetero.core.ir.tir import Const, Select, walk
from hetero.core.ir.tir.stmt import Block, Store
from hetero.core.ir.tir.visit import exprs_of
from hetero.core.lower import lower_node
from hetero.plugins.llvm_cpu import schedules_int8
from hetero.plugins.llvm_cpu.dot4 import has_vnni
from hetero.plugins.llvm_cpu.kernel import compile_kernel
from hetero.plugins.llvm_cpu.schedules import default_schedule
from hetero.plugins.llvm_cpu.schedules_int8 import shift_windows
from hetero.plugins.llvm_cpu.target import emit_assembly, host_features, host_triple
from models import light_model_path

RNG = np.random.default_rng(16)

#: (input shape, weight shape, attributes) of the convolution shapes the kernels meet.
CONVS = {
    "1x1": ((1, 32, 7, 9), (48, 32, 1, 1), {}),
    "3x3_padded": ((1, 16, 10, 11), (32, 16, 3, 3), {"pads": (1, 1, 1, 1)}),
    "strided": ((1, 16, 13, 12), (24, 16, 3, 3), {"pads": (1, 0, 1, 0), "strides": (2, 2)}),
    "depthwise": ((1, 24, 9, 9), (24, 1, 3, 3), {"pads": (1, 1, 1, 1), "group": 24}),
    "grouped": ((1, 32, 8, 8), (32, 8, 3, 3), {"pads": (1, 1, 1, 1), "group": 4}),
    "stem": ((1, 3, 23, 23), (16, 3, 7, 7), {"pads": (3, 3, 3, 3), "strides": (2, 2)}),
}


def _int8(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype(np.int8)


def _factors(channels: int) -> dict[str, tuple[int, ...]]:
    # Per-channel multipliers and shifts that keep results spread over int8.
    return {"multiplier": tuple(int(m) for m in RNG.integers(2**30, 2**31, channels)),
            "shift": tuple(int(s) for s in RNG.integers(38, 42, channels))}


def _qconv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict, x_zero: int,
           y_zero: int) -> Graph:
    b = GraphBuilder("qconv")
    x = b.input("x", x_shape, np.int8)
    w = b.constant(_int8(w_shape), "w")
    bias = b.constant(RNG.integers(-5000, 5000, w_shape[0]).astype(np.int32), "b")
    b.output(b.op("QConv", x, w, bias, x_zero=x_zero, y_zero=y_zero, **attrs, **_factors(w_shape[0])))
    return b.build()


def _qmatmul(rows: int, k: int, n: int, a_zero: int) -> Graph:
    b = GraphBuilder("qmatmul")
    a = b.input("a", (rows, k), np.int8)
    w = b.constant(_int8((k, n)), "w")
    bias = b.constant(RNG.integers(-5000, 5000, n).astype(np.int32), "b")
    b.output(b.op("QMatMul", a, w, bias, a_zero=a_zero, **_factors(n)))
    return b.build()


def _assert_exact(graph: Graph, feeds: dict[str, np.ndarray], threads: int = 1) -> None:
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads)
    out = graph.outputs[0].name
    got, want = exe.run(feeds)[out], hetero.run_reference(graph, feeds)[out]
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("x_zero", [-128, 0, 127])
@pytest.mark.parametrize("case", list(CONVS))
def test_qconv_is_bit_exact_with_its_reference(case: str, x_zero: int) -> None:
    x_shape, w_shape, attrs = CONVS[case]
    graph = _qconv(x_shape, w_shape, attrs, x_zero, y_zero=-x_zero // 2)
    # Inputs at the far end from the zero point make |x - x_zero| reach 255.
    x = _int8(x_shape)
    x.flat[::7] = 127 if x_zero < 0 else -128
    _assert_exact(graph, {"x": x})


def test_qconv_is_bit_exact_on_two_threads() -> None:
    x_shape, w_shape, attrs = CONVS["3x3_padded"]
    _assert_exact(_qconv(x_shape, w_shape, attrs, x_zero=-128, y_zero=5), {"x": _int8(x_shape)}, threads=2)


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 20), k=st.integers(1, 96), n=st.integers(1, 70),
       a_zero=st.sampled_from([-128, -1, 0, 37, 127]))
def test_qmatmul_is_bit_exact_with_its_reference(rows: int, k: int, n: int, a_zero: int) -> None:
    a = _int8((rows, k))
    a.flat[::3] = 127 if a_zero < 0 else -128
    _assert_exact(_qmatmul(rows, k, n, a_zero), {"a": a})


def _conv_block(func: object, name: str) -> Block:
    return next(s for s in walk(func.body) if isinstance(s, Block) and s.name == name)


def test_a_padded_qconv_reads_its_shifted_input_from_a_stage_of_its_own() -> None:
    x_shape, w_shape, attrs = CONVS["3x3_padded"]
    func = lower_node(_qconv(x_shape, w_shape, attrs, x_zero=-128, y_zero=0).nodes[0])
    shifted = shift_windows(func, dot4=False)
    block = _conv_block(shifted, "qconv")
    # The window's bounds test moved out of the sum into the shifting stage.
    assert any(isinstance(e, Select) for s in walk(_conv_block(func, "qconv")) for e in _exprs(s))
    assert not any(isinstance(e, Select) for s in walk(block) for e in _exprs(s))
    # x + 128 as bytes, padded by one on each side with what x - x_zero = 0 reads as.
    stage = _conv_block(shifted, "x_shifted_qconv")
    assert stage.writes.shape == (1, 16, 12, 13) and stage.writes.dtype == np.uint8
    assert any(isinstance(e, Select) and isinstance(e.b, Const) and e.b.value == 0
               for s in walk(stage) for e in _exprs(s))
    # The weights' sums per output channel: a stage that reads only the weight.
    sums = _conv_block(shifted, "w_sum_qconv")
    assert sums.writes.shape == (32,) and sums.writes.dtype == np.int32
    sch = default_schedule(func, 1)
    assert sch.trace.apply(shift_windows(func)) == sch.func


@pytest.fixture
def byte_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default schedules as on a host without AVX-512 VNNI: no dot4_u8s8."""
    monkeypatch.setattr(schedules_int8, "HOST_DOT4", False)


@pytest.mark.usefixtures("byte_kernels")
@pytest.mark.parametrize(("cpu", "instruction"), [
    ("cascadelake", "vpdpwssd"),      # AVX-512 VNNI: multiply, pair-add and accumulate
    ("skylake-avx512", "vpmaddwd"),   # AVX-512BW without VNNI
    ("haswell", "vpmaddwd"),          # AVX2
])
def test_the_products_are_byte_multiply_adds_on_every_x86(cpu: str, instruction: str) -> None:
    x_shape, w_shape, attrs = CONVS["3x3_padded"]
    func = default_schedule(lower_node(_qconv(x_shape, w_shape, attrs, x_zero=3, y_zero=0).nodes[0]), 1).func
    assembly = emit_assembly(func, "x86_64-unknown-linux-gnu", cpu)
    assert instruction in assembly
    if cpu != "cascadelake":
        assert "vpdpwssd" not in assembly


def test_an_unpadded_qconv_reads_an_unpadded_shifted_stage() -> None:
    x_shape, w_shape, attrs = CONVS["1x1"]
    stage = _conv_block(shift_windows(lower_node(_qconv(x_shape, w_shape, attrs, 5, 0).nodes[0]), dot4=False),
                        "x_shifted_qconv")
    assert stage.writes.shape == x_shape


def test_a_float_conv_is_left_as_it_is() -> None:
    b = GraphBuilder("conv")
    b.output(b.Conv(b.input("x", (1, 8, 6, 6)), RNG.standard_normal((8, 8, 3, 3)).astype(np.float32),
                    pads=(1, 1, 1, 1)))
    func = lower_node(b.build().nodes[0])
    assert shift_windows(func) == func


def test_a_sum_of_products_to_one_scalar_is_left_as_it_is() -> None:
    b = GraphBuilder("sumsq")
    b.output(b.ReduceSumSquare(b.input("x", (5,), np.int32), axes=(0,), keepdims=0))
    func = lower_node(b.build().nodes[0])
    assert shift_windows(func) == func


def _exprs(stmt: object) -> list[object]:
    """Every expression a store computes (its indices and its value)."""
    if not isinstance(stmt, Store):
        return []
    return [e for root in (*stmt.indices, stmt.value) for e in exprs_of(root)]


def _quantised(name: str) -> tuple[Graph, list[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    graph = hetero.optimize(hetero.load_onnx(randomize_weights(onnx.load(light_model_path(name)), seed=0)))
    rng = np.random.default_rng(3)
    shape = graph.inputs[0].shape
    samples = [{graph.inputs[0].name: rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
    return graph, samples, {graph.inputs[0].name: rng.standard_normal(shape).astype(np.float32)}


def _kernel_ops(exe: hetero.Executable) -> set[str]:
    """The ops of every kernel of ``exe``'s parts (a fused kernel counts each of its ops)."""
    labels = [step.name.rpartition("(")[2].rstrip(")") for p in exe.placements for step in p.part.steps]
    return {op for label in labels for op in label.split("+")}


def test_a_quantised_model_runs_in_integer_kernels_on_llvm_cpu_alone() -> None:
    graph, samples, feeds = _quantised("squeezenet")
    exe = hetero.compile(graph, targets=["llvm_cpu"], quantize=samples, int8=True, passes=[])
    assert [p.backend for p in exe.placements] == ["llvm_cpu"]
    ops = _kernel_ops(exe)
    # Every convolution is an integer one: no float Conv and no DequantizeLinear of a weight.
    assert {"QConv", "Requantize"} <= ops & INTEGER_OPS
    assert "Conv" not in ops
    # The integer reference: the graph the compile partitioned, quantised and lowered.
    session = hetero.core.compiler.Session(["llvm_cpu"], quantize=samples, options={"int8": True})
    integer = session.prepare(graph)
    out = graph.outputs[0].name
    np.testing.assert_array_equal(exe.run(feeds)[out], hetero.run_reference(integer, feeds)[out])


def test_int8_takes_only_a_bool() -> None:
    x_shape, w_shape, attrs = CONVS["1x1"]
    with pytest.raises(OptionError, match="int8"):
        hetero.compile(_qconv(x_shape, w_shape, attrs, 0, 0), targets=["llvm_cpu"], int8="yes")


def test_without_int8_a_quantised_model_on_llvm_cpu_keeps_float_qdq() -> None:
    graph, samples, _ = _quantised("squeezenet")
    exe = hetero.compile(graph, targets=["llvm_cpu"], quantize=samples, passes=[])
    assert not _kernel_ops(exe) & INTEGER_OPS


def test_the_weight_sums_are_computed_once_when_compiling() -> None:
    """The byte form's per-channel weight sums read only the constant weight: the packer
    runs their stage (a reduction with an accumulator of its own) at compile time, so a
    call computes only the shifted input and the convolution, and stays bit-exact."""
    graph = _qconv((1, 16, 9, 9), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}, x_zero=-3, y_zero=2)
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)
    (step,) = [s for s in exe.placements[0].part.steps if s.kernel is not None]
    # The raw weight is read by nothing that runs per call (its packed panels are).
    assert "w" not in step.inputs, step.inputs
    assert any("/" in name and "sum" in name for name in step.inputs), step.inputs
    _assert_exact(graph, {"x": _int8((1, 16, 9, 9))})


# -- four input channels a step: dot4_u8s8 (vpdpbusd with AVX-512 VNNI) --------------------

VNNI_HOST = host_triple().startswith("x86_64") and has_vnni(host_features())


@pytest.fixture
def dot4_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default schedules as on a host with AVX-512 VNNI, whatever this one has (the
    renderer makes dot4_u8s8 plain arithmetic where it has not, so results are the same)."""
    monkeypatch.setattr(schedules_int8, "HOST_DOT4", True)


def _dot4_calls(func: object) -> int:
    return sum(1 for s in walk(func.body) for e in _exprs(s) if getattr(e, "func", None) == "dot4_u8s8")


@pytest.mark.usefixtures("dot4_kernels")
@settings(max_examples=25, deadline=None)
@given(channels=st.integers(1, 21), out=st.integers(1, 40), kernel=st.sampled_from([1, 3]),
       stride=st.sampled_from([1, 2]), pad=st.sampled_from([0, 1]), size=st.integers(3, 9),
       x_zero=st.sampled_from([-128, -1, 0, 37, 127]))
def test_dot4_qconv_is_bit_exact_with_its_reference(channels: int, out: int, kernel: int, stride: int,
                                                    pad: int, size: int, x_zero: int) -> None:
    """Channel counts that are not a multiple of 4 (the last word's padding weighs 0) or
    of 16 (the lane loop's remainder), strides, padding, zero points at the int8 ends."""
    x_shape = (1, channels, size, size + 1)
    attrs = {"pads": (pad,) * 4, "strides": (stride, stride)}
    graph = _qconv(x_shape, (out, channels, kernel, kernel), attrs, x_zero, y_zero=-x_zero // 2)
    assert _dot4_calls(shift_windows(lower_node(graph.nodes[0]))) == 1
    x = _int8(x_shape)
    x.flat[::5] = 127 if x_zero < 0 else -128
    _assert_exact(graph, {"x": x})


@pytest.mark.usefixtures("dot4_kernels")
@pytest.mark.parametrize("case", list(CONVS))
def test_dot4_qconv_cases_are_bit_exact_on_two_threads(case: str) -> None:
    x_shape, w_shape, attrs = CONVS[case]
    x = _int8(x_shape)
    x.flat[::7] = -128
    _assert_exact(_qconv(x_shape, w_shape, attrs, x_zero=127, y_zero=3), {"x": x}, threads=2)


@pytest.mark.usefixtures("dot4_kernels")
@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 20), k=st.integers(1, 70), n=st.integers(1, 50),
       a_zero=st.sampled_from([-128, -1, 0, 37, 127]))
def test_dot4_qmatmul_is_bit_exact_with_its_reference(rows: int, k: int, n: int, a_zero: int) -> None:
    graph = _qmatmul(rows, k, n, a_zero)
    assert _dot4_calls(shift_windows(lower_node(graph.nodes[0]))) == 1
    a = _int8((rows, k))
    a.flat[::3] = 127 if a_zero < 0 else -128
    _assert_exact(graph, {"a": a})


def test_dot4_sums_words_of_four_input_channels() -> None:
    """A 13-channel QConv sums over 4 words of input channels (the last holds one real
    channel), from a stage of packed input words and one of weight words."""
    graph = _qconv((1, 13, 8, 8), (20, 13, 3, 3), {"pads": (1, 1, 1, 1)}, x_zero=-7, y_zero=0)
    func = shift_windows(lower_node(graph.nodes[0]), dot4=True)
    block = _conv_block(func, "qconv")
    assert _dot4_calls(block) == 1
    assert {it.var.name: it.extent for it in block.iters}["qconv_rc"] == 4
    assert _conv_block(func, "x_words_qconv").writes.shape == (1, 4, 10, 10)
    assert _conv_block(func, "w_words_qconv").writes.shape == (20, 4, 3, 3)
    # The compensation of the offset input is the byte form's, over the real weights.
    assert _conv_block(func, "w_sum_qconv").writes.shape == (20,)


@pytest.mark.parametrize("case", ["depthwise", "grouped"])
def test_grouped_qconvs_keep_the_byte_kernel(case: str) -> None:
    x_shape, w_shape, attrs = CONVS[case]
    func = shift_windows(lower_node(_qconv(x_shape, w_shape, attrs, x_zero=3, y_zero=0).nodes[0]), dot4=True)
    assert _dot4_calls(func) == 0


@pytest.mark.usefixtures("dot4_kernels")
def test_the_weight_words_and_their_panels_are_packed_when_compiling() -> None:
    graph = _qconv((1, 16, 9, 9), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}, x_zero=-3, y_zero=2)
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)
    (step,) = [s for s in exe.placements[0].part.steps if s.kernel is not None]
    assert "w" not in step.inputs, step.inputs
    assert any(name.endswith("w_words_qconv_packed") for name in step.inputs), step.inputs


@pytest.mark.skipif(not VNNI_HOST, reason="the host has no AVX-512 VNNI (avx512vnni, avx512vl, avx512bw)")
@pytest.mark.parametrize("case", ["1x1", "3x3_padded", "strided", "stem"])
def test_the_products_are_vpdpbusd_on_a_vnni_host(case: str) -> None:
    x_shape, w_shape, attrs = CONVS[case]
    func = default_schedule(lower_node(_qconv(x_shape, w_shape, attrs, x_zero=3, y_zero=0).nodes[0]), 1).func
    assembly = compile_kernel(func, 1).assembly
    assert "vpdpbusd" in assembly and "vpdpwssd" not in assembly


@pytest.mark.usefixtures("byte_kernels")
def test_without_vnni_a_qconv_compiles_to_the_byte_kernel_and_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without VNNI (its features faked) gets the byte kernel, no vpdpbusd."""
    from hetero.plugins.llvm_cpu import target
    features = {**host_features(), "avx512vnni": False, "avxvnni": False}
    monkeypatch.setattr(target, "host_features", lambda: features)
    x_shape, w_shape, attrs = (1, 11, 6, 7), (19, 11, 3, 3), {"pads": (1, 1, 1, 1)}
    graph = _qconv(x_shape, w_shape, attrs, x_zero=-128, y_zero=1)
    func = default_schedule(lower_node(graph.nodes[0]), 1).func
    assert _dot4_calls(func) == 0 and "vpdpbusd" not in compile_kernel(func, 1).assembly
    _assert_exact(graph, {"x": _int8(x_shape)})
