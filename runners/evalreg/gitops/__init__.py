"""Where evalreg meets git hosting and branches: ``github`` (the REST client that keeps one
sticky eval-diff comment on a pull request), ``trusted`` (the checks a comment job makes
before it posts what an untrusted pull request made) and ``merging`` (merging branches
whose runs rewrote the same generated files). Provenance read from git itself is in
``audit.commits``."""
