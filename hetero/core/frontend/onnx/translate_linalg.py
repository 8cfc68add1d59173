"""Translators of ONNX's selection, linear-algebra and integer-product ops: TopK, Einsum,
ConvTranspose, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.

TopK's ``k`` is an input since opset 10 (an attribute in opset 1) and must be
constant. Einsum has no canonical op of its own: its equation is rewritten here into
Transpose, Reshape, Gather (for diagonals), ReduceSum, Mul and MatMul, so contractions
run on the MatMul kernels. ConvTranspose with constant weights becomes Conv (one per
output phase, or one over the input spread by the strides); with run-time weights it
stays the canonical ConvTranspose. The integer products become an exact accumulation
(an int32 MatMul, or a float64 Conv whose partial sums are integers below 2**31) and,
for the QLinear ops, onnxruntime's float32 requantisation step by step.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any

import numpy as np

from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.core.ir.graph import Value
from hetero.errors import ShapeError


@translates("TopK")
def topk(ctx: NodeContext) -> None:
    x = ctx.input(0)
    if ctx.has_input(1):
        values = ctx.static_ints(1, "K")
        if len(values) != 1:
            raise ShapeError(f"{ctx.label}: K must hold one value, got {values}")
        k = values[0]
    else:
        k = ctx.attr("k")
    attrs = {"k": k, "axis": ctx.attr("axis", -1), "largest": ctx.attr("largest", 1)}
    ctx.emit("TopK", [x], attrs, n_outputs=2)


# -- Einsum ------------------------------------------------------------------------------

#: Dtypes the canonical MatMul takes; other contractions are a Mul and a ReduceSum.
_MATMUL_KINDS = ("float16", "float32", "float64", "bfloat16", "int32", "int64", "uint32", "uint64")
_Ref = Value | int  # a value, or the index of an earlier step of the plan


class _Term:
    """One operand of the contraction as the plan goes: where it is, its labels, its dims."""

    def __init__(self, ref: _Ref, labels: list[str], sizes: list[int]) -> None:
        self.ref, self.labels, self.sizes = ref, labels, sizes

    def size(self, label: str) -> int:
        return self.sizes[self.labels.index(label)]


class _EinsumPlan:
    """Einsum as canonical ops, planned first so that the last one can be the emitted node."""

    def __init__(self, ctx: NodeContext, dtype: np.dtype) -> None:
        self.ctx, self.dtype = ctx, dtype
        self.steps: list[tuple[str, list[_Ref], dict[str, Any], str]] = []

    def _step(self, op: str, inputs: list[_Ref], attrs: dict[str, Any], purpose: str) -> int:
        self.steps.append((op, inputs, attrs, purpose))
        return len(self.steps) - 1

    def transpose(self, t: _Term, labels: list[str]) -> _Term:
        if labels == t.labels:
            return t
        perm = [t.labels.index(a) for a in labels]
        ref = self._step("Transpose", [t.ref], {"perm": perm}, "transpose")
        return _Term(ref, labels, [t.sizes[p] for p in perm])

    def reshape(self, t: _Term, labels: list[str], sizes: list[int]) -> _Term:
        if sizes == t.sizes:
            return _Term(t.ref, labels, sizes)
        return _Term(self._step("Reshape", [t.ref], {"shape": sizes}, "reshape"), labels, sizes)

    def sum_out(self, t: _Term, labels: set[str]) -> _Term:
        axes = [i for i, a in enumerate(t.labels) if a in labels]
        if not axes:
            return t
        ref = self._step("ReduceSum", [t.ref], {"axes": axes, "keepdims": 0}, "sum")
        kept = [i for i in range(len(t.labels)) if i not in axes]
        return _Term(ref, [t.labels[i] for i in kept], [t.sizes[i] for i in kept])

    def diagonal(self, t: _Term, label: str) -> _Term:
        """``t`` with two of ``label``'s axes replaced by their diagonal: the two moved last
        and flattened, then a Gather of every ``n + 1``-th element."""
        p, q = [i for i, a in enumerate(t.labels) if a == label][:2]
        n = t.sizes[p]
        if t.sizes[q] != n:
            raise ShapeError(f"{self.ctx.label}: label {label!r} names dims of sizes {n} and "
                             f"{t.sizes[q]} in one operand")
        rest = [i for i in range(len(t.labels)) if i not in (p, q)]
        perm = rest + [p, q]
        ref = t.ref
        if perm != list(range(len(perm))):
            ref = self._step("Transpose", [ref], {"perm": perm}, "transpose")
        labels, sizes = [t.labels[i] for i in rest] + [label], [t.sizes[i] for i in rest] + [n]
        ref = self._step("Reshape", [ref], {"shape": sizes[:-1] + [n * n]}, "reshape")
        indices = self.ctx.constant(np.arange(n, dtype=np.int64) * (n + 1), "diagonal")
        return _Term(self._step("Gather", [ref, indices], {"axis": len(rest)}, "diagonal"),
                     labels, sizes)

    def contract(self, a: _Term, b: _Term, later: set[str]) -> _Term:
        """The product of ``a`` and ``b`` summed over their shared labels not in ``later``."""
        shared = [x for x in a.labels if x in b.labels]
        batch = [x for x in shared if x in later]
        summed = [x for x in shared if x not in later]
        # A summed label of size 1 on one side (a broadcast ellipsis dim) sums the other alone.
        for x in list(summed):
            if a.size(x) != b.size(x):
                one, other = (a, b) if a.size(x) == 1 else (b, a)
                kept = [y for y in one.labels if y != x]
                squeezed = self.reshape(one, kept, [one.size(y) for y in kept])
                reduced = self.sum_out(other, {x})
                a, b = (squeezed, reduced) if one is a else (reduced, squeezed)
                summed.remove(x)
        m = [x for x in a.labels if x not in b.labels]
        n = [x for x in b.labels if x not in a.labels]
        bsizes = [max(a.size(x), b.size(x)) for x in batch]
        msizes, nsizes = [a.size(x) for x in m], [b.size(x) for x in n]
        ksizes = [a.size(x) for x in summed]
        if summed and self.dtype.name in _MATMUL_KINDS:
            left = self.transpose(a, batch + m + summed)
            right = self.transpose(b, batch + summed + n)
            left = self.reshape(left, batch + ["M", "K"],
                                left.sizes[:len(batch)] + [math.prod(msizes), math.prod(ksizes)])
            right = self.reshape(right, batch + ["K", "N"],
                                 right.sizes[:len(batch)] + [math.prod(ksizes), math.prod(nsizes)])
            ref = self._step("MatMul", [left.ref, right.ref], {}, "matmul")
            product = _Term(ref, batch + ["M", "N"],
                            bsizes + [math.prod(msizes), math.prod(nsizes)])
            return self.reshape(product, batch + m + n, bsizes + msizes + nsizes)
        # Broadcast both to (batch, m, n, summed) and multiply, then sum.
        left = self.transpose(a, batch + m + summed)
        left = self.reshape(left, batch + m + n + summed,
                            left.sizes[:len(batch) + len(m)] + [1] * len(n) + ksizes)
        right = self.transpose(b, batch + n + summed)
        right = self.reshape(right, batch + m + n + summed, right.sizes[:len(batch)]
                             + [1] * len(m) + nsizes + ksizes)
        ref = self._step("Mul", [left.ref, right.ref], {}, "product")
        return self.sum_out(_Term(ref, batch + m + n + summed, bsizes + msizes + nsizes + ksizes),
                            set(summed))

    def emit(self, result: _Term) -> None:
        if not self.steps or result.ref != len(self.steps) - 1:
            self._step("Identity", [result.ref], {}, "identity")
        values: list[Value] = []
        for i, (op, inputs, attrs, purpose) in enumerate(self.steps):
            args = [values[r] if isinstance(r, int) else r for r in inputs]
            if i == len(self.steps) - 1:
                self.ctx.emit(op, args, attrs)
            else:
                values.append(self.ctx.add(op, args, attrs, purpose))


def parse_einsum(equation: str, ranks: list[int], where: str) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output's; an ellipsis becomes labels ``…0``, ``…1``,
    ... aligned from the right across operands, as numpy broadcasts them."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"{where}: equation {equation!r} has {len(terms)} operands, the node "
                         f"{len(ranks)} inputs")
    for term in terms + [rhs]:
        letters = term.replace("...", "")
        if not all(c.isalpha() for c in letters) or term.count("...") > 1:
            raise ShapeError(f"{where}: equation {equation!r}: term {term!r} is not letters "
                             "with at most one ellipsis")
    widths = [rank - len(t.replace("...", "")) if "..." in t else 0
              for t, rank in zip(terms, ranks)]
    ellipsis = max(widths, default=0)
    labels = []
    for term, width, rank in zip(terms, widths, ranks):
        head, _, tail = term.partition("...")
        spread = [f"…{ellipsis - width + j}" for j in range(width)] if "..." in term else []
        operand = list(head) + spread + list(tail)
        if len(operand) != rank or width < 0:
            raise ShapeError(f"{where}: term {term!r} of {equation!r} does not fit an input of "
                             f"rank {rank}")
        labels.append(operand)
    dots = [f"…{j}" for j in range(ellipsis)]
    if arrow and ellipsis and "..." not in rhs:
        raise ShapeError(f"{where}: equation {equation!r} drops the ellipsis' {ellipsis} dims "
                         "from its output, which onnx's reference (numpy) refuses")
    if arrow:
        head, _, tail = rhs.partition("...")
        output = list(head) + (dots if "..." in rhs else []) + list(tail)
    else:
        counts: dict[str, int] = {}
        for operand in labels:
            for x in operand:
                counts[x] = counts.get(x, 0) + 1
        output = dots + sorted(x for x, c in counts.items() if c == 1 and not x.startswith("…"))
    known = {x for operand in labels for x in operand}
    if len(set(output)) != len(output) or not set(output) <= known:
        raise ShapeError(f"{where}: output {rhs!r} of {equation!r} repeats a label or names one "
                         "no input has")
    return labels, output


@translates("Einsum")
def einsum(ctx: NodeContext) -> None:
    """Einsum as diagonals (Gather), sums (ReduceSum), pairwise contractions (MatMul, or Mul
    and ReduceSum for the dtypes MatMul lacks) and a final Transpose, left to right."""
    operands = ctx.inputs()
    labels, output = parse_einsum(ctx.attr("equation"), [v.type.rank for v in operands], ctx.label)
    sizes: dict[str, set[int]] = {}
    for value, operand in zip(operands, labels):
        for x, d in zip(operand, value.shape):
            sizes.setdefault(x, set()).add(d)
    for x, found in sizes.items():
        # Ellipsis dims broadcast (1 against n); a letter names one size.
        if len(found - {1} if x.startswith("…") else found) > 1:
            raise ShapeError(f"{ctx.label}: label {x!r} has sizes {sorted(found)}")
    plan = _EinsumPlan(ctx, operands[0].dtype)
    terms = [_Term(v, list(operand), list(v.shape)) for v, operand in zip(operands, labels)]
    for i, t in enumerate(terms):
        for x in dict.fromkeys(t.labels):
            while t.labels.count(x) > 1:
                t = plan.diagonal(t, x)
        elsewhere = {x for u in terms[:i] + terms[i + 1:] for x in u.labels} | set(output)
        terms[i] = plan.sum_out(t, set(t.labels) - elsewhere)
    result = terms[0]
    for i, t in enumerate(terms[1:], start=1):
        later = {x for u in terms[i + 1:] for x in u.labels} | set(output)
        result = plan.contract(result, t, later)
    plan.emit(plan.transpose(plan.sum_out(result, set(result.labels) - set(output)), output))


# -- ConvTranspose -----------------------------------------------------------------------


def _transpose_pads(ctx: NodeContext, spatial: Sequence[int], kernel: Sequence[int],
                    strides: Sequence[int], dilations: Sequence[int],
                    output_padding: Sequence[int]) -> list[int]:
    """Explicit pads (all begins, then all ends) from pads, output_shape or auto_pad.

    An ``output_shape`` (or SAME's ``input * stride``) sets the total padding; ONNX's
    formula splits it, the odd one at the end for SAME_UPPER and at the beginning
    otherwise. Where that total is negative (the output reaches past the natural one)
    onnx's reference and onnxruntime place the extra outputs differently; hetero takes
    the one case they agree on (-1 outside SAME_UPPER: one more output at the end) and
    refuses the others rather than pick a side.
    """
    mode = ctx.attr("auto_pad", "NOTSET")
    n = len(spatial)
    if mode not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(
            f"auto_pad {mode!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    wanted = ctx.attr("output_shape")
    if wanted is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(spatial, strides)]
    if wanted is None:
        return [0] * 2 * n if mode == "VALID" else ctx.attr("pads", [0] * 2 * n)
    if len(wanted) != n:
        raise ShapeError(f"{ctx.label}: output_shape {wanted} must have {n} spatial entries")
    begins, ends = [], []
    for i in range(n):
        natural = (strides[i] * (spatial[i] - 1) + output_padding[i]
                   + dilations[i] * (kernel[i] - 1) + 1)
        total = natural - wanted[i]
        if total < 0 and not (total == -1 and mode != "SAME_UPPER"):
            raise ctx.unsupported(
                f"its output ({wanted[i]} on spatial axis {i}) reaches {-total} past the natural "
                f"{natural}, where onnx's reference and onnxruntime disagree on the layout; "
                "give explicit pads (negative ones extend the output) instead")
        begin = total // 2 if mode == "SAME_UPPER" else total - total // 2
        begins.append(begin)
        ends.append(total - begin)
    return begins + ends


@translates("ConvTranspose")
def conv_transpose(ctx: NodeContext) -> None:
    x, w = ctx.input(0), ctx.input(1)
    n = x.type.rank - 2
    kernel = ctx.attr("kernel_shape", list(w.shape[2:]))
    strides = ctx.attr("strides", [1] * n)
    dilations = ctx.attr("dilations", [1] * n)
    output_padding = ctx.attr("output_padding", [0] * n)
    pads = _transpose_pads(ctx, x.shape[2:], kernel, strides, dilations, output_padding)
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads,
             "output_padding": output_padding, "group": ctx.attr("group", 1)}
    weights = ctx.model.evaluate(w, f"{ctx.label}: its weight")
    if weights is None or list(kernel) != list(w.shape[2:]):
        ctx.emit("ConvTranspose", [x, w, ctx.optional_input(2)], attrs)
        return
    if _phases(attrs, x.shape[2:], weights.shape[2:]) is not None:
        _as_phase_convs(ctx, x, weights, attrs)
    else:
        _as_conv(ctx, x, weights, attrs)


def _phases(attrs: dict[str, Any], spatial: Sequence[int], kernel: Sequence[int]
            ) -> list[list[tuple[int, int, int]]] | None:
    """Per spatial axis, per output phase ``r`` (outputs ``q * stride + r``): the first tap,
    the tap count and the input offset of the phase's convolution; None where a phase has
    no tap or the taps are dilated (then the spread input is the way)."""
    n = len(spatial)
    axes = []
    for i in range(n):
        s, k, begin = attrs["strides"][i], kernel[i], attrs["pads"][i]
        if attrs["dilations"][i] != 1:
            return None
        out = (s * (spatial[i] - 1) + attrs["output_padding"][i] + k - begin
               - attrs["pads"][i + n])
        rows = -(-out // s)
        phases = []
        for r in range(s):
            first, carry = (r + begin) % s, (r + begin) // s
            taps = -(-(k - first) // s)
            lead = taps - 1 - carry
            trail = rows + taps - 1 - spatial[i] - lead
            # A phase that reads no input at all (cropped away) is left to the spread input.
            if taps < 1 or spatial[i] + min(lead, 0) + min(trail, 0) < 1:
                return None
            phases.append((first, taps, carry))
        axes.append(phases)
    return axes


def _as_phase_convs(ctx: NodeContext, x: Value, weights: np.ndarray,
                    attrs: dict[str, Any]) -> None:
    """A strided ConvTranspose with constant weights as one Conv per output phase (the
    outputs ``q * stride + r`` for each ``r`` on every axis), each with the taps that land
    on its phase, flipped: no multiplication by zeros. The phases are interleaved with
    Reshape and Concat and the result cropped to the output size."""
    n = x.type.rank - 2
    spatial, kernel = list(x.shape[2:]), list(weights.shape[2:])
    strides, group = attrs["strides"], attrs["group"]
    out = [s * (d - 1) + extra + k - attrs["pads"][i] - attrs["pads"][i + n]
           for i, (s, d, extra, k) in enumerate(zip(strides, spatial, attrs["output_padding"],
                                                    kernel))]
    rows = [-(-o // s) for o, s in zip(out, strides)]
    phases = _phases(attrs, spatial, kernel)
    assert phases is not None
    per_in, per_out = weights.shape[0] // group, weights.shape[1]
    bias = ctx.optional_input(2)
    batch, c_out = x.shape[0], per_out * group

    def phase(combo: tuple[int, ...]) -> Value:
        taps = [phases[i][r] for i, r in enumerate(combo)]
        picks = tuple(slice(first + (count - 1) * s, None if first == 0 else first - 1, -s)
                      if count > 1 else slice(first, first + 1)
                      for (first, count, _), s in zip(taps, strides))
        sub = weights[(slice(None), slice(None)) + picks]
        grouped = sub.reshape((group, per_in, per_out) + sub.shape[2:]).swapaxes(1, 2)
        w = ctx.constant(np.ascontiguousarray(grouped.reshape((c_out, per_in) + sub.shape[2:])),
                         "phase_weight")
        begins = [count - 1 - carry for first, count, carry in taps]
        ends = [rows[i] + taps[i][1] - 1 - spatial[i] - begins[i] for i in range(n)]
        source = x
        crops = [min(v, 0) for v in begins + ends]
        if any(crops):
            source = ctx.add("Pad", [x], {"pads": [0, 0] + crops[:n] + [0, 0] + crops[n:]},
                             "phase_crop")
        conv = {"kernel_shape": list(sub.shape[2:]), "strides": [1] * n, "dilations": [1] * n,
                "group": group, "pads": [max(v, 0) for v in begins + ends]}
        y = ctx.add("Conv", [source, w, bias], conv, "phase")
        spread = [batch, c_out] + [v for q in rows for v in (q, 1)]
        return ctx.add("Reshape", [y], {"shape": spread}, "phase_axes")

    def interleave(axis: int, prefix: tuple[int, ...]) -> Value:
        if axis == n:
            return phase(prefix)
        parts = [interleave(axis + 1, prefix + (r,)) for r in range(strides[axis])]
        if len(parts) == 1:
            return parts[0]
        return ctx.add("Concat", parts, {"axis": 3 + 2 * axis}, "interleave")

    joined = interleave(0, ())
    full = [batch, c_out] + [q * s for q, s in zip(rows, strides)]
    crop = [0] * (n + 2) + [0, 0] + [o - f for o, f in zip(out, full[2:])]
    if not any(crop):
        ctx.emit("Reshape", [joined], {"shape": full})
        return
    y = ctx.add("Reshape", [joined], {"shape": full}, "phases_out")
    ctx.emit("Pad", [y], {"pads": crop})


def _as_conv(ctx: NodeContext, x: Value, weights: np.ndarray, attrs: dict[str, Any]) -> None:
    """A ConvTranspose with constant weights as a Conv, so it runs on the tuned Conv kernels:
    the input spread out by the strides (zeros between its elements: a Reshape, a Pad
    and a Reshape), padded by ``dilation * (kernel - 1)`` less the ConvTranspose's pads
    (negative: cropped), convolved with the weights flipped and with their channel axes
    swapped per group. The zeros cost ``prod(strides)`` times the work of the gather."""
    n = x.type.rank - 2
    strides, dilations, pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    group, kernel = attrs["group"], list(weights.shape[2:])
    spread = x
    if any(s > 1 for s in strides):
        batch, channels, dims = x.shape[0], x.shape[1], list(x.shape[2:])
        interleaved = [batch, channels] + [v for d in dims for v in (d, 1)]
        spread = ctx.add("Reshape", [spread], {"shape": interleaved}, "spread_axes")
        ends = [0, 0] + [v for s in strides for v in (0, s - 1)]
        spread = ctx.add("Pad", [spread], {"pads": [0] * len(ends) + ends}, "spread")
        spread = ctx.add("Reshape", [spread], {"shape": [batch, channels]
                                               + [d * s for d, s in zip(dims, strides)]},
                         "spread_out")
    begins = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, pads[:n])]
    ends = [d * (k - 1) - p + extra - (s - 1)
            for d, k, p, extra, s in zip(dilations, kernel, pads[n:], attrs["output_padding"],
                                         strides)]
    crops = [min(v, 0) for v in begins + ends]
    if any(crops):
        spread = ctx.add("Pad", [spread], {"pads": [0, 0] + crops[:n] + [0, 0] + crops[n:]},
                         "crop")
    per_in, per_out = weights.shape[0] // group, weights.shape[1]
    flipped = np.flip(weights, axis=tuple(range(2, 2 + n)))
    grouped = flipped.reshape((group, per_in, per_out) + tuple(kernel)).swapaxes(1, 2)
    w = ctx.constant(np.ascontiguousarray(grouped.reshape((group * per_out, per_in)
                                                          + tuple(kernel))), "conv_weight")
    conv = {"kernel_shape": kernel, "strides": [1] * n, "dilations": dilations, "group": group,
            "pads": [max(v, 0) for v in begins + ends]}
    ctx.emit("Conv", [spread, w, ctx.optional_input(2)], conv)


# -- integer products --------------------------------------------------------------------

_INT32, _FLOAT64 = np.dtype("int32"), np.dtype("float64")
#: The largest |(x - x_zero) * (w - w_zero)| of 8-bit operands.
_LARGEST_TERM = 255 * 255


def _centred(ctx: NodeContext, value: Value, zero: Value | None, dtype: np.dtype,
             trailing: int | None, what: str) -> Value:
    """``value - zero`` in ``dtype``. A 1-D zero point of several entries runs along the
    axis ``trailing`` from the end (A's rows: 2, B's columns: 1, W's output channels: its
    rank); None allows only a scalar."""
    centred = ctx.add("Cast", [value], {"to": dtype}, f"{what}_wide")
    if zero is None:
        return centred
    if zero.type.rank > 1 or (zero.type.size > 1 and trailing is None):
        raise ctx.unsupported(f"its {what} zero point {zero.type} must be a scalar"
                              + ("" if trailing is None else " or 1-D"))
    zero = ctx.add("Cast", [zero], {"to": dtype}, f"{what}_zero_wide")
    if zero.type.size > 1 and trailing is not None and trailing > 1:
        shape = [zero.type.size] + [1] * (trailing - 1)
        zero = ctx.add("Reshape", [zero], {"shape": shape}, f"{what}_zero_axis")
    return ctx.add("Sub", [centred, zero], {}, f"{what}_centred")


@translates("MatMulInteger")
def matmul_integer(ctx: NodeContext) -> None:
    """(A - a_zero) @ (B - b_zero) in int32, which wraps as onnxruntime's int32 sums do.
    A's zero point may be per row, B's per column."""
    a, b = ctx.input(0), ctx.input(1)
    a = _centred(ctx, a, ctx.optional_input(2), _INT32, 2 if a.type.rank > 1 else None, "a")
    b = _centred(ctx, b, ctx.optional_input(3), _INT32, 1 if b.type.rank > 1 else None, "b")
    ctx.emit("MatMul", [a, b])


@translates("ConvInteger")
def conv_integer(ctx: NodeContext) -> None:
    """(x - x_zero) convolved with (w - w_zero) into int32: a float64 Conv, exact since
    every partial sum is an integer below 2**31 (the node is refused where one could
    exceed int32, where onnxruntime would wrap); w's zero point may be per output channel."""
    from hetero.core.frontend.onnx.translate_nn import explicit_pads

    x, w = ctx.input(0), ctx.input(1)
    n = x.type.rank - 2
    group = ctx.attr("group", 1)
    kernel = ctx.attr("kernel_shape", list(w.shape[2:]))
    terms = (x.shape[1] // max(group, 1)) * math.prod(kernel)
    if terms * _LARGEST_TERM >= 2**31:
        raise ctx.unsupported(f"its sums of {terms} products could pass int32, where onnxruntime "
                              "wraps around and hetero's exact sums would not")
    strides = ctx.attr("strides", [1] * n)
    dilations = ctx.attr("dilations", [1] * n)
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "group": group,
             "pads": explicit_pads(ctx, x.shape[2:], kernel, strides, dilations)}
    xc = _centred(ctx, x, ctx.optional_input(2), _FLOAT64, None, "x")
    wc = _centred(ctx, w, ctx.optional_input(3), _FLOAT64, w.type.rank, "w")
    y = ctx.add("Conv", [xc, wc], attrs, "conv")
    ctx.emit("Cast", [y], {"to": _INT32})


# -- QLinearMatMul, QLinearConv ----------------------------------------------------------

_FLOAT32 = np.dtype("float32")


def _requantize(ctx: NodeContext, accumulator: Value, scale: Value, zero: Value) -> None:
    """Emit onnxruntime's requantisation of an integer-valued ``accumulator``:
    ``saturate(round_half_even(float32(acc) * scale) + zero)``. The multiply is one
    rounding in float32, as MLAS's; QuantizeLinear with scale 1 then rounds, adds and
    saturates exactly."""
    acc = ctx.add("Cast", [accumulator], {"to": _FLOAT32}, "acc_float")
    scaled = ctx.add("Mul", [acc, scale], {}, "scaled")
    if zero.type.size != 1:
        raise ctx.unsupported(f"its output zero point {zero.type} must be per tensor")
    one = ctx.constant(np.ones(zero.shape, np.float32), "unit_scale")
    ctx.emit("QuantizeLinear", [scaled, one, zero], {"axis": 1})


def _scale(ctx: NodeContext, i: int, what: str, trailing: int | None) -> Value:
    """Input ``i``, a scale, in float32 (exact from float16); one of several entries (allowed
    where ``trailing`` is set) runs along the axis ``trailing`` from the end."""
    scale = ctx.input(i)
    if scale.type.rank > 1 or (scale.type.size > 1 and trailing is None):
        raise ctx.unsupported(f"its {what} {scale.type} must be a scalar"
                              + ("" if trailing is None else " or 1-D"))
    if scale.dtype != _FLOAT32:
        scale = ctx.add("Cast", [scale], {"to": _FLOAT32}, f"{what}_float")
    if scale.type.size > 1 and trailing is not None and trailing > 1:
        scale = ctx.add("Reshape", [scale], {"shape": [scale.type.size] + [1] * (trailing - 1)},
                        f"{what}_axis")
    return scale


def _combined(ctx: NodeContext, first: Value, second: Value, out: Value) -> Value:
    """``first * second / out`` in float32, left to right, as onnxruntime computes it (at
    run time, so scales may be graph inputs)."""
    product = ctx.add("Mul", [first, second], {}, "scale_product")
    return ctx.add("Div", [product, out], {}, "scale")


@translates("QLinearMatMul")
def qlinear_matmul(ctx: NodeContext) -> None:
    """The int32 product of the centred operands (as MatMulInteger), requantised as
    onnxruntime does; B's scale and zero point may be per column."""
    a, b = ctx.input(0), ctx.input(3)
    if b.type.rank < 2:
        raise ctx.unsupported("a 1-D B is not supported")
    scale = _combined(ctx, _scale(ctx, 1, "a_scale", None), _scale(ctx, 4, "b_scale", 1),
                      _scale(ctx, 6, "y_scale", None))
    centred_a = _centred(ctx, a, ctx.input(2), _INT32, None, "a")
    centred_b = _centred(ctx, b, ctx.input(5), _INT32, 1, "b")
    acc = ctx.add("MatMul", [centred_a, centred_b], {}, "acc")
    _requantize(ctx, acc, scale, ctx.input(7))


@translates("QLinearConv")
def qlinear_conv(ctx: NodeContext) -> None:
    """The exact sum of the centred operands' products plus the int32 bias (a float64 Conv,
    refused where it could pass int32, so the bias must be constant), requantised as
    onnxruntime does; w's scale and zero point may be per output channel."""
    from hetero.core.frontend.onnx.translate_nn import explicit_pads

    x, w = ctx.input(0), ctx.input(3)
    n = x.type.rank - 2
    group = ctx.attr("group", 1)
    kernel = ctx.attr("kernel_shape", list(w.shape[2:]))
    bias = ctx.static(8, "B")
    terms = (x.shape[1] // max(group, 1)) * math.prod(kernel)
    largest_bias = 0 if bias is None else int(np.abs(bias.astype(np.int64)).max(initial=0))
    if terms * _LARGEST_TERM + largest_bias >= 2**31:
        raise ctx.unsupported(f"its sums of {terms} products could pass int32, where onnxruntime "
                              "wraps around and hetero's exact sums would not")
    scale = _combined(ctx, _scale(ctx, 1, "x_scale", None), _scale(ctx, 4, "w_scale", n + 1),
                      _scale(ctx, 6, "y_scale", None))
    strides = ctx.attr("strides", [1] * n)
    dilations = ctx.attr("dilations", [1] * n)
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "group": group,
             "pads": explicit_pads(ctx, x.shape[2:], kernel, strides, dilations)}
    xc = _centred(ctx, x, ctx.input(2), _FLOAT64, None, "x")
    wc = _centred(ctx, w, ctx.input(5), _FLOAT64, w.type.rank, "w")
    b = None if bias is None else ctx.constant(bias.astype(np.float64), "bias_wide")
    acc = ctx.add("Conv", [xc, wc, b], attrs, "acc")
    _requantize(ctx, acc, scale, ctx.input(7))


@translates("Det")
def det(ctx: NodeContext) -> None:
    ctx.emit("Det", [ctx.input(0)])
