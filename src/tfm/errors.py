"""The exceptions tfm raises for problems a user can fix, and the exit code each maps to.

Library code raises these with the offending values in the message; only `cli.py` turns them into
one line on stderr and an exit code. Anything else that escapes is a bug and keeps its traceback.
"""


class TfmError(Exception):
    """Base class: a problem the user can act on. `exit_code` is what the CLI exits with."""

    exit_code = 1


class UsageError(TfmError):
    """Wrong command-line usage, or a missing run, file or device the user asked for (exit 2)."""

    exit_code = 2


class ConfigError(UsageError):
    """The YAML config or a --set override does not fit the schema (exit 2)."""


class DataError(UsageError):
    """A corpus file is missing, misaligned or malformed (exit 2); the message names file, line."""


class CheckpointError(TfmError):
    """A checkpoint or model file cannot be written or loaded safely (exit 1)."""


class TrainingError(TfmError):
    """Training cannot go on, e.g. repeated non-finite losses (exit 1)."""


class DiskFullError(TfmError):
    """A file could not be written for lack of space (disk full, quota, file-size limit); the
    message names the file and the space left; the file's previous content is intact (exit 1)."""


class RunInUseError(TfmError):
    """Another live process holds the run directory's lock, i.e. is training in it (exit 1)."""
