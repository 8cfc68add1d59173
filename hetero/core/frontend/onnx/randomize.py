"""Seeded random weights for models that ship without them.

onnx's "light" test models keep their architecture but replace every weight with a
``ConstantOfShape`` of 0.02, under which deep nets collapse to uniform outputs and
numerical comparisons prove little. :func:`randomize_weights` gives them weights
drawn the way networks are initialised for training: each weight's role is read from
the node that consumes it, and it is scaled so activations neither explode nor
vanish through many layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from hetero.core.frontend.onnx.opsets import DEFAULT_DOMAINS

Draw = Callable[[np.random.Generator, Sequence[int]], np.ndarray]

#: Ops that only re-shape a weight on its way to the node that gives it a role.
_RESHAPING = frozenset({"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Cast",
                        "Transpose"})
#: Ops an activation flows through before it meets a ReLU (or not).
_ON_THE_WAY = _RESHAPING | {"Dropout", "BatchNormalization", "Add", "Sub", "Mul", "Sum",
                            "Concat", "MaxPool", "AveragePool"}
_WEIGHTED = frozenset({"Conv", "Gemm", "MatMul"})
_RESIDUAL = frozenset({"Add", "Sum"})
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                onnx.TensorProto.BFLOAT16)


def _normal(std: float) -> Draw:
    def draw(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
        values = rng.standard_normal(shape, np.float32)
        values *= np.float32(std)  # in place: VGG's first classifier layer has 100M weights
        return values

    return draw


def _uniform(low: float, high: float) -> Draw:
    return lambda rng, shape: rng.uniform(low, high, shape).astype(np.float32)


_SCALE = _uniform(0.5, 1.5)
_SHIFT = _normal(0.1)
_BIAS = _normal(0.01)
# The last normalisation of a residual branch starts small (Goyal et al., 2017, "zero
# gamma"), or the residual stream doubles its variance at every block.
_BRANCH_SCALE = _uniform(0.05, 0.15)

#: (op type, input index) -> draw, for roles that do not depend on the weight's shape.
_FIXED: dict[tuple[str, int], Draw] = {
    ("Conv", 2): _BIAS,
    ("Gemm", 2): _BIAS,
    ("BatchNormalization", 1): _SCALE,
    ("BatchNormalization", 2): _SHIFT,
    ("BatchNormalization", 3): _SHIFT,
    ("BatchNormalization", 4): _SCALE,
    ("LayerNormalization", 1): _SCALE,
    ("LayerNormalization", 2): _SHIFT,
    ("Add", 0): _SHIFT,
    ("Add", 1): _SHIFT,
    ("Sub", 0): _SHIFT,
    ("Sub", 1): _SHIFT,
}


class _Roles:
    """Reads each weight's role off the graph around it."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        # A weight may be reshaped before use; the shape its consumer sees gives the fan-in.
        inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
        self.shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                       for v in inferred if all(d.HasField("dim_value")
                                                for d in v.type.tensor_type.shape.dim)}
        self.initializers = {t.name for t in graph.initializer}
        self.consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        self.producer: dict[str, onnx.NodeProto] = {}
        for node in graph.node:
            for i, name in enumerate(node.input):
                self.consumers.setdefault(name, []).append((node, i))
            for name in node.output:
                self.producer[name] = node

    def draw(self, name: str, shape: Sequence[int]) -> Draw:
        """How to draw the weight ``name``, from its first consumer past pass-through ops."""
        current = name
        while True:
            uses = self.consumers.get(current)
            if not uses:
                return _SCALE
            node, index = uses[0]
            if node.op_type in _WEIGHTED and index in (0, 1):
                fan_in = _fan_in(node, index, shape if current == name
                                 else self.shapes.get(current, shape))
                return _normal(math.sqrt(self._gain(node) / max(fan_in, 1)))
            if node.op_type == "BatchNormalization" and index == 1 and self._ends_branch(node):
                return _BRANCH_SCALE
            if node.op_type in _RESHAPING and index == 0:
                current = node.output[0]
                continue
            # Positive values around one are safe for any other use (scales, divisors).
            return _FIXED.get((node.op_type, index), _SCALE)

    def _gain(self, node: onnx.NodeProto) -> float:
        # He's gain of 2 makes up for the half of the signal a following ReLU zeroes;
        # a layer with no ReLU after it (a classifier, a linear bottleneck) gets 1.
        current = node.output[0]
        for _ in range(len(self.producer) + 1):
            uses = self.consumers.get(current)
            if not uses:
                return 1.0
            consumer = uses[0][0]
            if consumer.op_type == "Relu":
                return 2.0
            if consumer.op_type not in _ON_THE_WAY:
                return 1.0
            current = consumer.output[0]
        return 1.0

    def _ends_branch(self, bn: onnx.NodeProto) -> bool:
        """Whether ``bn`` feeds a residual sum whose other operand is an identity shortcut."""
        for consumer, _ in self.consumers.get(bn.output[0], []):
            others = [v for v in consumer.input if v != bn.output[0]]
            if consumer.op_type in _RESIDUAL and others and all(map(self._is_shortcut, others)):
                return True
        return False

    def _is_shortcut(self, name: str) -> bool:
        # A projection shortcut is normalised itself, and a constant operand is a bias.
        if name in self.initializers:
            return False
        producer = self.producer.get(name)
        return producer is None or producer.op_type not in (
            "BatchNormalization", "ConstantOfShape", "Constant")


