"""DFT and STFT lowered (a direct transform against a twiddle table) against their
references: on the tensor-IR interpreter, compiled by llvm_cpu from ONNX models of
every opset that changed DFT (17: axis an attribute; 20: an input), at the lengths audio
models use, and the window ops and MelWeightMatrix imported with constant operands."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder, Node
from hetero.core.ir.tir import verify_func
from hetero.core.lower import lower_node
from hetero.core.lower import signal as signal_lowering
from hetero.core.lower.signal import split_length
from hetero.onnx_backend import HeteroBackend
from lowercheck import run_lowered
from models import tiny_model


def _graph(op: str, arrays: list[np.ndarray | None], **attrs: object) -> Graph:
    b = GraphBuilder("t")
    ins = [None if a is None else b.input(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    b.output(b.op(op, *ins, **attrs))
    return b.build()


def _node(op: str, arrays: list[np.ndarray | None], **attrs: object) -> Node:
    return _graph(op, arrays, **attrs).nodes[0]


@pytest.mark.parametrize("attrs", [
    {"axis": 1}, {"axis": 1, "onesided": 1}, {"axis": 0, "inverse": 1},
    {"axis": 1, "inverse": 1, "onesided": 1}, {"axis": 1, "inverse": 1, "onesided": 1, "dft_length": 7},
    {"axis": 0, "dft_length": 3}, {"axis": 1, "dft_length": 9, "onesided": 1},
])
@pytest.mark.parametrize("parts", [1, 2])
def test_lowered_dft_matches_reference(attrs: dict, parts: int) -> None:
    x = np.random.default_rng(parts).standard_normal((3, 6, parts)).astype(np.float32)
    node = _node("DFT", [x], **attrs)
    got = run_lowered(verify_func(lower_node(node)), node, {"x0": x})[0]
    np.testing.assert_allclose(got, node.opdef.reference([x], node.attrs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("windowed", [False, True])
def test_lowered_stft_matches_reference(windowed: bool) -> None:
    rng = np.random.default_rng(3)
    signal = rng.standard_normal((2, 21, 2)).astype(np.float32)
    window = rng.random(8).astype(np.float32) if windowed else None
    node = _node("STFT", [signal, window], frame_step=3, frame_length=8, onesided=0)
    got = run_lowered(verify_func(lower_node(node)), node, {"x0": signal, "x1": window})[0]
    np.testing.assert_allclose(got, node.opdef.reference([signal, window], node.attrs)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"axis": 1}, {"axis": 1, "inverse": 1}, {"axis": 1, "onesided": 1, "dft_length": 100},
    {"axis": 1, "dft_length": 48}, {"axis": 1, "dft_length": 30},
    {"axis": 0, "dft_length": 36},
])
def test_two_step_transforms_match_reference(attrs: dict) -> None:
    """36 = 6 * 6 samples take two steps (zero-padded to 48 or 100, cut to 30, or along the
    first axis of 36 padded from 2); the interpreter gives the reference's numbers."""
    n = attrs.get("dft_length", 36)
    assert split_length(n, n // 2 + 1 if attrs.get("onesided") else n, 2) is not None
    x = np.random.default_rng(n).standard_normal((2, 36, 3, 2)).astype(np.float32)
    node = _node("DFT", [x], **attrs)
    got = run_lowered(verify_func(lower_node(node)), node, {"x0": x})[0]
    np.testing.assert_allclose(got, node.opdef.reference([x], node.attrs)[0], rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": 1, "dft_length": 48},
                                   {"axis": 1, "inverse": 1, "onesided": 1}])
