"""What a translator sees: the graph being built and one ONNX node to translate.

A translator is a function ``(NodeContext) -> None`` registered for one or more ONNX
op types with :func:`translates`. It reads the node's operands and attributes from
the context and emits canonical nodes with :meth:`NodeContext.emit` (the node that
computes the ONNX outputs) and :meth:`NodeContext.add` (helpers in between).

Static operands (a Reshape's shape, a Slice's starts, ...) are ONNX inputs in recent
opsets but attributes in hetero's canonical ops. :meth:`NodeContext.static`
evaluates such an input from the canonical graph built so far: a constant, or the
output of nodes whose inputs are all constant (a ``Shape`` needs only its input's
type). That is how PyTorch's ``Shape -> Gather -> Concat -> Reshape`` chains become
one Reshape with an explicit shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from hetero.core.exec.reference import run_node
from hetero.core.frontend.onnx.budget import FOLD_MAX_ELEMENTS, check_elements
from hetero.core.frontend.onnx.loader import fresh_name, node_label
from hetero.core.ir.graph import Graph, Node, Value
from hetero.errors import (
    DataDependentError, DynamicShapeError, Keyword, ModelLoadError, OperandInputError, TensorTooLargeError,
    UnsupportedOpError,
)

Translator = Callable[["NodeContext"], None]

#: The largest graph input (in elements) an executable specialises on when a static
#: operand is computed from it (see :mod:`hetero.core.runtime.specialize`); a larger one
#: is data, not a shape, and the model is refused.
SPECIALISE_MAX_ELEMENTS = 1024

#: ONNX op type -> its translator; filled by the translator modules on import.
TRANSLATORS: dict[str, Translator] = {}


def translates(*op_types: str) -> Callable[[Translator], Translator]:
    """Register the decorated function as the translator of ``op_types``."""

    def register(fn: Translator) -> Translator:
        for op_type in op_types:
            if op_type in TRANSLATORS:
                raise ValueError(f"ONNX op {op_type} has two translators")
            TRANSLATORS[op_type] = fn
        return fn

    return register


class ModelContext:
    """State shared by all translators of one model: the graph and the ONNX name map."""

    def __init__(
        self, graph: Graph, model: onnx.ModelProto, model_name: str, max_elements: int,
        opset: int = 13, exported_opset: int | None = None,
    ) -> None:
        self.graph = graph
        #: The default domain's version the nodes are read at, and the model's own.
        self.opset = opset
        self.exported_opset = opset if exported_opset is None else exported_opset
        #: How deep the node being translated sits in inlined If branches.
        self.if_depth = 0
        self.model_name = model_name
        self.max_elements = max_elements
        #: ONNX value name -> the canonical value that holds it.
        self.values: dict[str, Value] = {}
        #: ONNX name of a sequence value -> the canonical values of its elements, in
        #: order (sequences whose length is known at import are lists of tensors).
        self.sequences: dict[str, list[Value]] = {}
        #: ONNX names of the optionals known at import to be empty.
        self.absent: set[str] = set()
        onnx_graph = model.graph
        self._taken = {v for n in onnx_graph.node for v in (*n.input, *n.output)}
        self._taken |= {v.name for v in (*onnx_graph.input, *onnx_graph.output)}
        self._taken |= {t.name for t in onnx_graph.initializer}
        self.read = {v for n in onnx_graph.node for v in n.input} | {
            v.name for v in onnx_graph.output
        }
        self._evaluated: dict[Value, np.ndarray | None] = {}
        self._folded = 0  # elements evaluate() has computed so far

    def fresh(self, base: str) -> str:
        """A node or value name based on ``base`` that no ONNX name and no earlier one uses."""
        return fresh_name(base, self._taken)

    def evaluate(self, value: Value, needed_by: str) -> np.ndarray | None:
        """The array ``value`` always holds, or None if it depends on a graph input.

        Each node it folds is charged, from its output types and before it runs, against
        :data:`FOLD_MAX_ELEMENTS` for the whole import; ``needed_by`` says in the error
        which operand wanted the value.
        """
        stack = [value]
        while stack:
            top = stack[-1]
            if top.data is not None or top in self._evaluated:
                stack.pop()
                continue
            node = top.producer
            if node is None:
                self._evaluated[top] = None
                stack.pop()
                continue
            if node.opdef.fold is not None:
                self._charge(node, needed_by)
                self._store(node, node.opdef.fold(node.input_types(), node.attrs))
                stack.pop()
                continue
            pending = [v for v in node.inputs
                       if v is not None and v.data is None and v not in self._evaluated]
            if pending:
                stack.extend(pending)
                continue
            args = [None if v is None else self._known(v) for v in node.inputs]
            if any(a is None for v, a in zip(node.inputs, args) if v is not None):
                self._store(node, None)
            else:
                self._charge(node, needed_by)
                self._store(node, run_node(node, args))
            stack.pop()
        return self._known(value)

    def inputs_behind(self, value: Value) -> list[Value]:
        """The graph inputs ``value`` is computed from, in the graph's input order."""
        seen: set[Value] = set()
        stack = [value]
        while stack:
            top = stack.pop()
            if top in seen or top.data is not None:
                continue
            seen.add(top)
            if top.producer is not None:
                stack.extend(v for v in top.producer.inputs if v is not None)
        return [v for v in self.graph.inputs if v in seen]

    def _charge(self, node: Node, needed_by: str) -> None:
        """TensorTooLargeError if folding ``node`` would take the import past its limit."""
        size = sum(out.type.size for out in node.outputs)
        if self._folded + size > FOLD_MAX_ELEMENTS:
            big = max(node.outputs, key=lambda v: v.type.size)
            raise TensorTooLargeError(
                f"model {self.model_name}: {needed_by} would be computed at import by "
                f"folding node {node.name!r} ({node.op}), whose output {big.name!r} has shape "
                f"{list(big.shape)} ({big.type.size:,} elements); the import folds at most "
                f"{FOLD_MAX_ELEMENTS:,} elements in all for such operands (shapes, axes, "
                "bounds): compute the operand from tensor shapes (Shape) rather than tensor "
                "values, or fold it into a constant before export"
            )
        self._folded += size

    def _known(self, value: Value) -> np.ndarray | None:
        return value.data if value.data is not None else self._evaluated[value]

    def _store(self, node: Node, arrays: Sequence[np.ndarray] | None) -> None:
        for i, out in enumerate(node.outputs):
            self._evaluated[out] = None if arrays is None else np.asarray(arrays[i])


