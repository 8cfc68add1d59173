"""npu_sim's assembly: one instruction a line, parsed and printed from each class's ``SYNTAX``.

A line is ``MNEMONIC operands`` with an optional ``; tag`` at the end; blank lines
and lines starting with ``#`` are skipped. Operands follow the class's template:
buffers print as ``inp``/``wgt``/``out``/``acc``, DRAM addresses in hex, 4-D
tuples as ``(a,b,c,d)``, GEMM's ``accumulate`` as ``+=`` (true) or ``=``::

    LOAD inp[0] <- dram[0x1000] int8 dims=(1,16,16,32) strides=(8192,512,32,1) pad_lo=(0,1,1,0) pad_hi=(0,1,1,0) pad=-3
    GEMM acc[0] += inp[0] @ wgt[0] m=16 k=32 n=32 inp_stride=32 acc_stride=32 ; conv1
    SIGNAL compute -> load

:func:`parse` and :func:`format_program` are inverses: ``parse(format_program(p)) == p``.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Sequence
from dataclasses import fields

from hetero.plugin import SimulationError
from hetero.plugins.npu_sim.isa import _ENUMS, BY_MNEMONIC, Instr

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(x))?\}")
_INT = r"-?(?:0[xX][0-9a-fA-F]+|\d+)"


def format_instr(instr: Instr) -> str:
    """The assembly line of one instruction."""
    kinds = _kinds(type(instr))

    def render(match: re.Match[str]) -> str:
        name, hexa = match[1], match[2]
        value = getattr(instr, name)
        kind = kinds[name]
        if kind in _ENUMS:
            return str(value.value)
        if kind == "bool":
            return "+=" if value else "="
        if kind == "Dims":
            return "(" + ",".join(str(v) for v in value) + ")"
        return hex(value) if hexa else str(value)

    operands = _PLACEHOLDER.sub(render, instr.SYNTAX)
    line = f"{instr.MNEMONIC} {operands}" if operands else instr.MNEMONIC
    return f"{line} ; {instr.tag}" if instr.tag else line


def format_program(instrs: Sequence[Instr]) -> str:
    """The assembly text of a list of instructions, one a line, ending in a newline."""
    return "".join(format_instr(instr) + "\n" for instr in instrs)


def parse(text: str) -> list[Instr]:
    """Instructions from assembly text; a malformed line is a SimulationError naming it."""
    instrs: list[Instr] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instrs.append(_parse_line(line, lineno))
    return instrs


def _parse_line(line: str, lineno: int) -> Instr:
    body, _, tag = line.partition(";")
    body, tag = body.strip(), tag.strip()
    mnemonic, _, operands = body.partition(" ")
    cls = BY_MNEMONIC.get(mnemonic.upper())
    if cls is None:
        raise SimulationError(
            f"assembly line {lineno}: unknown mnemonic {mnemonic!r} in {line!r}; "
            f"the mnemonics are {sorted(BY_MNEMONIC)}"
        )
    match = _regex(cls).fullmatch(operands.strip())
    if match is None:
        raise SimulationError(
            f"assembly line {lineno}: {line!r} does not read as {cls.MNEMONIC} {cls.SYNTAX}".rstrip()
        )
    kinds = _kinds(cls)
    values: dict[str, object] = {}
    for name, text in match.groupdict().items():
        kind = kinds[name]
        if kind in _ENUMS:
            values[name] = _ENUMS[kind](text)
        elif kind == "bool":
            values[name] = text == "+="
        elif kind == "Dims":
            values[name] = tuple(int(v, 0) for v in text.strip("()").split(","))
        else:
            values[name] = int(text, 0)
    try:
        return cls(**values, tag=tag)
    except SimulationError as err:
        raise SimulationError(f"assembly line {lineno}: {line!r}: {err}") from None


@functools.cache
def _kinds(cls: type[Instr]) -> dict[str, str]:
    return {f.name: str(f.type) for f in fields(cls)}


@functools.cache
def _regex(cls: type[Instr]) -> re.Pattern[str]:
    kinds = _kinds(cls)
    parts: list[str] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(cls.SYNTAX):
        parts.append(_literal(cls.SYNTAX[pos:match.start()]))
        parts.append(f"(?P<{match[1]}>{_operand(kinds[match[1]])})")
        pos = match.end()
    parts.append(_literal(cls.SYNTAX[pos:]))
    return re.compile("".join(parts))


def _literal(text: str) -> str:
    return r"\s+".join(re.escape(word) for word in text.split(" "))


def _operand(kind: str) -> str:
    if kind in _ENUMS:
        members: type[enum.Enum] = _ENUMS[kind]
        return "|".join(re.escape(str(m.value)) for m in members)
    if kind == "bool":
        return r"\+=|="
    if kind == "Dims":
        return r"\(\s*" + r"\s*,\s*".join([_INT] * 4) + r"\s*\)"
    return _INT
