"""Training: the loop, the §5.3 schedule and §5.4 loss, sessions that save and resume exactly."""

from tfm.training.loop import TrainResult, train
from tfm.training.session import StopFlag

__all__ = ["StopFlag", "TrainResult", "train"]
