"""The codegen example plugin of ``examples/hetero-example-c``, as pip installs it.

It is loaded through its installed entry point (``.ci/run`` pip-installs it; without it
these tests skip). Its C is built by the system C compiler.

Tolerances. Against onnxruntime, a light model's output carries ~20 to ~120 float32
layers summed in the lowering's order on one side and by MLAS on the other; measured,
SqueezeNet differs by 6e-6 of its largest output, and the bound is 1e-4 of it, as
llvm_cpu's light-model test has it (a wrong pad, stride or axis moves results by 1e-2
of it or more). The transformer block (two LayerNorms, softmax attention, an erf GELU,
sums of at most 256 terms) differs by 2e-7 of its output's magnitude; the bound
is 1e-5 of it. Against hetero's reference, a region of matrix products and softmax
differs by the order of float32 sums: rtol 1e-5.
"""

from __future__ import annotations

import ast
from importlib.metadata import PackageNotFoundError, distribution
import os
from pathlib import Path
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.compiler import CompileFallbackWarning
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.plugin import Backend, get_backend, validate_backend
from hetero.core.plugin.target import bind
from hetero.errors import CodegenError, DamagedFileError, InputError, PluginError
from hetero.plugin import GraphBuilder, run_reference
from models import light_model_path
from oracle import run_model
from toyplugin import run_conformance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "hetero-example-c"

try:
    distribution("hetero-example-c")
except PackageNotFoundError:
    pytestmark = pytest.mark.skip(reason="hetero-example-c is not installed: pip install ./examples/hetero-example-c "
                                         "(.ci/run does)")


@pytest.fixture(scope="module")
def example_c() -> Backend:
    return get_backend("example_c")


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _mlp() -> hetero.core.ir.Graph:
    rng = np.random.default_rng(0)
    b = GraphBuilder("mlp")
    x = b.input("x", (8, 64))
    h = b.Softmax(b.Relu(b.Add(b.MatMul(x, _rand(rng, 64, 128)), _rand(rng, 128))))
    b.output(b.Reshape(b.Sigmoid(b.MatMul(h, _rand(rng, 128, 64))), shape=(8, 8, 8)))
    return b.build()


# -- the package ----------------------------------------------------------------------


def test_the_package_imports_only_the_kit_numpy_and_the_standard_library() -> None:
    sources = sorted((EXAMPLE / "src").rglob("*.py"))
    assert len(sources) >= 5
    wrong = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if not (name == "hetero.plugin" or name.startswith("hetero.plugin.") or top == "numpy"
                        or top == "hetero_example_c" or top in sys.stdlib_module_names):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not wrong, wrong


def test_the_entry_point_gives_a_sound_backend_that_declares_what_it_takes(example_c: Backend) -> None:
    import hetero_example_c
    from hetero_example_c.backend import OPS

    assert validate_backend(example_c) == []
    assert example_c.version == hetero_example_c.__version__ == distribution("hetero-example-c").version
    assert example_c.supported_ops == frozenset(OPS)  # every op it lists lowers to the tensor IR
    cnn = {"Conv", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Concat", "Gemm", "MatMul",
           "Softmax", "Flatten", "Reshape", "BatchNormalization", "Clip", "Dropout", "Identity"}
    transformer = {"MatMul", "Add", "Mul", "Div", "Sub", "Sqrt", "Pow", "ReduceMean", "Softmax", "Transpose",
                   "Reshape", "Erf", "Gelu", "Tanh", "LayerNormalization", "Where", "Gather"}
    assert cnn | transformer <= example_c.supported_ops <= set(hetero.plugin.op_names())


def test_refusals_carry_reasons(example_c: Backend) -> None:
    b = GraphBuilder("refused")
    x = b.input("x", (2, 3))
    b.output(b.Relu(b.input("h", (2, 3), "bfloat16"), name="relu16"), b.Round(x, name="round"))
    graph = b.build()
    target = bind(example_c)
    assert "example_c computes in" in target.supports(graph.node("relu16")).reason
    assert target.supports(graph.node("round")).reason == "example_c does not implement Round"
    with pytest.raises(PluginError, match="relu16"):
        target.compile(graph)


# -- compile, run, save ---------------------------------------------------------------


