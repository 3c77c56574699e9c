"""Cell results: the per-item record, the cell summary, and reading and writing their files."""
