"""The compiler's program builder: DRAM layout, constant segments, and the pipelined step protocol.

Every tensor lives in DRAM as a :class:`Loc`: a C-contiguous block whose physical
axis order is a permutation of its logical axes (graph inputs and outputs are
row-major, convolution results NHWC, which the DMA and the matrix unit read
naturally), or a box of such a block (a Concat's input placed in its output).
Producers and consumers address any tensor through its byte strides, so a change of
layout costs nothing but strides.

The SRAM buffers ``inp``, ``wgt`` and ``out`` are split into ``slots`` equal
parts (two when double-buffered). Every layer is a sequence of *steps*: the load
engine fills the step's ``inp``/``wgt`` slot, the compute engine works on it and may
fill an ``out`` slot, the store engine drains that. Tokens between the engines
(the VTA pattern) let step i+1 load while step i computes and step i−1 stores, and
keep a slot from being refilled before its last reader has finished.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hetero.plugin import Value
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.isa import (
    Buf,
    DType,
    Engine,
    Halt,
    Instr,
    Load,
    Signal,
    Store,
    Wait,
)
from hetero.plugins.npu_sim.program import Binding, Program, Segment

if TYPE_CHECKING:
    from hetero.plugins.npu_sim.compiler.conv_plan import Tiling

_ALIGN = 64


@dataclass(frozen=True)
class Loc:
    """A tensor in DRAM: logical ``shape`` at ``addr``, its element strides those of a block of
    logical shape ``frame`` stored C-contiguously in axis order ``perm``.

    A tensor that owns its block has ``frame`` equal to ``shape`` and ``origin`` all zeros
    (the defaults). A view (see :meth:`view`) is a box of a larger block, such as one input's
    slice of a Concat's output: ``origin`` is where its first element sits in the frame, and
    ``addr`` that element's address, so every emitter addresses it like any other tensor.
    """

    addr: int
    shape: tuple[int, ...]
    perm: tuple[int, ...]
    itemsize: int = 1
    frame: tuple[int, ...] | None = None
    origin: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # A box that is its whole frame is an ordinary tensor: one spelling, so equal Locs mean equal memory.
        if self.frame == self.shape and not any(self.origin or ()):
            object.__setattr__(self, "frame", None)
            object.__setattr__(self, "origin", None)

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """The logical shape of the block the tensor lies in."""
        return self.shape if self.frame is None else self.frame

    @property
    def start(self) -> tuple[int, ...]:
        """The tensor's first element, as an index into its frame."""
        return (0,) * len(self.shape) if self.origin is None else self.origin

    @property
    def physical_shape(self) -> tuple[int, ...]:
        """The block as stored: the frame's shape permuted by ``perm``."""
        return tuple(self.frame_shape[p] for p in self.perm)

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte stride of each logical axis."""
        strides = [0] * len(self.shape)
        step = self.itemsize
        for axis in reversed(self.perm):
            strides[axis] = step
            step *= self.frame_shape[axis]
        return tuple(strides)

    @property
    def base(self) -> int:
        """Address of the block's first element (``addr`` unless this is a view)."""
        return self.addr - sum(i * st for i, st in zip(self.start, self.strides))

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies."""
        return math.prod(self.shape) * self.itemsize

    def view(self, axis: int, offset: int, size: int) -> Loc:
        """The ``size`` elements from ``offset`` along ``axis``, as a view into this tensor's block."""
        shape = self.shape[:axis] + (size,) + self.shape[axis + 1:]
        origin = tuple(o + (offset if a == axis else 0) for a, o in enumerate(self.start))
        return Loc(self.addr + offset * self.strides[axis], shape, self.perm, self.itemsize, self.frame_shape,
                   origin)

    def extract(self, block: np.ndarray) -> np.ndarray:
        """The tensor, in logical axis order, out of ``block``: its frame as stored (``physical_shape``)."""
        logical = np.transpose(block, np.argsort(self.perm))
        return np.ascontiguousarray(logical[tuple(slice(o, o + d) for o, d in zip(self.start, self.shape))])


def row_major(rank: int) -> tuple[int, ...]:
    """The identity axis order."""
    return tuple(range(rank))


#: NCHW tensors stored as NHWC.
NHWC = (0, 2, 3, 1)


