"""A bf16 training step of one batch casts each float32 weight to bf16 once, whatever uses it, in
either layout: autocast's cache serves the weights each layer uses, and the fused loss casts
the output projection (tied to the target embedding) once. (Each batch accumulated into a step
casts them again: autocast's cache lasts one forward pass.)"""

import pytest
import torch
from builders import tiny_config
from torch.utils._python_dispatch import TorchDispatchMode

from tfm.training import StopFlag, optimizer_step
from tfm.training.data_parallel import DataParallel
from tfm.training.distributed import Replicas
from tfm.training.session_opening import open_session


class WeightCasts(TorchDispatchMode):
    """Counts, for each element of each parameter, the casts to bf16 that read it."""

    def __init__(self, parameters) -> None:
        super().__init__()
        self.counts = {p.untyped_storage().data_ptr(): torch.zeros(p.numel()) for p in parameters}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func == torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16:
            source = args[0]
            counts = self.counts.get(source.untyped_storage().data_ptr())
            if counts is not None:
                assert source.is_contiguous()  # whole weights, or slices of whole rows
                start = source.storage_offset()
                counts[start : start + source.numel()] += 1
        return func(*args, **kwargs)


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_a_bf16_step_casts_each_weight_once(tmp_path, layout):
    config = tiny_config(tmp_path / "run", precision="bf16", layout=layout)
    session = open_session(config, resume=False, overwrite=False)
    parallel = DataParallel(Replicas(), session, StopFlag())
    data = session.epochs.data(0)
    weights = [p for name, p in session.model.named_parameters() if "norm" not in name]
    with WeightCasts(weights) as casts:
        result = optimizer_step(session, parallel, [data.batch(data.batches[0])])
    assert result.loss is not None
    counts = torch.cat(list(casts.counts.values()))
    assert counts.max() == 1  # never twice
    # Each matrix in full: the projections, the feed-forward networks and the output projection.
    matrices = [p for p in weights if p.dim() == 2]
    assert all(casts.counts[p.untyped_storage().data_ptr()].min() == 1 for p in matrices)
