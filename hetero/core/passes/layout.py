"""Blocked-channel layout: chains of convolutions in NCHW[x]c, converted only at their ends.

Invariant established: every Conv that can be blocked with ``block`` channels a block
is a ``ConvBlocked`` (:mod:`hetero.core.ir.ops.layout`) with its weight and bias
re-laid out at compile time; the pools, elementwise ops and channel Concats that read
only blocked values (and constants) read and write blocked values too; a
``LayoutFromBlocked`` sits only where a blocked value meets an op that stays in NCHW
or a graph output, a ``LayoutToBlocked`` (or, for an input whose channels the block
does not divide, a free ``Reshape`` to blocks of one channel) only where an NCHW value
meets a blocked convolution, a ``ChannelGatherBlocked`` only where a blocked value's
channels must move (see :class:`Placement`). Each value is converted at most once per
direction, however many users it has. The graph computes the same function.

Why: with ``block`` channels innermost a convolution that puts output channels on the
vector lanes stores whole vectors and reads its weights as whole vectors, and its
pixels are rows of the register tile (TVM's x86 conv, oneDNN's ``nChw16c``). The pass
knows no backend: the backend picks ``block`` (its vector's lanes) and calls it.

What is blocked, and what is not:

* a Conv with constant weights and bias: an ordinary one (its input blocked when
  ``block`` divides its channels, else read as it is, as blocks of one channel: the
  3-channel stem), a depthwise one, or a grouped one. An ordinary or depthwise Conv
  whose output channels the block does not divide has its last block padded with zero
  channels (zero weights and bias; a depthwise one's input is padded with zeros by its
  conversion) where that adds at most :data:`MAX_PADDING` of work (SqueezeNet's
  1000-class head, ShuffleNet's 24-channel stem and 136-channel depthwise Convs,
  Inception's 24-channel reductions). A grouped Conv puts each group's output on whole
  blocks, padded where that adds at most :data:`MAX_PADDING` (ShuffleNet's groups of 34
  channels take 3 blocks each, 48 lanes), and reads each group's input channels
  wherever they are, one by one through a table (ConvBlocked's ``S``) unless they are
  whole blocks already: no padding to sum over, and no gather after a shuffle.
* MaxPool (without indices), AveragePool and LpPool: the same pool over one more
  spatial axis, the block, with kernel 1.
* elementwise ops (:data:`UNARY`, :data:`BINARY`) whose every non-constant operand is
  blocked at the output's shape; a constant operand (a folded bias, a per-channel
  scale) is re-laid out to broadcast the same way.
* Concat along the channels, every input blocked.
* an inference BatchNormalization with constant parameters (DenseNet's, before each
  Relu and Conv, that nothing folds into): a blocked Mul and Add per channel.
* a channel shuffle, ``Reshape`` to (N, G, C / G, D...), ``Transpose`` of those two
  axes and ``Reshape`` back (ShuffleNet's, after each grouped Conv): no kernel at all.
  The channels stay where they are and only the record of where each one lives
  changes: the depthwise Conv after it works in place, and the grouped Conv after that
  reads each channel where it lives, where NCHW would take a conversion back, a
  transpose and a conversion to blocks again.

Where each channel of a blocked value lives is its :class:`Placement`: the first
channels in order for most (the last block's padding past them), each group on whole
blocks after a padded grouped Conv, permuted after a shuffle. Per-channel ops (unary
ops, pools, depthwise Convs, BatchNormalization, per-channel constants) keep their
input's placement, a Concat joins its inputs', and an op that needs another one
(a binary op whose operands differ, an ordinary Conv, a conversion back to NCHW)
gathers the value into it (``ChannelGatherBlocked``) once, however many users ask; a
gather that lands inside a fused group's span but reads nothing of it moves before it.
The padding only flows through :data:`PADDED_READERS`, :data:`PADDED_BINARY` and Convs
(whose weights for it are zero), each of which keeps it finite, and is dropped by the
conversion back.

A fused group (:mod:`hetero.core.passes.fuse`) keeps its annotation where all its
members kept one layout and no conversion came between them, so the pass may run after
fusion; any other group is dissolved (its nodes then run one kernel each).

>>> blocked = block_layout(graph, 16)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

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
#: Binary ops that may read padded values (constants zero in the padding): Div may not,
#: as zero over zero padding is NaN, which no zero weight cancels.
PADDED_BINARY = BINARY - {"Div"}


@dataclass(frozen=True)
class Placement:
    """Where the channels of a blocked value live: channel ``c`` at lane ``where[c] % b`` of
    block ``where[c] // b``, in ``physical`` channels (whole blocks); the others are padding.

    >>> Placement.grouped(6, 2, 4)  # two groups of 3 channels, each on a block of 4
    Placement(where=(0, 1, 2, 4, 5, 6), physical=8)
    """

    where: tuple[int, ...]
    physical: int

    @staticmethod
    def packed(channels: int, block: int) -> Placement:
        """The channels in order, the last block padded: what LayoutToBlocked gives."""
        return Placement(tuple(range(channels)), -(-channels // block) * block)

    @staticmethod
    def grouped(channels: int, groups: int, block: int) -> Placement:
        """``groups`` equal groups of the channels in order, each padded to whole blocks."""
        per = channels // groups
        held = -(-per // block) * block
        return Placement(tuple(g * held + i for g in range(groups) for i in range(per)), groups * held)

    @property
    def exact(self) -> bool:
        """Whether the channels are in order and fill every block: no padding."""
        return self.physical == len(self.where) and self.is_prefix

    @property
    def is_prefix(self) -> bool:
        """Whether the channels are in order, the padding (if any) after them."""
        return self.where == tuple(range(len(self.where)))

    def sources(self, given: Placement) -> np.ndarray:
        """ChannelGatherBlocked's table from ``given`` to this placement: for each of its
        physical channels the one of ``given`` holding the same channel, or -1 (padding)."""
        table = np.full(self.physical, -1, np.int64)
        table[list(self.where)] = given.where
        return table

    def scatter(self, values: np.ndarray, axis: int) -> np.ndarray:
        """``values`` per channel along ``axis`` put at their physical channels, zero in
        the padding."""
        shape = list(values.shape)
        shape[axis] = self.physical
        out = np.zeros(shape, values.dtype)
        index = [slice(None)] * values.ndim
        index[axis] = list(self.where)
        out[tuple(index)] = values
        return out


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
        # Blocked values whose placement is not exact (padded or rearranged), and the
        # values gathered into another placement, by (old value, placement).
        self.placed: dict[int, Placement] = {}
        self.gathered: dict[tuple[int, Placement], Value] = {}
        self.single: dict[int, Value] = {}  # NCHW values viewed as blocks of one channel
        self.affine_groups: set[str] = set()  # the fused Mul and Add of each BatchNormalization
        self.shuffles = _channel_shuffles(graph)
        self.skipped: set[int] = set()  # the Transpose and Reshape of each shuffle kept blocked

    def run(self) -> Graph:
        for v in self.old.inputs:
            self.plain[id(v)] = self.new.add_input(v.name, v.shape, v.dtype)
        for node in self.old.nodes:
            shuffle = self.shuffles.get(id(node))
            if shuffle is not None and id(node.inputs[0]) in self.blocked:
                self._shuffle(node.inputs[0], shuffle)
            elif id(node) in self.skipped:
                continue
            elif node.op == "Conv" and _conv_blockable(node, self.block):
                self._conv(node)
            elif self._stays_blocked(node):
                self._blocked_node(node)
            else:
                self._plain_node(node)
        self.new.set_outputs([self._as_plain(v) for v in self.old.outputs])
        _extend_groups(self.new, self.affine_groups)
        _hoist_conversions(self.new, self.converted)
        _keep_whole_groups(self.new, self.converted)
        return self.new

    # -- values in either layout ------------------------------------------------------

    def _placement(self, v: Value) -> Placement:
        """Where the channels of ``v``'s blocked form live."""
        found = self.placed.get(id(v))
        return found if found is not None else Placement.packed(v.shape[1], self.block)

    def _as_plain(self, v: Value) -> Value:
        found = self.plain.get(id(v))
        if found is None:
            if v.data is not None:
                found = self.new.add_constant(v.data, v.name)
            else:
                placement = self._placement(v)
                blocked = self.blocked[id(v)] if placement.is_prefix else \
                    self._as_placed(v, Placement.packed(v.shape[1], self.block))
                node = self.new.add_node("LayoutFromBlocked", [blocked],
                                         {"channels": v.shape[1] if id(v) in self.placed else 0},
                                         name=f"{v.name}_to_nchw", output_names=[v.name])
                self.converted.add(id(node))
                found = node.output
            self.plain[id(v)] = found
        return found

    def _as_blocked(self, v: Value) -> Value:
        """``v``'s blocked form, in whatever placement it has; converted from NCHW (its
        channels in order, the last block padded) where it has none."""
        found = self.blocked.get(id(v))
        if found is None:
            node = self.new.add_node("LayoutToBlocked", [self._as_plain(v)], {"block": self.block},
                                     name=f"{v.name}_to_nchw{self.block}c",
                                     output_names=[self._blocked_name(v)])
            self.converted.add(id(node))
            found = self.blocked[id(v)] = node.output
            if v.shape[1] % self.block:
                self.placed[id(v)] = Placement.packed(v.shape[1], self.block)
        return found

    def _as_placed(self, v: Value, placement: Placement) -> Value:
        """``v``'s blocked form with its channels where ``placement`` puts them: gathered
        there once, however many users ask."""
        blocked = self._as_blocked(v)
        given = self._placement(v)
        if given == placement:
            return blocked
        found = self.gathered.get((id(v), placement))
        if found is None:
            table = placement.sources(given).reshape(-1, self.block)
            node = self.new.add_node("ChannelGatherBlocked",
                                     [blocked, self.new.add_constant(table, f"{v.name}_sources")],
                                     name=self.new.unique_name(f"{v.name}_gather"),
                                     output_names=[self.new.unique_name(f"{v.name}_gathered")])
            self.converted.add(id(node))
            found = self.gathered[(id(v), placement)] = node.output
        return found

    def _blocked_name(self, v: Value) -> str:
        return self.new.unique_name(f"{v.name}_nchw{self.block}c")

    def _constant_like(self, c: np.ndarray, rank: int, name: str, placement: Placement) -> Value:
        """Constant ``c``, which broadcasts against an NCHW tensor of ``rank``, re-laid out to
        broadcast the same way against its blocked form in ``placement`` (zero in the padding)."""
        full = c.reshape((1,) * (rank - c.ndim) + c.shape)
        if full.shape[1] == 1:
            blocked = full[..., None]
        else:
            blocked = to_blocked(placement.scatter(full, 1), self.block)
        return self.new.add_constant(blocked, f"{name}_nchw{self.block}c")

    # -- nodes --------------------------------------------------------------------------

    def _stays_blocked(self, node: Node) -> bool:
        """Whether ``node`` can take and give blocked values (every activation it reads is one)."""
        activations = [v for v in node.inputs if v is not None and v.data is None]
        if not activations or any(id(v) not in self.blocked for v in activations):
            return False
        if len(node.outputs) != 1 or node.output.type.rank < 3:
            return False
        if node.op == "Concat":
            return node.attrs["axis"] == 1
        if node.op in UNARY or node.op in POOLS:
            return True
        if node.op == "BatchNormalization":
            return len(activations) == 1 and node.inputs[0] is activations[0]
        if node.op in BINARY:
            if node.op not in PADDED_BINARY and any(id(v) in self.placed for v in activations):
                return False
            shape = node.output.shape
            return all(v.shape == shape for v in activations) and all(
                v.data is None or _broadcasts_per_channel(v.shape, shape) for v in node.inputs)
        return False

    def _blocked_node(self, node: Node) -> None:
        if node.op == "BatchNormalization":
            self._batch_norm(node)
            return
        if node.op == "Concat":
            self._concat(node)
            return
        # The first activation's placement, which every other operand is gathered into.
        placement = self._placement(next(v for v in node.inputs if v is not None and v.data is None))
        inputs = [self._operand(node, v, placement) for v in node.inputs]
        attrs = dict(node.attrs)
        if node.op in POOLS:
            k = len(attrs["kernel_shape"])
            pads = attrs["pads"]
            attrs.update(kernel_shape=tuple(attrs["kernel_shape"]) + (1,), strides=tuple(attrs["strides"]) + (1,),
                         dilations=tuple(attrs["dilations"]) + (1,),
                         pads=tuple(pads[:k]) + (0,) + tuple(pads[k:]) + (0,))
        self._add_blocked(node, node.op, inputs, attrs, placement)

    def _concat(self, node: Node) -> None:
        """A blocked Concat of the blocks of its inputs: each input's channels stay where
        they were, after the blocks of the inputs before it."""
        offset, where = 0, []
        for v in node.inputs:
            placement = self._placement(v)
            where += [offset + p for p in placement.where]
            offset += placement.physical
        inputs = [self.blocked[id(v)] for v in node.inputs]
        self._add_blocked(node, "Concat", inputs, dict(node.attrs), Placement(tuple(where), offset))

    def _batch_norm(self, node: Node) -> None:
        """Inference batch normalisation, ``x * factor + shift`` per channel, as a blocked
        Mul and Add (the factors computed in float64, stored in the input's dtype)."""
        x, (scale, bias, mean, var) = node.inputs[0], (v.data.astype(np.float64) for v in node.inputs[1:])
        factor = scale / np.sqrt(var + node.attrs["epsilon"])
        shape = (1, -1) + (1,) * (x.type.rank - 2)
        rank, dtype, placement = x.type.rank, x.dtype, self._placement(x)
        f = self._constant_like(factor.astype(dtype).reshape(shape), rank, f"{node.name}_factor", placement)
        t = self._constant_like((bias - mean * factor).astype(dtype).reshape(shape), rank,
                                f"{node.name}_shift", placement)
        scaled = self.new.add_node("Mul", [self.blocked[id(x)], f], name=f"{node.name}_scale",
                                   output_names=[self.new.unique_name(f"{node.name}_scaled")])
        self._add_blocked(node, "Add", [scaled.output, t], {}, placement)
        # One kernel, as the BatchNormalization was: the Mul and Add fuse, with the
        # unary op after them where one follows (DenseNet's Relu), see _extend_groups.
        scaled.group = self.new.nodes[-1].group = scaled.name
        self.affine_groups.add(scaled.name)

    def _operand(self, node: Node, v: Value | None, placement: Placement) -> Value | None:
        """Operand ``v`` of blocked ``node``: an activation's blocked form in ``placement``;
        a binary op's constant re-laid out; any other constant (Clip's bounds) as it is."""
        if v is None:
            return None
        if v.data is None:
            return self._as_placed(v, placement)
        if node.op in BINARY:
            return self._constant_like(v.data, node.output.type.rank, v.name, placement)
        return self._as_plain(v)

    def _plain_node(self, node: Node) -> None:
        inputs = [None if v is None else self._as_plain(v) for v in node.inputs]
        new = self.new.add_node(node.op, inputs, node.attrs, name=node.name,
                                output_names=[v.name for v in node.outputs])
        new.group = node.group
        for old, value in zip(node.outputs, new.outputs):
            self.plain[id(old)] = value

    def _shuffle(self, x: Value, shuffle: _Shuffle) -> None:
        """``shuffle`` of blocked ``x``: the same blocked value, its channels recorded
        where they already are."""
        given = self._placement(x)
        self.blocked[id(shuffle.output)] = self.blocked[id(x)]
        self.placed[id(shuffle.output)] = Placement(tuple(given.where[s] for s in shuffle.source), given.physical)
        self.skipped.update(shuffle.inner)

    def _conv(self, node: Node) -> None:
        x, w = node.inputs[0], node.inputs[1].data
        b = node.inputs[2] if len(node.inputs) > 2 else None
        group, channels, c_out = node.attrs["group"], x.shape[1], w.shape[0]
        depthwise = group > 1 and w.shape[1] == 1 and group == channels == c_out
        attrs = {key: node.attrs[key] for key in ("kernel_shape", "strides", "pads", "dilations", "group")}
        if depthwise:
            # A group per physical channel, the padding's included, in the input's placement.
            xb = self._as_blocked(x)
            placement = self._placement(x)
            w, b_data = placement.scatter(w, 0), None if b is None else placement.scatter(b.data, 0)
            attrs["group"] = placement.physical
            weight = blocked_weight(w, 1, self.block)
        else:
            sources: np.ndarray | None = None
            if group == 1:
                into, placement = Placement.packed(channels, self.block), Placement.packed(c_out, self.block)
                blocks_in = channels % self.block == 0 or id(x) in self.blocked
            else:
                into = Placement.grouped(channels, group, self.block)
                placement = Placement.grouped(c_out, group, self.block)
                if id(x) in self.blocked:
                    blocks_in = self._placement(x) == into
                    if not blocks_in:
                        # Groups that are not whole blocks of the input: each reads its
                        # channels where they are (after a shuffle, all over the blocks).
                        sources = np.array(self._placement(x).where, np.int64)
                else:
                    blocks_in = into.exact  # whole blocks: converted once, read block by block
            if blocks_in:
                xb, block_in = self._as_placed(x, into), self.block
            elif sources is not None:
                xb, block_in = self.blocked[id(x)], 1
            else:
                xb, block_in = self._by_single_channels(x), 1
            # Zero weights for the padding of each group's output blocks and of its input's.
            w = _grouped_weight(w, group, into.physical // group if block_in > 1 else w.shape[1],
                                placement.physical // group)
            b_data = None if b is None else placement.scatter(b.data, 0)
            weight = blocked_weight(w, block_in, self.block)
        inputs = [xb, self.new.add_constant(weight, f"{node.inputs[1].name}_nchw{self.block}c")]
        if b is not None:
            inputs.append(self.new.add_constant(b_data.reshape(-1, self.block), f"{b.name}_nchw{self.block}c"))
        if not depthwise and sources is not None:
            inputs += [None] * (3 - len(inputs)) + [self.new.add_constant(sources, f"{node.name}_sources")]
        self._add_blocked(node, "ConvBlocked", inputs, attrs, placement)

    def _add_blocked(self, node: Node, op: str, inputs: list[Value | None], attrs: dict,
                     placement: Placement) -> None:
        """The blocked form of ``node``, its channels in ``placement``. It keeps the node's
        name, unless that is a graph output's, which the conversion back to NCHW must then take."""
        name = node.name if node.name not in self.output_names else f"{node.name}_nchw{self.block}c"
        new = self.new.add_node(op, inputs, attrs, name=name, output_names=[self._blocked_name(node.output)])
        new.group = node.group
        self.blocked[id(node.output)] = new.output
        if not placement.exact:
            self.placed[id(node.output)] = placement

    def _by_single_channels(self, v: Value) -> Value:
        """``v`` (N, C, D...) viewed as blocks of one channel (N, C, D..., 1): a free reshape,
        made once however many Convs read it."""
        found = self.single.get(id(v))
        if found is None:
            node = self.new.add_node("Reshape", [self._as_plain(v)], {"shape": v.shape + (1,)},
                                     name=f"{v.name}_to_nchw1c",
                                     output_names=[self.new.unique_name(f"{v.name}_nchw1c")])
            self.converted.add(id(node))
            found = self.single[id(v)] = node.output
        return found


def _grouped_weight(w: np.ndarray, group: int, held_in: int, held_out: int) -> np.ndarray:
    """Conv weight ``w`` (O, I / G, K...) with each group's output rows padded to
    ``held_out`` and its input columns to ``held_in``, with zeros."""
    per_out = w.shape[0] // group
    out = np.zeros((group * held_out, held_in) + w.shape[2:], w.dtype)
    for g in range(group):
        out[g * held_out:g * held_out + per_out, :w.shape[1]] = w[g * per_out:(g + 1) * per_out]
    return out


def pads_groups(node: Node, block: int) -> bool:
    """Whether :func:`block_layout` makes grouped Conv ``node``, whose groups are not whole
    blocks, one grouped ConvBlocked (each group's output padded within
    :data:`MAX_PADDING`, its input read where it is). A backend that splits grouped Convs
    into one per group leaves these grouped, so that the pass sees them."""
    group = node.attrs.get("group", 1)
    if node.op != "Conv" or group == 1:
        return False
    per_in, per_out = node.inputs[1].shape[1], node.inputs[1].shape[0] // group
    return per_in > 1 and bool(per_in % block or per_out % block) and _conv_blockable(node, block)


def _conv_blockable(node: Node, block: int) -> bool:
    """Whether Conv ``node`` has a ConvBlocked form with ``block`` output channels a block
    (the last block, or each group's, padded with at most :data:`MAX_PADDING` zero channels)."""
    x, w = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if w.data is None or (b is not None and b.data is None) or x.data is not None:
        return False
    group, c_in, c_out = node.attrs["group"], x.shape[1], w.shape[0]
    if group == 1 or group == c_in == c_out and w.shape[1] == 1:
        return _fits(c_out, block)  # ordinary or depthwise
    return w.shape[1] > 1 and _fits(c_out // group, block)


def _fits(channels: int, block: int) -> bool:
    """Whether padding ``channels`` to whole blocks adds at most :data:`MAX_PADDING`."""
    return -channels % block <= MAX_PADDING * (channels + -channels % block)


@dataclass(frozen=True)
class _Shuffle:
    """A channel shuffle: ``output``'s channel c is the first Reshape's input channel
    ``source[c]``; ``inner`` are the ids of its Transpose and second Reshape."""

    output: Value
    source: tuple[int, ...]
    inner: tuple[int, int]


def _channel_shuffles(graph: Graph) -> dict[int, _Shuffle]:
    """Each channel shuffle of ``graph`` by the id of its first Reshape: Reshape (N, C, D...)
    to (N, G, C / G, D...), Transpose perm (0, 2, 1, ...), Reshape back to (N, C, D...),
    whose inner values have one user each and are no graph outputs."""
    outputs = {id(v) for v in graph.outputs}
    found = {}
    for split in graph.nodes:
        if split.op != "Reshape" or split.inputs[0].type.rank < 3:
            continue
        x, y = split.inputs[0], split.output
        n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
        if len(y.shape) != len(x.shape) + 1 or y.shape[0] != n or y.shape[3:] != spatial \
                or y.shape[1] * y.shape[2] != c:
            continue
        transpose = _only_user(y, outputs)
        if transpose is None or transpose.op != "Transpose" or \
                tuple(transpose.attrs["perm"]) != (0, 2, 1) + tuple(range(3, y.type.rank)):
            continue
        merge = _only_user(transpose.output, outputs)
        if merge is None or merge.op != "Reshape" or merge.output.shape != x.shape:
            continue
        groups, per = y.shape[1], y.shape[2]
        source = tuple(k % groups * per + k // groups for k in range(c))
        found[id(split)] = _Shuffle(merge.output, source, (id(transpose), id(merge)))
    return found


def _only_user(v: Value, outputs: set[int]) -> Node | None:
    """The one node that reads ``v``, unless ``v`` has several users or is a graph output."""
    return v.users[0] if len(v.users) == 1 and id(v) not in outputs else None


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


def _hoist_conversions(graph: Graph, converted: set[int]) -> None:
    """Move each conversion that landed inside a fused group's span (a residual Add's
    operand gathered into the Conv's placement) but reads nothing the group makes to
    just before the group, which then stays one kernel."""
    order = list(graph.nodes)
    for name in dict.fromkeys(n.group for n in order if n.group is not None):
        positions = [i for i, n in enumerate(order) if n.group == name]
        first, last = positions[0], positions[-1]
        span = order[first:last + 1]
        later = {id(v) for n in span for v in n.outputs}  # made inside the span
        moved: list[Node] = []
        for n in span:
            if n.group != name and id(n) in converted and all(
                    v is None or id(v) not in later or any(v is u for m in moved for u in m.outputs)
                    for v in n.inputs):
                moved.append(n)
        if moved:
            order[first:last + 1] = moved + [n for n in span if not any(n is m for m in moved)]
    graph.nodes = order


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
