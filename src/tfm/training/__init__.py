"""Training: the loop, the §5.3 schedule and §5.4 loss, sessions that save and resume exactly.

`train` runs (or resumes) a whole run; `optimizer_step` is one training step on an open session,
for benchmarks and tools that drive steps themselves.
"""

from tfm.training.loop import TrainResult, train
from tfm.training.session import StopFlag
from tfm.training.step import StepResult, optimizer_step

__all__ = ["StepResult", "StopFlag", "TrainResult", "optimizer_step", "train"]
