"""QDQ lowering: DequantizeLinear → float op → QuantizeLinear units become integer ops.

Invariant established: every QDQ *unit* that fits the integer spec is replaced by
its int8 op (:mod:`hetero.core.ir.ops.qint`), which reads the unit's int8 inputs
and writes the int8 value its QuantizeLinear wrote, so int8 tensors flow from one
integer op to the next. A unit is a QuantizeLinear (per-tensor, int8) of:

- ``Conv(DQ(x), DQ(w), DQ(b)?)``, optionally through Relu or Clip → ``QConv``;
- ``Gemm(DQ(a), DQ(w), DQ(b)?)`` (alpha = beta = 1, transA = 0; transB transposes
  the weight) or ``MatMul(DQ(a), DQ(w))``, optionally through Relu or Clip → ``QMatMul``;
- ``Add`` or ``Mul`` of two DQs, optionally through Relu or Clip → ``QAdd`` / ``QMul``;
- ``AveragePool`` (no padding, or count_include_pad) or ``GlobalAveragePool`` of a DQ
  → ``QAveragePool``;
- ``MaxPool``, ``Reshape``, ``Flatten``, ``Transpose``, ``Squeeze`` or ``Unsqueeze``
  of a DQ → the same op on int8 (then a ``Requantize`` when the unit's input and
  output quantisation differ);
- ``Relu`` or ``Clip`` of a DQ → ``Requantize`` whose clamp is the activation;
- ``Concat`` of DQs → ``Concat`` on int8, after a ``Requantize`` of each input
  quantised unlike the output.

Weights are int8 constants with zero points 0, per tensor or per output channel;
biases are int32 constants with zero points 0 and scale ``x_scale · w_scale``;
activations are int8 with one scale and zero point. A unit that does not fit
(uint8 or per-axis activations, asymmetric weights, Gemm with alpha ≠ 1, ...)
stays a float QDQ unit, which is still correct; why is logged at debug level.
A DequantizeLinear whose readers all became integer ops disappears; a
QuantizeLinear of a float value (the float → int8 boundary) and a
DequantizeLinear read by a float op (int8 → float) stay.

Integer results differ from the float QDQ graph's by at most one step of the
output's scale: the integer ops round once, half up, where the float path rounds
to float32 and then half to even.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import numpy as np

from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.core.ir.ops.qint import quantize_add_multipliers
from hetero.core.ir.pattern import Match, Op, Opt, Var
from hetero.core.passes.rewrite import Rule, exclusive_use, rewrite
from hetero.core.quant.qdq import (
    QParams,
    fixed_point_factors,
    output_clamp,
    read_bias,
    read_params,
    read_weight,
)

_log = logging.getLogger(__name__)

_MOVEMENT_OPS = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze")


# -- the unit: QuantizeLinear(act?(core(DequantizeLinear...))) ---------------------------


def _dq(role: str) -> Op:
    return Op("DequantizeLinear", Var(), ..., name=f"{role}_dq")


def _unit(core: Op, act: str | None) -> Op:
    body = core if act is None else Op(act, core, name="act")
    return Op("QuantizeLinear", body, Var(), Var(), name="q")


@dataclass(frozen=True)
class _Unit:
    """What a matched unit holds once its activations' quantisation has been read."""

    q: Node
    core: Node
    act: Node | None
    out: QParams
    ins: dict[str, tuple[Value, QParams]]

    def clamp(self) -> tuple[int, int] | str:
        return output_clamp(self.act, self.out)

    def requant(self) -> dict[str, int]:
        lo, hi = self.clamp()
        return {"y_zero": self.out.zero, "y_min": lo, "y_max": hi}


def _read(graph: Graph, m: Match, roles: tuple[str, ...]) -> _Unit | str:
    """The unit ``m`` matched, or why it cannot become integer arithmetic."""
    q, core = m.root, m.node("core")
    act = m.node("act") if "act" in m else None
    out = read_params(q, q.output)
    if isinstance(out, str):
        return out
    chain = [core] + ([act] if act is not None else [])
    for producer, reader in zip(chain, chain[1:] + [q]):
        if len(producer.outputs) != 1:  # MaxPool with its Indices: they stay float
            return f"{producer.op} {producer.name} has {len(producer.outputs)} outputs"
        what = f"{producer.op} {producer.name}'s output"
        reason = exclusive_use(graph, producer.output, reader, what)
        if reason is not None:
            return reason
    ins: dict[str, tuple[Value, QParams]] = {}
    for role in roles:
        dq = m.node(f"{role}_dq")
        params = read_params(dq, dq.inputs[0])
        if isinstance(params, str):
            return params
        ins[role] = (dq.inputs[0], params)
    unit = _Unit(q, core, act, out, ins)
    clamp = unit.clamp()
    return clamp if isinstance(clamp, str) else unit