def test_a_region_is_one_c_file_and_matches_the_reference(example_c: Backend, tmp_path: Path) -> None:
    graph = _mlp()
    part = bind(example_c, dump_dir=tmp_path).compile(graph.copy())
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    got, want = part.run({"x": x}), run_reference(graph, {"x": x})
    np.testing.assert_allclose(got["reshape"], want["reshape"], rtol=1e-5, atol=1e-6)
    assert part.kernel_count == 3 and [s.view is not None for s in part.steps] == [False, False, False, True]
    assert [name for name, _ in part.last_profile] == [s.name for s in part.steps[:3]]
    for stage in ("graph", "tir", "scheduled", "legalized", "code", "report"):
        assert len(list((tmp_path / stage).iterdir())) >= 3, stage
    region = (tmp_path / "code" / "region.c").read_text()
    assert region == part.program.source and region.count("int k_") == 3 and "#pragma GCC ivdep" in region


def test_the_artifact_is_deterministic_and_rebuilds_the_part(example_c: Backend) -> None:
    graph = _mlp()
    first, second = bind(example_c).compile(graph.copy()), bind(example_c).compile(graph.copy())
    assert first.artifact == second.artifact
    loaded = example_c.load_artifact(first.artifact)
    assert loaded.artifact == first.artifact
    x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})["reshape"], first.run({"x": x})["reshape"])
    with pytest.raises(DamagedFileError):
        example_c.load_artifact(b"PK not a zip")


def test_bad_inputs_are_input_errors_before_any_c_runs(example_c: Backend) -> None:
    part = bind(example_c).compile(_mlp())
    good = np.zeros((8, 64), np.float32)
    with pytest.raises(InputError, match="missing input 'x'"):
        part.run({})
    with pytest.raises(InputError, match=r"'x' must be float32\[8, 64\], got float64\[8, 64\]"):
        part.run({"x": good.astype(np.float64)})
    with pytest.raises(InputError, match=r"got float32\[64, 8\]"):
        part.run({"x": good.T})
    with pytest.raises(InputError, match="no input 'y'"):
        part.run({"x": good, "y": good})


def test_openmp_runs_the_outer_loops_in_parallel_with_the_same_results(example_c: Backend) -> None:
    rng = np.random.default_rng(3)
    b = GraphBuilder("wide")
    b.output(b.Relu(b.MatMul(b.input("x", (256, 96)), _rand(rng, 96, 128))))
    graph = b.build()
    part = bind(example_c, {"example_c_openmp": True}).compile(graph)
    assert "#pragma omp parallel for" in part.program.source
    x = _rand(rng, 256, 96)
    want = bind(example_c).compile(graph).run({"x": x})
    np.testing.assert_array_equal(part.run({"x": x})[graph.outputs[0].name], want[graph.outputs[0].name])


def test_without_a_compiler_the_region_falls_back_with_the_install_hint(example_c: Backend,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-cc-on-this-path")
    with pytest.raises(CodegenError, match="needs a C compiler.*install one"):
        bind(example_c).compile(_mlp())
    assert "install one" in example_c.device_status()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompileFallbackWarning)
        exe = hetero.compile(_mlp(), targets=["example_c"])
    assert [p.backend for p in exe.placements] == ["llvm_cpu"] and exe.fallbacks
    assert any(issubclass(w.category, CompileFallbackWarning) for w in caught)


# -- models against onnxruntime -------------------------------------------------------


@pytest.fixture(scope="module")
def squeezenet() -> tuple[onnx.ModelProto, hetero.core.ir.Graph, hetero.Executable]:
    """SqueezeNet as onnx ships it, with seeded weights, optimised, compiled for example_c."""
    model = randomize_weights(onnx.load(light_model_path("squeezenet")), seed=0)
    graph = hetero.optimize(hetero.load_onnx(model))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileFallbackWarning)
        exe = hetero.compile(graph, targets=["example_c"], passes=[])
    return model, graph, exe


def test_squeezenet_on_example_c_matches_onnxruntime(squeezenet) -> None:  # noqa: ANN001
    model, graph, exe = squeezenet
    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    feeds = {graph.inputs[0].name: x}
    ours = exe.run(feeds)[graph.outputs[0].name]
    theirs = run_model(model, feeds)[0]
    scale = float(np.abs(theirs).max())
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * scale)


def test_every_squeezenet_node_ran_on_example_c(squeezenet) -> None:  # noqa: ANN001
    _, graph, exe = squeezenet
    assert not exe.fallbacks and exe.partition["not_preferred"] == []
    (region,) = exe.partition["regions"]
    assert region["backend"] == "example_c" and sorted(region["nodes"]) == sorted(n.name for n in graph.nodes)
    (placement,) = exe.placements
    assert placement.backend == "example_c"
    covered = sorted(n for step in placement.part.steps for n in step.nodes)
    assert covered == sorted(n.name for n in graph.nodes)  # each node computed by exactly one step
    assert "not on the preferred backend (example_c): 0 node(s)" in exe.report()


