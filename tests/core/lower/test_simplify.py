"""simplify_indices: floor divisions and remainders that the loops' ranges decide are
replaced by their affine value, and every other one is kept; the function computes the
same elements either way (checked with the tensor-IR interpreter)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import Buffer, For, PrimFunc, Store, Var, walk
from hetero.core.ir.tir.expr import INDEX, Binary, Expr, Load
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.visit import exprs_of
from hetero.core.lower import lower_node
from hetero.core.lower.simplify import simplify_indices
from hetero.core.schedule.region import affine


def _copy(extents: tuple[int, ...], index: Callable[..., Expr]) -> PrimFunc:
    """``out[i...] = src[index(i...)]`` over loops of ``extents``, ``src`` flat."""
    loops = [Var(f"i{k}", INDEX) for k in range(len(extents))]
    src = Buffer("src", (int(np.prod(extents)) + 64,), np.dtype(np.float32))
    out = Buffer("out", extents, np.dtype(np.float32))
    body = Store(out, tuple(loops), Load(src, (index(*loops),), np.dtype(np.float32)))
    for var, extent in reversed(list(zip(loops, extents))):
        body = For(var, extent, body)
    return PrimFunc("copy", (src, out), body)


def _divisions(func: PrimFunc) -> int:
    return sum(isinstance(e, Binary) and e.op in ("floordiv", "mod")
               for s in walk(func.body) if isinstance(s, Store)
               for index in (*s.indices, s.value) for e in exprs_of(index))


def _same_elements(before: PrimFunc, after: PrimFunc) -> None:
    arrays = {"src": np.arange(before.params[0].shape[0], dtype=np.float32),
              "out": np.zeros(before.params[1].shape, np.float32)}
    np.testing.assert_array_equal(run_func(before, arrays)["out"], run_func(after, arrays)["out"])


def test_a_flat_offset_split_again_by_matching_strides_is_the_loop_variable() -> None:
    func = _copy((3, 4, 5), lambda a, b, c: ((a * 20 + b * 5 + c) // 5 % 4) * 7 + (a * 20 + b * 5 + c) % 5)
    simple = simplify_indices(func)
    assert _divisions(func) == 3 and _divisions(simple) == 0
    store = next(s for s in walk(simple.body) if isinstance(s, Store))
    i1, i2 = Var("i1", INDEX), Var("i2", INDEX)
    assert affine(store.value.indices[0]) == ({i1: 7, i2: 1}, 0)
    _same_elements(func, simple)


def test_a_division_the_ranges_do_not_decide_is_kept() -> None:
    # i1 * 3 + i2 spans 0..14 and crosses multiples of 4: the quotient varies.
    func = _copy((2, 5, 3), lambda a, b, c: (b * 3 + c) // 4 + a * 8)
    assert simplify_indices(func) is func


def test_a_constant_offset_carries_into_the_quotient() -> None:
    # (i0 * 8 + i1 + 13) // 8 = i0 + 1 + (i1 + 5) // 8 = i0 + 1 + (0 if i1 < 3 else 1): not decided.
    undecided = _copy((4, 5), lambda a, b: (a * 8 + b + 13) // 8)
    assert simplify_indices(undecided) is undecided
    # With i1 < 3, (i1 + 5) // 8 is always 0: the quotient is i0 + 1, the remainder i1 + 5.
    decided = _copy((4, 3), lambda a, b: (a * 8 + b + 13) // 8 * 10 + (a * 8 + b + 13) % 8)
    simple = simplify_indices(decided)
    assert _divisions(simple) == 0
    _same_elements(decided, simple)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(1, 30), st.integers(-40, 40),
       st.lists(st.integers(-12, 12), min_size=4, max_size=4))
def test_simplified_indices_read_the_same_elements(extents: list[int], k: int, shift: int,
                                                   coefs: list[int]) -> None:
    """Quotient and remainder of any affine offset (negative ones included: the IR's
    division is floored) read the same elements before and after."""
    def index(*loops: Var) -> object:
        offset = shift
        for v, c in zip(loops, coefs):
            offset = v * c + offset
        return ((offset // k) * 5 + offset % k) % 64

    func = _copy(tuple(extents), index)
    _same_elements(func, simplify_indices(func))


def test_a_reshape_that_adds_a_unit_axis_lowers_to_plain_indices() -> None:
    b = GraphBuilder("g")
    b.output(b.op("Reshape", b.input("x", (1, 3, 8, 8)), shape=(1, 3, 8, 8, 1)))
    assert _divisions(lower_node(b.build().nodes[0])) == 0
