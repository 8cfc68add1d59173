"""The shared step part: its run (views, index checks, the arena or a device's memory),
output checks, profile, capabilities and its artifact, on the interpreter backend."""

from __future__ import annotations

from dataclasses import replace
import io
import json
from typing import Any
import zipfile

import numpy as np
import pytest

from core.parts.interp import InterpBackend, InterpBuilder, InterpPart
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.parts import Clock, Step, StepPart, compile_steps
from hetero.core.plugin.capabilities import CountsKernels, OnDevice, Profiles, RunsIntermediates
from hetero.core.plugin.target import bind
from hetero.core.exec.archive import write_zip
from hetero.core.exec.reference import run_reference
from hetero.errors import DamagedFileError, InputError, PluginError


def _graph() -> Graph:
    """Relu, a view of it, Neg of the view; a Gather with run-time indices; an Exp."""
    b = GraphBuilder("g")
    x = b.input("x", (4, 6))
    idx = b.input("i", (3,), "int64")
    r = b.Relu(x, name="relu")
    flat = b.Reshape(r, shape=[24], name="flat")
    neg = b.Neg(flat, name="neg")
    g = b.Gather(r, idx, axis=0, name="gather")
    b.output(neg, b.Exp(g, name="exp"))
    return b.build()


def _inputs(index: tuple[int, ...] = (3, 0, 1)) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32),
            "i": np.array(index, np.int64)}


def _part(graph: Graph | None = None, cls: type[InterpPart] = InterpPart, **options: Any) -> InterpPart:
    return cls(*compile_steps(graph or _graph(), bind(InterpBackend()), InterpBuilder()), **options)


