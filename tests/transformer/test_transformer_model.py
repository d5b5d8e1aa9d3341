import os
import subprocess
import sys
from dataclasses import FrozenInstanceError, asdict, fields, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from tiny_models import padded_batch
from torch import nn
from transformer_helpers import (
    causal_for_reference,
    copy_decoder_layer,
    copy_encoder_layer,
    copy_linear,
    randomize,
)

import tfm
from tfm.config import Config, ModelConfig
from tfm.training.session_opening import model_args
from tfm.transformer import ModelArgs, Transformer, build_model, parameter_count

V = 40
TINY = dict(
    src_vocab_size=V, tgt_vocab_size=V, d_model=32, n_heads=4, n_encoder_layers=2,
    n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64,
)  # fmt: skip


def tiny_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    return build_model(ModelArgs(**{**TINY, **overrides})).eval()


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_decoder_matches_nn_transformer(norm_position, no_fast_path):
    model = tiny_model(norm_position=norm_position)
    reference = nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
        dropout=0.0, batch_first=True, norm_first=norm_position == "pre",
    )  # fmt: skip
    reference = randomize(reference, seed=5).eval()
    reference.encoder.enable_nested_tensor = False
    for ours, theirs in zip(model.encoder.layers, reference.encoder.layers, strict=True):
        copy_encoder_layer(ours, theirs)
    for ours, theirs in zip(model.decoder.layers, reference.decoder.layers, strict=True):
        copy_decoder_layer(ours, theirs)
    if norm_position == "pre":
        copy_linear(model.encoder.final_norm, reference.encoder.norm)
        copy_linear(model.decoder.final_norm, reference.decoder.norm)
    else:  # nn.Transformer adds a final LayerNorm even after post-norm stacks; the paper does not
        reference.encoder.norm = reference.decoder.norm = None
    src, tgt = padded_batch([9, 5, 2], vocab_size=V), padded_batch([6, 6, 6], vocab_size=V, seed=1)
    src_pad = src == model.pad_id
    embedded_src = model.positional_encoding(model.src_embedding(src))
    embedded_tgt = model.positional_encoding(model.tgt_embedding(tgt))
    hidden = reference(
        embedded_src, embedded_tgt, tgt_mask=causal_for_reference(6), src_key_padding_mask=src_pad,
        memory_key_padding_mask=src_pad, tgt_is_causal=True,
    )  # fmt: skip
    torch.testing.assert_close(
        model(src, tgt), model.output_projection(hidden), atol=1e-5, rtol=1e-5
    )


def test_forward_is_decode_of_encode_and_gives_b_t_v_logits():
    model = tiny_model()
    src, tgt = padded_batch([7, 3], vocab_size=V), padded_batch([5, 2], vocab_size=V, seed=1)
    logits = model(src, tgt)
    assert logits.shape == (2, 5, V) and logits.dtype == torch.float32
    torch.testing.assert_close(logits, model.decode(tgt, model.encode(src), src))


def test_keep_gives_the_kept_rows_of_the_full_logits_and_the_same_loss_gradients():
    model = tiny_model().train()  # dropout 0: both passes see the same network
    src, tgt = padded_batch([7, 3, 5], vocab_size=V), padded_batch([6, 2, 4], vocab_size=V, seed=1)
    targets = torch.randint(1, V, tgt.shape, generator=torch.Generator().manual_seed(2))
    keep = tgt != model.pad_id
    full = model(src, tgt)
    kept = model(src, tgt, keep=keep)
    assert kept.shape == (int(keep.sum()), V) == (12, V)
    torch.testing.assert_close(kept, full[keep])
    hidden = model(src, tgt, keep=keep, project=False)  # what the training loss projects
    assert hidden.shape == (12, 32)
    torch.testing.assert_close(model.output_projection(hidden), kept)
    gradients = []
    for logits, gold in ((full.reshape(-1, V), targets.masked_fill(~keep, -100).reshape(-1)),
                         (kept, targets[keep])):  # fmt: skip
        model.zero_grad()
        F.cross_entropy(logits, gold, reduction="sum").backward(retain_graph=True)
        gradients.append([p.grad.clone() for p in model.parameters()])
    for with_padding, without in zip(*gradients, strict=True):
        torch.testing.assert_close(without, with_padding, atol=1e-6, rtol=1e-5)


