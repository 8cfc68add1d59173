"""Graph passes: the rewrite driver and the optimisations.

Every pass is a function from Graph to Graph that works on a copy, one pass a module
(``from hetero.core.passes.fold_batchnorm import fold_batchnorm``); each module's
docstring states the invariant its pass establishes. :func:`optimize` runs the
default pipeline; :func:`rewrite` applies any table of :class:`Rule` objects and
returns the log of what fired and what was rejected, with reasons. Rules are written in
the pattern language, :mod:`hetero.core.ir.pattern`, which backends' composites use too.
"""

from hetero.core.passes.pipeline import (
    DEFAULT_PASSES, Pass, get_pass, optimize, pass_names, register_pass, run_passes,
)
from hetero.core.passes.rewrite import Application, Rejection, RewriteResult, Rule, rewrite

__all__ = [
    "DEFAULT_PASSES", "Application", "Pass", "Rejection", "RewriteResult", "Rule", "get_pass",
    "optimize", "pass_names", "register_pass", "rewrite", "run_passes",
]