def _node(graph: Graph, op: str, inputs: list[Value | None], attrs: dict, unit: _Unit) -> Value:
    return graph.add_node(op, inputs, attrs, name=f"{unit.core.name}_int8").output


def _requantize(graph: Graph, x: Value, src: QParams, dst: QParams, name: str,
                clamp: tuple[int, int] = (-128, 127)) -> Value:
    multiplier, shift = quantize_multiplier(src.scale / dst.scale)
    attrs = {"x_zero": src.zero, "multiplier": (multiplier,), "shift": (shift,),
             "y_zero": dst.zero, "y_min": clamp[0], "y_max": clamp[1]}
    return graph.add_node("Requantize", [x], attrs, name=name).output


# -- Conv, Gemm and MatMul ---------------------------------------------------------------


@dataclass(frozen=True)
class _Linear:
    """A lowered Conv/Gemm/MatMul: the int8 weight, int32 bias and fixed-point factors."""

    unit: _Unit
    weight: Value | np.ndarray
    bias: Value | None
    multiplier: tuple[int, ...]
    shift: tuple[int, ...]


def _linear(graph: Graph, m: Match, channel_axis: int) -> _Linear | str:
    unit = _read(graph, m, ("x",))
    if isinstance(unit, str):
        return unit
    core, x = unit.core, unit.ins["x"][1]
    weight = read_weight(m.node("w_dq"), channel_axis)
    if isinstance(weight, str):
        return weight
    w, w_scale = weight
    channels = w.shape[channel_axis]
    scales = np.broadcast_to(w_scale, (channels,)) * x.scale
    bias = None
    if "b_dq" in m:
        bias = read_bias(m.node("b_dq"), scales)
        if isinstance(bias, str):
            return bias
        if bias.shape != (channels,):
            return f"{core.op} {core.name}'s bias {bias.type} is not one value per output channel"
    factors = fixed_point_factors(scales / unit.out.scale, f"{core.op} {core.name}")
    if isinstance(factors, str):
        return factors
    w_value = m.node("w_dq").inputs[0]
    return _Linear(unit, w_value, bias, *factors)


def _check_conv(graph: Graph, m: Match) -> str | None:
    found = _linear(graph, m, channel_axis=0)
    return found if isinstance(found, str) else None


def _lower_conv(graph: Graph, m: Match) -> Value:
    lin = _linear(graph, m, channel_axis=0)
    unit = lin.unit
    x, xp = unit.ins["x"]
    attrs = {**unit.core.attrs, "x_zero": xp.zero, "multiplier": lin.multiplier,
             "shift": lin.shift, **unit.requant()}
    return _node(graph, "QConv", [x, lin.weight, lin.bias], attrs, unit)


def _gemm_axis(m: Match) -> int:
    # The output-channel (N) axis of Gemm's B: 1, or 0 when B is transposed.
    return 0 if m.node("core").op == "Gemm" and m.node("core").attrs["transB"] else 1


def _check_matmul(graph: Graph, m: Match) -> str | None:
    core = m.node("core")
    if core.op == "Gemm":
        attrs = core.attrs
        if attrs["alpha"] != 1.0 or attrs["beta"] != 1.0 or attrs["transA"]:
            return (f"Gemm {core.name} has alpha={attrs['alpha']}, beta={attrs['beta']}, "
                    f"transA={attrs['transA']}; only alpha = beta = 1 and transA = 0 are lowered")
    if m.node("w_dq").inputs[0].type.rank != 2:
        return f"{core.op} {core.name}'s weight is not a matrix"
    found = _linear(graph, m, _gemm_axis(m))
    return found if isinstance(found, str) else None


def _lower_matmul(graph: Graph, m: Match) -> Value:
    lin = _linear(graph, m, _gemm_axis(m))
    unit = lin.unit
    a, ap = unit.ins["x"]
    weight = lin.weight
    if _gemm_axis(m) == 0:
        weight = graph.add_constant(np.ascontiguousarray(weight.data.T), f"{weight.name}_t")
    attrs = {"a_zero": ap.zero, "multiplier": lin.multiplier, "shift": lin.shift,
             **unit.requant()}
    return _node(graph, "QMatMul", [a, weight, lin.bias], attrs, unit)


# -- Add and Mul -------------------------------------------------------------------------


def _binary(graph: Graph, m: Match) -> _Unit | str:
    unit = _read(graph, m, ("a", "b"))
    if isinstance(unit, str):
        return unit
    (_, a), (_, b) = unit.ins["a"], unit.ins["b"]
    ratios = (np.array([a.scale, b.scale]) if unit.core.op == "Add"
              else np.array([a.scale * b.scale])) / unit.out.scale
    found = fixed_point_factors(ratios, f"{unit.core.op} {unit.core.name}")
    if isinstance(found, str):
        return found
    if unit.core.op == "Add":
        try:
            quantize_add_multipliers(*ratios)
        except ValueError as exc:
            return f"Add {unit.core.name}: {exc}"
    return unit


