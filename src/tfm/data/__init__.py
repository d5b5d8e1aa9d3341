"""Everything between files on disk and batches of token ids."""
