"""pipeline and annotate: recorded in the trace, replayed, kept through JSON; block
iterators survive every primitive."""

from __future__ import annotations

import pytest
from schedcheck import add, chain, conv, matmul, same_numbers

from hetero.core.ir.tir import Block, func_problems
from hetero.core.ir.tir.buffer import Partition
from hetero.core.ir.tir.registry import register_annotation, register_thread_axis
from hetero.core.ir.tir.stmt import BlockIter, IterKind, walk
from hetero.core.schedule import BufferRef, Instruction, LoopRef, Schedule, Trace
from hetero.errors import ScheduleError


def staged_matmul() -> Schedule:
    """matmul with X staged through shared memory, the staging buffer partitioned, the
    reduction pipelined and a spatial loop annotated."""
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    sch.cache_read(y, "X", "shared")
    i, j, r = sch.get_loops(y)
    sch.pipeline(r, ii=2)
    sch.annotate(j, "unroll_factor", 5)
    sch.partition("X_shared", 1, "cyclic", 4)
    sch.partition(BufferRef("X_shared"), 0, "complete")
    return sch


def test_pipeline_and_annotate_rewrite_and_keep_numbers() -> None:
    sch = staged_matmul()
    text = str(sch.func)
    assert "for r in range(8) pipelined ii=2 {" in text
    assert "for j in range(5) unroll_factor=5 {" in text
    assert "alloc X_shared: f32[6,8] shared partition=[complete(0), cyclic(1, 4)] {" in text
    assert func_problems(sch.func) == []
    same_numbers(matmul(), sch.func)


def test_pipeline_and_annotate_are_recorded_and_replay() -> None:
    trace = staged_matmul().trace
    kinds = [ins.kind for ins in trace.instructions]
    assert kinds == ["cache_read", "pipeline", "annotate", "annotate", "annotate"]
    assert trace.instructions[1] == Instruction("pipeline", (LoopRef("Y", "r"),), {}, {"ii": 2})
    assert trace.instructions[2] == Instruction("annotate", (LoopRef("Y", "j"),),
                                                {"key": "unroll_factor", "value": 5})
    assert trace.instructions[4].inputs == (BufferRef("X_shared"),)
    assert trace.instructions[4].attrs["value"] == (Partition(0, "complete"), Partition(1, "cyclic", 4))
    assert trace.apply(matmul()) == staged_matmul().func
    faster = trace.with_decisions({1: {"ii": 1}}).apply(matmul())
    assert "for r in range(8) pipelined ii=1 {" in str(faster)


def test_the_trace_keeps_annotations_through_json() -> None:
    trace = staged_matmul().trace
    text = trace.to_json()
    assert '{"partition": [1, "cyclic", 4]}' in text
    back = Trace.from_json(text)
    assert back == trace
    assert back.apply(matmul()) == staged_matmul().func


def test_pipeline_refuses_a_loop_of_another_kind_and_a_bad_interval() -> None:
    sch = Schedule(add())
    i, j = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    with pytest.raises(ScheduleError, match=r"cannot pipeline loop i \(block C\): it is already parallel"):
        sch.pipeline(i)
    with pytest.raises(ScheduleError, match=r"cannot annotate loop j \(block C\) with ii: it must be a positive integer, got 0"):
        sch.pipeline(j, ii=0)


def test_annotate_names_what_it_cannot_do() -> None:
    sch = Schedule(chain())
    (i,) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="unknown loop annotation 'unroll_facto' \\(did you mean 'unroll_factor'\\?\\)"):
        sch.annotate(i, "unroll_facto", 2)
    with pytest.raises(ScheduleError, match="initiation interval: it is serial, not pipelined"):
        sch.annotate(i, "ii", 2)
    with pytest.raises(ScheduleError, match="allocates no buffer 'A' \\(a parameter: only allocated buffers"):
        sch.annotate("A", "partition", (Partition(0, "complete"),))
    with pytest.raises(ScheduleError, match="cannot partition buffer B: a block partition of dimension 0 "
                                            "\\(extent 12\\) needs a factor from 1 to the extent, got 13"):
        sch.partition("B", 0, "block", 13)
    assert len(sch.trace) == 0


def test_a_plugin_annotation_key_is_accepted_once_registered() -> None:
    sch = Schedule(add())
    _, j = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="register_annotation\\('test_latency', 'loop', ...\\)"):
        sch.annotate(j, "test_latency", 3)
    register_annotation("test_latency", "loop", lambda v: None if isinstance(v, int) else "must be an int",
                        "target latency of the loop in cycles (tests)")
    sch.annotate(j, "test_latency", 3)
    assert "for j in range(10) test_latency=3 {" in str(sch.func) and func_problems(sch.func) == []


def test_bind_takes_a_registered_thread_axis() -> None:
    sch = Schedule(add())
    i, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="unknown thread axis 'test.cluster'.*register_thread_axis"):
        sch.bind(i, "test.cluster")
    register_thread_axis("test.cluster", "block", "a cluster of thread blocks (tests)")
    sch.bind(i, "test.cluster")
    assert func_problems(sch.func) == []


def _iters(func: object) -> dict[str, tuple[BlockIter, ...]]:
    return {s.name: s.iters for s in walk(func.body) if isinstance(s, Block)}  # type: ignore[attr-defined]


def test_blocks_record_spatial_and_reduction_iterators() -> None:
    (o, p, c, k) = _iters(conv())["Y"]
    assert [(it.var.name, it.extent, it.kind) for it in (o, p, c, k)] == [
        ("o", 4, IterKind.SPATIAL), ("p", 8, IterKind.SPATIAL),
        ("c", 3, IterKind.REDUCTION), ("k", 3, IterKind.REDUCTION)]
    assert "block Y [spatial o:4, p:8; reduction c:3, k:3] {" in str(conv())


def test_schedule_primitives_keep_block_iterators() -> None:
    before = _iters(matmul())["Y"]
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    x_shared = sch.cache_read(y, "X", "shared")
    sch.cache_write(y, "local")
    i, j, r = sch.get_loops(y)
    i0, _, i1, j1 = sch.tile([i, j], [2, 4])
    sch.compute_at(x_shared, i0)
    sch.fuse(i1, j1)
    _, r1 = sch.split(r, [None, 4])
    sch.unroll(r1)
    after = _iters(sch.func)
    assert after["Y"] == before
    assert [(it.var.name, it.extent, it.kind) for it in after["X_shared"]] == [
        ("ax0", 6, IterKind.SPATIAL), ("ax1", 8, IterKind.SPATIAL)]
    assert all(it.kind is IterKind.SPATIAL for it in after["Y_local"])
    same_numbers(matmul(), sch.func)
