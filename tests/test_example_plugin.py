"""The example plugin of ``examples/hetero-example-backend``, installed the way pip leaves it.

The package is copied into a throwaway site folder with a ``.dist-info`` whose entry
points are read from the example's own ``pyproject.toml``, so these tests load it
through the same entry point that ``pip install`` declares.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
import shutil
import sys
import tomllib
import warnings

import numpy as np
import pytest

import hetero
from hetero import GraphBuilder, run_reference
from hetero.core.ir.graph import Graph
from hetero.core.plugin import Backend, PluginSet, Support, load_plugins, validate_backend
from hetero.core.plugin.manager import ALLOW_ENV, DENY_ENV, ENTRY_POINT_GROUP, PluginWarning
from hetero.errors import InputError, PluginError
from hetero.core.plugin.target import bind
from toyplugin import run_conformance, run_hetero, write_distribution

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hetero-example-backend"
PACKAGE = "hetero_example_backend"


def _declared_version() -> str:
    """The ``__version__`` that the pyproject's dynamic version reads."""
    tree = ast.parse((EXAMPLE / "src" / PACKAGE / "__init__.py").read_text())
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__version__" for t in statement.targets):
            return ast.literal_eval(statement.value)
    raise AssertionError(f"{PACKAGE}/__init__.py sets no __version__")


def install_example(site: Path) -> None:
    """Install the example into ``site``: the package, and its metadata from pyproject.toml."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    shutil.copytree(EXAMPLE / "src" / PACKAGE, site / PACKAGE,
                    ignore=shutil.ignore_patterns("__pycache__"))
    write_distribution(site, project["name"], _declared_version(),
                       entry_points=project["entry-points"][ENTRY_POINT_GROUP], modules={})


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, PluginSet]]:
    """The site the example is installed in, and the plugins discovered with it."""
    site = tmp_path_factory.mktemp("site")
    install_example(site)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(site))
        mp.delenv(ALLOW_ENV, raising=False)
        mp.delenv(DENY_ENV, raising=False)
        yield site, load_plugins(reload=True)
    for module in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[module]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        load_plugins(reload=True)


@pytest.fixture
def example(installed: tuple[Path, PluginSet]) -> Backend:
    return installed[1].get("example")


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def mlp(softmax: bool = True) -> Graph:
    """MatMul+bias+Relu, a Softmax the example lacks (unless ``softmax`` is false),
    then MatMul+Sigmoid."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("mlp")
    x = b.input("x", (8, 64))
    h = b.Relu(b.Add(b.MatMul(x, _rand(rng, 64, 128)), _rand(rng, 128)))
    if softmax:
        h = b.Softmax(h)
    b.output(b.Sigmoid(b.MatMul(h, _rand(rng, 128, 64))))
    return b.build()


def test_entry_point_provides_a_sound_backend(installed: tuple[Path, PluginSet]) -> None:
    _, plugins = installed
    record = plugins.provided_by["example"]
    assert (record.name, record.status, record.backends) == ("example", "loaded", ("example",))
    assert (record.distribution, record.version) == ("hetero-example-backend", _declared_version())
    backend = plugins.get("example")
    assert backend.version == _declared_version()
    assert validate_backend(backend) == []
    assert backend.memory.summary() == "DRAM 1 GiB > SRAM 256 KiB"
    assert backend.memory.levels[-1].scope == "shared"
    assert all(p.example is not None for p in backend.patterns)


def test_compile_splits_between_example_and_llvm_cpu(installed: tuple[Path, PluginSet],
                                                      tmp_path: Path) -> None:
    graph = mlp()
    exe = hetero.compile(graph, targets=["example", "llvm_cpu"])
    assert [p.backend for p in exe.placements] == ["example", "llvm_cpu", "example"]
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    expected = run_reference(graph, {"x": x})
    got = exe.run({"x": x})
    # The example's regions match the reference bit for bit; llvm_cpu's Softmax may
    # differ by a few ulps, which the last MatMul (K=128) and Sigmoid barely amplify.
    np.testing.assert_allclose(got["sigmoid"], expected["sigmoid"], rtol=1e-5, atol=1e-6)
    exe.save(tmp_path / "mlp.hetero")
    again = hetero.load(tmp_path / "mlp.hetero").run({"x": x})
    np.testing.assert_array_equal(again["sigmoid"], got["sigmoid"])


def test_whole_graph_on_example_matches_reference_exactly(example: Backend) -> None:
    rng = np.random.default_rng(2)
    b = GraphBuilder("ops")
    x = b.input("x", (3, 4))
    h = b.Relu(b.Add(b.MatMul(x, _rand(rng, 4, 5)), _rand(rng, 5)))
    g1 = b.Gemm(h, _rand(rng, 2, 5), _rand(rng, 2), transB=1, alpha=0.5, beta=2.0)
    g2 = b.Gemm(x, _rand(rng, 4, 2), _rand(rng, 3, 1), beta=0.0)
    b.output(b.Sigmoid(b.Mul(g1, g2)), b.MatMul(b.input("v", (4,)), _rand(rng, 2, 4, 3)))
    graph = b.build()
    inputs = {"x": _rand(rng, 3, 4), "v": _rand(rng, 4)}
    got = bind(example).compile(graph).run(inputs)
    for name, want in run_reference(graph, inputs).items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape
        np.testing.assert_array_equal(got[name], want, err_msg=name)


