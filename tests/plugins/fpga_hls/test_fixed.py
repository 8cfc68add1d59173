"""Fixed point in the fpga_hls backend: formats and their numpy model, the option, the emitted
``ap_fixed`` C++, its C simulation against the numpy model and the float reference, ``auto``
formats from calibration ranges, and a small conv net's cosine similarity to float.

Bounds (``ap_fixed<16,6>``: 10 fraction bits, half a step ``d = 2**-11``): a kernel
computes the float program with every operation's result rounded to the compute format,
so with no saturation a sum of products ``y = sum_k x_k w_k`` comes out as
``sum_k q(q(x_k) q(w_k))`` (sums of values on the grid are exact), which the numpy model
reproduces bit for bit. Against float, each term errs by at most
``|q(x)| |q(w) - w| + |w| |q(x) - x| + |q(q(x) q(w)) - q(x) q(w)| <= d (|q(x)| + |w| + 1)``,
so ``|y_fixed - y| <= d * sum_k (|q(x_k)| + |w_k| + 1)`` element by element (Relu is
1-Lipschitz, so the bound holds after it), plus the float reference's own rounding
(under 1e-5 here). The data keeps every partial sum far inside [-32, 32): no saturation.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import warnings

import numpy as np
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.lower import lower_group, lower_node
from hetero.core.lower.steps import VIEW_OPS, kernel_steps
from hetero.core.passes.fuse import fuse_epilogues
from hetero.core.plugin import get_backend
from hetero.core.plugin.target import bind
from hetero.errors import CodegenError, OptionError
from hetero.plugins.fpga_hls import fixed
from hetero.plugins.fpga_hls.backend import build
from hetero.plugins.fpga_hls.csim import compile_kernel, find_gxx
from hetero.plugins.fpga_hls.device import PRESETS
from hetero.plugins.fpga_hls.emit import emit_hls
from hetero.plugins.fpga_hls.fixed import (
    FixedFormat, calibration_values, cosine_similarity, integer_bits, kernel_formats, parse_option, quantize,
)

F16_6 = FixedFormat(16, 6)
HALF_STEP = F16_6.step / 2
needs_headers = pytest.mark.skipif(find_gxx() is None or not fixed.have_ap_types(),
                                   reason=f"needs g++ and the ap_types headers: {fixed.INSTALL_HINT}")
RNG = np.random.default_rng(15)


def _kernel_func(graph: Graph):  # noqa: ANN202 - the first step's lowering and the step
    step = kernel_steps(fuse_epilogues(graph), VIEW_OPS)[0]
    members = list(step.members)
    return (lower_group(members, step.node.name) if len(members) > 1 else lower_node(step.node)), step


def _run_fixed(func, arrays: dict[str, np.ndarray], fmt: str = "16,6", scheduled: bool = True) -> dict:  # noqa: ANN001
    option = parse_option(fmt)
    kernel = (build(func, PRESETS["u50"], option).kernel if scheduled
              else emit_hls(func, formats=kernel_formats(option, func)))
    given = {b.name: arrays.get(b.name, np.zeros(b.shape, b.dtype)) for b in func.params}
    return compile_kernel(kernel).run(given)


# -- formats and their model -------------------------------------------------------------


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    fmt = FixedFormat(8, 4)  # step 1/16, range [-8, 8 - 1/16]
    x = np.array([1 / 32, 3 / 32, -1 / 32, 0.04, 7.99, 100.0, -8.0, -9.0])
    np.testing.assert_array_equal(quantize(x, fmt), [0.0, 2 / 16, -0.0, 1 / 16, 8 - 1 / 16, 8 - 1 / 16, -8.0, -8.0])
    assert (fmt.min, fmt.max, fmt.fraction, str(fmt)) == (-8.0, 8 - 1 / 16, 4, "ap_fixed<8,4>")


def test_integer_bits_are_the_fewest_that_hold_the_magnitude() -> None:
    for magnitude in (0.01, 0.5, 0.99, 1.0, 3.5, 4.0, 31.9, 200.0):
        i = integer_bits(magnitude, 16)
        assert FixedFormat(16, i).max >= magnitude - FixedFormat(16, i).step or i == 1
        assert i == 1 or 2.0 ** (i - 2) <= magnitude  # one bit fewer would not hold it
    assert integer_bits(0.0, 16) == 1 and integer_bits(1e9, 16) == 16


def test_the_option_takes_float32_w_i_and_auto_and_refuses_anything_else() -> None:
    backend = get_backend("fpga_hls")
    assert bind(backend).settings.fixed.is_float
    assert bind(backend, {"fpga_fixed": "float32"}).settings.fixed.is_float
    assert str(bind(backend, {"fpga_fixed": "16, 6"}).settings.fixed) == "16,6"
    assert bind(backend, {"fpga_fixed": "auto:12"}).settings.fixed.is_auto
    for bad in ("16", "33,4", "16,0", "16,17", "auto:1", "auto:x", "fixed"):
        with pytest.raises(OptionError, match="fpga_fixed .*'W,I'"):
            bind(backend, {"fpga_fixed": bad})
    with pytest.raises(OptionError, match="takes str"):
        bind(backend, {"fpga_fixed": 16})


def test_missing_headers_are_a_clear_error_and_a_fixed_region_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hls4ml" else find_spec(name, *a))
    fixed.ap_types_dir.cache_clear()
    try:
        with pytest.raises(CodegenError, match=re.escape("pip install 'hetero[fpga]'")):
            fixed.ap_types_dir()
        assert not fixed.have_ap_types()
        graph = _conv_relu()[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exe = hetero.compile(graph, targets=["fpga_hls", "llvm_cpu"], fpga_fixed="16,6")
        assert {p.backend for p in exe.placements} == {"llvm_cpu"}
        assert "fpga_fixed=16,6" in str(exe.fallbacks[0]) and "pip install 'hetero[fpga]'" in str(exe.fallbacks[0])
    finally:
        fixed.ap_types_dir.cache_clear()


# -- the emitted C++ ---------------------------------------------------------------------


def _conv_relu(c: int = 3, o: int = 4, h: int = 6) -> tuple[Graph, np.ndarray]:
    b = GraphBuilder("g")
    w = (0.3 * RNG.standard_normal((o, c, 3, 3))).astype(np.float32)
    b.output(b.Relu(b.Conv(b.input("x", (1, c, h, h)), w, name="n", pads=[1, 1, 1, 1]), name="r"))
    return b.build(), w


def test_the_emitted_cpp_declares_ap_fixed_16_6_and_keeps_float_pointers() -> None:
    func, _ = _kernel_func(_conv_relu()[0])
    kernel = emit_hls(func, formats=kernel_formats(parse_option("16,6"), func))
    tokens = re.findall(r"ap_fixed<[^>]*>|\w+|\S", kernel.source)
    assert "ap_fixed<16,6,AP_RND_CONV,AP_SAT>" in tokens
    assert "typedef ap_fixed<16,6,AP_RND_CONV,AP_SAT> hetero_fx16_6;" in kernel.source
    assert re.search(r"^\s*hetero_fx16_6 \w+\[\d+\];", kernel.source, re.M)  # a local array in the format
    assert "#include <ap_fixed.h>" in kernel.source and "hls_stream" not in kernel.source
    prototype = kernel.source[kernel.source.index('extern "C"'):].split("{")[0]
    assert "ap_fixed" not in prototype and prototype.count("float*") == 3
    assert kernel.top.endswith("_top") and "_fx" in kernel.top and "ap_fixed" not in kernel.header


# -- C simulation against the numpy model and the float reference ------------------------


def _patches(x: np.ndarray) -> np.ndarray:
    """(C*9, H*W) columns of a 3x3, pad-1 convolution of ``x`` (1, C, H, W)."""
    _, c, h, w = x.shape
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    return np.stack([padded[ci, kh:kh + h, kw:kw + w].ravel()
                     for ci, kh, kw in itertools.product(range(c), range(3), range(3))])


@needs_headers
@pytest.mark.parametrize("scheduled", [False, True], ids=["unscheduled", "default-schedule"])
def test_conv_relu_in_ap_fixed_16_6_is_the_numpy_model_exactly_and_float_within_the_bound(scheduled: bool) -> None:
    graph, w = _conv_relu()
    func, step = _kernel_func(graph)
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    got = _run_fixed(func, {func.params[0].name: x, func.params[1].name: w}, scheduled=scheduled)
    got = got[func.params[2].name].reshape(4, 36)
    xq, wq = quantize(_patches(x), F16_6), quantize(w.reshape(4, 27), F16_6)
    model = np.maximum(quantize(wq[:, :, None] * xq[None, :, :], F16_6).sum(axis=1), 0.0)
    np.testing.assert_array_equal(got, model)
    want = run_reference(graph, {"x": x})["r"].reshape(4, 36)
    bound = HALF_STEP * (np.abs(wq) @ np.ones_like(xq) + np.ones_like(wq) @ np.abs(xq) + 27) + 1e-5
    assert np.all(np.abs(got - want) <= bound) and np.abs(got - want).max() > 0


@needs_headers
@pytest.mark.parametrize("scheduled", [False, True], ids=["unscheduled", "default-schedule"])
def test_matmul_in_ap_fixed_16_6_is_the_numpy_model_exactly_and_float_within_the_bound(scheduled: bool) -> None:
    b = GraphBuilder("g")
    w = (0.5 * RNG.standard_normal((24, 16))).astype(np.float32)
    b.output(b.MatMul(b.input("a", (8, 24)), w, name="n"))
    graph = b.build()
    func, _ = _kernel_func(graph)
    a = RNG.standard_normal((8, 24)).astype(np.float32)
    got = _run_fixed(func, {func.params[0].name: a, func.params[1].name: w}, scheduled=scheduled)
    got = got[func.params[2].name]
    aq, wq = quantize(a, F16_6), quantize(w, F16_6)
    model = quantize(aq[:, :, None] * wq[None, :, :], F16_6).sum(axis=1)
    np.testing.assert_array_equal(got, model)
    want = run_reference(graph, {"a": a})[graph.outputs[0].name]
    bound = HALF_STEP * (np.abs(aq) @ np.ones_like(wq) + np.ones_like(aq) @ np.abs(w) + 24) + 1e-5
    assert np.all(np.abs(got - want) <= bound)


@needs_headers
def test_ap_fixed_conversion_is_the_numpy_model_on_ties_and_out_of_range_values() -> None:
    b = GraphBuilder("g")
    b.output(b.Relu(b.input("x", (64,)), name="n"))
    func, _ = _kernel_func(b.build())
    ties = (np.arange(-20, 20) + 0.5) * F16_6.step  # halfway between two values of the format
    x = np.concatenate([ties, [40.0, 1e6, 31.999, -1e6, 1e-9], RNG.standard_normal(19)]).astype(np.float32)
    got = _run_fixed(func, {func.params[0].name: x}, scheduled=False)[func.params[1].name]
    np.testing.assert_array_equal(got, np.maximum(quantize(x, F16_6), 0.0))


_OPS = {
    # name: (build, Lipschitz constant of the op on the data, stores rounded inside the kernel);
    # the data's scale is 3 (Sigmoid's exp(-x) reaches e**10, far outside ap_fixed<16,6>)
    "Sigmoid": (lambda b, x: b.Sigmoid(x, name="n"), 0.25, 0),
    "Tanh": (lambda b, x: b.Tanh(x, name="n"), 1.0, 0),
    "Softmax": (lambda b, x: b.Softmax(x, name="n", axis=1), 0.5, 3),  # x - max, exp, the sum
    "MaxPool": (lambda b, x: b.MaxPool(x, name="n", kernel_shape=[3, 3], strides=[2, 2]), 1.0, 0),
    "AveragePool": (lambda b, x: b.AveragePool(x, name="n", kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 1.0, 0),
    # Its running sum of 36 values must stay inside [-32, 32): data of scale 1 here.
    "GlobalAveragePool": (lambda b, x: b.GlobalAveragePool(b.Mul(x, np.float32(1 / 3), name="s"), name="n"),
                          1.0, 1),
    "Clip": (lambda b, x: b.Clip(x, name="n", min=-1.0, max=1.5), 1.0, 0),
    "Div": (lambda b, x: b.Div(x, b.Add(b.Abs(x, name="a"), np.float32(1), name="d"), name="n"), 1.25, 0),
    "Cast": (lambda b, x: b.Cast(b.Cast(x, name="n", to="int32"), name="m", to="float32"), 0.0, 0),
}


@needs_headers
@pytest.mark.parametrize("op", sorted(_OPS))
def test_each_expression_class_in_ap_fixed_16_6_is_within_its_quantisation_error(op: str) -> None:
    """Error bound: the input rounded (half a step, d) moves an op of Lipschitz constant L
    by L d; the result is rounded once more (d), and each intermediate store inside the
    kernel adds at most d (Softmax: x - max, exp(x - max) and their sum, divided by a sum
    >= 1); intrinsics and divisions run in float (1e-6 here). Cast: the data is on a
    2**-8 grid, so quantising it is exact and truncation to int32 agrees exactly."""
    build, lipschitz, stores = _OPS[op]
    b = GraphBuilder("g")
    b.output(build(b, b.input("x", (2, 3, 6, 6))))
    graph = b.build()
    x = np.round(3 * RNG.standard_normal((2, 3, 6, 6)) * 256).astype(np.float32) / 256
    exe = hetero.compile(graph, targets=["fpga_hls", "llvm_cpu"], fpga_fixed="16,6")
    assert [p.backend for p in exe.placements] == ["fpga_hls"]
    out = graph.outputs[0].name
    got, want = exe.run({"x": x})[out], run_reference(graph, {"x": x})[out]
    bound = (lipschitz + 1 + stores) * HALF_STEP + 1e-6 if op != "Cast" else 0.0
    assert np.abs(got.astype(np.float64) - want).max() <= bound


# -- auto formats and a model-sized check --------------------------------------------------


def _small_conv_net() -> Graph:
    """Conv-Relu, Conv-Relu, MaxPool, Conv, GlobalAveragePool, Flatten, Gemm."""
    rng = np.random.default_rng(7)
    b = GraphBuilder("net")

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    y = b.Relu(b.Conv(b.input("x", (1, 3, 12, 12)), weight(8, 3, 3, 3), rng.standard_normal(8).astype(np.float32)
                      * 0.1, name="c1", pads=[1, 1, 1, 1]), name="r1")
    y = b.Relu(b.Conv(y, weight(8, 8, 3, 3), name="c2", pads=[1, 1, 1, 1]), name="r2")
    y = b.MaxPool(y, name="p", kernel_shape=[2, 2], strides=[2, 2])
    y = b.Conv(y, weight(16, 8, 3, 3), name="c3", pads=[1, 1, 1, 1])
    y = b.Flatten(b.GlobalAveragePool(y, name="gap"), name="flat")
    b.output(b.Gemm(y, weight(10, 16), name="fc", transB=1))
    return b.build()


@needs_headers
def test_auto_16_picks_integer_bits_that_cover_the_observed_range() -> None:
    graph = _small_conv_net()
    part = bind(get_backend("fpga_hls"), {"fpga_fixed": "auto:16"}).compile(graph)
    values = calibration_values(graph)
    checked = 0
    for step in part.steps:
        if step.kernel is None or step.kernel.hls.formats is None:
            continue
        formats = step.kernel.hls.formats
        for b, value in zip(step.kernel.hls.params, (*step.inputs, *step.outputs)):
            fmt, magnitude = formats.of(b), float(np.abs(values[value]).max())
            assert fmt.width == 16 and fmt.integer == integer_bits(magnitude, 16)
            assert -fmt.min > magnitude  # 2**(I-1) holds it; the largest value is one step below
            assert fmt.integer == 1 or 2.0 ** (fmt.integer - 2) <= magnitude  # and one bit fewer would not
            assert formats.compute.integer > fmt.integer and formats.compute.fraction >= fmt.fraction
            checked += 1
    assert checked >= 10
    # The pool's running sum of 6 x 6 values needs more integer bits than their mean:
    # its accumulator's format holds the largest channel sum numpy finds.
    gap = next(s for s in part.steps if s.name.startswith("gap"))
    sums = np.abs(values[gap.inputs[0]].sum(axis=(2, 3))).max()
    params = {b.name for b in gap.kernel.hls.params}
    accumulator = max(f for name, f in gap.kernel.hls.formats.buffers.items() if name not in params)
    means = max(gap.kernel.hls.formats.of(b).integer for b in gap.kernel.hls.params)
    assert -accumulator.min > sums and accumulator.integer > means
    report = part.report()
    assert "ap_fixed<16," in report and f"* {gap.name}: compute" in report


@needs_headers
@pytest.mark.parametrize("option", ["16,6", "auto:16"])
def test_a_small_conv_net_in_fixed_point_has_cosine_similarity_over_0_999_to_float(option: str) -> None:
    graph = _small_conv_net()
    exe = hetero.compile(graph, targets=["fpga_hls", "llvm_cpu"], fpga_fixed=option)
    assert [p.backend for p in exe.placements] == ["fpga_hls"] and not exe.fallbacks
    x = {"x": np.random.default_rng(99).standard_normal((1, 3, 12, 12)).astype(np.float32)}  # not the calibration one
    out = graph.outputs[0].name
    got, want = exe.run(x)[out], run_reference(graph, x)[out]
    similarity = cosine_similarity(got, want)
    print(f"fpga_fixed={option}: cosine similarity {similarity:.6f}, max |error| {np.abs(got - want).max():.3g}")
    assert similarity >= 0.999
    part = exe.placements[0].part
    assert "cosine" in part.report() and f"fpga_fixed={option}" in part.report()
    loaded = get_backend("fpga_hls").load_artifact(part.artifact)
    np.testing.assert_array_equal(loaded.run(x)[out], part.run(x)[out])
    assert loaded.report() == part.report()
