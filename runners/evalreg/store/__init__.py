"""The response store: content-addressed segments of provider responses, their keys and
scans, the run journal, the repository lock, compaction and purging."""
