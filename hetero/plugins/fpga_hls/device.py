"""The FPGA parts the fpga_hls backend declares: resources, clock and memory hierarchy per preset.

An :class:`FpgaPart` is the one description of a device that the partitioner (through
:meth:`FpgaPart.memory_hierarchy` and :attr:`FpgaPart.peak_gops`), the default schedules
(the DSP budget that bounds unrolling, the BRAM that bounds on-chip tiles) and the
estimates (:mod:`hetero.plugins.fpga_hls.estimate`, whose ``fits`` compares a design
with these counts) all read.

:data:`PRESETS` name three parts, by the name the backend's part option takes: two
mid-range ones, the Zynq UltraScale+ ZU7EV (the ZCU104 board's MPSoC, its DDR4 behind
the processing system's AXI ports) and the Alveo U50, and one large one, the Alveo U280.
Resource counts are AMD's published figures: the Zynq UltraScale+ MPSoC product table
(DS891, "Zynq UltraScale+ MPSoC Data Sheet: Overview", EV devices), the Alveo U50 data
sheet (DS965) and the Alveo U280 data sheet (DS963); block RAMs are counted as BRAM_18K
halves (two per 36 Kb block, as HLS reports them), UltraRAMs as 288 Kb blocks. The off-chip
figures are the ZCU104's 2 GB of 64-bit DDR4-2400 (19.2 GB/s) and the Alveo cards' 8 GB of
HBM2 (316 GB/s on the U50, 460 GB/s on the U280). The target clock is 300 MHz, Vitis
HLS's usual goal for these families.

On-chip bandwidths follow from the clock: every BRAM_18K has two ports of up to 32 bits
a cycle, every URAM two 72-bit ports, and every flip-flop is read each cycle; latencies
are a cycle for BRAM, two for URAM, and an AXI round trip of about a hundred cycles for
off-chip memory.

    >>> part = PRESETS["u50"]
    >>> part.memory_hierarchy().summary()
    'HBM 8 GiB > URAM 22.5 MiB > BRAM 5.906 MiB > REG 212.8 KiB'
    >>> round(part.peak_gops)
    3571
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero.plugin import MemoryHierarchy, MemoryLevel, OptionError, did_you_mean
from hetero.plugin.tir import register_scope

GIB = 1024 ** 3
#: Bits of one BRAM_18K block.
BRAM_18K_BITS = 18 * 1024
#: Bits of one UltraRAM block.
URAM_BITS = 288 * 1024
#: Bits a BRAM_18K port moves a cycle (its widest true-dual-port width, 36 bits, holds a 32-bit word).
BRAM_PORT_BITS = 32
#: Bits a URAM port moves a cycle.
URAM_PORT_BITS = 72
#: Ports of one BRAM or URAM bank: both may read or write in the same cycle.
RAM_PORTS = 2

register_scope("bram", "on-chip block RAM of an FPGA kernel (BRAM_18K banks, two ports each)")
register_scope("uram", "on-chip UltraRAM of an FPGA kernel (288 Kb banks, two ports each)")


@dataclass(frozen=True)
class FpgaPart:
    """One FPGA part: its programmable resources, the kernel clock and the memory behind AXI.

    ``dsp`` counts DSP48E2 slices (a 27 x 18 multiplier and an accumulator each),
    ``bram_18k`` BRAM_18K blocks, ``uram`` UltraRAM blocks, ``lut`` and ``ff`` the CLB
    look-up tables and flip-flops; ``clock_mhz`` is the target kernel clock. The
    off-chip memory (``offchip`` names its kind, DDR or HBM) is reached through AXI
    masters at ``offchip_gbps``.
    """

    name: str
    family: str
    dsp: int
    bram_18k: int
    uram: int
    lut: int
    ff: int
    clock_mhz: float
    offchip: str
    offchip_bytes: int
    offchip_gbps: float

    @property
    def clock_ghz(self) -> float:
        return self.clock_mhz / 1e3

    @property
    def peak_gops(self) -> float:
        """Peak multiply-accumulate throughput in GOP/s: every DSP slice doing a multiply and
        an add each cycle (DSPs x 2 x clock), the figure AMD quotes for int8/int16 work."""
        return self.dsp * 2 * self.clock_ghz

    @property
    def bram_bytes(self) -> int:
        return self.bram_18k * BRAM_18K_BITS // 8

    @property
    def uram_bytes(self) -> int:
        return self.uram * URAM_BITS // 8

    @property
    def register_bytes(self) -> int:
        return self.ff // 8

    def memory_hierarchy(self) -> MemoryHierarchy:
        """Off-chip DDR or HBM (behind AXI) > URAM > BRAM > registers, outermost first, with
        the tensor-IR scopes ``global``, ``uram``, ``bram`` and ``local``."""
        cycle_ns = 1e3 / self.clock_mhz
        bram_gbps = self.bram_18k * RAM_PORTS * BRAM_PORT_BITS / 8 * self.clock_ghz
        uram_gbps = self.uram * RAM_PORTS * URAM_PORT_BITS / 8 * self.clock_ghz
        reg_gbps = self.ff / 8 * self.clock_ghz
        return MemoryHierarchy((
            MemoryLevel(self.offchip, self.offchip_bytes, self.offchip_gbps, latency_ns=100 * cycle_ns,
                        scope="global"),
            MemoryLevel("URAM", self.uram_bytes, max(uram_gbps, self.offchip_gbps), latency_ns=2 * cycle_ns,
                        scope="uram"),
            MemoryLevel("BRAM", self.bram_bytes, max(bram_gbps, uram_gbps), latency_ns=cycle_ns, scope="bram"),
            MemoryLevel("REG", self.register_bytes, max(reg_gbps, bram_gbps), latency_ns=0.0, scope="local"),
        ))

    def summary(self) -> str:
        """One line: ``'u50 (Alveo U50): 5952 DSP, 2688 BRAM_18K, 640 URAM, 872K LUT, 1743K FF, 300 MHz'``."""
        return (f"{self.name} ({self.family}): {self.dsp} DSP, {self.bram_18k} BRAM_18K, {self.uram} URAM, "
                f"{self.lut // 1000}K LUT, {self.ff // 1000}K FF, {self.clock_mhz:g} MHz")


#: The parts the backend knows, by the name its part option takes.
PRESETS: dict[str, FpgaPart] = {
    "zu7ev": FpgaPart("zu7ev", "Zynq UltraScale+ ZU7EV", dsp=1728, bram_18k=624, uram=96, lut=230_400,
                      ff=460_800, clock_mhz=300.0, offchip="DDR", offchip_bytes=2 * GIB, offchip_gbps=19.2),
    "u50": FpgaPart("u50", "Alveo U50", dsp=5952, bram_18k=2688, uram=640, lut=872_000, ff=1_743_000,
                    clock_mhz=300.0, offchip="HBM", offchip_bytes=8 * GIB, offchip_gbps=316.0),
    "u280": FpgaPart("u280", "Alveo U280", dsp=9024, bram_18k=4032, uram=960, lut=1_304_000, ff=2_607_000,
                     clock_mhz=300.0, offchip="HBM", offchip_bytes=8 * GIB, offchip_gbps=460.0),
}

#: The part a backend gets when its options name none: the mid-range Alveo card.
DEFAULT_PART = "u50"


def get_part(name: str | FpgaPart | None = None) -> FpgaPart:
    """The preset called ``name`` (the default part for None; a part is returned as it is);
    OptionError naming the presets for an unknown name."""
    if isinstance(name, FpgaPart):
        return name
    key = DEFAULT_PART if name is None else str(name).lower()
    if key not in PRESETS:
        raise OptionError(f"fpga_hls: unknown FPGA part {name!r}{did_you_mean(key, PRESETS)}; "
                          f"the presets are {', '.join(PRESETS)}")
    return PRESETS[key]
