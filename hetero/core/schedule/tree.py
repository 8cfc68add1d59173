"""Addressing statements in an immutable loop tree by path, and rebuilding it around them.

A *path* is the tuple of child positions from the function body down to a statement
(``For``, ``Allocate`` and ``Block`` have one child, ``Seq`` one per statement,
``IfThenElse`` its branches). Schedule primitives find what they change by path and
rebuild only the spine above it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from hetero.core.ir.tir.expr import Var
from hetero.core.ir.tir.stmt import (
    Allocate,
    Block,
    For,
    IfThenElse,
    Seq,
    Stmt,
    Store,
    seq,
)

Path = tuple[int, ...]


def children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly under ``s``."""
    if isinstance(s, (For, Allocate, Block)):
        return (s.body,)
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, IfThenElse):
        return (s.then,) if s.otherwise is None else (s.then, s.otherwise)
    return ()


def with_children(s: Stmt, kids: tuple[Stmt, ...]) -> Stmt:
    """``s`` with its direct children replaced by ``kids`` (same count)."""
    if isinstance(s, (For, Allocate, Block)):
        return dataclasses.replace(s, body=kids[0])
    if isinstance(s, Seq):
        return seq(*kids)
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, kids[0], kids[1] if len(kids) > 1 else None)
    return s


def node_at(root: Stmt, path: Path) -> Stmt:
    """The statement at ``path`` under ``root``."""
    for k in path:
        root = children(root)[k]
    return root


def replace_at(root: Stmt, path: Path, new: Stmt) -> Stmt:
    """``root`` with the statement at ``path`` replaced by ``new``."""
    if not path:
        return new
    kids = list(children(root))
    kids[path[0]] = replace_at(kids[path[0]], path[1:], new)
    return with_children(root, tuple(kids))


def remove_at(root: Stmt, path: Path) -> Stmt:
    """``root`` without the statement at ``path``, which must sit in a ``Seq``."""
    parent = node_at(root, path[:-1])
    assert isinstance(parent, Seq)
    rest = parent.stmts[:path[-1]] + parent.stmts[path[-1] + 1:]
    return replace_at(root, path[:-1], seq(*rest))


def paths(root: Stmt, prefix: Path = (), into_blocks: bool = True) -> Iterator[tuple[Path, Stmt]]:
    """Every ``(path, statement)`` under ``root``, pre-order (program order).

    With ``into_blocks=False`` nested blocks are yielded but not entered.
    """
    yield prefix, root
    if not into_blocks and isinstance(root, Block) and prefix:
        return
    for k, kid in enumerate(children(root)):
        yield from paths(kid, prefix + (k,), into_blocks)


def find_block(root: Stmt, name: str) -> Path | None:
    """The path of the block called ``name``, or None."""
    for path, s in paths(root):
        if isinstance(s, Block) and s.name == name:
            return path
    return None


def block_names(root: Stmt) -> list[str]:
    """Every block's name, in program order."""
    return [s.name for _, s in paths(root) if isinstance(s, Block)]


def owned_loops(root: Stmt, block_path: Path) -> list[Path]:
    """Paths of the loops a block owns (inside it, not inside a nested block), pre-order."""
    block = node_at(root, block_path)
    return [block_path + p for p, s in paths(block, into_blocks=False) if isinstance(s, For)]


def ancestors(root: Stmt, path: Path) -> list[tuple[Path, Stmt]]:
    """The statements strictly above ``path``, outermost first."""
    return [(path[:k], node_at(root, path[:k])) for k in range(len(path))]


def enclosing_loops(root: Stmt, path: Path) -> list[tuple[Path, For]]:
    """The loops strictly above ``path``, outermost first."""
    return [(p, s) for p, s in ancestors(root, path) if isinstance(s, For)]


def owner_block(root: Stmt, path: Path) -> Path | None:
    """The path of the innermost block strictly above ``path``."""
    found = [p for p, s in ancestors(root, path) if isinstance(s, Block)]
    return found[-1] if found else None


def loop_var_names(stmt: Stmt) -> set[str]:
    """Names of every loop variable bound under ``stmt``."""
    return {s.var.name for _, s in paths(stmt) if isinstance(s, For)}


def buffers_allocated(stmt: Stmt) -> set[str]:
    """Names of every buffer allocated under ``stmt``."""
    return {s.buffer.name for _, s in paths(stmt) if isinstance(s, Allocate)}


def stores(stmt: Stmt) -> Iterator[tuple[Path, Store]]:
    """Every store under ``stmt`` with its path, in program order."""
    for path, s in paths(stmt):
        if isinstance(s, Store):
            yield path, s


def unique_name(base: str, used: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``... whichever is first not in ``used``."""
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    return name


def fresh_var(base: str, used: set[str]) -> Var:
    """A new index variable named after ``base``, its name added to ``used``."""
    name = unique_name(base, used)
    used.add(name)
    return Var(name)