def _check(got: dict[str, np.ndarray], graph: Graph, inputs: dict[str, np.ndarray]) -> None:
    want = run_reference(graph, inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


def test_a_part_runs_its_steps_in_order_views_included_and_profiles_each_kernel() -> None:
    graph, part = _graph(), _part()
    assert [s.view is not None for s in part.steps] == [False, True, False, False, False]
    assert part.kernel_count == 4
    _check(part.run(_inputs()), graph, _inputs())
    assert [name for name, _ in part.last_profile] == [s.name for s in part.steps if s.view is None]
    assert all(seconds >= 0 for _, seconds in part.last_profile)
    for capability in (RunsIntermediates, Profiles, CountsKernels):
        assert isinstance(part, capability)
    assert not isinstance(part, OnDevice)


def test_intermediates_share_one_planned_arena_but_never_the_outputs() -> None:
    part = _part()
    assert part.memory_plan is not None
    planned = {a.name for a in part.memory_plan.allocations}
    assert "relu" in planned and not planned & set(part.outputs)
    first = part.run(_inputs())
    kept = {name: array.copy() for name, array in first.items()}
    part.run(_inputs((0, 0, 0)))
    for name, array in first.items():
        np.testing.assert_array_equal(array, kept[name])
    values = part.run_intermediates(_inputs())
    assert {"relu", "flat", "neg", "gather", "exp"} <= set(values)
    np.testing.assert_array_equal(values["flat"], values["relu"].reshape(24))


def test_an_index_out_of_range_is_an_input_error_naming_the_step_and_the_value() -> None:
    with pytest.raises(InputError, match=r"gather \(Gather\): i: .*4"):
        _part().run(_inputs((0, 4, 1)))


class _Wrong(InterpPart):
    """A backend whose kernels write what it says here, not what their steps declare."""

    writes: list[Any] = []

    def kernel_output_types(self, step: Step[Any]) -> list[Any]:
        return self.writes if step.name.startswith("exp") else super().kernel_output_types(step)


@pytest.mark.parametrize("writes, message", [
    ([], "its kernel writes 0 arrays, the step declares 1 outputs"),
    ([((3, 6), np.float32), ((3, 6), np.float32)], "its kernel writes 2 arrays"),
    ([((18,), np.float32)], r"its kernel writes exp as float32\[18\], the step declares float32\[3, 6\]"),
    ([((3, 6), np.float64)], r"its kernel writes exp as float64\[3, 6\], the step declares float32"),
])
def test_a_kernel_that_writes_other_outputs_than_its_step_declares_is_a_plugin_error(writes, message) -> None:
    class Wrong(_Wrong):
        pass

    Wrong.writes = writes
    with pytest.raises(PluginError, match=rf"interp: step exp \(Exp\): {message}"):
        _part(cls=Wrong)


def test_the_artifact_is_deterministic_one_manifest_layout_and_reloads() -> None:
    part = _part()
    assert part.artifact == _part().artifact
    with zipfile.ZipFile(io.BytesIO(part.artifact)) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = zf.namelist()
    assert set(manifest) == {"inputs", "outputs", "aliases", "constants", "settings", "steps"}
    assert set(manifest["steps"][1]) == {"name", "inputs", "outputs", "nodes", "checks", "view"}
    gather = manifest["steps"][3]
    assert set(gather) == {"name", "inputs", "outputs", "nodes", "checks", "types", "kernel"}
    assert gather["checks"] == [["i", 0, 4, True]] and gather["types"] == [[[3, 6], "float32"]]
    assert "kernels/0.pickle" in names and "kernels/1.pickle" not in names
    loaded = InterpPart.from_artifact(part.artifact)
    assert [(s.name, s.view, s.checks, s.output_types) for s in loaded.steps] == \
        [(s.name, s.view, s.checks, s.output_types) for s in part.steps]
    assert loaded.memory_plan == part.memory_plan
    _check(loaded.run(_inputs()), _graph(), _inputs())
    with pytest.raises(InputError, match="gather"):
        loaded.run(_inputs((9, 0, 0)))


def _rewritten(artifact: bytes, change: Any) -> bytes:
    with zipfile.ZipFile(io.BytesIO(artifact)) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    change(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    return write_zip(list(members.items()))


@pytest.mark.parametrize("change, message", [
    (lambda m: m.pop("settings"), "incomplete or malformed .KeyError: 'settings'"),
    (lambda m: m["steps"][0].pop("types"), "incomplete or malformed .KeyError: 'types'"),
    (lambda m: m["steps"][0]["kernel"].update(name="other"), "incomplete or malformed .ValueError"),
    (lambda m: m["steps"][0].update(types=[[[5], "float32"]]), r"its kernel writes relu as float32\[4, 6\]"),
])
def test_a_damaged_manifest_is_a_damaged_file_error_naming_the_backend(change, message) -> None:
    with pytest.raises(DamagedFileError, match=rf"interp artifact: .*{message}"):
        InterpPart.from_artifact(_rewritten(_part().artifact, change))


def test_a_missing_kernel_file_is_a_damaged_file_error() -> None:
    with zipfile.ZipFile(io.BytesIO(_part().artifact)) as zf:
        members = [(name, zf.read(name)) for name in zf.namelist() if name != "kernels/2.pickle"]
    with pytest.raises(DamagedFileError, match="interp artifact"):
        InterpPart.from_artifact(write_zip(members))


class _FarArray:
    """An array of a device that is not host memory: numpy data the host must not touch."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def reshape(self, shape: Any) -> _FarArray:
        return _FarArray(self.data.reshape(shape))


class _FarDevice:
    name = "far"

    def __init__(self) -> None:
        self.copies_in = 0

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> _FarArray:
        return _FarArray(np.full(shape, 7, dtype))

    def copy_in(self, array: np.ndarray) -> _FarArray:
        self.copies_in += 1
        return _FarArray(np.array(array))

    def copy_out(self, array: _FarArray) -> np.ndarray:
        return np.array(array.data)

    def describe(self, array: Any) -> Any:
        return (array.data.shape, array.data.dtype) if isinstance(array, _FarArray) else None


class _FarPart(InterpPart):
    """The interpreter behind a device of its own: values are copied in and out."""

    backend = "far"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = _FarDevice()
        super().__init__(*args, **kwargs)

    def launch(self, step: Step[Any], arrays: list[Any], clock: Clock) -> None:
        for a in arrays:
            assert isinstance(a, _FarArray), f"{step.name} was given a host array"
        super().launch(step, [a.data for a in arrays], clock)


def test_on_a_device_that_is_not_host_memory_the_part_allocates_there_and_binds_constants_once() -> None:
    b = GraphBuilder("w")
    x = b.input("x", (2, 3))
    w = b.constant(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    idx = b.input("i", (2,), "int64")
    b.output(b.Gather(b.Mul(x, w, name="mul"), idx, axis=0, name="gather"))
    graph = b.build()
    part = _part(graph, _FarPart)
    assert isinstance(part, OnDevice) and part.memory_plan is None
    inputs = {"x": np.ones((2, 3), np.float32), "i": np.array([1, 0])}
    for _ in range(2):
        got = part.run({n: _FarArray(a) for n, a in inputs.items()})
        np.testing.assert_array_equal(got["gather"].data, run_reference(graph, inputs)["gather"])
    assert part.device.copies_in == 1  # the weight, on the first run only
    with pytest.raises(InputError, match="gather .Gather.: i"):  # checked on a copy on the host
        part.run({"x": _FarArray(inputs["x"]), "i": _FarArray(np.array([2, 0]))})


def test_a_part_that_does_not_say_how_to_launch_says_so() -> None:
    compiled = compile_steps(_graph(), bind(InterpBackend()), InterpBuilder())
    steps = [replace(s, kernel=None) if s.view is None else s for s in compiled.steps]

    class Bare(StepPart[Any]):
        def kernel_output_types(self, step: Step[Any]) -> list[Any]:
            return list(step.output_types)

    with pytest.raises(NotImplementedError, match="Bare does not say how to launch a kernel"):
        Bare(compiled.inputs, compiled.outputs, steps, compiled.constants, compiled.aliases).run(_inputs())
