"""Timing a model shape on this device before training, for a plan under a time budget.

A few optimizer steps of the shape on real training batches, each taken as training takes it (the
batch reaching the model as `train.layout` and `train.static_shapes` say, through the training
step's own `layout_loss_sum`; the gradient clipped), give its step time. The batches timed are
those of the epoch nearest its mean in tokens: a small corpus's epoch also holds batches of one or
a few sentences (the ends of its length groups), and timing one of those would plan two or
three times the steps the budget holds. Decoding a sample of the validation split through a
`Translator`, as validation decodes (the beam it will use, to the decoding length limit), gives a
validation's time at its slowest: an untrained model rarely stops by itself, and early validations
are the slow ones. A decoding step costs a fixed part (on a GPU, mostly the kernel launches, the
same for one sentence or five hundred) and a part per sentence still decoding (on a CPU, nearly all
of it); the sample's few longest sentences are timed alone and then with the rest, so that the two
parts come apart and the whole split's decoding batches can be costed, each by its steps and its
sentences' steps. (Scaled by sentences alone, a Multi30k validation on an H200 is costed at 16 to
20 seconds; it takes 3.)
The global random state is left as it was, so a run planned with a clock trains as one planned
without.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from tfm.config import Config
from tfm.data.batching import EpochData, TokenBatchSampler, inference_batches, token_counts
from tfm.data.pipeline import EncodedSplit
from tfm.data.ragged import lengths_of
from tfm.data.tokenizer import Tokenizer
from tfm.prediction.settings import DecodeSettings
from tfm.prediction.torch_translator import TorchTranslator
from tfm.training.batch_layout import BatchLoss, layout_loss_sum, static
from tfm.training.recipe.ladder import Shape
from tfm.transformer import Transformer, build_model

UNTIMED_STEPS = 2  # first: allocations and first-call costs
TIMED_STEPS = 5  # the fastest of these is the step's time: a busy moment only slows a step
SAMPLE = 48  # validation sentences decoded to time a validation
FEW = 4  # of them, the longest, timed alone too (the faster of two): a step's fixed part apart
WARM_UP = 2  # sentences decoded untimed first: first-call costs (a GPU's kernels, allocations)
MEAN_SAMPLE = 2000  # batches, at most, whose tokens give an epoch's mean


@dataclass
class Calibration:
    """A `Clock` (derive.py) that times shapes on `device` with the training split's batches
    and a sample of the validation split (loaded only if a validation is timed), decoded as
    `config`'s decoding section and `tokenizer` say."""

    train: EncodedSplit
    validation: Callable[[], EncodedSplit]
    config: Config
    tokenizer: Tokenizer
    vocab_size: int
    device: torch.device
    dtype: torch.dtype
    timer: Callable[[], float] = time.perf_counter
    _steps: dict = field(default_factory=dict)
    _validations: dict = field(default_factory=dict)

    def step_seconds(self, shape: Shape, max_tokens: int) -> float:
        """The seconds of a training step of `shape` with batches of `max_tokens`, as an epoch's
        mean batch takes it: the fastest of `TIMED_STEPS` batches near that mean, since other
        work on the machine can only make a step slower."""
        key = (shape, max_tokens)
        if key not in self._steps:
            with torch.random.fork_rng(devices=[]):
                self._steps[key] = self._time_steps(shape, max_tokens)
        return self._steps[key]

    def validation_seconds(self, shape: Shape, beam_size: int) -> float:
        """The seconds decoding the whole validation split takes with `shape` and a beam of
        `beam_size` (1: greedy)."""
        key = (shape, beam_size)
        if key not in self._validations:
            with torch.random.fork_rng(devices=[]):
                self._validations[key] = self._time_validation(shape, beam_size)
        return self._validations[key]

    def _model(self, shape: Shape) -> Transformer:
        torch.manual_seed(0)
        args = shape.model_args(vocab_size=self.vocab_size, max_len=self.config.model.max_len)
        return build_model(args).to(self.device)

    def _time_steps(self, shape: Shape, max_tokens: int) -> float:
        model = self._model(shape)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=1e-4, fused=self.device.type in ("cpu", "cuda")
        )
        split = self.train
        src_lengths, tgt_lengths = lengths_of(split.src), lengths_of(split.tgt)
        sampler = TokenBatchSampler(src_lengths, tgt_lengths, max_tokens=max_tokens, seed=0)
        train = self.config.train
        packed = train.layout == "packed"
        epoch = sampler.epoch(0)
        sample = epoch[:: max(len(epoch) // MEAN_SAMPLE, 1)]  # batches in shuffled order
        # a step computes on the real tokens of a packed batch, on the padded tensors otherwise
        tokens = [token_counts(src_lengths, tgt_lengths, b)[0 if packed else 1] for b in sample]
        mean = float(np.mean(tokens))
        nearest = sorted(range(len(sample)), key=lambda i: abs(tokens[i] - mean))
        batches = [sample[i] for i in sorted(nearest[: UNTIMED_STEPS + TIMED_STEPS])]
        data = EpochData(src=split.src, tgt=split.tgt, batches=batches)
        loss = BatchLoss(self.device, self.dtype, model.output_projection.weight, 0.1)
        model.train()
        times = []
        for indices in batches:
            batch = data.batch(indices)
            started = self.timer()
            if train.static_shapes:
                batch = static(batch, max_tokens=max_tokens)
            optimizer.zero_grad(set_to_none=True)
            layout_loss_sum(train.layout, model, batch, loss).backward()
            if train.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), train.clip_norm)
            optimizer.step()
            if self.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(self.timer() - started)
        return min(times[UNTIMED_STEPS:] or times)

    def _time_validation(self, shape: Shape, beam_size: int) -> float:
        model = self._model(shape)
        model.eval()
        split = self.validation()
        if not len(split):
            return 0.0
        # the length penalty only ranks what finished: no time of its own
        strategy = {"strategy": "beam", "beam_size": beam_size} if beam_size > 1 else {}
        decoding = self.config.decoding.model_copy(update={"strategy": "greedy", **strategy})
        settings = DecodeSettings.from_config(decoding, self.device, self.dtype)
        translator = TorchTranslator(model=model, tokenizer=self.tokenizer, config=self.config,
                                     settings=settings)  # fmt: skip

        def steps(length: int) -> int:  # an untrained model's: its output limit
            return settings.limit.tokens(length, model.max_len)

        def seconds(sources: list[list[int]]) -> float:
            started = self.timer()
            translator.search(sources, settings, list(range(len(sources))), n_best=1,
                              scored=False)  # fmt: skip
            return self.timer() - started

        # one decoding batch, as search_ids cuts them, longest first
        budget = settings.batch_source_tokens()
        cut = model.max_len  # search_ids cuts longer sources to the positional table
        sample = [list(split.src[i])[:cut] for i in range(min(len(split), SAMPLE))]
        sample.sort(key=len, reverse=True)
        sample = sample[: max(budget // len(sample[0]), 1)]
        seconds(sample[-WARM_UP:])
        few_s = min(seconds(sample[:FEW]), seconds(sample[:FEW]))  # a busy moment only slows
        fixed, per_row = decoding_step_costs(
            [steps(len(s)) for s in sample], few_s, seconds(sample)
        )
        lengths = [min(n, cut) for n in lengths_of(split.src).tolist()]
        total = 0.0
        for batch in inference_batches(lengths, max_tokens=budget):
            limits = [steps(lengths[i]) for i in batch]
            total += fixed * max(limits) + per_row * sum(limits)
        return total


def decoding_step_costs(limits: list[int], few_s: float, all_s: float) -> tuple[float, float]:
    """The seconds of a decoding step's fixed part and of its part per sentence, from the time
    of the `FEW` longest sentences of a batch (their output `limits`, longest first) and of the
    whole batch: every sentence decodes to its limit and then leaves the batch, so that a batch
    costs fixed · its longest limit + per-sentence · the sum of its limits. With too few other
    sentences to tell the parts apart (the whole batch's sentence steps not twice the few's), all
    of it is per sentence: the most it can be, as it is also when timing noise says more."""
    few, every = sum(limits[:FEW]), sum(limits)
    if every < 2 * few:
        return 0.0, all_s / every
    per_row = min(max(all_s - few_s, 0.0) / (every - few), all_s / every)
    return max(all_s - per_row * every, 0.0) / limits[0], per_row
