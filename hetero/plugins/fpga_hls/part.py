"""A compiled fpga_hls region: its HLS kernels, run by C simulation, with their estimates.

:class:`HlsPart` is what :meth:`~hetero.plugins.fpga_hls.backend.FpgaHlsBackend.compile`
returns: a :class:`~hetero.plugin.parts.StepPart` whose steps are graph nodes or fused
groups, each emitted as one top function (:func:`~hetero.plugins.fpga_hls.emit.emit_hls`,
kept with its estimate as an :class:`HlsStepKernel`), or views (a Reshape of a value the
region made). ``run`` calls each kernel's C simulation (:mod:`.csim`: the same C++,
compiled by g++, called through ctypes) on the arrays of the part's :attr:`device`, a
memory of its own standing for the card's DDR or HBM (the intermediates in one planned
arena of it), so the executable copies values in and out as it would over PCIe. Each
step keeps its estimate (latency in cycles,
resources against the part), which :meth:`HlsPart.report` tabulates with the format
each kernel computes in (``float32``, or its ``ap_fixed`` compute format: :mod:`.fixed`)
and, for a fixed-point compile, the cosine similarity of its outputs to the float
reference on the calibration sample.

The artifact holds every kernel's C++ and header, the estimates' figures and the
constants; loading it compiles the C++ again (from g++'s cache when it is there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetero.plugin import NumpyDevice, as_dtype
from hetero.plugin.parts import ArrayType, Clock, Step, StepPart
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


@dataclass(frozen=True)
class HlsStepKernel:
    """One step's HLS kernel (its top function over graph values: inputs, then outputs, in
    parameter order), its estimate's figures and the estimate's table."""

    hls: HlsKernel
    figures: Figures
    table: str


def writeable(array: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``array`` as a writeable C-contiguous array (of ``dtype``), copied only where it is not one."""
    a = np.asarray(array, dtype=dtype)
    return a if a.flags.c_contiguous and a.flags.writeable else np.array(a, order="C", copy=True)


class HlsPart(StepPart[HlsStepKernel]):
    """A region's HLS kernels, run in order by C simulation on :data:`CARD`."""

    backend = "fpga_hls"
    device = CARD

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[Step[HlsStepKernel]],
                 constants: Mapping[str, np.ndarray], aliases: Mapping[str, str], part: FpgaPart,
                 compiled: Mapping[str, CsimKernel] | None = None, fixed_note: str = "") -> None:
        self.part = part
        self._compiled = dict(compiled or {})
        #: For a fixed-point compile, how its outputs compare with the float reference on
        #: the calibration sample (cosine similarity, largest error); empty in float32.
        self.fixed_note = fixed_note
        super().__init__(inputs, outputs, steps, constants, aliases)

    @property
    def cycles(self) -> int:
        """The estimated latency of one run, the kernels one after another."""
        return sum(step.kernel.figures.cycles for step in self.steps if step.kernel is not None)

    def csim(self, step: Step[HlsStepKernel]) -> CsimKernel:
        """The C simulation of ``step``'s kernel, compiled on first use (g++ caches it)."""
        hls = step.kernel.hls
        if hls.top not in self._compiled:
            self._compiled[hls.top] = compile_kernel(hls)
        return self._compiled[hls.top]

    def launch(self, step: Step[HlsStepKernel], arrays: list[np.ndarray], clock: Clock) -> None:
        n = len(step.inputs)
        # The kernel never writes an input (its pointer is const), but ctypes takes writeable arrays.
        ins = [writeable(a, b.dtype) for a, b in zip(arrays[:n], step.kernel.hls.params)]
        csim = self.csim(step)
        clock.start()
        csim(*ins, *arrays[n:])
        clock.stop(step.name)

    def kernel_output_types(self, step: Step[HlsStepKernel]) -> list[ArrayType]:
        return [(tuple(b.shape), np.dtype(b.dtype)) for b in step.kernel.hls.params[len(step.inputs):]]

    def save_kernel(self, step: Step[HlsStepKernel]) -> tuple[dict[str, Any], dict[str, bytes | str]]:
        hls = step.kernel.hls
        saved = {"top": hls.top, "table": step.kernel.table,
                 "params": [[b.name, list(b.shape), np.dtype(b.dtype).name] for b in hls.params],
                 "formats": hls.formats.to_json() if hls.formats is not None else None,
                 "figures": list(vars(step.kernel.figures).values())}
        return saved, {"cpp": hls.source, "h": hls.header}

    @classmethod
    def load_kernel(cls, saved: dict[str, Any], read: Callable[[str], bytes],
                    settings: dict[str, Any]) -> HlsStepKernel:
        params = tuple(Buffer(n, tuple(int(d) for d in shape), as_dtype(dtype)) for n, shape, dtype in saved["params"])
        formats = KernelFormats.from_json(saved["formats"]) if saved["formats"] is not None else None
        hls = HlsKernel(saved["top"], read("cpp").decode(), read("h").decode(), params, formats)
        return HlsStepKernel(hls, Figures(*(int(v) for v in saved["figures"])), str(saved["table"]))

    def saved_settings(self) -> dict[str, Any]:
        return {"part": self.part.name, "fixed_note": self.fixed_note}

    @classmethod
    def restore(cls, settings: dict[str, Any]) -> dict[str, Any]:
        return {"part": PRESETS[settings["part"]], "fixed_note": str(settings["fixed_note"])}

    def report(self) -> str:
        """Per kernel: the format its float32 values compute in, estimated cycles and
        resources against the part; then the total, each auto kernel's tensor formats and,
        for fixed point, the comparison with the float reference."""
        part = self.part
        head = ("kernel", "format", "cycles", "us", "DSP", "BRAM_18K", "URAM", "LUT", "FF")
        rows = [head]
        total = [0] * 6
        notes = []
        kernels = [step for step in self.steps if step.kernel is not None]
        for step in kernels:
            f = step.kernel.figures
            figures = (f.cycles, f.dsp, f.bram_18k, f.uram, f.lut, f.ff)
            total = [a + b for a, b in zip(total, figures)]
            formats = step.kernel.hls.formats
            fmt = "float32" if formats is None else str(formats.compute)
            if formats is not None and set(formats.buffers.values()) - {formats.compute}:
                fmt += "*"
                values = dict(zip(step.kernel.hls.param_names, (*step.inputs, *step.outputs)))
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
        largest = max(kernels, key=lambda s: s.kernel.figures.dsp, default=None)
        lines.append("  each kernel is a design of its own: a design fits when each fits the part, and the one with "
                     f"the most DSPs is {largest.name}" if largest is not None else "  no kernels")
        lines += notes
        if self.fixed_note:
            lines.append(f"  {self.fixed_note}")
        return "\n".join(lines)


__all__ = ["CARD", "Figures", "HlsPart", "HlsStepKernel", "writeable"]
