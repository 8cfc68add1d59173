"""A compiled fpga_hls region: its HLS kernels, run by C simulation, with their estimates.

:class:`HlsPart` is what :meth:`~hetero.plugins.fpga_hls.backend.FpgaHlsBackend.compile`
returns. Each :class:`HlsStep` is one graph node or fused group emitted as one top
function (:func:`~hetero.plugins.fpga_hls.emit.emit_hls`), or a view (a Reshape of a value
the region made). ``run`` calls each kernel's C simulation (:mod:`.csim`: the same C++,
compiled by g++, called through ctypes) on the arrays of the part's :attr:`device`, a
memory of its own standing for the card's DDR or HBM, so the executable copies values in
and out as it would over PCIe. Each step keeps its estimate (latency in cycles,
resources against the part), which :meth:`HlsPart.report` tabulates with the format
each kernel computes in (``float32``, or its ``ap_fixed`` compute format: :mod:`.fixed`)
and, for a fixed-point compile, the cosine similarity of its outputs to the float
reference on the calibration sample.

The artifact holds every kernel's C++ and header, the estimates' figures and the
constants; loading it compiles the C++ again (from g++'s cache when it is there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import json
import time
from typing import Any

import numpy as np

from hetero.plugin import (
    DamagedFileError, InputError, NumpyDevice, as_dtype, constants_member, index_problem, open_zip, read_constants,
    read_manifest, read_member, saved_index_check, write_zip,
)
from hetero.plugin.tir import Buffer
from hetero.plugins.fpga_hls.csim import CsimKernel, compile_kernel
from hetero.plugins.fpga_hls.device import PRESETS, FpgaPart
from hetero.plugins.fpga_hls.emit import HlsKernel
from hetero.plugins.fpga_hls.fixed import KernelFormats

#: Where the part's values live: the card's memory, simulated by host arrays.
CARD = NumpyDevice("fpga_hls")


@dataclass(frozen=True)
class Figures:
    """What a step's estimate says, as the report and the artifact keep it."""

    cycles: int
    dsp: int
    bram_18k: int
    uram: int
    lut: int
    ff: int


@dataclass
class HlsStep:
    """One node or fused group as one HLS kernel over graph values (inputs, then outputs, in
    parameter order); or, with ``view`` set, its one output as its one input reshaped."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[str, ...]
    kernel: HlsKernel | None = None
    figures: Figures | None = None
    table: str = ""
    checks: tuple[tuple[str, int, Any, bool], ...] = ()
    view: tuple[int, ...] | None = None


def writeable(array: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``array`` as a writeable C-contiguous array (of ``dtype``), copied only where it is not one."""
    a = np.asarray(array, dtype=dtype)
    return a if a.flags.c_contiguous and a.flags.writeable else np.array(a, order="C", copy=True)


