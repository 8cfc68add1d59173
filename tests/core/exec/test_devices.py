"""The device-aware runtime: values stay on the device that made them, transfers are the
partition's, performed between devices, timed and reported; graph outputs come home.

The test backends ``box_a`` and ``box_b`` share one device, ``box``, whose arrays are
:class:`Box` wrappers (not numpy) and which counts every copy in and out, so a copy the
executable should not make shows up in the counts.
"""

from __future__ import annotations

import importlib
import io
import json
from pathlib import Path
from typing import Any
import zipfile

import numpy as np
import pytest

import hetero
from hetero.core.exec.device import HOST, CopiesFrom, Device, NumpyDevice, run_from_host, transfer
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.partition.transfers import TransferStep
from hetero.core.plugin.capabilities import OnDevice, device_of
from hetero.core.runtime.executable import MAGIC
from hetero.core.runtime.signing import SEAL_SIZE
from hetero.errors import HeteroError, PluginError

BOX_PLUGIN = """\
import numpy as np

from hetero.core.plugin import hookimpl
from toyplugin import ToyBackend


class Box:
    '''An array of the box device: not a numpy array, so a host array handed to a box
    part, or a box array handed to a host part, fails.'''

    def __init__(self, array):
        self.array = array


class BoxDevice:
    name = "box"

    def __init__(self):
        self.copies = {"in": 0, "out": 0}

    def allocate(self, shape, dtype):
        return Box(np.empty(shape, dtype))

    def copy_in(self, array):
        self.copies["in"] += 1
        return Box(np.array(array, copy=True))

    def copy_out(self, box):
        self.copies["out"] += 1
        return np.array(box.array, copy=True)

    def describe(self, value):
        return (value.array.shape, value.array.dtype) if isinstance(value, Box) else None


BOX = BoxDevice()


class BoxPart:
    device = BOX

    def __init__(self, inner, lie=False):
        self.inner, self.lie = inner, lie
        self.inputs, self.outputs, self.artifact = inner.inputs, inner.outputs, inner.artifact

    def run(self, inputs):
        for name, value in inputs.items():
            if not isinstance(value, Box):
                raise TypeError(f"{name} is a {type(value).__name__}, not on the box")
        results = self.inner.run({name: box.array for name, box in inputs.items()})
        return {name: array if self.lie else Box(array) for name, array in results.items()}


class BoxBackend(ToyBackend):
    lie = False

    def compile(self, subgraph, target):
        return BoxPart(super().compile(subgraph, target), self.lie)

    def load_artifact(self, artifact):
        return BoxPart(super().load_artifact(artifact), self.lie)


@hookimpl
def hetero_backends():
    liar = BoxBackend("box_liar", ops=("Add", "Neg"))
    liar.lie = True
    return [BoxBackend("box_a", ops=("Add", "Neg")), BoxBackend("box_b", ops=("Tanh",)), liar]
"""


@pytest.fixture
def box(site) -> Any:
    """The installed box plugin's module (its ``BOX`` device counts the copies)."""
    modules = site.install("hetero-box", "1.0", {"box": BOX_PLUGIN})
    site.load()
    return importlib.import_module(modules["box"])


def chain_graph(neg_out: bool = False) -> Graph:
    """add, neg (box_a) -> tanh (box_b) -> sigmoid (llvm_cpu only); with ``neg_out``,
    neg is a graph output too."""
    b = GraphBuilder("chain")
    x = b.input("x", (2, 3))
    neg = b.Neg(b.Add(x, np.arange(3, dtype=np.float32), name="add"), name="neg")
    y = b.Sigmoid(b.Tanh(neg, name="tanh"), name="y")
    b.output(*((y, neg) if neg_out else (y,)))
    return b.build()


def x_input() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}


def compile_chain(targets: list[str], neg_out: bool = False) -> hetero.Executable:
    # min_ratio=0 keeps the tiny regions, which the estimates would return to llvm_cpu.
    return hetero.compile(chain_graph(neg_out), targets=targets, passes=[], min_ratio=0.0)


