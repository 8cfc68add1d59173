"""npu_sim's instruction set: what the compiler emits and the simulator executes.

The machine has a flat little-endian **DRAM** (byte addresses) and four SRAM
buffers, each its own address space with offsets counted in the buffer's elements:
``inp``, ``wgt`` and ``out`` hold int8, ``acc`` holds int32. A block in SRAM is a
contiguous row-major run of elements starting at an offset; how tensors are laid
out in SRAM is the compiler's choice.

Three engines run their own instructions in program order, concurrently:
``load`` (DMA in: :class:`Load`), ``store`` (DMA out: :class:`Store`) and
``compute`` (everything else). They synchronise only through token queues:
:class:`Signal` pushes a token from one engine to another, :class:`Wait` pops one
(stalling until it arrives). The simulator executes in program order and checks
that the timed schedule could not have observed anything else (see ``cycles``).

Arithmetic: int8 results of :class:`Vec` / :class:`VecImm` saturate to
[-128, 127]; int32 results wrap (two's complement), as an accumulator does.
:class:`Copy` widens int8 to int32 and saturates int32 to int8.

Every instruction takes an optional ``tag`` (keyword only): printable text without
``;`` or surrounding spaces that the compiler sets to the graph node an instruction serves,
so timelines and reports can attribute cycles per layer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import ClassVar

from hetero.plugin import SimulationError

#: A 4-D shape, stride or padding: the DMA boxes are always four-dimensional.
Dims = tuple[int, int, int, int]


class Buf(enum.Enum):
    """An SRAM buffer. Offsets into it count its elements (int8 bytes or int32 words)."""

    INP = "inp"
    WGT = "wgt"
    OUT = "out"
    ACC = "acc"

    @property
    def itemsize(self) -> int:
        """Bytes per element: 4 for the int32 accumulator, 1 otherwise."""
        return 4 if self is Buf.ACC else 1


class DType(enum.Enum):
    """Element type of a DMA transfer in DRAM."""

    INT8 = "int8"
    INT32 = "int32"

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return 4 if self is DType.INT32 else 1


class Engine(enum.Enum):
    """The three engines; each runs its own instructions in order."""

    LOAD = "load"
    COMPUTE = "compute"
    STORE = "store"


class VecOp(enum.Enum):
    """Element-wise operation of :class:`Vec` and :class:`VecImm`."""

    ADD = "ADD"
    MUL = "MUL"
    MAX = "MAX"
    MIN = "MIN"


class PoolKind(enum.Enum):
    """``max`` keeps the element type; ``sum`` accumulates into int32 (in ``acc``)."""

    MAX = "max"
    SUM = "sum"


@dataclass(frozen=True)
class Instr:
    """Base of every instruction. ``SYNTAX`` is its assembly template (see ``asm``);
    ``OPCODE`` its binary opcode (see ``encoding``)."""

    OPCODE: ClassVar[int] = -1
    MNEMONIC: ClassVar[str] = ""
    SYNTAX: ClassVar[str] = ""
    tag: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            _check_field(self, f.name, f.type, value)

    @property
    def engine(self) -> Engine:
        """The engine that executes this instruction."""
        return Engine.COMPUTE


@dataclass(frozen=True)
class Load(Instr):
    """DMA a 4-D strided box from DRAM into a contiguous SRAM block, padded.

    ``dims`` is the box's shape, ``strides`` the DRAM byte step of each dimension
    (any integers: a transpose or an NCHW → NHWC change is just strides).
    The SRAM block has shape ``dims + pad_lo + pad_hi`` (per dimension), row-major
    at ``buf[sram_off]``; padding holds ``pad_value``. ``dtype`` is the element type
    in DRAM; into ``acc`` only int32 is loaded; an int32 box loaded into an int8
    buffer lands as its little-endian bytes (how requantisation parameters reach
    ``wgt``), and ``sram_off`` then counts bytes.
    """

    OPCODE: ClassVar[int] = 1
    MNEMONIC: ClassVar[str] = "LOAD"
    SYNTAX: ClassVar[str] = ("{buf}[{sram_off}] <- dram[{dram_addr:x}] {dtype} dims={dims} strides={strides} "
                             "pad_lo={pad_lo} pad_hi={pad_hi} pad={pad_value}")
    buf: Buf
    sram_off: int
    dram_addr: int
    dtype: DType
    dims: Dims
    strides: Dims
    pad_lo: Dims = (0, 0, 0, 0)
    pad_hi: Dims = (0, 0, 0, 0)
    pad_value: int = 0

    @property
    def engine(self) -> Engine:
        return Engine.LOAD


@dataclass(frozen=True)
class Store(Instr):
    """DMA a contiguous SRAM block of shape ``dims`` to a 4-D strided DRAM box.

    The same element-type rules as :class:`Load` (an int8 buffer may hold int32
    bytes); no padding.
    """

    OPCODE: ClassVar[int] = 2
    MNEMONIC: ClassVar[str] = "STORE"
    SYNTAX: ClassVar[str] = "dram[{dram_addr:x}] <- {buf}[{sram_off}] {dtype} dims={dims} strides={strides}"
    buf: Buf
    sram_off: int
    dram_addr: int
    dtype: DType
    dims: Dims
    strides: Dims

    @property
    def engine(self) -> Engine:
        return Engine.STORE


@dataclass(frozen=True)
class Gemm(Instr):
    """``acc[m×n] (= or +=) inp[m×k] @ wgt[k×n]``, int8 × int8 → int32.

    Row i of the input starts at ``inp_off + i·inp_row_stride`` (≥ k, so a
    convolution window is read in place); row i of the result at
    ``acc_off + i·acc_row_stride`` (≥ n, so a channel tile lands inside a wider
    block). The weights are a contiguous k×n block. ``k`` must not exceed the
    array's rows nor ``n`` its columns.
    """

    OPCODE: ClassVar[int] = 3
    MNEMONIC: ClassVar[str] = "GEMM"
    SYNTAX: ClassVar[str] = ("acc[{acc_off}] {accumulate} inp[{inp_off}] @ wgt[{wgt_off}] m={m} k={k} n={n} "
                             "inp_stride={inp_row_stride} acc_stride={acc_row_stride}")
    acc_off: int
    inp_off: int
    wgt_off: int
    m: int
    k: int
    n: int
    inp_row_stride: int
    acc_row_stride: int
    accumulate: bool


@dataclass(frozen=True)
class Vec(Instr):
    """``dst[i] = op(a[i], b[i])`` for i < n. All three in ``acc`` (int32), or all in int8 buffers."""

    OPCODE: ClassVar[int] = 4
    MNEMONIC: ClassVar[str] = "VEC"
    SYNTAX: ClassVar[str] = "{op} {dst_buf}[{dst_off}] <- {a_buf}[{a_off}], {b_buf}[{b_off}] n={n}"
    op: VecOp
    dst_buf: Buf
    dst_off: int
    a_buf: Buf
    a_off: int
    b_buf: Buf
    b_off: int
    n: int


@dataclass(frozen=True)
class VecImm(Instr):
    """``dst[i] = op(src[i], imm)`` for i < n (relu is ``MAX`` with the zero point)."""

    OPCODE: ClassVar[int] = 5
    MNEMONIC: ClassVar[str] = "VECI"
    SYNTAX: ClassVar[str] = "{op} {dst_buf}[{dst_off}] <- {src_buf}[{src_off}], {imm} n={n}"
    op: VecOp
    dst_buf: Buf
    dst_off: int
    src_buf: Buf
    src_off: int
    imm: int
    n: int


@dataclass(frozen=True)
class Copy(Instr):
    """``dst[i] = src[i]`` for i < n, between any buffers (widening or saturating)."""

    OPCODE: ClassVar[int] = 6
    MNEMONIC: ClassVar[str] = "COPY"
    SYNTAX: ClassVar[str] = "{dst_buf}[{dst_off}] <- {src_buf}[{src_off}] n={n}"
    dst_buf: Buf
    dst_off: int
    src_buf: Buf
    src_off: int
    n: int


@dataclass(frozen=True)
class Requant(Instr):
    """``dst[i] = requantize(acc[i] + bias[c], M[c], s[c], zero, lo, hi)``, c = i mod channels.

    The parameters are ``channels`` little-endian int32 triplets (bias, multiplier,
    shift) at byte ``param_off`` of ``wgt``; ``dst_buf`` is an int8 buffer.
    """

    OPCODE: ClassVar[int] = 7
    MNEMONIC: ClassVar[str] = "REQUANT"
    SYNTAX: ClassVar[str] = ("{dst_buf}[{dst_off}] <- acc[{acc_off}] n={n} channels={channels} "
                             "params=wgt[{param_off}] zero={zero} lo={lo} hi={hi}")
    dst_buf: Buf
    dst_off: int
    acc_off: int
    n: int
    channels: int
    param_off: int
    zero: int
    lo: int
    hi: int


@dataclass(frozen=True)
class Pool(Instr):
    """Pool an HWC block ``h×w×c`` (already padded) into ``oh×ow×c`` with a kh×kw window.

    ``max`` writes the source's element type; ``sum`` writes int32 into ``acc``
    (average pooling is a sum followed by :class:`Requant`).
    """

    OPCODE: ClassVar[int] = 8
    MNEMONIC: ClassVar[str] = "POOL"
    SYNTAX: ClassVar[str] = ("{kind} {dst_buf}[{dst_off}] <- {src_buf}[{src_off}] hwc=({h},{w},{c}) "
                             "kernel=({kh},{kw}) stride=({sh},{sw}) out=({oh},{ow})")
    kind: PoolKind
    dst_buf: Buf
    dst_off: int
    src_buf: Buf
    src_off: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    sh: int
    sw: int
    oh: int
    ow: int


@dataclass(frozen=True)
class Signal(Instr):
    """Executed by ``src``: push a token onto the queue from ``src`` to ``dst``."""

    OPCODE: ClassVar[int] = 9
    MNEMONIC: ClassVar[str] = "SIGNAL"
    SYNTAX: ClassVar[str] = "{src} -> {dst}"
    src: Engine
    dst: Engine

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.src is self.dst:
            raise SimulationError(f"SIGNAL {self.src.value} -> {self.dst.value}: an engine cannot signal itself")

    @property
    def engine(self) -> Engine:
        return self.src


@dataclass(frozen=True)
class Wait(Instr):
    """Executed by ``dst``: pop a token from the queue ``src`` → ``dst``, stalling until one arrives.

    The matching :class:`Signal` must come earlier in program order.
    """

    OPCODE: ClassVar[int] = 10
    MNEMONIC: ClassVar[str] = "WAIT"
    SYNTAX: ClassVar[str] = "{src} -> {dst}"
    src: Engine
    dst: Engine

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.src is self.dst:
            raise SimulationError(f"WAIT {self.src.value} -> {self.dst.value}: an engine cannot wait on itself")

    @property
    def engine(self) -> Engine:
        return self.dst


@dataclass(frozen=True)
class Halt(Instr):
    """End of the program; only allowed as the last instruction."""

    OPCODE: ClassVar[int] = 11
    MNEMONIC: ClassVar[str] = "HALT"
    SYNTAX: ClassVar[str] = ""


#: Every instruction class, by opcode and by mnemonic.
INSTRUCTIONS: tuple[type[Instr], ...] = (Load, Store, Gemm, Vec, VecImm, Copy, Requant, Pool, Signal, Wait, Halt)
BY_OPCODE: dict[int, type[Instr]] = {cls.OPCODE: cls for cls in INSTRUCTIONS}
BY_MNEMONIC: dict[str, type[Instr]] = {cls.MNEMONIC: cls for cls in INSTRUCTIONS}

#: Fields that are sizes (at least 1); every other plain int but ``strides``,
#: ``pad_value``, ``imm``, ``zero``, ``lo``, ``hi`` is an offset (at least 0).
_POSITIVE = {"m", "k", "n", "inp_row_stride", "acc_row_stride", "channels", "h", "w", "c", "kh", "kw",
             "sh", "sw", "oh", "ow", "dims"}
_SIGNED = {"strides", "pad_value", "imm", "zero", "lo", "hi"}
_ENUMS = {"Buf": Buf, "DType": DType, "Engine": Engine, "VecOp": VecOp, "PoolKind": PoolKind}


def _check_field(instr: Instr, name: str, kind: str, value: object) -> None:
    where = f"{instr.MNEMONIC}"
    if kind == "str":
        if not isinstance(value, str) or not value.isprintable() or ";" in value or value != value.strip():
            raise SimulationError(
                f"{where}: tag must be printable text without ';' or surrounding spaces, got {value!r}"
            )
        return
    if kind in _ENUMS:
        if not isinstance(value, _ENUMS[kind]):
            raise SimulationError(f"{where}: {name} must be a {kind}, got {value!r}")
        return
    if kind == "bool":
        if not isinstance(value, bool):
            raise SimulationError(f"{where}: {name} must be a bool, got {value!r}")
        return
    items = value if kind == "Dims" else (value,)
    if kind == "Dims" and not (isinstance(value, tuple) and len(value) == 4):
        raise SimulationError(f"{where}: {name} must be a tuple of 4 integers, got {value!r}")
    low = 1 if name in _POSITIVE else (None if name in _SIGNED else 0)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or not -2**63 <= item < 2**63:
            raise SimulationError(f"{where}: {name} must hold 64-bit integers, got {value!r}")
        if low is not None and item < low:
            raise SimulationError(f"{where}: {name} must be >= {low}, got {value!r}")
