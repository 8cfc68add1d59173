"""The graph IR: values, nodes and graphs.

A :class:`Graph` holds its inputs, its constants (numpy arrays, treated as
immutable), its nodes in topological order and its outputs. Every edge is a
:class:`Value` that knows its producer and its users. Nodes are created through
:meth:`Graph.add_node`, which checks the attributes against the op's schema and
infers the output types, so a graph built through the API is typed from the start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
import copy
import heapq
import itertools
from typing import Any

import numpy as np

from hetero.core.ir.opdef import OpDef, get_op, index_bound, index_problem
from hetero.core.ir.types import TensorType
from hetero.errors import HeteroError, OpAttributeError, ShapeError, VerificationError


class Value:
    """A named, typed edge of the graph.

    A value is a graph input, a constant (``data`` holds its array) or the output of
    exactly one node (``producer``). ``users`` lists the nodes that read it, once per
    use.
    """

    __slots__ = ("name", "type", "producer", "users", "data")

    def __init__(self, name: str, type: TensorType, data: np.ndarray | None = None) -> None:
        self.name = name
        self.type = type
        self.producer: Node | None = None
        self.users: list[Node] = []
        self.data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Node:
    """One application of a canonical op: ``outputs = op(inputs, attrs)``.

    ``inputs`` may hold ``None`` where an optional operand is absent. ``group`` is an
    annotation, not part of the op's meaning: nodes that share it form one fused group
    (an anchor and its elementwise epilogue, see :mod:`hetero.core.passes.fuse`) that
    a backend compiles as one kernel.
    """

    __slots__ = ("name", "op", "inputs", "outputs", "attrs", "group")

    def __init__(
        self,
        name: str,
        op: str,
        inputs: list[Value | None],
        outputs: list[Value],
        attrs: dict[str, Any],
    ) -> None:
        self.name = name
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.group: str | None = None

    @property
    def opdef(self) -> OpDef:
        return get_op(self.op)

    @property
    def output(self) -> Value:
        """The only output of a single-output node."""
        if len(self.outputs) != 1:
            raise HeteroError(f"node {self.name} ({self.op}) has {len(self.outputs)} outputs")
        return self.outputs[0]

    def input_types(self) -> list[TensorType | None]:
        return [v.type if v is not None else None for v in self.inputs]

    def __repr__(self) -> str:
        return f"<Node {self.name}: {self.op}>"


def _freeze(array: np.ndarray) -> np.ndarray:
    """``array`` read-only and C-contiguous, copied unless it is both already: backends
    hand a constant's buffer to kernels in row-major order, and a frozen view (a folded
    Transpose of a read-only initializer) would keep its strides."""
    array = np.asarray(array)
    if array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array, order="C")
        array.flags.writeable = False
    return array


class Graph:
    """A dataflow graph of canonical ops with static shapes.

    Build one with :class:`hetero.core.ir.builder.GraphBuilder` or with the methods
    here; :func:`hetero.core.ir.verify.verify` checks it and ``str(graph)`` prints it.
    """

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.values: dict[str, Value] = {}
        self._node_names: set[str] = set()
        self._counter = itertools.count()

    # -- construction -------------------------------------------------------------
    def unique_name(self, base: str, taken: Iterable[str] | None = None) -> str:
        """A value or node name based on ``base`` that is not yet used."""
        used = self.values if taken is None else set(taken)
        if base not in used and base not in self._node_names:
            return base
        while True:
            name = f"{base}_{next(self._counter)}"
            if name not in used and name not in self._node_names:
                return name

    def _new_value(self, name: str, type: TensorType, data: np.ndarray | None = None) -> Value:
        if name in self.values:
            raise VerificationError(f"graph {self.name}: value name {name!r} is used twice")
        value = Value(name, type, data)
        self.values[name] = value
        return value

    def add_input(self, name: str, shape: Sequence[int], dtype: Any) -> Value:
        """Declare a graph input of static ``shape`` and ``dtype``."""
        value = self._new_value(name, TensorType(shape, dtype))
        self.inputs.append(value)
        return value

    def add_constant(self, array: Any, name: str | None = None) -> Value:
        """Add a constant; the array is copied once and frozen."""
        data = _freeze(array)
        return self._new_value(self.unique_name(name or "const"), TensorType.of(data), data)

    def add_node(
        self,
        op: str,
        inputs: Sequence[Value | None],
        attrs: Mapping[str, Any] | None = None,
        name: str | None = None,
        output_names: Sequence[str] | None = None,
    ) -> Node:
        """Append a node; check its attributes, infer its outputs and return it."""
        opdef = get_op(op)
        node_name = self.unique_name(name or op.lower())
        where = f"node {node_name} ({op})"
        inputs = list(inputs)
        for v in inputs:
            if v is not None and self.values.get(v.name) is not v:
                raise VerificationError(f"{where}: input {v.name!r} is not a value of graph {self.name}")
        norm = complete_attrs(opdef, inputs, opdef.normalize_attrs(attrs or {}, where), where)
        out_types = infer_node(opdef, inputs, norm, where)
        if output_names is not None and len(output_names) != len(out_types):
            raise VerificationError(
                f"{where}: {len(output_names)} output names given for {len(out_types)} outputs"
            )
        names = output_names or [
            node_name if len(out_types) == 1 else f"{node_name}:{i}" for i in range(len(out_types))
        ]
        outputs = [self._new_value(self.unique_name(n), t) for n, t in zip(names, out_types)]
        node = Node(node_name, op, inputs, outputs, norm)
        for v in outputs:
            v.producer = node
        for v in inputs:
            if v is not None:
                v.users.append(node)
        self._node_names.add(node_name)
        self.nodes.append(node)
        return node

    def set_outputs(self, outputs: Sequence[Value]) -> None:
        """Declare the graph outputs."""
        self.outputs = list(outputs)

    # -- queries --------------------------------------------------------------------
    @property
    def constants(self) -> dict[str, np.ndarray]:
        """Constants by name (the arrays are read-only)."""
        return {n: v.data for n, v in self.values.items() if v.data is not None}

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for n in self.nodes:
            hist[n.op] = hist.get(n.op, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))

    # -- editing (used by passes on their own copy) ---------------------------------
    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Make every user of ``old`` (and the graph outputs) read ``new`` instead."""
        if old is new:
            return
        for user in old.users:
            user.inputs = [new if v is old else v for v in user.inputs]
            new.users.append(user)
        old.users = []
        if old in self.outputs:
            self.outputs = [new if v is old else v for v in self.outputs]

    def remove_node(self, node: Node) -> None:
        """Remove ``node``; its outputs must have no users left."""
        for v in node.outputs:
            if v.users or v in self.outputs:
                raise VerificationError(
                    f"node {node.name} ({node.op}) cannot be removed: {v.name} is still used"
                )
        for v in node.inputs:
            if v is not None:
                v.users.remove(node)
        for v in node.outputs:
            del self.values[v.name]
        self.nodes.remove(node)
        self._node_names.discard(node.name)

    def rename_value(self, value: Value, name: str) -> None:
        """Give ``value`` the free name ``name`` (passes keep output names visible this way)."""
        if self.values.get(value.name) is not value:
            raise VerificationError(f"graph {self.name}: {value.name!r} is not one of its values")
        if name in self.values:
            raise VerificationError(f"graph {self.name}: value name {name!r} is already taken")
        del self.values[value.name]
        value.name = name
        self.values[name] = value

    def remove_unused_constants(self) -> None:
        """Drop constants that no node and no output reads."""
        for name, v in list(self.values.items()):
            if v.data is not None and not v.users and v not in self.outputs:
                del self.values[name]

    def sort(self) -> None:
        """Restore topological order, keeping the current order where it is valid."""
        pending = {id(n): sum(1 for v in n.inputs if v is not None and v.producer is not None)
                   for n in self.nodes}
        position = {id(n): i for i, n in enumerate(self.nodes)}
        ready = [(position[id(n)], id(n), n) for n in self.nodes if pending[id(n)] == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            _, _, node = heapq.heappop(ready)
            order.append(node)
            for v in node.outputs:
                for user in v.users:
                    pending[id(user)] -= 1
                    if pending[id(user)] == 0:
                        heapq.heappush(ready, (position[id(user)], id(user), user))
        if len(order) != len(self.nodes):
            stuck = next(n for n in self.nodes if pending[id(n)] > 0)
            raise VerificationError(f"graph {self.name} has a cycle through node {stuck.name}")
        self.nodes = order

    def copy(self) -> Graph:
        """A structural copy; constant arrays are shared (they are read-only)."""
        new = Graph(self.name)
        # The copy's fresh names continue from here, without advancing this graph's
        # counter: optimising the same graph twice must name its nodes alike (the compile
        # cache keys on names).
        new._counter = copy.copy(self._counter)
        vmap: dict[int, Value] = {}

        def clone(v: Value) -> Value:
            c = vmap.get(id(v))
            if c is None:
                c = vmap[id(v)] = new._new_value(v.name, v.type, v.data)
            return c

        for v in self.inputs:
            new.inputs.append(clone(v))
        for v in self.values.values():
            if v.data is not None:
                clone(v)
        for n in self.nodes:
            ins = [clone(v) if v is not None else None for v in n.inputs]
            outs = [clone(v) for v in n.outputs]
            node = Node(n.name, n.op, ins, outs, dict(n.attrs))
            node.group = n.group
            for v in outs:
                v.producer = node
            for v in ins:
                if v is not None:
                    v.users.append(node)
            new.nodes.append(node)
            new._node_names.add(n.name)
        new.outputs = [clone(v) for v in self.outputs]
        return new

    def __str__(self) -> str:
        from hetero.core.ir.printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.nodes)} nodes>"


