"""The fpga_hls backend: graph regions as Vitis-HLS C++ kernels, checked by C simulation.

It declares the FPGA part its ``fpga_part`` option names (:data:`~hetero.plugins.fpga_hls.device.PRESETS`):
its memory hierarchy (DDR or HBM behind AXI > URAM > BRAM > registers) and peak
throughput. :meth:`FpgaHlsBackend.supports` takes a node whose op lowers to the tensor IR,
whose dtypes C++ has a type for and whose default HLS schedule's estimate fits the part,
and refuses with the reason otherwise. :meth:`FpgaHlsBackend.compile` groups anchors with
their epilogues, lowers each group, applies the default HLS schedule (pipelined inner
loops, channel parallelism bounded by the DSP budget, on-chip tiles sized to the BRAM:
:mod:`.schedules`), estimates it (:mod:`.estimate`), emits the C++ (:mod:`.emit`) and
compiles its C simulation with g++ (:mod:`.csim`); a kernel that does not fit the part or
does not compile is a PluginError naming the node and the reason (the first compiler
message), so the region falls back.

Fixed point (the ``fpga_fixed`` option, :mod:`.fixed`): ``"float32"`` (the default) keeps
the graph's dtypes; ``"W,I"`` computes every float32 tensor in ``ap_fixed<W,I>``;
``"auto:W"`` picks each buffer's integer bits from the ranges a calibration run shows
(the region's reference on seeded inputs, each scheduled kernel's float C simulation on
its share of them). The top functions keep float pointers, so C simulation, the host
and the testbench pass float arrays. Such a compile needs the ap_types headers of an
installed hls4ml (a PluginError with the install hint otherwise, so the region falls
back), runs the part once on the calibration sample and reports each output's cosine
similarity to the float reference. The estimate is still the float design's (see
:mod:`.estimate`).

The compile is the shared loop (:func:`~hetero.plugin.parts.compile_steps`) with
fpga_hls's builder. With a dump folder, every step's stages are written (the tensor IR
as lowered, scheduled and legalised, the C++ and header in ``code/``, the estimate in
``report/``), and every kernel is exported under ``hls_projects/`` as a Vitis HLS project
of its own: the kernel's ``.cpp`` and ``.h``, a testbench that replays captured inputs
against captured outputs (seeded inputs, the C simulation's outputs), the ``.bin`` files
they read, a ``run_hls.tcl`` that runs C simulation and synthesis, and the estimate
beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetero.plugin import (
    Backend, Declarations, Graph, HeteroError, Node, Option, PluginError, Support, Target, chain, check,
    nonempty_outputs, op_names, roofline, run_reference,
)
from hetero.plugin.lower import VIEW_OPS, KernelStep, is_lowerable, lower_node
from hetero.plugin.parts import BuiltStep, KernelBuilder, StageFile, compile_steps, lowerable
from hetero.plugin.tir import Native, PrimFunc, canonical_names, legalize
from hetero.plugins.fpga_hls.csim import CsimKernel, compile_kernel, find_gxx
from hetero.plugins.fpga_hls.device import DEFAULT_PART, PRESETS, FpgaPart
from hetero.plugins.fpga_hls.emit import HlsKernel, emit_hls
from hetero.plugins.fpga_hls.estimate import Estimate, estimate
from hetero.plugins.fpga_hls.fixed import (
    FixedOption, ap_types_dir, calibration_sample, calibration_values, cosine_similarity, kernel_formats,
    observed_ranges, parse_option,
)
from hetero.plugins.fpga_hls.part import Figures, HlsPart, HlsStepKernel, writeable
from hetero.plugins.fpga_hls.schedules import default_schedule

#: Part of every compile-cache key: 0.2 artifacts have the shared step parts' manifest
#: (hetero.plugin.parts), which 0.1's lack.
VERSION = "0.2.0"

#: dtypes the emitted C++ computes in (the narrow floats and sub-byte ints have no C type).
DTYPES = frozenset({"float32", "float64", "float16", "bfloat16", "bool", "int8", "uint8", "int16", "uint16",
                    "int32", "uint32", "int64", "uint64"})

#: The compile options fpga_hls reads.
OPTIONS = (
    Option("fpga_part", f"the FPGA part to build for (default {DEFAULT_PART})", types=(str,),
           choices=tuple(PRESETS)),
    Option("fpga_fixed", "what float32 tensors compute in: 'float32' (the default), 'W,I' for "
           "ap_fixed<W,I> everywhere, or 'auto:W' for W bits with integer bits per tensor from "
           "calibration ranges (needs hls4ml: pip install 'hetero[fpga]')", types=(str,)),
)


@dataclass(frozen=True)
class HlsSettings:
    """The backend's reading of its options: the part and the fixed-point choice."""

    part: FpgaPart
    fixed: FixedOption = FixedOption()


