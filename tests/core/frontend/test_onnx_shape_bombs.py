"""Shape bombs: a tiny model that describes a huge tensor is refused, or loaded, without
anything (onnx's shape inference, hetero's import folding) allocating that tensor."""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.frontend.onnx.shapes import infer_onnx_types, resolve_input_shapes
from hetero.errors import TensorTooLargeError
from models import tiny_model

N = 2**30  # the default budget: allowed, but 4-8 GiB if anything materialised it


def _const(name: str, value: list[int] | int) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.array(value, np.int64)))


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], out: str,
           out_shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info(out, TensorProto.INT64, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _bombs(folder: Path) -> list[Path]:
    """Models whose 1-D int64 value of 2**30 elements feeds an op onnx propagates data for."""
    x = [helper.make_tensor_value_info("x", TensorProto.INT64, [N])]
    models = {
        # 71 bytes: onnx's data propagation spells out x's 2**30 values as dims.
        "input": _model([helper.make_node("Add", ["x", "x"], ["y"])], x, "y", [N]),
        "constant_of_shape": _model(
            [_const("s", [N]),
             helper.make_node("ConstantOfShape", ["s"], ["z"],
                              value=numpy_helper.from_array(np.array([1], np.int64))),
             helper.make_node("Mul", ["z", "z"], ["y"])], [], "y", [N]),
        "expand": _model(
            [_const("one", [1]), _const("s", [N]),
             helper.make_node("Expand", ["one", "s"], ["e"]),
             helper.make_node("Sub", ["e", "e"], ["y"])], [], "y", [N]),
    }
    paths = []
    for name, model in models.items():
        paths.append(folder / f"{name}.onnx")
        onnx.save(model, paths[-1])
    return paths


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
def test_data_propagation_bombs_load_in_bounded_memory(tmp_path: Path) -> None:
    # In a child whose address space may grow by 2 GiB only: onnx's data propagation of
    # these models needs over 100 GiB (std::bad_alloc after 40 s without a limit).
    paths = _bombs(tmp_path)
    child = textwrap.dedent(f"""
        import resource, sys
        from hetero.core.frontend.onnx import load_onnx
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        limit = pages * resource.getpagesize() + 2 * 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        for path in sys.argv[1:]:
            graph = load_onnx(path)
            print(path, graph.outputs[0].shape, graph.outputs[0].dtype)
    """)
    done = subprocess.run([sys.executable, "-c", child, *map(str, paths)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"{p} ({N},) int64" for p in paths]


def test_shape_computations_are_still_propagated_by_onnx() -> None:
    # The cross-check with onnx keeps its data propagation for ordinary shape chains:
    # without it, onnx could not type the Reshape's output.
    model = tiny_model(
        [helper.make_node("Shape", ["x"], ["s"]), _const("i", [0]),
         helper.make_node("Gather", ["s", "i"], ["batch"]), _const("rest", [-1]),
         helper.make_node("Concat", ["batch", "rest"], ["shape"], axis=0),
         helper.make_node("Reshape", ["x", "shape"], ["y"])],
        {"x": (TensorProto.FLOAT, [2, 3, 4])}, ["y"])
    source = read_model(model)
    resolve_input_shapes(source, None)
    assert infer_onnx_types(source, 18)["y"].shape == (2, 12)


def test_input_over_budget_is_refused_before_onnx_runs() -> None:
    model = tiny_model([helper.make_node("Relu", ["x"], ["y"])],
                       {"x": (TensorProto.FLOAT, [2**16, 2**16])}, ["y"])
    with pytest.raises(TensorTooLargeError,
                       match=r"model tiny: input 'x' has shape \[65536, 65536\].*max_elements="):
        hetero.load_onnx(model)


def test_input_shape_given_over_budget_is_refused() -> None:
    model = tiny_model([helper.make_node("Relu", ["x"], ["y"])],
                       {"x": (TensorProto.INT64, ["n"])}, ["y"])
    with pytest.raises(TensorTooLargeError, match=r"input 'x' has shape \[1099511627776\]"):
        hetero.load_onnx(model, {"x": [2**40]})


def test_import_folding_refuses_to_materialise_a_huge_tensor() -> None:
    # The Reshape's shape is computed from the values of a [32768, 32768] tensor (1 GiB
    # of int8, inside the default budget): folding it at import would allocate it.
    model = tiny_model(
        [_const("s", [2**15, 2**15]),
         helper.make_node("ConstantOfShape", ["s"], ["z"], name="fill",
                          value=numpy_helper.from_array(np.array([1], np.int8))),
         helper.make_node("ReduceMax", ["z"], ["m"], keepdims=0),
         helper.make_node("Cast", ["m"], ["m64"], to=TensorProto.INT64), _const("ax", [0]),
         helper.make_node("Unsqueeze", ["m64", "ax"], ["shape"]),
         helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        {"x": (TensorProto.FLOAT, [1])}, ["y"])
    tracemalloc.start()
    try:
        with pytest.raises(TensorTooLargeError,
                           match=r"'reshape' \(Reshape\): its shape input 'shape'.*'fill' "
                                 r"\(ConstantOfShape\).*\[32768, 32768\]"):
            hetero.load_onnx(model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20


def test_huge_constant_of_shape_that_nothing_folds_loads_unallocated() -> None:
    model = tiny_model(
        [_const("s", [2**15, 2**15]),
         helper.make_node("ConstantOfShape", ["s"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])], {}, ["y"])
    tracemalloc.start()
    try:
        graph = hetero.load_onnx(model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert graph.outputs[0].shape == (2**15, 2**15)
    assert peak < 64 * 2**20
