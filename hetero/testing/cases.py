"""Single-op test cases for every canonical op: what the conformance suite runs on a backend.

Each case is a verified one-node graph, its inputs, and the outputs of the op's one
definition (``OpDef.reference`` through :func:`hetero.run_reference`), with the
tolerance a correct backend must meet. :func:`op_cases` is a hypothesis strategy
over an op's dtypes, shapes and attributes; :func:`example_case` is one fixed small
case for quick checks. The generators live in ``cases_elementwise``, ``cases_nn``,
``cases_tensor`` and ``cases_qint``; each draws shapes of at most a few hundred elements and values
on which the op is well conditioned (positive inputs for Log and Sqrt, divisors
away from zero, quantiser inputs away from rounding ties), so a disagreement is a
backend's fault, not the case's.

Edge values: drawn cases sometimes, and the fixed :func:`edge_case` always, take the
op's edge values: NaN in float inputs of the max/min family (Max, Min, Relu, Clip,
the piecewise-linear activations), the pools, the reductions and the comparisons,
where the reference propagates NaN (or compares false); and for Gather a run-time
index out of range, where the reference raises InputError and a backend must too
(the case's ``error``). A backend that drops NaN or clamps an index fails them.

The ``dtype`` of a case is that of the op's main input: its first, except for
Where (its X; the condition is always bool) and ConstantOfShape (its fill value).

Tolerances (``|got - want| <= atol + rtol·|want|``, eps the dtype's machine epsilon):

- integer and bool outputs, and ops that only move, compare or select values
  (Reshape, MaxPool, Relu, Cast, ...): exact.
- one or a few correctly rounded operations (Add, Div, Sqrt, LeakyRelu,
  DequantizeLinear): 2-4 eps relative; where an intermediate can cancel
  (HardSigmoid's ``alpha·x + beta``, BatchNormalization's ``x - mean``) also that
  many eps of the largest intermediate, absolute.
- transcendentals (Exp, Log, Tanh, Sigmoid, Erf, Gelu, Pow, Softmax, LRN): 8 eps
  relative and absolute, since libm-style implementations promise a few ulps and an
  output near zero (tanh near 0, log near 1) carries the input's absolute error.
- sums of k terms (MatMul, Gemm, Conv, ReduceSum/Mean, AveragePool,
  LayerNormalization): ``k · eps · Σ|terms|`` absolute, the bound on any order of
  summation (Higham, *Accuracy and Stability of Numerical Algorithms*, 2.2), with
  Σ|terms| bounded by k times the largest product of operand magnitudes, plus
  2 eps relative. The references accumulate in float64 and round once, so the whole
  bound is the backend's; it holds for a float16 backend that accumulates in float16.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.ir.opdef import op_names
from hetero.core.ir.types import short_name
from hetero.errors import UnknownOpError
from hetero.testing import (  # noqa: F401 - they register their generators
    cases_elementwise,
    cases_indexing,
    cases_layout,
    cases_linalg,
    cases_nn,
    cases_qint,
    cases_resize,
    cases_signal,
    cases_rnn,
    cases_sample,
    cases_tensor,
)
from hetero.testing.cases_base import (
    GENERATORS,
    Draw,
    Generator,
    HypothesisDraw,
    SeededDraw,
    Tolerance,
)

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["REGRESSIONS", "OpCase", "Tolerance", "case_dtypes", "compare_outputs", "edge_case", "example_case", "op_cases",
           "regression_cases"]


@dataclass(frozen=True)
class OpCase:
    """One op on concrete inputs: the graph, its inputs, the reference outputs, the tolerance.

    When ``error`` is set the reference raises on these inputs (an index out of
    range): ``expected`` is empty, ``error_message`` is the reference's, and a backend
    must raise ``error`` too rather than return values.
    """

    op: str
    dtype: str
    graph: Graph
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    tolerance: Tolerance
    error: type[Exception] | None = None
    error_message: str = ""

    def describe(self) -> str:
        """One line naming the op, the dtype, each operand's type and the attributes."""
        node = self.graph.nodes[0]
        operands = ", ".join(
            "-" if v is None else
            f"{v.name}: {short_name(v.dtype)}{list(v.shape)}{' const' if v.is_constant else ''}"
            for v in node.inputs
        )
        attrs = ", ".join(f"{k}={_attr_text(v)}" for k, v in sorted(node.attrs.items()))
        return f"{self.op} [{self.dtype}] ({operands}) {{{attrs}}}"


