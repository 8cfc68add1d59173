"""Signal ops: DFT (with its real-input and real-output halves, RFFT and IRFFT) and STFT.

Complex numbers are ONNX's: a last axis of 2 holds the real and imaginary parts, a
last axis of 1 a real signal. ``DFT`` transforms one axis; its canonical attributes
hold what ONNX gives as inputs at opset 20 (the axis, made non-negative) and the
``dft_length`` its defaults derive (the axis's size; ``2 * (size - 1)`` for an
inverse one-sided transform, IRFFT). The input is cut to, or zero-padded to,
``dft_length`` along the axis. A one-sided forward transform (RFFT) keeps the first
``dft_length // 2 + 1`` bins; a one-sided inverse (IRFFT) reads the first
``dft_length // 2 + 1`` bins as the half of a Hermitian spectrum and returns a real
signal of ``dft_length`` samples (last axis 1), numpy's ``irfft``: the imaginary part
of bin 0, and of bin ``dft_length / 2`` where that exists, is ignored.

``STFT`` cuts a ``[batch, length, 1 or 2]`` signal into ``frames = (length -
frame_length) // frame_step + 1`` frames, multiplies each by the window (ones when
absent) and transforms it, one-sided by default: ``[batch, frames, bins, 2]``.

The references are onnx's: numpy's FFT in float64 (from the input's values), the
result rounded to the input's dtype once; STFT rounds the windowed frame to the
input's dtype first, as onnx's reference does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import require_float
from hetero.core.ir.types import TensorType
from hetero.errors import OpAttributeError, ShapeError

_F64 = np.dtype(np.float64)


def _check_complex(x: TensorType, what: str, rank: int | None = None) -> None:
    require_float(x, what)
    if x.rank < 2 or x.shape[-1] not in (1, 2):
        raise ShapeError(f"{what} must have rank >= 2 and a last axis of 1 (real) or 2 "
                         f"(real, imaginary), got {x}")
    if rank is not None and x.rank != rank:
        raise ShapeError(f"{what} must have rank {rank}, got {x}")


def _flag(attrs: dict[str, Any], name: str, op: str) -> bool:
    if attrs[name] not in (0, 1):
        raise OpAttributeError(f"{op} {name} must be 0 or 1, got {attrs[name]}")
    return bool(attrs[name])


def dft_axis(axis: int, rank: int) -> int:
    """ONNX's DFT axis, in ``[-rank, -2]`` or ``[0, rank - 2]``, made non-negative."""
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise ShapeError(f"DFT axis {axis} is out of range for an input of rank {rank}: it must "
                         f"lie in [{-rank}, -2] or [0, {rank - 2}] (the last axis holds the real "
                         "and imaginary parts)")
    return axis % rank


def irfft(inverse: int, onesided: int) -> bool:
    """Whether a DFT with these flags is an inverse one-sided one: complex in, real out."""
    return bool(inverse and onesided)


def _dft_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    x = ins[0]
    assert x is not None
    _check_complex(x, "DFT input")
    attrs["axis"] = dft_axis(attrs["axis"], x.rank)
    if attrs["dft_length"] is None:
        size = x.shape[attrs["axis"]]
        attrs["dft_length"] = 2 * (size - 1) if irfft(attrs["inverse"], attrs["onesided"]) else size
    return attrs


