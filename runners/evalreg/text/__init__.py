"""How evalreg writes text wherever it shows it: ``escape`` (untrusted text, such as model
output, item text and PR-authored YAML, made safe in Markdown, HTML and the terminal) and
``numbers`` (values, shares, money, gates and selection policies), with ``utf16`` for text
read as JavaScript reads it. Free of heavy imports and
of every other evalreg module, so that any layer may use them: gate messages, audit records
and the runner's notes as much as the report."""
