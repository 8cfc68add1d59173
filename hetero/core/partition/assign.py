"""Assign: give every node one backend, by priority or by estimated cost.

Two policies:

- ``priority``: each node goes to the first backend in the targets' order that takes
  it, as ONNX Runtime orders its execution providers; what none takes goes to the
  fallback.
- ``cost``: minimise estimated end-to-end time. Each candidate costs its
  :meth:`~hetero.core.plugin.Backend.estimate` of the node alone (a one-node
  subgraph) plus the transfers its choice causes: every non-constant input produced
  on another backend, and every output read on another backend, costed by
  :func:`~hetero.core.partition.costs.transfer_seconds`. Graph inputs and outputs
  live with the fallback (host memory). The algorithm is greedy in topological
  order (each node sees its producers' choices), then local improvement sweeps
  that re-choose each node seeing producers and consumers alike, until no choice
  changes (at most :data:`MAX_SWEEPS`). Ties go to the earlier target.

Overrides (node name or op type → backend) pin nodes before either policy runs; a
node name wins over its op type. A pin is never undone: the assignment keeps its
:class:`Pin` objects, :meth:`Assignment.reassign` refuses to move a pinned node, and
the later steps (small islands, memory fit) leave pinned nodes where they are. A pin
that cannot hold is a :class:`~hetero.errors.PartitionError` naming the override.
A composite accepted by backend B stays whole when all its nodes land on B; a node B
takes only as part of a composite that did not land whole moves to the first
backend that takes it alone.

Every node not on its preferred backend (the first target) records why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hetero.core.ir.graph import Node
from hetero.core.partition.annotate import Annotation, Composite
from hetero.core.partition.costs import estimate, transfer_seconds
from hetero.core.partition.subgraph import extract_subgraph
from hetero.errors import PartitionError, did_you_mean

POLICIES = ("priority", "cost")

#: Improvement sweeps of the cost policy; each one only lowers the local costs, and in
#: practice the choices settle in two or three.
MAX_SWEEPS = 8


@dataclass(frozen=True)
class Choice:
    """Where one node goes, and why when that is not its preferred backend."""

    node: str
    op: str
    backend: str
    preferred: str
    reason: str = ""


@dataclass(frozen=True)
class Pin:
    """Node ``node`` held on ``backend`` by the override ``key`` (its name or its op type)."""

    node: str
    key: str
    backend: str

    def __str__(self) -> str:
        return f"override {self.key!r} -> {self.backend}"


@dataclass(frozen=True, eq=False)
class Assignment:
    """One :class:`Choice` per node of the annotated graph, by node name.

    ``pins`` holds the nodes an override placed, by node name: no later step moves them.
    """

    annotation: Annotation
    policy: str
    fallback: str | None
    choices: Mapping[str, Choice]
    pins: Mapping[str, Pin] = field(default_factory=dict)

    @property
    def home(self) -> str:
        """The memory space graph inputs and outputs live in: the fallback's (the host),
        or the first target's when there is no fallback."""
        return self.fallback if self.fallback is not None else self.annotation.names[0]

    def backend_of(self, node: str) -> str:
        """The backend ``node`` is assigned to."""
        return self.choices[node].backend

    def moved(self) -> list[Choice]:
        """The choices not on their preferred backend, in graph order."""
        return [c for c in self.choices.values() if c.backend != c.preferred]

    def composites(self) -> list[Composite]:
        """Accepted composites that landed whole on their backend, pairwise disjoint
        (an overlapping later match yields to the earlier one)."""
        kept: list[Composite] = []
        taken: set[str] = set()
        for c in self.annotation.accepted():
            if all(self.backend_of(n) == c.backend for n in c.nodes) and taken.isdisjoint(c.nodes):
                kept.append(c)
                taken.update(c.nodes)
        return kept

    def reassign(self, changes: Mapping[str, tuple[str, str]]) -> Assignment:
        """A copy with each ``node -> (backend, reason)`` of ``changes`` applied.

        Raises :class:`~hetero.errors.PartitionError` for a change that would move a
        pinned node off its override's backend: the steps after :func:`assign` must
        leave pins alone, so such a change is a partitioner bug.
        """
        choices = dict(self.choices)
        for node, (backend, reason) in changes.items():
            pin = self.pins.get(node)
            if pin is not None and backend != pin.backend:
                raise PartitionError(f"{pin}: node {node} would be moved to {backend} ({reason}); "
                                     "an override is never undone, this is a partitioner bug, "
                                     "please report it with the model")
            choices[node] = replace(choices[node], backend=backend, reason=reason)
        return replace(self, choices=choices)


