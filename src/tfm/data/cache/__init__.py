"""The prepared memory-mapped token ids of a corpus: `prepared_cache` finds or builds one,
`cache_key` names it by what it was made from, `entry_writer` writes an entry, encoding the text
with `bulk_encoding` in `parallel_encoding`'s worker processes."""
