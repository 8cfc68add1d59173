"""What ``hetero plugins`` shows: a text table for people, a JSON-ready dict for tools."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from hetero.core.plugin.manager import ENTRY_POINT_GROUP, PluginSet


def describe_plugins(plugins: PluginSet) -> dict[str, Any]:
    """Every backend's declarations and every plugin's record, as JSON-ready data."""
    backends = []
    for name, backend in plugins.backends.items():
        record = plugins.provided_by[name]
        backends.append({
            "name": name,
            "version": backend.version,
            "device_kind": backend.device_kind,
            "plugin": record.name,
            "distribution": record.distribution,
            "distribution_version": record.version,
            "peak_gflops": backend.peak_gflops,
            "ops": sorted(backend.supported_ops),
            "patterns": [{"name": p.name, "pattern": repr(p.pattern)} for p in backend.patterns],
            "memory": [asdict(level) for level in backend.memory or ()],
        })
    records = [
        {
            "name": r.name,
            "target": r.target,
            "distribution": r.distribution,
            "version": r.version,
            "status": r.status,
            "backends": list(r.backends),
            "error": r.error,
            "disabled_by": r.disabled_by,
            "traceback": r.traceback,
        }
        for r in plugins.records
    ]
    return {
        "entry_point_group": ENTRY_POINT_GROUP,
        "backends": backends,
        "plugins": records,
        "selection_problems": list(plugins.selection_problems),
    }


def format_plugins(plugins: PluginSet) -> str:
    """The text form: a table of backends, then the broken and the disabled plugins."""
    if not plugins.records and not plugins.selection_problems:
        return (
            "No hetero plugins are installed.\n"
            f"Backends come from packages that declare the {ENTRY_POINT_GROUP!r} entry point "
            "(see hetero.core.plugin.hookspecs)."
        )
    lines: list[str] = []
    if plugins.backends:
        rows = [("backend", "version", "distribution", "device", "ops", "memory")]
        for name, backend in plugins.backends.items():
            record = plugins.provided_by[name]
            rows.append((
                name,
                backend.version,
                f"{record.distribution} {record.version}",
                backend.device_kind,
                str(len(backend.supported_ops)),
                backend.memory.summary() if backend.memory is not None else "-",
            ))
        lines.append(f"Backends ({len(rows) - 1}):")
        lines += ["  " + line for line in _table(rows)]
    else:
        lines.append("No backends are available.")
    if plugins.broken:
        lines.append("")
        lines.append(f"Broken plugins ({len(plugins.broken)}), skipped:")
        lines += [f"  {r.label}: {r.error}" for r in plugins.broken]
    if plugins.disabled:
        lines.append("")
        lines.append(f"Disabled plugins ({len(plugins.disabled)}):")
        lines += [f"  {r.label}: disabled by {r.disabled_by}" for r in plugins.disabled]
    if plugins.selection_problems:
        lines.append("")
        lines.append("Plugin selection:")
        lines += [f"  {problem}" for problem in plugins.selection_problems]
    return "\n".join(lines)


def format_backend(plugins: PluginSet, name: str) -> str:
    """One backend in detail: where it comes from, its ops, patterns and memory hierarchy.

    An unknown ``name`` raises UnknownBackendError with a did-you-mean.
    """
    backend = plugins.get(name)
    record = plugins.provided_by[name]
    lines = [
        f"backend       {name} {backend.version} ({backend.device_kind})",
        f"plugin        {record.label}",
        f"peak          {backend.peak_gflops:g} GFLOP/s",
        f"ops ({len(backend.supported_ops)})".ljust(14) + ", ".join(sorted(backend.supported_ops)),
    ]
    if backend.patterns:
        lines.append("patterns")
        lines += [f"  {p.name}: {p.pattern!r}" for p in backend.patterns]
    if backend.memory is not None:
        lines.append("memory")
        lines += ["  " + line for line in str(backend.memory).splitlines()]
    return "\n".join(lines)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
