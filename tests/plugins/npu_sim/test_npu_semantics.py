"""npu_sim executes each instruction exactly as numpy (and core's requantize) would, and faults loudly."""

from dataclasses import replace

import numpy as np
import pytest

from hetero.core.ir.ops.fixed_point import quantize_multiplier, requantize
from hetero.errors import InputError, SimulationError
from hetero.plugins.npu_sim.config import PRESETS, NpuConfig
from hetero.plugins.npu_sim.isa import (
    Buf,
    Copy,
    DType,
    Engine,
    Gemm,
    Instr,
    Load,
    Pool,
    PoolKind,
    Requant,
    Signal,
    Store,
    Vec,
    VecImm,
    VecOp,
    Wait,
)
from hetero.plugins.npu_sim.program import Binding, Program, Segment
from hetero.plugins.npu_sim.sim import simulate

RNG = np.random.default_rng(7)
DEFAULT = NpuConfig()
# Compute after load, store after compute: the hand-written programs below are serial.
LC = [Signal(Engine.LOAD, Engine.COMPUTE), Wait(Engine.LOAD, Engine.COMPUTE)]
CS = [Signal(Engine.COMPUTE, Engine.STORE), Wait(Engine.COMPUTE, Engine.STORE)]


def _run(code: list[Instr], inputs: dict[str, tuple[int, np.ndarray]], out: tuple[int, tuple, str],
         config: NpuConfig = DEFAULT, segments: tuple[Segment, ...] = ()) -> np.ndarray:
    program = Program(tuple(code), 1 << 16, segments,
                      tuple(Binding(n, a, v.shape, str(v.dtype)) for n, (a, v) in inputs.items()),
                      (Binding("y", out[0], out[1], out[2]),))
    return simulate(program, config, {n: v for n, (_, v) in inputs.items()}).outputs["y"]


def _contiguous(shape: tuple[int, ...], itemsize: int = 1) -> tuple[int, int, int, int]:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def test_load_with_strides_and_padding_is_a_transposing_padding_copy() -> None:
    x = RNG.integers(-128, 128, (1, 3, 4, 5), dtype=np.int8)                 # NCHW
    nhwc = (1, 4, 5, 3)
    load = Load(Buf.INP, 7, 0, DType.INT8, nhwc, (60, 5, 1, 20), (0, 1, 2, 0), (0, 1, 0, 0), pad_value=-3)
    padded = (1, 6, 7, 3)
    store = Store(Buf.INP, 7, 0x1000, DType.INT8, padded, _contiguous(padded))
    got = _run([load, *LC, *CS, store], {"x": (0, x)}, (0x1000, padded, "int8"))
    expected = np.pad(x.transpose(0, 2, 3, 1), [(0, 0), (1, 1), (2, 0), (0, 0)], constant_values=-3)
    np.testing.assert_array_equal(got, expected)


def test_load_with_negative_strides_reverses() -> None:
    x = np.arange(8, dtype=np.int32).reshape(1, 1, 1, 8)
    load = Load(Buf.ACC, 0, 28, DType.INT32, (1, 1, 1, 8), (0, 0, 0, -4))
    store = Store(Buf.ACC, 0, 0x100, DType.INT32, (1, 1, 1, 8), (0, 0, 0, 4))
    got = _run([load, *LC, *CS, store], {"x": (0, x)}, (0x100, (1, 1, 1, 8), "int32"))
    np.testing.assert_array_equal(got, x[..., ::-1])


def test_gemm_with_strided_rows_accumulates_in_int32() -> None:
    m, k, n, stride = 5, 32, 32, 40
    a = RNG.integers(-128, 128, (m, stride), dtype=np.int8)
    w1, w2 = (RNG.integers(-128, 128, (k, n), dtype=np.int8) for _ in range(2))
    code = [
        Load(Buf.INP, 0, 0, DType.INT8, (1, 1, m, stride), _contiguous((1, 1, m, stride))),
        Load(Buf.WGT, 0, 0x400, DType.INT8, (1, 1, k, n), _contiguous((1, 1, k, n))),
        Load(Buf.WGT, k * n, 0x800, DType.INT8, (1, 1, k, n), _contiguous((1, 1, k, n))),
        *LC,
        Gemm(0, 0, 0, m, k, n, stride, n + 3, False),
        Gemm(0, 2, k * n, m, k, n, stride, n + 3, True),
        *CS,
        Store(Buf.ACC, 0, 0x1000, DType.INT32, (1, 1, m, n + 3), (0, 0, 4 * (n + 3), 4)),
    ]
    got = _run(code, {"a": (0, a), "w1": (0x400, w1), "w2": (0x800, w2)}, (0x1000, (1, 1, m, n + 3), "int32"))
    got = got[..., :n]
    wide = a.astype(np.int32)
    expected = wide[:, :k] @ w1.astype(np.int32) + wide[:, 2:k + 2] @ w2.astype(np.int32)
    np.testing.assert_array_equal(got[0, 0], expected)


