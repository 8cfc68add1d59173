"""npu_sim's simulator: executes a :class:`Program` exactly on numpy and times it.

Execution is functional, in program order, one vectorised numpy operation per
instruction; the :class:`~hetero.plugins.npu_sim.cycles.Timing` model places each
instruction on its engine and rejects a program whose timed schedule could see
other data than program order (a missing WAIT). Every SRAM access is checked
against the buffer's configured capacity and every DRAM access against the
program's DRAM size, so a compiler bug surfaces as a SimulationError naming the
instruction, never as a silently wrong number.

Example::

    >>> result = simulate(program, NpuConfig(), {"x": x})
    >>> result.outputs["y"], result.stats.cycles
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hetero.plugin import MAX_SHIFT, InputError, SimulationError, progress, rounding_shift
from hetero.plugins.npu_sim.asm import format_instr
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.cycles import Access, SimStats, Timing
from hetero.plugins.npu_sim.isa import (
    Buf,
    Copy,
    DType,
    Gemm,
    Instr,
    Load,
    Pool,
    PoolKind,
    Requant,
    Store,
    Vec,
    VecImm,
    VecOp,
)
from hetero.plugins.npu_sim.program import Program

_RANGE = {Buf.ACC: (-2**31, 2**31 - 1)}
_INT8 = (-128, 127)
_NP = {DType.INT8: np.dtype("<i1"), DType.INT32: np.dtype("<i4")}
_BINARY = {VecOp.ADD: np.add, VecOp.MUL: np.multiply, VecOp.MAX: np.maximum, VecOp.MIN: np.minimum}


@dataclass(frozen=True)
class SimResult:
    """The program's outputs by name, and what the run cost."""

    outputs: dict[str, np.ndarray]
    stats: SimStats


def simulate(program: Program, config: NpuConfig, inputs: Mapping[str, np.ndarray], *,
             timeline: bool = False) -> SimResult:
    """Run ``program`` on the NPU ``config`` describes; ``timeline`` keeps per-instruction records."""
    machine = _Machine(program, config)
    machine.bind_inputs(inputs)
    timing = Timing(config, timeline=timeline)
    for index, instr in enumerate(program.instrs):
        if index % 1024 == 0:  # a progress call per instruction would cost more than some instructions
            progress.step("simulate", index + 1, len(program.instrs), "npu_sim instruction")
        reads, writes = machine.execute(index, instr)
        timing.issue(index, instr, reads, writes)
    progress.end("simulate")
    outputs = {b.name: machine.read_dram(b.dram_addr, b.shape, np.dtype(b.dtype)) for b in program.outputs}
    return SimResult(outputs, timing.finish())


