"""A team's own service behind an HTTP endpoint (``provider: http``): any JSON API.

What teams deploy is rarely a bare model API: a retrieval pipeline, an agent or a gateway
with their prompts inside. An ``http`` pin sends such a service ``body``, a YAML structure
whose strings are templates over the rendered ``messages`` and the item's fields, and reads
the output from its JSON answer with a JMESPath expression (``output_path``). The rendered
body is the request stored and keyed, with the method, URL, version and literal headers
(``Pin.service_scope``): a redeployed service under a new ``version`` is a changed pin, and
one changed under the same version is what ``drift`` finds. Secret headers
(``{env: NAME}``) are read when the request is sent and are never part of the key.

The shared HTTP layer sends the requests: retries, limits, timeouts, response-size bounds,
the statuses that stop a pin, and the first request as the pin's preflight are the same as
for any model API.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from evalreg.errors import BodyError
from evalreg.providers.base import Completion, Messages, ProviderError, register
from evalreg.providers.tools import Toolset
from evalreg.registry.schema import EnvValue, Pin
from evalreg.templating import RenderError, render_value


@register("http")
class ServiceProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        """``pin.body`` rendered for one item (a JSON value; the protocol's name says dict).

        Raises:
            BodyError: a template fails for this item, renders a value JSON cannot hold, or
                the task declares tools (a service's answer carries no tool calls evalreg
                can read).
        """
        if tools is not None:
            raise BodyError(
                "body",
                "an 'http' pin cannot run a task with tools: its answers carry no tool calls "
                "evalreg can read",
            )
        fields = item_input or {}
        context = {**fields, "item": fields, "messages": messages}
        rendered: Any = _rendered(pin.body, context, "body")
        return rendered  # type: ignore[no-any-return]

    def endpoint(self, pin: Pin) -> str:
        return str(pin.url)

    def scope(self, pin: Pin) -> str:
        """What the store key holds besides the body (``Pin.service_scope``)."""
        return pin.service_scope()

    def method(self, pin: Pin) -> str:
        return pin.method

    def headers(self, pin: Pin) -> dict[str, str]:
        out = {}
        for name, value in pin.headers.items():
            if isinstance(value, EnvValue):
                secret = os.environ.get(value.env)
                if not secret:
                    raise ProviderError(
                        "auth", f"environment variable {value.env} is not set: it holds {name}"
                    )
                out[name] = secret
            else:
                out[name] = value
        return out

    def credentials_problem(self, pin: Pin) -> str | None:
        """Why the pin's secret headers cannot be sent here: a variable that is not set."""
        for value in pin.headers.values():
            if isinstance(value, EnvValue) and not os.environ.get(value.env):
                return f"{value.env} is not set"
        return None

    def parse(self, data: Any) -> Completion:
        """A decoded JSON answer as the output (what ``read`` does without a path)."""
        return Completion(text=data if isinstance(data, str) else _json_text(data))

    def read(self, pin: Pin, body: bytes) -> Completion:
        """The output in a raw answer: what ``output_path`` finds in its JSON (text as it
        is, anything else as canonical JSON), or the whole answer as text."""
        if pin.output_path is None:
            try:
                return Completion(text=body.decode("utf-8-sig"))
            except UnicodeDecodeError as exc:
                raise ProviderError("malformed", f"the answer is not UTF-8 text: {exc}") from None
        import jmespath

        from evalreg.canonical import loads_finite

        try:
            data = loads_finite(body.decode("utf-8-sig"))
        except (ValueError, RecursionError) as exc:
            raise ProviderError(
                "malformed", f"the answer is not JSON: {exc}", status=200, retryable=True
            ) from None
        found = jmespath.search(pin.output_path, data)
        if found is None:
            raise ProviderError(
                "malformed",
                f"output_path {pin.output_path!r} finds nothing in the answer",
                status=200,
            )
        return Completion(text=found if isinstance(found, str) else _json_text(found))


def _rendered(value: Any, context: dict[str, Any], at: str) -> Any:
    if isinstance(value, str):
        try:
            return _json_value(render_value(value, context), at)
        except RenderError as exc:
            raise BodyError(at, str(exc)) from None
    if isinstance(value, dict):
        return {key: _rendered(inner, context, f"{at}.{key}") for key, inner in value.items()}
    if isinstance(value, list):
        return [_rendered(inner, context, f"{at}[{i}]") for i, inner in enumerate(value)]
    return value


def _json_value(value: Any, at: str) -> Any:
    """A rendered value as plain JSON data (a template may give a tuple, or text marked
    safe): refused when JSON cannot hold it."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise BodyError(at, f"renders a value JSON cannot hold ({exc})") from None


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
