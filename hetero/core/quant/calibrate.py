"""Calibration: the range of every float tensor of a graph over sample inputs.

:func:`calibrate` runs the graph with the reference executor on each sample, keeping
every intermediate, and feeds each float tensor to a range method:

- :class:`MinMax`: the smallest and largest value seen over all samples (onnxruntime's
  default). Exact, but one outlier stretches the range and costs every other value
  resolution.
- :class:`Percentile`: the range that holds ``percentile`` % of all values seen, so
  rare outliers are clipped. It is computed with ``np.percentile`` over the values of
  all samples together rather than from a histogram: exact instead of binned, at the
  price of holding each tensor's values until the end (budget calibration sets
  accordingly). Two-sided by default, cutting ``(100 - percentile) / 2`` % off each
  end as onnxruntime's non-symmetric percentile does; ``symmetric=True`` takes the
  percentile of ``|x|`` and returns ``(-t, t)``, as onnxruntime does with
  ``CalibTensorRangeSymmetric``.

The result, a :class:`Calibration`, maps value names to ``(min, max)`` and saves to JSON.

>>> calib = calibrate(graph, [{"x": x0}, {"x": x1}], Percentile(99.99))  # doctest: +SKIP
>>> calib.save("calib.json"); Calibration.load("calib.json")["x"]      # doctest: +SKIP
(-3.2, 3.1)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sized
import json
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hetero.core import progress
from hetero.core.exec.reference import run_reference
from hetero.core.ir.graph import Graph
from hetero.errors import QuantizationError

_FORMAT = "hetero-calibration"


class Calibration(Mapping[str, tuple[float, float]]):
    """Calibrated ranges by value name: ``calibration[name] == (min, max)``.

    ``method`` records how the ranges were found (for reports; it does not change how
    they are used).
    """

    def __init__(self, ranges: Mapping[str, tuple[float, float]], method: str = "") -> None:
        self._ranges = {name: (float(lo), float(hi)) for name, (lo, hi) in ranges.items()}
        self.method = method
        for name, (lo, hi) in self._ranges.items():
            if not lo <= hi:
                raise QuantizationError(f"calibration of {name!r}: min {lo} exceeds max {hi}")

    def __getitem__(self, name: str) -> tuple[float, float]:
        return self._ranges[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    def __repr__(self) -> str:
        return f"<Calibration {self.method or 'ranges'}: {len(self)} tensors>"

    def to_json(self) -> str:
        """The calibration as a JSON document (``{"format", "method", "ranges"}``)."""
        return json.dumps({"format": _FORMAT, "method": self.method,
                           "ranges": {n: [lo, hi] for n, (lo, hi) in self._ranges.items()}},
                          indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = "calibration") -> Calibration:
        """Read what :meth:`to_json` wrote; QuantizationError naming ``source`` otherwise."""
        try:
            doc = json.loads(text)
            if doc.get("format") != _FORMAT:
                raise ValueError(f"its format is {doc.get('format')!r}, not {_FORMAT!r}")
            ranges = {str(n): (float(lo), float(hi)) for n, (lo, hi) in doc["ranges"].items()}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise QuantizationError(
                f"{source} is not a hetero calibration ({exc}); write it with Calibration.save"
            ) from None
        return cls(ranges, str(doc.get("method", "")))

    def save(self, path: str | Path) -> None:
        """Write the calibration to ``path`` as JSON."""
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a calibration that :meth:`save` wrote."""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise QuantizationError(
                f"cannot read calibration file {path}: {exc.strerror}"
            ) from None
        return cls.from_json(text, source=f"calibration file {path}")


class RangeMethod(Protocol):
    """How ranges are found: ``observe`` each tensor of each sample, then ``ranges()``."""

    name: str

    def observe(self, tensor: str, values: np.ndarray) -> None: ...

    def ranges(self) -> dict[str, tuple[float, float]]: ...


class MinMax:
    """The exact minimum and maximum over all samples."""

    name = "minmax"

    def __init__(self) -> None:
        self._ranges: dict[str, tuple[float, float]] = {}

    def observe(self, tensor: str, values: np.ndarray) -> None:
        """Widen ``tensor``'s range to include ``values``."""
        lo, hi = float(values.min()), float(values.max())
        if tensor in self._ranges:
            old_lo, old_hi = self._ranges[tensor]
            lo, hi = min(lo, old_lo), max(hi, old_hi)
        self._ranges[tensor] = (lo, hi)

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Every observed tensor's (min, max)."""
        return dict(self._ranges)


class Percentile:
    """The range holding ``percentile`` % of the values of all samples (see the module doc)."""

    def __init__(self, percentile: float = 99.99, symmetric: bool = False) -> None:
        if not 0.0 < percentile <= 100.0:
            raise QuantizationError(f"percentile {percentile} is outside (0, 100]; use e.g. 99.99")
        self.percentile = percentile
        self.symmetric = symmetric
        self.name = f"percentile({percentile:g}{', symmetric' if symmetric else ''})"
        self._values: dict[str, list[np.ndarray]] = {}

    def observe(self, tensor: str, values: np.ndarray) -> None:
        """Hold on to ``values`` (flattened) for the final percentile."""
        self._values.setdefault(tensor, []).append(np.asarray(values, np.float32).ravel())

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Every observed tensor's percentile range."""
        out = {}
        for tensor, chunks in self._values.items():
            values = np.concatenate(chunks)
            if self.symmetric:
                t = float(np.percentile(np.abs(values), self.percentile))
                out[tensor] = (-t, t)
            else:
                cut = (100.0 - self.percentile) / 2
                lo, hi = np.percentile(values, [cut, 100.0 - cut])
                out[tensor] = (float(lo), float(hi))
        return out


def calibrate(
    graph: Graph, samples: Iterable[Mapping[str, Any]], method: RangeMethod | None = None
) -> Calibration:
    """Ranges of every float tensor of ``graph`` (inputs and node outputs) over ``samples``.

    Each sample maps the graph's input names to arrays, as :func:`run_reference` takes
    them. ``method`` defaults to :class:`MinMax`.
    """
    method = MinMax() if method is None else method
    floats = {v.name for v in graph.inputs if v.dtype.kind == "f"}
    floats |= {v.name for n in graph.nodes for v in n.outputs if v.dtype.kind == "f"}
    count = 0
    for sample in samples:
        progress.step("calibrate", count + 1, len(samples) if isinstance(samples, Sized) else 0)
        values = run_reference(graph, sample, keep=True)
        for name in floats:
            array = values[name] if name in values else np.asarray(sample[name])
            if array.size:
                method.observe(name, array)
        count += 1
    progress.end("calibrate")
    if count == 0:
        raise QuantizationError(f"calibrating graph {graph.name} needs at least one sample input")
    return Calibration(method.ranges(), method.name)
