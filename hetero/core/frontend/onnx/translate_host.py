"""Ops whose output shape depends on their input values: folded, or run on the host.

NonZero, Compress, Unique and NonMaxSuppression return as many elements as the data
says. With constant inputs (a mask built from shapes, say) they fold at import, by
the same kernels the host runs (:mod:`hetero.core.exec.host_ops`); otherwise the
node raises :class:`~hetero.errors.DataDependentError` with ``host`` set, and
``hetero.compile`` runs it on the host between compiled stages
(:mod:`hetero.core.staging`).
"""

from __future__ import annotations

from hetero.core.exec.host_ops import HOST_OPS, run_host_op
from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.errors import DataDependentError

#: The ONNX ops that run on the host when their inputs are not constants.
HOST_OP_TYPES = tuple(sorted(HOST_OPS))


@translates(*HOST_OP_TYPES)
def data_dependent(ctx: NodeContext) -> None:
    """Fold the node when its inputs are constants; otherwise set it aside for the host."""
    node = ctx.node
    model = ctx.model
    arrays = []
    for i, name in enumerate(node.input):
        if not name:
            arrays.append(None)
            continue
        array = model.evaluate(ctx.input(i), f"{ctx.label}: its input {name!r}")
        if array is None:
            raise DataDependentError(
                f"model {model.model_name}: {ctx.label}: how many elements it returns depends on "
                f"the values of its input {name!r}", host=True)
        arrays.append(array)
    attrs = {a.name: ctx.attr(a.name) for a in node.attribute}
    results = run_host_op(node.op_type, attrs, arrays, ctx.label)
    for name, array in zip(node.output, results):
        if name:
            model.values[name] = model.graph.add_constant(array, name)
