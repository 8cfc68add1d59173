"""Backends written for an older plugin API: how their hooks are read, and how they run.

The hooks' arguments changed once. Plugin API 1 called ``supports(node)``,
``estimate(subgraph)``, ``compile(subgraph, options)`` (a mapping of option values)
and a pattern's ``check(match)``; API 2 gives each the backend's
:class:`~hetero.core.plugin.target.Target` instead: ``supports(node, target)``,
``estimate(subgraph, target)``, ``compile(subgraph, target)`` and
``check(match, target)``. API 3 keeps API 2's hooks.

:func:`review_hooks` reads each hook's parameter *names*, not their count (API 1's
``compile(subgraph, options)`` has as many as API 2's): the first parameter's name
is free, the second is the target unless it is named ``options``, ``opts`` or
``config`` (API 1's compile), and a hook with ``*args`` takes whatever it is given.
A hook in an API 1 form is a :class:`HookChange`; one that matches no form of any
plugin API is a problem, and :func:`~hetero.core.plugin.backend.validate_backend`
reports the backend broken with every such hook listed.

A backend whose hooks are all in the current form or in an API 1 form runs
*adapted*: the plugin manager hands the core an :class:`AdaptedBackend` that
takes the current forms and calls the backend's own, so the core calls every hook
in the current form only, and the plugin's own code still sees itself as it was
written (its ``self`` is the plugin's object, which calls its own hooks in its own
forms). The manager warns with a :class:`DeprecationWarning` whose message,
:func:`deprecation_message`, names every change and what to write instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.pattern import Match
from hetero.core.plugin.backend import API_VERSION, Backend, CompiledPart, Pattern, Support
from hetero.core.plugin.target import Declarations, Target

#: Where the guide says how to update each hook.
MIGRATION_GUIDE = "'Migrating from API 1 and 2' in docs/plugin-guide.md"

#: The names API 1 gave compile's mapping of options.
OPTION_NAMES = frozenset({"options", "opts", "config"})

#: Each hook's current parameters after ``self``.
CURRENT = {"supports": ("node", "target"), "estimate": ("subgraph", "target"),
           "compile": ("subgraph", "target"), "check": ("match", "target")}


@dataclass(frozen=True)
class HookChange:
    """One hook in an API 1 form: where it is, how it reads now, and what to write instead."""

    hook: str
    written: str
    instead: str
    pattern: str | None = None

    def __str__(self) -> str:
        where = f"pattern {self.pattern!r} " if self.pattern is not None else ""
        return f"{where}{self.written} -> write {self.instead}"


@dataclass(frozen=True)
class HookReview:
    """What :func:`review_hooks` found: the hooks in an API 1 form (``changes``), which
    the manager adapts, and the hooks that match no form (``problems``, one sentence each)."""

    changes: tuple[HookChange, ...] = ()
    problems: tuple[str, ...] = ()


def review_hooks(backend: Backend) -> HookReview:
    """Read ``backend``'s ``supports``, ``estimate`` and ``compile`` and its patterns' checks.

    A hook hetero cannot read (a builtin without a signature) is taken as it is.
    """
    found = [_form(hook, getattr(backend, hook)) for hook in ("supports", "estimate", "compile")]
    patterns = backend.patterns
    if isinstance(patterns, Sequence) and not isinstance(patterns, str):
        found += [_form("check", p.check, p.name) for p in patterns
                  if isinstance(p, Pattern) and p.check is not None]
    return HookReview(tuple(f for f in found if isinstance(f, HookChange)),
                      tuple(f for f in found if isinstance(f, str)))


def _form(hook: str, function: Callable[..., Any], pattern: str | None = None) -> HookChange | str | None:
    """How ``function``, written for ``hook``, reads: None in the current form (or one that
    takes ``*args``), a :class:`HookChange` in an API 1 form, else the problem."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    params = list(signature.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    bound = ["self"] if inspect.ismethod(function) else []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in positional]
    written = f"{hook}({', '.join([*bound, *_rendered(params)])})"
    instead = f"{hook}({', '.join([*bound, names[0] if names else CURRENT[hook][0], 'target'])})"
    required = [p.name for p in positional if p.default is p.empty]
    keywords = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    calls = f"{hook}({', '.join(CURRENT[hook])})"
    if keywords:
        problem = (f"requires {', '.join(keywords)} by keyword, which hetero never passes: "
                   "give it a default or remove it")
    elif len(required) > 2:
        problem = (f"leaves {', '.join(required[2:])} unset when hetero calls {calls}: "
                   "give it a default or remove it")
    elif len(positional) >= 2 and names[1] in OPTION_NAMES:
        if hook == "compile":
            return HookChange(hook, written, f"{instead} and read {names[1]} from target.options", pattern)
        problem = f"takes {names[1]} where hetero passes the target ({calls}): write {instead}"
    elif len(positional) >= 2:
        return None  # the current form, whatever its first two parameters are called
    elif len(positional) == 1 and hook != "compile":
        return HookChange(hook, written, instead, pattern)
    else:
        problem = f"cannot take what hetero passes ({calls}): write {instead}"
    where = f"pattern {pattern!r} " if pattern is not None else ""
    return f"{where}{written} {problem}"


