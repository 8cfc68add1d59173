"""The executable: compiled parts run in order, profiled, saved to and loaded from one file.

An :class:`Executable` holds the interface of the graph it was compiled from and
a list of :class:`Placement` — one compiled part per region, in execution order,
with the backend that compiled it and the partition's transfers around it
(:mod:`hetero.core.partition.transfers`). ``run`` keeps every value on the device of
the part that produced it (:mod:`hetero.core.exec.device`; the host for parts
that declare none), so consecutive parts on one device hand values over in place;
it performs each transfer between two devices, timed, and returns the graph outputs
as host arrays. It checks that each part returned every output its subgraph
declares, as arrays of its device in the declared shape and dtype; ``report`` shows
the partition and where the time went, transfers included;
``save`` writes one file that :func:`load` turns back into an executable without
recompiling (each backend rebuilds its parts from their artifacts).

The file is :data:`MAGIC`, a seal (:mod:`hetero.core.runtime.signing`), then a zip of
``manifest.json``, ``constants.npz`` and ``parts/N.bin`` (every part's artifact),
written deterministically (:mod:`hetero.core.exec.archive`). :func:`load` checks
the seal before it reads anything else, so only executables this user's hetero
saved reach a backend's loader; :func:`trust` signs one from elsewhere.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetero import _version
from hetero.core.exec.archive import (
    MANIFEST_LIMIT, npz_bytes, open_zip, read_member, read_npz, read_regular_file, write_atomically,
    write_zip,
)
from hetero.core.exec.device import HOST, Device, transfer
from hetero.core.exec.inputs import check_inputs
from hetero.core.ir.graph import Graph
from hetero.core.ir.types import as_dtype
from hetero.core.partition.transfers import TransferStep, plan_transfers
from hetero.core.plugin.backend import Backend, CompiledPart
from hetero.core.plugin.capabilities import DrawsTimeline, Profiles, Reports, device_of
from hetero.core.runtime.signing import SEAL_SIZE, check_seal, key_path, seal
from hetero.errors import DamagedFileError, HeteroError, Keyword, ModelLoadError, PluginError, SignatureError

FORMAT = "hetero-executable"
FORMAT_VERSION = 1
#: What a saved executable starts with: then its seal, then the zip it signs.
MAGIC = b"HETEROX1"
_PURPOSE = "hetero-executable/1"

#: A value's name, shape and dtype name, as an interface lists them.
ValueType = tuple[str, tuple[int, ...], str]


@dataclass
class Placement:
    """One compiled part and the backend (name and version) that produced it.

    ``region`` names the partition region it runs (``r0``...); ``transfers_in`` are
    the copies into this backend's memory that must happen before it runs, and
    ``transfers_out`` those of the graph outputs it produces back to the host, right
    after it runs; ``output_types`` are the outputs its subgraph declares, which every
    run checks the part's results against (empty: the names in ``part.outputs`` only);
    ``cache_key`` is the key of the compile-cache entry that holds the part, when it
    was compiled through a cache (a model entry names its parts by it).
    """

    backend: str
    backend_version: str
    part: CompiledPart
    region: str = ""
    transfers_in: tuple[TransferStep, ...] = ()
    output_types: tuple[ValueType, ...] = ()
    transfers_out: tuple[TransferStep, ...] = ()
    cache_key: str | None = None


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

    inputs: list[ValueType]
    outputs: list[ValueType]

    @classmethod
    def of(cls, graph: Graph) -> Interface:
        return cls([(v.name, v.shape, v.dtype.name) for v in graph.inputs],
                   [(v.name, v.shape, v.dtype.name) for v in graph.outputs])

    def as_graph(self, name: str = "interface") -> Graph:
        """A graph named ``name`` with only this interface, for checking inputs."""
        g = Graph(name)
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
    _interface_graph: Graph | None = field(default=None, repr=False, compare=False)
    _interface_of: Interface | None = field(default=None, repr=False, compare=False)
    # Per part (by identity): its device and whether it profiles itself. Protocol
    # isinstance checks cost some 10 us each, too much to repeat on every run.
    _traits: dict[int, tuple[Any, Device, bool]] = field(default_factory=dict, repr=False, compare=False)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on ``inputs`` (name → array) and return the outputs by name.

        Inputs are checked like the reference executor checks them: a missing,
        extra, wrongly shaped or wrongly typed input is an InputError.
        """
        graph = self._interface_graph
        if graph is None or self._interface_of is not self.interface:
            graph = self._interface_graph = self.interface.as_graph(self.name)
            self._interface_of = self.interface
        host: dict[str, Any] = dict(self.constants)
        for (name, _, _), array in zip(self.interface.inputs, check_inputs(graph, inputs)):
            host[name] = array
        # Each device's values by name; ``made_on`` says where each produced value was made.
        spaces: dict[str, dict[str, Any]] = {HOST.name: host}
        made_on: dict[str, Device] = {}
        several = len(self.placements) > 1
        for placement in self.placements:
            part = placement.part
            device, profiles = self._part_traits(part)
            space = spaces.setdefault(device.name, {})
            for step in placement.transfers_in:
                self._move(step, made_on, spaces, device)
            missing = [n for n in part.inputs if n not in space]
            if missing:
                raise HeteroError(f"executable {self.name}: region {placement.region or '-'} on "
                                  f"{placement.backend} reads {missing[0]!r}, which no transfer brought "
                                  f"to device {device.name}; recompile the model")
            start = time.perf_counter()
            try:
                results = part.run({n: space[n] for n in part.inputs})
            except HeteroError:
                raise  # already names what is wrong (an index out of range, a device missing)
            except Exception as exc:
                raise PluginError(self._failure(placement, exc)) from exc
            elapsed = time.perf_counter() - start
            _check_results(placement, results, device)
            space.update(results)
            made_on.update(dict.fromkeys(results, device))
            for step in placement.transfers_out:
                self._move(step, made_on, spaces, HOST)
            # Kernel names are unique within a part, not across parts: prefix the region.
            prefix = f"{placement.region} " if several else ""
            profile = part.last_profile if profiles else None
            for kernel, seconds in (profile or [(f"{placement.backend}:part", elapsed)]):
                self._count(prefix + kernel, seconds)
        outputs = {}
        for name, _, _ in self.interface.outputs:
            if name not in host:
                where = f"stays on device {made_on[name].name}" if name in made_on else "is made by no part"
                raise HeteroError(f"executable {self.name}: graph output {name!r} {where}, and no transfer "
                                  "brings it to the host; recompile the model")
            outputs[name] = host[name]
        return outputs

    def _failure(self, placement: Placement, exc: Exception) -> str:
        """What to say when ``placement``'s part raised ``exc`` (not a HeteroError) running."""
        nodes = next((r.get("nodes", []) for r in self.partition.get("regions", [])
                      if r.get("name") == placement.region), [])
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        return (f"backend {placement.backend} failed running region {placement.region or '-'}"
                f"{f' (nodes {shown})' if shown else ''}: {type(exc).__name__}: {exc}; this is a bug in "
                f"{placement.backend}: report it to its authors, and compile without that target meanwhile")

    def _move(self, step: TransferStep, made_on: Mapping[str, Device],
              spaces: dict[str, dict[str, Any]], dst: Device) -> None:
        """Perform ``step`` onto device ``dst``, timed under its label, unless the value
        is there already (made there, or moved there before)."""
        into = spaces.setdefault(dst.name, {})
        if step.value in into:
            return
        src = made_on.get(step.value, HOST)
        start = time.perf_counter()
        into[step.value] = transfer(spaces[src.name][step.value], src, dst)
        self._count(step.label, time.perf_counter() - start)

    def _part_traits(self, part: Any) -> tuple[Device, bool]:
        """``part``'s device and whether it keeps its own profile, worked out once."""
        known = self._traits.get(id(part))
        if known is None or known[0] is not part:
            known = self._traits[id(part)] = (part, device_of(part), isinstance(part, Profiles))
        return known[1], known[2]

    def _count(self, entry: str, seconds: float) -> None:
        stats = self._stats.get(entry)
        if stats is None:
            stats = self._stats[entry] = _Stats()
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
            if isinstance(placement.part, Reports):
                lines += ["", f"region {placement.region or '-'} on {placement.backend}", placement.part.report()]
        return "\n".join(lines)

    def timelines(self) -> dict[str, str]:
        """Each part's last-run execution timeline as an HTML page, by region name,
        for the parts that draw one (:class:`~hetero.core.plugin.capabilities.DrawsTimeline`)."""
        if not self._stats:
            raise HeteroError(f"executable {self.name}: no timeline before a run; call run() first")
        return {placement.region or placement.backend: placement.part.timeline_html()
                for placement in self.placements if isinstance(placement.part, DrawsTimeline)}

    def manifest(self, artifacts: list[str]) -> dict[str, Any]:
        """What :func:`rebuild` needs besides the constants and the parts, as JSON data:
        each part's entry names its artifact as ``artifacts`` gives it (a member of a
        saved file, a compile-cache key)."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "hetero_version": _version.__version__,
            "name": self.name,
            "inputs": [[n, list(s), d] for n, s, d in self.interface.inputs],
            "outputs": [[n, list(s), d] for n, s, d in self.interface.outputs],
            "parts": [
                {"backend": p.backend, "backend_version": p.backend_version,
                 "inputs": list(p.part.inputs), "outputs": list(p.part.outputs),
                 "output_types": [[n, list(s), d] for n, s, d in p.output_types],
                 "artifact": artifact, "region": p.region,
                 "transfers_in": [[t.value, t.src, t.dst] for t in p.transfers_in],
                 "transfers_out": [[t.value, t.src, t.dst] for t in p.transfers_out]}
                for p, artifact in zip(self.placements, artifacts, strict=True)
            ],
            "partition": self.partition,
            "partition_report": self.partition_report,
            "fallbacks": [[f.region, f.backend, f.fallback, f.error] for f in self.fallbacks],
            "constants": list(self.constants),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write everything needed to run again into one file at ``path``, signed with
        this user's key (:mod:`hetero.core.runtime.signing`) so that :func:`load` accepts
        it. The same executable always gives the same bytes."""
        payload = write_zip([
            ("manifest.json", json.dumps(self.manifest([f"parts/{i}.bin" for i in range(len(self.placements))]),
                                         indent=2)),
            ("constants.npz", npz_bytes({f"c{i}": a for i, a in enumerate(self.constants.values())})),
            *((f"parts/{i}.bin", p.part.artifact) for i, p in enumerate(self.placements)),
        ])
        write_atomically(path, MAGIC + seal(_PURPOSE, payload) + payload)


