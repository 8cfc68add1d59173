"""``shr``, the tensor IR's arithmetic shift right: ``floor(a / 2**b)`` on integers."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from hetero.core.ir.tir import Binary, compute, const, func_problems, lower, placeholder, run_func, shift_right


def test_literals_fold_and_a_zero_shift_is_the_operand() -> None:
    assert shift_right(const(-7, "int64"), const(1, "int64")) == const(-4, "int64")
    assert shift_right(const(5, "int32"), const(40, "int32")) == const(0, "int32")
    x = placeholder((1,), "int64", "X")[0]
    assert shift_right(x, 0) is x


def test_floats_are_refused_by_the_builder_and_the_verifier() -> None:
    with pytest.raises(TypeError, match="shifts take integers"):
        shift_right(const(1.0, "float32"), const(1.0, "float32"))
    a = placeholder((2,), "float32", "A")
    for name in ("shr", "shl", "bit_and", "bit_or", "bit_xor"):
        y = compute((2,), functools.partial(lambda op, i: Binary(op, a[i], a[i], a.dtype), name), "Y")
        assert any(f"{name} of float32: shifts and bitwise ops take integers" in p
                   for p in func_problems(lower("f", [a], [y])))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16"])
def test_the_interpreter_floors_for_every_amount(dtype: str) -> None:
    info = np.iinfo(dtype)
    values = np.array([info.min, info.min + 1, -5 if info.min else 5, 0, 1, 7, info.max], dtype)
    amounts = np.array([0, 1, 2, info.bits - 1, info.bits, info.bits + 3, 3], dtype)
    a, b = placeholder((7,), dtype, "A"), placeholder((7,), dtype, "B")
    y = compute((7,), lambda i: shift_right(a[i], b[i]), "Y")
    got = run_func(lower("shr", [a, b], [y]), {"A": values, "B": amounts, "Y": np.zeros(7, dtype)})["Y"]
    want = [int(v) // 2 ** int(s) for v, s in zip(values, amounts)]
    np.testing.assert_array_equal(got, np.array(want, dtype))