class ProgramBuilder:
    """Accumulates instructions, DRAM allocations and segments; :meth:`finish` makes the Program.

    ``tilings`` are tuned tilings by tiling problem
    (:func:`~hetero.plugins.npu_sim.compiler.conv_plan.problem_key`), which
    :func:`~hetero.plugins.npu_sim.compiler.conv_plan.choose_tiling` prefers to its own choice
    when they fit.
    """

    def __init__(self, config: NpuConfig, *, double_buffer: bool = True,
                 tilings: Mapping[str, Tiling] | None = None) -> None:
        self.config = config
        self.slots = 2 if double_buffer else 1
        self.tilings = dict(tilings or {})
        self.instrs: list[Instr] = []
        self.segments: list[Segment] = []
        self.dram_top = 0
        self.locs: dict[str, Loc] = {}
        self.tag = ""
        self._constants: dict[bytes, int] = {}
        self._steps = 0
        self._out_tiles = 0
        self._layers = 0

    # -- DRAM ---------------------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        """A fresh, aligned DRAM range of ``nbytes``; its address."""
        addr = self.dram_top
        self.dram_top = -(-(addr + max(nbytes, 1)) // _ALIGN) * _ALIGN
        return addr

    def place(self, value: Value, perm: tuple[int, ...]) -> Loc:
        """Allocate DRAM for ``value`` stored in axis order ``perm``."""
        loc = Loc(self.alloc(math.prod(value.shape)), tuple(value.shape), perm)
        self.locs[value.name] = loc
        return loc

    def constant(self, data: np.ndarray) -> int:
        """Place ``data`` (int8 or int32, written little-endian) in DRAM once; its address."""
        raw = np.ascontiguousarray(data, dtype=np.dtype(data.dtype).newbyteorder("<")).tobytes()
        if raw not in self._constants:
            addr = self.alloc(len(raw))
            self.segments.append(Segment(addr, raw))
            self._constants[raw] = addr
        return self._constants[raw]

    def loc(self, value: Value) -> Loc:
        """Where ``value`` lives; a constant read as an activation gets a row-major segment."""
        if value.name not in self.locs:
            if value.data is None:
                raise KeyError(value.name)
            data = np.asarray(value.data, dtype=np.int8)
            self.locs[value.name] = Loc(self.constant(data), tuple(data.shape), row_major(data.ndim))
        return self.locs[value.name]

    # -- SRAM slots ---------------------------------------------------------------------

    def slot_size(self, buf: str) -> int:
        """Elements (bytes) of one slot of ``buf``; the accumulator is not slotted."""
        if buf == "acc":
            return self.config.capacity("acc")
        return self.config.capacity(buf) // self.slots

    def slot_base(self, buf: str, slot: int) -> int:
        """First element of slot ``slot`` of ``buf``."""
        return slot * self.slot_size(buf)

    # -- emission -----------------------------------------------------------------------

    def emit(self, instr: Instr) -> None:
        """Append ``instr`` (already tagged by the caller's :attr:`tag`)."""
        self.instrs.append(instr)

    def begin_layer(self, tag: str) -> None:
        """Start a node's code: later instructions carry ``tag``, and its loads wait for earlier stores."""
        if self._layers:
            # Loads of this layer may read what the previous one stored: a DRAM barrier.
            self.instrs.append(Signal(Engine.STORE, Engine.LOAD, tag=self.tag))
            self.instrs.append(Wait(Engine.STORE, Engine.LOAD, tag=tag))
        self._layers += 1
        self.tag = tag

    def dram_barrier(self) -> None:
        """Later loads wait until every store emitted so far has finished (they may read what it wrote)."""
        self.instrs.append(Signal(Engine.STORE, Engine.LOAD, tag=self.tag))
        self.instrs.append(Wait(Engine.STORE, Engine.LOAD, tag=self.tag))

    def begin_step(self) -> int:
        """Open a step on the load engine; the slot its loads fill (waits until it is free)."""
        if self._steps >= self.slots:
            self.emit(Wait(Engine.COMPUTE, Engine.LOAD, tag=self.tag))
        slot = self._steps % self.slots
        self._steps += 1
        return slot

    def load(self, buf: Buf, sram_off: int, addr: int, dims: tuple[int, ...], strides: tuple[int, ...], *,
             dtype: DType = DType.INT8, pad_lo: tuple[int, ...] = (0, 0, 0, 0),
             pad_hi: tuple[int, ...] = (0, 0, 0, 0), pad_value: int = 0) -> None:
        """A DMA load of a 4-D box (shorter ``dims`` are padded with leading ones)."""
        dims4, strides4 = _four(dims, strides)
        self.emit(Load(buf, sram_off, addr, dtype, dims4, strides4, tuple(pad_lo), tuple(pad_hi), pad_value,
                       tag=self.tag))

    def load_params(self, slot: int, offset: int, params: np.ndarray) -> int:
        """Put int32 ``params`` (requantisation triplets) in DRAM and load them to ``wgt``; the byte offset."""
        addr = self.constant(np.asarray(params, dtype=np.int32))
        sram = self.slot_base("wgt", slot) + offset
        self.load(Buf.WGT, sram, addr, (params.size,), (4,), dtype=DType.INT32)
        return sram

    def start_compute(self) -> None:
        """Hand the step from the load engine to compute."""
        self.emit(Signal(Engine.LOAD, Engine.COMPUTE, tag=self.tag))
        self.emit(Wait(Engine.LOAD, Engine.COMPUTE, tag=self.tag))

    def begin_output(self) -> int:
        """On compute: the ``out`` slot the next result goes to (waits until the store engine drained it)."""
        if self._out_tiles >= self.slots:
            self.emit(Wait(Engine.STORE, Engine.COMPUTE, tag=self.tag))
        slot = self._out_tiles % self.slots
        self._out_tiles += 1
        return slot

    def store_output(self, sram_off: int, addr: int, dims: tuple[int, ...], strides: tuple[int, ...]) -> None:
        """Hand the ``out`` block to the store engine, store it, and free its slot."""
        self.emit(Signal(Engine.COMPUTE, Engine.STORE, tag=self.tag))
        self.emit(Wait(Engine.COMPUTE, Engine.STORE, tag=self.tag))
        dims4, strides4 = _four(dims, strides)
        self.emit(Store(Buf.OUT, sram_off, addr, DType.INT8, dims4, strides4, tag=self.tag))
        self.emit(Signal(Engine.STORE, Engine.COMPUTE, tag=self.tag))

    def end_step(self) -> None:
        """Compute is done with the step's ``inp``/``wgt`` slot: the load engine may refill it."""
        self.emit(Signal(Engine.COMPUTE, Engine.LOAD, tag=self.tag))

    def finish(self, inputs: list[Value], outputs: list[Value]) -> Program:
        """The Program: instructions and HALT, DRAM image, input and output bindings."""
        bindings = []
        for values in (inputs, outputs):
            bindings.append(tuple(Binding(v.name, self.locs[v.name].addr, v.shape, "int8") for v in values))
        instrs = tuple(self.instrs) + (Halt(tag=self.tag),)
        return Program(instrs, self.dram_top, tuple(self.segments), bindings[0], bindings[1])


def _four(dims: tuple[int, ...], strides: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    pad = 4 - len(dims)
    return (1,) * pad + tuple(int(d) for d in dims), (0,) * pad + tuple(int(s) for s in strides)


def box_tiles(dims: tuple[int, ...], capacity: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Split a box into sub-boxes of at most ``capacity`` elements, each a contiguous run of
    the box's row-major order: inner axes whole, one axis chunked, outer axes one at a time.

    Returns (start, size) pairs per axis.
    """
    rank = len(dims)
    inner, split = 1, -1
    for axis in range(rank - 1, -1, -1):
        if inner * dims[axis] > capacity:
            split = axis
            break
        inner *= dims[axis]
    if split < 0:
        return [(tuple(0 for _ in dims), tuple(dims))]
    chunk = max(1, capacity // inner)
    ranges = [[(i, 1) for i in range(dims[a])] for a in range(split)]
    ranges.append([(i, min(chunk, dims[split] - i)) for i in range(0, dims[split], chunk)])
    ranges += [[(0, dims[a])] for a in range(split + 1, rank)]
    tiles = [((), ())]
    for axis_ranges in ranges:
        tiles = [(s + (r[0],), z + (r[1],)) for s, z in tiles for r in axis_ranges]
    return tiles
