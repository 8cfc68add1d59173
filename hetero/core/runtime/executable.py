"""The executable: compiled parts run in order, profiled, saved to and loaded from one file.

An :class:`Executable` holds the interface of the graph it was compiled from and
a list of :class:`Placement` — one compiled part per region, in execution order,
with the backend that compiled it and the transfers it needs first. ``run`` feeds
each part the values it needs from its backend's memory space, performing the
transfers between spaces (:mod:`hetero.core.runtime.transfers`); ``report`` shows
the partition and where the time went, transfers included; ``save`` writes one zip
file (every part's artifact, the partition summary, the transfers) that :func:`load`
turns back into an executable without recompiling (each backend rebuilds its parts
from their artifacts).
"""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph
from hetero.core.plugin.backend import CompiledPart
from hetero.core.runtime.inputs import check_inputs
from hetero.core.runtime.transfers import TransferStep, perform
from hetero.errors import HeteroError, ModelLoadError

FORMAT = "hetero-executable"
FORMAT_VERSION = 1


@dataclass
class Placement:
    """One compiled part and the backend (name and version) that produced it.

    ``region`` names the partition region it runs (``r0``...); ``transfers_in`` are
    the copies into this backend's memory that must happen before it runs.
    """

    backend: str
    backend_version: str
    part: CompiledPart
    region: str = ""
    transfers_in: tuple[TransferStep, ...] = ()


@dataclass(frozen=True)
class CompileFallback:
    """A region whose backend raised while compiling it, compiled by ``fallback`` instead."""

    region: str
    backend: str
    fallback: str
    error: str

    def __str__(self) -> str:
        return f"{self.region}: {self.backend} raised {self.error}; compiled by {self.fallback} instead"


@dataclass
class Interface:
    """The executable's inputs and outputs: names, shapes and dtypes."""

    inputs: list[tuple[str, tuple[int, ...], str]]
    outputs: list[tuple[str, tuple[int, ...], str]]

    @classmethod
    def of(cls, graph: Graph) -> Interface:
        return cls([(v.name, v.shape, v.dtype.name) for v in graph.inputs],
                   [(v.name, v.shape, v.dtype.name) for v in graph.outputs])

    def as_graph(self) -> Graph:
        """A graph with only this interface, for checking inputs."""
        g = Graph("interface")
        for name, shape, dtype in self.inputs:
            g.add_input(name, shape, dtype)
        return g


@dataclass
class _Stats:
    calls: int = 0
    seconds: float = 0.0