def report_rows(exe: hetero.Executable) -> dict[str, list[str]]:
    """The report's per-kernel rows, by their first two words."""
    report = exe.report()
    table = report[report.index(f"executable {exe.name}"):].splitlines()[2:]
    return {" ".join(line.split()[:2]): line.split() for line in table if line.strip()}


def test_two_regions_on_one_device_hand_values_over_without_a_host_copy(box) -> None:
    exe = compile_chain(["box_a", "box_b"])
    assert [(p.region, p.backend) for p in exe.placements] == [
        ("r0", "box_a"), ("r1", "box_b"), ("r2", "llvm_cpu")]
    assert [device_of(p.part).name for p in exe.placements] == ["box", "box", "host"]
    # Planned: x in, neg from box_a to box_b, tanh to llvm_cpu; neg moves no bytes.
    assert [p.transfers_in for p in exe.placements] == [
        (TransferStep("x", "llvm_cpu", "box_a"),), (TransferStep("neg", "box_a", "box_b"),),
        (TransferStep("tanh", "box_b", "llvm_cpu"),)]
    got = exe.run(x_input())
    expected = hetero.run_reference(chain_graph(), x_input())["y"]
    np.testing.assert_allclose(got["y"], expected, rtol=1e-6, atol=1e-6)
    assert box.BOX.copies == {"in": 1, "out": 1}
    exe.run(x_input())
    assert box.BOX.copies == {"in": 2, "out": 2}


def test_a_transfer_to_the_host_backend_is_performed_once_and_reported_with_its_time(box) -> None:
    exe = compile_chain(["box_a", "box_b"])
    exe.run(x_input())
    rows = report_rows(exe)
    for label, calls in (("transfer x", "1"), ("transfer tanh", "1")):
        assert rows[label][3] == calls, label
        assert float(rows[label][4]) >= 0.0
    assert rows["transfer tanh"][2] == "box_b->llvm_cpu" and rows["transfer x"][2] == "llvm_cpu->box_a"
    assert "transfer neg" not in rows
    assert "of which transfers" in exe.report()


def test_a_graph_output_made_on_a_device_comes_back_as_a_host_array(box) -> None:
    exe = compile_chain(["box_a", "box_b"], neg_out=True)
    assert exe.placements[0].transfers_out == (TransferStep("neg", "box_a", "llvm_cpu"),)
    got = exe.run(x_input())
    expected = hetero.run_reference(chain_graph(neg_out=True), x_input())
    assert isinstance(got["neg"], np.ndarray)
    np.testing.assert_allclose(got["neg"], expected["neg"], rtol=1e-6, atol=1e-6)
    # x in; neg out once (home), tanh out once (to llvm_cpu).
    assert box.BOX.copies == {"in": 1, "out": 2}
    assert report_rows(exe)["transfer neg"][2] == "box_a->llvm_cpu"


def test_a_part_that_returns_host_arrays_from_a_device_is_a_named_plugin_bug(box) -> None:
    g = GraphBuilder("one")
    g.output(g.Neg(g.input("x", (2, 3)), name="n"))
    exe = hetero.compile(g.build(), targets=["box_liar"], passes=[], min_ratio=0.0)
    with pytest.raises(PluginError, match=r"box_liar \(region r0\) returned output 'n' as a ndarray, "
                                          r"not an array of its device box"):
        exe.run(x_input())


def test_a_saved_device_executable_loads_and_runs_with_its_transfers(box, tmp_path: Path) -> None:
    exe = compile_chain(["box_a", "box_b"])
    path = tmp_path / "chain.hetero"
    exe.save(path)
    again = hetero.load(path)
    assert [(p.transfers_in, p.transfers_out) for p in again.placements] == [
        (p.transfers_in, p.transfers_out) for p in exe.placements]
    np.testing.assert_array_equal(again.run(x_input())["y"], exe.run(x_input())["y"])
    assert box.BOX.copies == {"in": 2, "out": 2}


