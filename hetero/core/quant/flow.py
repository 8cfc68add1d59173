"""Quantisation in the compile flow: calibrate and quantise, then lower for integer backends.

Two steps, each Graph → Graph, that the compile driver
(:class:`~hetero.core.compiler.Session`) runs after the graph passes and before
partitioning (:func:`prepare_for_targets`):

- :func:`quantize_model` (only when the user asks, ``quantize=``): calibrate on
  sample inputs (or take a :class:`~hetero.core.quant.calibrate.Calibration`
  computed before) and write QDQ, as onnxruntime's static quantiser does;
- :func:`lower_for_backends` (always; a float graph passes unchanged): where a
  selected backend computes in int8 (it declares hetero's integer ops), the QDQ
  units it would take become integer ops (:func:`lower_qdq_where`), so that the
  partitioner sees ``QConv`` where an NPU can run one. A unit no such backend takes
  stays float QDQ, which every backend runs. A model that arrives quantised (QDQ
  from onnxruntime's quantiser) goes through the same lowering. A backend whose
  ``supports`` raises refuses the node, as in the partitioner's annotation (both ask
  through :func:`~hetero.core.plugin.support.ask`), and the error is reported as a
  :class:`~hetero.core.plugin.manager.PluginWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.core.passes.lower_qdq import lower_qdq_where, unit_of
from hetero.core.passes.quantize import quantize
from hetero.core.plugin.backend import Backend
from hetero.core.plugin.manager import PluginWarning
from hetero.core.plugin.support import ask
from hetero.core.plugin.target import Target, as_target
from hetero.core.quant.calibrate import Calibration, MinMax, Percentile, RangeMethod, calibrate
from hetero.errors import QuantizationError, did_you_mean

#: Calibration methods by name, as ``hetero.compile(calibration_method=...)`` and the CLI take them.
METHODS: dict[str, type[RangeMethod]] = {"minmax": MinMax, "percentile": Percentile}


def quantize_model(
    graph: Graph,
    data: Calibration | Sequence[Mapping[str, Any]],
    method: str = "minmax",
) -> Graph:
    """``graph`` quantised to int8 QDQ, calibrated on ``data`` (sample inputs) with ``method``.

    ``data`` may also be a ready :class:`Calibration`, whose ranges are used as they are.
    """
    if isinstance(data, Calibration):
        return quantize(graph, data)
    if method not in METHODS:
        raise QuantizationError(f"unknown calibration method {method!r}{did_you_mean(method, METHODS)}; "
                                f"choose one of {', '.join(METHODS)}")
    if isinstance(data, Mapping):
        raise QuantizationError(
            f"quantize= takes a list of sample inputs (each a dict of input name to array) or a "
            f"Calibration; got one dict: wrap it in a list to calibrate {graph.name} on one sample")
    return quantize(graph, calibrate(graph, data, METHODS[method]()))


def lower_for_backends(graph: Graph, backends: Sequence[Target | Backend]) -> Graph:
    """The QDQ units of ``graph`` that an integer backend among ``backends`` takes, as integer ops.

    A ``supports`` that raises refuses the node (its unit stays float QDQ); each
    backend's errors are reported once per message, as a PluginWarning naming the
    backend, the error and the units it kept float. A Backend given instead of a
    Target is bound to its default options.
    """
    backends = [as_target(b) for b in backends]
    takers = [b for b in backends if INTEGER_OPS & set(b.backend.supported_ops)]
    if not takers or not any(n.op == "DequantizeLinear" for n in graph.nodes):
        return graph
    raised: dict[tuple[str, str], dict[str, None]] = {}

    def accept(node: Node) -> bool:
        for b in takers:
            def record(reason: str, backend: str = b.name) -> None:
                raised.setdefault((backend, reason), {})[unit_of(node)] = None
            if ask(b, node, record).ok:
                return True
        return False

    lowered = lower_qdq_where(graph, accept)
    for (backend, reason), units in raised.items():
        names = list(units)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        warnings.warn(f"backend {backend}: quantisation's lowering of {graph.name} asked it about "
                      f"the integer form of {len(names)} unit(s) ({shown}) and {reason}; that counts "
                      "as a refusal, so those units stay float QDQ: fix or update the plugin",
                      PluginWarning, stacklevel=2)
    return lowered


def prepare_for_targets(
    graph: Graph,
    backends: Sequence[Target | Backend],
    fallback: str | None,
    quantize: Calibration | Sequence[Mapping[str, Any]] | None = None,
    method: str = "minmax",
) -> Graph:
    """``graph`` quantised when ``quantize`` is given, then lowered for the integer backends
    among ``backends`` (the fallback, which runs the float QDQ, counts only where its
    target declares ``computes_int8``)."""
    if quantize is not None:
        graph = quantize_model(graph, quantize, method)
    targets = [as_target(b) for b in backends]
    return lower_for_backends(graph, [t for t in targets
                                      if t.name != fallback or t.declarations.computes_int8])
