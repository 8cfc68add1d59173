"""Op definitions: the one place where an operator's meaning is written down.

An :class:`OpDef` holds an op's signature (inputs, outputs, attribute schema with
defaults), its shape and dtype inference, its numpy reference semantics and its
FLOP count. The reference executor, constant folding, the conformance suite and
every backend read this one definition (ARCHITECTURE.md, rule 2).

Canonical ops carry ONNX's names but explicit attributes: a ``Conv`` always has
``pads``, ``strides``, ``dilations`` and ``group``; a ``Reshape`` carries its
target shape as an attribute with no ``0`` or ``-1`` left in it. The frontend does
that normalisation once, so no backend re-derives ONNX defaults or opset quirks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
import math
from typing import Any

import numpy as np

from hetero.core.ir.types import TensorType, as_dtype
from hetero.errors import OpAttributeError, UnknownOpError, did_you_mean

ATTR_KINDS = ("int", "float", "str", "ints", "floats", "tensor", "dtype")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of an attribute that every node must set.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Attr:
    """One attribute of an op's schema: its kind, its default and what it means.

    ``default`` is :data:`REQUIRED` for an attribute every node must set, and
    ``None`` for one the op's ``complete`` derives from the input types.
    """

    kind: str
    default: Any = REQUIRED
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"attribute kind {self.kind!r} is not one of {ATTR_KINDS}")

    def coerce(self, value: Any) -> Any:
        """Return ``value`` in this attribute's canonical Python form, or raise TypeError."""
        kind = self.kind
        if kind == "int":
            if isinstance(value, (float, np.floating)) and not float(value).is_integer():
                raise TypeError(f"expected an integer, got {value!r}")
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "str":
            if not isinstance(value, str):
                raise TypeError(f"expected a string, got {value!r}")
            return value
        if kind == "ints":
            values = _as_sequence(value)
            if any(isinstance(v, (float, np.floating)) and not float(v).is_integer() for v in values):
                raise TypeError(f"expected integers, got {value!r}")
            return tuple(int(v) for v in values)
        if kind == "floats":
            return tuple(float(v) for v in _as_sequence(value))
        if kind == "dtype":
            return as_dtype(value)
        array = np.array(value)
        array.flags.writeable = False
        return array


def _as_sequence(value: Any) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(f"expected a list, got {value!r}")
    return list(value)


InferFn = Callable[[list[TensorType], dict[str, Any]], list[TensorType]]
ReferenceFn = Callable[[list[Any], dict[str, Any]], list[np.ndarray]]
CompleteFn = Callable[[list[TensorType | None], dict[str, Any]], dict[str, Any]]
FlopsFn = Callable[[list[TensorType], list[TensorType], dict[str, Any]], int]
#: ``(input types, attrs) -> [(input position, axis, size[, wraps]), ...]``: the inputs
#: holding indices into an axis of ``size`` elements, whose values must lie in
#: ``[-size, size)``, or in ``[0, size)`` where ``wraps`` is given and false (lengths,
#: counts: a negative one is an error, not a position from the end). A tuple ``size`` is
#: one size per column of the indices' last axis (GatherND's index tuples): column j
#: indexes axis ``axis + j``.
IndexBoundsFn = Callable[[list[TensorType], dict[str, Any]], list[tuple[Any, ...]]]


def index_problem(values: np.ndarray, axis: int, size: int | tuple[int, ...],
                  wraps: bool = True) -> str | None:
    """What is wrong with ``values`` as indices into an axis of ``size`` (negative ones
    counting from the end unless ``wraps`` is false), or None when every one lies in
    ``[-size, size)`` (``[0, size)``). A tuple ``size`` bounds each column of the last
    axis of ``values`` by its own entry."""
    values = np.asarray(values)
    sizes = np.asarray(size, np.int64)
    bad = (values < (-sizes if wraps else 0)) | (values >= sizes)
    if not bad.any():
        return None
    where = np.argwhere(bad)[0]
    if sizes.ndim:
        column = int(where[-1])
        axis, size = axis + column, int(sizes[column])
    low = f"-{size}" if wraps else "0"
    return (f"index {int(values[tuple(where)])} is out of range for axis {axis} of size {size}: "
            f"indices must lie in [{low}, {size})")