@functools.lru_cache(maxsize=None)
def _dtype(name: str) -> np.dtype:
    return as_dtype(name)


def _check_results(placement: Placement, results: Any, device: Device) -> None:
    """Raise PluginError, naming the backend, region and output, unless ``results`` has
    every output of the placement's subgraph as an array of ``device`` in its declared
    shape and dtype."""
    where = f"backend {placement.backend} (region {placement.region or '-'})"
    fix = (f"this is a bug in {placement.backend}: report it to its authors, and compile without "
           "that target meanwhile")
    if not isinstance(results, Mapping):
        raise PluginError(f"{where} returned a {type(results).__name__}, not a dict of output arrays "
                          f"by name; {fix}")
    declared = placement.output_types or tuple((name, None, None) for name in placement.part.outputs)
    for name, shape, dtype in declared:
        if name not in results:
            raise PluginError(f"{where} returned no output {name!r} (it returned {sorted(results)}); {fix}")
        value = results[name]
        described = device.describe(value)
        if described is None:
            kind = "a numpy array" if device.name == HOST.name else f"an array of its device {device.name}"
            raise PluginError(f"{where} returned output {name!r} as a {type(value).__name__}, "
                              f"not {kind}; {fix}")
        got_shape, got_dtype = described
        if shape is not None and (tuple(got_shape) != tuple(shape) or got_dtype != _dtype(dtype)):
            raise PluginError(f"{where} returned output {name!r} as {got_dtype.name}{list(got_shape)}, "
                              f"its subgraph declares {dtype}{list(shape)}; {fix}")
    if len(results) != len(declared):
        extra = sorted(set(results) - {name for name, _, _ in declared})
        if extra:
            raise PluginError(f"{where} returned output(s) {extra} that its subgraph does not have (it has "
                              f"{[name for name, _, _ in declared]}); {fix}")


