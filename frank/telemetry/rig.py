"""The rig: its fixed facts and the conditions a stretch of work ran under, from the sampler's readings.

A noisy engine start is explained, not guessed at, when the figures of the machine beside it are kept with
it. Two kinds of them:

- **fixed facts** (`RigFacts`, `rig_facts`): per GPU the PCIe link's generation and width now against the
  card's maximum (a link trained down halves what crosses it), the enforced power limit against the board's
  default (a lowered limit caps the clocks), the maximum SM and memory clocks; the host's CPU model, its
  logical cores, whether it is a VM (the `hypervisor` flag: then other tenants can take its cores) and where
  its clock is read. Without a GPU `gpus` is None and `gpus_reason` says why. `frank telemetry --json` carries
  them as `rig`; the console's GPU panel shows them.
- **conditions** (`ConditionsTally` folds samples into `RigConditions`): over the stretch, each GPU's SM and
  memory clocks, temperature, power draw (and its limit), the clock event ("throttle") reasons with the
  share of samples each was seen in, the link's generation and width; the cores' clock, the share of CPU
  time the hypervisor stole, the CPU the other processes used and this one's. Each as min / mean / max.

frank.telemetry.rig_recorder samples them beside one engine: an experiment cell records the conditions of
its replay with it (frank.experiments.cell; docs/measures.md, "The rig").
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from frank.telemetry import procfs
from frank.telemetry.cpu import CpuSample
from frank.telemetry.gpu import GpuReading


@dataclass(frozen=True)
class GpuFacts:
    index: int
    name: str
    pcie_gen: int | None  # the link now (it trains down at idle on many cards)
    pcie_width: int | None
    pcie_gen_max: int | None  # what the card and slot can do
    pcie_width_max: int | None
    power_limit_w: float | None  # enforced
    power_default_limit_w: float | None  # the board's default
    sm_clock_max_mhz: float | None
    mem_clock_max_mhz: float | None

    @property
    def link_below_max(self) -> bool | None:
        """The link runs narrower or at a lower generation than the card's maximum (None: not known)."""
        if None in (self.pcie_gen, self.pcie_width, self.pcie_gen_max, self.pcie_width_max):
            return None
        assert self.pcie_gen is not None and self.pcie_width is not None  # for the type checker
        return self.pcie_gen < (self.pcie_gen_max or 0) or self.pcie_width < (self.pcie_width_max or 0)

    @property
    def power_below_default(self) -> bool | None:
        if self.power_limit_w is None or self.power_default_limit_w is None:
            return None
        return self.power_limit_w < self.power_default_limit_w

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"link_below_max": self.link_below_max, "power_below_default": self.power_below_default}


@dataclass(frozen=True)
class HostFacts:
    cpu_model: str | None
    logical_cores: int
    hypervisor: bool | None  # a VM: other tenants can take its cores (steal time)
    cpu_mhz_source: str  # "cpufreq" | "cpuinfo", or why the clock cannot be read


@dataclass(frozen=True)
class RigFacts:
    gpus: tuple[GpuFacts, ...] | None  # None: no GPU to read (gpus_reason says why)
    gpus_reason: str | None
    host: HostFacts

    def to_json(self) -> dict[str, Any]:
        return {
            "gpus": None if self.gpus is None else [g.to_json() for g in self.gpus],
            "gpus_reason": self.gpus_reason,
            "host": asdict(self.host),
        }


_HOST: tuple[str | None, bool | None] | None = None


def rig_facts(gpu: GpuReading, cpu: CpuSample) -> RigFacts:
    """The fixed facts of one sample's readings."""
    global _HOST
    if _HOST is None:
        _HOST = procfs.host_cpu()  # read once: it does not change under a running process
    host = HostFacts(_HOST[0], len(cpu.per_core) or (os.cpu_count() or 0), _HOST[1], cpu.cpu_mhz_source)
    if gpu.error is not None or not gpu.gpus:
        return RigFacts(None, gpu.error or "no GPU telemetry (NVML sees no GPU)", host)
    gpus = tuple(
        GpuFacts(
            g.index,
            g.name,
            g.pcie_gen,
            g.pcie_width,
            g.pcie_gen_max,
            g.pcie_width_max,
            g.power_limit_w,
            g.power_default_limit_w,
            g.sm_clock_max_mhz,
            g.mem_clock_max_mhz,
        )
        for g in gpu.gpus
    )
    return RigFacts(gpus, None, host)


