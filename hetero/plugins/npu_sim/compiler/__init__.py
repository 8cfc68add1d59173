"""npu_sim's compiler: a graph of int8 ops → a :class:`~hetero.plugins.npu_sim.program.Program`.

:func:`compile_graph` places every tensor in DRAM (inputs and outputs row-major at
their bindings, 4-D intermediates NHWC, weights pre-packed into the tile order the
GEMMs read), then emits each node's code in graph order with the node's name as
every instruction's ``tag``. Tiles are sized from the :class:`NpuConfig`'s buffer
capacities, and with ``double_buffer`` the SRAM buffers are split in two so the
DMA overlaps compute (see :mod:`~hetero.plugins.npu_sim.compiler.builder`).

Modules: ``builder`` (DRAM, segments, the step protocol), ``conv`` (QConv and
QMatMul as implicit GEMM), ``vector`` (QAdd, QMul, Requantize, pooling), ``data``
(Concat, Reshape, Flatten, Transpose).

Example::

    >>> program = compile_graph(graph, NpuConfig())
    >>> simulate(program, NpuConfig(), {"x": x}).outputs
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hetero.core.ir.graph import Graph, Node
from hetero.errors import PluginError
from hetero.plugins.npu_sim.compiler.builder import NHWC, Loc, ProgramBuilder, row_major
from hetero.plugins.npu_sim.compiler.conv import emit_qconv, emit_qmatmul
from hetero.plugins.npu_sim.compiler.data import emit_data
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


def lower_graph(graph: Graph, config: NpuConfig, *, double_buffer: bool = True) -> Lowered:
    """Compile ``graph`` and keep the DRAM location of every value it computes."""
    b = ProgramBuilder(config, double_buffer=double_buffer)
    outputs = {v.name for v in graph.outputs}
    for value in graph.inputs:
        b.place(value, row_major(len(value.shape)))
    for value in graph.outputs:
        if value.name not in b.locs:
            b.place(value, row_major(len(value.shape)))
    for node in graph.nodes:
        if node.op not in EMITTERS:
            raise PluginError(f"npu_sim: node {node.name!r} is a {node.op}, which the npu_sim compiler does not "
                              f"lower; it takes {sorted(EMITTERS)}")
        if node.output.name not in outputs:
            b.place(node.output, intermediate_perm(node))
    for node in graph.nodes:
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


__all__ = ["EMITTERS", "Lowered", "compile_graph", "intermediate_perm", "lower_graph"]
