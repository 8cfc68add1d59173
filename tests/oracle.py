"""onnxruntime as the numerical oracle: run one ONNX op or a whole model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
import onnxruntime as ort

#: The opset single-op oracle models are written in unless a test says otherwise.
ORACLE_OPSET = 18


def node_model(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    n_outputs: int = 1,
    opset: int = ORACLE_OPSET,
    constant_inputs: Sequence[str] = (),
    **attrs: Any,
) -> onnx.ModelProto:
    """A model of one ``op_type`` node; inputs named in ``constant_inputs`` become initializers.

    A ``None`` input is passed to the node as an absent optional operand ("").
    """
    graph_inputs, inits, names = [], [], []
    for name, array in inputs.items():
        if array is None:
            names.append("")
            continue
        names.append(name)
        if name in constant_inputs:
            inits.append(numpy_helper.from_array(np.asarray(array), name))
        else:
            elem = helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, elem, np.shape(array)))
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, **attrs)
    graph = helper.make_graph([node], op_type.lower(), graph_inputs, [], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # Declare the outputs with the types onnx infers for them.
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {vi.name: vi for vi in inferred.graph.value_info}
    model.graph.output.extend(types[o] for o in outs)
    return model


def run_model(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], threads: int = 1) -> list[np.ndarray]:
    """Run ``model`` with onnxruntime on the CPU, all graph optimisations off."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def run_node(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    n_outputs: int = 1,
    opset: int = ORACLE_OPSET,
    constant_inputs: Sequence[str] = (),
    **attrs: Any,
) -> list[np.ndarray]:
    """onnxruntime's result for one ``op_type`` node on ``inputs``."""
    model = node_model(op_type, inputs, n_outputs, opset, constant_inputs, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in constant_inputs}
    return run_model(model, feeds)


def quantize_with_onnxruntime(float_path: str | Path, qdq_path: str | Path,
                              samples: Iterable[Mapping[str, np.ndarray]]) -> None:
    """Write onnxruntime's static int8 quantisation of ``float_path`` to ``qdq_path``.

    QDQ format, per-channel QInt8 weights, QInt8 activations: what hetero's quantiser
    writes too, calibrated (min-max) on ``samples``. Weights take 7 bits
    (``reduce_range``), as onnxruntime advises for hosts without VNNI: its AVX2 int8
    kernel (vpmaddubsw) saturates a pair of products at int16, so with 8-bit weights its
    own answer, the oracle here, would depend on the host (it did on a Zen 3).
    """
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(list(samples))

        def get_next(self) -> Mapping[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantize_static(str(float_path), str(qdq_path), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, reduce_range=True, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