class NodeContext:
    """One ONNX node being translated, with the operations a translator needs."""

    def __init__(self, model: ModelContext, node: onnx.NodeProto) -> None:
        self.model = model
        self.node = node
        self.op_type = node.op_type
        self.label = node_label(node)
        self._attrs = {a.name: a for a in node.attribute}
        first = next((o for o in node.output if o), node.op_type)
        self._base = node.name or f"{node.op_type}_{first}"

    # -- reading ---------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute ``name`` as a Python value (strings decoded, tensors as arrays).

        A tensor is checked against the element budget before it is converted.
        """
        proto = self._attrs.get(name)
        if proto is None:
            return default
        if proto.type == onnx.AttributeProto.TENSOR:
            check_elements(proto.t.dims, f"{self.label}: attribute {name!r}",
                           self.model.max_elements)
            return numpy_helper.to_array(proto.t)
        return attribute_value(proto)

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def input(self, i: int) -> Value:
        """The canonical value of the node's ``i``-th input, which must be present."""
        if not self.has_input(i):
            raise ModelLoadError(
                f"model {self.model.model_name}: {self.label} lacks its required input {i}"
            )
        return self.model.values[self.node.input[i]]

    def optional_input(self, i: int) -> Value | None:
        return self.input(i) if self.has_input(i) else None

    def inputs(self) -> list[Value]:
        """Every present input, in order (for variadic ops)."""
        return [self.model.values[n] for n in self.node.input if n]

    def static(self, i: int, what: str) -> np.ndarray | None:
        """The constant array of input ``i`` (None if absent); DynamicShapeError if it varies."""
        if not self.has_input(i):
            return None
        array = self.model.evaluate(
            self.input(i), f"{self.label}: its {what} input {self.node.input[i]!r}")
        if array is None:
            behind = self.model.inputs_behind(self.input(i))
            names = ", ".join(repr(v.name) for v in behind)
            where = (f"model {self.model.model_name}: {self.label}: its {what} input "
                     f"{self.node.input[i]!r}")
            if behind and all(v.type.size <= SPECIALISE_MAX_ELEMENTS for v in behind):
                raise OperandInputError(
                    f"{where} is computed from the model's input(s) {names}, but hetero compiles "
                    "it as a constant; give their values ({values}) or run the model through "
                    "hetero.compile, which compiles once per distinct value",
                    inputs=tuple(v.name for v in behind),
                    values=Keyword("input_values", key=behind[0].name))
            if self.input(i).type.size <= SPECIALISE_MAX_ELEMENTS:
                # Data decides it (a k from a count, a condition from a sum): the node
                # waits for a later stage, compiled once per value of the operand.
                raise DataDependentError(
                    f"{where} is computed from tensor values at run time; hetero.compile "
                    "compiles this node in a later stage, once per distinct value")
            source = (f"the model's input(s) {names}, too large to compile once per value "
                      f"(over {SPECIALISE_MAX_ELEMENTS} elements)" if behind
                      else "values no constant folds")
            raise DynamicShapeError(
                f"{where} is computed at run time from {source}, but hetero needs it to be "
                "constant; re-export the model with this operand constant"
            )
        return array

    def static_ints(self, i: int, what: str) -> list[int] | None:
        """Input ``i`` as a list of ints (None if absent)."""
        array = self.static(i, what)
        return None if array is None else [int(v) for v in np.asarray(array).ravel()]

    def output_used(self, i: int) -> bool:
        """Whether another node or the graph's outputs read ONNX output ``i``."""
        return i < len(self.node.output) and self.node.output[i] in self.model.read

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    # -- emitting --------------------------------------------------------------------
    def add(self, op: str, inputs: Sequence[Value | None], attrs: Mapping[str, Any] | None = None,
            purpose: str | None = None) -> Value:
        """A helper node whose single output only this translation uses."""
        tag = purpose or op.lower()
        name = self.model.fresh(f"{self._base}/{tag}")
        node = self._add_node(op, inputs, attrs, name,
                              [self.model.fresh(f"{self._output_base()}/{tag}")])
        return node.output

    def emit(self, op: str, inputs: Sequence[Value | None],
             attrs: Mapping[str, Any] | None = None, n_outputs: int = 1) -> Node:
        """The node that computes the ONNX node's first ``n_outputs`` outputs (bound to them)."""
        names = [self.node.output[i] if i < len(self.node.output) and self.node.output[i]
                 else self.model.fresh(f"{self._output_base()}/{i}") for i in range(n_outputs)]
        node = self._add_node(op, inputs, attrs, self.model.fresh(self._base), names)
        for name, value in zip(self.node.output, node.outputs):
            if name:
                self.model.values[name] = value
        return node

    def emit_output(self, i: int, op: str, inputs: Sequence[Value | None],
                    attrs: Mapping[str, Any] | None = None) -> Value:
        """A node that computes the ONNX node's output ``i`` alone (bound to it), for
        translations that build each output from its own canonical op."""
        name = self.node.output[i]
        node = self._add_node(op, inputs, attrs, self.model.fresh(f"{self._base}/{i}"), [name])
        self.model.values[name] = node.output
        return node.output

    def constant(self, array: np.ndarray, purpose: str) -> Value:
        """A new graph constant used by this translation."""
        name = self.model.fresh(f"{self._output_base()}/{purpose}")
        return self.model.graph.add_constant(array, name)

    def bind_constant(self, array: np.ndarray) -> None:
        """Make the ONNX node's output a graph constant holding ``array``."""
        name = self.node.output[0]
        self.model.values[name] = self.model.graph.add_constant(array, name)

    def _add_node(self, op: str, inputs: Sequence[Value | None],
                  attrs: Mapping[str, Any] | None, name: str, outputs: list[str]) -> Node:
        node = self.model.graph.add_node(op, inputs, attrs, name=name, output_names=outputs)
        for value in node.outputs:
            check_elements(value.shape, f"{self.label}: output {value.name!r}",
                           self.model.max_elements)
        return node

    def _output_base(self) -> str:
        return next((o for o in self.node.output if o), self._base)

    # -- failing ---------------------------------------------------------------------
    def unsupported(self, why: str) -> UnsupportedOpError:
        """An UnsupportedOpError naming this node, to raise."""
        return UnsupportedOpError(f"model {self.model.model_name}: {self.label}: {why}")


def attribute_value(proto: onnx.AttributeProto) -> Any:
    """An attribute as a Python value: strings decoded, lists as lists, graphs as protos."""
    value = helper.get_attribute_value(proto)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if proto.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
        return list(value)
    return value


def merge_attrs(ctx: NodeContext, names: Iterable[str]) -> dict[str, Any]:
    """Those of the ONNX attributes ``names`` that the node sets (the op's defaults do the rest)."""
    return {name: ctx.attr(name) for name in names if ctx.has_attr(name)}
