"""The attention weights collected for a picture are the model's own: they reproduce the fused
kernel's attention output and the cached decoder's cross-attention, rows sum to one, and the
decoder's are causal. A tiny untrained model; no training."""

import pytest
import torch
import torch.nn.functional as F
from attention_model import MODEL_ARGS, attention_of
from tiny_models import search_options

from tfm.transformer import MultiHeadAttention, greedy_decode


def fast_path_attention_outputs(model, src, tgt):
    """Run the model's normal (fused-kernel) forward pass, recording per attention module the
    projected q/k/v of self-attention and the concatenated heads that go into W^O."""
    seen = {}

    def record(name, what):
        def hook(module, args, output):
            seen[(name, what)] = args[0] if what == "heads" else output

        return hook

    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            hooks.append(module.w_o.register_forward_hook(record(name, "heads")))
            hooks.append(module.w_qkv.register_forward_hook(record(name, "qkv")))
    with torch.no_grad():
        model(src, tgt)
        memory = model.encode(src)
    for hook in hooks:
        hook.remove()
    return seen, memory


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_plotted_weights_reproduce_the_fast_paths_attention_output(model, tokenizer, kind):
    view = attention_of(model, tokenizer, kind)
    src, tgt = torch.tensor([view.src_ids]), torch.tensor([view.tgt_ids])
    seen, memory = fast_path_attention_outputs(model, src, tgt)
    module = {"encoder": "encoder.layers.{}.self_attention",
              "decoder": "decoder.layers.{}.self_attention",
              "cross": "decoder.layers.{}.cross_attention"}[kind]  # fmt: skip
    H, D = view.n_heads, MODEL_ARGS["d_model"]
    for layer in range(view.n_layers):
        name = module.format(layer)
        if kind == "cross":
            mha = model.get_submodule(name)
            values = F.linear(memory, mha.w_qkv.weight[2 * D :], mha.w_qkv.bias[2 * D :])
        else:
            values = seen[(name, "qkv")][..., 2 * D :]  # (1, T, D)
        values = values.view(1, -1, H, D // H).transpose(1, 2)  # (1, H, Tk, K)
        heads = (view.weights[layer : layer + 1] @ values).transpose(1, 2).reshape(1, -1, D)
        torch.testing.assert_close(heads, seen[(name, "heads")], atol=1e-5, rtol=1e-4)


def test_cross_attention_equals_the_cached_decoders(model, tokenizer):
    view = attention_of(model, tokenizer, "cross")
    options = search_options(1.5, 10)  # the output limit of the schema's defaults
    result = greedy_decode(model, torch.tensor([view.src_ids]), **options, return_attention=True)
    cached = result.cross_attention[0]  # (L, H, T_out, S)
    torch.testing.assert_close(view.weights[:, :, : cached.size(2)], cached, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_rows_sum_to_one_and_axes_match_the_tokens(model, tokenizer, kind):
    view = attention_of(model, tokenizer, kind)
    L, H, Tq, Tk = view.weights.shape
    assert (L, H) == (2, 4)
    assert (Tq, Tk) == (len(view.query_tokens), len(view.key_tokens))
    torch.testing.assert_close(view.weights.sum(-1), torch.ones(L, H, Tq))
    if kind != "decoder":
        assert view.key_tokens == tokenizer.src_pieces(view.src_ids)
        assert view.key_tokens[-1] == "</s>"
    else:
        assert view.query_tokens[0] == view.key_tokens[0] == "<s>"


def test_decoder_self_attention_is_zero_above_the_diagonal(model, tokenizer):
    weights = attention_of(model, tokenizer, "decoder").weights
    T = weights.size(-1)
    above = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    assert T > 2 and bool((weights[..., above] == 0).all())
    assert bool((weights[..., ~above] > 0).all())