class HlsPart:
    """A region's HLS kernels, run in order by C simulation on :data:`CARD`."""

    device = CARD

    def __init__(self, inputs: tuple[str, ...], outputs: tuple[str, ...], steps: Sequence[HlsStep],
                 constants: Mapping[str, np.ndarray], aliases: Mapping[str, str], part: FpgaPart,
                 compiled: Mapping[str, CsimKernel] | None = None, fixed_note: str = "") -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.steps = list(steps)
        self.constants = dict(constants)
        self._writeable = {n: writeable(a) for n, a in self.constants.items()}
        self.aliases = dict(aliases)
        self.part = part
        self.last_profile: list[tuple[str, float]] = []
        self._compiled = dict(compiled or {})
        #: For a fixed-point compile, how its outputs compare with the float reference on
        #: the calibration sample (cosine similarity, largest error); empty in float32.
        self.fixed_note = fixed_note

    @property
    def kernel_count(self) -> int:
        return sum(step.kernel is not None for step in self.steps)

    @property
    def cycles(self) -> int:
        """The estimated latency of one run, the kernels one after another."""
        return sum(step.figures.cycles for step in self.steps if step.figures is not None)

    def csim(self, step: HlsStep) -> CsimKernel:
        """The C simulation of ``step``'s kernel, compiled on first use (g++ caches it)."""
        assert step.kernel is not None
        if step.kernel.top not in self._compiled:
            self._compiled[step.kernel.top] = compile_kernel(step.kernel)
        return self._compiled[step.kernel.top]

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = self._execute(inputs)
        return {name: env[self.aliases.get(name, name)] for name in self.outputs}

    def run_intermediates(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = self._execute(inputs)
        values = {name: env[name] for step in self.steps for name in step.outputs}
        values.update((name, env[self.aliases.get(name, name)]) for name in self.outputs)
        return values

    def _execute(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = dict(self._writeable)
        env.update({name: np.asarray(inputs[name], order="C") for name in self.inputs})
        profile = []
        for step in self.steps:
            if step.view is not None:
                env[step.outputs[0]] = env[step.inputs[0]].reshape(step.view)
                continue
            assert step.kernel is not None
            for value, axis, size, wraps in step.checks:
                problem = index_problem(env[value], axis, size, wraps)
                if problem is not None:
                    raise InputError(f"{step.name}: {value}: {problem}")
            params = step.kernel.params
            # The kernel never writes an input (its pointer is const), but ctypes takes writeable arrays.
            ins = [writeable(env[n], b.dtype) for n, b in zip(step.inputs, params)]
            outs = [np.zeros(b.shape, b.dtype) for b in params[len(step.inputs):]]
            start = time.perf_counter()
            self.csim(step)(*ins, *outs)
            profile.append((step.name, time.perf_counter() - start))
            env.update(zip(step.outputs, outs))
        self.last_profile = profile
        return env

    def report(self) -> str:
        """Per kernel: the format its float32 values compute in, estimated cycles and
        resources against the part; then the total, each auto kernel's tensor formats and,
        for fixed point, the comparison with the float reference."""
        part = self.part
        head = ("kernel", "format", "cycles", "us", "DSP", "BRAM_18K", "URAM", "LUT", "FF")
        rows = [head]
        total = [0] * 6
        notes = []
        for step in self.steps:
            f = step.figures
            if f is None:
                continue
            figures = (f.cycles, f.dsp, f.bram_18k, f.uram, f.lut, f.ff)
            total = [a + b for a, b in zip(total, figures)]
            formats = step.kernel.formats if step.kernel is not None else None
            fmt = "float32" if formats is None else str(formats.compute)
            if formats is not None and set(formats.buffers.values()) - {formats.compute}:
                fmt += "*"
                values = dict(zip((b.name for b in step.kernel.params), (*step.inputs, *step.outputs)))
                notes.append(f"  * {step.name}: {formats.describe(values)}")
            rows.append((step.name, fmt, str(f.cycles), f"{f.cycles / part.clock_mhz:.1f}", *map(str, figures[1:])))
        have = (part.dsp, part.bram_18k, part.uram, part.lut, part.ff)
        rows.append(("total (kernels in turn)", "", str(total[0]), f"{total[0] / part.clock_mhz:.1f}",
                     *map(str, total[1:])))
        rows.append((f"{part.name} has", "", "", "", *map(str, have)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"{self.kernel_count} HLS kernels for {part.summary()}; estimates (no synthesis), run by C simulation"]
        lines += ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                  for r in rows]
        largest = max((s for s in self.steps if s.figures is not None), key=lambda s: s.figures.dsp, default=None)
        lines.append("  each kernel is a design of its own: a design fits when each fits the part, and the one with "
                     f"the most DSPs is {largest.name}" if largest is not None else "  no kernels")
        lines += notes
        if self.fixed_note:
            lines.append(f"  {self.fixed_note}")
        return "\n".join(lines)

    @property
    def artifact(self) -> bytes:
        """A zip of the manifest, every kernel's C++ and header, and the constants."""
        manifest = {
            "inputs": list(self.inputs), "outputs": list(self.outputs), "aliases": self.aliases,
            "part": self.part.name, "constants": list(self.constants), "fixed_note": self.fixed_note,
            "steps": [{"name": s.name, "inputs": list(s.inputs), "outputs": list(s.outputs), "nodes": list(s.nodes),
                       "checks": [list(c) for c in s.checks],
                       **({"view": list(s.view)} if s.view is not None else {
                           "top": s.kernel.top, "table": s.table,
                           "params": [[b.name, list(b.shape), np.dtype(b.dtype).name] for b in s.kernel.params],
                           "formats": s.kernel.formats.to_json() if s.kernel.formats is not None else None,
                           "figures": list(vars(s.figures).values()) if s.figures is not None else None})}
                      for s in self.steps],
        }
        members: list[tuple[str, bytes | str]] = [("manifest.json", json.dumps(manifest))]
        for i, s in enumerate(self.steps):
            if s.kernel is not None:
                members += [(f"hls/{i}.cpp", s.kernel.source), (f"hls/{i}.h", s.kernel.header)]
        members.append(constants_member(self.constants))
        return write_zip(members)

    @classmethod
    def from_artifact(cls, artifact: bytes) -> HlsPart:
        """The part whose :attr:`artifact` is ``artifact``; a named error for one that is damaged."""
        source = "fpga_hls artifact"
        with open_zip(artifact, source) as zf:
            manifest = read_manifest(zf, source)
            try:
                steps = []
                for i, s in enumerate(manifest["steps"]):
                    names = tuple(s["inputs"]), tuple(s["outputs"]), tuple(s["nodes"])
                    checks = tuple(saved_index_check(c) for c in s.get("checks", []))
                    if "view" in s:
                        steps.append(HlsStep(s["name"], *names, view=tuple(int(d) for d in s["view"])))
                        continue
                    params = tuple(Buffer(n, tuple(int(d) for d in shape), as_dtype(dtype))
                                   for n, shape, dtype in s["params"])
                    formats = KernelFormats.from_json(s["formats"]) if s.get("formats") is not None else None
                    kernel = HlsKernel(s["top"], read_member(zf, f"hls/{i}.cpp", source).decode(),
                                       read_member(zf, f"hls/{i}.h", source).decode(), params, formats)
                    figures = Figures(*(int(v) for v in s["figures"])) if s["figures"] is not None else None
                    steps.append(HlsStep(s["name"], *names, kernel, figures, str(s["table"]), checks))
                constants = read_constants(zf, source, manifest["constants"])
                return cls(tuple(manifest["inputs"]), tuple(manifest["outputs"]), steps, constants,
                           dict(manifest["aliases"]), PRESETS[manifest["part"]],
                           fixed_note=str(manifest.get("fixed_note", "")))
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise DamagedFileError(f"{source}: its manifest is incomplete or malformed "
                                       f"({type(exc).__name__}: {exc}); recompile the model") from None


__all__ = ["CARD", "Figures", "HlsPart", "HlsStep", "writeable"]