def _check_binary(graph: Graph, m: Match) -> str | None:
    found = _binary(graph, m)
    return found if isinstance(found, str) else None


def _lower_binary(graph: Graph, m: Match) -> Value:
    unit = _binary(graph, m)
    (a, ap), (b, bp) = unit.ins["a"], unit.ins["b"]
    attrs = {"a_zero": ap.zero, "b_zero": bp.zero, **unit.requant()}
    if unit.core.op == "Add":
        ys = unit.out.scale
        ma, mb, shift = quantize_add_multipliers(ap.scale / ys, bp.scale / ys)
        attrs.update(a_multiplier=ma, b_multiplier=mb, shift=shift)
        return _node(graph, "QAdd", [a, b], attrs, unit)
    multiplier, shift = quantize_multiplier(ap.scale * bp.scale / unit.out.scale)
    attrs.update(multiplier=multiplier, shift=shift)
    return _node(graph, "QMul", [a, b], attrs, unit)


# -- pooling, data movement, activations, concatenation ----------------------------------


def _check_average_pool(graph: Graph, m: Match) -> str | None:
    core = m.node("core")
    if core.op == "AveragePool":
        if core.attrs["ceil_mode"]:
            return f"AveragePool {core.name} uses ceil_mode, so its divisor varies by window"
        if not core.attrs["count_include_pad"] and any(core.attrs["pads"]):
            return (f"AveragePool {core.name} pads without count_include_pad, so its divisor "
                    f"varies by window")
    unit = _read(graph, m, ("x",))
    return unit if isinstance(unit, str) else None


def _lower_average_pool(graph: Graph, m: Match) -> Value:
    unit = _read(graph, m, ("x",))
    core = unit.core
    x, xp = unit.ins["x"]
    if core.op == "AveragePool":
        window = {k: core.attrs[k] for k in ("kernel_shape", "strides", "pads", "dilations")}
    else:
        window = {"kernel_shape": x.shape[2:]}
    taps = math.prod(window["kernel_shape"])
    multiplier, shift = quantize_multiplier(xp.scale / (unit.out.scale * taps))
    attrs = {**window, "x_zero": xp.zero, "multiplier": multiplier, "shift": shift,
             **unit.requant()}
    return _node(graph, "QAveragePool", [x], attrs, unit)


def _check_single(graph: Graph, m: Match) -> str | None:
    unit = _read(graph, m, ("x",))
    return unit if isinstance(unit, str) else None


def _lower_movement(graph: Graph, m: Match) -> Value:
    unit = _read(graph, m, ("x",))
    x, xp = unit.ins["x"]
    moved = graph.add_node(unit.core.op, [x], unit.core.attrs, name=f"{unit.core.name}_int8").output
    if xp == unit.out:
        return moved
    return _requantize(graph, moved, xp, unit.out, f"{unit.core.name}_requantize")


def _check_activation(graph: Graph, m: Match) -> str | None:
    unit = _read(graph, m, ("x",))
    if isinstance(unit, str):
        return unit
    clamp = output_clamp(unit.core, unit.out)
    return clamp if isinstance(clamp, str) else None


def _lower_activation(graph: Graph, m: Match) -> Value:
    unit = _read(graph, m, ("x",))
    x, xp = unit.ins["x"]
    # The activation is the core here; it becomes the Requantize's clamp.
    clamp = output_clamp(unit.core, unit.out)
    return _requantize(graph, x, xp, unit.out, f"{unit.core.name}_int8", clamp)


def _concat_inputs(m: Match) -> list[Node] | str:
    core = m.node("core")
    producers = [v.producer for v in core.inputs]
    if any(p is None or p.op != "DequantizeLinear" for p in producers):
        return f"Concat {core.name} reads an input that is not a DequantizeLinear"
    return producers


def _check_concat(graph: Graph, m: Match) -> str | None:
    unit = _read(graph, m, ())
    if isinstance(unit, str):
        return unit
    producers = _concat_inputs(m)
    if isinstance(producers, str):
        return producers
    for dq in producers:
        params = read_params(dq, dq.inputs[0])
        if isinstance(params, str):
            return params
    return None


def _lower_concat(graph: Graph, m: Match) -> Value:
    unit = _read(graph, m, ())
    parts = []
    for i, dq in enumerate(_concat_inputs(m)):
        x, xp = dq.inputs[0], read_params(dq, dq.inputs[0])
        if xp != unit.out:
            x = _requantize(graph, x, xp, unit.out, f"{unit.core.name}_requantize_{i}")
        parts.append(x)
    return _node(graph, "Concat", parts, unit.core.attrs, unit)


