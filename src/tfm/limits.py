"""Upper bounds on sizes that the config schema and the command line accept.

Generous enough that no real run meets them, low enough that a typo (an extra zero, `1e9`) is a
one-line error naming the key, the value and the bound, before anything is allocated, instead of
an out-of-memory crash, a hang or an abort deep inside torch or `tokenizers`. Kept apart from
`tfm.config` so that the CLI can use them without importing the schema.
"""

MAX_D_MODEL = 16_384
MAX_HEADS = 256
MAX_LAYERS = 128  # per stack
MAX_D_FF = 131_072
MAX_POSITIONS = 65_536  # model.max_len, data.max_length and the decoding length limit
MAX_VOCAB_SIZE = 1_000_000
MAX_BEAM_SIZE = 1_000  # also --beam-size and --n-best
MAX_BATCH_TOKENS = 10_000_000  # train.max_tokens and decoding.max_tokens
MAX_SEED = 2**32 - 1
MAX_MIN_FREQUENCY = 1_000_000_000
MAX_STEPS = 10**12  # train.warmup_steps
MAX_EPOCHS = 1_000_000
MAX_THREADS = 4_096  # train.threads and --threads
MAX_LINE_CHARS = 10_000  # a side of a training pair: BPE's time grows with a word's length squared


def bound_text(value: float) -> str:
    """A bound as messages and help write it: 16, 0.01, 100 (not 100.0), 1e-06."""
    return str(value) if isinstance(value, int) else f"{value:g}"