def assign(
    annotation: Annotation,
    policy: str = "priority",
    overrides: Mapping[str, str] | None = None,
    fallback: str | None = None,
) -> Assignment:
    """Choose a backend for every node of ``annotation.graph``.

    ``fallback`` names the backend that takes what no other does (the core chooses it
    by declaration: :func:`~hetero.core.partition.partition.choose_fallback`); it must
    be among the annotated backends; None is none, and then every node must have a
    taker among the targets. Raises :class:`~hetero.errors.PartitionError` for an
    unknown policy, an override naming no node or op of the graph, an override to a
    backend that refuses the node, or a node that no backend takes.
    """
    if policy not in POLICIES:
        raise PartitionError(f"unknown partition policy {policy!r}{did_you_mean(policy, POLICIES)}; "
                             f"choose one of {list(POLICIES)}")
    if fallback is not None and fallback not in annotation.names:
        raise PartitionError(f"fallback backend {fallback!r} is not among the annotated backends "
                             f"{list(annotation.names)}; pass it to annotate()")
    graph = annotation.graph
    pins = _pins(annotation, overrides or {})
    pinned = {name: pin.backend for name, pin in pins.items()}
    for node in graph.nodes:
        if node.name not in pinned and not any(annotation.takes(node.name, b) for b in annotation.names):
            why = "; ".join(f"{b}: {s.reason}" for b, s in annotation.support[node.name].items())
            none = "" if fallback is not None else (
                "; and there is no fallback: no installed backend declares that it takes every op "
                "(`hetero plugins` lists them; one that does is the fallback)")
            raise PartitionError(f"node {node.name} ({node.op}): no selected backend takes it ({why}){none}")
    if policy == "priority":
        chosen = {n.name: pinned.get(n.name) or _first_taker(annotation, n.name) for n in graph.nodes}
        gains: dict[str, float] = {}
        unknown: dict[str, str] = {}
    else:
        chosen, gains, unknown = _by_cost(annotation, pinned, fallback or annotation.names[0])
    preferred = annotation.names[0]
    choices = {}
    for node in graph.nodes:
        backend = chosen[node.name]
        reason = ""
        if node.name in pins and backend != preferred:
            reason = f"override: {pins[node.name].key} -> {backend}"
        elif backend != preferred and not annotation.takes(node.name, preferred):
            reason = annotation.reason(node.name, preferred)
        elif backend != preferred and node.name in unknown:
            reason = f"{unknown[node.name]}: its cost on {preferred} is unknown"
        elif backend != preferred:
            reason = f"cheaper on {backend} by {gains[node.name] * 1e6:.3g} µs"
        choices[node.name] = Choice(node.name, node.op, backend, preferred, reason)
    return _split_composites(Assignment(annotation, policy, fallback, choices, pins))


def _pin_key(node: Node, overrides: Mapping[str, str]) -> str:
    return node.name if node.name in overrides else node.op


def _pins(annotation: Annotation, overrides: Mapping[str, str]) -> dict[str, Pin]:
    graph = annotation.graph
    names = {n.name for n in graph.nodes}
    ops = {n.op for n in graph.nodes}
    for key, backend in overrides.items():
        if key not in names and key not in ops:
            hint = did_you_mean(key, sorted(names | ops))
            raise PartitionError(f"override {key!r}: graph {graph.name} has no node or op of that "
                                 f"name{hint}")
        if backend not in annotation.names:
            raise PartitionError(f"override {key!r} -> {backend!r}: {backend!r} is not a selected "
                                 f"backend{did_you_mean(backend, annotation.names)}; the backends are "
                                 f"{list(annotation.names)}")
    pins = {}
    for node in graph.nodes:
        key = _pin_key(node, overrides)
        if key not in overrides:
            continue
        backend = overrides[key]
        if not annotation.takes(node.name, backend):
            raise PartitionError(f"override {key!r} -> {backend}: {backend} refuses node {node.name} "
                                 f"({node.op}): {annotation.reason(node.name, backend)}")
        pins[node.name] = Pin(node.name, key, backend)
    return pins


def _first_taker(annotation: Annotation, node: str) -> str:
    return next(b for b in annotation.names if annotation.takes(node, b))