# -- the rules ---------------------------------------------------------------------------

_ACTS = (None, "Relu", "Clip")


def _rules_with_acts(name: str, core: Op, replace: Callable[[Graph, Match], Value],
                     check: Callable[[Graph, Match], str | None], doc: str) -> list[Rule]:
    return [Rule(f"{name}{'' if act is None else '_' + act.lower()}", _unit(core, act), replace,
                 check, doc=doc) for act in _ACTS]


RULES = (
    *_rules_with_acts("qconv", Op("Conv", _dq("x"), _dq("w"), Opt(_dq("b")), name="core"),
                      _lower_conv, _check_conv, "a QDQ Conv unit is one QConv"),
    *_rules_with_acts("qmatmul_gemm", Op("Gemm", _dq("x"), _dq("w"), Opt(_dq("b")), name="core"),
                      _lower_matmul, _check_matmul, "a QDQ Gemm unit is one QMatMul"),
    *_rules_with_acts("qmatmul", Op("MatMul", _dq("x"), _dq("w"), name="core"),
                      _lower_matmul, _check_matmul, "a QDQ MatMul unit is one QMatMul"),
    *(rule for op in ("Add", "Mul") for rule in _rules_with_acts(
        f"q{op.lower()}", Op(op, _dq("a"), _dq("b"), name="core"), _lower_binary,
        _check_binary,
        f"a QDQ {op} unit is one Q{op}")),
    Rule("qaverage_pool", _unit(Op(("AveragePool", "GlobalAveragePool"), _dq("x"), name="core"),
                                None),
         _lower_average_pool, _check_average_pool, doc="a QDQ average pool is one QAveragePool"),
    Rule("int8_movement", _unit(Op(_MOVEMENT_OPS, _dq("x"), name="core"), None),
         _lower_movement, _check_single,
         doc="max pooling and data movement run on int8 (then requantise if the scales differ)"),
    Rule("int8_activation", _unit(Op(("Relu", "Clip"), _dq("x"), name="core"), None),
         _lower_activation, _check_activation, doc="a QDQ Relu or Clip is a clamping Requantize"),
    Rule("int8_concat", _unit(Op("Concat", ..., name="core"), None), _lower_concat,
         _check_concat, doc="Concat runs on int8 once its inputs share the output's scale"),
)


def lower_qdq(graph: Graph, keep_float: Collection[str] = ()) -> Graph:
    """A copy of ``graph`` whose QDQ units run on int8 integer ops (see the module doc).

    Units whose float core node is named in ``keep_float`` stay float QDQ units.
    """
    rules = RULES
    if keep_float:
        rules = tuple(replace(r, check=_keeping(r.check, frozenset(keep_float))) for r in RULES)
    result = rewrite(graph, rules)
    for rejection in result.rejected:
        _log.debug("lower_qdq left a unit in float: %s", rejection)
    result.graph.remove_unused_constants()
    return result.graph


def lower_qdq_where(graph: Graph, accept: Callable[[Node], bool]) -> Graph:
    """:func:`lower_qdq`, keeping float every unit whose integer nodes ``accept`` refuses.

    The integer nodes are those lowering created (the int8 ops, and MaxPool, Concat
    or a reshape run on int8). ``accept`` says whether some backend will run one (the compiler asks
    the selected accelerators): integer ops exist for backends that compute in
    int8, and a unit none of them takes is better left as float QDQ, which every
    backend runs. Lowering repeats, keeping more units float, until every integer
    node is accepted; each round keeps at least one more, so it ends.
    """
    original = {n.name for n in graph.nodes}
    keep: set[str] = set()
    while True:
        lowered = lower_qdq(graph, keep)
        refused = {unit_of(n) for n in lowered.nodes if n.name not in original and not accept(n)}
        if not refused - keep:
            return lowered
        keep |= refused


def unit_of(node: Node) -> str:
    """The float core node of the unit an integer node was lowered from (by its name:
    ``<core>_int8``, ``<core>_requantize`` or ``<core>_requantize_<i>``)."""
    for marker in ("_int8", "_requantize"):
        head, found, _ = node.name.rpartition(marker)
        if found:
            return head
    return node.name


def _keeping(check: Callable[[Graph, Match], str | None] | None,
             names: frozenset[str]) -> Callable[[Graph, Match], str | None]:
    def kept(graph: Graph, m: Match) -> str | None:
        core = m.node("core")
        if core.name in names:
            return f"{core.op} {core.name} is kept float: no selected backend runs its integer form"
        return None if check is None else check(graph, m)
    return kept