def test_a_file_saved_before_devices_plans_its_transfers_again_on_load(box, tmp_path: Path) -> None:
    exe = compile_chain(["box_a", "box_b"])
    path = tmp_path / "old.hetero"
    exe.save(path)
    # As an older hetero wrote it: unsigned, only the copies between parts, no transfers_out.
    data = path.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data[len(MAGIC) + SEAL_SIZE:])) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    for entry in manifest["parts"]:
        del entry["transfers_out"]
        entry["transfers_in"] = [t for t in entry["transfers_in"] if t[0] != "x"]
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, member in members.items():
            zf.writestr(name, member)
    path.write_bytes(buffer.getvalue())
    hetero.trust(path)
    again = hetero.load(path)
    assert [p.transfers_in for p in again.placements] == [
        (TransferStep("x", "host", "box_a"),), (TransferStep("neg", "box_a", "box_b"),),
        (TransferStep("tanh", "box_b", "llvm_cpu"),)]
    np.testing.assert_array_equal(again.run(x_input())["y"], exe.run(x_input())["y"])
    assert "transfer x host->box_a" in again.report()


class _Counting(NumpyDevice):
    """A numpy device that counts its copies."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.copies = 0

    def copy_in(self, array: np.ndarray) -> np.ndarray:
        self.copies += 1
        return super().copy_in(array)

    def copy_out(self, array: Any) -> np.ndarray:
        self.copies += 1
        return super().copy_out(array)


class _Peer(_Counting):
    """A device that copies directly from devices called ``card*``."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.direct = 0

    def can_copy_from(self, source: Device) -> bool:
        return source.name.startswith("card")

    def copy_from(self, array: Any, source: Device) -> Any:
        self.direct += 1
        return np.array(array, copy=True)


def test_host_copies_are_fresh_and_contiguous() -> None:
    source = np.arange(12, dtype=np.float32).reshape(3, 4).T
    for moved in (HOST.copy_in(source), HOST.copy_out(source)):
        assert moved.flags.c_contiguous and not np.shares_memory(moved, source)
        np.testing.assert_array_equal(moved, source)
    assert HOST.describe(source) == ((4, 3), np.dtype(np.float32)) and HOST.describe([1.0]) is None
    assert HOST.allocate((2, 5), np.dtype(np.int8)).shape == (2, 5)
    assert isinstance(HOST, Device) and not isinstance(HOST, CopiesFrom)


def test_a_transfer_goes_device_to_device_where_the_destination_can_else_through_the_host() -> None:
    card, peer, other = _Counting("card0"), _Peer("peer"), _Counting("other")
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(transfer(a, card, peer), a)
    assert (card.copies, peer.copies, peer.direct) == (0, 0, 1)
    np.testing.assert_array_equal(transfer(a, other, peer), a)
    assert (other.copies, peer.copies, peer.direct) == (1, 1, 1)
    np.testing.assert_array_equal(transfer(a, card, HOST), a)
    np.testing.assert_array_equal(transfer(a, HOST, other), a)
    assert (card.copies, other.copies) == (1, 2)


def test_run_from_host_copies_in_and_out_of_a_parts_device() -> None:
    class Part:
        device = _Counting("card1")
        inputs, outputs = ("x",), ("y",)

        def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {"y": inputs["x"] * 2}

    part = Part()
    assert isinstance(part, OnDevice) and device_of(part) is Part.device
    got = run_from_host(part.run, device_of(part), {"x": np.ones(3)})
    np.testing.assert_array_equal(got["y"], 2 * np.ones(3))
    assert Part.device.copies == 2


def test_a_value_no_transfer_brought_is_an_error_naming_it_and_the_device(box) -> None:
    exe = compile_chain(["box_a", "box_b"], neg_out=True)
    exe.placements[0].transfers_out = ()
    with pytest.raises(HeteroError, match=r"graph output 'neg' stays on device box, and no transfer "
                                          r"brings it to the host"):
        exe.run(x_input())
    exe.placements[0].transfers_in = ()
    with pytest.raises(HeteroError, match=r"region r0 on box_a reads 'x', which no transfer brought "
                                          r"to device box"):
        exe.run(x_input())
