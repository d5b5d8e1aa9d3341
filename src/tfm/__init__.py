"""tfm: a from-scratch Transformer translation trainer (train / eval / translate)."""

__version__ = "0.1.0"