@dataclass(frozen=True)
class BuiltKernel:
    """One step's kernel: the scheduled function, its C++ and its estimate on the part."""

    func: PrimFunc
    kernel: HlsKernel
    estimate: Estimate


def build(func: PrimFunc, part: FpgaPart, fixed: FixedOption = FixedOption(),
          sample: Mapping[str, np.ndarray] | None = None) -> BuiltKernel:
    """``func`` scheduled for ``part``, estimated, refused unless it fits, emitted; with
    ``fixed``, its float32 values in the formats it gives (:mod:`.fixed`), for ``auto``
    from the ranges the scheduled function shows on ``sample`` (its calibration
    inputs by parameter name)."""
    schedule = default_schedule(func, part)
    ranges = observed_ranges(schedule.func, sample or {}) if fixed.is_auto else None
    formats = kernel_formats(fixed, schedule.func, ranges)
    found = estimate(schedule.func, part, formats)
    found.require_fit(part)
    kernel = emit_hls(schedule.func) if formats is None else emit_hls(schedule.func, formats=formats)
    return BuiltKernel(schedule.func, kernel, found)


class FpgaHlsBackend(Backend):
    """An FPGA through HLS C++: the ops that lower to the tensor IR and fit the part."""

    name = "fpga_hls"
    version = VERSION
    device_kind = "fpga"
    options = OPTIONS

    def __init__(self) -> None:
        part = PRESETS[DEFAULT_PART]
        self.memory = part.memory_hierarchy()
        self.peak_gflops = part.peak_gops
        self.supported_ops = frozenset(op for op in op_names() if is_lowerable(op))
        self._plans: dict[tuple[str, FpgaPart], Estimate | HeteroError] = {}
        self._supports = chain(
            lowerable("fpga_hls"),
            check(lambda node, _: not _without_cpp_type(node),
                  lambda node: f"fpga_hls has no C++ type for {', '.join(_without_cpp_type(node))}"),
            nonempty_outputs("fpga_hls"),
            self._fits,
        )

    def device_status(self) -> str:
        """C simulation needs g++; without it nothing here can run the kernels."""
        if find_gxx() is None:
            return "g++ not found: the kernels are emitted, and C simulation needs g++ (apt install g++)"
        return ""

    def declare(self, options: Mapping[str, Any]) -> Declarations:
        part = PRESETS[options["fpga_part"] or DEFAULT_PART]
        fixed = parse_option(options.get("fpga_fixed"))
        return Declarations(part.memory_hierarchy(), part.peak_gops, (), HlsSettings(part, fixed))

    def supports(self, node: Node, target: Target) -> Support:
        return self._supports(node, target)

    def _fits(self, node: Node, target: Target) -> Support:
        """Whether ``node``'s default HLS schedule fits the target's part (a view needs none)."""
        if node.op in VIEW_OPS:
            return Support.yes()
        settings: HlsSettings = target.settings
        try:
            verdict = self._planned(node, settings.part).fits(settings.part)
        except HeteroError as exc:
            return Support.no(f"fpga_hls cannot schedule {node.name} ({node.op}): {exc}")
        return Support.yes() if verdict.ok else Support.no(f"fpga_hls: {node.name} ({node.op}): {verdict.message}")

    def estimate(self, subgraph: Graph, target: Target) -> float:
        """Seconds at the part's clock: the default schedule's estimated cycles, node by node."""
        settings: HlsSettings = target.settings
        total = 0.0
        for node in subgraph.nodes:
            if node.op in VIEW_OPS:
                continue
            try:
                total += self._planned(node, settings.part).seconds
            except HeteroError:  # a node supports() refuses: the roofline of its work
                total += roofline(node, target.peak_gflops, settings.part.offchip_gbps)
        return total

    def _planned(self, node: Node, part: FpgaPart) -> Estimate:
        """The float estimate of ``node``'s default schedule on ``part``. The partitioner asks
        supports() of every node and estimate() of every candidate region; the schedule
        (which estimates each plan it tries) is made once per distinct kernel and part."""
        func = lower_node(node)
        key = (canonical_names(func).name, part)  # the part itself: its budgets shape the schedule
        if key not in self._plans:
            try:
                self._plans[key] = estimate(default_schedule(func, part).func, part)
            except HeteroError as exc:
                self._plans[key] = exc
        found = self._plans[key]
        if isinstance(found, HeteroError):
            raise found
        return found

    def compile(self, subgraph: Graph, target: Target) -> HlsPart:
        settings: HlsSettings = target.settings
        fixed = settings.fixed
        if not fixed.is_float:
            try:
                ap_types_dir()
            except HeteroError as exc:
                raise PluginError(f"fpga_hls (fpga_fixed={fixed}): {exc}") from exc
        builder = _Builder(settings, calibration_values(subgraph) if fixed.is_auto else {})
        part = HlsPart(*compile_steps(subgraph, target, builder), part=settings.part, compiled=builder.compiled)
        if not fixed.is_float:
            part.fixed_note = fixed_comparison(part, subgraph, fixed)
        if target.dump_dir is not None:
            export_projects(target.dump_dir / "hls_projects", part)
        return part

    def load_artifact(self, artifact: bytes) -> HlsPart:
        return HlsPart.from_artifact(artifact)


