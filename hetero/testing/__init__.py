"""The conformance suite for backend plugins: does a backend compute what hetero's ops mean?

It runs single-op cases of every canonical op (:mod:`hetero.testing.cases`: a
one-node graph, its inputs, the reference outputs and a dtype-aware tolerance)
through a backend's ``compile`` and compares what comes back, so a plugin author
learns which op, dtype, shape and attribute their backend gets wrong.
"""

from hetero.testing.cases import (
    OpCase,
    Tolerance,
    case_dtypes,
    compare_outputs,
    edge_case,
    example_case,
    op_cases,
)

__all__ = ["OpCase", "Tolerance", "case_dtypes", "compare_outputs", "edge_case", "example_case", "op_cases"]
