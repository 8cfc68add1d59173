"""Ops on bfloat16 and the narrow types, lowered through a wider type.

bfloat16, the float8 variants, float4, int4 and int2 are storage types in the tensor
IR: a lowering of an arithmetic or data-movement op never sees them. Its inputs are
widened as they are read (the narrow floats to float32, the narrow integers to int8
or uint8), the op is lowered in the wide type, and each narrow output is the wide
result converted back as it is stored, so every node rounds once, to nearest even,
as ml_dtypes' numpy arithmetic does per op (float32 inside, one rounding out).
Widening is exact and so is narrowing a value that came from the narrow type, so
data movement (Reshape, Transpose, Gather, Concat, ...) moves the values unchanged.

The ops that convert between types (Cast, QuantizeLinear, DequantizeLinear) read
and write the narrow types themselves: their rounding, saturation and ranges depend
on the narrow type, not on a wide one; so does BitCast, which reads their bits. What a conversion to or from a narrow type
means is the tensor IR's ``cast``, which follows ml_dtypes (``numpy.astype``).
"""

from __future__ import annotations

from collections.abc import Callable
import inspect
from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, compute
from hetero.core.ir.tir.expr import Expr, cast
from hetero.core.ir.types import BFLOAT16, NARROW_FLOAT_DTYPES, NARROW_INT_DTYPES, TensorType

#: Ops whose lowerings take and give the narrow types as they are.
CONVERTING_OPS = frozenset({"Cast", "QuantizeLinear", "DequantizeLinear", "BitCast"})


def wide_dtype(dtype: np.dtype) -> np.dtype | None:
    """The type an op on ``dtype`` computes in, or None when ``dtype`` is not narrow."""
    if dtype == BFLOAT16 or dtype in NARROW_FLOAT_DTYPES:
        return np.dtype(np.float32)
    if dtype in NARROW_INT_DTYPES:
        return np.dtype(np.int8 if dtype.name.startswith("int") else np.uint8)
    return None


def _converted(t: Tensor, dtype: np.dtype, name: str, inline: bool) -> Tensor:
    def body(*idx: Expr) -> Expr:
        return cast(t[idx], dtype)

    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"i{k}", inspect.Parameter.POSITIONAL_ONLY) for k in range(len(t.shape))])
    return compute(t.shape, body, name, dtype, inline)


def lower_widened(op: str, lowering: Callable[..., list[Tensor]], inputs: list[Tensor | None],
                  attrs: dict[str, Any], out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """``lowering`` of ``op``, through the wide types where a narrow type is involved."""
    narrow_in = any(t is not None and wide_dtype(t.dtype) is not None for t in inputs)
    narrow_out = any(wide_dtype(t.dtype) is not None for t in out_types)
    if op in CONVERTING_OPS or not (narrow_in or narrow_out):
        return lowering(inputs, attrs, out_types, names)
    wide_inputs = [
        t if t is None or wide_dtype(t.dtype) is None
        else _converted(t, wide_dtype(t.dtype), f"{names[0]}_in{k}", inline=True)
        for k, t in enumerate(inputs)]
    wide_types = [TensorType(t.shape, wide_dtype(t.dtype) or t.dtype) for t in out_types]
    wide_names = [f"{n}_wide" if wide_dtype(t.dtype) is not None else n
                  for n, t in zip(names, out_types)]
    results = lowering(wide_inputs, attrs, wide_types, wide_names)
    outs = []
    for t, want, name in zip(results, out_types, names):
        if wide_dtype(want.dtype) is None:
            outs.append(t)
            continue
        # The wide result lands in the narrowing store (a reduction too: the store is
        # its epilogue); a stage written as statements stays a buffer.
        if t.body is not None:
            t.inline = True
        outs.append(_converted(t, want.dtype, name, inline=False))
    return outs