def test_tables_too_large_to_store_are_computed_where_read(attrs: dict,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Past TABLE_MAX entries the factors are computed inside the sums, on llvm_cpu too."""
    monkeypatch.setattr(signal_lowering, "TABLE_MAX", 0)
    x = np.random.default_rng(5).standard_normal((2, 36, 2)).astype(np.float32)
    node = _node("DFT", [x], **attrs)
    want = node.opdef.reference([x], node.attrs)[0]
    got = run_lowered(verify_func(lower_node(node)), node, {"x0": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    exe = hetero.compile(_graph("DFT", [x], **attrs), targets=["llvm_cpu"], strict=True)
    np.testing.assert_allclose(list(exe.run({"x0": x}).values())[0], want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("n", [997, 2048])
def test_the_last_sums_table_is_computed_when_compiling(n: int) -> None:
    """llvm_cpu computes the table the output stage reads once, as a constant of the
    compiled part (packed into the tiled kernel's panels), not on every call."""
    graph = _graph("DFT", [np.zeros((1, n, 1), np.float32)], axis=1, onesided=1)
    part = hetero.compile(graph, targets=["llvm_cpu"]).placements[0].part
    assert any("twiddle" in name for name in part.constants)


def test_short_and_prime_lengths_stay_direct() -> None:
    assert split_length(16, 9, 1) is None and split_length(97, 97, 2) is None
    assert split_length(400, 201, 1) == 20 and split_length(2048, 1025, 1) == 32


def test_real_signal_dc_and_nyquist_bins_have_exactly_zero_imaginary_parts() -> None:
    x = np.random.default_rng(0).standard_normal((4, 16, 1)).astype(np.float32)
    node = _node("DFT", [x], axis=1, onesided=1)
    got = run_lowered(verify_func(lower_node(node)), node, {"x0": x})[0]
    assert np.all(got[:, 0, 1] == 0) and np.all(got[:, 8, 1] == 0)


def _dft_model(x: np.ndarray, opset: int, length: int | None = None, axis: int | None = None,
               **attrs: object) -> onnx.ModelProto:
    inputs, inits = ["x", ""], []
    if length is not None:
        inputs[1] = "n"
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "n"))
    if axis is not None and opset >= 20:
        inputs.append("axis")
        inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
    elif axis is not None:
        attrs["axis"] = axis
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    model = tiny_model([node], {"x": (TensorProto.FLOAT, list(x.shape))}, ["y"], inits, opset=opset)
    return _declared(model, {"x": x})


def _declared(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with its output's shape declared (onnx's inference leaves some DFTs
    unshaped, which its checker refuses), taken from onnx's reference run."""
    shape = ReferenceEvaluator(model).run(None, feeds)[0].shape
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape)))
    return model


@pytest.mark.parametrize("opset", [17, 19, 20, 24])
@pytest.mark.parametrize("attrs", [{}, {"onesided": 1}, {"inverse": 1}, {"inverse": 1, "onesided": 1}])
@pytest.mark.parametrize("length", [None, 5, 12])
def test_every_opset_imports_and_matches_onnx_reference(opset: int, attrs: dict,
                                                        length: int | None) -> None:
    # onnx's shape inference takes a one-sided forward DFT of real input only, and an
    # IRFFT of complex input only.
    parts = 1 if attrs == {"onesided": 1} else 2
    x = np.random.default_rng(opset).standard_normal((2, 8, 3, parts)).astype(np.float32)
    for axis in (1, -2):
        model = _dft_model(x, opset, length, axis, **attrs)
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        got = HeteroBackend.prepare(model).run([x])[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset,axis", [(17, 1), (20, -2)])
def test_each_opsets_default_axis(opset: int, axis: int) -> None:
    """Rank 3: opset 17's default axis 1 and opset 20's -2 are the same axis."""
    x = np.random.default_rng(1).standard_normal((2, 6, 1)).astype(np.float32)
    got = HeteroBackend.prepare(_dft_model(x, opset)).run([x])[0]
    want = ReferenceEvaluator(_dft_model(x, opset, axis=axis)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset,axis", [(17, 1), (19, 1), (20, -2)])
def test_a_default_axis_follows_the_models_opset_at_rank_4(opset: int, axis: int) -> None:
    """Rank 4: opset 17's default axis 1 and opset 20's -2 are different axes."""
    x = np.random.default_rng(2).standard_normal((2, 6, 3, 1)).astype(np.float32)
    got = HeteroBackend.prepare(_dft_model(x, opset)).run([x])[0]
    want = ReferenceEvaluator(_dft_model(x, opset, axis=axis)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [257, 400, 512, 2048])
def test_audio_lengths_stay_within_the_float32_sum_bound(n: int) -> None:
    """Frames of audio length against numpy's float64 FFT: the error is a float32 sum's,
    far inside the bound the conformance cases use (2n terms of the frame's size)."""
    x = np.random.default_rng(n).uniform(-1, 1, (3, n, 1)).astype(np.float32)
    got = HeteroBackend.prepare(_dft_model(x, 20, axis=1, onesided=1)).run([x])[0]
    exact = np.fft.rfft(x[..., 0].astype(np.float64), axis=1)
    error = np.abs(got[..., 0] + 1j * got[..., 1] - exact).max()
    eps = np.finfo(np.float32).eps
    assert error <= n * eps * np.abs(x).sum(axis=1).max()
    # In practice a float32 sum's error grows like sqrt(n), not n.
    assert error <= 8 * np.sqrt(n) * eps * np.sqrt((x.astype(np.float64) ** 2).sum(axis=1)).max()


def _stft_model(signal: np.ndarray, step: int, window: np.ndarray | None, length: int | None,
                window_input: bool = False) -> onnx.ModelProto:
    inputs = ["s", "step", "", ""]
    inits = [numpy_helper.from_array(np.array(step, np.int64), "step")]
    feeds = {"s": (TensorProto.FLOAT, list(signal.shape))}
    if window is not None:
        inputs[2] = "w"
        if window_input:
            feeds["w"] = (TensorProto.FLOAT, list(window.shape))
        else:
            inits.append(numpy_helper.from_array(window, "w"))
    if length is not None:
        inputs[3] = "len"
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "len"))
    # onesided set: onnx's shape inference reads its absence as 0, its schema as 1.
    node = helper.make_node("STFT", inputs, ["y"], onesided=1)
    return tiny_model([node], feeds, ["y"], inits, opset=17)


