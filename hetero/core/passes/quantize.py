"""Post-training int8 quantisation: QuantizeLinear/DequantizeLinear pairs (QDQ) from a calibration.

Invariant established: every float activation that a quantisable node (an op in
``ops``) reads or writes passes through one ``QuantizeLinear -> DequantizeLinear`` pair
(per-tensor int8, asymmetric), shared by all of its consumers; every constant weight
of Conv, Gemm and MatMul is an int8 constant read through a ``DequantizeLinear``
(symmetric, per output channel), and every bias an int32 constant read through one
(scale ``x_scale * w_scale``). The graph still computes in float; what it computes is
the quantised model's numbers. A later pass (or a backend) recognises the
``DQ -> op -> Q`` units and runs them in integers.

The output is the QDQ format onnxruntime's ``quantize_static(quant_format=QDQ,
per_channel=True, activation_type=QInt8, weight_type=QInt8)`` writes, with its names
(``t_QuantizeLinear_Output``, ``w_quantized``, ...), and follows its conventions:

- Conv/Gemm/MatMul/Add followed by their only consumer Relu or Clip are not quantised in
  between: the pair goes after the activation, which thus fuses into the integer op
  (onnxruntime drops the activation altogether; hetero keeps it, which computes the
  same numbers, since the activation's range is what is quantised);
- MaxPool, Reshape, Flatten, Transpose, Squeeze and Unsqueeze only move or select
  values, so their output reuses their input's scale and zero point;
- every other quantised output (Concat's included) gets its own calibrated range;
- graph inputs and outputs stay float: a pair after an input, and before an output
  (which keeps its name: the op's own output is renamed ``t_QuantizeLinear_Input``).

A graph that is already QDQ is honoured: the pass refuses to quantise again the ops
whose nodes already read DequantizeLinear outputs, and otherwise leaves existing pairs
alone and reuses them.

>>> calib = calibrate(graph, samples)           # doctest: +SKIP
>>> qgraph = quantize(graph, calib)             # graph is unchanged  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.verify import verify
from hetero.core.quant.params import (
    ActivationParams, QuantizedTensor, activation_params, quantize_bias, quantize_weight,
)
from hetero.errors import QuantizationError

#: The ops the pass quantises unless told otherwise; every other op stays float and
#: reads DequantizeLinear outputs where its producer was quantised.
DEFAULT_OPS = frozenset({
    "Conv", "Gemm", "MatMul", "Relu", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool",
    "Add", "Mul", "Concat", "Reshape", "Flatten",
})
_WEIGHTED = frozenset({"Conv", "Gemm", "MatMul"})
_ACTIVATIONS = frozenset({"Relu", "Clip"})
#: Ops whose integer form clamps: an activation after them needs no pair in between.
_FUSES_ACTIVATION = frozenset({"Conv", "Gemm", "MatMul", "Add"})
_SAME_PARAMS = frozenset({"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"})
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})


def quantize(
    graph: Graph,
    calibration: Mapping[str, tuple[float, float]],
    *,
    ops: Iterable[str] = DEFAULT_OPS,
    per_channel: bool = True,
) -> Graph:
    """A QDQ-quantised copy of ``graph``; ``graph`` itself is not changed.

    ``calibration`` maps value names of ``graph`` to calibrated ``(min, max)`` ranges
    (see :func:`hetero.core.quant.calibrate`); every tensor the pass quantises needs
    one. ``ops`` names the ops to quantise (default :data:`DEFAULT_OPS`);
    ``per_channel=False`` quantises weights per tensor.
    """
    chosen_ops = frozenset(ops)
    _refuse_requantisation(graph, chosen_ops)
    g = graph.copy()
    _Quantizer(g, calibration, per_channel).run(
        [n for n in g.nodes if n.op in chosen_ops and _quantisable(n)]
    )
    g.sort()
    g.remove_unused_constants()
    return verify(g)


def _refuse_requantisation(graph: Graph, ops: frozenset[str]) -> None:
    done = sorted({n.op for n in graph.nodes if n.op in ops and _reads_dequantized(n)})
    if done:
        example = next(n for n in graph.nodes if n.op in done and _reads_dequantized(n))
        raise QuantizationError(
            f"graph {graph.name} is already quantised: its {', '.join(done)} nodes (such as "
            f"{example.name}) read DequantizeLinear outputs; quantise the float model instead, "
            f"or pass ops= without {', '.join(done)} to quantise only the rest"
        )


def _reads_dequantized(node: Node) -> bool:
    return node.op not in _QDQ and any(
        v is not None and v.producer is not None and v.producer.op == "DequantizeLinear"
        for v in node.inputs
    )


def _quantisable(node: Node) -> bool:
    return (len(node.outputs) == 1 and node.output.dtype == np.float32
            and not _reads_dequantized(node))


def _activation_inputs(node: Node) -> list[int]:
    """Indices of the operands quantised as activations (or, when constant, per tensor)."""
    if node.op in ("Add", "Mul", "Concat"):
        return list(range(len(node.inputs)))
    if node.op in ("Gemm", "MatMul") and not node.inputs[1].is_constant:
        return [0, 1]
    return [0]


def _weight_axis(node: Node, weight: Value) -> int:
    """The output-channel axis of a Conv, Gemm or MatMul weight."""
    if node.op == "Conv":
        return 0
    if node.op == "Gemm":
        return 0 if node.attrs["transB"] else 1
    return weight.type.rank - 1


class _Quantizer:
    """Rewrites its graph in place (the pass hands it a copy)."""

    def __init__(self, graph: Graph, calibration: Mapping[str, tuple[float, float]],
                 per_channel: bool) -> None:
        self.graph = graph
        self.calibration = calibration
        self.per_channel = per_channel
        # Calibrations name the tensors of the float graph; outputs get renamed on the way.
        self.original = {id(v): v.name for v in graph.values.values()}
        # The scale and zero-point constants behind each DequantizeLinear output we made.
        self.qparams: dict[int, tuple[ActivationParams, Value, Value]] = {}

    def run(self, nodes: list[Node]) -> None:
        chosen = {id(n) for n in nodes}
        # Outputs of Conv/Gemm/MatMul/Add whose only reader is an activation: no pair between.
        fused = {id(n.output) for n in nodes
                 if n.op in _FUSES_ACTIVATION and n.output not in self.graph.outputs
                 and len(n.output.users) == 1 and n.output.users[0].op in _ACTIVATIONS
                 and id(n.output.users[0]) in chosen}
        for node in nodes:
            for i in _activation_inputs(node):
                if id(node.inputs[i]) not in fused:
                    self._quantize_operand(node, i)
            if node.op in _WEIGHTED and node.inputs[1].is_constant:
                self._quantize_weight_and_bias(node)
            out = node.output
            if id(out) not in fused and not any(u.op == "QuantizeLinear" for u in out.users):
                self._quantize_output(node)

    # -- activations ------------------------------------------------------------------
    def _quantize_operand(self, node: Node, index: int) -> None:
        v = node.inputs[index]
        if v is None or v.dtype != np.float32:
            return
        if v.is_constant:
            self._replace_input(node, index, self._dequantize(
                quantize_weight(v.data, None), v.name, node.name))
        elif v.producer is None or v.producer.op != "DequantizeLinear":
            params = self._calibrated(v)
            if params is not None:
                self._insert_pair(v, params)

    def _quantize_output(self, node: Node) -> None:
        source = node.inputs[0]
        if node.op in _SAME_PARAMS and source is not None and id(source) in self.qparams:
            self._insert_pair(node.output, *self.qparams[id(source)])
        else:
            params = self._calibrated(node.output)
            if params is not None:
                self._insert_pair(node.output, params)

    def _calibrated(self, v: Value) -> ActivationParams | None:
        """``v``'s int8 parameters from its calibrated range; None for a range that is
        not finite (an attention mask of -inf): such a tensor stays float."""
        name = self.original[id(v)]
        if name not in self.calibration:
            raise QuantizationError(
                f"tensor {name!r} of graph {self.graph.name} has no calibrated range; calibrate "
                f"this same graph (hetero.core.quant.calibrate) before quantising it"
            )
        low, high = self.calibration[name]
        if not (np.isfinite(low) and np.isfinite(high)):
            return None
        try:
            return activation_params(low, high)
        except QuantizationError as exc:
            raise QuantizationError(f"tensor {name!r}: {exc}") from None

    def _insert_pair(self, v: Value, params: ActivationParams,
                     scale: Value | None = None, zero: Value | None = None) -> None:
        """Route every reader of ``v`` through a new QuantizeLinear -> DequantizeLinear."""
        g = self.graph
        base = v.name
        is_output = v in g.outputs
        if is_output:
            g.rename_value(v, g.unique_name(f"{base}_QuantizeLinear_Input"))
        if scale is None or zero is None:
            s, z = params.arrays()
            scale = g.add_constant(s, f"{base}_scale")
            zero = g.add_constant(z, f"{base}_zero_point")
        readers = list(dict.fromkeys(v.users))
        q = g.add_node("QuantizeLinear", [v, scale, zero], name=f"{base}_QuantizeLinear",
                       output_names=[f"{base}_QuantizeLinear_Output"])
        dq = g.add_node("DequantizeLinear", [q.output, scale, zero],
                        name=f"{base}_DequantizeLinear",
                        output_names=[f"{base}_DequantizeLinear_Output"])
        if is_output:
            # Only values must have unique names, so the output name is free even when a
            # node bears it (which would make add_node pick another).
            g.rename_value(dq.output, base)
        for reader in readers:
            reader.inputs = [dq.output if x is v else x for x in reader.inputs]
            dq.output.users += [reader] * sum(x is dq.output for x in reader.inputs)
        v.users = [q]
        g.outputs = [dq.output if x is v else x for x in g.outputs]
        self.qparams[id(dq.output)] = (params, scale, zero)

    # -- constants --------------------------------------------------------------------
    def _quantize_weight_and_bias(self, node: Node) -> None:
        weight = node.inputs[1]
        if weight.dtype != np.float32:
            return
        per_channel = self.per_channel and weight.type.rank >= 2
        axis = _weight_axis(node, weight) if per_channel else None
        qw = quantize_weight(weight.data, axis)
        self._replace_input(node, 1, self._dequantize(qw, weight.name, node.name))
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        x = node.inputs[0]
        if (bias is None or not bias.is_constant or bias.dtype != np.float32
                or id(x) not in self.qparams or not self._bias_fits(node, bias, qw)):
            return
        x_scale = self.qparams[id(x)][0].scale
        self._replace_input(node, 2, self._dequantize(
            quantize_bias(bias.data, x_scale, qw.scale), bias.name, node.name))

    @staticmethod
    def _bias_fits(node: Node, bias: Value, qw: QuantizedTensor) -> bool:
        """True if the bias adds one value per output channel straight onto x @ w."""
        channels = node.output.shape[1] if node.op == "Conv" else node.output.shape[-1]
        if bias.type.rank != 1 or bias.shape[0] != channels:
            return False
        if qw.axis is not None and qw.scale.size != channels:
            return False
        return node.op != "Gemm" or (node.attrs["alpha"] == 1.0 and node.attrs["beta"] == 1.0)

    def _dequantize(self, qt: QuantizedTensor, name: str, where: str) -> Value:
        """A DequantizeLinear of the int constant ``qt``, named after the float ``name``."""
        g = self.graph
        values = g.add_constant(qt.values, f"{name}_quantized")
        suffix = "_quantized_" if qt.values.dtype == np.int32 else "_"
        scale = g.add_constant(qt.scale, f"{name}{suffix}scale")
        zero = g.add_constant(qt.zero_point, f"{name}{suffix}zero_point")
        attrs = {"axis": qt.axis} if qt.axis is not None else {}
        dq = g.add_node("DequantizeLinear", [values, scale, zero], attrs,
                        name=f"{where}_{name}_DequantizeLinear",
                        output_names=[f"{name}_DequantizeLinear_Output"])
        return dq.output

    def _replace_input(self, node: Node, index: int, new: Value) -> None:
        old = node.inputs[index]
        node.inputs = node.inputs[:index] + [new] + node.inputs[index + 1:]
        old.users.remove(node)
        new.users.append(node)
