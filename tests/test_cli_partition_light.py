"""`hetero partition` shows the partition `hetero.compile` builds, on every light model.

Both go through the one compile driver (:class:`hetero.core.compiler.Session`); this
checks the whole partition report as data, region by region and transfer by transfer,
on the models the README runs: quantised to int8 across npu_sim and the fallback, so
that the keep-whole rule, the small-island rule and the integer lowering all decide.
"""

from __future__ import annotations

import json
import warnings

import pytest

import hetero
from hetero.cli import build_parser, main
from hetero.cli.common import load_graph, quantize_options
from hetero.core.frontend.light import LIGHT_MODELS

ARGS = ["--random-weights", "0", "--targets", "npu_sim", "--quantize", "--calibrate", "2"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LIGHT_MODELS))
def test_partition_and_compile_agree(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["partition", f"light:{name}", *ARGS, "--format", "json", "-q"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the light models' random weights are announced
        assert main(argv) == 0
        shown = json.loads(capsys.readouterr().out)
        args = build_parser().parse_args(argv)
        graph = load_graph(args)
        exe = hetero.compile(graph, targets=["npu_sim"], passes=[], **quantize_options(args, graph))
    assert exe.partition == shown
    assert {r["backend"] for r in shown["regions"]} == {"npu_sim", "llvm_cpu"}
