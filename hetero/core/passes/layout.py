"""Blocked-channel layout: chains of convolutions in NCHW[x]c, converted only at their ends.

Invariant established: every Conv that can be blocked with ``block`` channels a block
is a ``ConvBlocked`` (:mod:`hetero.core.ir.ops.layout`) with its weight and bias
re-laid out at compile time; the pools, elementwise ops and channel Concats that read
only blocked values (and constants) read and write blocked values too; a
``LayoutFromBlocked`` sits only where a blocked value meets an op that stays in NCHW
or a graph output, a ``LayoutToBlocked`` (or, for an input whose channels the block
does not divide, a free ``Reshape`` to blocks of one channel) only where an NCHW value
meets a blocked convolution. Each value is converted at most once per direction,
however many users it has. The graph computes the same function.

Why: with ``block`` channels innermost a convolution that puts output channels on the
vector lanes stores whole vectors and reads its weights as whole vectors, and its
pixels are rows of the register tile (TVM's x86 conv, oneDNN's ``nChw16c``). The pass
knows no backend: the backend picks ``block`` (its vector's lanes) and calls it.

What is blocked, and what is not:

* a Conv with constant weights and bias: an ordinary one (its input blocked when
  ``block`` divides its channels, else read as it is, as blocks of one channel: the
  3-channel stem), a depthwise one, or a grouped one whose groups hold whole blocks of
  input and output channels. An ordinary or depthwise Conv whose output channels the
  block does not divide has its last block padded with zero channels (zero weights and
  bias; a depthwise one's input is padded with zeros by its conversion) where
  that adds at most :data:`MAX_PADDING` of work (SqueezeNet's 1000-class head,
  ShuffleNet's 24-channel stem and 136-channel depthwise Convs, Inception's 24-channel
  reductions); the
  padding flows only through :data:`PADDED_READERS` and Convs (whose weights for it are
  zero) and is dropped by the conversion back. Others stay in NCHW (ShuffleNet's narrow
  groups), where padding would be much of the work.
* MaxPool (without indices), AveragePool and LpPool: the same pool over one more
  spatial axis, the block, with kernel 1.
* elementwise ops (:data:`UNARY`, :data:`BINARY`) whose every non-constant operand is
  blocked at the output's shape; a constant operand (a folded bias, a per-channel
  scale) is re-laid out to broadcast the same way.
* Concat along the channels, every input blocked.
* an inference BatchNormalization with constant parameters (DenseNet's, before each
  Relu and Conv, that nothing folds into): a blocked Mul and Add per channel.

A fused group (:mod:`hetero.core.passes.fuse`) keeps its annotation where all its
members kept one layout and no conversion came between them, so the pass may run after
fusion; any other group is dissolved (its nodes then run one kernel each).

>>> blocked = block_layout(graph, 16)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.ops.layout import blocked_weight, to_blocked
from hetero.errors import ShapeError

#: Elementwise ops of one operand: the layout is nothing to them.
UNARY = frozenset({
    "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu", "Selu",
    "Celu", "Softplus", "Softsign", "Mish", "Gelu", "Erf", "Exp", "Neg", "Abs", "Sqrt", "Identity",
})
#: Elementwise ops of two operands, each blocked at the output's shape or a constant.
BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min"})
#: Pools that become the same pool over the block as one more spatial axis.
POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
#: Most zero channels a Conv's output may be padded with to fill its last block, as a
#: share of the padded count. A third takes ShuffleNet's 24-channel stem (3 -> 24 at
#: 224x224, stride 2: 1.67 ms in NCHW, whose tile fills 24 of 32 lanes with a scatter
#: for every store) and its 34-channel groups (34 of 48; ShuffleNet ran 3-6% faster
#: than with a quarter, measured interleaved in one process), and SqueezeNet's
#: 1000-class head (8 of 1008); a 10-channel Conv would compute more zeros than channels.
MAX_PADDING = 1 / 3
#: Ops that may read a padded value and give one: each keeps its zero (or at least
#: finite) padding finite, which the zero weights of a reader's padded inputs cancel.
PADDED_READERS = UNARY | POOLS


def block_layout(graph: Graph, block: int) -> Graph:
    """A copy of ``graph`` with its convolution chains in NCHW[``block``]c (see the module)."""
    if block < 2:
        raise ShapeError(f"block_layout needs a block of at least 2 channels, got {block}")
    return _Relayout(graph, block).run()


class _Relayout:
    """One rebuild of a graph: each old value's NCHW and blocked versions in the new one."""

    def __init__(self, graph: Graph, block: int) -> None:
        self.old, self.block = graph, block
        self.new = Graph(graph.name)
        self.plain: dict[int, Value] = {}
        self.blocked: dict[int, Value] = {}
        self.converted: set[int] = set()  # new nodes the pass added: the layout conversions
        self.output_names = {v.name for v in graph.outputs}
        self.padded: dict[int, int] = {}  # blocked values with padding: their true channel count
        self.affine_groups: set[str] = set()  # the fused Mul and Add of each BatchNormalization

    def run(self) -> Graph:
        for v in self.old.inputs:
            self.plain[id(v)] = self.new.add_input(v.name, v.shape, v.dtype)
        for node in self.old.nodes:
            if node.op == "Conv" and _conv_blockable(node, self.block, id(node.inputs[0]) in self.padded):
                self._conv(node)
            elif self._stays_blocked(node):
                self._blocked_node(node)
            else:
                self._plain_node(node)
        self.new.set_outputs([self._as_plain(v) for v in self.old.outputs])
        _extend_groups(self.new, self.affine_groups)
        _keep_whole_groups(self.new, self.converted)
        return self.new

    # -- values in either layout ------------------------------------------------------

    def _as_plain(self, v: Value) -> Value:
        found = self.plain.get(id(v))
        if found is None:
            if v.data is not None:
                found = self.new.add_constant(v.data, v.name)
            else:
                node = self.new.add_node("LayoutFromBlocked", [self.blocked[id(v)]],
                                         {"channels": self.padded.get(id(v), 0)},
                                         name=f"{v.name}_to_nchw", output_names=[v.name])
                self.converted.add(id(node))
                found = node.output
            self.plain[id(v)] = found
        return found

    def _as_blocked(self, v: Value) -> Value:
        found = self.blocked.get(id(v))
        if found is None:
            node = self.new.add_node("LayoutToBlocked", [self._as_plain(v)], {"block": self.block},
                                     name=f"{v.name}_to_nchw{self.block}c",
                                     output_names=[self._blocked_name(v)])
            self.converted.add(id(node))
            found = self.blocked[id(v)] = node.output
            if v.shape[1] % self.block:
                self.padded[id(v)] = v.shape[1]
        return found

    def _blocked_name(self, v: Value) -> str:
        return self.new.unique_name(f"{v.name}_nchw{self.block}c")

    def _constant_like(self, c: np.ndarray, rank: int, name: str) -> Value:
        """Constant ``c``, which broadcasts against an NCHW tensor of ``rank``, re-laid out to
        broadcast the same way against its blocked form."""
        full = c.reshape((1,) * (rank - c.ndim) + c.shape)
        blocked = full[..., None] if full.shape[1] == 1 else to_blocked(full, self.block)
        return self.new.add_constant(blocked, f"{name}_nchw{self.block}c")

    # -- nodes --------------------------------------------------------------------------

    def _stays_blocked(self, node: Node) -> bool:
        """Whether ``node`` can take and give blocked values (every activation it reads is one)."""
        activations = [v for v in node.inputs if v is not None and v.data is None]
        if not activations or any(id(v) not in self.blocked for v in activations):
            return False
        if len(node.outputs) != 1 or node.output.type.rank < 3:
            return False
        if any(id(v) in self.padded for v in activations):
            return node.op in PADDED_READERS
        if node.op == "Concat":
            return node.attrs["axis"] == 1
        if node.op in UNARY or node.op in POOLS:
            return True
        if node.op == "BatchNormalization":
            return len(activations) == 1 and node.inputs[0] is activations[0]
        if node.op in BINARY:
            shape = node.output.shape
            return all(v.shape == shape for v in activations) and all(
                v.data is None or _broadcasts_per_channel(v.shape, shape) for v in node.inputs)
        return False

    def _blocked_node(self, node: Node) -> None:
        if node.op == "BatchNormalization":
            self._batch_norm(node)
            return
        inputs = [self._operand(node, v) for v in node.inputs]
        attrs = dict(node.attrs)
        if node.op in POOLS:
            k = len(attrs["kernel_shape"])
            pads = attrs["pads"]
            attrs.update(kernel_shape=tuple(attrs["kernel_shape"]) + (1,), strides=tuple(attrs["strides"]) + (1,),
                         dilations=tuple(attrs["dilations"]) + (1,),
                         pads=tuple(pads[:k]) + (0,) + tuple(pads[k:]) + (0,))
        self._add_blocked(node, node.op, inputs, attrs)
        if id(node.inputs[0]) in self.padded:
            self.padded[id(node.output)] = self.padded[id(node.inputs[0])]

    def _batch_norm(self, node: Node) -> None:
        """Inference batch normalisation, ``x * factor + shift`` per channel, as a blocked
        Mul and Add (the factors computed in float64, stored in the input's dtype)."""
        x, (scale, bias, mean, var) = node.inputs[0], (v.data.astype(np.float64) for v in node.inputs[1:])
        factor = scale / np.sqrt(var + node.attrs["epsilon"])
        shape = (1, -1) + (1,) * (x.type.rank - 2)
        rank, dtype = x.type.rank, x.dtype
        f = self._constant_like(factor.astype(dtype).reshape(shape), rank, f"{node.name}_factor")
        t = self._constant_like((bias - mean * factor).astype(dtype).reshape(shape), rank, f"{node.name}_shift")
        scaled = self.new.add_node("Mul", [self.blocked[id(x)], f], name=f"{node.name}_scale",
                                   output_names=[self.new.unique_name(f"{node.name}_scaled")])
        self._add_blocked(node, "Add", [scaled.output, t], {})
        # One kernel, as the BatchNormalization was: the Mul and Add fuse, with the
        # unary op after them where one follows (DenseNet's Relu), see _extend_groups.
        scaled.group = self.new.nodes[-1].group = scaled.name
        self.affine_groups.add(scaled.name)

    def _operand(self, node: Node, v: Value | None) -> Value | None:
        """Operand ``v`` of blocked ``node``: an activation's blocked form; a binary op's
        constant re-laid out; any other constant (Clip's bounds) as it is."""
        if v is None:
            return None
        if v.data is None:
            return self.blocked[id(v)]
        if node.op in BINARY:
            return self._constant_like(v.data, node.output.type.rank, v.name)
        return self._as_plain(v)

    def _plain_node(self, node: Node) -> None:
        inputs = [None if v is None else self._as_plain(v) for v in node.inputs]
        new = self.new.add_node(node.op, inputs, node.attrs, name=node.name,
                                output_names=[v.name for v in node.outputs])
        new.group = node.group
        for old, value in zip(node.outputs, new.outputs):
            self.plain[id(old)] = value

    def _conv(self, node: Node) -> None:
        x, w = node.inputs[0], node.inputs[1].data
        b = node.inputs[2] if len(node.inputs) > 2 else None
        group, channels = node.attrs["group"], x.shape[1]
        depthwise = group > 1 and w.shape[1] == 1 and group == channels == w.shape[0]
        if channels % self.block == 0 or id(x) in self.padded or depthwise:
            xb, block_in = self._as_blocked(x), self.block
        else:
            xb, block_in = self._by_single_channels(x), 1
        # Zero weights for the padding of the last output block and of a padded input's
        # (a depthwise Conv's one input channel a group needs none).
        out_pad = -w.shape[0] % self.block
        in_pad = -w.shape[1] % self.block if id(x) in self.padded and not depthwise else 0
        w = np.pad(w, ((0, out_pad), (0, in_pad)) + ((0, 0),) * (w.ndim - 2))
        weight = blocked_weight(w, 1 if depthwise else block_in, self.block)
        inputs = [xb, self.new.add_constant(weight, f"{node.inputs[1].name}_nchw{self.block}c")]
        if b is not None:
            bias = np.pad(b.data, (0, out_pad)).reshape(-1, self.block)
            inputs.append(self.new.add_constant(bias, f"{b.name}_nchw{self.block}c"))
        attrs = {key: node.attrs[key] for key in ("kernel_shape", "strides", "pads", "dilations", "group")}
        if depthwise:
            attrs["group"] = w.shape[0]  # a group per channel, the padding's included
        self._add_blocked(node, "ConvBlocked", inputs, attrs)
        if out_pad:
            self.padded[id(node.output)] = node.output.shape[1]

    def _add_blocked(self, node: Node, op: str, inputs: list[Value | None], attrs: dict) -> None:
        """The blocked form of ``node``. It keeps the node's name, unless that is a graph
        output's, which the conversion back to NCHW must then take."""
        name = node.name if node.name not in self.output_names else f"{node.name}_nchw{self.block}c"
        new = self.new.add_node(op, inputs, attrs, name=name, output_names=[self._blocked_name(node.output)])
        new.group = node.group
        self.blocked[id(node.output)] = new.output

    def _by_single_channels(self, v: Value) -> Value:
        """``v`` (N, C, D...) viewed as blocks of one channel (N, C, D..., 1): a free reshape."""
        found = self.blocked.get(id(v))
        if found is not None and found.shape[-1] == 1:
            return found
        node = self.new.add_node("Reshape", [self._as_plain(v)], {"shape": v.shape + (1,)},
                                 name=f"{v.name}_to_nchw1c", output_names=[self.new.unique_name(f"{v.name}_nchw1c")])
        self.converted.add(id(node))
        return node.output