def _without_cpp_type(node: Node) -> list[str]:
    """The dtypes of ``node``'s tensors that the emitted C++ has no type for."""
    return sorted({str(v.dtype) for v in (*node.inputs, *node.outputs) if v is not None and str(v.dtype) not in DTYPES})


class _Builder(KernelBuilder[HlsStepKernel]):
    """fpga_hls's kernels: each step lowered, scheduled, estimated and emitted once per
    distinct function (for ``auto`` fixed point, per distinct inputs too, whose ranges
    give its formats), its C simulation compiled (:attr:`compiled`, by top function)."""

    def __init__(self, settings: HlsSettings, values: Mapping[str, np.ndarray]) -> None:
        self.settings = settings
        self.values = values  # the calibration sample's values, for auto fixed point
        self.compiled: dict[str, CsimKernel] = {}
        self._built: dict[tuple[str, tuple[str, ...]], BuiltKernel] = {}

    def build(self, step: KernelStep) -> BuiltStep[HlsStepKernel]:
        fixed = self.settings.fixed
        lowered = step.lower()
        func = canonical_names(lowered)
        key = (func.name, step.inputs if fixed.is_auto else ())  # auto: formats follow the inputs
        if key not in self._built:
            sample = {b.name: self.values[v] for b, v in zip(func.params, step.inputs) if v in self.values}
            made = build(func, self.settings.part, fixed, sample)
            self.compiled[made.kernel.top] = compile_kernel(made.kernel)
            self._built[key] = made
        made = self._built[key]
        r = made.estimate.resources
        figures = Figures(made.estimate.cycles, r.dsp, r.bram_18k, r.uram, r.lut, r.ff)
        kernel = HlsStepKernel(made.kernel, figures, made.estimate.table())
        return BuiltStep(kernel, lambda: _stages(step, lowered, made, self.settings.part))


def _stages(step: KernelStep, lowered: PrimFunc, made: BuiltKernel, part: FpgaPart) -> list[StageFile]:
    """Every dump stage of one step: its tensor IR as lowered, scheduled and legalised,
    its C++ and header, and its estimate."""
    return [("tir", "txt", str(lowered)), ("scheduled", "txt", str(made.func)),
            ("legalized", "txt", str(legalize(made.func, Native()))),
            ("code", "cpp", made.kernel.source), ("code", "h", made.kernel.header),
            ("report", "txt", _estimate_text(step.label, made.kernel, (*step.inputs, *step.outputs),
                                             made.estimate.table(), part))]


def _estimate_text(name: str, kernel: HlsKernel, values: tuple[str, ...], table: str, part: FpgaPart) -> str:
    """A kernel's estimate on ``part``, with the formats it computes in (``values`` are the
    graph values its parameters hold)."""
    formats = "float32" if kernel.formats is None else kernel.formats.describe(dict(zip(kernel.param_names, values)))
    return f"{name} on {part.summary()}\ncomputes in {formats}\n\n{table}\n"


def fixed_comparison(part: HlsPart, graph: Graph, fixed: FixedOption) -> str:
    """How ``part`` (compiled in fixed point) compares with ``graph``'s float reference on
    the calibration sample: each float output's cosine similarity and largest error."""
    sample = calibration_sample(graph)
    want = run_reference(graph, sample)
    got = part.run(sample)
    parts = [f"{name} cosine {cosine_similarity(got[name], want[name]):.6f}, max |error| "
             f"{float(np.max(np.abs(np.asarray(got[name], np.float64) - want[name]), initial=0.0)):.3g}"
             for name in part.outputs if np.asarray(want[name]).dtype.kind == "f"]
    return (f"fixed point (fpga_fixed={fixed}) against the float reference on the seeded calibration sample: "
            + ("; ".join(parts) or "no float outputs"))


