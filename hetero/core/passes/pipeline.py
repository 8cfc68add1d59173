"""The optimisation pipeline: passes registered by name and the default order.

>>> optimized = optimize(graph)                                  # doctest: +SKIP
>>> optimized = optimize(graph, ["constant_folding", "dead_code"])  # doctest: +SKIP
>>> result = run_passes(graph)          # the graph plus the log of rewrites  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hetero.core.ir.graph import Graph
from hetero.core.passes.algebra import RULES as ALGEBRA_RULES
from hetero.core.passes.constant_folding import constant_folding_rules
from hetero.core.passes.cse import eliminate_common_subexpressions
from hetero.core.passes.dead_code import eliminate_dead_code
from hetero.core.passes.fold_batchnorm import RULES as BATCHNORM_RULES
from hetero.core.passes.fuse import fuse_epilogues
from hetero.core.passes.remove_identity import RULES as IDENTITY_RULES
from hetero.core.passes.rewrite import Rule, RewriteResult, rewrite
from hetero.core.passes.simplify_reshape import RULES as RESHAPE_RULES
from hetero.errors import UnknownPassError, did_you_mean


@dataclass(frozen=True)
class Pass:
    """A named graph pass: a table of rewrite rules, or a plain Graph -> Graph function."""

    name: str
    rules: tuple[Rule, ...] = ()
    transform: Callable[[Graph], Graph] | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if bool(self.rules) == (self.transform is not None):
            raise ValueError(f"pass {self.name}: give either rules or a transform, not both")

    def run(self, graph: Graph) -> RewriteResult:
        """Apply the pass to a copy of ``graph``; rule passes also log what they did."""
        if self.transform is not None:
            return RewriteResult(self.transform(graph))
        return rewrite(graph, self.rules)


_PASSES: dict[str, Pass] = {}


def register_pass(p: Pass) -> Pass:
    """Make ``p`` available to :func:`optimize` by its name; a name is registered once."""
    if p.name in _PASSES:
        raise ValueError(f"pass {p.name} is registered twice")
    _PASSES[p.name] = p
    return p


def get_pass(name: str) -> Pass:
    """The pass registered as ``name``; UnknownPassError naming the known ones otherwise."""
    try:
        return _PASSES[name]
    except KeyError:
        raise UnknownPassError(
            f"no graph pass {name!r}{did_you_mean(name, _PASSES)}; the passes are {sorted(_PASSES)}"
        ) from None


def pass_names() -> list[str]:
    """Every registered pass name, sorted."""
    return sorted(_PASSES)


register_pass(Pass("remove_identity", rules=IDENTITY_RULES,
                   doc="bypass Identity and Dropout"))
register_pass(Pass("constant_folding", rules=constant_folding_rules(),
                   doc="evaluate nodes whose operands are all known"))
register_pass(Pass("simplify_algebra", rules=ALGEBRA_RULES,
                   doc="drop no-ops: Cast to the own dtype, Expand to the own shape, x+0, x*1, "
                   "Where on a constant condition"))
register_pass(Pass("fold_batchnorm", rules=BATCHNORM_RULES,
                   doc="fold BatchNormalization and channel scales into weights"))
register_pass(Pass("simplify_reshape", rules=RESHAPE_RULES,
                   doc="shorten Reshape and Transpose chains"))
register_pass(Pass("cse", transform=eliminate_common_subexpressions,
                   doc="share equal constants and equal computations"))
register_pass(Pass("dead_code", transform=eliminate_dead_code,
                   doc="drop what no output depends on"))
register_pass(Pass("fuse_epilogues", transform=fuse_epilogues,
                   doc="group anchors with their elementwise epilogues (run last)"))

#: The passes :func:`optimize` runs when it is given none, in order.
DEFAULT_PASSES = (
    "remove_identity", "constant_folding", "simplify_algebra", "fold_batchnorm", "simplify_reshape", "cse", "dead_code",
)

#: Rounds of the whole list at most: a later pass can open work for an earlier one
#: (simplify_reshape drops a no-op Reshape between a Conv and its BatchNormalization,
#: which fold_batchnorm then folds); the light models settle in two.
DEFAULT_ROUNDS = 3


def run_passes(
    graph: Graph, passes: Sequence[str | Pass] | None = None, rounds: int = DEFAULT_ROUNDS
) -> RewriteResult:
    """Run ``passes`` (names or :class:`Pass` objects) in order on a copy of ``graph``.

    The list is repeated until a round changes nothing, at most ``rounds`` times. The
    result holds the final graph, every rewrite applied, and the rejections of the
    last round.
    """
    names = DEFAULT_PASSES if passes is None else passes
    chosen = [get_pass(p) if isinstance(p, str) else p for p in names]
    total = RewriteResult(graph.copy())
    for round_ in range(1, rounds + 1):
        total.iterations = round_
        size, fired = _size(total.graph), len(total.applied)
        total.rejected = []
        for p in chosen:
            step = p.run(total.graph)
            total.graph = step.graph
            total.applied += step.applied
            total.rejected += step.rejected
            total.converged = total.converged and step.converged
        # Plain passes (CSE, dead code) keep no log: a change shows in the graph's size.
        if len(total.applied) == fired and size == _size(total.graph):
            break
    else:
        total.converged = False
    return total


def _size(graph: Graph) -> tuple[int, int]:
    return len(graph.nodes), len(graph.values)


def optimize(graph: Graph, passes: Sequence[str | Pass] | None = None) -> Graph:
    """An optimised copy of ``graph``: the default passes (or ``passes``) until stable.

    ``graph`` itself is not changed. See :data:`DEFAULT_PASSES` for the order.
    """
    return run_passes(graph, passes).graph
