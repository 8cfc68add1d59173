"""The HLS emitter: the pragmas a schedule asks for are found in the tokenised C++ where HLS
reads them (a loop's inside its body, a partition after its array's declaration), the
interfaces name every parameter, and the scheduled kernel still means what the
unscheduled lowering means (C simulation against the interpreter, bit-exact for a
matrix product: the schedule changes where values live, not the order of the sums)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
import re

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import Buffer, For, ForKind, PrimFunc, Store, Var, run_func
from hetero.core.lower import lower_node
from hetero.core.schedule.schedule import Schedule
from hetero.errors import CodegenError
from hetero.plugins.fpga_hls.csim import INSTALL_HINT, compile_kernel, find_gxx
from hetero.plugins.fpga_hls.emit import DATAFLOW_ATTR, emit_hls

_TOKEN = re.compile(r"#pragma[^\n]*|[A-Za-z_]\w*|\d+|\S")


def tokens(source: str) -> list[list[str]]:
    """Each line's tokens; a pragma line is its words and ``key=value`` parts."""
    out = []
    for line in source.splitlines():
        line = line.strip()
        if line.startswith("#pragma"):
            out.append(line.split())
        elif line:
            out.append(_TOKEN.findall(line))
    return out


def loop_pragmas(source: str, label: str) -> list[list[str]]:
    """The pragmas that open the body of the loop labelled ``label``."""
    lines = tokens(source)
    start = next(k for k, t in enumerate(lines) if t[:2] == [label, ":"])
    assert lines[start][2] == "for"
    found = []
    for t in lines[start + 1:]:
        if not t[0].startswith("#pragma"):
            break
        found.append(t)
    return found


def matmul() -> PrimFunc:
    g = GraphBuilder("g")
    g.output(g.MatMul(g.input("a", (4, 16)), g.input("b", (16, 8)), name="mm"))
    return lower_node(g.build().node("mm"))


def scheduled() -> PrimFunc:
    """The matrix product with ``b`` copied on chip (cyclic banks of 4 along k), the
    reduction split by 4 with its inner loop unrolled by a factor 4 and the copy's
    inner loop pipelined at II=1."""
    sch = Schedule(matmul())
    block = sch.get_block("mm")
    copy = sch.cache_read(block, "b", "shared")
    sch.partition("b_shared", 0, "cyclic", 4)
    _, _, k = sch.get_loops(block)
    _, k_in = sch.split(k, [None, 4])
    sch.annotate(k_in, "unroll_factor", 4)
    sch.pipeline(sch.get_loops(copy)[-1], ii=1)
    return sch.func


def test_interfaces_name_every_parameter_with_its_depth_and_bundle() -> None:
    kernel = emit_hls(matmul())
    lines = tokens(kernel.source)
    axi = [t for t in lines if t[:4] == ["#pragma", "HLS", "INTERFACE", "m_axi"]]
    assert [t[4:] for t in axi] == [["port=a", "offset=slave", "bundle=gmem0", "depth=64"],
                                    ["port=b", "offset=slave", "bundle=gmem1", "depth=128"],
                                    ["port=mm", "offset=slave", "bundle=gmem2", "depth=32"]]
    assert ["#pragma", "HLS", "INTERFACE", "s_axilite", "port=return"] in lines
    assert kernel.top == "mm_top" and kernel.param_names == ("a", "b", "mm")
    assert 'extern "C" void mm_top(const float* a, const float* b, float* mm);' in kernel.header
    assert 'extern "C" void mm_top(const float* a, const float* b, float* mm) {' in kernel.source


def test_pipeline_ii1_on_the_loop_the_schedule_pipelined() -> None:
    source = emit_hls(scheduled()).source
    assert loop_pragmas(source, "L_ax1") == [["#pragma", "HLS", "PIPELINE", "II=1"]]
    assert [t for t in tokens(source) if "PIPELINE" in t] == [["#pragma", "HLS", "PIPELINE", "II=1"]]


def test_unroll_factor_4_on_the_annotated_loop() -> None:
    source = emit_hls(scheduled()).source
    assert loop_pragmas(source, "L_mm_k_1") == [["#pragma", "HLS", "UNROLL", "factor=4"]]
    assert loop_pragmas(source, "L_mm_k_0") == []


def test_partitioned_local_array_gets_array_partition_after_its_declaration() -> None:
    lines = tokens(emit_hls(scheduled()).source)
    decl = next(k for k, t in enumerate(lines) if t[:2] == ["float", "b_shared"])
    assert lines[decl][2:9] == ["[", "16", "]", "[", "8", "]", "="]
    assert lines[decl + 1] == ["#pragma", "HLS", "ARRAY_PARTITION", "variable=b_shared", "cyclic", "factor=4",
                               "dim=1"]


def test_complete_partition_and_whole_unroll() -> None:
    sch = Schedule(matmul())
    block = sch.get_block("mm")
    sch.cache_read(block, "b", "shared")
    sch.partition("b_shared", 1, "complete")
    sch.unroll(sch.get_loops(block)[-1])
    lines = tokens(emit_hls(sch.func).source)
    assert ["#pragma", "HLS", "ARRAY_PARTITION", "variable=b_shared", "complete", "dim=2"] in lines
    assert loop_pragmas(emit_hls(sch.func).source, "L_mm_k") == [["#pragma", "HLS", "UNROLL"]]


def test_dataflow_only_where_the_function_asks_for_it() -> None:
    func = matmul()
    assert not [t for t in tokens(emit_hls(func).source) if "DATAFLOW" in t]
    flowing = replace(func, attrs=((DATAFLOW_ATTR, True),))
    assert ["#pragma", "HLS", "DATAFLOW"] in tokens(emit_hls(flowing).source)


def test_labels_are_unique_across_stages() -> None:
    g = GraphBuilder("g")
    g.output(g.Softmax(g.input("x", (3, 10)), axis=1, name="n"))
    labels = [t[0] for t in tokens(emit_hls(lower_node(g.build().node("n"))).source) if t[1:3] == [":", "for"]]
    assert len(labels) == len(set(labels)) and "L_i0" in labels and "L_i0_2" in labels


def test_a_loop_bound_to_a_thread_axis_is_refused() -> None:
    A = Buffer("A", (32,), "float32")
    i = Var("i")
    func = PrimFunc("k", (A,), For(i, 32, Store(A, (i,), A[i] * 2.0), ForKind.THREAD_BINDING, "threadIdx.x"))
    with pytest.raises(CodegenError, match="kernel k: loop i is bound to threadIdx.x"):
        emit_hls(func)


@pytest.mark.skipif(find_gxx() is None, reason=INSTALL_HINT)
def test_the_scheduled_kernel_compiles_and_matches_the_unscheduled_lowering(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    arrays = {"a": rng.standard_normal((4, 16)).astype(np.float32),
              "b": rng.standard_normal((16, 8)).astype(np.float32), "mm": np.zeros((4, 8), np.float32)}
    got = compile_kernel(emit_hls(scheduled()), cache=tmp_path).run(arrays)
    np.testing.assert_array_equal(got["mm"], run_func(matmul(), arrays)["mm"])
