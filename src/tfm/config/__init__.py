"""The configuration: the schema, read and checked once, then passed down as a `Config`.

Modules: schema (the pydantic models, their defaults and descriptions), yaml_reader (the hardened
YAML reader, the only place YAML is parsed), loading (`load_config`, `--set` overrides and the
error messages), ranges (a key's range, in the reference and in errors), show (`tfm config show`)
and reference (docs/configuration.md generated from the schema). The names callers need are
imported here: `from tfm.config import Config, load_config`.
"""

from tfm.config.loading import MAX_CONFIG_BYTES, load_config, to_yaml
from tfm.config.schema import (
    BACK_TRANSLATION_TAG,
    RECIPE_KEYS,
    SPLITS,
    Config,
    DataConfig,
    DecodingConfig,
    ModelConfig,
    SourceConfig,
    TokenizerConfig,
    ToyConfig,
    TrainConfig,
    decoding_fields,
    planned,
)
from tfm.config.yaml_reader import read_yaml

__all__ = [
    "BACK_TRANSLATION_TAG",
    "MAX_CONFIG_BYTES",
    "RECIPE_KEYS",
    "SPLITS",
    "Config",
    "DataConfig",
    "DecodingConfig",
    "ModelConfig",
    "SourceConfig",
    "TokenizerConfig",
    "ToyConfig",
    "TrainConfig",
    "decoding_fields",
    "load_config",
    "planned",
    "read_yaml",
    "to_yaml",
]