@pytest.mark.parametrize("window_input", [False, True])
def test_stft_with_a_hann_window_matches_onnx_reference(window_input: bool) -> None:
    rng = np.random.default_rng(4)
    signal = rng.standard_normal((1, 1600, 1)).astype(np.float32)
    window = (np.sin(np.pi * np.arange(400) / 400) ** 2).astype(np.float32)
    model = _stft_model(signal, 160, window, 400, window_input)
    feeds = {"s": signal} | ({"w": window} if window_input else {})
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = HeteroBackend.prepare(model).run(list(feeds.values()))[0]
    assert got.shape == want.shape == (1, 8, 201, 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4)


def _window_model(op: str, size: int, periodic: int, elem_type: int) -> onnx.ModelProto:
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic, output_datatype=elem_type)
    graph = helper.make_graph([node], "w", [], [helper.make_tensor_value_info("y", elem_type, [size])],
                              [numpy_helper.from_array(np.array(size, np.int64), "size")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_EXACT_WINDOWS = {
    "HannWindow": lambda t: 0.5 - 0.5 * np.cos(t),
    "HammingWindow": lambda t: 25 / 46 - 21 / 46 * np.cos(t),
    "BlackmanWindow": lambda t: 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t),
}


@pytest.mark.parametrize("op", sorted(_EXACT_WINDOWS))
@pytest.mark.parametrize("size,periodic", [(1, 1), (10, 0), (10, 1), (400, 0), (400, 1)])
def test_windows_of_a_constant_size(op: str, periodic: int, size: int) -> None:
    """onnx's function bodies compute in float32: float32 and float64 outputs are within a
    few float32 roundings of the exact window, float16 within one float16 rounding of
    that (onnx's reference computes float16 in float16, a few roundings further off)."""
    denominator = size if periodic else size - 1
    exact = _EXACT_WINDOWS[op](2 * np.pi * np.arange(size) / denominator)
    for elem_type, dtype in ((TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64),
                             (TensorProto.FLOAT16, np.float16)):
        model = _window_model(op, size, periodic, elem_type)
        got = HeteroBackend.prepare(model).run([])[0]
        assert got.dtype == dtype and got.shape == (size,)
        slack = np.finfo(np.float32).eps * 16 + (np.finfo(np.float16).eps if dtype == np.float16 else 0)
        np.testing.assert_allclose(got, exact, rtol=0, atol=slack)


def test_mel_weight_matrix_of_constants_is_a_constant() -> None:
    names = ["bands", "n", "rate", "low", "high"]
    values = [np.array(10, np.int32), np.array(64, np.int32), np.array(16000, np.int32),
              np.array(20.0, np.float32), np.array(8000.0, np.float32)]
    node = helper.make_node("MelWeightMatrix", names, ["y"], output_datatype=TensorProto.DOUBLE)
    graph = helper.make_graph([node], "m", [], [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [33, 10])],
                              [numpy_helper.from_array(v, k) for k, v in zip(names, values)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    want = ReferenceEvaluator(model).run(None, {})[0]
    got = HeteroBackend.prepare(model).run([])[0]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
