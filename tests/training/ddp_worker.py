"""Run by test_distributed.py under torchrun: train as `tfm train` would, then save this rank's
weights and last gradients to OUT/rank{RANK}.pt, which only the test can see.

    python -m torch.distributed.run --nproc_per_node=2 ddp_worker.py CONFIG OUT [--resume]
"""

import logging
import os
import sys
from pathlib import Path

import torch

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
    loop.train(config, resume="--resume" in sys.argv, progress_bar=False)
    model = sessions[0].model
    torch.save(
        {
            "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "grads": {k: q.grad.clone() for k, q in model.named_parameters() if q.grad is not None},
        },
        out / f"rank{os.environ['RANK']}.pt",
    )


if __name__ == "__main__":
    main()
