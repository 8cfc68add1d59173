"""The rewrite driver: apply a table of rules to a copy of a graph until nothing changes.

A :class:`Rule` is three small pieces, as in onnxscript's rewriter: a *pattern* (an
:class:`~hetero.core.ir.pattern.Op` rooted at the node to replace), a *check*
that returns ``None`` to accept a match or a reason string to reject it, and a
*replacement* that builds new nodes and returns the values that take the place of
the root node's outputs::

    relu_relu = Rule(
        "relu_relu",
        Op("Relu", Op("Relu", Var("x"), name="inner")),
        replacement=lambda graph, m: [m.node("inner").output],
    )
    result = rewrite(graph, [relu_relu])
    result.graph, result.applied, result.rejected

Names stay stable: a replacement value made by the rule takes over the name of the
output it replaces, and a graph output always keeps its name (when the replacement is
a graph input or already another output, an ``Identity`` carries the name).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
import itertools

from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.pattern import Match, Op
from hetero.core.ir.verify import problems
from hetero.core.passes.dead_code import remove_dead_nodes_in_place
from hetero.errors import HeteroError, PatternError

CheckFn = Callable[[Graph, Match], "str | None"]
ReplaceFn = Callable[[Graph, Match], "Value | Sequence[Value]"]

#: Sweeps over the graph before the driver gives up on reaching a fixed point.
DEFAULT_MAX_ITERATIONS = 50


@dataclass(frozen=True)
class Rule:
    """A rewrite rule: ``pattern`` finds, ``check`` accepts or says why not, ``replacement`` builds.

    ``check(graph, match)`` returns ``None`` to accept or a reason string to reject;
    ``replacement(graph, match)`` adds nodes or constants to ``graph`` and returns one
    value per output of the root node (a single value for a single-output node).
    """

    name: str
    pattern: Op
    replacement: ReplaceFn
    check: CheckFn | None = None
    doc: str = ""


@dataclass(frozen=True)
class Rejection:
    """A match a rule's check turned down, and why."""

    rule: str
    node: str
    reason: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.node}: {self.reason}"


@dataclass(frozen=True)
class Application:
    """A rule that fired, at the root node it replaced."""

    rule: str
    node: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.node}"


@dataclass
class RewriteResult:
    """What :func:`rewrite` returns: the new graph and the log of what happened.

    ``applied`` lists every rewrite in order; ``rejected`` lists the matches rejected
    in the last sweep (so each still stands in ``graph``), with their reasons;
    ``converged`` is False when the iteration limit stopped the driver first.
    """

    graph: Graph
    applied: list[Application] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    iterations: int = 0
    converged: bool = True

    def fired(self, rule: str) -> int:
        """How many times ``rule`` fired."""
        return sum(1 for a in self.applied if a.rule == rule)


def rewrite(
    graph: Graph,
    rules: Iterable[Rule],
    *,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    check_result: bool = True,
) -> RewriteResult:
    """Apply ``rules`` to a copy of ``graph`` until a fixed point or ``max_iterations`` sweeps.

    Each sweep visits the nodes in topological order and applies the first rule (in
    table order) whose pattern matches and whose check accepts; the node's dead
    producers go with it. After each sweep dead code is removed and the order
    restored. ``graph`` is left untouched. With ``check_result`` the result of a rewrite
    that fired a rule is verified and a broken graph raises :class:`PatternError` naming
    the rules that fired.
    """
    rules = list(rules)
    for rule in rules:
        try:
            rule.pattern.validate()
        except PatternError as exc:
            raise PatternError(f"rule {rule.name}: {exc}") from None
    g = graph.copy()
    result = RewriteResult(g)
    for sweep in range(1, max_iterations + 1):
        result.iterations = sweep
        result.rejected = []
        changed = _sweep(g, rules, result)
        remove_dead_nodes_in_place(g)
        g.sort()
        if not changed:
            break
    else:
        result.converged = False
    live = {n.name for n in g.nodes}
    result.rejected = [r for r in result.rejected if r.node in live]
    # A pass that fired no rule returns its input, minus dead code: nothing to re-check.
    if check_result and result.applied:
        found = problems(g)
        if found:
            fired = sorted({a.rule for a in result.applied})
            raise PatternError(
                f"graph {g.name}: rewriting with {fired or 'no rule'} produced an invalid graph: "
                f"{found[0]}; fix the rule's replacement"
            )
    return result


