"""Every document evalreg writes, as pure renderers of data: the governance report
(``governance``, written by ``writer``), the pull request's eval diff (``diff_markdown``),
the audit record (``audit``), drift (``drift``), the per-item explorer (``explorer``), the
registry's reference (``reference``) and SVG charts (``chart``); ``terminal`` prints
command results. Untrusted text and numbers are written by ``evalreg.text``, which the
layers below use too."""
