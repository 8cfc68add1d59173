"""The Backend contract: Support, Pattern, validate_backend and the default behaviour."""

from __future__ import annotations


import numpy as np
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.ir.pattern import Const, Match, Op, Var
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.plugin import Backend, CompiledPart, Pattern, Support, validate_backend
from hetero.core.plugin.target import Target, bind
from hetero.errors import PluginError
from toyplugin import ToyBackend

#: What the pattern checks here receive: a toy backend under default options.
TARGET = bind(ToyBackend())


def relu_neg_add() -> Graph:
    b = GraphBuilder("chain")
    x = b.input("x", (2, 8))
    y = b.input("y", (2, 8))
    b.output(b.Add(b.Neg(b.Relu(x)), y))
    return b.build()


def test_support_yes_and_no() -> None:
    assert Support.yes().ok and bool(Support.yes())
    refused = Support.no("Conv with group=3 is not implemented")
    assert not refused and refused.reason == "Conv with group=3 is not implemented"


@pytest.mark.parametrize("reason", ["", "   "])
def test_a_refusal_must_say_why(reason: str) -> None:
    with pytest.raises(PluginError, match="needs a reason"):
        Support.no(reason)


def conv_relu(weight_limit: int | None = None) -> Pattern:
    def small_weights(match: Match, target: Target) -> Support:
        nbytes = match.const("w").nbytes
        if nbytes <= weight_limit:
            return Support.yes()
        return Support.no(f"weights of {nbytes} bytes exceed the {weight_limit}-byte scratchpad")

    root = Op("Relu", Op("Conv", Var("x"), Const("w"), ..., name="conv"))
    return Pattern("conv_relu", root, check=None if weight_limit is None else small_weights)


def conv_relu_graph() -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, 2, 5, 5))
    b.output(b.Relu(b.Conv(x, np.ones((3, 2, 3, 3), np.float32))))
    return b.build()


def test_pattern_matches_at_its_root_with_the_checks_verdict() -> None:
    graph = conv_relu_graph()
    relu = next(n for n in graph.nodes if n.op == "Relu")
    conv = next(n for n in graph.nodes if n.op == "Conv")
    [(match, verdict)] = list(conv_relu().match(relu, TARGET))
    assert match.node("conv") is conv and verdict.ok
    assert list(conv_relu().match(conv, TARGET)) == []
    [(_, refused)] = list(conv_relu(weight_limit=64).match(relu, TARGET))
    assert refused.reason == "weights of 216 bytes exceed the 64-byte scratchpad"


def test_pattern_check_must_answer_with_support() -> None:
    relu = next(n for n in conv_relu_graph().nodes if n.op == "Relu")
    sloppy = Pattern("sloppy", Op("Relu", Var("x")), check=lambda m, target: True)  # type: ignore[arg-type,return-value]
    with pytest.raises(PluginError, match=r"pattern 'sloppy': check returned True at node relu"):
        list(sloppy.match(relu, TARGET))


def test_pattern_needs_a_name_and_an_op_pattern() -> None:
    with pytest.raises(PluginError, match="needs a name"):
        Pattern("", Op("Relu", Var("x")))
    with pytest.raises(PluginError, match="must be an Op from hetero.core.ir.pattern"):
        Pattern("p", ("Conv", "Relu"))  # type: ignore[arg-type]


def test_a_sound_backend_has_no_problems() -> None:
    assert validate_backend(ToyBackend()) == []
    with_patterns = ToyBackend(ops=("Conv", "Relu"))
    with_patterns.patterns = [conv_relu(weight_limit=1024)]
    assert validate_backend(with_patterns) == []