class _Machine:
    """DRAM and the SRAM buffers, and the semantics of each instruction."""

    def __init__(self, program: Program, config: NpuConfig) -> None:
        self.program = program
        self.config = config
        self.dram = np.zeros(program.dram_size, dtype=np.uint8)
        for seg in program.segments:
            self.dram[seg.addr:seg.addr + len(seg.data)] = np.frombuffer(seg.data, dtype=np.uint8)
        self.sram = {buf: np.zeros(config.capacity(buf.value), dtype=np.int32 if buf is Buf.ACC else np.int8)
                     for buf in Buf}

    def bind_inputs(self, inputs: Mapping[str, np.ndarray]) -> None:
        expected = {b.name: b for b in self.program.inputs}
        missing, extra = sorted(set(expected) - set(inputs)), sorted(set(inputs) - set(expected))
        if missing or extra:
            raise InputError(f"npu_sim program: missing inputs {missing}, unexpected inputs {extra}; "
                             f"it takes {sorted(expected)}")
        for name, binding in expected.items():
            value = np.asarray(inputs[name])
            if value.shape != binding.shape or value.dtype != np.dtype(binding.dtype):
                raise InputError(f"npu_sim program: input {name!r} must be {binding.dtype}{list(binding.shape)}, "
                                 f"got {value.dtype}{list(value.shape)}")
            data = np.ascontiguousarray(value, dtype=np.dtype(binding.dtype).newbyteorder("<")).view(np.uint8)
            self.dram[binding.dram_addr:binding.dram_addr + binding.nbytes] = data.ravel()

    def read_dram(self, addr: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        nbytes = math.prod(shape) * dtype.itemsize
        return self.dram[addr:addr + nbytes].view(dtype.newbyteorder("<")).reshape(shape).astype(dtype)

    def execute(self, index: int, instr: Instr) -> tuple[list[Access], list[Access]]:
        """Run ``instr``; the ranges it read and wrote."""
        handler = getattr(self, f"_{type(instr).__name__.lower()}", None)
        if handler is None:
            return [], []
        return handler(index, instr)

    def _fault(self, index: int, instr: Instr, what: str) -> SimulationError:
        return SimulationError(f"{instr.MNEMONIC} #{index} `{format_instr(instr)}`: {what}")

    def _block(self, index: int, instr: Instr, buf: Buf, off: int, count: int, verb: str) -> tuple[np.ndarray, Access]:
        capacity = self.sram[buf].size
        if off + count > capacity:
            raise self._fault(index, instr, f"SRAM overflow: {verb} {buf.value}[{off}:{off + count}] beyond the "
                                            f"{buf.value} buffer's {capacity} elements "
                                            f"({capacity * buf.itemsize} bytes)")
        return self.sram[buf][off:off + count], (buf.value, off, off + count)

    def _dram_box(self, index: int, instr: Load | Store) -> tuple[np.ndarray, Access]:
        size = instr.dtype.itemsize
        lo = instr.dram_addr + sum(min(0, (d - 1) * s) for d, s in zip(instr.dims, instr.strides))
        hi = instr.dram_addr + sum(max(0, (d - 1) * s) for d, s in zip(instr.dims, instr.strides)) + size
        if lo < 0 or hi > self.dram.size:
            raise self._fault(index, instr, f"DRAM access [{lo:#x}, {hi:#x}) outside DRAM of {self.dram.size} bytes")
        view = np.ndarray(instr.dims, dtype=_NP[instr.dtype], buffer=self.dram, offset=instr.dram_addr,
                          strides=instr.strides)
        return view, ("dram", lo, hi)

    def _check_types(self, index: int, instr: Load | Store) -> None:
        if instr.buf is Buf.ACC and instr.dtype is not DType.INT32:
            raise self._fault(index, instr, "the acc buffer moves int32 only; requantise to int8 with REQUANT")

    def _load(self, index: int, instr: Load) -> tuple[list[Access], list[Access]]:
        self._check_types(index, instr)
        info = np.iinfo(_NP[instr.dtype])
        if not info.min <= instr.pad_value <= info.max:
            raise self._fault(index, instr, f"pad value {instr.pad_value} does not fit {instr.dtype.value}")
        box, dram = self._dram_box(index, instr)
        block = np.pad(box, list(zip(instr.pad_lo, instr.pad_hi)), constant_values=instr.pad_value)
        flat = block.ravel()
        if instr.buf is not Buf.ACC and instr.dtype is DType.INT32:
            flat = flat.astype("<i4").view(np.int8)
        dst, access = self._block(index, instr, instr.buf, instr.sram_off, flat.size, "writes")
        dst[:] = flat
        return [dram], [access]

    def _store(self, index: int, instr: Store) -> tuple[list[Access], list[Access]]:
        self._check_types(index, instr)
        count = math.prod(instr.dims)
        widen = instr.buf is not Buf.ACC and instr.dtype is DType.INT32
        src, access = self._block(index, instr, instr.buf, instr.sram_off, count * (4 if widen else 1), "reads")
        if widen:
            src = src.copy().view("<i4")
        view, dram = self._dram_box(index, instr)
        view[...] = src.reshape(instr.dims)
        return [access], [dram]

    def _gemm(self, index: int, instr: Gemm) -> tuple[list[Access], list[Access]]:
        rows, cols = self.config.array_rows, self.config.array_cols
        if instr.k > rows or instr.n > cols:
            raise self._fault(index, instr, f"k={instr.k}, n={instr.n} exceed the {rows}x{cols} matrix array; "
                                            f"tile k to at most {rows} and n to at most {cols}")
        if instr.inp_row_stride < instr.k or instr.acc_row_stride < instr.n:
            raise self._fault(index, instr, "row strides must be at least k (input) and n (accumulator)")
        m, k, n = instr.m, instr.k, instr.n
        inp, inp_access = self._block(index, instr, Buf.INP, instr.inp_off, (m - 1) * instr.inp_row_stride + k,
                                      "reads")
        wgt, wgt_access = self._block(index, instr, Buf.WGT, instr.wgt_off, k * n, "reads")
        acc, acc_access = self._block(index, instr, Buf.ACC, instr.acc_off, (m - 1) * instr.acc_row_stride + n,
                                      "writes")
        a = np.lib.stride_tricks.as_strided(inp, (m, k), (instr.inp_row_stride, 1))
        c = np.lib.stride_tricks.as_strided(acc, (m, n), (instr.acc_row_stride * 4, 4), writeable=True)
        # float64 is exact here (|products| < 2^14, k < 2^39) and reaches BLAS, which integer matmul does not.
        product = (a.astype(np.float64) @ wgt.reshape(k, n).astype(np.float64)).astype(np.int64)
        if instr.accumulate:
            product += c
        c[...] = product.astype(np.int32)
        reads = [inp_access, wgt_access] + ([acc_access] if instr.accumulate else [])
        return reads, [acc_access]

    def _elementwise_buffers(self, index: int, instr: Instr, bufs: list[Buf]) -> bool:
        wide = [b is Buf.ACC for b in bufs]
        if any(wide) and not all(wide):
            raise self._fault(index, instr, "operands must all be in acc (int32) or all in int8 buffers; "
                                            "convert with COPY")
        return all(wide)

    def _result(self, values: np.ndarray, wide: bool) -> np.ndarray:
        # int32 wraps like an accumulator; int8 saturates like a vector unit's narrow lanes.
        return values.astype(np.int32) if wide else np.clip(values, *_INT8).astype(np.int8)

    def _vec(self, index: int, instr: Vec) -> tuple[list[Access], list[Access]]:
        wide = self._elementwise_buffers(index, instr, [instr.dst_buf, instr.a_buf, instr.b_buf])
        a, a_access = self._block(index, instr, instr.a_buf, instr.a_off, instr.n, "reads")
        b, b_access = self._block(index, instr, instr.b_buf, instr.b_off, instr.n, "reads")
        dst, dst_access = self._block(index, instr, instr.dst_buf, instr.dst_off, instr.n, "writes")
        dst[:] = self._result(_BINARY[instr.op](a.astype(np.int64), b.astype(np.int64)), wide)
        return [a_access, b_access], [dst_access]

    def _vecimm(self, index: int, instr: VecImm) -> tuple[list[Access], list[Access]]:
        wide = self._elementwise_buffers(index, instr, [instr.dst_buf, instr.src_buf])
        low, high = _RANGE[Buf.ACC] if wide else _INT8
        if not low <= instr.imm <= high:
            raise self._fault(index, instr, f"immediate {instr.imm} does not fit {'int32' if wide else 'int8'}")
        src, src_access = self._block(index, instr, instr.src_buf, instr.src_off, instr.n, "reads")
        dst, dst_access = self._block(index, instr, instr.dst_buf, instr.dst_off, instr.n, "writes")
        dst[:] = self._result(_BINARY[instr.op](src.astype(np.int64), np.int64(instr.imm)), wide)
        return [src_access], [dst_access]

    def _copy(self, index: int, instr: Copy) -> tuple[list[Access], list[Access]]:
        src, src_access = self._block(index, instr, instr.src_buf, instr.src_off, instr.n, "reads")
        dst, dst_access = self._block(index, instr, instr.dst_buf, instr.dst_off, instr.n, "writes")
        dst[:] = self._result(src.astype(np.int64), instr.dst_buf is Buf.ACC)
        return [src_access], [dst_access]

    def _requant(self, index: int, instr: Requant) -> tuple[list[Access], list[Access]]:
        if instr.dst_buf is Buf.ACC:
            raise self._fault(index, instr, "REQUANT writes int8: its destination must be inp, wgt or out")
        if not (-128 <= instr.lo <= instr.hi <= 127 and -128 <= instr.zero <= 127):
            raise self._fault(index, instr, "zero, lo and hi must lie in [-128, 127] with lo <= hi")
        acc, acc_access = self._block(index, instr, Buf.ACC, instr.acc_off, instr.n, "reads")
        raw, param_access = self._block(index, instr, Buf.WGT, instr.param_off, 12 * instr.channels, "reads")
        params = np.frombuffer(raw.tobytes(), dtype="<i4").reshape(instr.channels, 3).astype(np.int64)
        bias, multiplier, shift = params.T
        if (multiplier < 0).any() or (shift < 1).any() or (shift > MAX_SHIFT).any():
            raise self._fault(index, instr, f"parameters at wgt[{instr.param_off}] need multipliers >= 0 and "
                                            f"shifts in [1, {MAX_SHIFT}]; got {params.tolist()[:4]}...")
        channel = np.arange(instr.n) % instr.channels
        scaled = rounding_shift(acc.astype(np.int64) + bias[channel], multiplier[channel], shift[channel])
        dst, dst_access = self._block(index, instr, instr.dst_buf, instr.dst_off, instr.n, "writes")
        dst[:] = np.clip(scaled + instr.zero, instr.lo, instr.hi).astype(np.int8)
        return [acc_access, param_access], [dst_access]

    def _pool(self, index: int, instr: Pool) -> tuple[list[Access], list[Access]]:
        if instr.kind is PoolKind.SUM and instr.dst_buf is not Buf.ACC:
            raise self._fault(index, instr, "a sum pool accumulates in int32: its destination must be acc")
        if instr.kind is PoolKind.MAX and (instr.dst_buf is Buf.ACC) != (instr.src_buf is Buf.ACC):
            raise self._fault(index, instr, "a max pool keeps its element type: source and destination must both "
                                            "be acc or both int8 buffers")
        if instr.kh > instr.h or instr.kw > instr.w or (instr.oh - 1) * instr.sh + instr.kh > instr.h \
                or (instr.ow - 1) * instr.sw + instr.kw > instr.w:
            raise self._fault(index, instr, "the output window runs past the (padded) input; pad it when loading")
        src, src_access = self._block(index, instr, instr.src_buf, instr.src_off, instr.h * instr.w * instr.c, "reads")
        windows = np.lib.stride_tricks.sliding_window_view(
            src.reshape(instr.h, instr.w, instr.c), (instr.kh, instr.kw), axis=(0, 1),
        )[::instr.sh, ::instr.sw][:instr.oh, :instr.ow]
        if instr.kind is PoolKind.MAX:
            result = windows.max(axis=(-2, -1))
        else:
            result = windows.sum(axis=(-2, -1), dtype=np.int64).astype(np.int32)
        dst, dst_access = self._block(index, instr, instr.dst_buf, instr.dst_off, result.size, "writes")
        dst[:] = result.ravel()
        return [src_access], [dst_access]