def load(path: str | os.PathLike[str]) -> Executable:
    """Rebuild an executable saved with :meth:`Executable.save`, without recompiling.

    A saved executable holds native code, and running it runs whatever its author
    put there, so ``load`` trusts only files signed with this user's key (made on
    first use in ``~/.config/hetero/signing.key``, or ``$HETERO_SIGNING_KEY_FILE``):
    the signature is checked before any byte of the file is parsed or handed to a
    backend. A file with no signature (from an older hetero, or not written by
    ``save``), one signed with another key (another user's or machine's) or one
    changed since it was signed raises :class:`~hetero.errors.SignatureError`:
    recompile the model, or, for a file whose author you trust, sign it with
    :func:`trust`. A damaged file (truncated, malformed, a FIFO in its place) raises
    :class:`~hetero.errors.DamagedFileError`; both name the file and what to do.
    """
    source = os.fspath(path)
    payload = _verified_payload(source)
    with open_zip(payload, source) as zf:
        try:
            manifest = json.loads(read_member(zf, "manifest.json", source, MANIFEST_LIMIT))
        except (ValueError, UnicodeDecodeError) as exc:
            raise DamagedFileError(f"{source}: manifest.json is not JSON ({exc}); recompile the model") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT \
                or manifest.get("format_version") != FORMAT_VERSION:
            got = manifest if not isinstance(manifest, dict) else \
                f"{manifest.get('format')} v{manifest.get('format_version')}"
            raise ModelLoadError(f"{source}: format {got} is not {FORMAT} v{FORMAT_VERSION}; "
                                 "recompile the model with this hetero")
        try:
            return _rebuild(manifest, zf, source)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise DamagedFileError(f"{source}: manifest.json is incomplete or malformed "
                                   f"({type(exc).__name__}: {exc}); recompile the model") from None


