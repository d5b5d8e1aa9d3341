"""What tfm offers to code outside it, in one place: benchmarks (bench/) and users' scripts
import from here, never from tfm's modules directly, so that modules can move without breaking
them. A name not listed here is internal.

Configuration
    `load_config(path, overrides)` -> `Config`, the validated configuration.
Data
    `load_texts(config.data, split)` -> (sources, targets, report); `encode_split` into ids with a
    tokenizer; `generate_toy_corpus(n_train, n_validation, n_test, seed)`, the built-in corpus;
    `inference_batches` and `pad` batch ids as decoding does.
Tokenizer
    `Tokenizer`, `train_tokenizer`, `untrained`, `wants_byte_fallback`; the ids `PAD_ID`,
    `BOS_ID`, `EOS_ID`, `UNK_ID`; `SPECIAL_TOKENS` and `BYTE_TOKENS`.
Model and search
    `ModelArgs`, `build_model` -> `Transformer`, `parameter_count` (without building it);
    `greedy_decode`, the model's own search (for timing the model: translations go through a
    Translator); `sinusoidal_table`, the §3.5 positional table.
Training
    `train(config)` runs a whole run. To drive or time steps yourself: `open_session` ->
    `Session`, `DataParallel(Replicas(), session, StopFlag())`, `optimizer_step`; the pieces a
    step is made of, for timing them: the modules `batching` and `batch_layout` (a batch's way
    to the model and its loss: wrap its `projected_loss_sum` to time the loss), `EpochData`,
    `padding_share`, `build_optimizer`, `Progress`, `UnreadSteps`, `projected_loss_sum`;
    `Batch` and `static_shape`, a batch padded to the fixed shapes of `train.static_shapes`;
    `model_step_flops` and `device_peak`, model FLOPs of a step and a device's known peak.
Runs and decoding
    `RunPaths`, `CheckpointStore`, `load_trained`; `DecodeRequest` -> `open_translator`, the
    Translator of `tfm translate` and `tfm eval`; `TorchTranslator`, a model in memory as one
    (its `search` decodes token ids); `DecodeSettings` (a strategy and the `OutputLimit`, from a
    config's `decoding`); `evaluate_run`, the scores of `tfm eval`; `teacher_forced_loss`;
    `score_translations` (BLEU, chrF); `export_run` (CTranslate2); `translation_input` and
    `translate_batches`, how `tfm translate` reads and decodes its lines.
Back-translation
    `prepared_monolingual(config)`, a run's monolingual text as the data cache keeps it;
    `generate_synthetic`, its chosen lines translated into a synthetic corpus.
Confidence
    `calibrate_run`, what `tfm calibrate` does; `ConfidenceMap` and `fit_map`, the map from a
    translation's mean token log-probability to its expected sentence chrF; `sentence_chrf`,
    `spearman` and `low_share_gap`, how well confidences rank sentences.
"""

from tfm.commands.calibrate import calibrate_run, fit_map
from tfm.commands.decode import evaluate_run, translate_batches
from tfm.commands.engines import open_translator
from tfm.commands.input import translation_input
from tfm.commands.synthetic_corpus import generate as generate_synthetic
from tfm.config import Config, load_config
from tfm.data import batching
from tfm.data.batching import Batch, EpochData, inference_batches, pad, padding_share, static_shape
from tfm.data.monolingual import prepared_monolingual
from tfm.data.pipeline import encode_split, load_texts
from tfm.data.tokenizer import (
    BOS_ID,
    BYTE_TOKENS,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    Tokenizer,
    train_tokenizer,
    untrained,
    wants_byte_fallback,
)
from tfm.data.toy.generator import generate as generate_toy_corpus
from tfm.deploy import export_run
from tfm.prediction.confidence import ConfidenceMap, low_share_gap, sentence_chrf, spearman
from tfm.prediction.likelihood import teacher_forced_loss
from tfm.prediction.scoring import score_translations
from tfm.prediction.settings import DecodeRequest, DecodeSettings, OutputLimit
from tfm.prediction.torch_translator import TorchTranslator
from tfm.rundir.model_file import load_trained
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore
from tfm.training import StopFlag, batch_layout, optimizer_step, train
from tfm.training.data_parallel import DataParallel
from tfm.training.distributed import Replicas
from tfm.training.loss import projected_loss_sum
from tfm.training.schedule import build_optimizer
from tfm.training.session import Session
from tfm.training.session_opening import open_session
from tfm.training.state import Progress, UnreadSteps
from tfm.training.utilisation import device_peak
from tfm.training.utilisation import step_flops as model_step_flops
from tfm.transformer import (
    ModelArgs,
    Transformer,
    build_model,
    greedy_decode,
    parameter_count,
    sinusoidal_table,
)

__all__ = [
    "BOS_ID",
    "Batch",
    "BYTE_TOKENS",
    "EOS_ID",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "CheckpointStore",
    "Config",
    "DataParallel",
    "DecodeRequest",
    "DecodeSettings",
    "EpochData",
    "ModelArgs",
    "OutputLimit",
    "Progress",
    "Replicas",
    "RunPaths",
    "Session",
    "StopFlag",
    "Tokenizer",
    "TorchTranslator",
    "Transformer",
    "UnreadSteps",
    "batch_layout",
    "batching",
    "build_model",
    "build_optimizer",
    "device_peak",
    "encode_split",
    "evaluate_run",
    "export_run",
    "generate_synthetic",
    "generate_toy_corpus",
    "greedy_decode",
    "inference_batches",
    "load_config",
    "load_texts",
    "load_trained",
    "model_step_flops",
    "open_session",
    "open_translator",
    "optimizer_step",
    "pad",
    "prepared_monolingual",
    "padding_share",
    "parameter_count",
    "projected_loss_sum",
    "score_translations",
    "sinusoidal_table",
    "static_shape",
    "teacher_forced_loss",
    "train",
    "train_tokenizer",
    "translate_batches",
    "translation_input",
    "untrained",
    "wants_byte_fallback",
    "ConfidenceMap",
    "calibrate_run",
    "fit_map",
    "low_share_gap",
    "sentence_chrf",
    "spearman",
]
