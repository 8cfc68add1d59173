"""npu_sim's analytic cost model: a region's cycles from each node's plan, without compiling it.

The partitioner asks :meth:`~hetero.plugins.npu_sim.backend.NpuSimBackend.estimate` about
every node and every candidate region, so this model emits no instruction and simulates
nothing: it follows each emitter's tiling in closed form, with the cycle model's per-
instruction costs (:mod:`~hetero.plugins.npu_sim.cycles`), and operands laid out in DRAM as
:func:`~hetero.plugins.npu_sim.compiler.lower_graph` would lay them out.

- QConv and QMatMul: :func:`~hetero.plugins.npu_sim.compiler.conv_plan.plan_cost`, the conv
  compiler's own estimate of the tiling it picks.
- QAdd, QMul, Requantize, pooling, Concat, Reshape, Flatten, Transpose: a step's DMA
  (bytes over the DMA rate, latency, one extra cycle per DRAM run), its vector work
  (elements over the lanes, a start-up per instruction) and its store, as a pipeline of
  equal steps where the slowest engine sets the pace.

Each node's code starts behind a DRAM barrier (its loads wait for the previous node's
stores), so a region's cycles are the sum of its nodes'. A Concat costs only the copies
of the inputs its producers could not store in place, and nothing (not even the barrier,
since it emits no code) when they all could.

Example::

    >>> cycles = region_cycles(graph, NpuConfig())
    >>> NpuConfig().cycles_to_seconds(cycles)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from hetero.plugin import Graph, Node, PluginError
from hetero.plugins.npu_sim.compiler import layout
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder, row_major
from hetero.plugins.npu_sim.compiler.conv_plan import plan_cost, window_extent
from hetero.plugins.npu_sim.compiler.data import in_place
from hetero.plugins.npu_sim.compiler.vector import pool_tiling
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.cycles import dma_runs

# SIGNAL/WAIT cycles per step, per engine, of the step protocol (builder.py).
_LOAD_SYNC, _COMPUTE_SYNC, _STORE_SYNC = 2, 4, 2
# Vector instructions after the widening copies, per elementwise op (vector.py's _arithmetic).
_ARITHMETIC = {"QAdd": 5, "QMul": 3, "Requantize": 0}
# Bytes of one requantisation triplet (bias, multiplier, shift as int32).
_PARAM_BYTES = 12


def region_cycles(graph: Graph, config: NpuConfig, *, double_buffer: bool = True) -> int:
    """Estimated cycles of ``graph`` compiled for ``config``: the sum of its nodes' :func:`node_cycles`.

    Raises :class:`~hetero.errors.PluginError` where compiling would fail (a node that
    fits no tiling) or for an op the compiler does not lower.
    """
    locs = value_locs(graph)
    return sum(node_cycles(node, config, locs, double_buffer=double_buffer) for node in graph.nodes)


def value_locs(graph: Graph) -> dict[str, Loc]:
    """The DRAM layout (address 0) :func:`lower_graph` gives every value ``graph``'s nodes read or write."""
    locs = layout(graph, lambda value, perm: Loc(0, tuple(value.shape), perm))
    for node in graph.nodes:
        for value in node.inputs:
            # A constant read as an activation gets a row-major segment.
            if value is not None and value.name not in locs:
                locs[value.name] = Loc(0, tuple(value.shape), row_major(len(value.shape)))
    return locs


def node_cycles(node: Node, config: NpuConfig, locs: Mapping[str, Loc], *, double_buffer: bool = True) -> int:
    """Estimated cycles of one node's code, its operands laid out as ``locs`` says."""
    b = ProgramBuilder(config, double_buffer=double_buffer)
    barrier = 2
    if node.op == "Concat" and all(in_place(node, locs)):
        return 0
    if node.op in ("QConv", "QMatMul"):
        return barrier + plan_cost(node, config, locs[node.inputs[0].name], locs[node.output.name],
                                   double_buffer=double_buffer)
    if node.op in _ARITHMETIC:
        return barrier + _elementwise(b, node, locs)
    if node.op in ("MaxPool", "QAveragePool"):
        return barrier + _pool(b, node, locs)
    if node.op in ("Concat", "Reshape", "Flatten", "Transpose"):
        return barrier + _data(b, node, locs)
    raise PluginError(f"npu_sim: node {node.name!r} is a {node.op}, which the npu_sim compiler does not lower")


def _dma(config: NpuConfig, nbytes: int, runs: int) -> int:
    """A LOAD or STORE's cycles (cycles.py's formula)."""
    return (config.dma_latency_cycles + math.ceil(nbytes / config.dma_bytes_per_cycle)
            + config.dma_run_cycles * (runs - 1))


def _vector(config: NpuConfig, elements: int) -> int:
    """A vector, copy, requantise or pooling instruction over ``elements`` reads."""
    return config.vector_startup_cycles + math.ceil(elements / config.vector_lanes)


def _pipeline(steps: int, load: int, compute: int, store: int) -> int:
    """``steps`` equal steps on the three engines: the slowest sets the pace; the first load and
    the last compute and store are the fill and drain."""
    return (steps - 1) * max(load, compute, store) + load + compute + store


