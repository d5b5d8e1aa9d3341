"""How many CPU threads torch's operations use (`train.threads`, `--threads`).

torch starts with one thread per logical CPU it sees. Hyper-threads share a core's arithmetic
units, and on a machine whose cores are busy with other work, OpenMP threads that wait for each
other at every operator stall: a toy training step measured 6–10 s with torch's default 2
threads on a loaded 2-core machine and 1–2 s with one. So tfm picks, unless told:

- OMP_NUM_THREADS when it is set (torch has already read it);
- else the physical cores among the CPUs this process may run on (`os.sched_getaffinity`,
  cores read from /sys, else /proc/cpuinfo), shared by the processes of a torchrun job on
  this machine (LOCAL_WORLD_SIZE), and never more than torch's own default.

The choice is logged with its reason; when the machine's load already fills those cores, the
log line says that fewer threads may be faster.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

log = logging.getLogger(__name__)

_SYS_CPU = Path("/sys/devices/system/cpu")
_CPUINFO = Path("/proc/cpuinfo")


def usable_cpus() -> set[int]:
    """The logical CPUs this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def physical_cores(cpus: set[int], *, sys_cpu: Path = _SYS_CPU, cpuinfo: Path = _CPUINFO) -> int:
    """How many distinct physical cores the logical `cpus` belong to; len(cpus) when the
    topology cannot be read."""
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = sys_cpu / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            cores = set()
            break
        cores.add((package, core))
    if cores:
        return len(cores)
    return _cores_from_cpuinfo(cpus, cpuinfo) or len(cpus)


def _cores_from_cpuinfo(cpus: set[int], cpuinfo: Path) -> int:
    """Distinct (physical id, core id) of `cpus` in /proc/cpuinfo's blocks; 0 if unreadable."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return 0
    cores: set[tuple[str, str]] = set()
    for block in text.split("\n\n"):
        fields = dict(
            (key.strip(), value.strip())
            for key, sep, value in (line.partition(":") for line in block.splitlines())
            if sep
        )
        if "processor" in fields and int(fields["processor"]) in cpus and "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    return len(cores)


def choose_threads(
    requested: int | None,
    *,
    environ: dict[str, str] | None = None,
    torch_default: int | None = None,
    cores: int | None = None,
) -> tuple[int, str]:
    """The thread count for `requested` (None: auto) and why, as the log line says it."""
    env = os.environ if environ is None else environ
    if requested is not None:
        return requested, "as asked"
    default = torch.get_num_threads() if torch_default is None else torch_default
    if env.get("OMP_NUM_THREADS", "").strip():
        return default, f"OMP_NUM_THREADS={env['OMP_NUM_THREADS'].strip()}"
    cores = physical_cores(usable_cpus()) if cores is None else cores
    processes = max(int(env.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    share = max(cores // processes, 1)
    why = f"auto: {cores} physical core(s)"
    if processes > 1:
        why += f" shared by {processes} processes"
    return min(share, default), why


def use_threads(requested: int | None, *, level: int = logging.INFO) -> int:
    """Set torch's thread count as `choose_threads` says, log it at `level`, and return it."""
    threads, why = choose_threads(requested)
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    load = _load_average()
    busy = load is not None and threads > 1 and load >= physical_cores(usable_cpus())
    hint = f"; the machine is busy (load {load:.1f}): --threads 1 may be faster" if busy else ""
    log.log(level, "threads: %d (%s)%s", threads, why, hint)
    return threads


def busy_machine() -> str | None:
    """ "load L on N CPUs" when more work is runnable than this process may use CPUs (other
    programs are running), else None."""
    load, cpus = _load_average(), len(usable_cpus())
    return f"load {load:.1f} on {cpus} CPUs" if load is not None and load > cpus else None


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