def _conv_blockable(node: Node, block: int, padded_input: bool) -> bool:
    """Whether Conv ``node`` has a ConvBlocked form with ``block`` output channels a block
    (an ordinary one's last block padded with at most :data:`MAX_PADDING` zero channels)."""
    x, w = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if w.data is None or (b is not None and b.data is None) or x.data is not None:
        return False
    group, c_in, c_out = node.attrs["group"], x.shape[1], w.shape[0]
    fits = -c_out % block <= MAX_PADDING * (c_out + -c_out % block)
    if group == 1 or group == c_in == c_out and w.shape[1] == 1:
        return fits  # ordinary or depthwise
    if c_out % block or padded_input:
        return False
    return c_in % block == 0 and (c_in // group) % block == 0 and (c_out // group) % block == 0


def _broadcasts_per_channel(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether a constant of ``shape`` broadcasts to ``out`` without its channel axis
    being split from the block: along the channels it is 1 or all of them."""
    if len(shape) > len(out):
        return False
    full = (1,) * (len(out) - len(shape)) + tuple(shape)
    return all(s in (1, o) for s, o in zip(full, out))


def _extend_groups(graph: Graph, names: set[str]) -> None:
    """Let each group in ``names`` take the unary op right after it where that op is its
    tail's one user, as fusion would have."""
    outputs = {id(v) for v in graph.outputs}
    for tail, after in zip(graph.nodes, graph.nodes[1:]):
        if tail.group not in names or after.group is not None or after.op not in UNARY:
            continue
        value = tail.outputs[0]
        if after.inputs[0] is value and len(value.users) == 1 and id(value) not in outputs \
                and all(v is value or v is None or v.data is not None for v in after.inputs):
            after.group = tail.group


def _keep_whole_groups(graph: Graph, converted: set[int]) -> None:
    """Dissolve every fused group a conversion was put into or that mixes layouts."""
    members: dict[str, list[int]] = {}
    for position, node in enumerate(graph.nodes):
        if node.group is not None:
            members.setdefault(node.group, []).append(position)
    for name, positions in members.items():
        span = graph.nodes[positions[0]:positions[-1] + 1]
        consecutive = positions == list(range(positions[0], positions[-1] + 1))
        ranks = {n.outputs[0].type.rank for n in span}
        if not consecutive or len(ranks) > 1 or any(id(n) in converted for n in span):
            for n in span:
                if n.group == name:
                    n.group = None