# -- conditions over a stretch ------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A quantity over a stretch's samples: least, mean, most, and how many samples had it."""

    min: float
    mean: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Span | None:
        got = [float(v) for v in values if v is not None]
        return cls(min(got), statistics.fmean(got), max(got), len(got)) if got else None


@dataclass(frozen=True)
class GpuConditions:
    index: int
    sm_clock_mhz: Span | None
    mem_clock_mhz: Span | None
    temperature_c: Span | None
    power_w: Span | None
    power_limit_w: float | None
    util_gpu: Span | None
    pcie_gen: Span | None
    pcie_width: Span | None
    throttle: dict[str, float]  # reason -> share of the samples that read it (0..1)
    throttle_read: int  # samples whose reasons could be read


@dataclass(frozen=True)
class RigConditions:
    samples: int
    seconds: float  # from the first sample to the last
    gpus: tuple[GpuConditions, ...] | None  # None: no GPU read (gpus_reason)
    gpus_reason: str | None
    cpu_mhz: Span | None
    steal_percent: Span | None  # of all cores' time
    others_percent: Span | None  # of one core: CPU used by every other process
    self_percent: Span | None  # of one core: this process (the runner and its replay client)
    engine_percent: Span | None  # of one core: the engine's process tree

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ConditionsTally:
    """Folds samples (the sampler's GpuReading and CpuSample) into the conditions of the stretch they span."""

    walls: list[float] = field(default_factory=list)
    gpu: list[GpuReading] = field(default_factory=list)
    cpu: list[CpuSample] = field(default_factory=list)

    def add(self, gpu: GpuReading, cpu: CpuSample, wall_time: float) -> None:
        self.walls.append(wall_time)
        self.gpu.append(gpu)
        self.cpu.append(cpu)

    def conditions(self) -> RigConditions:
        errors = [g.error for g in self.gpu if g.error is not None]
        indexes = sorted({s.index for g in self.gpu for s in g.gpus})
        gpus = tuple(self._gpu(i) for i in indexes) if indexes else None
        engine = [c.engine.cpu_percent if c.engine is not None else None for c in self.cpu]
        return RigConditions(
            samples=len(self.walls),
            seconds=(self.walls[-1] - self.walls[0]) if self.walls else 0.0,
            gpus=gpus,
            gpus_reason=None if gpus is not None else (errors[-1] if errors else "no GPU sample"),
            cpu_mhz=Span.of(c.cpu_mhz for c in self.cpu),
            steal_percent=Span.of(c.steal_percent for c in self.cpu),
            others_percent=Span.of(c.others_percent for c in self.cpu),
            self_percent=Span.of(c.self_percent for c in self.cpu),
            engine_percent=Span.of(engine),
        )

    def _gpu(self, index: int) -> GpuConditions:
        samples = [s for g in self.gpu for s in g.gpus if s.index == index]
        read = [s.throttle_reasons for s in samples if s.throttle_reasons is not None]
        names = sorted({name for reasons in read for name in reasons})
        limits = [s.power_limit_w for s in samples if s.power_limit_w is not None]
        return GpuConditions(
            index=index,
            sm_clock_mhz=Span.of(s.sm_clock_mhz for s in samples),
            mem_clock_mhz=Span.of(s.mem_clock_mhz for s in samples),
            temperature_c=Span.of(s.temperature_c for s in samples),
            power_w=Span.of(s.power_w for s in samples),
            power_limit_w=limits[-1] if limits else None,
            util_gpu=Span.of(s.util_gpu for s in samples),
            pcie_gen=Span.of(s.pcie_gen for s in samples),
            pcie_width=Span.of(s.pcie_width for s in samples),
            throttle={name: sum(name in r for r in read) / len(read) for name in names},
            throttle_read=len(read),
        )
