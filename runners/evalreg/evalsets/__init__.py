"""Eval sets: parsing and tracking JSONL item files; sampling them from logs, scrubbing
private text, finding near duplicates and sizing slices."""