def index_bound(bound: tuple[Any, ...]) -> tuple[int, int, Any, bool]:
    """An ``index_bounds`` entry with its ``wraps`` flag made explicit."""
    position, axis, size, *rest = bound
    return position, axis, size, bool(rest[0]) if rest else True


def elementwise_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    """One operation per output element: the default FLOP count."""
    return sum(t.size for t in outs)


def no_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    """Data movement only (reshape, transpose, gather...): no arithmetic."""
    return 0


@dataclass(frozen=True)
class OpDef:
    """The definition of one canonical op.

    ``inputs`` and ``outputs`` name the operands; a trailing ``?`` marks an optional
    input (passed as ``None`` when absent) and a trailing ``*`` a variadic last one.
    ``infer`` maps input types and normalised attributes to output types and raises
    :class:`hetero.errors.ShapeError` when they do not fit; ``reference`` computes
    the outputs with numpy.

    An attribute whose schema default is ``None`` is *derived*: ``complete`` fills it
    from the input types (a Conv's ``kernel_shape`` from its weight, ``strides`` as
    ones) and also puts the others in canonical form (negative axes made
    non-negative), so every node stores explicit attributes. ``fold`` optionally computes the outputs from the input
    *types* alone (``Shape`` needs no data), which lets the frontend fold shape
    computations without running anything.

    ``index_bounds`` names the inputs that hold indices (Gather's ``indices``) and the
    size of the axis they index. An index out of range is an error, never a clamp:
    constant indices are checked when the node is built or verified (a ShapeError
    naming the node), the reference checks its inputs, and a backend checks run-time
    indices before its kernel reads with them (:func:`index_problem` says what is wrong).
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    infer: InferFn
    reference: ReferenceFn
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    flops: FlopsFn = elementwise_flops
    fold: Callable[[list[TensorType], dict[str, Any]], list[np.ndarray]] | None = None
    complete: CompleteFn | None = None
    index_bounds: IndexBoundsFn | None = None
    doc: str = ""

    @property
    def min_inputs(self) -> int:
        return sum(1 for n in self.inputs if not n.endswith(("?", "*")))

    @property
    def max_inputs(self) -> float:
        return math.inf if self.inputs and self.inputs[-1].endswith("*") else len(self.inputs)

    @property
    def variadic_outputs(self) -> bool:
        return bool(self.outputs) and self.outputs[-1].endswith("*")

    def normalize_attrs(self, attrs: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Check ``attrs`` against the schema, fill defaults and coerce kinds.

        ``where`` names the node for the error message.
        """
        unknown = sorted(set(attrs) - set(self.attrs))
        if unknown:
            hint = did_you_mean(unknown[0], self.attrs)
            raise OpAttributeError(
                f"{where}: {self.name} has no attribute {unknown[0]!r}{hint}; "
                f"it takes {sorted(self.attrs) or 'none'}"
            )
        result: dict[str, Any] = {}
        for key, schema in self.attrs.items():
            if key in attrs and attrs[key] is not None:
                try:
                    result[key] = schema.coerce(attrs[key])
                except (TypeError, ValueError) as exc:
                    raise OpAttributeError(
                        f"{where}: attribute {key!r} of {self.name} must be {schema.kind}: {exc}"
                    ) from None
            elif schema.default is REQUIRED:
                raise OpAttributeError(f"{where}: {self.name} needs attribute {key!r} ({schema.doc})")
            else:
                result[key] = schema.default
        return result


_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    """Add ``opdef`` to the canonical op set; an op can be defined only once."""
    if opdef.name in _REGISTRY:
        raise ValueError(f"op {opdef.name} is defined twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    """The definition of the canonical op ``name``; UnknownOpError if there is none."""
    _load_definitions()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownOpError(
            f"{name!r} is not a canonical op{did_you_mean(name, _REGISTRY)}"
        ) from None


def op_names() -> list[str]:
    """Every canonical op name, sorted."""
    _load_definitions()
    return sorted(_REGISTRY)


def _load_definitions() -> None:
    # The op families register themselves on import; import them lazily so that
    # opdef.py can be imported by them without a cycle.
    import hetero.core.ir.ops  # noqa: F401
