"""A builder for writing graphs by hand, in tests and in user code.

>>> import numpy as np
>>> b = GraphBuilder("mlp")
>>> x = b.input("x", (1, 4))
>>> h = b.Relu(b.MatMul(x, np.ones((4, 2), np.float32)))
>>> b.output(h)
>>> print(b.build())  # doctest: +NORMALIZE_WHITESPACE
graph mlp(%x: f32[1,4]) -> (%relu: f32[1,2]) {
  %const = const f32[4,2] [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
  %matmul = MatMul(%x, %const) : f32[1,2]
  %relu = Relu(%matmul) : f32[1,2]
  return %relu
}

Any canonical op is a method (``b.Conv(x, w, pads=(1, 1, 1, 1))``); operands may be
values, numpy arrays or Python numbers (which become constants), or ``None`` for an
absent optional input. Attributes left out take the op's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.verify import verify


class GraphBuilder:
    """Builds a :class:`Graph` one op at a time; :meth:`build` verifies it."""

    def __init__(self, name: str = "main") -> None:
        self.graph = Graph(name)

    def input(self, name: str, shape: Sequence[int], dtype: Any = "float32") -> Value:
        return self.graph.add_input(name, shape, dtype)

    def constant(self, array: Any, name: str | None = None) -> Value:
        return self.graph.add_constant(np.asarray(array), name)

    def op(self, op: str, *inputs: Any, name: str | None = None, **attrs: Any) -> Any:
        """Apply ``op``; return its output value, or a tuple for several outputs."""
        operands = [self._operand(x) for x in inputs]
        node = self.graph.add_node(op, operands, attrs, name=name)
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)

    def output(self, *values: Value) -> None:
        self.graph.set_outputs(list(values))

    def build(self) -> Graph:
        """Verify and return the graph."""
        return verify(self.graph)

    def __getattr__(self, op: str) -> Callable[..., Any]:
        if not op[:1].isupper():
            raise AttributeError(op)
        return lambda *inputs, **kw: self.op(op, *inputs, **kw)

    def _operand(self, x: Any) -> Value | None:
        if x is None or isinstance(x, Value):
            return x
        array = np.asarray(x)
        if array.dtype == np.float64 and not isinstance(x, np.ndarray):
            array = array.astype(np.float32)  # Python floats mean float32, as in ONNX models
        return self.graph.add_constant(array)
