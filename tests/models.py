"""Model helpers for tests: onnx's "light" model zoo and tiny hand-built models.

The nine light models are real architectures whose weights onnx replaced by
ConstantOfShape nodes, so the files are tiny; give them weights with
:func:`hetero.core.frontend.onnx.randomize_weights`. They are found by
:mod:`hetero.core.frontend.light` (the CLI's ``light:NAME``), re-exported here.
"""

from __future__ import annotations

import onnx

from hetero.core.frontend.light import LIGHT_MODELS, light_model_path

__all__ = ["LIGHT_MODELS", "light_model_path", "tiny_model"]


def tiny_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, list[int | str] | None]],
    outputs: list[str],
    initializers: list[onnx.TensorProto] = (),
    opset: int = 18,
    extra_opsets: dict[str, int] | None = None,
) -> onnx.ModelProto:
    """A small model for frontend tests.

    ``inputs`` maps each graph input to (element type, shape); a shape entry may be a
    ``dim_param`` string and the shape ``None`` for an unknown rank. The outputs are
    declared with the types onnx infers for them (float of unknown shape if none).
    """
    graph = onnx.helper.make_graph(
        nodes, "tiny",
        [onnx.helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [], initializer=list(initializers),
    )
    opsets = [onnx.helper.make_opsetid("", opset)]
    opsets += [onnx.helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = onnx.helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8 if opset < 21 else 10
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    for name in outputs:
        model.graph.output.append(inferred.get(name) or onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.FLOAT, None))
    return model
