"""Eval sets: parsing and tracking JSONL item files, and curating them."""