def _rendered(params: Sequence[inspect.Parameter]) -> list[str]:
    """The parameters as a reader wrote them, without annotations or default values."""
    out: list[str] = []
    for p in params:
        if p.kind is p.KEYWORD_ONLY and "*" not in out:
            out.append("*")
        out.append(("**" if p.kind is p.VAR_KEYWORD else "") + p.name
                   + ("=..." if p.default is not p.empty else ""))
    return out


def deprecation_message(backend: str, changes: Sequence[HookChange]) -> str:
    """Why ``backend`` runs adapted: every change, each with what to write instead, and
    where the guide says more."""
    return (f"backend {backend!r} uses plugin API 1 hooks, which hetero adapts to API {API_VERSION} "
            f"for now: {'; '.join(str(c) for c in changes)}. See {MIGRATION_GUIDE}")


class AdaptedBackend:
    """A backend whose hooks are in API 1's forms, seen through the current ones.

    ``supports(node, target)`` calls the backend's ``supports(node)``,
    ``estimate(subgraph, target)`` its ``estimate(subgraph)``,
    ``compile(subgraph, target)`` its ``compile(subgraph, dict(target.options))`` (API 1
    passed a mapping of options), and a pattern's ``check(match, target)`` its
    ``check(match)``; a hook already in the current form is called as it is.
    Everything else (declarations, ``load_artifact``, ``device_status``, the tuning
    hooks) is the backend's own. It is a :class:`Backend` for ``isinstance``
    (registered as a virtual subclass), so the core treats it as any other.
    """

    def __init__(self, backend: Backend, changes: Sequence[HookChange]) -> None:
        #: The backend as its plugin wrote it.
        self.wrapped = backend
        #: The changes adapted, in the order :func:`review_hooks` found them.
        self.adaptations = tuple(changes)
        self._old = frozenset(c.hook for c in self.adaptations if c.pattern is None)
        self._patterns = tuple(adapt_pattern(p) for p in backend.patterns)

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def supports(self, node: Node, target: Target) -> Support:
        """The backend's ``supports``, in the form it was written in."""
        if "supports" in self._old:
            return self.wrapped.supports(node)  # type: ignore[call-arg]
        return self.wrapped.supports(node, target)

    def estimate(self, subgraph: Graph, target: Target) -> float:
        """The backend's ``estimate``, in the form it was written in."""
        if "estimate" in self._old:
            return self.wrapped.estimate(subgraph)  # type: ignore[call-arg]
        return self.wrapped.estimate(subgraph, target)

    def compile(self, subgraph: Graph, target: Target) -> CompiledPart:
        """The backend's ``compile``: API 1's took the option values as a dict."""
        if "compile" in self._old:
            return self.wrapped.compile(subgraph, dict(target.options))  # type: ignore[arg-type]
        return self.wrapped.compile(subgraph, target)

    @property
    def patterns(self) -> tuple[Pattern, ...]:
        """The backend's patterns, each check in the current form."""
        return self._patterns

    def declare(self, options: Mapping[str, Any]) -> Declarations:
        """The backend's declarations under ``options``, its patterns' checks adapted."""
        declared = self.wrapped.declare(options)
        if not isinstance(declared, Declarations):
            return declared  # bind() reports it against the backend
        return replace(declared, patterns=tuple(adapt_pattern(p) for p in declared.patterns))

    def __repr__(self) -> str:
        return f"{self.wrapped!r} (adapted from plugin API 1)"


Backend.register(AdaptedBackend)


def adapt_pattern(pattern: Pattern) -> Pattern:
    """``pattern`` with a ``check(match)`` called as ``check(match, target)``; as it is otherwise."""
    old = pattern.check
    if old is None or not isinstance(_form("check", old, pattern.name), HookChange):
        return pattern

    def check(match: Match, target: Target) -> Support:
        return old(match)  # type: ignore[call-arg]

    return replace(pattern, check=check)


def adapted(backend: Backend, changes: Sequence[HookChange]) -> Backend:
    """``backend`` as the core calls it: itself when ``changes`` is empty, else adapted."""
    return AdaptedBackend(backend, changes) if changes else backend  # type: ignore[return-value]


def adaptations_of(backend: object) -> tuple[HookChange, ...]:
    """The changes hetero adapts for ``backend``; empty for a backend in the current form."""
    return backend.adaptations if isinstance(backend, AdaptedBackend) else ()