def _box(dims: tuple[int, ...], capacity: int) -> tuple[int, tuple[int, ...]]:
    """How :func:`~hetero.plugins.npu_sim.compiler.builder.box_tiles` splits ``dims``: the number
    of tiles and the size of a whole one."""
    inner = 1
    for axis in range(len(dims) - 1, -1, -1):
        if inner * dims[axis] > capacity:
            chunk = min(max(1, capacity // inner), dims[axis])
            tiles = math.prod(dims[:axis]) * -(-dims[axis] // chunk)
            return tiles, (1,) * axis + (chunk,) + dims[axis + 1:]
        inner *= dims[axis]
    return 1, dims


def _elementwise(b: ProgramBuilder, node: Node, locs: Mapping[str, Loc]) -> int:
    """QAdd, QMul, Requantize as :func:`~hetero.plugins.npu_sim.compiler.vector.emit_elementwise` tiles them."""
    cfg, y, a = b.config, locs[node.output.name], node.attrs
    operands = [locs[v.name] for v in node.inputs if v is not None]
    order = sorted(range(len(y.shape)), key=lambda ax: -y.strides[ax])
    channels = 1
    if node.op == "Requantize" and max(len(a["multiplier"]), len(a["shift"])) > 1:
        order = [ax for ax in order if ax != a["axis"]] + [a["axis"]]
        channels = y.shape[a["axis"]]
    dims = tuple(y.shape[ax] for ax in order) or (1,)
    capacity = min(b.slot_size("inp") // len(operands), b.slot_size("out"), b.slot_size("acc") // len(operands))
    tiles, size = _box(dims, capacity)
    count = math.prod(size)
    load = _LOAD_SYNC + _dma(cfg, _PARAM_BYTES * channels, 1)
    for x in operands:
        lead = len(y.shape) - len(x.shape)
        full = [0] * lead + [st if d != 1 else 0 for st, d in zip(x.strides, x.shape)]
        load += _dma(cfg, count, dma_runs(size, tuple(full[ax] for ax in order) or (1,), 1))
    vector_ops = len(operands) + _ARITHMETIC[node.op] + 1
    compute = _COMPUTE_SYNC + vector_ops * _vector(cfg, count)
    store = _STORE_SYNC + _dma(cfg, count, dma_runs(size, tuple(y.strides[ax] for ax in order) or (1,), 1))
    return _pipeline(tiles, load, compute, store)


def _pool(b: ProgramBuilder, node: Node, locs: Mapping[str, Loc]) -> int:
    """MaxPool and QAveragePool as :func:`~hetero.plugins.npu_sim.compiler.vector.emit_pool` tiles them."""
    cfg, a = b.config, node.attrs
    x, y = locs[node.inputs[0].name], locs[node.output.name]
    average = node.op == "QAveragePool"
    n_, c_, h, w = x.shape
    oh, ow = y.shape[2:]
    (kh, kw), (sh, sw) = tuple(a["kernel_shape"]), tuple(a["strides"])
    toh, tow, tc = pool_tiling(b, node, (c_, oh, ow), (kh, kw), (sh, sw), average)
    tiles = n_ * -(-oh // toh) * -(-ow // tow) * -(-c_ // tc)
    rows, cols = window_extent(toh, sh, kh, 1), window_extent(tow, sw, kw, 1)
    xs, ys = x.strides, y.strides
    load = _LOAD_SYNC + _dma(cfg, rows * cols * tc, dma_runs((min(rows, h), min(cols, w), tc), (xs[2], xs[3], xs[1]), 1))
    compute = _COMPUTE_SYNC + _vector(cfg, toh * tow * tc * kh * kw)
    if average:
        load += _dma(cfg, _PARAM_BYTES, 1)
        compute += _vector(cfg, toh * tow * tc)
    store = _STORE_SYNC + _dma(cfg, toh * tow * tc, dma_runs((toh, tow, tc), (ys[2], ys[3], ys[1]), 1))
    return _pipeline(tiles, load, compute, store)


def _data(b: ProgramBuilder, node: Node, locs: Mapping[str, Loc]) -> int:
    """Concat, Transpose, Reshape, Flatten as :func:`~hetero.plugins.npu_sim.compiler.data.emit_data` moves them."""
    x, y = locs[node.inputs[0].name], locs[node.output.name]
    if node.op == "Concat":
        return sum(_move(b, locs[v.name].strides, y.strides, locs[v.name].shape)
                   for v, placed in zip(node.inputs, in_place(node, locs)) if not placed)
    if node.op == "Transpose":
        return _move(b, tuple(x.strides[p] for p in node.attrs["perm"]), y.strides, y.shape)
    dense = tuple(math.prod(x.shape[i + 1:]) for i in range(len(x.shape)))
    return _move(b, x.strides, dense, x.shape)


def _move(b: ProgramBuilder, src_strides: tuple[int, ...], dst_strides: tuple[int, ...],
          dims: tuple[int, ...]) -> int:
    """One box copied tile by tile through the vector unit (data.py's ``move``)."""
    cfg = b.config
    dims, src_strides, dst_strides = dims or (1,), src_strides or (1,), dst_strides or (1,)
    tiles, size = _box(tuple(dims), min(b.slot_size("inp"), b.slot_size("out")))
    count = math.prod(size)
    load = _LOAD_SYNC + _dma(cfg, count, dma_runs(size, src_strides, 1))
    compute = _COMPUTE_SYNC + _vector(cfg, count)
    store = _STORE_SYNC + _dma(cfg, count, dma_runs(size, dst_strides, 1))
    return _pipeline(tiles, load, compute, store)
