"""npu_sim's assembly and binary forms round-trip exactly; corrupt input is a named error."""

from dataclasses import fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins.npu_sim.npu_programs import matmul_program

from hetero.errors import SimulationError
from hetero.plugins.npu_sim.asm import format_program, parse
from hetero.plugins.npu_sim.encoding import decode, encode
from hetero.plugins.npu_sim.isa import (
    INSTRUCTIONS,
    Buf,
    DType,
    Engine,
    Halt,
    Instr,
    PoolKind,
    Signal,
    VecOp,
    Wait,
)
from hetero.plugins.npu_sim.program import Binding, Program, Segment

_ENUMS = {"Buf": Buf, "DType": DType, "Engine": Engine, "VecOp": VecOp, "PoolKind": PoolKind}
_I64 = st.integers(-2**63, 2**63 - 1)
_SIGNED = {"strides", "pad_value", "imm", "zero", "lo", "hi"}
_POSITIVE = {"m", "k", "n", "inp_row_stride", "acc_row_stride", "channels", "h", "w", "c", "kh", "kw",
             "sh", "sw", "oh", "ow", "dims"}
_TAGS = st.text(st.characters(blacklist_characters=";"), max_size=12).map(str.strip).filter(str.isprintable)


def _field(name: str, kind: str) -> st.SearchStrategy:
    if kind in _ENUMS:
        return st.sampled_from(list(_ENUMS[kind]))
    if kind == "bool":
        return st.booleans()
    scalar = _I64 if name in _SIGNED else st.integers(1 if name in _POSITIVE else 0, 2**63 - 1)
    return st.tuples(scalar, scalar, scalar, scalar) if kind == "Dims" else scalar


def _instr(cls: type[Instr]) -> st.SearchStrategy:
    kwargs = {f.name: (_TAGS if f.name == "tag" else _field(f.name, str(f.type))) for f in fields(cls)}
    strategy = st.fixed_dictionaries(kwargs)
    if cls in (Signal, Wait):
        strategy = strategy.filter(lambda kw: kw["src"] is not kw["dst"])
    return strategy.map(lambda kw: cls(**kw))


_PROGRAMS = st.lists(st.one_of([_instr(cls) for cls in INSTRUCTIONS if cls is not Halt]), max_size=8) \
    .map(lambda instrs: instrs + [Halt()])


@settings(max_examples=100, deadline=None)
@given(_PROGRAMS)
def test_assembly_round_trips(instrs: list[Instr]) -> None:
    text = format_program(instrs)
    assert parse(text) == instrs
    assert format_program(parse(text)) == text


@settings(max_examples=100, deadline=None)
@given(_PROGRAMS)
def test_binary_round_trips(instrs: list[Instr]) -> None:
    assert decode(encode(instrs)) == instrs


def test_assembly_reads_comments_tags_and_loose_spacing() -> None:
    text = """
    # a comment
    GEMM   acc[0]  +=  inp[16] @ wgt[0] m=2 k=8 n=8 inp_stride=8 acc_stride=8 ; conv1/gemm
    LOAD inp[0] <- dram[0x1000] int8 dims=(1, 16, 16, 32) strides=(8192,512,32,1) pad_lo=(0,1,1,0) pad_hi=(0,1,1,0) pad=-3
    """
    gemm, load = parse(text)
    assert gemm.accumulate and gemm.inp_off == 16 and gemm.tag == "conv1/gemm"
    assert load.dram_addr == 0x1000 and load.dims == (1, 16, 16, 32) and load.pad_value == -3


@pytest.mark.parametrize("line, message", [
    ("FROB inp[0]", r"line 1: unknown mnemonic 'FROB'"),
    ("GEMM acc[0] += inp[0] @ wgt[0] m=2 k=8", r"line 1: .* does not read as GEMM"),
    ("GEMM acc[0] = inp[0] @ wgt[0] m=0 k=8 n=8 inp_stride=8 acc_stride=8", r"line 1: .*m must be >= 1"),
    ("SIGNAL load -> load", r"cannot signal itself"),
])
def test_bad_assembly_names_the_line(line: str, message: str) -> None:
    with pytest.raises(SimulationError, match=message):
        parse(line)


def test_truncated_binary_names_the_byte_offset() -> None:
    data = encode(matmul_program(2).instrs)
    for cut in (3, 10, 11, 40, len(data) - 1):
        with pytest.raises(SimulationError, match=r"truncated at byte \d+"):
            decode(data[:cut])


def test_corrupt_binary_names_the_byte_offset() -> None:
    data = bytearray(encode(matmul_program(1).instrs))
    with pytest.raises(SimulationError, match=r"bad magic .* at byte 0"):
        decode(b"XXXX" + bytes(data[4:]))
    with pytest.raises(SimulationError, match=r"version 9 at byte 4"):
        decode(bytes(data[:4]) + b"\x09\x00" + bytes(data[6:]))
    bad_opcode = bytearray(data)
    bad_opcode[10] = 0xEE
    with pytest.raises(SimulationError, match=r"unknown opcode 238 at byte 10"):
        decode(bytes(bad_opcode))
    bad_buffer = bytearray(data)
    bad_buffer[11] = 7
    with pytest.raises(SimulationError, match=r"LOAD #0 at byte 10: buf code 7 is not a Buf"):
        decode(bytes(bad_buffer))
    with pytest.raises(SimulationError, match=r"unexpected bytes"):
        decode(bytes(data) + b"\x00")


def test_program_artifact_round_trips_and_rejects_corruption() -> None:
    program = matmul_program(3)
    program = Program(program.instrs, program.dram_size, (Segment(0x900, bytes(range(40))),),
                      program.inputs, program.outputs)
    again = Program.from_bytes(program.to_bytes())
    assert again == program
    assert again.assembly() == program.assembly()
    with pytest.raises(SimulationError, match=r"bad magic"):
        Program.from_bytes(b"NOPE" + program.to_bytes()[4:])
    with pytest.raises(SimulationError, match=r"truncated"):
        Program.from_bytes(program.to_bytes()[:-3])


def test_program_rejects_bindings_outside_dram_and_misplaced_halt() -> None:
    with pytest.raises(SimulationError, match=r"tensor 'x' .* outside DRAM of 16 bytes"):
        Program((), 16, inputs=(Binding("x", 8, (3, 4), "int8"),))
    with pytest.raises(SimulationError, match=r"HALT #0 is not the last"):
        Program((Halt(), Signal(Engine.LOAD, Engine.STORE)), 16)
    assert np.dtype(Binding("y", 0, (2,), "int32").dtype).itemsize == 4
