"""Schedule primitives on tensor-IR loop nests, each recorded into a replayable trace.

In the manner of TVM's TensorIR schedules: a :class:`Schedule` holds the current
function; every primitive checks its preconditions (raising ScheduleError naming the
block or loop and the broken rule), rewrites the function, and appends an
:class:`~hetero.core.schedule.trace.Instruction` to :attr:`Schedule.trace`::

    sch = Schedule(func)
    y = sch.get_block("Y")
    i, j, r = sch.get_loops(y)
    i0, j0, i1, j1 = sch.tile([i, j], [8, 8])
    sch.vectorize(j1)
    sch.parallel(i0)
    sch.trace.apply(func)  # the same function again, from the trace

Loops are named by their block and loop variable; new loops get fresh names
(``i`` splits into ``i_0`` and ``i_1``, fusing them makes ``i_0_i_1_fused``), so a
reference stays valid until a primitive replaces that loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hetero.core.ir.tir.buffer import Partition
from hetero.core.ir.tir.stmt import Allocate, ForKind, PrimFunc, Stmt
from hetero.core.schedule import loops as loop_ops
from hetero.core.schedule import rfactor as rfactor_ops
from hetero.core.schedule import stages, tiling
from hetero.core.schedule.trace import BlockRef, BufferRef, Instruction, LoopRef, Ref, Trace
from hetero.core.schedule.tree import (
    Path,
    block_names,
    enclosing_loops,
    find_block,
    loop_var_names,
    node_at,
    owned_loops,
    owner_block,
    paths,
)
from hetero.errors import ScheduleError, did_you_mean


class Schedule:
    """The schedule of one function: ``func`` is its current state, ``trace`` how it got there."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.trace = Trace()

    # -- queries ------------------------------------------------------------------------

    def get_block(self, name: str) -> BlockRef:
        """The block called ``name``."""
        self._block_path(BlockRef(name))
        return BlockRef(name)

    def get_loops(self, block: BlockRef) -> list[LoopRef]:
        """The loops around ``block`` (from blocks it was computed at), then its own, outermost
        first; its own loops in program order (``i, j, r`` for a matmul)."""
        root = self.func.body
        path = self._block_path(block)
        refs = []
        for p, f in enclosing_loops(root, path):
            owner = owner_block(root, p)
            if owner is None:
                raise ScheduleError(f"loop {f.var.name} around {block} belongs to no block; schedules "
                                    "address loops through the blocks that own them")
            refs.append(LoopRef(node_at(root, owner).name, f.var.name))  # type: ignore[attr-defined]
        own = [LoopRef(block.name, node_at(root, p).var.name) for p in owned_loops(root, path)]  # type: ignore[attr-defined]
        return refs + own

    def extent(self, loop: LoopRef) -> int:
        """How many iterations ``loop`` has."""
        return node_at(self.func.body, self._loop_path(loop)).extent  # type: ignore[attr-defined]

    # -- loop primitives ----------------------------------------------------------------

    def split(self, loop: LoopRef, factors: Sequence[int | None]) -> list[LoopRef]:
        """Split ``loop`` into one loop per factor, outermost first; one factor may be
        None (inferred). The old index becomes ``outer * f + inner``; where the factors
        overshoot the extent, a guard keeps the original bound. ``loop`` must be serial.

        Before / after ``split(i, [None, 4])`` on ``for i in range(10)``::

            for i in range(10) {          for i_0 in range(3) {
              B[i] = A[i] + 1.0             for i_1 in range(4) {
            }                                 if i_0 * 4 + i_1 < 10 {
                                                B[i_0 * 4 + i_1] = A[i_0 * 4 + i_1] + 1.0

        The factors are the instruction's decision: a tuner may change them.
        """
        path = self._loop_path(loop)
        extent = node_at(self.func.body, path).extent  # type: ignore[attr-defined]
        resolved = loop_ops.resolve_factors(extent, factors, str(loop))
        body, names = loop_ops.split_loop(self.func.body, path, resolved, self._names_near(path), str(loop))
        self._commit(body, Instruction("split", (loop,), {}, {"factors": resolved}))
        return [LoopRef(loop.block, n) for n in names]

    def reorder(self, *loops: LoopRef) -> None:
        """Put ``loops`` in the order given; they must lie in one perfect nest (each loop
        the only statement in the one above it). Loops of the nest not named stay put.

        Before / after ``reorder(j, i)``::

            for i in range(4) {        for j in range(3) {
              for j in range(3) {        for i in range(4) {
                C[i, j] = ...              C[i, j] = ...
        """
        paths = [self._loop_path(l) for l in loops]
        body = loop_ops.reorder_loops(self.func.body, paths, [str(l) for l in loops])
        self._commit(body, Instruction("reorder", tuple(loops)))

    def fuse(self, *loops: LoopRef) -> LoopRef:
        """Fuse perfectly nested serial loops, listed outermost first, into one.

        Before / after ``fuse(i, j)``::

            for i in range(4) {        for i_j_fused in range(12) {
              for j in range(3) {        C[i_j_fused // 3, i_j_fused % 3] = ...
                C[i, j] = ...
        """
        paths = [self._loop_path(l) for l in loops]
        owner = loops[0].block
        body, name = loop_ops.fuse_loops(self.func.body, paths, self._names_near(paths[0]),
                                         [str(l) for l in loops])
        self._commit(body, Instruction("fuse", tuple(loops)))
        return LoopRef(owner, name)

    def tile(self, loops: Sequence[LoopRef], factors: Sequence[Sequence[int | None]]) -> list[LoopRef]:
        """Split each of ``loops`` (a perfect nest) by its factors and reorder so that all
        outer parts come first: ``tile([i, j], [[None, 8], [None, 8]])`` gives
        ``i_0, j_0, i_1, j_1``. A plain int ``f`` stands for ``[None, f]``. Recorded as
        the splits and the reorder it is made of.
        """
        if len(loops) != len(factors):
            raise ScheduleError(f"cannot tile {', '.join(map(str, loops))}: {len(factors)} factor lists "
                                f"for {len(loops)} loops")
        parts = [self.split(l, [None, f] if isinstance(f, int) else f) for l, f in zip(loops, factors)]
        depth = max(len(p) for p in parts)
        order = [p[k] for k in range(depth) for p in parts if k < len(p)]
        self.reorder(*order)
        return order

    def vectorize(self, loop: LoopRef) -> None:
        """Make ``loop`` a vectorized loop: it must be serial, contain no other loop, and
        write a different element of every buffer it does not allocate on each iteration.

        Before / after ``vectorize(j)``::

            for j in range(8) {        for j in range(8) vectorized {
              B[i, j] = A[i, j] * 2.0    B[i, j] = A[i, j] * 2.0
        """
        self._set_kind(loop, ForKind.VECTORIZED, "vectorize")

    def parallel(self, loop: LoopRef) -> None:
        """Run ``loop``'s iterations on several cores: every store under it to a buffer
        allocated outside it must index by the loop variable (so no two iterations write
        one element: a reduction loop is refused).

        Before / after ``parallel(i)``: ``for i in range(4) {`` becomes
        ``for i in range(4) parallel {``.
        """
        self._set_kind(loop, ForKind.PARALLEL, "parallel")

    def unroll(self, loop: LoopRef) -> None:
        """Mark the serial ``loop`` to be unrolled: ``for r in range(4) unrolled {``."""
        self._set_kind(loop, ForKind.UNROLLED, "unroll")

    def bind(self, loop: LoopRef, thread_axis: str) -> None:
        """Bind ``loop`` to a registered hardware axis (``blockIdx.x``...``threadIdx.z``, or
        one a plugin registered), not already bound in the same nest; its iterations must
        be independent as for :meth:`parallel`.

        Before / after ``bind(i_0, "blockIdx.x")``: ``for i_0 in range(4) {`` becomes
        ``for i_0 in range(4) thread_binding(blockIdx.x) {``.

        One exception to "not already bound": a loop of a ``shared`` stage computed
        inside the thread loops (:meth:`compute_at` relaxes its region over them) may be
        bound to the axis of a loop around it of the same extent; the threads of that
        loop then share the stage's iterations, so the loop goes and its variable
        becomes that thread loop's (TVM binds both to one thread variable). Before /
        after ``bind(ax0_1, "threadIdx.x")`` inside ``for tx in range(16)
        thread_binding(threadIdx.x)``::

            block A_shared {                        block A_shared {
              for ax0_0 in range(4) {                 for ax0_0 in range(4) {
                for ax0_1 in range(16) {                A_shared[ax0_0 * 16 + tx] = ...
                  A_shared[ax0_0 * 16 + ax0_1] = ...
        """
        path = self._loop_path(loop)
        around = [f for _, f in enclosing_loops(self.func.body, path) if f.thread_axis == thread_axis]
        if not around:
            self._set_kind(loop, ForKind.THREAD_BINDING, "bind", thread_axis)
            return
        body = stages.bind_to_enclosing_axis(self.func.body, path, around[-1],
                                             f"cannot bind {loop} to {thread_axis}")
        self._commit(body, Instruction("bind", (loop,), {"thread_axis": thread_axis}))

    def pipeline(self, loop: LoopRef, ii: int = 1) -> None:
        """Overlap the iterations of the serial ``loop``, starting one every ``ii`` cycles
        (HLS's ``PIPELINE II=ii``; software pipelining elsewhere). Iterations may depend
        on each other: a renderer keeps their order of effects and may reach a larger
        interval than asked. ``ii`` is the instruction's decision.

        Before / after ``pipeline(j, ii=1)``: ``for j in range(8) {`` becomes
        ``for j in range(8) pipelined ii=1 {``.
        """
        path = self._loop_path(loop)
        body = loop_ops.pipeline_loop(self.func.body, path, ii, str(loop))
        self._commit(body, Instruction("pipeline", (loop,), {}, {"ii": ii}))

    def annotate(self, target: LoopRef | BufferRef | str, key: str, value: Any) -> None:
        """Set the annotation ``key`` of a loop, or of a buffer the function allocates (a
        :class:`BufferRef` or its name), to ``value``; the key must be registered for
        loops or buffers (:mod:`hetero.core.ir.tir.registry`) and the value pass its
        check. Replaces an earlier value of ``key``. Annotations are hints to the
        renderer: they never change what the function computes.

        Before / after ``annotate(r, "unroll_factor", 4)``: ``for r in range(16) {`` becomes
        ``for r in range(16) unroll_factor=4 {``; ``annotate("T", "partition",
        (Partition(0, "cyclic", 4),))`` makes ``alloc T: f32[16] shared {`` into
        ``alloc T: f32[16] shared partition=[cyclic(0, 4)] {``.
        """
        if isinstance(target, str):
            target = BufferRef(target)
        if isinstance(target, BufferRef):
            path = self._buffer_path(target)
            body = loop_ops.annotate_allocation(self.func.body, path, key, value, str(target))
        else:
            body = loop_ops.annotate_loop(self.func.body, self._loop_path(target), key, value, str(target))
        self._commit(body, Instruction("annotate", (target,), {"key": key, "value": value}))

    def partition(self, buffer: BufferRef | str, dim: int, kind: str, factor: int = 0) -> None:
        """Split dimension ``dim`` of the allocated ``buffer`` into banks (see
        :class:`~hetero.core.ir.tir.buffer.Partition`), keeping its partitions of other
        dimensions; recorded as the :meth:`annotate` of its ``partition`` it makes."""
        ref = BufferRef(buffer) if isinstance(buffer, str) else buffer
        alloc = node_at(self.func.body, self._buffer_path(ref))
        kept = tuple(p for p in alloc.partitions if p.dim != dim)  # type: ignore[attr-defined]
        self.annotate(ref, "partition", tuple(sorted(kept + (Partition(dim, kind, factor),),
                                                     key=lambda p: p.dim)))

    # -- stage primitives ---------------------------------------------------------------

    def cache_read(self, block: BlockRef, buffer: str, scope: str) -> BlockRef:
        """Copy ``buffer`` into a new buffer ``{buffer}_{scope}`` just before ``block``,
        which then reads the copy; return the copy block (named like its buffer).
        ``block`` must read ``buffer`` and not write it.

        Before / after ``cache_read(Y, "X", "shared")``::

            block Y {                 alloc X_shared: f32[4,8] shared {
              ... X[i, r] ...           block X_shared {
            }                             for ax0 in range(4) {
                                            for ax1 in range(8) {
                                              X_shared[ax0, ax1] = X[ax0, ax1]
                                        block Y {
                                          ... X_shared[i, r] ...
        """
        path = self._block_path(block)
        body, name = stages.cache_read(self.func, path, buffer, scope)
        self._commit(body, Instruction("cache_read", (block,), {"buffer": buffer, "scope": scope}))
        return BlockRef(name)

    def cache_operand(self, block: BlockRef, *loops: LoopRef, buffer: str, scope: str) -> BlockRef:
        """Compute the operand of ``block`` that reads ``buffer`` (the largest expression of
        its stores reading that buffer and no other: a matmul's ``A[i, k]``, a padded
        convolution's ``select(inside, X[...], 0.0)``) into a new buffer ``{buffer}_{scope}``
        indexed by ``loops`` (``block``'s loops, every one the operand uses, in the order
        the new buffer's dimensions take), just before ``block``, which then reads the
        copy; return the copy block (named like its buffer). Where the operand is a
        plain read this is :meth:`cache_read` in the loops' coordinates; where it is an
        expression, the copy computes it once an element (implicit GEMM's im2col tile).
        ``block`` must not sit inside a loop; the operand must be one expression.

        Before / after ``cache_operand(Y, p, r, buffer="X", scope="shared")``::

            block Y {                           alloc X_shared: f32[16,9] shared {
              for p, r:                           block X_shared {
                ... select(c(p, r), X[f(p, r)], 0.0) ...   for ax0, ax1:
            }                                         X_shared[ax0, ax1] = select(c(ax0, ax1), X[f(ax0, ax1)], 0.0)
                                                  block Y {
                                                    ... X_shared[p, r] ...
        """
        path = self._block_path(block)
        loop_paths = [self._loop_path(l) for l in loops]
        if any(l.block != block.name for l in loops):
            raise ScheduleError(f"cache_operand of {buffer} for {block}: name loops of that block")
        body, name = stages.cache_operand(self.func, path, buffer, loop_paths, scope)
        self._commit(body, Instruction("cache_operand", (block, *loops), {"buffer": buffer, "scope": scope}))
        return BlockRef(name)

    def cache_write(self, block: BlockRef, scope: str) -> BlockRef:
        """Make ``block`` write a new buffer ``{buffer}_{scope}`` and copy it to the original
        buffer after it; return the copy block. ``block`` must not sit inside a loop
        (it must fill its whole buffer).

        Before / after ``cache_write(Y, "local")``::

            block Y {                 alloc Y_local: f32[4,3] local {
              ... Y[i, j] = v             block Y {
            }                               ... Y_local[i, j] = v
                                          block Y_local {
                                            ... Y[ax0, ax1] = Y_local[ax0, ax1]
        """
        path = self._block_path(block)
        body, name = stages.cache_write(self.func, path, scope)
        self._commit(body, Instruction("cache_write", (block,), {"scope": scope}))
        return BlockRef(name)

    def compute_at(self, block: BlockRef, loop: LoopRef) -> None:
        """Move the producer ``block`` to the start of ``loop``'s body, computing only the
        part of its buffer that the iterations inside ``loop`` read.

        Supported: the producer still has its own loop nest (one loop per dimension of
        its buffer, storing at exactly those indices), writes an allocated buffer no
        other block writes, comes before ``loop`` in one sequence of statements, and is
        read only under ``loop`` at indices affine in the loop variables, the outer
        loops entering every read alike (``B[i]``, ``B[i_0 * 4 + i_1 + r]``). A region that
        may leave the buffer is guarded; region dimensions of extent 1 lose their loop.
        A read clamped into the buffer (``min(e, n - 1)``, as :meth:`tile_accumulator`
        writes past a ragged split) counts as ``e`` where the clamp never falls below
        the region.

        A ``shared`` buffer computed inside ``threadIdx.*`` loops is shared by the
        block's threads: its region is relaxed over those loops, the buffer shrinks to
        the region (reads are re-indexed from its start), its allocation moves just
        outside the outermost of them, and ``loop``'s body becomes ``copy; barrier;
        body; barrier`` (a second shared stage computed at the same loop joins the
        first copy before the barrier). Bind the copy's loops to those threads with
        :meth:`bind`.

        Before / after ``compute_at(B, i_0)`` with ``C`` split by 4::

            block B {                     block C {
              for i in range(8) {           for i_0 in range(2) {
                B[i] = A[i] * 2.0             block B {
            block C {                           for i in range(4) {
              for i_0 in range(2) {               B[i_0 * 4 + i] = A[i_0 * 4 + i] * 2.0
                for i_1 in range(4) {         for i_1 in range(4) {
                  C[...] = B[i_0 * 4 + i_1]     C[...] = B[i_0 * 4 + i_1]
        """
        block_path, loop_path = self._block_path(block), self._loop_path(loop)
        body = stages.compute_at(self.func, block_path, loop_path, str(loop))
        self._commit(body, Instruction("compute_at", (block, loop)))

    def compute_inline(self, block: BlockRef) -> None:
        """Substitute ``block``'s value into every read of its buffer and drop the block
        and the buffer. ``block`` must be a single store under its own loop nest (no
        reduction), write an allocated buffer, and read nothing written after it.

        Before / after ``compute_inline(B)``::

            alloc B: f32[6] global {        block C {
              block B {                       for i in range(6) {
                for i in range(6) {             C[i] = A[i] * 2.0 + 1.0
                  B[i] = A[i] * 2.0
              block C {
                for i in range(6) {
                  C[i] = B[i] + 1.0
        """
        body = stages.compute_inline(self.func, self._block_path(block))
        self._commit(body, Instruction("compute_inline", (block,)))

    # -- register tiling ----------------------------------------------------------------

    def tile_accumulator(self, block: BlockRef, *loops: LoopRef) -> None:
        """Turn ``block``'s scalar accumulator into a tile with one element per iteration of
        ``loops``, and run the reduction loops around the tile (TVM's ``cache_write`` of
        the accumulator to a local scope plus ``decompose_reduction``): the register tile
        of a CPU micro-kernel. ``loops`` must be serial and the innermost loops of the
        block's nest, directly around the one-element accumulator that lowering a single
        reduction makes. Where a split guards the accumulator, the guard moves to the
        store and the reduction reads at indices clamped into the buffers, so the tile
        computes whole (extra lanes are computed and dropped). Each element still sums
        its terms in the same order, so the numbers do not change. The init and store
        copies of the tile loops are named ``{loop}_init`` and ``{loop}_store``.

        Before / after ``tile_accumulator(Y, i_1, j)``::

            for i_0 in range(2) {                 for i_0 in range(2) {
              for i_1 in range(4) {                 alloc Y_acc: f32[4,8] local {
                for j in range(8) {                   for i_1_init, j_init: Y_acc[i_1_init, j_init] = 0.0
                  alloc Y_acc: f32[1] local {         for r in range(16) {
                    Y_acc[0] = 0.0                      for i_1 in range(4) {
                    for r in range(16) {                  for j in range(8) {
                      Y_acc[0] = Y_acc[0] + X[..] * W[..]   Y_acc[i_1, j] = Y_acc[i_1, j] + X[..] * W[..]
                    Y[i_0 * 4 + i_1, j] = Y_acc[0]    for i_1_store, j_store: Y[..] = Y_acc[i_1_store, j_store]
        """
        block_path = self._block_path(block)
        loop_paths = [self._loop_path(l) for l in loops]
        label = f"tile_accumulator of {block}"
        if not loop_paths:
            raise ScheduleError(f"{label}: name the tile loops")
        body = tiling.tile_accumulator(self.func, block_path, loop_paths, self._names_near(loop_paths[0]), label)
        self._commit(body, Instruction("tile_accumulator", (block, *loops)))

    def pack(self, block: BlockRef, buffer: str, axis: int, factor: int) -> BlockRef:
        """Copy ``buffer`` into panels ``factor`` wide along ``axis`` just before ``block``,
        which then reads the copy; return the copy block (named like its buffer,
        ``{buffer}_packed``). The packed buffer has shape ``(ceil(n / factor), *other
        axes, factor)``: the panel index first, the lane last, so one panel's rows are
        contiguous (BLIS's packed B). Every read of ``buffer`` in ``block`` must index
        ``axis`` as ``factor * outer + v`` with ``v`` a loop of extent ``factor`` (split
        the loop first); lanes past the end are filled with zeros. ``block`` must not sit
        inside a loop. The factor is the instruction's decision.

        Before / after ``pack(Y, "W", 1, 4)`` with ``j`` split into ``j_0, j_1``::

            block Y {                             alloc W_packed: f32[2,16,4] {
              ... W[r, j_0 * 4 + j_1] ...           block W_packed {
                                                      for ax0, ax1, ax2:
                                                        W_packed[ax0, ax1, ax2] = W[ax1, ax0 * 4 + ax2]
                                                    block Y {
                                                      ... W_packed[j_0, r, j_1] ...
        """
        path = self._block_path(block)
        body, name = tiling.pack(self.func, path, buffer, axis, factor)
        self._commit(body, Instruction("pack", (block,), {"buffer": buffer, "axis": axis},
                                       {"factor": factor}))
        return BlockRef(name)

    # -- cross-lane reductions ---------------------------------------------------------

    def rfactor(self, block: BlockRef, loop: LoopRef, at: LoopRef, scope: str = "shared") -> rfactor_ops.RFactored:
        """Fold ``block``'s reduction along ``loop`` into a buffer of partials, one per
        iteration of ``loop`` and of the loops between ``at`` and the accumulator,
        allocated in ``scope`` at the start of ``at``'s body; then halve the partials in
        log2 steps and run the stage's epilogue on the first (TVM's ``rfactor`` with the
        cross-thread reduction that follows it on a GPU). ``loop`` must be the outermost
        loop folding the one-element accumulator lowering makes (split and reorder the
        reduction first), and ``at`` must enclose the accumulator with only loops and
        guards between them; each is copied into every step (fresh names), keeping its
        kind. The steps are separate nests, so they mean the same serial or bound to
        threads; the loops left are returned for :meth:`bind`. A sum is reassociated; a
        maximum, a minimum or an integer product is unchanged.

        Before / after ``rfactor(Y, r_1, i_0)`` (``r`` split by 4 and reordered)::

            for i_0 in range(4) {                 for i_0 in range(4) {
              alloc Y_acc: f32[1] local {           alloc Y_rf: f32[4] shared {
                Y_acc[0] = 0.0                        for r_1 in range(4) {
                for r_1 in range(4) {                   alloc Y_acc { Y_acc[0] = 0.0
                  for r_0 in range(25) {                  for r_0: Y_acc[0] = Y_acc[0] + X[i_0, r_0 * 4 + r_1]
                    Y_acc[0] = Y_acc[0] + X[..]           Y_rf[r_1] = Y_acc[0] }
                Y[i_0] = Y_acc[0]                     for r_1_1 in range(4): if r_1_1 < 2:  Y_rf[r_1_1] += Y_rf[r_1_1 + 2]
                                                      for r_1_2 in range(4): if r_1_2 < 1:  Y_rf[r_1_2] += Y_rf[r_1_2 + 1]
                                                      Y[i_0] = Y_rf[0]
        """
        block_path = self._block_path(block)
        at_path, loop_path = self._loop_path(at), self._loop_path(loop)
        label = f"rfactor {block} along {loop}"
        body, left = rfactor_ops.rfactor(self.func, block_path, at_path, loop_path, scope,
                                         self._names_near(loop_path), label)
        self._commit(body, Instruction("rfactor", (block, loop, at), {"scope": scope}))
        return left

    # -- internals ----------------------------------------------------------------------

    def _commit(self, body: Stmt, instruction: Instruction) -> None:
        self.func = PrimFunc(self.func.name, self.func.params, body, self.func.attrs)
        self.trace = self.trace.append(instruction)

    def _set_kind(self, loop: LoopRef, kind: ForKind, primitive: str, thread_axis: str | None = None) -> None:
        path = self._loop_path(loop)
        body = loop_ops.set_loop_kind(self.func.body, path, kind, str(loop), thread_axis)
        attrs = {} if thread_axis is None else {"thread_axis": thread_axis}
        self._commit(body, Instruction(primitive, (loop,), attrs))

    def _block_path(self, block: Ref) -> Path:
        if not isinstance(block, BlockRef):
            raise ScheduleError(f"expected a block, got {block}")
        path = find_block(self.func.body, block.name)
        if path is None:
            names = block_names(self.func.body)
            raise ScheduleError(f"func {self.func.name} has no block {block.name!r}"
                                f"{did_you_mean(block.name, names)}; its blocks are {', '.join(names)}")
        return path

    def _buffer_path(self, buffer: BufferRef) -> Path:
        found = [p for p, s in paths(self.func.body) if isinstance(s, Allocate) and s.buffer.name == buffer.name]
        if len(found) == 1:
            return found[0]
        if found:
            raise ScheduleError(f"func {self.func.name} allocates {len(found)} buffers named {buffer.name!r}; "
                                "annotate needs one")
        names = sorted({s.buffer.name for _, s in paths(self.func.body) if isinstance(s, Allocate)})
        params = " (a parameter: only allocated buffers take annotations)" if any(
            b.name == buffer.name for b in self.func.params) else did_you_mean(buffer.name, names)
        raise ScheduleError(f"func {self.func.name} allocates no buffer {buffer.name!r}{params}; it allocates "
                            f"{', '.join(names) or '(none)'}")

    def _loop_path(self, loop: Ref) -> Path:
        if not isinstance(loop, LoopRef):
            raise ScheduleError(f"expected a loop, got {loop}")
        block_path = self._block_path(BlockRef(loop.block))
        owned = owned_loops(self.func.body, block_path)
        names = [node_at(self.func.body, p).var.name for p in owned]  # type: ignore[attr-defined]
        if loop.name not in names:
            raise ScheduleError(f"{loop} does not exist{did_you_mean(loop.name, names)}; block {loop.block} "
                                f"has loops {', '.join(names) or '(none)'} (a split or fuse renames the loops it replaces)")
        return owned[names.index(loop.name)]

    def _names_near(self, loop_path: Path) -> set[str]:
        """Loop names a new loop replacing the one at ``loop_path`` must avoid: all in the
        loop's own block (nested blocks included) and around it."""
        root = self.func.body
        owner = owner_block(root, loop_path)
        assert owner is not None  # loops are found through the block that owns them
        return loop_var_names(node_at(root, owner)) | {f.var.name for _, f in enclosing_loops(root, owner)}