def test_changing_later_target_tokens_leaves_earlier_logits_unchanged():
    model = tiny_model()
    src, tgt = padded_batch([8, 4], vocab_size=V), padded_batch([7, 7], vocab_size=V, seed=1)
    changed = tgt.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % (V - 1) + 1
    before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(before[:, :4], after[:, :4], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_appending_source_padding_leaves_outputs_unchanged():
    model = tiny_model()
    src, tgt = padded_batch([6, 6], vocab_size=V), padded_batch([5, 5], vocab_size=V, seed=1)
    padded = torch.cat([src, torch.zeros(2, 4, dtype=torch.long)], dim=1)  # (B, S + 4)
    torch.testing.assert_close(model.encode(padded)[:, :6], model.encode(src), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-6, rtol=1e-5)


def test_shared_and_tied_embeddings_are_one_parameter():
    model = tiny_model(share_embeddings=True, tie_output=True)
    assert model.src_embedding is model.tgt_embedding
    assert model.output_projection.weight is model.tgt_embedding.weight
    untied = tiny_model(tie_output=False)
    assert untied.output_projection.weight is not untied.tgt_embedding.weight
    assert untied.src_embedding is not untied.tgt_embedding
    n_shared = sum(p.numel() for p in model.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    assert n_untied - n_shared == 2 * V * 32


def test_activation_dropout_from_the_config_reaches_every_feed_forward_network():
    shape = {"d_model": 32, "n_heads": 4, "n_encoder_layers": 2, "n_decoder_layers": 2, "d_ff": 64}
    config = Config.model_validate({"model": {"activation_dropout": 0.4, "dropout": 0.0, **shape}})
    vocab = SimpleNamespace(src_vocab_size=V, tgt_vocab_size=V)
    args = model_args(config, vocab)
    model = build_model(args).train()
    layers = [*model.encoder.layers, *model.decoder.layers]
    assert [layer.feed_forward.dropout.p for layer in layers] == [0.4] * 4
    src, tgt = torch.randint(1, V, (2, 6)), torch.randint(1, V, (2, 5))
    assert not torch.allclose(model(src, tgt), model(src, tgt))  # the only randomness
    no_dropout = build_model(replace(args, activation_dropout=0.0)).train()
    torch.testing.assert_close(no_dropout(src, tgt), no_dropout(src, tgt))


@pytest.mark.parametrize("norm_position", ["post", "pre"])
@pytest.mark.parametrize(("share", "tie"), [(False, False), (False, True), (True, True)])
def test_the_parameter_count_from_the_shape_is_the_built_models(norm_position, share, tie):
    args = ModelArgs(src_vocab_size=90, tgt_vocab_size=90 if share else 70, d_model=24,
                     n_heads=2, n_encoder_layers=2, n_decoder_layers=3, d_ff=40,
                     norm_position=norm_position, share_embeddings=share,
                     tie_output=tie)  # fmt: skip
    built = sum(p.numel() for p in build_model(args).parameters())  # a tied one once
    assert parameter_count(args) == built


def test_model_args_from_the_config_copy_every_model_option():
    # Every option of the config's model section reaches the model with the config's value (each
    # differs from ModelArgs' default, so none can arrive by default).
    options = {"d_model": 48, "n_heads": 3, "n_encoder_layers": 2, "n_decoder_layers": 3,
               "d_ff": 40, "dropout": 0.2, "attention_dropout": 0.05, "activation": "gelu",
               "activation_dropout": 0.15, "norm_position": "pre", "share_embeddings": True,
               "tie_output": False, "max_len": 77}  # fmt: skip
    assert set(options) == set(ModelConfig.model_fields)
    sizes = {"src_vocab_size": 30, "tgt_vocab_size": 30, "pad_id": 2}
    args = ModelArgs.from_config(ModelConfig(**options), **sizes)
    assert asdict(args) == {**options, **sizes}
    assert [f.name for f in fields(ModelArgs)] == list(asdict(args))
    with pytest.raises(TypeError, match="needs src_vocab_size, tgt_vocab_size, pad_id"):
        ModelArgs.from_config(ModelConfig(**options))
    with pytest.raises(TypeError, match="^model.d_model, model.n_heads, .* not set"):
        ModelArgs.from_config(ModelConfig(), **sizes)  # the recipe has not planned it


def test_model_args_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        ModelArgs(40, 40)  # type: ignore[misc]
    args = ModelArgs(**TINY)
    with pytest.raises(FrozenInstanceError):
        args.d_model = 64  # type: ignore[misc]
    assert tiny_model().args == args


def test_stored_model_args_of_older_versions_build_the_same_model():
    # A model file keeps asdict(args); one written before activation_dropout existed lacks it (a
    # model without that dropout) and reads back as the model it was.
    stored = asdict(ModelArgs(**TINY))
    assert ModelArgs.from_stored(stored) == ModelArgs(**TINY)
    older = {k: v for k, v in stored.items() if k != "activation_dropout"}
    assert ModelArgs.from_stored(older) == ModelArgs(**TINY)
    with pytest.raises(TypeError, match="label_smoothing"):
        ModelArgs.from_stored({**stored, "label_smoothing": 0.1})


def test_parameter_names_are_those_checkpoints_hold():
    # Checkpoints store the state dict by these names: renaming a module breaks loading them.
    model = tiny_model(n_encoder_layers=1, n_decoder_layers=1, norm_position="pre")
    layer = ["self_attention.w_qkv", "self_attention.w_o", "self_attention_residual.norm"]
    decoder_layer = [*layer, "cross_attention.w_qkv", "cross_attention.w_o",
                     "cross_attention_residual.norm"]  # fmt: skip
    ffn = ["feed_forward.w_1", "feed_forward.w_2", "feed_forward_residual.norm"]
    names = [
        *[f"encoder.layers.0.{m}" for m in [*layer, *ffn]],
        "encoder.final_norm",
        *[f"decoder.layers.0.{m}" for m in [*decoder_layer, *ffn]],
        "decoder.final_norm",
    ]
    expected = ["src_embedding.weight", "tgt_embedding.weight"]
    expected += [f"{name}.{p}" for name in names for p in ("weight", "bias")]
    assert list(model.state_dict()) == [*expected, "output_projection.weight"]


def test_attention_maps_have_per_layer_per_head_shapes():
    model = tiny_model()
    src, tgt = padded_batch([7, 3], vocab_size=V), padded_batch([5, 5], vocab_size=V, seed=1)
    maps = model.attention_maps(src, tgt)
    assert [m.shape for m in maps["encoder"]] == [(2, 4, 7, 7)] * 2
    assert [m.shape for m in maps["decoder"]] == [(2, 4, 5, 5)] * 2
    assert [m.shape for m in maps["cross"]] == [(2, 4, 5, 7)] * 2
    assert torch.all(maps["cross"][0][1, :, :, 3:] == 0)  # padding gets no attention
    assert torch.all(maps["decoder"][1].triu(diagonal=1) == 0)  # nor does the future


def test_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = build_model(ModelArgs(
        src_vocab_size=12, tgt_vocab_size=12, d_model=32, n_heads=2, n_encoder_layers=1,
        n_decoder_layers=1, d_ff=64, dropout=0.0, max_len=16,
    ))  # fmt: skip
    src = padded_batch([6, 5, 6, 4], vocab_size=12, seed=2)
    tgt = padded_batch([7, 6, 5, 7], vocab_size=12, seed=3)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05


def test_share_embeddings_needs_equal_vocabularies():
    with pytest.raises(ValueError, match=r"src_vocab_size=40 to equal tgt_vocab_size=50"):
        ModelArgs(**{**TINY, "tgt_vocab_size": 50}, share_embeddings=True)


def test_pad_id_outside_vocabulary_is_rejected_with_values():
    with pytest.raises(ValueError, match=r"pad_id=40 is outside .*src_vocab_size=40"):
        ModelArgs(**TINY, pad_id=40)


def test_a_stack_without_layers_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"n_decoder_layers=0 must be at least 1"):
        ModelArgs(**{**TINY, "n_decoder_layers": 0})


def test_d_model_not_divisible_by_n_heads_is_rejected_by_build_model():
    with pytest.raises(ValueError, match=r"d_model=32 is not divisible by n_heads=5"):
        build_model(ModelArgs(**{**TINY, "n_heads": 5}))


def test_source_longer_than_positional_table_is_rejected_with_both_lengths():
    model = tiny_model(max_len=8)
    with pytest.raises(ValueError, match=r"input length 9 .*max_len=8"):
        model.encode(padded_batch([9], vocab_size=V))


def test_the_model_and_its_search_import_nothing_else_of_tfm():
    # The model does not know how it is configured, trained or used in prediction.
    code = "import sys, tfm.transformer; print(*(m for m in sys.modules if m.startswith('tfm')))"
    env = {**os.environ, "PYTHONPATH": str(Path(tfm.__file__).parents[1])}
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    assert [m for m in loaded if not m.startswith("tfm.transformer")] == ["tfm"]
