"""Traces: every primitive recorded, replayed on a fresh function, tuned, and kept as JSON."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schedcheck import chain, matmul, same_numbers

from hetero.core.ir.tir import verify_func
from hetero.core.schedule import BlockRef, Instruction, LoopRef, Schedule, Trace
from hetero.errors import ScheduleError


def scheduled_matmul() -> Schedule:
    """A schedule using most primitives: cache stages, tiling, compute_at and loop kinds."""
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    x_shared = sch.cache_read(y, "X", "shared")
    sch.cache_write(y, "local")
    i, j, r = sch.get_loops(y)
    i0, _j0, _i1, _j1 = sch.tile([i, j], [2, 4])
    sch.compute_at(x_shared, i0)
    sch.parallel(i0)
    _r0, r1 = sch.split(r, [None, 4])
    sch.unroll(r1)
    sch.vectorize(sch.get_loops(sch.get_block("Y_local"))[-1])
    return sch


def test_every_primitive_is_recorded_with_its_inputs_and_decisions() -> None:
    trace = scheduled_matmul().trace
    assert [ins.kind for ins in trace.instructions] == [
        "cache_read", "cache_write", "split", "split", "reorder", "compute_at", "parallel", "split",
        "unroll", "vectorize"]
    assert trace.instructions[0] == Instruction("cache_read", (BlockRef("Y"),), {"buffer": "X", "scope": "shared"})
    assert trace.instructions[2] == Instruction("split", (LoopRef("Y", "i"),), {}, {"factors": [3, 2]})
    assert trace.decisions == {2: {"factors": [3, 2]}, 3: {"factors": [2, 4]}, 7: {"factors": [2, 4]}}


def test_replay_reproduces_the_function_and_each_step_verifies() -> None:
    sch = scheduled_matmul()
    replayed = Schedule(matmul())
    for ins in sch.trace.instructions:
        getattr(replayed, ins.kind)(*ins.inputs, **ins.attrs, **ins.decisions)
        verify_func(replayed.func)
    assert str(sch.trace.apply(matmul())) == str(sch.func) == str(replayed.func)
    assert replayed.trace == sch.trace
    same_numbers(matmul(), sch.func)


@settings(max_examples=15, deadline=None)
@given(fi=st.integers(1, 7), fj=st.integers(1, 6), fr=st.integers(1, 9))
def test_changed_split_decisions_compute_the_same_numbers(fi: int, fj: int, fr: int) -> None:
    trace = scheduled_matmul().trace
    tuned = trace.with_decisions({2: {"factors": [None, fi]}, 3: {"factors": [None, fj]},
                                  7: {"factors": [None, fr]}})
    func = tuned.apply(matmul())
    assert f"for i_1 in range({fi})" in str(func)
    same_numbers(matmul(), func)


def test_json_round_trip_keeps_the_trace() -> None:
    trace = scheduled_matmul().trace
    back = Trace.from_json(trace.to_json())
    assert back == trace
    assert str(back.apply(matmul())) == str(trace.apply(matmul()))


def test_a_chain_schedule_replays_from_json() -> None:
    sch = Schedule(chain())
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), i0)
    text = sch.trace.to_json()
    assert str(Trace.from_json(text).apply(chain())) == str(sch.func)


@pytest.mark.parametrize("text, rule", [
    ("not json", "trace is not JSON"),
    ('{"instructions": []}', 'must be an object with "format": 1'),
    ('{"format": 1, "instructions": [{"kind": "explode", "inputs": []}]}', "unknown kind 'explode'"),
    ('{"format": 1, "instructions": [{"kind": "split"}]}', "malformed trace instruction"),
])
def test_bad_trace_json_is_refused(text: str, rule: str) -> None:
    with pytest.raises(ScheduleError, match=rule):
        Trace.from_json(text)


def test_with_decisions_names_what_does_not_exist() -> None:
    trace = scheduled_matmul().trace
    with pytest.raises(ScheduleError, match="instruction 0 \\(cache_read\\) has no decision \\['factors'\\]"):
        trace.with_decisions({0: {"factors": [2, 3]}})
    with pytest.raises(ScheduleError, match="trace has no instruction 40"):
        trace.with_decisions({40: {"factors": [2, 3]}})


def test_a_decision_that_breaks_a_later_step_fails_naming_the_loop() -> None:
    trace = scheduled_matmul().trace
    with pytest.raises(ScheduleError, match=r"cannot split loop r \(block Y\).*fewer than the loop's iterations"):
        trace.with_decisions({7: {"factors": [2, 2]}}).apply(matmul())


def test_an_instruction_that_does_not_fit_its_primitive_is_refused_on_replay() -> None:
    trace = Trace.from_json('{"format": 1, "instructions": [{"kind": "split", "inputs": [{"block": "Y", '
                            '"loop": "i"}], "attrs": {"bogus": 1}, "decisions": {"factors": [2, 3]}}]}')
    with pytest.raises(ScheduleError, match="trace instruction 0 does not fit Schedule.split"):
        trace.apply(matmul())