def test_requant_is_cores_requantize_per_channel() -> None:
    rows, channels = 6, 4
    acc = RNG.integers(-2**20, 2**20, (rows, channels), dtype=np.int32)
    bias = RNG.integers(-5000, 5000, channels, dtype=np.int32)
    ms, ss = zip(*(quantize_multiplier(r) for r in (0.0123, 0.5, 3e-5, 1.7)))
    params = np.stack([bias, np.array(ms, np.int32), np.array(ss, np.int32)], axis=1).astype("<i4")
    n = rows * channels
    code = [
        Load(Buf.ACC, 0, 0, DType.INT32, (1, 1, 1, n), (0, 0, 0, 4)),
        Load(Buf.WGT, 12, 0x400, DType.INT32, (1, 1, 1, 3 * channels), (0, 0, 0, 4)),
        *LC,
        Requant(Buf.OUT, 0, 0, n, channels, 12, zero=-5, lo=-5, hi=100),
        *CS,
        Store(Buf.OUT, 0, 0x800, DType.INT8, (1, 1, rows, channels), (0, 0, channels, 1)),
    ]
    got = _run(code, {"acc": (0, acc), "params": (0x400, params)}, (0x800, (1, 1, rows, channels), "int8"))
    expected = requantize(acc.astype(np.int64) + bias, ms, ss, -5, -5, 100, axis=1)
    np.testing.assert_array_equal(got[0, 0], expected)


@pytest.mark.parametrize("kind", [PoolKind.MAX, PoolKind.SUM])
def test_pool_matches_numpy_windows(kind: PoolKind) -> None:
    h, w, c, k, s = 7, 6, 3, 3, 2
    x = RNG.integers(-128, 128, (h, w, c), dtype=np.int8)
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    dst = Buf.OUT if kind is PoolKind.MAX else Buf.ACC
    dtype, out_dtype = (DType.INT8, "int8") if kind is PoolKind.MAX else (DType.INT32, "int32")
    code = [
        Load(Buf.INP, 0, 0, DType.INT8, (1, h, w, c), _contiguous((1, h, w, c))), *LC,
        Pool(kind, dst, 0, Buf.INP, 0, h, w, c, k, k, s, s, oh, ow), *CS,
        Store(dst, 0, 0x400, dtype, (1, oh, ow, c), _contiguous((1, oh, ow, c), dtype.itemsize)),
    ]
    got = _run(code, {"x": (0, x)}, (0x400, (1, oh, ow, c), out_dtype))
    windows = np.stack([x[i * s:i * s + k, j * s:j * s + k].astype(np.int32)
                        for i in range(oh) for j in range(ow)])
    reduce = windows.max(axis=(1, 2)) if kind is PoolKind.MAX else windows.sum(axis=(1, 2))
    np.testing.assert_array_equal(got.reshape(oh * ow, c), reduce)


def test_vector_ops_saturate_int8_and_wrap_int32() -> None:
    a = np.array([100, -100, 5, -128, 127, 0, 60, -7], dtype=np.int8)
    b = np.array([100, -100, -9, -1, 1, 0, 3, 2], dtype=np.int8)
    code = [
        Load(Buf.INP, 0, 0, DType.INT8, (1, 1, 1, 16), (0, 0, 0, 1)), *LC,
        Vec(VecOp.ADD, Buf.OUT, 0, Buf.INP, 0, Buf.INP, 8, 8),
        Vec(VecOp.MUL, Buf.OUT, 8, Buf.INP, 0, Buf.INP, 8, 8),
        Vec(VecOp.MIN, Buf.OUT, 16, Buf.INP, 0, Buf.INP, 8, 8),
        VecImm(VecOp.MAX, Buf.OUT, 24, Buf.INP, 0, 3, 8),              # a relu with zero point 3
        Copy(Buf.ACC, 0, Buf.INP, 0, 8),
        VecImm(VecOp.MUL, Buf.ACC, 0, Buf.ACC, 0, 2**30, 8),
        Copy(Buf.OUT, 32, Buf.ACC, 0, 8),
        *CS,
        Store(Buf.OUT, 0, 0x100, DType.INT8, (1, 1, 5, 8), (0, 0, 8, 1)),
    ]
    got = _run(code, {"x": (0, np.concatenate([a, b]))}, (0x100, (1, 1, 5, 8), "int8"))[0, 0]
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(got[0], np.clip(a64 + b64, -128, 127))
    np.testing.assert_array_equal(got[1], np.clip(a64 * b64, -128, 127))
    np.testing.assert_array_equal(got[2], np.minimum(a, b))
    np.testing.assert_array_equal(got[3], np.maximum(a, 3))
    wrapped = (a64 * 2**30).astype(np.int32)                           # int32 wraps
    np.testing.assert_array_equal(got[4], np.clip(wrapped, -128, 127))