def _transformer_block(tokens: int = 16, width: int = 64, heads: int = 4, vocab: int = 100) -> onnx.ModelProto:
    """A GPT-style block as ONNX (opset 17): token embedding (Gather) and positions, a
    pre-LayerNorm causal self-attention (Q, K, V MatMuls, a Where mask, Softmax) with a
    residual, a LayerNorm and an erf-GELU MLP with a residual."""
    rng = np.random.default_rng(4)
    head = width // heads
    weights: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        weights.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def dense(x: str, name: str, n_in: int, n_out: int) -> str:
        w = const(f"{name}_w", (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32))
        return node("Add", [node("MatMul", [x, w], f"{name}_mm"), const(f"{name}_b", _rand(rng, n_out) * 0.1)], name)

    def norm(x: str, name: str) -> str:
        scale = const(f"{name}_g", 1 + 0.1 * _rand(rng, width))
        return node("LayerNormalization", [x, scale, const(f"{name}_beta", 0.1 * _rand(rng, width))], name,
                    axis=-1, epsilon=1e-5)

    def split_heads(x: str) -> str:
        shaped = node("Reshape", [x, const(f"{x}_shape", np.array([1, tokens, heads, head]))], f"{x}_heads")
        return node("Transpose", [shaped], f"{x}_t", perm=[0, 2, 1, 3])

    embedded = node("Gather", [const("embedding", _rand(rng, vocab, width)), "ids"], "embedded", axis=0)
    x = node("Add", [embedded, const("positions", 0.1 * _rand(rng, 1, tokens, width))], "x0")
    n1 = norm(x, "ln1")
    q, k, v = (split_heads(dense(n1, name, width, width)) for name in ("q", "k", "v"))
    kt = node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    scores = node("Div", [node("MatMul", [q, kt], "qk"), const("sqrt_d", np.array(np.sqrt(head), np.float32))],
                  "scores")
    causal = const("causal", np.tril(np.ones((tokens, tokens), bool)))
    masked = node("Where", [causal, scores, const("minus_inf", np.array(-1e9, np.float32))], "masked")
    attended = node("MatMul", [node("Softmax", [masked], "probs", axis=-1), v], "attended")
    merged = node("Reshape", [node("Transpose", [attended], "merged_t", perm=[0, 2, 1, 3]),
                              const("merged_shape", np.array([1, tokens, width]))], "merged")
    x = node("Add", [x, dense(merged, "proj", width, width)], "x1")
    h = dense(norm(x, "ln2"), "up", width, 4 * width)
    erf = node("Erf", [node("Div", [h, const("sqrt2", np.array(np.sqrt(2), np.float32))], "h_s")], "h_erf")
    gelu = node("Mul", [node("Mul", [h, node("Add", [erf, const("one", np.array(1, np.float32))], "h_1")], "h_g"),
                        const("half", np.array(0.5, np.float32))], "gelu")
    node("Add", [x, dense(gelu, "down", 4 * width, width)], "out")
    graph = helper.make_graph(nodes, "transformer_block",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, tokens])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, tokens, width])],
                              initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_transformer_block_on_example_c_matches_onnxruntime() -> None:
    model = _transformer_block()
    graph = hetero.load_onnx(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileFallbackWarning)
        exe = hetero.compile(graph, targets=["example_c"])
    assert [p.backend for p in exe.placements] == ["example_c"] and exe.partition["not_preferred"] == []
    ids = np.random.default_rng(5).integers(0, 100, (1, 16)).astype(np.int64)
    ours = exe.run({"ids": ids})["out"]
    theirs = run_model(model, {"ids": ids})[0]
    scale = float(np.abs(theirs).max())
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5 * scale)
    with pytest.raises(InputError):
        exe.run({"ids": np.full((1, 16), 100, np.int64)})  # an index past the embedding table


# -- the conformance suite ------------------------------------------------------------


@pytest.mark.slow
def test_the_installed_example_passes_the_conformance_suite(tmp_path: Path) -> None:
    """Every op it declares, in every dtype it takes, against the op's reference; the
    subprocess runs the hetero this test imports."""
    here = str(Path(hetero.__file__).resolve().parents[1])
    path = os.pathsep.join([str(tmp_path), here, str(ROOT / "tests")])
    data, _ = run_conformance(tmp_path, "example_c", "--max-examples", "3", PYTHONPATH=path)
    assert set(data["summary"]) <= {"passed", "skipped", "unsupported"}, data["summary"]
    assert set(data["matrix"]) == set(get_backend("example_c").supported_ops)
    for op, row in data["matrix"].items():
        assert row.get("float32") == "passed", (op, row)
