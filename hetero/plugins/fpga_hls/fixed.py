"""Fixed point for the fpga_hls backend: ``ap_fixed`` formats, how they are chosen, where
the headers come from, and a numpy model of their rounding.

Formats
    A :class:`FixedFormat` ``(width, integer)`` is Xilinx's
    ``ap_fixed<W,I,AP_RND_CONV,AP_SAT>``: ``W`` bits, ``I`` of them integer bits with the
    sign, so values ``k * 2**-(W-I)`` in ``[-2**(I-1), 2**(I-1) - 2**-(W-I)]``. Rounding is
    ``AP_RND_CONV`` (to nearest, ties to even: unbiased, so long sums of rounded
    products do not drift, and it is numpy's ``np.round``, so :func:`quantize` models it
    exactly); overflow is ``AP_SAT`` (clipped to the range: an outlier becomes the largest
    value instead of wrapping to the other sign). Widths are 2 to 24 bits, so every value
    converts to float32 exactly (the top function's interface stays float) and a product
    is one or two DSP48E2s.

Choosing them (the backend option ``fpga_fixed``, parsed by :func:`parse_option`)
    - ``"float32"`` (the default): no fixed point, the graph's dtypes.
    - ``"W,I"``: every float32 tensor of every kernel in ``ap_fixed<W,I>``.
    - ``"auto:W"``: width ``W``, integer bits per buffer from its range
      (:func:`integer_bits`: the fewest that hold the largest magnitude seen). The
      calibration sample is seeded inputs of the region's declared shapes (standard
      normal float32, seed 0: :func:`calibration_sample`); the region's reference run on
      it gives every kernel's inputs (:func:`calibration_values`), and each scheduled
      kernel's float C simulation run on them, emitted to record every store's
      magnitude, gives the ranges of what it writes, partial sums and on-chip copies
      included (:func:`observed_ranges`): a global-average pool's running sum needs more
      integer bits than its mean. A real data set would be a better sample; the seeded
      one needs nothing from the user.

Within a kernel (:class:`KernelFormats`)
    Each float32 parameter and allocation has a storage format; the arithmetic runs in a
    *compute* format that holds every storage format exactly (the most integer bits and
    the most fraction bits among them, plus one guard bit for ``auto``; at most 24 bits,
    dropping fraction bits beyond): every load is converted to it exactly, every
    ``+ - *`` result is rounded and saturated to it, every store rounded to the stored
    buffer's format. So a multiply-accumulate kernel's value is the float program's with
    ``q_c`` after each operation and ``q_b`` at each store, which :func:`quantize`
    reproduces in numpy bit for bit. Divisions and intrinsics run in float, and what is
    computed from them stays float until it is stored
    (:class:`~hetero.plugins.fpga_hls.emit.FixedExprPrinter`). With ``W,I`` an
    accumulator has the tensors' format too, so a running sum beyond its range saturates
    (a global-average pool of large values in ``ap_fixed<16,6>``); ``auto`` sizes it from
    what it held.

Headers
    ``ap_fixed.h`` and its parts (Apache-2.0) come from an installed ``hls4ml`` (the
    ``fpga`` extra: ``pip install 'hetero[fpga]'``), found without importing it
    (:func:`ap_types_dir`); only ``ap_fixed.h`` is included, never the headers there
    with another licence (``hls_stream.h``, ``ap_shift_reg.h``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import functools
import importlib.util
import math
from pathlib import Path

import numpy as np

from hetero.plugin import CodegenError, Graph, OptionError
from hetero.plugin.tir import Allocate, Buffer, PrimFunc, walk

#: How to get the ap_types headers.
INSTALL_HINT = ("fixed point needs the ap_types headers (ap_fixed.h), which come with hls4ml: "
                "pip install 'hetero[fpga]' (or pip install hls4ml)")
#: The widths :class:`FixedFormat` takes (float32 holds every value of up to 24 bits exactly).
MIN_WIDTH, MAX_WIDTH = 2, 24
#: The option value that keeps the graph's dtypes.
FLOAT = "float32"


@dataclass(frozen=True, order=True)
class FixedFormat:
    """``ap_fixed<width, integer, AP_RND_CONV, AP_SAT>`` (see the module's docstring)."""

    width: int
    integer: int

    def __post_init__(self) -> None:
        if not MIN_WIDTH <= self.width <= 64:  # the option takes up to MAX_WIDTH; literals may need more
            raise CodegenError(f"ap_fixed width {self.width} is outside {MIN_WIDTH}..64")
        if not 1 <= self.integer <= self.width:
            raise CodegenError(f"ap_fixed<{self.width},{self.integer}>: integer bits must be 1..{self.width}")

    @property
    def fraction(self) -> int:
        """Bits after the binary point."""
        return self.width - self.integer

    @property
    def step(self) -> float:
        """The quantum, ``2**-fraction``."""
        return 2.0 ** -self.fraction

    @property
    def max(self) -> float:
        """The largest value."""
        return 2.0 ** (self.integer - 1) - self.step

    @property
    def min(self) -> float:
        """The smallest (most negative) value."""
        return -(2.0 ** (self.integer - 1))

    @property
    def c_type(self) -> str:
        """The C++ type, as the emitted code declares it."""
        return f"ap_fixed<{self.width},{self.integer},AP_RND_CONV,AP_SAT>"

    def __str__(self) -> str:
        return f"ap_fixed<{self.width},{self.integer}>"


def quantize(x: np.ndarray | float, fmt: FixedFormat) -> np.ndarray:
    """``x`` rounded to ``fmt`` as ``ap_fixed`` does: to the nearest multiple of its step,
    ties to even (``AP_RND_CONV``), clipped to its range (``AP_SAT``); float64, exact."""
    scaled = np.asarray(x, dtype=np.float64) * 2.0 ** fmt.fraction
    top = 2.0 ** (fmt.width - 1)
    return np.clip(np.round(scaled), -top, top - 1) * fmt.step


def integer_bits(magnitude: float, width: int) -> int:
    """The fewest integer bits (with the sign) of a ``width``-bit format whose range holds
    ``magnitude``: ``2**(I-1) > magnitude``, at least 1 and at most ``width``."""
    if not math.isfinite(magnitude) or magnitude <= 0:
        return 1
    return max(1, min(width, math.floor(math.log2(magnitude)) + 2))


@dataclass(frozen=True)
class FixedOption:
    """The reading of ``fpga_fixed``: ``None`` width for float32, else a width and either
    fixed integer bits or ``None`` for ``auto`` (chosen per tensor from ranges)."""

    width: int | None = None
    integer: int | None = None

    @property
    def is_float(self) -> bool:
        return self.width is None

    @property
    def is_auto(self) -> bool:
        return self.width is not None and self.integer is None

    def __str__(self) -> str:
        if self.width is None:
            return FLOAT
        return f"auto:{self.width}" if self.integer is None else f"{self.width},{self.integer}"


def parse_option(value: str | None) -> FixedOption:
    """``fpga_fixed``'s value read: ``"float32"`` (or unset), ``"W,I"`` or ``"auto:W"``;
    an :class:`OptionError` saying what it takes otherwise."""
    if value is None or value.strip() == FLOAT:
        return FixedOption()
    text = value.replace(" ", "")
    usage = (f"option fpga_fixed of backend fpga_hls takes 'float32', 'W,I' (ap_fixed<W,I>, "
             f"{MIN_WIDTH} <= W <= {MAX_WIDTH}, 1 <= I <= W) or 'auto:W' (integer bits per tensor "
             f"from calibration ranges), got {value!r}")
    try:
        if text.startswith("auto:"):
            width, integer = int(text[5:]), None
        else:
            w, i = text.split(",")
            width, integer = int(w), int(i)
    except ValueError:
        raise OptionError(usage) from None
    if not MIN_WIDTH <= width <= MAX_WIDTH or (integer is not None and not 1 <= integer <= width):
        raise OptionError(usage)
    return FixedOption(width, integer)


@dataclass(frozen=True)
class KernelFormats:
    """One kernel's formats: ``buffers`` by buffer name (float32 parameters and
    allocations) and the ``compute`` format of its arithmetic (see the module's docstring)."""

    compute: FixedFormat
    buffers: Mapping[str, FixedFormat]

    def of(self, buffer: Buffer) -> FixedFormat:
        """The storage format of ``buffer`` (an allocation not named has the compute format)."""
        return self.buffers.get(buffer.name, self.compute)

    def describe(self, names: Mapping[str, str] | None = None) -> str:
        """``ap_fixed<16,6>`` when every tensor has it, else the compute format and each
        tensor's (by buffer name, or by the graph value ``names`` gives it)."""
        kinds = set(self.buffers.values())
        if kinds <= {self.compute}:
            return str(self.compute)
        names = names or {}
        each = ", ".join(f"{names.get(name, name)} {fmt}" for name, fmt in self.buffers.items())
        return f"compute {self.compute}; {each}"

    def to_json(self) -> dict:
        return {"compute": [self.compute.width, self.compute.integer],
                "buffers": {n: [f.width, f.integer] for n, f in self.buffers.items()}}

    @classmethod
    def from_json(cls, data: Mapping) -> KernelFormats:
        return cls(FixedFormat(*map(int, data["compute"])),
                   {str(n): FixedFormat(*map(int, f)) for n, f in data["buffers"].items()})


def kernel_formats(option: FixedOption, func: PrimFunc, ranges: Mapping[str, float] | None = None
                   ) -> KernelFormats | None:
    """The formats of ``func``'s float32 parameters and allocations under ``option``
    (``None`` for float32, or when it has none). With ``W,I`` every one is
    ``ap_fixed<W,I>``. With ``auto:W`` each gets :func:`integer_bits` of its largest
    magnitude in ``ranges`` (by buffer name: :func:`observed_ranges`), and the compute
    format holds them all with a guard bit (at most 24 bits: beyond that it drops
    fraction bits)."""
    if option.is_float:
        return None
    floats = [b for b in (*func.params, *(a.buffer for a in walk(func.body) if isinstance(a, Allocate)))
              if np.dtype(b.dtype) == np.float32]
    if not floats:
        return None
    width = option.width
    assert width is not None
    if option.integer is not None:
        fmt = FixedFormat(width, option.integer)
        return KernelFormats(fmt, {b.name: fmt for b in floats})
    ranges = ranges or {}
    buffers = {b.name: FixedFormat(width, integer_bits(ranges.get(b.name, 0.0), width)) for b in floats}
    integer = min(MAX_WIDTH, max(f.integer for f in buffers.values()) + 1)
    fraction = max(f.fraction for f in buffers.values())
    return KernelFormats(FixedFormat(min(MAX_WIDTH, integer + fraction), integer), buffers)


def observed_ranges(func: PrimFunc, arrays: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The largest finite magnitude of each float32 buffer of ``func`` (by name) on a
    calibration run: a parameter's from ``arrays`` (its calibration values), and every
    buffer stored to (outputs, accumulators, on-chip copies) from running ``func``'s
    float C simulation on ``arrays``, emitted to keep what each store writes
    (:class:`~hetero.plugins.fpga_hls.emit.RangeExprPrinter`)."""
    from hetero.plugins.fpga_hls.csim import compile_kernel
    from hetero.plugins.fpga_hls.emit import RangeExprPrinter, emit_hls

    ranges = {b.name: _magnitude(arrays[b.name]) for b in func.params
              if np.dtype(b.dtype) == np.float32 and b.name in arrays}
    kernel = emit_hls(func, printer=RangeExprPrinter)
    if not kernel.tracked:
        return ranges
    csim = compile_kernel(kernel)
    csim.reset_ranges()
    csim.run({b.name: arrays[b.name] if b.name in arrays else np.zeros(b.shape, b.dtype) for b in func.params})
    for name, magnitude in csim.ranges().items():
        ranges[name] = max(ranges.get(name, 0.0), magnitude)
    return ranges


def calibration_sample(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs of ``graph``'s declared shapes: standard normal floats, integers in
    [-100, 100] (within the dtype), booleans 0 or 1."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for v in graph.inputs:
        dtype = np.dtype(v.dtype)
        if dtype.kind == "f":
            inputs[v.name] = rng.standard_normal(v.shape).astype(dtype)
        elif dtype.kind == "b":
            inputs[v.name] = rng.integers(0, 2, v.shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            inputs[v.name] = rng.integers(max(info.min, -100), min(info.max, 100), v.shape,
                                          endpoint=True).astype(dtype)
    return inputs


def calibration_values(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Every value of ``graph`` (inputs, constants, intermediates, outputs) by name when
    its reference runs on :func:`calibration_sample`."""
    from hetero.plugin import run_reference

    inputs = calibration_sample(graph, seed)
    values = run_reference(graph, inputs, keep=True)
    values.update({n: v.data for n, v in graph.values.items() if v.data is not None})
    values.update(inputs)
    return values


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b / (|a| |b|)`` over all elements, in float64 (1.0 when both are zero)."""
    x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    if norm == 0.0:
        return 1.0 if not x.any() and not y.any() else 0.0
    return float(x @ y) / norm


def _magnitude(a: np.ndarray) -> float:
    finite = np.abs(np.asarray(a, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if finite.size else 0.0


@functools.cache
def ap_types_dir() -> Path:
    """The folder of ``ap_fixed.h`` in the installed hls4ml wheel, found without importing
    hls4ml; a :class:`CodegenError` with the install hint when it is not there."""
    try:
        spec = importlib.util.find_spec("hls4ml")
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        folder = Path(root) / "templates" / "vivado" / "ap_types"
        if (folder / "ap_fixed.h").is_file() and (folder / "etc" / "ap_private.h").is_file():
            return folder
    raise CodegenError(INSTALL_HINT)


def have_ap_types() -> bool:
    """Whether :func:`ap_types_dir` finds the headers."""
    try:
        ap_types_dir()
    except CodegenError:
        return False
    return True


__all__ = ["FLOAT", "INSTALL_HINT", "FixedFormat", "FixedOption", "KernelFormats", "ap_types_dir",
           "calibration_sample", "calibration_values", "cosine_similarity", "have_ap_types", "integer_bits",
           "kernel_formats", "observed_ranges", "parse_option", "quantize"]
