"""The registry: schema, loading, diagnostics and reading files at a git revision."""