def test_artifact_is_deterministic_and_reloads(example: Backend, tmp_path: Path) -> None:
    graph = mlp(softmax=False)
    first = bind(example, dump_dir=tmp_path).compile(graph.copy())
    second = bind(example).compile(graph.copy())
    assert first.artifact == second.artifact
    assert (tmp_path / "kernel.py").read_text() == first.source
    loaded = example.load_artifact(first.artifact)
    assert loaded.artifact == first.artifact
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})["sigmoid"], first.run({"x": x})["sigmoid"])
    with pytest.raises(PluginError, match="not an artifact of the example backend"):
        example.load_artifact(b"PK not a zip")


def test_declined_nodes_carry_reasons(example: Backend) -> None:
    b = GraphBuilder("declined")
    x16 = b.input("x16", (2, 3), "float16")
    a = b.input("a", (3, 2))
    b.output(b.Relu(x16, name="relu16"), b.Gemm(a, np.ones((3, 4), np.float32), transA=1, name="gemm_ta"),
             b.Softmax(a, name="soft"))
    graph = b.build()
    relu, gemm, soft = (graph.node(n) for n in ("relu16", "gemm_ta", "soft"))
    assert bind(example).supports(relu) == Support.no(
        "the example backend computes in float32 only; Relu relu16 has x16 of float16")
    assert "transA=1 is not implemented" in bind(example).supports(gemm).reason
    assert bind(example).supports(soft) == Support.no("the example backend does not implement Softmax")
    with pytest.raises(PluginError, match="relu16 .* float32 only"):
        bind(example).compile(graph)


def test_matmul_bias_pattern_checks_the_scratchpad(example: Backend) -> None:
    (pattern,) = example.patterns
    graph = pattern.example()
    [(match, verdict)] = list(pattern.match(graph.node("bias"), bind(example)))
    assert verdict.ok and match.const("w").shape == (16, 8)
    b = GraphBuilder("big")
    x = b.input("x", (1, 256))
    b.output(b.Add(b.MatMul(x, np.zeros((256, 256), np.float32)), np.zeros(256, np.float32), name="add"))
    [(_, refused)] = list(pattern.match(b.build().node("add"), bind(example)))
    assert refused == Support.no(
        "matmul_bias needs 263168 bytes of weights and bias on chip; "
        "the SRAM 256 KiB scratchpad holds 262144")
    b = GraphBuilder("half")
    x = b.input("x", (1, 4), "float16")
    b.output(b.Add(b.MatMul(x, np.zeros((4, 4), np.float16), name="mm"), np.zeros(4, np.float16), name="add"))
    [(_, refused)] = list(pattern.match(b.build().node("add"), bind(example)))
    assert refused == Support.no("the example backend computes in float32 only; MatMul mm has x of float16")


def test_part_rejects_bad_inputs(example: Backend) -> None:
    part = bind(example).compile(mlp(softmax=False))
    good = np.zeros((8, 64), np.float32)
    with pytest.raises(InputError, match="missing input"):
        part.run({})
    with pytest.raises(InputError, match=r"'x' must be float32\[8, 64\], got float64\[8, 64\]"):
        part.run({"x": good.astype(np.float64)})
    with pytest.raises(InputError, match=r"got float32\[64, 8\]"):
        part.run({"x": good.T})
    with pytest.raises(InputError, match="no input 'y'"):
        part.run({"x": good, "y": good})


def test_hetero_plugins_lists_the_example(installed: tuple[Path, PluginSet]) -> None:
    site, _ = installed
    result = run_hetero(site, "plugins")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("example"))
    assert "hetero-example-backend" in row and "npu" in row and "DRAM 1 GiB > SRAM 256 KiB" in row


@pytest.mark.slow
def test_the_installed_example_passes_the_conformance_suite(tmp_path: Path) -> None:
    """The README's test command pip-installs the example; the suite checks that install."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        where = Path(distribution("hetero-example-backend").locate_file(""))
    except PackageNotFoundError:
        pytest.fail("the example plugin is not installed: pip install ./examples/hetero-example-backend "
                    "(the README's test command does)")
    data, _ = run_conformance(tmp_path, "example")
    assert "failed" not in data["summary"], f"installed at {where}: {data['summary']}"
    ops = {"Relu", "Sigmoid", "Add", "Mul", "MatMul", "Gemm"}
    assert {op for op, row in data["matrix"].items() if row.get("float32") == "passed"} == ops
    assert "test_pattern[matmul_bias]" in data["tests"] and data["tests"]["test_pattern[matmul_bias]"] == "passed"