def test_backend_without_compile_cannot_be_instantiated() -> None:
    class Half(Backend):
        name = "half"

        def compile(self, subgraph: Graph, target: Target) -> CompiledPart:
            return bind(ToyBackend(), target).compile(subgraph)

    with pytest.raises(TypeError, match="load_artifact"):
        Half()  # type: ignore[abstract]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": "My-NPU"}, "name must be a lower-case identifier"),
        ({"name": ""}, "name must be a lower-case identifier"),
        ({"version": " "}, "declares no version"),
        ({"device_kind": "GPU"}, "device_kind must be a lower-case word"),
        ({"memory": None}, "memory must be a MemoryHierarchy, got None"),
        ({"peak_gflops": 0}, "peak_gflops must be a positive number, got 0"),
        ({"peak_gflops": float("nan")}, "peak_gflops must be a positive number"),
        ({"supported_ops": "Relu"}, "supported_ops must be a collection of op names"),
        ({"supported_ops": {"Relu", "Relux"}},
         "supported_ops names 'Relux', which is not a canonical op (did you mean 'Relu'?)"),
        ({"patterns": [Pattern("p", Op("Relu", Op("Softplusplus", Var("x"))))]},
         ("pattern 'p': ", "'Softplusplus' is not a canonical op")),
        ({"patterns": [Pattern("p", Op("Relu", Var("x"), attrs={"alpha": 0.1}))]},
         ("pattern 'p': ", "Relu has no attribute 'alpha'")),
        ({"patterns": [conv_relu(), conv_relu()]}, "pattern name 'conv_relu' is used twice"),
        ({"patterns": ["Relu"]}, "patterns holds 'Relu', which is not a Pattern"),
    ],
)
def test_each_bad_declaration_is_reported(change: dict, problem: str | tuple[str, ...]) -> None:
    backend = ToyBackend(name="toy_npu")
    for key, value in change.items():
        setattr(backend, key, value)
    problems = validate_backend(backend)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"backend {backend.name!r}: ")
    for part in (problem,) if isinstance(problem, str) else problem:
        assert part in problems[0]


def test_something_that_is_not_a_backend() -> None:
    assert validate_backend(object())[0].endswith("is not a hetero Backend (subclass hetero.core.plugin.Backend)")


def test_default_supports_answers_from_the_declared_ops() -> None:
    class Declared(ToyBackend):
        supports = Backend.supports  # the base class's default, not the toy's refinement

    graph = relu_neg_add()
    backend = Declared(ops=("Relu", "Add"))
    answers = {n.op: bind(backend).supports(n) for n in graph.nodes}
    assert answers["Relu"].ok and answers["Add"].ok
    assert not answers["Neg"] and answers["Neg"].reason == "toy_cpu does not implement Neg"


def test_default_estimate_is_a_per_node_roofline() -> None:
    b = GraphBuilder()
    x = b.input("x", (1024,))
    b.output(b.Add(x, x))
    backend = ToyBackend()
    # One Add over 1024 float32 elements: 1024 FLOPs at 10 GFLOP/s is 0.1 us; it reads
    # two 4 KiB operands and writes one, 12 KiB at the 20 GB/s of DRAM is 0.6 us.
    assert bind(backend).estimate(b.build()) == pytest.approx(3 * 4096 / 20e9, rel=1e-12)
    fast_memory = MemoryHierarchy([MemoryLevel("SRAM", 2**20, bandwidth_gbps=1e6)])
    backend.memory = fast_memory
    assert bind(backend).estimate(b.graph) == pytest.approx(1024 / 10e9, rel=1e-12)


def test_compile_run_and_reload_through_the_artifact() -> None:
    graph = relu_neg_add()
    backend = ToyBackend()
    assert all(bind(backend).supports(n) for n in graph.nodes)
    part = bind(backend).compile(graph)
    assert isinstance(part, CompiledPart)
    assert part.inputs == ("x", "y") and part.outputs == (graph.outputs[0].name,)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 8), np.float32), "y": rng.standard_normal((2, 8), np.float32)}
    expected = run_reference(graph, feeds)
    reloaded = backend.load_artifact(part.artifact)
    for got in (part.run(feeds), reloaded.run(feeds)):
        assert got.keys() == expected.keys()
        for name in expected:
            # Same numpy reference functions on the same inputs: bit-identical results.
            np.testing.assert_array_equal(got[name], expected[name])