def _sweep(g: Graph, rules: list[Rule], result: RewriteResult) -> bool:
    removed: set[int] = set()
    changed = False
    for node in list(g.nodes):
        if id(node) in removed:
            continue
        for rule in rules:
            match = _first_accepted(g, rule, node, result)
            if match is not None:
                removed |= _apply(g, rule, match)
                result.applied.append(Application(rule.name, node.name))
                changed = True
                break
    return changed


def _first_accepted(g: Graph, rule: Rule, node: Node, result: RewriteResult) -> Match | None:
    seen: set[str] = set()
    for match in rule.pattern.match(node):
        reason = rule.check(g, match) if rule.check is not None else None
        if reason is None:
            return match
        if reason not in seen:
            seen.add(reason)
            result.rejected.append(Rejection(rule.name, node.name, reason))
    return None


def _apply(g: Graph, rule: Rule, match: Match) -> set[int]:
    """Replace the match's root node; return the ids of the nodes that left the graph."""
    root = match.root
    where = f"rule {rule.name} at node {root.name} ({root.op})"
    n_values = len(g.values)
    try:
        produced = rule.replacement(g, match)
    except HeteroError as exc:
        raise PatternError(f"{where}: the replacement failed: {exc}") from exc
    new_values = [produced] if isinstance(produced, Value) else list(produced)
    # Values are registered in insertion order: the newest ones are the rule's own.
    fresh = itertools.islice(reversed(g.values), len(g.values) - n_values)
    created = {id(g.values[k]) for k in fresh}
    if len(new_values) != len(root.outputs):
        raise PatternError(f"{where}: the replacement returned {len(new_values)} values for "
                           f"{len(root.outputs)} outputs")
    for old, new in zip(root.outputs, new_values):
        if old is new:
            raise PatternError(f"{where}: the replacement returned the node's own output "
                               f"{old.name}")
        if old.type != new.type:
            raise PatternError(f"{where}: the replacement of {old.name} ({old.type}) has type "
                               f"{new.type}")
    renames = []
    for old, new in zip(root.outputs, new_values):
        positions = [i for i, v in enumerate(g.outputs) if v is old]
        g.replace_all_uses(old, new)
        if positions or id(new) in created:
            renames.append((old.name, new, positions))
    removed = remove_dead_nodes_in_place(g, start=[root])
    for name, new, positions in renames:
        _take_name(g, name, new, positions)
    return removed


def _take_name(g: Graph, name: str, new: Value, positions: list[int]) -> None:
    """Let ``new`` carry ``name``; graph outputs at ``positions`` keep it even if ``new`` cannot.

    A graph input, or a value that is also another graph output, cannot take the name;
    an ``Identity`` then carries it.
    """
    shared = new in g.inputs or sum(1 for v in g.outputs if v is new) > len(positions)
    if not shared:
        g.rename_value(new, name)
    elif positions:
        carrier = g.add_node("Identity", [new], name=name).output
        if carrier.name != name:
            g.rename_value(carrier, name)
        for i in positions:
            g.outputs[i] = carrier


def exclusive_use(graph: Graph, value: Value, user: Node, what: str) -> str | None:
    """A check helper: None if ``user`` is the only reader of ``value``, else the reason.

    ``what`` names the producer in the reason ("Conv conv1's output").
    """
    if value in graph.outputs:
        return f"{what} {value.name} is also a graph output"
    others = sorted({u.name for u in value.users if u is not user})
    if others or value.users.count(user) > 1:
        return (f"{what} {value.name} has other users besides {user.name}: "
                f"{others or [user.name]}")
    return None
