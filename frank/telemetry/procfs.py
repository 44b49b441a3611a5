"""Linux /proc readers for the telemetry sampler: one small read per fact, no objects per call.

psutil answers the same questions portably, but reads three files per process and one per thread plus one
for its name, and builds objects each call; at 1 Hz in a console that must idle cheaply that was most of the
sampler's cost. One /proc/PID/stat read gives a process's (or a thread's) CPU time, thread count, resident
memory, start time and name. The host readers return None where /proc cannot be read (the caller falls
back to psutil); the process readers return None for a process that is gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def busy_percent(used_s: float, dt: float, cores: float = 1.0) -> float:
    """CPU seconds used over `dt` seconds as percent of one core, between 0 and what `cores` can give. CPU
    times come in clock ticks (10 ms), so over a short interval one tick too many per process or thread
    would read above that ceiling."""
    return min(100.0 * cores, max(0.0, 100.0 * used_s / dt))


@dataclass(frozen=True)
class ProcStat:
    name: str  # comm: the process's or thread's name (15 characters at most)
    cpu_s: float  # user + system
    num_threads: int
    rss_bytes: int
    start_ticks: int  # since boot: with the pid, names one process across pid reuse


def proc_stat(pid: int, tid: int | None = None) -> ProcStat | None:
    """/proc/PID/stat (or a thread's /proc/PID/task/TID/stat); None when it is gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:  # gone (ENOENT, ESRCH); /proc/PID/stat is readable by every user
        return None
    return parse_stat(data)


def parse_stat(data: bytes) -> ProcStat:
    # the name sits in parentheses and may itself hold spaces and parentheses: split at the last ')'
    close = data.rindex(b")")
    fields = data[close + 2 :].split()
    return ProcStat(
        name=data[data.index(b"(") + 1 : close].decode(errors="replace"),
        cpu_s=(int(fields[11]) + int(fields[12])) / CLOCK_TICKS,  # utime, stime (fields 14, 15)
        num_threads=int(fields[17]),  # field 20
        rss_bytes=int(fields[21]) * PAGE_SIZE,  # field 24
        start_ticks=int(fields[19]),  # field 22
    )


def thread_stats(pid: int) -> dict[int, ProcStat]:
    """Every thread of a process by thread id ({} when the process is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return {}
    out = {}
    for tid in tids:
        stat = proc_stat(pid, int(tid))
        if stat is not None:  # a thread that ended between the listing and its read
            out[int(tid)] = stat
    return out


def thread_runtimes(pid: int) -> dict[int, float]:
    """Seconds on a CPU of every thread of a process, to the nanosecond: the first field of
    /proc/PID/task/TID/schedstat (the scheduler's sum_exec_runtime), where /proc/.../stat counts clock ticks
    (10 ms). A thread without schedstat (a kernel without CONFIG_SCHED_INFO) falls back to its stat."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return {}
    out = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as handle:
                out[int(tid)] = int(handle.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            stat = proc_stat(pid, int(tid))
            if stat is not None:  # else it ended between the listing and its read
                out[int(tid)] = stat.cpu_s
    return out


def core_ticks() -> list[tuple[int, int, int]] | None:
    """(busy, total, steal) clock ticks per logical core since boot, from /proc/stat; None without it. Busy is
    total less idle and iowait, as psutil counts it (guest time is already inside user time); steal is the
    time a hypervisor ran something else while this core's virtual CPU wanted to run (0 on bare metal)."""
    try:
        with open("/proc/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    out = []
    for line in data.split(b"\n"):
        if line.startswith(b"cpu") and not line.startswith(b"cpu "):
            ticks = [int(x) for x in line.split()[1:9]]  # user nice system idle iowait irq softirq steal
            total = sum(ticks)
            out.append((total - ticks[3] - ticks[4], total, ticks[7]))
    return out or None


def cpu_mhz() -> tuple[float | None, str]:
    """The cores' mean clock in MHz and where it was read: cpufreq's scaling_cur_freq (sysfs), else the
    `cpu MHz` lines of /proc/cpuinfo (in a VM often the host's nominal clock), else (None, why not)."""
    base = "/sys/devices/system/cpu"
    try:
        cores = [d for d in os.listdir(base) if d.startswith("cpu") and d[3:].isdigit()]
    except OSError:
        cores = []
    khz = []
    for core in cores:
        try:
            with open(f"{base}/{core}/cpufreq/scaling_cur_freq", "rb") as handle:
                khz.append(int(handle.read()))
        except (OSError, ValueError):
            break
    if khz and len(khz) == len(cores):
        return sum(khz) / len(khz) / 1000.0, "cpufreq"
    try:
        with open("/proc/cpuinfo", "rb") as handle:
            data = handle.read()
    except OSError:
        return None, "no cpufreq in sysfs and no /proc/cpuinfo"
    mhz = [float(line.split(b":", 1)[1]) for line in data.split(b"\n") if line.startswith(b"cpu MHz")]
    if not mhz:
        return None, "no cpufreq in sysfs and no cpu MHz in /proc/cpuinfo"
    return sum(mhz) / len(mhz), "cpuinfo"


def host_cpu() -> tuple[str | None, bool | None]:
    """The CPU's model name and whether it runs under a hypervisor (the `hypervisor` flag: a VM, whose cores
    another tenant can take: steal time), from /proc/cpuinfo; (None, None) without it."""
    try:
        with open("/proc/cpuinfo", "rb") as handle:
            data = handle.read()
    except OSError:
        return None, None
    model, flags = None, None
    for line in data.split(b"\n"):
        key, _, value = line.partition(b":")
        key = key.strip()
        if key == b"model name" and model is None:
            model = value.strip().decode(errors="replace")
        elif key == b"flags" and flags is None:
            flags = value.split()
        if model is not None and flags is not None:
            break
    return model, None if flags is None else b"hypervisor" in flags


def self_cpu_s() -> float:
    """CPU seconds this process has used (every thread of it), user + system."""
    t = os.times()
    return t.user + t.system


def memory() -> tuple[int, int] | None:
    """(total, available) bytes from /proc/meminfo; None without it (or without MemAvailable)."""
    try:
        with open("/proc/meminfo", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    found = {}
    for line in data.split(b"\n"):
        if line.startswith((b"MemTotal:", b"MemAvailable:")):
            key, value = line.split(b":", 1)
            found[key] = int(value.split()[0]) * 1024
            if len(found) == 2:
                return found[b"MemTotal"], found[b"MemAvailable"]
    return None


def environ(pid: int) -> dict[str, str]:
    """A process's environment as it started ({} when it cannot be read: gone, or another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            pairs = [entry.decode(errors="replace").partition("=") for entry in handle.read().split(b"\0") if entry]
    except OSError:
        return {}
    return {key: value for key, _, value in pairs}
