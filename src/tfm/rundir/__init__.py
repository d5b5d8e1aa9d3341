"""A run directory on disk: everything training writes and eval/translate/average read.

One responsibility a module: `atomic` (crash-safe file writes), `checkpoint` (saving and loading
checkpoints safely), `integrity` (the content digest and finiteness checks of checkpoints),
`store` (step checkpoints and their rotation), `paths` (the layout of a run directory and the
last-run pointer), `lock` (one trainer per run directory), `model_file` (best.pt/last.pt and the
trained model they rebuild), `averaging` (checkpoint averaging), `metrics` (the metrics.jsonl log)
and `failure` (one-line causes for their error messages). Import from the modules themselves.
"""