def _by_cost(
    annotation: Annotation, pinned: Mapping[str, str], home: str
) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """The cost policy: greedy in topological order, then improvement sweeps (graph
    inputs come from, and outputs go to, the memory space ``home``).

    Returns the choices, each node's gain over its preferred backend, and why the
    preferred backend could not estimate a node, where it could not.
    """
    graph = annotation.graph
    backends = {b.name: b for b in annotation.backends}
    outputs = {id(v) for v in graph.outputs}
    preferred = annotation.names[0]
    compute: dict[str, dict[str, float]] = {}
    unknown: dict[str, str] = {}
    for node in graph.nodes:
        alone = extract_subgraph(graph, [node], node.name)
        made = {b: estimate(backends[b], alone) for b in annotation.names if annotation.takes(node.name, b)}
        compute[node.name] = {b: e.seconds for b, e in made.items()}
        if preferred in made and made[preferred].problem:
            unknown[node.name] = made[preferred].problem
    chosen: dict[str, str] = {}

    def local(node: Node, b: str, downstream: bool) -> float:
        """Compute time on ``b`` plus the transfers placing ``node`` there causes."""
        total = compute[node.name][b]
        for v in node.inputs:
            if v is not None and v.data is None:
                src = chosen[v.producer.name] if v.producer is not None else home
                total += transfer_seconds(v.type.nbytes, backends[src], backends[b])
        if downstream:
            for v in node.outputs:
                readers = {chosen[u.name] for u in v.users}
                if id(v) in outputs:
                    readers.add(home)
                total += sum(transfer_seconds(v.type.nbytes, backends[b], backends[r]) for r in readers)
        return total

    def best(node: Node, downstream: bool) -> str:
        if node.name in pinned:
            return pinned[node.name]
        # min() keeps the first of equals, so ties go to the earlier target.
        return min(compute[node.name], key=lambda b: local(node, b, downstream))

    for node in graph.nodes:
        chosen[node.name] = best(node, downstream=False)
    for _ in range(MAX_SWEEPS):
        changed = False
        for node in graph.nodes:
            pick = best(node, downstream=True)
            if local(node, pick, True) < local(node, chosen[node.name], True):
                chosen[node.name], changed = pick, True
        if not changed:
            break
    gains = {}
    for node in graph.nodes:
        if preferred in compute[node.name]:
            gains[node.name] = local(node, preferred, True) - local(node, chosen[node.name], True)
        else:
            gains[node.name] = math.inf
    return chosen, gains, unknown


def _split_composites(assignment: Assignment) -> Assignment:
    """Move nodes a backend takes only inside a composite that did not land whole."""
    annotation = assignment.annotation
    whole = {n for c in assignment.composites() for n in c.nodes}
    changes = {}
    for name, choice in assignment.choices.items():
        if name in whole or annotation.support[name][choice.backend].ok:
            continue
        # Only a composite could have given this backend the node, and none kept it whole.
        pin = assignment.pins.get(name)
        if pin is not None:
            raise PartitionError(_broken_composite_pin(assignment, pin))
        alone = next((b for b in annotation.names if annotation.support[name][b].ok), None)
        if alone is None:
            raise PartitionError(
                f"node {name} ({choice.op}): {choice.backend} takes it only inside a composite that "
                "could not stay whole, and no selected backend takes it alone; add the fallback "
                "backend or override the composite's other nodes to the same backend"
            )
        why = "" if alone == choice.preferred else (
            f"{choice.backend} takes {name} only inside a composite, which did not land whole "
            f"on {choice.backend}")
        changes[name] = (alone, why)
    return assignment.reassign(changes)


def _broken_composite_pin(assignment: Assignment, pin: Pin) -> str:
    """Why ``pin`` cannot hold: its backend takes the node only inside composites that
    did not land whole."""
    annotation = assignment.annotation
    around = [c for c in annotation.accepted() if c.backend == pin.backend and pin.node in c.nodes]
    others = sorted({n for c in around for n in c.nodes
                     if n != pin.node and assignment.backend_of(n) != pin.backend})
    patterns = ", ".join(sorted({c.pattern for c in around}))
    return (f"{pin}: {pin.backend} takes node {pin.node} ({assignment.choices[pin.node].op}) only "
            f"inside composite {patterns}, which does not land whole on {pin.backend} "
            f"(its node(s) {', '.join(others)} are placed elsewhere); override them to "
            f"{pin.backend} too, or drop the override")