def _attr_text(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"{short_name(value.dtype)}{list(value.shape)} {value.reshape(-1).tolist()}"
    if isinstance(value, np.dtype):
        return value.name
    return repr(value)


def case_dtypes(op: str) -> tuple[str, ...]:
    """The dtypes of ``op``'s main input that the generator covers, the usual one first."""
    return _generator(op)[0]


def op_cases(op: str, dtype: str | None = None) -> SearchStrategy[OpCase]:
    """A hypothesis strategy of cases of ``op``, over all its dtypes or only ``dtype``."""
    from hypothesis import strategies as st

    dtypes = _dtypes(op, dtype)

    @st.composite
    def cases(draw: st.DrawFn, chosen: str) -> OpCase:
        return _make(op, chosen, HypothesisDraw(draw))

    return st.sampled_from(dtypes).flatmap(cases)


def example_case(op: str, dtype: str | None = None) -> OpCase:
    """One small case of ``op`` (in ``dtype``, or its usual dtype), the same on every call."""
    chosen = _dtypes(op, dtype)[0]
    return _make(op, chosen, SeededDraw(zlib.crc32(f"{op}:{chosen}".encode())))


def edge_case(op: str, dtype: str | None = None) -> OpCase | None:
    """The fixed case of ``op`` that takes its edge values (NaN inputs, an index out of
    range: see :meth:`Draw.edge`), or None when the op has none in ``dtype``. The
    suite runs it before the drawn cases, so every run meets the edges."""
    chosen = _dtypes(op, dtype)[0]
    draw = SeededDraw(zlib.crc32(f"{op}:{chosen}:edge".encode()), edges=True)
    case = _make(op, chosen, draw)
    return case if draw.took_edge else None


#: Draws that once caught a backend's bug, kept so every run meets them again, whatever
#: its seed: (op, dtype) to the seeds of :class:`SeededDraw` that make them. Each is
#: described where it was found; ``tests/testing/test_cases.py`` checks that each seed
#: still makes the case it names.
REGRESSIONS: dict[tuple[str, str], tuple[int, ...]] = {
    # A one-pixel-wide axis, nearest, reflection, align_corners: the source coordinate
    # was computed and never read, and fpga_hls's C simulation refused the unused variable.
    ("GridSample", "int8"): (46,),
    ("GridSample", "bool"): (46,),
    ("GridSample", "float32"): (172,),
}


def regression_cases(op: str, dtype: str) -> list[OpCase]:
    """The kept draws of ``op`` in ``dtype`` (:data:`REGRESSIONS`), run before the drawn ones."""
    return [_make(op, dtype, SeededDraw(seed)) for seed in REGRESSIONS.get((op, dtype), ())]


def compare_outputs(case: OpCase, got: Mapping[str, np.ndarray]) -> str | None:
    """None if every expected output is in ``got`` with its dtype, shape and values
    within tolerance; otherwise a message naming the case and the first bad output."""
    for name, want in case.expected.items():
        where = f"{case.describe()}: output {name!r}"
        if name not in got:
            return f"{where} is missing (got {sorted(got)})"
        array = np.asarray(got[name])
        if array.dtype != want.dtype or array.shape != want.shape:
            return (f"{where} is {short_name(array.dtype)}{list(array.shape)}, expected "
                    f"{short_name(want.dtype)}{list(want.shape)}")
        problem = case.tolerance.check(array, want)
        if problem is not None:
            return f"{where}: {problem}"
    return None


def _generator(op: str) -> tuple[tuple[str, ...], Generator]:
    if op not in GENERATORS:
        if op in op_names():
            raise UnknownOpError(f"hetero.testing has no case generator for the canonical op {op!r}; "
                                 "add one to a hetero.testing.cases_* module")
        raise UnknownOpError(f"{op!r} is not a canonical op: the cases cover {sorted(GENERATORS)}")
    return GENERATORS[op]


def _dtypes(op: str, dtype: str | None) -> tuple[str, ...]:
    dtypes = case_dtypes(op)
    if dtype is None:
        return dtypes
    name = np.dtype(dtype).name
    if name not in dtypes:
        raise UnknownOpError(f"no {op} cases in dtype {name}: they cover {list(dtypes)}")
    return (name,)


def _make(op: str, dtype: str, draw: Draw) -> OpCase:
    """Build the one-node graph of the spec ``op``'s generator draws, and run the reference."""
    spec = _generator(op)[1](op, draw, np.dtype(dtype))
    b = GraphBuilder(f"{op.lower()}_case")
    operands = [
        None if o is None else b.constant(o.array, o.name) if o.constant
        else b.input(o.name, o.array.shape, o.array.dtype)
        for o in spec.operands
    ]
    result = b.op(op, *operands, name=op.lower(), **spec.attrs)
    b.output(*(result if isinstance(result, tuple) else (result,)))
    graph = b.build()
    inputs = {o.name: o.array for o in spec.operands if o is not None and not o.constant}
    if spec.error is None:
        return OpCase(op, dtype, graph, inputs, run_reference(graph, inputs), spec.tolerance)
    try:
        run_reference(graph, inputs)
    except spec.error as exc:
        return OpCase(op, dtype, graph, inputs, {}, spec.tolerance, spec.error, str(exc))
    raise AssertionError(f"the {op} generator promised a {spec.error.__name__} from the reference, "
                         "which computed the case instead")