def _verified_payload(source: str) -> bytes:
    """The zip inside the executable file ``source``, once its seal has been checked."""
    try:
        data = read_regular_file(source, "saved hetero executable")
    except OSError as exc:
        raise ModelLoadError(f"{source}: not a saved hetero executable ({exc})") from None
    what = f"hetero loads native code only from executables signed with your key ({key_path()})"
    todo = "recompile it from its model, or, if you trust whoever made it, sign it with {trust}"
    sign = Keyword("trust", source, function="hetero.trust", call=True)
    if not data.startswith(MAGIC):
        if data.startswith(b"PK"):
            raise SignatureError(f"{source}: this executable carries no signature (saved by an older "
                                 f"hetero, or not by Executable.save); {what}: {todo}", trust=sign)
        raise ModelLoadError(f"{source}: not a saved hetero executable (it does not start with "
                             f"{MAGIC!r}); run a model file instead, or recompile")
    stamp, payload = data[len(MAGIC):len(MAGIC) + SEAL_SIZE], data[len(MAGIC) + SEAL_SIZE:]
    problem = check_seal(_PURPOSE, stamp, payload)
    if problem:
        raise SignatureError(f"{source}: refused, {problem}; {what}: {todo}", trust=sign)
    return payload


def _value_types(rows: Any) -> list[ValueType]:
    return [(str(n), tuple(int(d) for d in s), str(d_)) for n, s, d_ in rows]


