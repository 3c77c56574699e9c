"""Git provenance and the GitHub client."""