def _fan_in(node: onnx.NodeProto, index: int, shape: Sequence[int]) -> int:
    """The number of inputs each output of a Conv, Gemm or MatMul sums over."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Conv":
        return math.prod(shape[1:])
    if node.op_type == "Gemm":
        transposed = attrs.get("transB" if index == 1 else "transA", 0)
        # A is (M, K) and B is (K, N), each stored the other way round when transposed.
        return shape[index] if transposed else shape[1 - index]
    if index == 1 and len(shape) >= 2:
        return shape[-2]
    return shape[-1] if shape else 1


def randomize_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of ``model`` whose float weights are seeded random values.

    Every float initializer is redrawn, and every float ``ConstantOfShape`` whose
    shape is an initializer becomes an initializer of random values (the shape
    initializers it leaves unused are dropped). Conv/Gemm/MatMul weights are
    ``normal * sqrt(gain / fan_in)``, with He's gain 2 before a ReLU and 1 otherwise;
    BatchNormalization gets scale and variance ~ U(0.5, 1.5), bias and mean ~
    N(0, 0.1), except that the scale of the last normalisation of a residual branch
    is ~ U(0.05, 0.15); biases are ~ N(0, 0.01); any other float weight is
    ~ U(0.5, 1.5). Integer tensors are kept. The same seed gives the same weights.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    rng = np.random.default_rng(seed)
    roles = _Roles(model)
    shapes = {t.name: t for t in graph.initializer
              if t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)}
    for tensor in graph.initializer:
        if tensor.data_type in _FLOAT_TYPES:
            tensor.CopyFrom(_random_tensor(rng, roles, tensor.name, tensor.dims, tensor.data_type))
    kept, freed = [], set()
    for node in graph.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        elem_type = value.data_type if value is not None else onnx.TensorProto.FLOAT
        if (node.op_type != "ConstantOfShape" or node.domain not in DEFAULT_DOMAINS
                or node.input[0] not in shapes or elem_type not in _FLOAT_TYPES):
            kept.append(node)
            continue
        dims = [int(d) for d in numpy_helper.to_array(shapes[node.input[0]])]
        graph.initializer.append(_random_tensor(rng, roles, node.output[0], dims, elem_type))
        if out.ir_version < 4:  # before IR 4 every initializer is also a graph input
            graph.input.append(helper.make_tensor_value_info(node.output[0], elem_type, dims))
        freed.add(node.input[0])
    del graph.node[:]
    graph.node.extend(kept)
    _drop_unused(graph, freed)
    return out


def _random_tensor(rng: np.random.Generator, roles: _Roles, name: str, shape: Sequence[int],
                   elem_type: int) -> onnx.TensorProto:
    values = roles.draw(name, shape)(rng, tuple(shape))
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    return numpy_helper.from_array(values.astype(dtype, copy=False), name)


def _drop_unused(graph: onnx.GraphProto, candidates: set[str]) -> None:
    """Remove the initializers in ``candidates`` (and their graph inputs) nothing reads now."""
    read = {v for n in graph.node for v in n.input} | {o.name for o in graph.output}
    unused = candidates - read
    for field in (graph.initializer, graph.input):
        # Deleting in place, from the back, spares copying the (large) weights kept.
        for i in reversed(range(len(field))):
            if field[i].name in unused:
                del field[i]