def _rebuild(manifest: dict[str, Any], zf: Any, source: str) -> Executable:
    """The executable a verified manifest of a saved file describes, its parts loaded by
    their backends from the file's members."""
    arrays = read_npz(read_member(zf, "constants.npz", source), f"{source}: constants.npz")

    def load_part(entry: Mapping[str, Any], backend: Backend) -> CompiledPart:
        artifact = read_member(zf, str(entry["artifact"]), source)
        try:
            return backend.load_artifact(artifact)
        except HeteroError:
            raise
        except Exception as exc:  # noqa: BLE001 - a backend's loader failing on its own bytes
            raise PluginError(f"{source}: backend {backend.name} could not load its part "
                              f"{entry['artifact']} ({type(exc).__name__}: {exc}); recompile the model") from None

    return rebuild(manifest, arrays, load_part, source)


def rebuild(manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
            load_part: Callable[[Mapping[str, Any], Backend], CompiledPart], source: str) -> Executable:
    """The executable ``manifest`` (:meth:`Executable.manifest`, sealed where it was kept)
    describes: its constants from ``arrays`` (``c0``, ``c1``... in the manifest's order),
    each part from ``load_part`` (given the part's manifest entry and its installed
    backend, whose version the entry's matches). ``source`` names where it came from in
    errors."""
    from hetero.core.plugin.manager import get_backend

    names = list(manifest["constants"])
    missing = [f"c{i}" for i in range(len(names)) if f"c{i}" not in arrays]
    if missing:
        raise DamagedFileError(f"{source}: constants.npz lacks {missing[0]} of the {len(names)} "
                               "constants its manifest lists; recompile the model")
    constants = {str(name): arrays[f"c{i}"] for i, name in enumerate(names)}
    placements = []
    entries = manifest["parts"]
    for entry in entries:
        backend = get_backend(entry["backend"])
        if backend.version != entry["backend_version"]:
            raise HeteroError(
                f"{source}: compiled by {entry['backend']} {entry['backend_version']}, "
                f"installed is {backend.version}; recompile the model"
            )
        part = load_part(entry, backend)
        # Files saved before partitioned compiles lack the region keys: one part; files
        # saved before output checks lack the output types: names are checked only.
        placements.append(Placement(entry["backend"], entry["backend_version"], part,
                                    entry.get("region", ""),
                                    tuple(TransferStep(*t) for t in entry.get("transfers_in", ())),
                                    tuple(_value_types(entry.get("output_types", ()))),
                                    tuple(TransferStep(*t) for t in entry.get("transfers_out", ()))))
    interface = Interface(_value_types(manifest["inputs"]), _value_types(manifest["outputs"]))
    if any("transfers_out" not in entry for entry in entries):
        # Saved before devices: only copies between parts were listed, and parts moved
        # graph inputs and outputs themselves. Plan every transfer again, from the host.
        plan = plan_transfers([(p.backend, p.part.inputs, p.part.outputs) for p in placements],
                              [name for name, _, _ in interface.outputs], HOST.name)
        for placement, into, back in zip(placements, plan.into, plan.home):
            placement.transfers_in, placement.transfers_out = into, back
    return Executable(manifest["name"], interface, placements, constants,
                      manifest.get("partition", {}), manifest.get("partition_report", ""),
                      [CompileFallback(*f) for f in manifest.get("fallbacks", ())])


def trust(path: str | os.PathLike[str]) -> None:
    """Sign the saved executable at ``path`` with this user's key, so :func:`load` takes it.

    For an executable from an older hetero (unsigned), or one made by someone whose
    code you are willing to run: loading it runs the native code inside, with your
    rights. The file is rewritten in place (atomically); a file that is not a saved
    executable is refused.
    """
    source = os.fspath(path)
    try:
        data = read_regular_file(source, "saved hetero executable")
    except OSError as exc:
        raise ModelLoadError(f"{source}: not a saved hetero executable ({exc})") from None
    payload = data[len(MAGIC) + SEAL_SIZE:] if data.startswith(MAGIC) else data
    with open_zip(payload, source) as zf:
        try:
            manifest = json.loads(read_member(zf, "manifest.json", source, MANIFEST_LIMIT))
        except (ValueError, UnicodeDecodeError) as exc:
            raise DamagedFileError(f"{source}: manifest.json is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelLoadError(f"{source}: not a saved hetero executable (no {FORMAT} manifest); nothing signed")
    write_atomically(source, MAGIC + seal(_PURPOSE, payload) + payload)
