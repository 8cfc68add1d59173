"""Control flow whose decisions are known at import: If, and Loop and Scan unrolled.

An ``If`` whose condition folds (a constant, or shapes hetero knows, as exporters'
``If(Equal(Shape(x)[0], 1))``) is inlined: the chosen branch's nodes are translated in
place, reading the outer graph's values by name as ONNX scoping says, and the branch's
outputs become the If's. A condition computed from a small graph input is an operand
like any other (:class:`~hetero.errors.OperandInputError`): ``hetero.compile``
specialises on its value. Nested Ifs inline the same way, at most :data:`MAX_NESTING`
deep.

A Scan runs as many times as its scan inputs are long, and a Loop as its trip count
says, with a continuation condition that folds each time: both are unrolled, each
iteration's body translated with its inputs bound (Scan's slices by a Gather, states
carried over), and their scan outputs stacked by an Unsqueeze and a Concat. The
unrolled graph is bounded (:data:`MAX_UNROLLED_NODES`).

Control flow decided by data is staged (:mod:`hetero.core.runtime.staged`): an If on a
computed condition waits for a later stage, compiled once per value of the condition
(so its chosen branch is inlined there as above); a Loop whose trip count or stopping
depends on data, one too long to unroll, and any control flow whose body holds a node
that runs on the host (NonZero, say) raise :class:`~hetero.errors.DataDependentError`
with ``host`` set: the runtime runs the node on the host and its bodies as compiled
graphs.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from hetero.core.frontend.onnx.context import TRANSLATORS, NodeContext, translates
from hetero.core.frontend.onnx.translate_sequence import (
    Bound, bind, check_operands, is_bound, lookup, operand,
)
from hetero.core.ir.graph import Value
from hetero.errors import DataDependentError

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
    if len(branch.output) != ctx.num_outputs:
        raise ctx.unsupported(f"its {chosen} has {len(branch.output)} outputs for the If's "
                              f"{ctx.num_outputs}; the model is malformed")
    model.if_depth = depth + 1
    try:
        # As a Loop body is: fresh value names, the branch read by ONNX scoping.
        values = _translate_body(ctx, branch, {}, 0, chosen)
    finally:
        model.if_depth = depth
    _bind_outputs(ctx, values)


#: The most body nodes a Loop or Scan may unroll into (iterations times body size).
MAX_UNROLLED_NODES = 20_000


def _translate_body(ctx: NodeContext, body: onnx.GraphProto, bindings: dict[str, Bound],
                    iteration: int, what: str) -> list[Bound]:
    """Translate one iteration of ``body`` with its inputs bound to ``bindings``; the
    values of its outputs (tensors, or sequences and optionals known at import).

    Body nodes read the outer graph's values and their own by ONNX name: each
    iteration's values are bound to those names as it is translated, and the canonical
    values get fresh names (``name@k``), since every iteration adds its own nodes.
    """
    model = ctx.model
    missing = sorted({n.op_type for n in body.node if n.op_type not in TRANSLATORS})
    if missing:
        raise ctx.unsupported(f"its {what} uses {', '.join(missing)}, which hetero does not import "
                              "inside a subgraph")
    for name, value in bindings.items():
        bind(model, name, value)
    if iteration == 0:
        for tensor in body.initializer:
            model.values[tensor.name] = model.graph.add_constant(numpy_helper.to_array(tensor),
                                                                 model.fresh(tensor.name))
        model.read |= {name for n in body.node for name in n.input} | {o.name for o in body.output}
    for node in body.node:
        renamed = onnx.NodeProto()
        renamed.CopyFrom(node)
        del renamed.output[:]
        fresh = [model.fresh(f"{o}@{iteration}") if o else "" for o in node.output]
        renamed.output.extend(fresh)
        model.read |= {new for old, new in zip(node.output, fresh) if old in model.read}
        check_operands(model, renamed)
        try:
            TRANSLATORS[node.op_type](NodeContext(model, renamed))
        except DataDependentError as exc:
            # A later stage cannot take part of a body: the whole node runs on the host.
            raise _on_host(ctx, f"its {what} holds {node.op_type} node {node.name or fresh[0]!r}, "
                                f"which depends on data ({exc})") from None
        for old, new in zip(node.output, fresh):
            if new and is_bound(model, new):
                bind(model, old, lookup(model, new))
    outputs = []
    for out in body.output:
        if not is_bound(model, out.name):
            raise ctx.unsupported(f"its {what}'s output {out.name!r} is computed by no node")
        outputs.append(lookup(model, out.name))
    return outputs


def _bind_outputs(ctx: NodeContext, values: list[Bound]) -> None:
    """Bind the node's outputs to ``values``: a tensor through an Identity that carries the
    output's name (the rewrite passes keep the name, drop the node), a sequence or an
    optional's absence by name."""
    for i, (name, value) in enumerate(zip(ctx.node.output, values)):
        if not name:
            continue
        if isinstance(value, Value):
            ctx.emit_output(i, "Identity", [value])
        else:
            bind(ctx.model, name, value)


def _on_host(ctx: NodeContext, why: str) -> DataDependentError:
    """The error that has the runtime run this control-flow node on the host."""
    return DataDependentError(
        f"model {ctx.model.model_name}: {ctx.label}: {why}; hetero.compile runs it on the host, "
        "its body compiled", host=True)


