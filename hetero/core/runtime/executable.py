"""The executable: compiled parts run in order, profiled, saved to and loaded from one file.

An :class:`Executable` holds the graph it was compiled from (for its interface) and
a list of :class:`Placement` — one compiled part per region, with the backend that
compiled it. ``run`` feeds each part the values it needs; ``report`` shows where the
time went; ``save`` writes one zip file that :func:`load` turns back into an
executable without recompiling (each backend rebuilds its parts from their
artifacts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import io
import json
import os
import time
from typing import Any
import zipfile

import numpy as np

from hetero.core.ir.graph import Graph
from hetero.core.plugin.backend import CompiledPart
from hetero.core.runtime.inputs import check_inputs
from hetero.errors import HeteroError, ModelLoadError

FORMAT = "hetero-executable"
FORMAT_VERSION = 1


@dataclass
class Placement:
    """One compiled part and the backend (name and version) that produced it."""

    backend: str
    backend_version: str
    part: CompiledPart


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
    """A compiled model: ``run(inputs)``, ``report()``, ``save(path)``."""

    name: str
    interface: Interface
    placements: list[Placement]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    _stats: dict[str, _Stats] = field(default_factory=dict, repr=False)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on ``inputs`` (name → array) and return the outputs by name.

        Inputs are checked like the reference executor checks them: a missing,
        extra, wrongly shaped or wrongly typed input is an InputError.
        """
        graph = self.interface.as_graph()
        env: dict[str, np.ndarray] = dict(self.constants)
        for (name, _, _), array in zip(self.interface.inputs, check_inputs(graph, inputs)):
            env[name] = array
        for placement in self.placements:
            part = placement.part
            start = time.perf_counter()
            results = part.run({n: env[n] for n in part.inputs})
            elapsed = time.perf_counter() - start
            env.update(results)
            profile = getattr(part, "last_profile", None)
            for kernel, seconds in (profile or [(f"{placement.backend}:part", elapsed)]):
                stats = self._stats.setdefault(kernel, _Stats())
                stats.calls += 1
                stats.seconds += seconds
        return {name: env[name] for name, _, _ in self.interface.outputs}

    def report(self) -> str:
        """Per-kernel time and share over every run so far, slowest first."""
        if not self._stats:
            return f"executable {self.name}: not run yet; call run() first"
        total = sum(s.seconds for s in self._stats.values())
        lines = [f"executable {self.name}: {len(self._stats)} kernels, "
                 f"{total * 1e3:.3f} ms over {max(s.calls for s in self._stats.values())} run(s)",
                 f"{'kernel':<48}{'calls':>6}{'ms/call':>10}{'share':>8}"]
        for kernel, s in sorted(self._stats.items(), key=lambda kv: -kv[1].seconds):
            share = s.seconds / total if total else 0.0
            lines.append(f"{kernel[:47]:<48}{s.calls:>6}{s.seconds / s.calls * 1e3:>10.3f}{share:>8.1%}")
        return "\n".join(lines)

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
                 "artifact": f"parts/{i}.bin"}
                for i, p in enumerate(self.placements)
            ],
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
            placements.append(Placement(entry["backend"], entry["backend_version"], part))
    interface = Interface([(n, tuple(s), d) for n, s, d in manifest["inputs"]],
                          [(n, tuple(s), d) for n, s, d in manifest["outputs"]])
    return Executable(manifest["name"], interface, placements, constants)
