"""httpx as evalreg imports it: the client library, without its command-line client.

``httpx/__init__.py`` imports ``httpx._main``, the ``httpx`` command (click, pygments and
rich's syntax highlighting), only to offer it as ``httpx.main``, which evalreg never
calls: two fifths of what importing httpx costs, paid by every command that talks HTTP.
Marked absent in ``sys.modules`` while httpx is first imported, that import fails and
httpx binds the stand-in ``main`` it keeps for installations without the CLI's extras;
every other name of httpx is what a plain ``import httpx`` gives. The mark is removed
right after, so code that asks for ``httpx._main`` itself still gets it. When httpx is
already imported (by the program that imported evalreg), nothing is changed.

Modules of evalreg import httpx from here (``from evalreg.providers._httpx import httpx``);
``tests/test_startup_imports.py`` checks that the commands load no CLI module.
"""

from __future__ import annotations

import sys

_CLI = "httpx._main"

if "httpx" not in sys.modules and _CLI not in sys.modules:
    sys.modules[_CLI] = None  # type: ignore[assignment]  # None in sys.modules: ImportError
    try:
        import httpx
    finally:
        del sys.modules[_CLI]
else:
    import httpx

__all__ = ["httpx"]
