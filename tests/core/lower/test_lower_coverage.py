"""Every canonical op has a tensor-IR lowering, so every graph can be compiled by a codegen backend."""

from __future__ import annotations

from hetero.core.ir.opdef import op_names
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.core.lower import is_lowerable

#: Canonical ops with no tensor-IR lowering: the hetero-internal int8 ops, which
#: backends that run integer arithmetic (npu_sim) take.
NOT_LOWERED = INTEGER_OPS


def test_every_canonical_op_has_a_lowering() -> None:
    missing = [op for op in op_names() if not is_lowerable(op)]
    assert missing == sorted(NOT_LOWERED)


def test_an_unknown_op_is_not_lowerable() -> None:
    assert not is_lowerable("NoSuchOp")
