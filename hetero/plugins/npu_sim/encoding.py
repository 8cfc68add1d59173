"""npu_sim's binary instruction encoding: a fixed little-endian layout per opcode.

A stream is a header — the magic ``b"NPUI"``, a ``u16`` version, a ``u32``
instruction count — then each instruction: its ``u8`` opcode, its fields in
declaration order (enums and bools as ``u8``, integers as ``i64``, 4-D tuples as
four ``i64``), and its tag as a ``u16`` byte length plus UTF-8. :func:`decode`
inverts :func:`encode` exactly; a stream that is truncated, corrupt or of another
version is a SimulationError naming the byte offset.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import fields

from hetero.plugin import SimulationError
from hetero.plugins.npu_sim.isa import _ENUMS, BY_OPCODE, Instr

MAGIC = b"NPUI"
VERSION = 1
_HEADER = struct.Struct("<4sHI")
_TAG_LEN = struct.Struct("<H")


def encode(instrs: Sequence[Instr]) -> bytes:
    """The binary form of ``instrs``."""
    out = [_HEADER.pack(MAGIC, VERSION, len(instrs))]
    for instr in instrs:
        layout, kinds = _layout(type(instr))
        values: list[int] = []
        for name, kind in kinds:
            value = getattr(instr, name)
            if kind in _ENUMS:
                values.append(list(_ENUMS[kind]).index(value))
            elif kind == "Dims":
                values.extend(value)
            else:
                values.append(int(value))
        tag = instr.tag.encode()
        out += [bytes([instr.OPCODE]), layout.pack(*values), _TAG_LEN.pack(len(tag)), tag]
    return b"".join(out)


def decode(data: bytes, offset: int = 0) -> list[Instr]:
    """Instructions from the binary stream starting at ``offset``; the stream must end the data."""
    instrs, end = decode_prefix(data, offset)
    if end != len(data):
        raise SimulationError(f"npu_sim binary: {len(data) - end} unexpected bytes after the last instruction at byte {end}")
    return instrs


def decode_prefix(data: bytes, offset: int = 0) -> tuple[list[Instr], int]:
    """Instructions from the stream at ``offset``, and the offset just past it."""
    magic, version, count = _unpack(_HEADER, data, offset, "header")
    if magic != MAGIC:
        raise SimulationError(f"npu_sim binary: bad magic {magic!r} at byte {offset} (expected {MAGIC!r})")
    if version != VERSION:
        raise SimulationError(f"npu_sim binary: version {version} at byte {offset + 4}; this simulator reads {VERSION}")
    pos = offset + _HEADER.size
    instrs: list[Instr] = []
    for index in range(count):
        start = pos
        if pos >= len(data):
            raise SimulationError(f"npu_sim binary: truncated at byte {pos}: instruction #{index} of {count} is missing")
        cls = BY_OPCODE.get(data[pos])
        if cls is None:
            raise SimulationError(f"npu_sim binary: unknown opcode {data[pos]} at byte {pos} (instruction #{index})")
        layout, kinds = _layout(cls)
        raw = list(_unpack(layout, data, pos + 1, f"{cls.MNEMONIC} #{index}"))
        pos += 1 + layout.size
        (length,) = _unpack(_TAG_LEN, data, pos, f"{cls.MNEMONIC} #{index} tag")
        pos += _TAG_LEN.size
        if pos + length > len(data):
            raise SimulationError(f"npu_sim binary: truncated at byte {len(data)} inside the tag of {cls.MNEMONIC} #{index}")
        try:
            tag = data[pos:pos + length].decode()
        except UnicodeDecodeError:
            raise SimulationError(f"npu_sim binary: tag of {cls.MNEMONIC} #{index} at byte {pos} is not UTF-8") from None
        pos += length
        values: dict[str, object] = {}
        for name, kind in kinds:
            if kind in _ENUMS:
                members = list(_ENUMS[kind])
                code = raw.pop(0)
                if code >= len(members):
                    raise SimulationError(f"npu_sim binary: {cls.MNEMONIC} #{index} at byte {start}: "
                                          f"{name} code {code} is not a {kind}")
                values[name] = members[code]
            elif kind == "bool":
                code = raw.pop(0)
                if code > 1:
                    raise SimulationError(f"npu_sim binary: {cls.MNEMONIC} #{index} at byte {start}: "
                                          f"{name} byte {code} is not 0 or 1")
                values[name] = bool(code)
            elif kind == "Dims":
                values[name] = tuple(raw[:4])
                del raw[:4]
            else:
                values[name] = raw.pop(0)
        try:
            instrs.append(cls(**values, tag=tag))
        except SimulationError as err:
            raise SimulationError(f"npu_sim binary: {cls.MNEMONIC} #{index} at byte {start}: {err}") from None
    return instrs, pos


def _unpack(layout: struct.Struct, data: bytes, pos: int, what: str) -> tuple:
    if pos + layout.size > len(data):
        raise SimulationError(
            f"npu_sim binary: truncated at byte {len(data)}: the {what} at byte {pos} needs {layout.size} bytes"
        )
    return layout.unpack_from(data, pos)


@functools.cache
def _layout(cls: type[Instr]) -> tuple[struct.Struct, tuple[tuple[str, str], ...]]:
    kinds = tuple((f.name, str(f.type)) for f in fields(cls) if f.name != "tag")
    codes = {"bool": "B", "Dims": "4q", "int": "q"}
    fmt = "<" + "".join("B" if kind in _ENUMS else codes[kind] for _, kind in kinds)
    return struct.Struct(fmt), kinds
