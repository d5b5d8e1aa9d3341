"""Run by test_distributed.py under torchrun: train as `tfm train` would, then save this rank's
weights, last gradients and the DDP wrappers still alive when the process group was destroyed
to OUT/rank{RANK}.pt, which only the test can see.

    python -m torch.distributed.run --nproc_per_node=2 ddp_worker.py CONFIG OUT [--resume]
"""

import gc
import logging
import os
import sys
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from tfm.config import load_config
from tfm.training import loop


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config, out = load_config(Path(sys.argv[1])), Path(sys.argv[2])
    sessions = []
    opened = loop.open_session_everywhere

    def keep(*args, **kwargs):
        sessions.append(opened(*args, **kwargs))
        return sessions[-1]

    loop.open_session_everywhere = keep
    destroy, ddp_alive = torch.distributed.destroy_process_group, []

    def destroy_counting(*args, **kwargs):
        gc.collect()
        ddp_alive.append(sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects()))
        return destroy(*args, **kwargs)

    torch.distributed.destroy_process_group = destroy_counting
    loop.train(config, resume="--resume" in sys.argv, progress_bar=False)
    model = sessions[0].model
    torch.save(
        {
            "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "grads": {k: q.grad.clone() for k, q in model.named_parameters() if q.grad is not None},
            "ddp_alive_at_destroy": ddp_alive,
        },
        out / f"rank{os.environ['RANK']}.pt",
    )


if __name__ == "__main__":
    main()
