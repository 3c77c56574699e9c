"""Markdown writers: governance report, diff, audit record, and their escaping."""
