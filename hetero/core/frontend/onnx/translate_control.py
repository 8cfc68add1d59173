"""Control flow whose decision is known at import: an If with a constant condition.

An ``If`` whose condition folds (a constant, or shapes hetero knows, as exporters'
``If(Equal(Shape(x)[0], 1))``) is inlined: the chosen branch's nodes are translated in
place, reading the outer graph's values by name as ONNX scoping says, and the branch's
outputs become the If's. A condition computed from a small graph input is an operand
like any other (:class:`~hetero.errors.OperandInputError`): ``hetero.compile``
specialises on its value. Nested Ifs inline the same way, at most :data:`MAX_NESTING`
deep. An If decided only by data, Loop and Scan are not imported yet.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from hetero.core.frontend.onnx.context import TRANSLATORS, NodeContext, translates
from hetero.core.frontend.onnx.loader import node_label

#: How deep Ifs may nest inside one another's branches.
MAX_NESTING = 8


@translates("If")
def if_(ctx: NodeContext) -> None:
    """The branch the constant condition chooses, translated in place."""
    cond = ctx.static(0, "cond")
    chosen = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
    branch = ctx.attr(chosen)
    model = ctx.model
    depth = model.if_depth
    if depth >= MAX_NESTING:
        raise ctx.unsupported(f"Ifs nest more than {MAX_NESTING} deep; flatten the model's control flow")
    missing = sorted({n.op_type for n in branch.node if n.op_type not in TRANSLATORS})
    if missing:
        raise ctx.unsupported(f"its {chosen} uses {', '.join(missing)}, which hetero does not "
                              "import inside a branch")
    if len(branch.output) != ctx.num_outputs:
        raise ctx.unsupported(f"its {chosen} has {len(branch.output)} outputs for the If's "
                              f"{ctx.num_outputs}; the model is malformed")
    for tensor in branch.initializer:
        model.values[tensor.name] = model.graph.add_constant(numpy_helper.to_array(tensor), tensor.name)
    # Values the branch reads count as read (a translator asks whether its outputs are).
    model.read |= {name for n in branch.node for name in n.input} | {o.name for o in branch.output}
    model.if_depth = depth + 1
    try:
        for node in branch.node:
            TRANSLATORS[node.op_type](NodeContext(model, node))
    finally:
        model.if_depth = depth
    for i, (name, out) in enumerate(zip(ctx.node.output, branch.output)):
        if not name:
            continue
        if out.name not in model.values:
            raise ctx.unsupported(f"its {chosen}'s output {out.name!r} is computed by no node "
                                  f"({node_label(ctx.node)} is malformed)")
        # An Identity carries the If's output name (the rewrite passes keep it, drop the node).
        ctx.emit_output(i, "Identity", [model.values[out.name]])