def _check_unroll(ctx: NodeContext, body: onnx.GraphProto, iterations: int) -> None:
    if iterations * max(1, len(body.node)) > MAX_UNROLLED_NODES:
        raise _on_host(ctx, f"it runs its body of {len(body.node)} node(s) {iterations} times, more "
                            f"than the {MAX_UNROLLED_NODES} nodes hetero unrolls")


def _stack(ctx: NodeContext, parts: list[Value], axis: int, tag: str) -> Value:
    """``parts`` stacked along a new ``axis`` (an Unsqueeze each, then one Concat)."""
    rank = parts[0].type.rank + 1
    axis = axis % rank
    grown = [ctx.add("Unsqueeze", [p], {"axes": [axis]}, f"{tag}_{k}") for k, p in enumerate(parts)]
    return grown[0] if len(grown) == 1 else ctx.add("Concat", grown, {"axis": axis}, tag)


@translates("Scan")
def scan(ctx: NodeContext) -> None:
    """Scan (opset 9 and newer), unrolled over its scan inputs' static length."""
    if ctx.model.exported_opset < 9:  # the version converter leaves Scan-8's meaning
        raise ctx.unsupported("Scan before opset 9 (with a batch axis and sequence_lens) is not "
                              "imported; re-export the model at opset 9 or newer")
    body = ctx.attr("body")
    m = ctx.attr("num_scan_inputs")
    inputs = ctx.inputs()
    n = len(inputs) - m
    states, sequences = inputs[:n], inputs[n:]
    in_axes = ctx.attr("scan_input_axes", [0] * m)
    in_dirs = ctx.attr("scan_input_directions", [0] * m)
    k_out = len(body.output) - n
    out_axes = ctx.attr("scan_output_axes", [0] * k_out)
    out_dirs = ctx.attr("scan_output_directions", [0] * k_out)
    lengths = {s.shape[a % s.type.rank] for s, a in zip(sequences, in_axes)}
    if len(lengths) != 1:
        raise ctx.unsupported(f"its scan inputs have different lengths {sorted(lengths)}")
    (length,) = lengths
    if length == 0:
        raise ctx.unsupported("its scan inputs are empty; hetero does not unroll zero iterations")
    _check_unroll(ctx, body, length)
    names = [i.name for i in body.input]
    collected: list[list[Value]] = [[] for _ in range(k_out)]
    for step in range(length):
        slices = []
        for j, (seq, axis, reverse) in enumerate(zip(sequences, in_axes, in_dirs)):
            at = length - 1 - step if reverse else step
            index = ctx.constant(np.array(at, np.int64), f"scan_index_{j}_{step}")
            slices.append(ctx.add("Gather", [seq, index], {"axis": axis % seq.type.rank}, f"slice_{j}_{step}"))
        outs = _translate_body(ctx, body, dict(zip(names, [*states, *slices])), step, "body")
        states = outs[:n]
        for j, value in enumerate(outs[n:]):
            collected[j].append(value)
    results = list(states)
    for j, parts in enumerate(collected):
        if out_dirs[j]:
            parts = parts[::-1]
        results.append(_stack(ctx, parts, out_axes[j], f"scan_out_{j}"))
    _bind_outputs(ctx, results)


@translates("Loop")
def loop(ctx: NodeContext) -> None:
    """Loop with a trip count and continuation hetero knows at import (or specialises on),
    unrolled; its scan outputs stacked along a new first axis."""
    body = ctx.attr("body")
    try:
        trips = ctx.static(0, "M")
        cond = ctx.static(1, "cond")
    except DataDependentError as exc:
        raise _on_host(ctx, f"how often it runs depends on data ({exc})") from None
    limit = None if trips is None else int(np.asarray(trips).reshape(-1)[0])
    going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    if limit is None:
        raise _on_host(ctx, "it has no trip count, so how often it runs depends on data")
    _check_unroll(ctx, body, limit)
    states = [operand(ctx, i) for i in range(2, len(ctx.node.input))]
    n = len(states)
    names = [i.name for i in body.input]
    collected: list[list[Value]] = [[] for _ in range(len(body.output) - 1 - n)]
    step = 0
    while going and step < limit:
        counter = ctx.constant(np.array(step, np.int64), f"loop_iteration_{step}")
        flag = ctx.constant(np.array(going), f"loop_cond_{step}")
        outs = _translate_body(ctx, body, dict(zip(names, [counter, flag, *states])), step, "body")
        keep = ctx.model.evaluate(outs[0], f"{ctx.label}: its body's condition")
        if keep is None:
            raise _on_host(ctx, "whether its body runs again depends on data")
        going = bool(np.asarray(keep).reshape(-1)[0])
        states = outs[1:1 + n]
        for j, value in enumerate(outs[1 + n:]):
            if not isinstance(value, Value):
                raise ctx.unsupported(f"its body's scan output {j} is not a tensor; ONNX's Loop "
                                      "stacks tensors only (carry a sequence as a state instead)")
            collected[j].append(value)
        step += 1
    results = list(states)
    for j, parts in enumerate(collected):
        if not parts:
            raise ctx.unsupported("it runs zero times, and hetero cannot type its empty scan outputs")
        results.append(_stack(ctx, parts, 0, f"loop_out_{j}"))
    _bind_outputs(ctx, results)
