"""Data movement on int8 tensors: Concat, Reshape, Flatten and Transpose as DMA boxes.

Each is a copy between two strided views of DRAM with the same box shape: load
the box through the source's strides, pass it through the vector unit into an
``out`` slot, store it through the destination's strides. Concat copies each
input into its slice of the output, except the inputs whose producers already wrote
them there (see :func:`~hetero.plugins.npu_sim.compiler.concat_views`); Transpose reads the source with permuted
strides; Reshape and Flatten read the source in logical row-major order and write
the output row-major (so its new shape needs no further layout).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from hetero.plugin import Node
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder, box_tiles
from hetero.plugins.npu_sim.isa import Buf, Copy


def emit_data(b: ProgramBuilder, node: Node) -> None:
    """Concat, Transpose, Reshape or Flatten."""
    x, y = b.loc(node.inputs[0]), b.locs[node.output.name]
    if node.op == "Concat":
        axis, offset = node.attrs["axis"], 0
        for value, placed in zip(node.inputs, in_place(node, b.locs)):
            src = b.loc(value)
            if not placed:
                move(b, src.addr, src.strides, y.addr + offset * y.strides[axis], y.strides, src.shape)
            offset += src.shape[axis]
    elif node.op == "Transpose":
        perm = node.attrs["perm"]
        move(b, x.addr, tuple(x.strides[p] for p in perm), y.addr, y.strides, y.shape)
    else:
        row_major = tuple(math.prod(x.shape[i + 1:]) for i in range(len(x.shape)))
        move(b, x.addr, x.strides, y.addr, row_major, x.shape)


def in_place(node: Node, locs: Mapping[str, Loc]) -> list[bool]:
    """For each input of the Concat ``node``: whether it already lies in its slice of the output
    (its Loc is that view of the output's), so there is nothing to copy."""
    y, axis, offset = locs[node.output.name], node.attrs["axis"], 0
    placed = []
    for value in node.inputs:
        placed.append(locs.get(value.name) == y.view(axis, offset, value.shape[axis]))
        offset += value.shape[axis]
    return placed


def move(b: ProgramBuilder, src: int, src_strides: tuple[int, ...], dst: int, dst_strides: tuple[int, ...],
         dims: tuple[int, ...]) -> None:
    """Copy the box ``dims`` from ``src`` to ``dst`` (byte strides per axis), tile by tile."""
    dims, src_strides, dst_strides = dims or (1,), src_strides or (1,), dst_strides or (1,)
    capacity = min(b.slot_size("inp"), b.slot_size("out"))
    for start, size in box_tiles(dims, capacity):
        count = math.prod(size)
        slot = b.begin_step()
        inp_base = b.slot_base("inp", slot)
        b.load(Buf.INP, inp_base, src + sum(s * st for s, st in zip(start, src_strides)), size, src_strides)
        b.start_compute()
        out_base = b.slot_base("out", b.begin_output())
        b.emit(Copy(Buf.OUT, out_base, Buf.INP, inp_base, count, tag=b.tag))
        b.end_step()
        b.store_output(out_base, dst + sum(s * st for s, st in zip(start, dst_strides)), size, dst_strides)
