"""The checks of sampling that both engines' tests share: the distribution temperature, top-k
and top-p make of a model's, written plainly, and Pearson's chi-squared test of draws against it."""

import torch


def reshaped(log_probs: torch.Tensor, *, temperature: float, top_k: int, top_p: float):
    """The reference distribution (V,): softmax(log p / T) over the k most likely tokens, then
    the most likely of those until their probability first reaches p, renormalised."""
    probs = (log_probs / temperature).softmax(dim=-1)
    V = log_probs.size(-1)
    keep = torch.zeros(V, dtype=torch.bool)
    order = probs.argsort(descending=True).tolist()
    kept = order[: top_k or V]
    total = probs[kept].sum()
    mass = 0.0
    for token in kept:
        keep[token] = True
        mass += float(probs[token] / total)
        if mass >= top_p:
            break
    probs = probs * keep
    return probs / probs.sum()


def p_value(counts: torch.Tensor, expected: torch.Tensor) -> float:
    """Pearson's chi-squared test of `counts` (V,) against the probabilities `expected` (V,),
    tokens expected fewer than 5 times pooled into one cell; tokens of probability 0 must never
    be drawn."""
    assert counts[expected == 0].sum() == 0, "drew a token outside the distribution"
    want = expected * counts.sum()
    big = want >= 5
    cells = [(counts[big], want[big]), (counts[~big & (want > 0)].sum()[None],
                                        want[~big & (want > 0)].sum()[None])]  # fmt: skip
    got = torch.cat([c for c, w in cells if w.sum() > 0])
    exp = torch.cat([w for c, w in cells if w.sum() > 0])
    statistic = float(((got - exp) ** 2 / exp).sum())
    df = torch.tensor((len(exp) - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(df, torch.tensor(statistic / 2, dtype=torch.float64)))
