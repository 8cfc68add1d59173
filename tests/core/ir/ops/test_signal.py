"""The signal ops' definitions (DFT, STFT, MelWeightMatrix) against onnx's reference
implementation, and their shape rules."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.ops.signal import mel_weight_matrix
from hetero.errors import ShapeError


def _ours(op: str, arrays: list[np.ndarray | None], **attrs: object) -> np.ndarray:
    b = GraphBuilder("t")
    ins = [None if a is None else b.input(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    b.output(b.op(op, *ins, **attrs))
    node = b.build().nodes[0]
    return node.opdef.reference(arrays, node.attrs)[0]


def _onnx_dft(x: np.ndarray, opset: int, length: int | None, **attrs: object) -> np.ndarray:
    inputs, feeds = ["x", "n" if length is not None else ""], {"x": x}
    if length is not None:
        feeds["n"] = np.array(length, np.int64)
    if opset >= 20 and "axis" in attrs:
        inputs.append("axis")
        feeds["axis"] = np.array(attrs.pop("axis"), np.int64)
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)[0]


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("parts", [1, 2])
@pytest.mark.parametrize("length", [None, 3, 6, 11])
def test_dft_matches_onnx_reference(opset: int, inverse: int, onesided: int, parts: int,
                                    length: int | None) -> None:
    x = np.random.default_rng(length or 0).standard_normal((2, 6, 3, parts)).astype(np.float32)
    for axis in (1, 2, -3):
        want = _onnx_dft(x, opset, length, axis=axis, inverse=inverse, onesided=onesided)
        attrs = {"axis": axis, "inverse": inverse, "onesided": onesided}
        if length is not None:
            attrs["dft_length"] = length
        got = _ours("DFT", [x], **attrs)
        assert got.shape == want.shape and got.dtype == want.dtype
        # onnx's reference runs numpy's float32 FFT; ours the float64 one, rounded once.
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dft_defaults_and_shapes() -> None:
    b = GraphBuilder("t")
    x = b.input("x", (1, 7, 4, 2), np.float32)
    assert b.op("DFT", x).shape == (1, 7, 4, 2)
    assert b.op("DFT", x, axis=-2, onesided=1).shape == (1, 7, 3, 2)
    assert b.op("DFT", x, inverse=1, onesided=1).shape == (1, 12, 4, 1)  # 2 * (7 - 1)
    assert b.op("DFT", x, axis=0, dft_length=5).shape == (5, 7, 4, 2)
    for bad in (3, -1, 4, -5):
        with pytest.raises(ShapeError, match="axis"):
            b.op("DFT", x, axis=bad)
    with pytest.raises(ShapeError, match="last axis"):
        b.op("DFT", b.input("y", (4, 3), np.float32))
    with pytest.raises(ShapeError, match="dft_length"):
        b.op("DFT", b.input("z", (1, 1, 2), np.float32), inverse=1, onesided=1)


def _onnx_stft(signal: np.ndarray, step: int, window: np.ndarray | None, length: int | None,
               **attrs: object) -> np.ndarray:
    feeds = {"s": signal, "step": np.array(step, np.int64)}
    inputs = ["s", "step", "", ""]
    if window is not None:
        inputs[2], feeds["w"] = "w", window
    if length is not None:
        inputs[3], feeds["len"] = "len", np.array(length, np.int64)
    node = helper.make_node("STFT", inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ReferenceEvaluator(model).run(None, feeds)[0]


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("parts", [1, 2])
@pytest.mark.parametrize("windowed", [False, True])
def test_stft_matches_onnx_reference(onesided: int, parts: int, windowed: bool) -> None:
    rng = np.random.default_rng(parts)
    signal = rng.standard_normal((2, 37, parts)).astype(np.float32)
    window = rng.random(10).astype(np.float32) if windowed else None
    length = None if windowed else 10
    want = _onnx_stft(signal, 4, window, length, onesided=onesided)
    attrs = {"frame_step": 4, "onesided": onesided}
    if length is not None:
        attrs["frame_length"] = length
    got = _ours("STFT", [signal, window], **attrs)
    assert got.shape == want.shape == (2, 7, 6 if onesided else 10, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_stft_shape_rules() -> None:
    b = GraphBuilder("t")
    s = b.input("s", (1, 20, 1), np.float32)
    assert b.op("STFT", s, frame_step=3).shape == (1, 1, 11, 2)  # one frame of the whole signal
    with pytest.raises(ShapeError, match="window"):
        b.op("STFT", s, b.input("w", (5,), np.float32), frame_step=3, frame_length=6)
    with pytest.raises(ShapeError, match="frame_length"):
        b.op("STFT", s, frame_step=3, frame_length=21)
    with pytest.raises(ShapeError, match="rank 3"):
        b.op("STFT", b.input("t", (20, 1), np.float32), frame_step=3, frame_length=4)


@pytest.mark.parametrize("args", [
    (8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 8000.0), (4, 31, 22050, 300.0, 3000.0),
    (80, 400, 16000, 0.0, 8000.0),
])
def test_mel_weight_matrix_matches_onnx_reference(args: tuple) -> None:
    bands, n, rate, low, high = args
    scalars = [np.int64(bands), np.int64(n), np.int64(rate), np.float32(low), np.float32(high)]
    names = ["bands", "n", "rate", "low", "high"]
    node = helper.make_node("MelWeightMatrix", names, ["y"])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    want = ReferenceEvaluator(model).run(None, {k: np.array(v) for k, v in zip(names, scalars)})[0]
    np.testing.assert_array_equal(mel_weight_matrix(*scalars).astype(np.float32), want)


def test_mel_weight_matrix_refuses_edges_past_nyquist() -> None:
    with pytest.raises(ValueError, match="Nyquist"):
        mel_weight_matrix(np.int64(8), np.int64(16), np.int64(8000), np.float32(0), np.float32(8000))


def test_onnx_schemas_are_the_ones_translated() -> None:
    """The versions the translator knows: DFT 17 and 20, STFT and MelWeightMatrix 17."""
    newest = onnx.defs.onnx_opset_version()
    assert onnx.defs.get_schema("DFT", newest).since_version == 20
    for op in ("STFT", "MelWeightMatrix"):
        assert onnx.defs.get_schema(op, newest).since_version == 17
