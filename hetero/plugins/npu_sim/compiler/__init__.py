"""npu_sim's compiler: a graph of int8 ops → a :class:`~hetero.plugins.npu_sim.program.Program`.

:func:`compile_graph` places every tensor in DRAM (inputs and outputs row-major at
their bindings, 4-D intermediates NHWC, weights pre-packed into the tile order the
GEMMs read), then emits each node's code in graph order with the node's name as
every instruction's ``tag``. A Concat's input that only the Concat reads is placed
as a view into the Concat's output (:func:`concat_views`), so its producer stores it
in place; a Concat whose inputs all lie in place emits nothing. Tiles are sized from the :class:`NpuConfig`'s buffer
capacities, and with ``double_buffer`` the SRAM buffers are split in two so the
DMA overlaps compute (see :mod:`~hetero.plugins.npu_sim.compiler.builder`).

Modules: ``builder`` (DRAM, segments, the step protocol), ``conv_plan`` (the shape,
rewrites, tiling and cost of a QConv or QMatMul), ``conv`` (their implicit-GEMM
emission), ``vector`` (QAdd, QMul, Requantize, pooling), ``data``
(Concat, Reshape, Flatten, Transpose).

Example::

    >>> program = compile_graph(graph, NpuConfig())
    >>> simulate(program, NpuConfig(), {"x": x}).outputs
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hetero.plugin import Graph, Node, PluginError, Value
from hetero.plugins.npu_sim.compiler.builder import NHWC, Loc, ProgramBuilder, row_major
from hetero.plugins.npu_sim.compiler.conv import emit_qconv, emit_qmatmul
from hetero.plugins.npu_sim.compiler.conv_plan import Tiling
from hetero.plugins.npu_sim.compiler.data import emit_data, in_place
from hetero.plugins.npu_sim.compiler.vector import emit_elementwise, emit_pool
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.program import Program

#: The emitter of each op the compiler lowers.
EMITTERS: dict[str, Callable[[ProgramBuilder, Node], None]] = {
    "QConv": emit_qconv,
    "QMatMul": emit_qmatmul,
    "QAdd": emit_elementwise,
    "QMul": emit_elementwise,
    "Requantize": emit_elementwise,
    "QAveragePool": emit_pool,
    "MaxPool": emit_pool,
    "Concat": emit_data,
    "Reshape": emit_data,
    "Flatten": emit_data,
    "Transpose": emit_data,
}

_ROW_MAJOR_OUTPUT = {"QMatMul", "Reshape", "Flatten", "Transpose"}


@dataclass(frozen=True)
class Lowered:
    """A compiled graph: the program, and where each node's output lives in its DRAM."""

    program: Program
    locs: dict[str, Loc]


def intermediate_perm(node: Node) -> tuple[int, ...]:
    """The DRAM axis order of ``node``'s output when it is not a graph output: NHWC for the
    4-D results of ops that write HWC tiles, row-major otherwise (graph inputs and outputs
    are always row-major)."""
    rank = len(node.output.shape)
    return NHWC if rank == 4 and node.op not in _ROW_MAJOR_OUTPUT else row_major(rank)


# Ops whose emitters store through the output's strides, wherever the box lies (Reshape and
# Flatten write densely; QMatMul needs its rows contiguous, see concat_views).
_STRIDED_WRITERS = {"QConv", "QMatMul", "QAdd", "QMul", "Requantize", "QAveragePool", "MaxPool", "Concat",
                    "Transpose"}


def concat_views(graph: Graph) -> dict[str, tuple[Node, int]]:
    """The Concat inputs to place inside their Concat's output: value name → (Concat, offset
    along its axis).

    An input qualifies when a node of ``graph`` computes it, only that Concat reads it (once),
    it is not a graph output, its producer stores through strides, and its own layout
    (:func:`intermediate_perm`) is the output's, so the view costs its producer nothing.
    Region inputs, constants and values with other readers are copied as before.
    """
    producers = {node.output.name: node for node in graph.nodes}
    reads = Counter(v.name for node in graph.nodes for v in node.inputs if v is not None)
    outputs = {v.name for v in graph.outputs}
    views: dict[str, tuple[Node, int]] = {}
    for node in graph.nodes:
        if node.op != "Concat":
            continue
        axis, rank = node.attrs["axis"], len(node.output.shape)
        perm = row_major(rank) if node.output.name in outputs else intermediate_perm(node)
        offset = 0
        for value in node.inputs:
            producer = producers.get(value.name)
            if (producer is not None and producer.op in _STRIDED_WRITERS and reads[value.name] == 1
                    and value.name not in outputs and intermediate_perm(producer) == perm
                    and (producer.op != "QMatMul" or axis == rank - 1)):
                views[value.name] = (node, offset)
            offset += value.shape[axis]
    return views


def layout(graph: Graph, fresh: Callable[[Value, tuple[int, ...]], Loc]) -> dict[str, Loc]:
    """Where every input, output and computed value of ``graph`` lives: ``fresh(value, perm)``
    gives a value its own block, and :func:`concat_views` puts Concat inputs in their output's."""
    views = concat_views(graph)
    producers = {node.output.name: node for node in graph.nodes}
    locs: dict[str, Loc] = {}
    for value in list(graph.inputs) + list(graph.outputs):
        if value.name not in locs:
            locs[value.name] = fresh(value, row_major(len(value.shape)))

    def place(value: Value) -> Loc:
        if value.name not in locs:
            if value.name in views:
                concat, offset = views[value.name]
                axis = concat.attrs["axis"]
                locs[value.name] = place(concat.output).view(axis, offset, value.shape[axis])
            else:
                locs[value.name] = fresh(value, intermediate_perm(producers[value.name]))
        return locs[value.name]

    for node in graph.nodes:
        place(node.output)
    return locs


def lower_graph(graph: Graph, config: NpuConfig, *, double_buffer: bool = True,
                tilings: Mapping[str, Tiling] | None = None) -> Lowered:
    """Compile ``graph`` and keep the DRAM location of every value it computes; a convolution
    whose tiling problem has a fitting entry in ``tilings`` is tiled so (see
    :func:`~hetero.plugins.npu_sim.compiler.conv_plan.choose_tiling`)."""
    b = ProgramBuilder(config, double_buffer=double_buffer, tilings=tilings)
    for node in graph.nodes:
        if node.op not in EMITTERS:
            raise PluginError(f"npu_sim: node {node.name!r} is a {node.op}, which the npu_sim compiler does not "
                              f"lower; it takes {sorted(EMITTERS)}")
    b.locs.update(layout(graph, b.place))
    for node in graph.nodes:
        if node.op == "Concat" and all(in_place(node, b.locs)):
            continue
        b.begin_layer(node.name)
        EMITTERS[node.op](b, node)
    computed = {node.output.name: b.locs[node.output.name] for node in graph.nodes}
    return Lowered(b.finish(graph.inputs, graph.outputs), computed)


def compile_graph(graph: Graph, config: NpuConfig, *, double_buffer: bool = True) -> Program:
    """Compile a verified graph of int8 ops to an npu_sim program for ``config``.

    Raises :class:`~hetero.errors.PluginError` naming the node when one cannot be
    lowered or does not fit the configured SRAM even at the smallest tile.
    """
    return lower_graph(graph, config, double_buffer=double_buffer).program


__all__ = ["EMITTERS", "Lowered", "compile_graph", "concat_views", "intermediate_perm", "layout", "lower_graph"]