def export_projects(folder: Path, part: HlsPart) -> None:
    """A Vitis HLS project per kernel of ``part`` under ``folder``: the kernel, a testbench,
    the captured data it replays, a Tcl script and the estimate."""
    rng = np.random.default_rng(0)
    for step in part.steps:
        if step.kernel is None:
            continue
        kernel = step.kernel.hls
        where = folder / kernel.top
        (where / "data").mkdir(parents=True, exist_ok=True)
        (where / f"{kernel.top}.cpp").write_text(kernel.source)
        (where / f"{kernel.top}.h").write_text(kernel.header)
        n_in = len(step.inputs)
        arrays = [np.asarray(part.constants[name], b.dtype) if name in part.constants
                  else _sample(rng, b.shape, b.dtype) for name, b in zip(step.inputs, kernel.params)]
        outs = [np.zeros(b.shape, b.dtype) for b in kernel.params[n_in:]]
        part.csim(step)(*(writeable(a) for a in arrays), *outs)
        for b, a in zip(kernel.params, [*arrays, *outs]):
            np.asarray(a, order="C").tofile(where / "data" / f"{b.name}.bin")
        (where / f"tb_{kernel.top}.cpp").write_text(_testbench(kernel, n_in))
        (where / "run_hls.tcl").write_text(_tcl(kernel, part.part))
        (where / "estimate.txt").write_text(_estimate_text(step.name, kernel, (*step.inputs, *step.outputs),
                                                           step.kernel.table, part.part))


def _sample(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)


def _testbench(kernel: HlsKernel, n_in: int) -> str:
    """C++ that reads every parameter's captured data, calls the kernel and compares each
    output with the captured one (floats within 1e-4 relative and 1e-5 absolute: what
    another compiler's contraction of multiply-adds may move; integers exactly)."""
    from hetero.plugins.fpga_hls.emit import HlsExprPrinter

    types = HlsExprPrinter(kernel.top)
    lines = [f'#include "{kernel.top}.h"', "#include <cmath>", "#include <cstdio>", "#include <vector>", "",
             "template <typename T> static bool load(const char* path, std::vector<T>& v) {",
             '  FILE* f = std::fopen(path, "rb");',
             "  if (!f) { std::printf(\"cannot open %s\\n\", path); return false; }",
             "  size_t n = std::fread(v.data(), sizeof(T), v.size(), f);",
             "  std::fclose(f);",
             "  return n == v.size();",
             "}", "", "int main() {", "  int errors = 0;"]
    for k, b in enumerate(kernel.params):
        ctype = types.type_name(b.dtype)
        lines.append(f"  std::vector<{ctype}> p{k}({max(b.size, 1)});")
        if k < n_in:
            lines.append(f'  if (!load("data/{b.name}.bin", p{k})) return 2;')
        else:
            lines.append(f"  std::vector<{ctype}> want{k}({max(b.size, 1)});")
            lines.append(f'  if (!load("data/{b.name}.bin", want{k})) return 2;')
    lines.append(f"  {kernel.top}({', '.join(f'p{k}.data()' for k in range(len(kernel.params)))});")
    for k, b in enumerate(kernel.params[n_in:], start=n_in):
        if np.dtype(b.dtype).kind == "f" or np.dtype(b.dtype).name == "bfloat16":
            test = (f"std::fabs(double(p{k}[i]) - double(want{k}[i])) > 1e-5 + 1e-4 * std::fabs(double(want{k}[i]))"
                    f" && !(std::isnan(double(p{k}[i])) && std::isnan(double(want{k}[i])))")
        else:
            test = f"p{k}[i] != want{k}[i]"
        lines += [f"  for (size_t i = 0; i < p{k}.size(); ++i)",
                  f"    if ({test}) ++errors;"]
    lines += ['  std::printf("%s: %d mismatches\\n", errors ? "FAIL" : "PASS", errors);', "  return errors ? 1 : 0;",
              "}", ""]
    return "\n".join(lines)


def _tcl(kernel: HlsKernel, part: FpgaPart) -> str:
    """A Vitis HLS script: C simulation of the testbench, then synthesis for ``part``."""
    parts = {"zu7ev": "xczu7ev-ffvc1156-2-e", "u50": "xcu50-fsvh2104-2-e", "u280": "xcu280-fsvh2892-2L-e"}
    return "\n".join([
        f"# Vitis HLS project for {kernel.top}, written by hetero (fpga_hls); run: vitis_hls -f run_hls.tcl",
        f"open_project -reset {kernel.top}_prj",
        f"set_top {kernel.top}",
        f"add_files {kernel.top}.cpp",
        f"add_files -tb tb_{kernel.top}.cpp -cflags \"-std=c++14\"",
        "add_files -tb data",
        "open_solution -reset solution1 -flow_target vitis",
        f"set_part {parts.get(part.name, part.name)}",
        f"create_clock -period {1e3 / part.clock_mhz:.3f} -name default",
        "csim_design",
        "csynth_design",
        "exit",
        "",
    ])


__all__ = ["BuiltKernel", "FpgaHlsBackend", "HlsSettings", "build", "export_projects"]
