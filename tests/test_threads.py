"""The thread count tfm picks: OMP_NUM_THREADS when set, else the physical cores of the CPUs the
process may use (hyper-threads counted once), shared by torchrun's local processes, never more
than torch's default; `--threads` and `train.threads` override it."""

from pathlib import Path

import pytest
import torch

from tfm import threads
from tfm.threads import choose_threads, physical_cores


def fake_topology(root: Path, cores: dict[int, tuple[int, int]]) -> Path:
    """/sys/devices/system/cpu with logical CPU -> (package, core)."""
    for cpu, (package, core) in cores.items():
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return root


def test_hyper_threads_of_one_core_count_once(tmp_path):
    # 4 logical CPUs: two cores with two hyper-threads each, on one package
    sys_cpu = fake_topology(tmp_path, {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)})
    assert physical_cores({0, 1, 2, 3}, sys_cpu=sys_cpu) == 2
    assert physical_cores({0, 2}, sys_cpu=sys_cpu) == 1  # the affinity mask leaves one core
    two_packages = fake_topology(tmp_path / "b", {0: (0, 0), 1: (1, 0)})
    assert physical_cores({0, 1}, sys_cpu=two_packages) == 2  # core 0 of each package


def test_proc_cpuinfo_when_sys_has_no_topology(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    blocks = [f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t\t: {cpu % 2}\n" for cpu in range(4)]
    cpuinfo.write_text("\n".join(blocks))
    assert physical_cores({0, 1, 2, 3}, sys_cpu=tmp_path / "none", cpuinfo=cpuinfo) == 2
    # Neither readable: every logical CPU counts.
    assert physical_cores({0, 1, 2}, sys_cpu=tmp_path / "none", cpuinfo=tmp_path / "no") == 3


@pytest.mark.parametrize(
    ("requested", "environ", "default", "cores", "expected", "why"),
    [
        (None, {}, 8, 4, 4, "auto: 4 physical core(s)"),
        (None, {}, 2, 4, 2, "auto: 4 physical core(s)"),  # never more than torch's default
        (None, {"OMP_NUM_THREADS": "3"}, 3, 16, 3, "OMP_NUM_THREADS=3"),
        (None, {"LOCAL_WORLD_SIZE": "2"}, 16, 8, 4, "auto: 8 physical core(s) shared by 2"),
        (None, {"LOCAL_WORLD_SIZE": "4"}, 16, 2, 1, "auto: 2 physical core(s) shared by 4"),
        (6, {"OMP_NUM_THREADS": "1"}, 1, 2, 6, "as asked"),
    ],
)
def test_choice_and_its_reason(requested, environ, default, cores, expected, why):
    chosen, reason = choose_threads(requested, environ=environ, torch_default=default, cores=cores)
    assert chosen == expected
    assert reason.startswith(why)


def test_use_threads_sets_torch_and_logs_the_choice(monkeypatch, caplog):
    before = torch.get_num_threads()
    load = iter([0.0, 9.0])  # a quiet machine, then one whose load fills every core
    monkeypatch.setattr(threads, "_load_average", lambda: next(load))
    monkeypatch.setattr(threads, "physical_cores", lambda cpus: 2)
    caplog.set_level("INFO", logger="tfm.threads")
    try:
        assert threads.use_threads(1) == 1
        assert torch.get_num_threads() == 1
        assert threads.use_threads(2) == 2
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert caplog.messages == [
        "threads: 1 (as asked)",
        "threads: 2 (as asked); the machine is busy (load 9.0): --threads 1 may be faster",
    ]