@dataclass
class Executable:
    """A compiled model: ``run(inputs)``, ``report()``, ``save(path)``.

    ``partition`` is the partition report as data (``Partition.to_dict``, JSON-safe)
    and ``partition_report`` its text; ``fallbacks`` lists the regions whose backend
    failed to compile them.
    """

    name: str
    interface: Interface
    placements: list[Placement]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    partition: dict[str, Any] = field(default_factory=dict)
    partition_report: str = ""
    fallbacks: list[CompileFallback] = field(default_factory=list)
    _stats: dict[str, _Stats] = field(default_factory=dict, repr=False)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on ``inputs`` (name → array) and return the outputs by name.

        Inputs are checked like the reference executor checks them: a missing,
        extra, wrongly shaped or wrongly typed input is an InputError.
        """
        graph = self.interface.as_graph()
        host: dict[str, np.ndarray] = dict(self.constants)
        for (name, _, _), array in zip(self.interface.inputs, check_inputs(graph, inputs)):
            host[name] = array
        spaces: dict[str, dict[str, np.ndarray]] = {p.backend: {} for p in self.placements}
        where: dict[str, str] = {}
        several = len(self.placements) > 1
        for placement in self.placements:
            for step in placement.transfers_in:
                self._count(step.label, perform(step, spaces))
            part = placement.part
            space = spaces[placement.backend]
            start = time.perf_counter()
            results = part.run({n: space[n] if n in space else host[n] for n in part.inputs})
            elapsed = time.perf_counter() - start
            space.update(results)
            where.update(dict.fromkeys(results, placement.backend))
            # Kernel names are unique within a part, not across parts: prefix the region.
            prefix = f"{placement.region} " if several else ""
            profile = getattr(part, "last_profile", None)
            for kernel, seconds in (profile or [(f"{placement.backend}:part", elapsed)]):
                self._count(prefix + kernel, seconds)
        return {name: spaces[where[name]][name] if name in where else host[name]
                for name, _, _ in self.interface.outputs}

    def _count(self, entry: str, seconds: float) -> None:
        stats = self._stats.setdefault(entry, _Stats())
        stats.calls += 1
        stats.seconds += seconds

    def report(self) -> str:
        """The partition report, any compile fallbacks, then per-kernel and per-transfer
        time and share over every run so far, slowest first; then, for each part with a
        ``report()``, a section "region rN on BACKEND" with its text about the last run."""
        lines = [self.partition_report, ""] if self.partition_report else []
        if self.fallbacks:
            lines += ["compile fallbacks", *(f"  {f}" for f in self.fallbacks), ""]
        if not self._stats:
            return "\n".join([*lines, f"executable {self.name}: not run yet; call run() first"])
        total = sum(s.seconds for s in self._stats.values())
        moving = sum(s.seconds for k, s in self._stats.items() if k.startswith("transfer "))
        lines += [f"executable {self.name}: {len(self._stats)} kernels, "
                  f"{total * 1e3:.3f} ms over {max(s.calls for s in self._stats.values())} run(s)"
                  + (f", of which transfers {moving * 1e3:.3f} ms ({moving / total if total else 0.0:.1%})"
                     if moving else ""),
                  f"{'kernel':<48}{'calls':>6}{'ms/call':>10}{'share':>8}"]
        for kernel, s in sorted(self._stats.items(), key=lambda kv: -kv[1].seconds):
            share = s.seconds / total if total else 0.0
            lines.append(f"{kernel[:47]:<48}{s.calls:>6}{s.seconds / s.calls * 1e3:>10.3f}{share:>8.1%}")
        for placement in self.placements:
            part_report = getattr(placement.part, "report", None)
            if callable(part_report):
                lines += ["", f"region {placement.region or '-'} on {placement.backend}", part_report()]
        return "\n".join(lines)

    def timelines(self) -> dict[str, str]:
        """Each part's last-run execution timeline as an HTML page, by region name,
        for the parts that draw one (``timeline_html``)."""
        if not self._stats:
            raise HeteroError(f"executable {self.name}: no timeline before a run; call run() first")
        return {placement.region or placement.backend: placement.part.timeline_html()
                for placement in self.placements if callable(getattr(placement.part, "timeline_html", None))}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write everything needed to run again into one zip file at ``path``."""
        from hetero import __version__

        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "hetero_version": __version__,
            "name": self.name,
            "inputs": [[n, list(s), d] for n, s, d in self.interface.inputs],
            "outputs": [[n, list(s), d] for n, s, d in self.interface.outputs],
            "parts": [
                {"backend": p.backend, "backend_version": p.backend_version,
                 "inputs": list(p.part.inputs), "outputs": list(p.part.outputs),
                 "artifact": f"parts/{i}.bin", "region": p.region,
                 "transfers_in": [[t.value, t.src, t.dst] for t in p.transfers_in]}
                for i, p in enumerate(self.placements)
            ],
            "partition": self.partition,
            "partition_report": self.partition_report,
            "fallbacks": [[f.region, f.backend, f.fallback, f.error] for f in self.fallbacks],
        }
        buffer = io.BytesIO()
        np.savez(buffer, **{f"c{i}": a for i, a in enumerate(self.constants.values())})
        manifest["constants"] = list(self.constants)
        tmp = f"{os.fspath(path)}.tmp"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("manifest.json", json.dumps(manifest, indent=2))
            zf.writestr("constants.npz", buffer.getvalue())
            for i, p in enumerate(self.placements):
                zf.writestr(f"parts/{i}.bin", p.part.artifact)
        os.replace(tmp, path)  # a reader never sees half a file


def load(path: str | os.PathLike[str]) -> Executable:
    """Rebuild an executable saved with :meth:`Executable.save`, without recompiling."""
    from hetero.core.plugin.manager import get_backend

    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelLoadError(f"{path}: not a saved hetero executable ({exc})") from None
    with zf:
        try:
            manifest = json.loads(zf.read("manifest.json"))
        except (KeyError, ValueError) as exc:
            raise ModelLoadError(f"{path}: no readable manifest.json ({exc})") from None
        if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
            raise ModelLoadError(
                f"{path}: format {manifest.get('format')} v{manifest.get('format_version')} is not "
                f"{FORMAT} v{FORMAT_VERSION}; recompile the model with this hetero"
            )
        with np.load(io.BytesIO(zf.read("constants.npz"))) as npz:
            constants = {name: npz[f"c{i}"] for i, name in enumerate(manifest["constants"])}
        placements = []
        for entry in manifest["parts"]:
            backend = get_backend(entry["backend"])
            if backend.version != entry["backend_version"]:
                raise HeteroError(
                    f"{path}: compiled by {entry['backend']} {entry['backend_version']}, "
                    f"installed is {backend.version}; recompile the model"
                )
            part = backend.load_artifact(zf.read(entry["artifact"]))
            # Files saved before partitioned compiles lack the region keys: one part, no transfers.
            steps = tuple(TransferStep(*t) for t in entry.get("transfers_in", ()))
            placements.append(Placement(entry["backend"], entry["backend_version"], part,
                                        entry.get("region", ""), steps))
    interface = Interface([(n, tuple(s), d) for n, s, d in manifest["inputs"]],
                          [(n, tuple(s), d) for n, s, d in manifest["outputs"]])
    return Executable(manifest["name"], interface, placements, constants,
                      manifest.get("partition", {}), manifest.get("partition_report", ""),
                      [CompileFallback(*f) for f in manifest.get("fallbacks", ())])
