"""Every canonical op has a tensor-IR lowering, so every graph can be compiled by a codegen backend."""

from __future__ import annotations

from hetero.core.ir.opdef import op_names
from hetero.core.lower import is_lowerable


def test_every_canonical_op_has_a_lowering() -> None:
    # hetero's int8 ops included: a region an integer backend declines falls back to the CPU.
    missing = [op for op in op_names() if not is_lowerable(op)]
    assert missing == []


def test_an_unknown_op_is_not_lowerable() -> None:
    assert not is_lowerable("NoSuchOp")
