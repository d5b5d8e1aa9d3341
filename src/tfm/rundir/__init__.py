"""A run directory on disk: everything training writes and eval/translate/average read.

One responsibility a module: `checkpoint` (saving and loading checkpoints safely), `integrity`
(the content digest and finiteness checks of checkpoints), `store` (step checkpoints and their
rotation), `paths` (the layout of a run directory, the last-run pointer and what marks an export),
`lock` (one trainer per run directory), `model_file` (best.pt/last.pt and the trained model they
rebuild), `averaging` (checkpoint averaging), `metrics` (the metrics.jsonl log) and `manifest`
(the digests of the files a run's use depends on).
Crash-safe writes (`tfm.atomic`) and the one-line causes of failed writes (`tfm.failure`) sit
below, as the tokenizer uses them too. Import from the modules themselves.
"""
