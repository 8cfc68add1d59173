"""Register-tiling primitives: tile_accumulator and pack, their numbers (via the
interpreter), their loop nests, their traces and their preconditions."""

from __future__ import annotations

import pytest
from schedcheck import conv, matmul, same_numbers

from hetero.core.ir.tir import Allocate, Block, IfThenElse, Load, Select, Store, Var, const, walk
from hetero.core.ir.tir.visit import exprs_of
from hetero.core.schedule import Schedule, Trace
from hetero.errors import ScheduleError


def tiled_matmul(rows: int, lanes: int, packed: bool = True) -> Schedule:
    """matmul() (6x8 @ 8x5) split into rows x lanes tiles, W packed, accumulator tiled."""
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    i, j, _ = sch.get_loops(y)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, lanes])
    sch.reorder(j0, i0, i1, j1)
    if packed:
        sch.pack(y, "W", 1, lanes)
    sch.tile_accumulator(y, i1, j1)
    return sch


@pytest.mark.parametrize("rows, lanes", [(2, 5), (3, 4), (4, 2), (6, 5)])
def test_tiled_matmul_keeps_numbers_with_and_without_partial_tiles(rows: int, lanes: int) -> None:
    sch = tiled_matmul(rows, lanes)
    same_numbers(matmul(), sch.func)
    same_numbers(matmul(), sch.trace.apply(matmul()))


def test_tile_accumulator_moves_the_reduction_outside_the_tile() -> None:
    func = tiled_matmul(3, 4).func
    [acc] = [s for s in walk(func.body) if isinstance(s, Allocate) and s.buffer.scope == "local"]
    assert acc.buffer.shape == (3, 4)
    init, update, store = acc.body.stmts  # type: ignore[attr-defined]
    assert [init.var.name, init.body.var.name] == ["i_1_init", "j_1_init"]
    assert update.var.name == "r" and update.body.var.name == "i_1" and update.body.body.var.name == "j_1"
    # Only the store is guarded (5 columns in tiles of 4): the reduction computes whole tiles.
    assert not any(isinstance(s, IfThenElse) for s in walk(update))
    assert any(isinstance(s, IfThenElse) for s in walk(store))


def test_pack_lays_panels_out_lane_last_and_pads_with_zeros() -> None:
    sch = tiled_matmul(3, 4)
    packed = next(s for s in walk(sch.func.body) if isinstance(s, Block) and s.name == "W_packed")
    assert packed.writes.shape == (2, 8, 4)  # ceil(5 / 4) panels of 8 rows of 4 lanes
    [copy] = [s for s in walk(packed) if isinstance(s, Store)]
    assert isinstance(copy.value, Select) and copy.value.b == const(0.0, "float32")
    y = next(s for s in walk(sch.func.body) if isinstance(s, Block) and s.name == "Y")
    reads = [e for s in walk(y) if isinstance(s, Store) for e in exprs_of(s.value)
             if isinstance(e, Load) and e.buffer.name == "W_packed"]
    assert reads and all(r.indices == (Var("j_0"), Var("r"), Var("j_1")) for r in reads)


def test_tiled_conv_keeps_numbers() -> None:
    """The 1-d convolution: output channel as lanes (W packed along it), position as rows."""
    sch = Schedule(conv())
    y = sch.get_block("Y")
    o, x, c, k = sch.get_loops(y)
    o0, o1 = sch.split(o, [None, 2])
    x0, x1 = sch.split(x, [None, 3])
    sch.reorder(o0, x0, x1, o1)
    sch.pack(y, "W", 0, 2)
    sch.tile_accumulator(y, x1, o1)
    same_numbers(conv(), sch.func)


def test_trace_round_trips_through_json() -> None:
    sch = tiled_matmul(3, 4)
    again = Trace.from_json(sch.trace.to_json())
    assert [i.kind for i in again.instructions][-2:] == ["pack", "tile_accumulator"]
    same_numbers(matmul(), again.apply(matmul()))


def test_tile_loops_must_be_innermost() -> None:
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    i, j, _ = sch.get_loops(y)
    with pytest.raises(ScheduleError, match="innermost loops"):
        sch.tile_accumulator(y, i)


def test_tile_loops_must_be_serial() -> None:
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    i, j, _ = sch.get_loops(y)
    sch.parallel(j)
    with pytest.raises(ScheduleError, match="before setting loop kinds"):
        sch.tile_accumulator(y, j)


def test_tile_needs_a_scalar_accumulator() -> None:
    sch = tiled_matmul(3, 4, packed=False)
    y = sch.get_block("Y")
    j0, i0 = sch.get_loops(y)[:2]
    with pytest.raises(ScheduleError, match="one scalar local accumulator"):
        sch.tile_accumulator(y, i0)


def test_pack_needs_a_split_of_the_panel_width() -> None:
    sch = Schedule(matmul())
    with pytest.raises(ScheduleError, match="split that loop by 4"):
        sch.pack(sch.get_block("Y"), "W", 1, 4)


def test_pack_refuses_a_buffer_the_block_does_not_read() -> None:
    sch = Schedule(matmul())
    with pytest.raises(ScheduleError, match="does not read Z"):
        sch.pack(sch.get_block("Y"), "Z", 0, 2)

