"""The conformance suite run against toy plugins installed for real (entry points), in process.

Each run goes through pytest's ``pytester`` with ``--hetero-backend``, as a plugin
author would run it; ``-k`` keeps the runs that only need the op checks short.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from toyplugin import plugin_source, run_hetero

from hetero.testing.cases import case_dtypes

pytest_plugins = ["pytester"]

_PREAMBLE = """\
from hetero.core.ir.pattern import Op, Var
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.plugin import Pattern, Support, hookimpl
from hetero.errors import PluginError
from toyplugin import ToyBackend, ToyPart
"""

# Relu answers one element off by one: the planted wrong result.
BUGGY_RELU = _PREAMBLE + """
class OffByOne(ToyPart):
    def run(self, inputs):
        out = super().run(inputs)
        if any(node["op"] == "Relu" for node in self.program["nodes"]):
            for name, array in out.items():
                array = array.copy()
                array.flat[array.size // 2] += 1
                out[name] = array
        return out

class Buggy(ToyBackend):
    def compile(self, subgraph, target):
        return OffByOne(super().compile(subgraph, target).program)

    def load_artifact(self, artifact):
        return OffByOne(super().load_artifact(artifact).program)

@hookimpl
def hetero_backends():
    return [Buggy("buggy", ops=("Relu", "Add"))]
"""

# Claims Neg, then refuses to compile it.
LIAR = _PREAMBLE + """
class Liar(ToyBackend):
    def compile(self, subgraph, target):
        if any(node.op == "Neg" for node in subgraph.nodes):
            raise PluginError(f"{self.name}: no kernel for Neg in {subgraph.name}")
        return super().compile(subgraph, target)

@hookimpl
def hetero_backends():
    return [Liar("liar", ops=("Relu", "Neg"))]
"""

# Lists Neg among its ops, then declines every Neg it is offered.
HOLLOW = _PREAMBLE + """
class Hollow(ToyBackend):
    def supports(self, node, target):
        if node.op == "Neg":
            return Support.no(f"{self.name} has no Neg kernel yet")
        return super().supports(node, target)

@hookimpl
def hetero_backends():
    return [Hollow("hollow", ops=("Relu", "Neg"))]
"""

# Takes only float inputs, and fuses Add+Relu; the pattern's example comes and goes.
FLOATS_ONLY = _PREAMBLE + """
from hetero.core.ir import GraphBuilder

def add_relu():
    b = GraphBuilder("add_relu")
    x, y = b.input("x", (2, 3)), b.input("y", (2, 3))
    b.output(b.Relu(b.Add(x, y)))
    return b.build()

class FloatsOnly(ToyBackend):
    def supports(self, node, target):
        verdict = super().supports(node, target)
        if verdict and node.inputs[0].dtype.kind != "f":
            return Support.no(f"{self.name} computes in floating point only")
        return verdict

@hookimpl
def hetero_backends():
    backend = FloatsOnly("floaty", ops=("Relu", "Add"))
    backend.patterns = (Pattern("add_relu", Op("Relu", Op("Add", Var("a"), Var("b"))),
                                example={example}),)
    return [backend]
"""


# Its artifact is a zip whose entry carries the time it was written.
CLOCKED = _PREAMBLE + """
import io, zipfile

class Stamped(ToyPart):
    def __init__(self, program):
        super().__init__(program)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("program.json", self.artifact)
        self.artifact = buffer.getvalue()

class Clocked(ToyBackend):
    def compile(self, subgraph, target):
        return Stamped(super().compile(subgraph, target).program)

    def load_artifact(self, artifact):
        with zipfile.ZipFile(io.BytesIO(artifact)) as zf:
            return super().load_artifact(zf.read("program.json"))

@hookimpl
def hetero_backends():
    return [Clocked("clocked", ops=("Relu",))]
"""


def _run(pytester: pytest.Pytester, site: object, name: str, *args: str) -> pytest.RunResult:
    site.load()  # this process's plugin discovery now sees what the test installed
    return pytester.runpytest_inprocess("--hetero-backend", name, "-p", "no:cacheprovider",
                                        "--hetero-max-examples", "3", *args)


def test_toy_backend_passes_prints_matrix_writes_json_and_junit(
        pytester: pytest.Pytester, site: object, tmp_path: Path) -> None:
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy", ops=("Relu", "Neg", "Add"))})
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    result = _run(pytester, site, "toy", "--hetero-report-json", str(report), "--junitxml", str(junit))
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "hetero conformance matrix" in out
    assert any(line.startswith("Relu ") and "ok" in line for line in out.splitlines())
    data = json.loads(report.read_text())
    assert data["backend"] == "toy" and data["version"] == "1.0"
    assert set(data["matrix"]) == {"Relu", "Neg", "Add"}
    assert data["matrix"]["Relu"] == dict.fromkeys(case_dtypes("Relu"), "passed")
    assert data["tests"]["test_model[conv_block]"] == "passed"
    assert data["tests"]["test_contract_loads"] == "passed"
    assert data["summary"].get("failed", 0) == 0
    xml = junit.read_text()
    assert 'name="test_op[Relu-float32]"' in xml and 'name="test_artifact[Neg]"' in xml


def test_planted_wrong_result_fails_naming_op_shapes_and_error(
        pytester: pytest.Pytester, site: object, tmp_path: Path) -> None:
    site.install("hetero-buggy", "1.0", {"buggy": BUGGY_RELU})
    report = tmp_path / "report.json"
    result = _run(pytester, site, "buggy", "-k", "test_op", "--hetero-report-json", str(report))
    assert result.ret == 1
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["*FAILED*test_op[[]Relu-float32[]]*"])
    # the op, its dtype and operand shapes, and what is wrong
    assert "buggy computes a wrong Relu: Relu [float32] (x: f32[" in out
    assert "differ (exact match required)" in out
    data = json.loads(report.read_text())
    assert set(data["matrix"]["Relu"].values()) == {"failed"}
    assert set(data["matrix"]["Add"].values()) == {"passed"}


def test_claimed_op_that_does_not_compile_fails_naming_the_op(
        pytester: pytest.Pytester, site: object) -> None:
    site.install("hetero-liar", "1.0", {"liar": LIAR})
    result = _run(pytester, site, "liar", "-k", "test_op or test_artifact")
    assert result.ret == 1
    out = result.stdout.str()
    assert "liar claims Neg but cannot compile Neg [float32]" in out
    assert "PluginError: liar: no kernel for Neg" in out
    result.stdout.fnmatch_lines(["*FAILED*test_artifact[[]Neg[]]*"])
    assert "FAILED" not in "".join(line for line in out.splitlines() if "Relu" in line)


def test_an_op_claimed_but_declined_in_every_form_is_a_failure(
        pytester: pytest.Pytester, site: object) -> None:
    site.install("hetero-hollow", "1.0", {"hollow": HOLLOW})
    result = _run(pytester, site, "hollow", "-k", "test_artifact")
    assert result.ret == 1
    out = result.stdout.str()
    assert "hollow lists Neg in supported_ops but declines every case of every dtype" in out
    assert "hollow has no Neg kernel yet" in out
    result.stdout.fnmatch_lines(["*FAILED*test_artifact[[]Neg[]]*"])


def test_known_failures_turn_failures_into_xfails_and_stale_lines_fail(
        pytester: pytest.Pytester, site: object, tmp_path: Path) -> None:
    site.install("hetero-buggy", "1.0", {"buggy": BUGGY_RELU})
    known = tmp_path / "known.txt"
    lines = [f"test_op[Relu-{dtype}]  # off by one, issue 12" for dtype in case_dtypes("Relu")]
    known.write_text("# buggy's known failures\n" + "\n".join(lines) + "\n")
    report = tmp_path / "report.json"
    result = _run(pytester, site, "buggy", "-k", "test_op", "--hetero-known-failures", str(known),
                  "--hetero-report-json", str(report))
    assert result.ret == 0, result.stdout.str()
    assert set(json.loads(report.read_text())["matrix"]["Relu"].values()) == {"xfail"}

    known.write_text(known.read_text() + "test_op[Add-float32]\n")
    result = _run(pytester, site, "buggy", "-k", "test_op", "--hetero-known-failures", str(known),
                  "--hetero-report-json", str(report))
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*XPASS(strict)*{known}:{len(lines) + 2}*remove that line*"])
    assert json.loads(report.read_text())["matrix"]["Add"]["float32"] == "xpass"


def test_declined_dtypes_are_unsupported_and_patterns_are_checked(
        pytester: pytest.Pytester, site: object, tmp_path: Path) -> None:
    site.install("hetero-floaty", "1.0", {"floaty": FLOATS_ONLY.replace("{example}", "add_relu")})
    report = tmp_path / "report.json"
    result = _run(pytester, site, "floaty", "-k", "not test_model", "--hetero-report-json", str(report))
    assert result.ret == 0, result.stdout.str()
    data = json.loads(report.read_text())
    assert data["matrix"]["Relu"]["float32"] == "passed"
    assert data["matrix"]["Relu"]["int8"] == "unsupported"
    assert "floating point only" in data["details"]["test_op[Relu-int8]"]
    assert data["tests"]["test_pattern[add_relu]"] == "passed"
    assert data["tests"]["test_contract_pattern[add_relu]"] == "passed"


def test_pattern_without_example_is_a_contract_failure(pytester: pytest.Pytester, site: object) -> None:
    site.install("hetero-floaty", "1.0", {"floaty": FLOATS_ONLY.replace("{example}", "None")})
    result = _run(pytester, site, "floaty", "-k", "contract")
    assert result.ret == 1
    assert "floaty: pattern 'add_relu' has no example" in result.stdout.str()


def test_unknown_backend_fails_the_load_check(pytester: pytest.Pytester, site: object) -> None:
    result = _run(pytester, site, "nosuch", "-k", "contract")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*no backend named 'nosuch'*"])


@pytest.mark.slow
def test_cli_conformance_runs_the_suite_and_prints_the_matrix(site: object, tmp_path: Path) -> None:
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy", ops=("Relu", "Add"))})
    junit = tmp_path / "junit.xml"
    done = run_hetero(site.path, "conformance", "toy", "--max-examples", "2", "--junit", str(junit))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hetero conformance: toy 1.0" in done.stdout
    assert 'classname="suite" name="test_op[Relu-float32]"' in junit.read_text()


@pytest.mark.slow
def test_cli_conformance_exits_1_on_failure(site: object) -> None:
    site.install("hetero-buggy", "1.0", {"buggy": textwrap.dedent(BUGGY_RELU)})
    done = run_hetero(site.path, "conformance", "buggy", "--ops", "Relu", "--max-examples", "1")
    assert done.returncode == 1
    assert "buggy computes a wrong Relu" in done.stdout


def test_an_artifact_stamped_with_the_clock_fails_the_determinism_check(
        pytester: pytest.Pytester, site: object) -> None:
    site.install("hetero-clocked", "1.0", {"clocked": CLOCKED})
    result = _run(pytester, site, "clocked", "-k", "test_artifact")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*FAILED*test_artifact[[]Relu[]]*"])
    assert "a day apart on the clock, gave different artifacts" in result.stdout.str()