def complete_attrs(
    opdef: OpDef, inputs: Sequence[Value | None], attrs: dict[str, Any], where: str
) -> dict[str, Any]:
    """Fill derived attributes and canonicalise the others with ``opdef.complete``."""
    if opdef.complete is not None:
        check_arity(opdef, inputs, where)
        try:
            attrs = opdef.complete([v.type if v is not None else None for v in inputs], dict(attrs))
        except (ShapeError, OpAttributeError) as exc:
            raise type(exc)(f"{where}: {exc}") from None
    missing = [k for k, v in attrs.items() if v is None]
    if missing:
        raise VerificationError(f"{where}: attribute(s) {missing} were left underived")
    return attrs


def check_arity(opdef: OpDef, inputs: Sequence[Value | None], where: str) -> None:
    """VerificationError unless ``inputs`` fit the op's operand list."""
    n = len(inputs)
    if n < opdef.min_inputs or n > opdef.max_inputs:
        expect = (
            f"at least {opdef.min_inputs}" if opdef.max_inputs == float("inf")
            else f"{opdef.min_inputs}" if opdef.min_inputs == opdef.max_inputs
            else f"{opdef.min_inputs} to {opdef.max_inputs}"
        )
        raise VerificationError(f"{where}: takes {expect} inputs ({', '.join(opdef.inputs)}), got {n}")
    for i, v in enumerate(inputs):
        spec = opdef.inputs[min(i, len(opdef.inputs) - 1)]
        if v is None and not spec.endswith("?"):
            raise VerificationError(f"{where}: input {i} ({spec}) is required")


