"""Support combinators: a backend's refusals written as a chain of small checks.

After torch.fx's ``OperatorSupport``: a :data:`Check` takes a node and the backend's
target and returns a :class:`~hetero.core.plugin.backend.Support`; :func:`chain`
accepts a node when every check does (the first refusal, with its reason, wins) and
:func:`any_of` when one does. The filters cover what most backends refuse by: the op
(:func:`ops`), the dtypes of the tensors a node reads and writes (:func:`dtypes`), their
ranks (:func:`max_rank`), inputs that must be constant (:func:`constant_inputs`), an
attribute's value (:func:`attribute`) and empty outputs (:func:`nonempty_outputs`). A
backend's ``supports`` is then one line::

    CHECK = chain(ops({"Relu", "MatMul"}, "my_npu"), dtypes({np.float32}, "my_npu"), max_rank(4, "my_npu"))

    def supports(self, node, target):
        return CHECK(node, target)

Every refusal names the backend, the node and what to do, as the partition report shows it.

The core asks a target about a node through :func:`ask`, which contains a failing
``supports``: the partitioner's annotation and quantisation's integer lowering both do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import numpy as np

from hetero.core.ir.graph import Node
from hetero.core.plugin.backend import Support
from hetero.core.plugin.target import Target
from hetero.errors import PluginError

#: One condition on a node, under the backend's target.
Check = Callable[[Node, Target], Support]


def check(predicate: Callable[[Node, Target], bool], reason: Callable[[Node], str] | str) -> Check:
    """A check from a predicate: ``reason`` (a string, or a function of the node) says why
    a node that fails it is refused."""
    def run(node: Node, target: Target) -> Support:
        if predicate(node, target):
            return Support.yes()
        return Support.no(reason(node) if callable(reason) else reason)
    return run


def chain(*checks: Check) -> Check:
    """Accept a node when every check does; the first refusal, with its reason, otherwise."""
    def run(node: Node, target: Target) -> Support:
        for each in checks:
            verdict = each(node, target)
            if not verdict:
                return verdict
        return Support.yes()
    return run


def any_of(*checks: Check) -> Check:
    """Accept a node when one check does; otherwise refuse it with every reason, joined."""
    def run(node: Node, target: Target) -> Support:
        reasons = []
        for each in checks:
            verdict = each(node, target)
            if verdict:
                return verdict
            reasons.append(verdict.reason)
        return Support.no("; ".join(reasons) or "no check accepts it")
    return run


def ops(names: Collection[str], backend: str) -> Check:
    """Accept the ops in ``names``."""
    allowed = frozenset(names)
    return check(lambda node, _: node.op in allowed, lambda node: f"{backend} does not implement {node.op}")


def dtypes(allowed: Iterable[Any], backend: str) -> Check:
    """Accept a node whose every input and output has one of the ``allowed`` dtypes."""
    kinds = frozenset(np.dtype(d) for d in allowed)
    names = ", ".join(sorted(d.name for d in kinds))

    def run(node: Node, target: Target) -> Support:
        for value in [*node.inputs, *node.outputs]:
            if value is not None and value.dtype not in kinds:
                return Support.no(f"{backend} computes in {names} only; {node.op} {node.name} has "
                                  f"{value.name} of {value.dtype.name}")
        return Support.yes()
    return run


def max_rank(rank: int, backend: str) -> Check:
    """Accept a node whose tensors have at most ``rank`` dimensions."""
    def run(node: Node, target: Target) -> Support:
        for value in [*node.inputs, *node.outputs]:
            if value is not None and len(value.shape) > rank:
                return Support.no(f"{backend} takes tensors of rank {rank} or less; {node.op} {node.name} "
                                  f"has {value.name} of rank {len(value.shape)}")
        return Support.yes()
    return run


def constant_inputs(positions: Iterable[int], backend: str) -> Check:
    """Accept a node whose inputs at ``positions`` (those present) are constants."""
    wanted = tuple(positions)

    def run(node: Node, target: Target) -> Support:
        for i in wanted:
            value = node.inputs[i] if i < len(node.inputs) else None
            if value is not None and value.data is None:
                return Support.no(f"{backend} needs input {i} of {node.op} constant (it packs it at compile "
                                  f"time); {value.name} of {node.name} is computed at run time")
        return Support.yes()
    return run


def attribute(op: str, name: str, allowed: Callable[[Any], bool], reason: str) -> Check:
    """Accept every node but an ``op`` whose attribute ``name`` fails ``allowed``; ``reason``
    says what is not implemented."""
    return check(lambda node, _: node.op != op or allowed(node.attrs.get(name)),
                 lambda node: f"{reason} ({node.name} has {name}={node.attrs.get(name)!r})")


def nonempty_outputs(backend: str) -> Check:
    """Accept a node whose outputs all hold at least one element. Constant folding leaves
    an empty tensor only as the output of a node computing from an empty operand (a
    reduction over an empty axis), which a backend whose kernels loop over their
    outputs may refuse."""
    return check(lambda node, _: all(v.type.size for v in node.outputs),
                 lambda node: f"{node.name} produces an empty tensor; {backend} needs at least one element")


def ask(target: Target, node: Node, on_raise: Callable[[str], None] | None = None) -> Support:
    """``target.supports(node)``, contained: a raise is a refusal whose reason names the
    error (and is passed to ``on_raise`` when given, for callers that record it), since
    a broken plugin must not take the compiler down (ARCHITECTURE.md rule 6); an answer
    that is no :class:`~hetero.core.plugin.backend.Support` is a PluginError."""
    try:
        answer = target.supports(node)
    except Exception as exc:  # noqa: BLE001 - any plugin failure becomes a refusal
        reason = f"{target.name}.supports() raised {type(exc).__name__}: {exc}"
        if on_raise is not None:
            on_raise(reason)
        return Support.no(reason)
    if not isinstance(answer, Support):
        raise PluginError(
            f"backend {target.name!r}: supports({node.name}) returned {answer!r}; "
            "return Support.yes() or Support.no(reason)"
        )
    return answer
