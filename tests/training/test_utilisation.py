"""Model FLOPs from the model's shape (tfm.training.utilisation) equal what torch.utils.flop_counter
counts for a training step's forward and backward, and the log reports them."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from builders import metric_events, tiny_config
from torch.utils.flop_counter import FlopCounterMode

from tfm.data.batching import collate
from tfm.training import train
from tfm.training.session_opening import open_session
from tfm.training.utilisation import PEAKS, describe, known_peak, step_flops
from tfm.transformer import ModelArgs, build_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def random_batch(generator, src_lengths, tgt_lengths, vocab):
    def ids(n):
        return [int(x) for x in torch.randint(3, vocab, (n,), generator=generator)]

    return collate([ids(n) + [2] for n in src_lengths], [[1, *ids(n), 2] for n in tgt_lengths])


@pytest.mark.parametrize("layers", [(1, 1), (2, 3)])
def test_step_flops_from_the_shape_equal_flop_counters_count(layers):
    # Attention dropout > 0 takes SDPA's matmul path on the CPU, whose products the counter
    # sees (it has no formula for the CPU's fused kernel); the logits and a plain cross-entropy
    # stand in for the fused loss, which makes the same three products.
    args = ModelArgs(src_vocab_size=50, tgt_vocab_size=60, d_model=32, n_heads=4,
                     n_encoder_layers=layers[0], n_decoder_layers=layers[1], d_ff=48,
                     attention_dropout=0.1)  # fmt: skip
    model = build_model(args)
    generator = torch.Generator().manual_seed(0)
    batches = [
        random_batch(generator, (5, 9, 7), (4, 11, 6), 50),
        random_batch(generator, (3, 3), (8, 2), 50),
    ]
    with FlopCounterMode(display=False) as counter:
        for batch in batches:
            real = batch.tgt_out != 0
            logits = model(batch.src, batch.tgt_in, keep=real)  # (N, V)
            F.cross_entropy(logits, batch.tgt_out[real], reduction="sum").backward()
    assert step_flops(args, batches) == counter.get_total_flops() > 0


def test_peaks_are_found_by_the_names_torch_gives_and_name_their_source():
    assert known_peak("NVIDIA H100 80GB HBM3").bf16 == 989.4
    assert known_peak("NVIDIA H100 PCIe").bf16 == 756.0
    assert known_peak("NVIDIA H200").fp32 == 66.9
    assert known_peak("NVIDIA A100-SXM4-80GB").bf16 == 312.0
    assert known_peak("NVIDIA L4").bf16 == 121.0
    assert known_peak("NVIDIA GeForce RTX 4090") is None
    assert all(p.bf16 > p.fp32 > 0 and "datasheet" in p.source for p in PEAKS)
    args = ModelArgs(src_vocab_size=50, tgt_vocab_size=60, d_model=32, n_heads=4)
    line = describe(args, torch.device("cpu"), torch.float32)
    assert "MFLOP per target token" in line and "not known: no MFU" in line


def test_each_log_line_gives_the_step_time_and_model_flops_per_second_of_its_steps(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(run, max_steps=3, log_every=1), progress_bar=False)
    events = metric_events(run, "train_loss")
    session = open_session(tiny_config(tmp_path / "again"), resume=False, overwrite=False)
    data = session.epochs.data(0)
    batches = [data.batch(indices) for indices in data.batches[:3]]
    assert len(events) == len(batches) == 3
    for event, batch in zip(events, batches, strict=True):
        flops_per_token = step_flops(session.model_args, [batch]) / batch.n_tgt_tokens
        logged = event["model_tflops_per_s"] * 1e12 / event["tokens_per_s"]
        assert logged == pytest.approx(flops_per_token, rel=1e-3)
        seconds = batch.n_tgt_tokens / event["tokens_per_s"]  # one step a line
        assert event["step_ms"] == pytest.approx(1e3 * seconds, rel=1e-2)
        assert "mfu" not in event  # the CPU's peak is not in the table


def test_the_base_gpu_recipe_is_the_papers_base_model_with_25k_token_batches():
    from tfm.config import load_config

    config = load_config(CONFIGS / "base_gpu.yaml", [])
    m, t = config.model, config.train
    assert (m.d_model, m.n_heads, m.n_encoder_layers, m.n_decoder_layers, m.d_ff) == (
        512, 8, 6, 6, 2048,
    )  # fmt: skip
    assert m.dropout == t.label_smoothing == 0.1 and t.lr is None and t.warmup_steps == 4000
    assert t.max_tokens == 25000 and t.precision == "bf16" and t.device == "cuda"
    assert config.data.train.format == "text" and config.tokenizer.joint and m.share_embeddings
    vocab = config.tokenizer.vocab_size
    args = ModelArgs.from_config(m, src_vocab_size=vocab, tgt_vocab_size=vocab, pad_id=0)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in build_model(args).parameters())
    assert 60e6 < parameters < 65e6  # Table 3: 65M with a 37k vocabulary
