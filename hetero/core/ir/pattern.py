"""The pattern language: match an op, its attributes and its producers.

The graph passes' rewrite rules (:mod:`hetero.core.passes.rewrite`) and a backend's
composites (:class:`~hetero.core.plugin.backend.Pattern`) are written in it.

A pattern describes a value by how it was computed. :class:`Op` matches the output of a
node of a given op (with attribute constraints) whose inputs match the input patterns,
recursively; :class:`Var` matches any value and :class:`Const` any constant. Naming a
pattern binds what it matched, and a name used twice must bind the same thing::

    conv_bn = Op("BatchNormalization",
                 Op("Conv", Var("x"), Const("w"), ..., name="conv"),
                 Const("scale"), Const("bias"), Const("mean"), Const("var"),
                 name="bn")
    for match in conv_bn.match(node):
        match["x"], match.node("conv"), match.const("w")

``...`` as the last input of an :class:`Op` leaves the remaining inputs unconstrained,
``None`` as an input requires an absent optional operand and ``Opt(p)`` accepts
either an absent operand or one that matches ``p``, ``commute=True`` lets a
binary op match its two inputs in either order, ``attrs`` constrains attributes by
value or by predicate, and ``where`` filters on the whole node. Matching backtracks:
:meth:`Op.match` yields every way the pattern fits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

import numpy as np

from hetero.core.ir.graph import Node, Value
from hetero.core.ir.opdef import get_op
from hetero.errors import HeteroError, PatternError

#: What a match binds so far: pattern names to the values and nodes they matched.
Bindings = Mapping[str, "Value | Node"]


@dataclass(frozen=True)
class Match:
    """One way a pattern fits the graph: its root node and everything it named."""

    root: Node
    bindings: Mapping[str, Value | Node]

    def __getitem__(self, name: str) -> Value:
        """The value bound to ``name`` by a :class:`Var` or :class:`Const`."""
        bound = self._get(name)
        if not isinstance(bound, Value):
            raise PatternError(f"pattern name {name!r} binds node {bound.name}, not a value: "
                               f"use match.node({name!r})")
        return bound

    def node(self, name: str) -> Node:
        """The node bound to ``name`` by an :class:`Op`."""
        bound = self._get(name)
        if not isinstance(bound, Node):
            raise PatternError(f"pattern name {name!r} binds value {bound.name}, not a node: "
                               f"use match[{name!r}]")
        return bound

    def const(self, name: str) -> np.ndarray:
        """The array of the constant bound to ``name``."""
        value = self[name]
        if value.data is None:
            raise PatternError(f"pattern name {name!r} binds {value.name}, which is not a constant")
        return value.data

    def __contains__(self, name: str) -> bool:
        return name in self.bindings

    def _get(self, name: str) -> Value | Node:
        try:
            return self.bindings[name]
        except KeyError:
            raise PatternError(
                f"the pattern matched at node {self.root.name} binds no {name!r}; "
                f"it binds {sorted(self.bindings)}"
            ) from None


class Pattern:
    """Base of the pattern kinds: something that matches a value (or an absent operand)."""

    name: str | None = None

    def match_value(self, value: Value | None, bindings: Bindings) -> Iterator[Bindings]:
        """Yield the bindings extended by each way this pattern matches ``value``."""
        raise NotImplementedError

    def children(self) -> tuple[Pattern, ...]:
        """The sub-patterns, for validation."""
        return ()

    def validate(self) -> None:
        """PatternError if the pattern names an unknown op or attribute."""
        for child in self.children():
            child.validate()


def _bind(bindings: Bindings, name: str | None, item: Value | Node) -> Bindings | None:
    """``bindings`` plus ``name -> item``; None if ``name`` is already bound to something else."""
    if name is None:
        return bindings
    bound = bindings.get(name)
    if bound is not None:
        return bindings if bound is item else None
    return {**bindings, name: item}


class Var(Pattern):
    """Any present value; ``where`` optionally filters it."""

    def __init__(
        self, name: str | None = None, where: Callable[[Value], bool] | None = None
    ) -> None:
        self.name = name
        self.where = where

    def match_value(self, value: Value | None, bindings: Bindings) -> Iterator[Bindings]:
        if value is None or (self.where is not None and not self.where(value)):
            return
        extended = _bind(bindings, self.name, value)
        if extended is not None:
            yield extended

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


class Const(Pattern):
    """A constant value; ``where`` optionally filters on its array."""

    def __init__(
        self, name: str | None = None, where: Callable[[np.ndarray], bool] | None = None
    ) -> None:
        self.name = name
        self.where = where

    def match_value(self, value: Value | None, bindings: Bindings) -> Iterator[Bindings]:
        if value is None or value.data is None:
            return
        if self.where is not None and not self.where(value.data):
            return
        extended = _bind(bindings, self.name, value)
        if extended is not None:
            yield extended

    def __repr__(self) -> str:
        return f"Const({self.name!r})"


class _Absent(Pattern):
    """An absent optional operand (written ``None`` among an Op's inputs)."""

    def match_value(self, value: Value | None, bindings: Bindings) -> Iterator[Bindings]:
        if value is None:
            yield bindings

    def __repr__(self) -> str:
        return "None"


class Opt(Pattern):
    """An optional operand: absent, or present and matching ``pattern``."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern

    def match_value(self, value: Value | None, bindings: Bindings) -> Iterator[Bindings]:
        if value is None:
            yield bindings
        else:
            yield from self.pattern.match_value(value, bindings)

    def children(self) -> tuple[Pattern, ...]:
        return (self.pattern,)

    def __repr__(self) -> str:
        return f"Opt({self.pattern!r})"


AttrSpec = Any | Callable[[Any], bool]


class Op(Pattern):
    """The output of a node of op ``op`` (a name, a tuple of names, or None for any op).

    ``inputs`` are patterns for the node's operands in order; ``...`` as the last one
    accepts any further operands, ``None`` requires an absent optional operand. Without
    ``...`` the node must have exactly as many operands as patterns (absent trailing
    optional operands count as absent). ``attrs`` maps attribute names to a required
    value or to a predicate; ``where`` is a predicate on the node; ``name`` binds it.
    """

    def __init__(
        self,
        op: str | tuple[str, ...] | None,
        *inputs: Pattern | EllipsisType | None,
        name: str | None = None,
        attrs: Mapping[str, AttrSpec] | None = None,
        commute: bool = False,
        where: Callable[[Node], bool] | None = None,
    ) -> None:
        self.ops: tuple[str, ...] | None = (op,) if isinstance(op, str) else op
        self.open = bool(inputs) and inputs[-1] is Ellipsis
        fixed = inputs[:-1] if self.open else inputs
        if any(p is Ellipsis for p in fixed):
            raise PatternError(f"Op({op!r}): '...' may only be the last input pattern")
        self.inputs: tuple[Pattern, ...] = tuple(
            _Absent() if p is None else _as_pattern(p, op) for p in fixed
        )
        if commute and len(self.inputs) != 2:
            raise PatternError(f"Op({op!r}): commute=True needs exactly two input patterns")
        self.name = name
        self.attrs = dict(attrs or {})
        self.commute = commute
        self.where = where

    def match(self, node: Node) -> Iterator[Match]:
        """Yield every :class:`Match` of this pattern rooted at ``node``."""
        for bindings in self.match_node(node, {}):
            yield Match(node, bindings)

    def match_value(self, value: Value | None, bindings: Bindings) -> Iterator[Bindings]:
        if value is None or value.producer is None:
            return
        yield from self.match_node(value.producer, bindings)

    def match_node(self, node: Node, bindings: Bindings) -> Iterator[Bindings]:
        """Yield the bindings extended by each way this pattern matches ``node`` itself."""
        if self.ops is not None and node.op not in self.ops:
            return
        if not all(_attr_fits(node.attrs.get(k), spec) for k, spec in self.attrs.items()):
            return
        if self.where is not None and not self.where(node):
            return
        operands = list(node.inputs)
        if len(operands) < len(self.inputs):
            operands += [None] * (len(self.inputs) - len(operands))
        elif len(operands) > len(self.inputs) and not self.open:
            if any(v is not None for v in operands[len(self.inputs):]):
                return
        operands = operands[: len(self.inputs)]
        start = _bind(bindings, self.name, node)
        if start is None:
            return
        orders = [self.inputs]
        if self.commute:
            orders.append(self.inputs[::-1])
        for patterns in orders:
            yield from _match_all(patterns, operands, start)

    def children(self) -> tuple[Pattern, ...]:
        return self.inputs

    def validate(self) -> None:
        for op in self.ops or ():
            try:
                schema = get_op(op).attrs
            except HeteroError as exc:
                raise PatternError(f"pattern {self!r}: {exc}") from None
            unknown = sorted(set(self.attrs) - set(schema))
            if unknown:
                raise PatternError(f"pattern {self!r}: {op} has no attribute {unknown[0]!r}")
        if self.ops is None and self.attrs:
            raise PatternError(f"pattern {self!r}: attribute constraints need an op name")
        super().validate()

    def __repr__(self) -> str:
        head = "*" if self.ops is None else "|".join(self.ops)
        args = ", ".join(map(repr, self.inputs)) + (", ..." if self.open else "")
        return f"Op({head}({args}){f' as {self.name}' if self.name else ''})"


def _as_pattern(p: Any, op: Any) -> Pattern:
    if not isinstance(p, Pattern):
        raise PatternError(f"Op({op!r}): input pattern {p!r} is not a Pattern, None or '...'")
    return p


def _match_all(
    patterns: tuple[Pattern, ...], operands: list[Value | None], bindings: Bindings
) -> Iterator[Bindings]:
    if not patterns:
        yield bindings
        return
    for extended in patterns[0].match_value(operands[0], bindings):
        yield from _match_all(patterns[1:], operands[1:], extended)


def _attr_fits(actual: Any, spec: AttrSpec) -> bool:
    if callable(spec) and not isinstance(spec, (type, np.dtype)):  # np.float32 is a dtype here
        return bool(spec(actual))
    if isinstance(actual, np.ndarray) or isinstance(spec, np.ndarray):
        return bool(np.array_equal(np.asarray(actual), np.asarray(spec)))
    if isinstance(actual, tuple) and isinstance(spec, (list, tuple)):
        return actual == tuple(spec)
    return bool(actual == spec)
