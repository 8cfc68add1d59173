"""A compiled part's optional capabilities: typed Protocols, asked with isinstance."""

from __future__ import annotations

from pathlib import Path
import re

import numpy as np

import hetero
from hetero.core.exec.device import HOST
from hetero.core.ir import GraphBuilder
from hetero.core.plugin import capabilities
from hetero.core.plugin.capabilities import (
    CountsKernels, DrawsTimeline, OnDevice, Profiles, RecordsTimeline, Reports, RunsIntermediates, device_of,
)
from hetero.testing.models import calibration_inputs, conv_block

ALL = (CountsKernels, DrawsTimeline, OnDevice, Profiles, RecordsTimeline, Reports, RunsIntermediates)


def held(part: object) -> set[str]:
    return {c.__name__ for c in ALL if isinstance(part, c)}


def test_the_bundled_parts_declare_what_they_offer() -> None:
    graph = conv_block()
    exe = hetero.compile(graph, targets=["npu_sim"], quantize=calibration_inputs(graph))
    by_backend = {p.backend: p.part for p in exe.placements}
    assert held(by_backend["llvm_cpu"]) == {"CountsKernels", "Profiles", "Reports", "RunsIntermediates"}
    assert held(by_backend["npu_sim"]) == {"DrawsTimeline", "OnDevice", "RecordsTimeline", "Reports",
                                           "RunsIntermediates"}
    assert device_of(by_backend["llvm_cpu"]) is HOST
    assert device_of(by_backend["npu_sim"]).name == "npu_sim"


def test_a_part_with_only_run_offers_nothing_and_the_executable_leaves_it_at_that() -> None:
    class Bare:
        inputs, outputs, artifact = ("x",), ("y",), b""

        def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {"y": inputs["x"]}

    assert held(Bare()) == set() and device_of(Bare()) is HOST
    b = GraphBuilder("one")
    b.output(b.Neg(b.input("x", (3,)), name="y"))
    exe = hetero.compile(b.build(), targets=["llvm_cpu"])
    exe.placements[0].part = Bare()
    exe.run({"x": np.ones(3, np.float32)})
    assert "llvm_cpu:part" in exe.report() and exe.timelines() == {}


def test_no_caller_probes_a_part_for_attribute_names() -> None:
    root = Path(hetero.__file__).parent
    probing = re.compile(r"(getattr|hasattr)\([^)]*part")
    found = [f"{path.relative_to(root)}:{n}" for path in root.rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if probing.search(line)]
    assert found == []
    assert set(capabilities.__all__) == {c.__name__ for c in ALL} | {"device_of"}