def saved_index_check(saved: list[Any]) -> tuple[str, int, int | tuple[int, ...], bool]:
    """An :func:`index_checks` entry read back from JSON: value, axis, size (an axis size, or
    one per column of GatherND's index tuples) and whether negative indices wrap."""
    value, axis, size, *wraps = saved
    size = tuple(int(n) for n in size) if isinstance(size, list) else int(size)
    return str(value), int(axis), size, bool(wraps[0]) if wraps else True


def index_checks(node: Node) -> list[tuple[str, int, Any, bool]]:
    """The node's run-time index inputs as ``(value name, axis, size, wraps)``: a backend
    checks each with :func:`hetero.core.ir.opdef.index_problem` before a kernel reads
    with it (constant ones were checked when the node was built)."""
    opdef = node.opdef
    if opdef.index_bounds is None:
        return []
    bounds = [index_bound(b) for b in opdef.index_bounds(node.input_types(), node.attrs)]
    return [(node.inputs[p].name, axis, size, wraps) for p, axis, size, wraps in bounds
            if node.inputs[p] is not None and node.inputs[p].data is None]


def infer_node(
    opdef: OpDef, inputs: Sequence[Value | None], attrs: dict[str, Any], where: str
) -> list[TensorType]:
    """Check arity and infer the output types of ``opdef`` applied to ``inputs``."""
    check_arity(opdef, inputs, where)
    types = [v.type if v is not None else None for v in inputs]
    try:
        outs = list(opdef.infer(types, attrs))
    except (ShapeError, OpAttributeError) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    for bound in opdef.index_bounds(types, attrs) if opdef.index_bounds else ():
        position, axis, size, wraps = index_bound(bound)
        v = inputs[position]
        problem = None if v is None or v.data is None else index_problem(v.data, axis, size, wraps)
        if problem is not None:
            raise ShapeError(f"{where}: constant {v.name!r}: {problem}")
    return outs
