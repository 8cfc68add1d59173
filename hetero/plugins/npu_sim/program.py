"""A complete npu_sim program: instructions, the DRAM image they start from, and their I/O.

:class:`Program` is what the compiler produces and the artifact a compiled part
saves: :meth:`Program.to_bytes` / :meth:`Program.from_bytes` round-trip exactly.
The byte form is ``b"NPUP"``, a ``u16`` version, a ``u32`` length and that many
bytes of JSON (DRAM size, segment addresses and lengths, bindings), then the
segments' bytes in order, then the instruction stream of ``encoding``.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import numpy as np

from hetero.plugin import SimulationError
from hetero.plugins.npu_sim.asm import format_program
from hetero.plugins.npu_sim.encoding import decode, encode
from hetero.plugins.npu_sim.isa import Halt, Instr

MAGIC = b"NPUP"
VERSION = 1
_HEADER = struct.Struct("<4sHI")
_DTYPES = ("int8", "int32")


@dataclass(frozen=True)
class Binding:
    """A named tensor in DRAM: C-contiguous ``shape`` of ``dtype`` (int8 or int32) at ``dram_addr``."""

    name: str
    dram_addr: int
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.dtype not in _DTYPES or self.dram_addr < 0 or any(d < 0 for d in self.shape):
            raise SimulationError(
                f"binding {self.name!r}: needs dtype in {_DTYPES}, a DRAM address >= 0 and a shape of sizes >= 0, "
                f"got {self.dtype!r} at {self.dram_addr} shape {self.shape}"
            )

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies in DRAM."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Segment:
    """Initial DRAM contents (weights, requantisation parameters): ``data`` at byte ``addr``."""

    addr: int
    data: bytes


@dataclass(frozen=True)
class Program:
    """Instructions plus the DRAM they run against: ``dram_size`` bytes, zero but for
    ``segments``; ``inputs`` are written into DRAM before the run, ``outputs`` read after.

    Every segment and binding must lie inside DRAM (checked here).
    """

    instrs: tuple[Instr, ...]
    dram_size: int
    segments: tuple[Segment, ...] = ()
    inputs: tuple[Binding, ...] = ()
    outputs: tuple[Binding, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "instrs", tuple(self.instrs))
        object.__setattr__(self, "segments", tuple(self.segments))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if self.dram_size < 0:
            raise SimulationError(f"program: dram_size must be >= 0, got {self.dram_size}")
        for seg in self.segments:
            if seg.addr < 0 or seg.addr + len(seg.data) > self.dram_size:
                raise SimulationError(
                    f"program: segment of {len(seg.data)} bytes at {seg.addr:#x} lies outside DRAM of {self.dram_size} bytes"
                )
        for binding in self.inputs + self.outputs:
            if binding.dram_addr + binding.nbytes > self.dram_size:
                raise SimulationError(
                    f"program: tensor {binding.name!r} ({binding.nbytes} bytes at {binding.dram_addr:#x}) "
                    f"lies outside DRAM of {self.dram_size} bytes"
                )
        for i, instr in enumerate(self.instrs[:-1]):
            if isinstance(instr, Halt):
                raise SimulationError(f"program: HALT #{i} is not the last instruction; nothing may follow it")

    def assembly(self) -> str:
        """The instructions as assembly text."""
        return format_program(self.instrs)

    def to_bytes(self) -> bytes:
        """The program's artifact form."""
        meta = {
            "dram_size": self.dram_size,
            "segments": [[seg.addr, len(seg.data)] for seg in self.segments],
            "inputs": [_binding_json(b) for b in self.inputs],
            "outputs": [_binding_json(b) for b in self.outputs],
        }
        blob = json.dumps(meta, separators=(",", ":")).encode()
        parts = [_HEADER.pack(MAGIC, VERSION, len(blob)), blob]
        parts += [seg.data for seg in self.segments]
        parts.append(encode(self.instrs))
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> Program:
        """The program :meth:`to_bytes` wrote; SimulationError naming the byte offset if corrupt."""
        if len(data) < _HEADER.size:
            raise SimulationError(f"npu_sim program: truncated at byte {len(data)}: the header needs {_HEADER.size}")
        magic, version, length = _HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise SimulationError(f"npu_sim program: bad magic {magic!r} at byte 0 (expected {MAGIC!r})")
        if version != VERSION:
            raise SimulationError(f"npu_sim program: version {version} at byte 4; this simulator reads {VERSION}")
        pos = _HEADER.size
        try:
            meta = json.loads(data[pos:pos + length].decode())
            pos += length
            segments = []
            for addr, size in meta["segments"]:
                if pos + size > len(data):
                    raise SimulationError(f"npu_sim program: truncated at byte {len(data)} inside a segment at byte {pos}")
                segments.append(Segment(addr, bytes(data[pos:pos + size])))
                pos += size
            inputs = tuple(Binding(n, a, tuple(s), d) for n, a, s, d in meta["inputs"])
            outputs = tuple(Binding(n, a, tuple(s), d) for n, a, s, d in meta["outputs"])
            dram_size = meta["dram_size"]
        except (ValueError, KeyError, TypeError) as err:
            raise SimulationError(f"npu_sim program: corrupt metadata at byte {_HEADER.size}: {err}") from None
        return cls(tuple(decode(data, pos)), dram_size, tuple(segments), inputs, outputs)


def _binding_json(binding: Binding) -> list:
    return [binding.name, binding.dram_addr, list(binding.shape), binding.dtype]
