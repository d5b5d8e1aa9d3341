"""Helper for test_store's SIGKILL test: a fork server that saves checkpoints until killed.

Usage: python checkpoint_writer.py DIRECTORY. Imports torch once, then for every line read on
stdin forks a child that resumes from the newest loadable checkpoint in DIRECTORY and keeps saving
the next steps; it prints the child's pid, waits until the test has killed it, and prints
"reaped SIGNAL" (the signal that ended the child; 0 if it exited by itself).
Step s holds `weights` = torch.full((SIZE,), s), so a reader can tell a complete file from a torn
one.
"""

import os
import sys
import traceback

import torch

from tfm.rundir.store import CheckpointStore

SIZE = 1_000_000  # 4 MB of float32: a write takes long enough to be killed in the middle


def write_forever(directory: str) -> None:
    store = CheckpointStore(directory, keep_last=2, keep_best=1)
    resumed = store.latest_loadable()
    step = resumed.state["step"] if resumed else 0
    protect = resumed.path if resumed else None
    while True:
        step += 1
        state = {"weights": torch.full((SIZE,), float(step))}
        store.save(state, step=step, score=float(step % 5), protect=protect)


def main() -> None:
    directory = sys.argv[1]
    for _line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                write_forever(directory)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)
        print(pid, flush=True)
        _pid, status = os.waitpid(pid, 0)
        print("reaped", os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0, flush=True)


if __name__ == "__main__":
    main()
