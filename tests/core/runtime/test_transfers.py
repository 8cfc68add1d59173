"""The executable's transfer steps: the partition's rule applied to the compiled parts, so
they are the partition's transfer nodes."""

from __future__ import annotations

import numpy as np

import hetero
from hetero.core.partition.transfers import TransferStep, plan_transfers
from hetero.core.plugin.manager import get_backend
from hetero.core.quant.flow import lower_for_backends, quantize_model
from hetero.testing.models import calibration_inputs, conv_block, model_inputs


def test_a_value_moves_once_per_destination_and_graph_values_come_from_and_go_home() -> None:
    plan = plan_transfers([("a", ["x"], ["v"]), ("b", ["v", "x"], ["w"]), ("b", ["v", "w"], ["y"]),
                           ("a", ["w", "v"], ["z"])], graph_outputs=["y", "z"], home="a")
    assert plan.into == ((), (TransferStep("v", "a", "b"), TransferStep("x", "a", "b")), (),
                         (TransferStep("w", "b", "a"),))
    assert plan.home == ((), (), (TransferStep("y", "b", "a"),), ())


def test_a_graph_output_a_later_home_part_reads_moves_home_once() -> None:
    plan = plan_transfers([("npu", ["x"], ["v"]), ("cpu", ["v"], ["y"])], ["v", "y"], home="cpu")
    assert plan.into == ((TransferStep("x", "cpu", "npu"),), ())
    assert plan.home == ((TransferStep("v", "npu", "cpu"),), ())


def test_the_executables_transfers_are_the_partitions_on_a_quantised_model() -> None:
    graph = conv_block()
    exe = hetero.compile(graph, targets=["npu_sim"], quantize=calibration_inputs(graph))
    backends = {p.backend for p in exe.placements}
    assert backends == {"npu_sim", "llvm_cpu"}, backends
    planned = [(t["value"], t["from"], t["to"]) for t in exe.partition["transfers"]]
    performed = [(s.value, s.src, s.dst) for p in exe.placements for s in (*p.transfers_in, *p.transfers_out)]
    assert planned and performed == planned
    # Every transfer between the NPU's DRAM and the host is performed and timed.
    exe.run(model_inputs(graph))
    report = exe.report()
    for value, src, dst in planned:
        assert f"transfer {value} {src}->{dst}"[:47] in report, (value, src, dst)
    # The numbers are those of the integer graph the compile partitioned (as in the
    # conformance suite's int8 test): integer parts exact, the float tail within 1e-5.
    lowered = lower_for_backends(quantize_model(hetero.optimize(graph), calibration_inputs(graph)),
                                 [get_backend("npu_sim")])
    expected = hetero.run_reference(lowered, model_inputs(graph))
    got = exe.run(model_inputs(graph))
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