def _dft_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    _check_complex(x, "DFT input")
    axis, n = attrs["axis"], attrs["dft_length"]
    if not 0 <= axis <= x.rank - 2:
        raise ShapeError(f"DFT axis {axis} must lie in [0, {x.rank - 2}] for input {x}")
    inverse, onesided = _flag(attrs, "inverse", "DFT"), _flag(attrs, "onesided", "DFT")
    if n < 1:
        raise ShapeError(f"DFT dft_length must be at least 1, got {n} (input {x}, axis {axis})")
    shape = list(x.shape)
    if inverse and onesided:
        shape[axis], shape[-1] = n, 1
    else:
        shape[axis], shape[-1] = (n // 2 + 1 if onesided else n), 2
    return [TensorType(tuple(shape), x.dtype)]


def complex_of(x: np.ndarray) -> np.ndarray:
    """``x``'s last axis (1: real, 2: real and imaginary) as one complex128 array."""
    x = np.asarray(x).astype(_F64)
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def _as_pairs(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack((z.real, z.imag), axis=-1).astype(dtype)


def _dft_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = np.asarray(ins[0])
    axis, n = attrs["axis"], attrs["dft_length"]
    z = complex_of(x)
    if irfft(attrs["inverse"], attrs["onesided"]):
        return [np.fft.irfft(z, n=n, axis=axis)[..., None].astype(x.dtype)]
    y = np.fft.ifft(z, n=n, axis=axis) if attrs["inverse"] else np.fft.fft(z, n=n, axis=axis)
    if attrs["onesided"]:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return [_as_pairs(y, x.dtype)]


def _dft_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    """A direct transform's multiply-adds: every output element sums over the input's
    (used) samples and parts."""
    x, axis = ins[0], attrs["axis"]
    used = min(x.shape[axis], attrs["dft_length"] // 2 + 1 if irfft(attrs["inverse"], attrs["onesided"])
               else attrs["dft_length"])
    return 2 * outs[0].size * used * x.shape[-1]


register(OpDef(
    "DFT", ("input",), ("output",), _dft_infer, _dft_reference,
    attrs={
        "axis": Attr("int", 1, "the transformed axis, in [0, rank - 2]; canonical non-negative"),
        "inverse": Attr("int", 0, "1 for the inverse transform (scaled by 1 / dft_length)"),
        "onesided": Attr("int", 0, "1: forward keeps dft_length // 2 + 1 bins (RFFT); inverse "
                                   "reads that many as a Hermitian half, real out (IRFFT)"),
        "dft_length": Attr("int", None, "the transform's length: the axis is cut or zero-padded "
                                        "to it; derived from the input when absent"),
    },
    flops=_dft_flops,
    complete=_dft_complete,
    doc="the discrete Fourier transform of one axis of a real ([..., 1]) or complex ([..., 2]) "
        "tensor: full, one-sided (RFFT) or their inverses (IFFT, IRFFT)",
))


def stft_frames(length: int, frame_length: int, frame_step: int) -> int:
    """How many whole frames of ``frame_length`` a signal of ``length`` holds at this step."""
    return (length - frame_length) // frame_step + 1


def _stft_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    signal, window = ins[0], ins[1] if len(ins) > 1 else None
    assert signal is not None
    if attrs["frame_length"] is None:
        attrs["frame_length"] = window.shape[0] if window is not None and window.rank == 1 \
            else signal.shape[1] if signal.rank > 1 else 0
    return attrs


def _stft_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    signal, window = ins[0], ins[1] if len(ins) > 1 else None
    _check_complex(signal, "STFT signal", rank=3)
    step, length = attrs["frame_step"], attrs["frame_length"]
    onesided = _flag(attrs, "onesided", "STFT")
    if step < 1:
        raise ShapeError(f"STFT frame_step must be at least 1, got {step}")
    if not 1 <= length <= signal.shape[1]:
        raise ShapeError(f"STFT frame_length {length} must lie in [1, {signal.shape[1]}], the "
                         f"signal's length (signal {signal})")
    if window is not None:
        require_float(window, "STFT window")
        if window.dtype != signal.dtype:
            raise ShapeError(f"STFT window must have the signal's dtype {signal.dtype.name}, "
                             f"got {window.dtype.name}")
        if window.shape != (length,):
            raise ShapeError(f"STFT window must be 1-D of frame_length {length} elements, got {window}")
    frames = stft_frames(signal.shape[1], length, step)
    bins = length // 2 + 1 if onesided else length
    return [TensorType((signal.shape[0], frames, bins, 2), signal.dtype)]


def _stft_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    signal = np.asarray(ins[0])
    step, length = attrs["frame_step"], attrs["frame_length"]
    window = np.ones(length, signal.dtype) if len(ins) < 2 or ins[1] is None else np.asarray(ins[1])
    frames = stft_frames(signal.shape[1], length, step)
    starts = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    framed = signal[:, starts, :]  # [batch, frames, length, parts]
    weighted = (framed * window[:, None]).astype(signal.dtype)
    y = np.fft.fft(complex_of(weighted), axis=-1)
    if attrs["onesided"]:
        y = y[..., : length // 2 + 1]
    return [_as_pairs(y, signal.dtype)]


def _stft_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    return 2 * outs[0].size * attrs["frame_length"] * ins[0].shape[-1]


register(OpDef(
    "STFT", ("signal", "window?"), ("output",), _stft_infer, _stft_reference,
    attrs={
        "frame_step": Attr("int", doc="samples between the starts of successive frames"),
        "frame_length": Attr("int", None, "samples a frame holds (the DFT's length); derived from "
                                          "the window, else the signal's length, when absent"),
        "onesided": Attr("int", 1, "1 keeps the frame_length // 2 + 1 non-redundant bins"),
    },
    flops=_stft_flops,
    complete=_stft_complete,
    doc="the short-time Fourier transform: windowed frames of a [batch, length, 1 or 2] signal, "
        "each transformed: [batch, frames, bins, 2]",
))


def mel_weight_matrix(num_mel_bins: Any, dft_length: Any, sample_rate: Any,
                      lower_edge_hertz: Any, upper_edge_hertz: Any) -> np.ndarray:
    """ONNX's MelWeightMatrix, ``[dft_length // 2 + 1, num_mel_bins]`` in float64.

    It has no canonical op: it reads scalars only, so the frontend computes it when it
    imports the model (as Range). The arithmetic is onnx's reference's, operation for
    operation on numpy scalars of the inputs' own dtypes, since the triangles' corners
    are the bins that floor division lands on; ValueError where a corner falls outside
    the spectrum (an upper edge past the Nyquist frequency).
    """
    num_mel_bins, dft_length = int(num_mel_bins), int(dft_length)
    if num_mel_bins < 1 or dft_length < 1:
        raise ValueError(f"num_mel_bins ({num_mel_bins}) and dft_length ({dft_length}) must be "
                         "at least 1")
    if int(sample_rate) <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    spectrum = dft_length // 2 + 1
    bins = np.arange(0, num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower_edge_hertz / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper_edge_hertz / 700) / np.log(10)
    step = (high_mel - low_mel) / bins.shape[0]
    hertz = 700 * np.expm1((bins * step + low_mel) / 2595 * np.log(10))
    corners = (((dft_length + 1) * hertz) // sample_rate).astype(int)
    if corners.min() < 0 or corners[1:-1].max() >= spectrum or corners[-1] > spectrum:
        raise ValueError(
            f"the mel bands' corners fall on spectrum bins {corners.tolist()}, outside the "
            f"{spectrum} bins of a {dft_length}-point DFT: keep lower_edge_hertz >= 0 and "
            "upper_edge_hertz within the Nyquist frequency, sample_rate / 2")
    out = np.zeros((spectrum, num_mel_bins))
    for i in range(num_mel_bins):
        left, center, right = (int(c) for c in corners[i:i + 3])
        if center == left:
            out[center, i] = 1
        else:
            for j in range(left, center + 1):
                out[j, i] = float(j - left) / float(center - left)
        for j in range(center, right):
            out[j, i] = float(right - j) / float(right - center)
    return out