def test_sram_overflow_names_buffer_instruction_and_capacity() -> None:
    tiny = PRESETS["tiny-64k"]
    load = Load(Buf.INP, 16 * 1024 - 8, 0, DType.INT8, (1, 1, 1, 16), (0, 0, 0, 1), tag="conv1")
    with pytest.raises(SimulationError, match=r"LOAD #0 `LOAD inp\[16376\].*; conv1`: SRAM overflow: writes "
                                              r"inp\[16376:16392\] beyond the inp buffer's 16384 elements"):
        _run([load], {}, (0, (1,), "int8"), tiny)
    with pytest.raises(SimulationError, match=r"GEMM #0 .*acc\[0:2060\] beyond the acc buffer's 2048 elements"):
        _run([Gemm(0, 0, 0, 2, 8, 8, 8, 2052, False)], {}, (0, (1,), "int8"), tiny)


def test_bad_operands_are_named_errors() -> None:
    tiny = PRESETS["tiny-64k"]
    cases = [
        (Load(Buf.INP, 0, 1 << 16, DType.INT8, (1, 1, 1, 4), (0, 0, 0, 1)), r"DRAM access .* outside DRAM"),
        (Load(Buf.INP, 0, 8, DType.INT8, (1, 1, 1, 4), (0, 0, 0, -4)), r"DRAM access \[-0x4"),
        (Gemm(0, 0, 0, 2, 16, 8, 16, 8, False), r"k=16, n=8 exceed the 8x8 matrix array"),
        (Load(Buf.ACC, 0, 0, DType.INT8, (1, 1, 1, 4), (0, 0, 0, 1)), r"acc buffer moves int32 only"),
        (Vec(VecOp.ADD, Buf.ACC, 0, Buf.OUT, 0, Buf.OUT, 0, 4), r"all be in acc .* or all in int8"),
        (VecImm(VecOp.MAX, Buf.OUT, 0, Buf.OUT, 0, 300, 4), r"immediate 300 does not fit int8"),
        (Requant(Buf.OUT, 0, 0, 4, 1, 0, 0, -128, 127), r"shifts in \[1, 62\]"),
        (Pool(PoolKind.SUM, Buf.OUT, 0, Buf.INP, 0, 4, 4, 1, 2, 2, 2, 2, 2, 2), r"destination must be acc"),
        (Pool(PoolKind.MAX, Buf.OUT, 0, Buf.INP, 0, 4, 4, 1, 2, 2, 2, 2, 3, 2), r"runs past the"),
    ]
    for instr, message in cases:
        with pytest.raises(SimulationError, match=rf"#0 `{instr.MNEMONIC} .*{message}"):
            _run([instr], {}, (0, (1,), "int8"), tiny)


def test_inputs_must_match_the_bindings() -> None:
    program = Program((), 64, inputs=(Binding("x", 0, (4,), "int8"),))
    with pytest.raises(InputError, match=r"missing inputs \['x'\]"):
        simulate(program, NpuConfig(), {})
    with pytest.raises(InputError, match=r"input 'x' must be int8\[4\], got int32\[4\]"):
        simulate(program, NpuConfig(), {"x": np.zeros(4, np.int32)})


def test_segments_initialise_dram() -> None:
    data = np.arange(-4, 4, dtype=np.int8)
    code = [Load(Buf.OUT, 0, 0x20, DType.INT8, (1, 1, 1, 8), (0, 0, 0, 1)), Signal(Engine.LOAD, Engine.STORE),
            Wait(Engine.LOAD, Engine.STORE), Store(Buf.OUT, 0, 0x40, DType.INT8, (1, 1, 1, 8), (0, 0, 0, 1))]
    got = _run(code, {}, (0x40, (8,), "int8"), segments=(Segment(0x20, data.tobytes()),))
    np.testing.assert_array_equal(got, data)
    assert replace(NpuConfig(), array_rows=4).peak_macs_per_cycle == 128
