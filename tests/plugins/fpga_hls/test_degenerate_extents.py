"""Degenerate extents (an axis one wide) on fpga_hls: the C++ it emits has no variable
that is set and never read, so the C simulation's -Werror builds it."""

from __future__ import annotations

import pytest

from hetero.core.ir.tir import Allocate, walk
from hetero.core.ir.tir.dead import remove_dead_buffers
from hetero.core.lower import lower_node
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind
from hetero.testing.cases import REGRESSIONS, compare_outputs, regression_cases
from hetero.testing.suite import _run


@pytest.mark.parametrize("op, dtype", sorted(REGRESSIONS))
def test_the_kept_draws_compile_and_match_on_fpga_hls(op: str, dtype: str) -> None:
    target = bind(get_backend("fpga_hls"))
    for case in regression_cases(op, dtype):
        assert target.supports(case.graph.nodes[0]).ok
        part = target.compile(case.graph)
        assert compare_outputs(case, _run(part, case.inputs)) is None


def test_a_buffer_nothing_reads_is_not_computed() -> None:
    (case,) = regression_cases("GridSample", "float32")
    func = lower_node(case.graph.nodes[0])
    allocated = {s.buffer.name for s in walk(func.body) if isinstance(s, Allocate)}
    kept = {s.buffer.name for s in walk(remove_dead_buffers(func).body) if isinstance(s, Allocate)}
    # The one-wide axis's source coordinate goes; the clamped indices the gather reads stay.
    assert kept < allocated
    assert all(name.startswith("gridsample_x") for name in allocated - kept)
    assert {"gridsample_i0", "gridsample_i1"} <= kept
