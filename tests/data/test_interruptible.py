"""interruptibly(): work in a forked worker that never finalizes what it inherited."""

import gc
import os

import pytest

from tfm.data.interruptible import interruptibly


class Finalized:
    """Writes the pid of the process that finalizes it to `path` (a native object with a thread
    pool, such as a CTranslate2 translator, hangs instead when that process is a forked copy)."""

    def __init__(self, path):
        self.path = path
        self.cycle = self

    def __del__(self):
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")


def collect_and_report_pid():
    gc.collect()
    return os.getpid()


def test_garbage_left_before_the_fork_is_finalized_here_not_in_the_worker(tmp_path):
    path = tmp_path / "finalized_by"
    enabled = gc.isenabled()
    gc.disable()  # so that only an explicit collection finalizes the cycle
    try:
        Finalized(path)  # garbage at once: reachable only from itself
        worker_pid = interruptibly(collect_and_report_pid)
        assert not path.exists()  # the worker's collection left it alone
        gc.collect()
    finally:
        if enabled:
            gc.enable()
    assert worker_pid != os.getpid()  # it did run in a worker
    assert path.read_text(encoding="utf-8").split() == [str(os.getpid())]


def test_the_worker_gives_back_its_result_and_this_process_collects_as_before():
    assert interruptibly(lambda: 6 * 7) == 42
    assert gc.get_freeze_count() == 0  # nothing left frozen here
    with pytest.raises(ZeroDivisionError):
        interruptibly(lambda: 1 / 0)
