"""The ``python`` provider: an importable callable in the repository (baselines, local systems).

The callable receives ``{"messages": [...], "input": {...} | None, "params": {...}}`` (and,
for a task that declares tools, ``tools`` and ``tool_choice``) and returns the output text,
or ``{"text": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}``. Its module source
and declared files are hashed into the request, so changing the system's code or weights
is a new request, never a stale cached answer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from evalreg.providers.base import Completion, Messages, ProviderError, register
from evalreg.providers.tools import Toolset, decoded
from evalreg.registry.schema import Pin

SystemFn = Callable[[dict[str, Any]], Any]


@register("python")
class PythonProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = False

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or Path.cwd()).resolve()
        self._digests: dict[str, str] = {}
        self._functions: dict[str, SystemFn] = {}

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        spec = str(pin.callable)
        body: dict[str, Any] = {
            "callable": spec,
            "source": self.digest(pin),
            "messages": messages,
            "input": item_input,
            "params": pin.params,
        }
        if tools is not None:  # written only with tools, so other bodies keep their bytes
            body["tools"] = tools.functions()
            body["tool_choice"] = tools.choice
        return body

    def endpoint(self, pin: Pin) -> str:
        return f"python:{pin.callable}"

    def headers(self, pin: Pin) -> dict[str, str]:
        return {}

    def parse(self, data: Any) -> Completion:
        """Text, or ``{"text": ..., "tool_calls": [{"name", "arguments"}]}`` for tool calls."""
        if isinstance(data, str):
            return Completion(text=data)
        if isinstance(data, dict) and isinstance(data.get("text", ""), str):
            try:
                calls = tuple(
                    decoded(c["name"], c.get("arguments"), c.get("id"))
                    for c in data.get("tool_calls") or ()
                )
            except (KeyError, TypeError, AttributeError) as exc:
                raise ProviderError("malformed", f"the callable's tool_calls: {exc}") from None
            return Completion(text=data.get("text", ""), tool_calls=calls)
        raise ProviderError(
            "malformed", f"the callable returned {type(data).__name__}, not text or a dict"
        )

    def digest(self, pin: Pin) -> str:
        """sha256 over the callable's module source and every file the pin declares."""
        key = f"{pin.callable}|{'|'.join(pin.files)}"
        if key not in self._digests:
            h = hashlib.sha256()
            for rel in [str(pin.callable).rpartition(":")[0], *pin.files]:
                h.update(rel.encode() + b"\0" + (self.root / rel).read_bytes() + b"\0")
            self._digests[key] = h.hexdigest()
        return self._digests[key]

    def call(self, pin: Pin, body: dict[str, Any]) -> tuple[Completion, int]:
        """Run the callable on ``body``; return its output and how long it took (ms).

        Importing the module is not timed. Any exception the callable raises is a
        ``system`` error.
        """
        fn = self._function(str(pin.callable))
        request = {"messages": body["messages"], "input": body["input"], "params": body["params"]}
        if "tools" in body:
            request.update(tools=body["tools"], tool_choice=body["tool_choice"])
        started = time.perf_counter()
        try:
            out = fn(request)
        except (Exception, SystemExit) as exc:  # the team's code: sys.exit is its failure too
            raise ProviderError(
                "system", f"{pin.callable} raised {type(exc).__name__}: {exc}"
            ) from None
        latency_ms = round((time.perf_counter() - started) * 1000)
        return self.parse(out), latency_ms

    def _function(self, spec: str) -> SystemFn:
        if spec not in self._functions:
            self._functions[spec] = load_callable(self.root, spec)
        return self._functions[spec]


def load_callable(root: Path, spec: str) -> SystemFn:
    """Import ``path/to/file.py:function`` from the repository at ``root``."""
    rel, _, attr = spec.rpartition(":")
    path = (root / rel).resolve()
    name = "evalreg_user." + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ProviderError("system", f"cannot import {rel}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the team's code: sys.exit is its failure too
        del sys.modules[name]
        raise ProviderError(
            "system", f"importing {rel} raised {type(exc).__name__}: {exc}"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ProviderError("system", f"{rel} has no function {attr!r}")
    return fn  # type: ignore[no-any-return]
