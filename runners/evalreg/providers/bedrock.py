"""Amazon Bedrock's Converse API, signed with SigV4 from the AWS credential chain or sent
with a Bedrock API key.

A pin without ``api_key_env`` signs every attempt with botocore's SigV4 signer (the
``aws`` extra) and the credentials of the standard chain: environment variables, the
shared config and credentials files (``aws.profile`` or ``AWS_PROFILE``), SSO, container
and instance roles. A pin with ``api_key_env`` (``AWS_BEARER_TOKEN_BEDROCK``) sends that
Bedrock API key as a bearer token instead. The signature and the key live in headers
only: the stored request is the body and the URL. The access key id, secret key and
session token the chain resolves are redacted like keys (``redaction.watch_value``).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar
from urllib.parse import quote

from evalreg import redaction
from evalreg.errors import UsageError
from evalreg.providers.attachments import bedrock
from evalreg.providers.base import Completion, Messages, ProviderError, api_key, register
from evalreg.providers.tools import Toolset, decoded, has_tool_turns
from evalreg.registry.params import BEDROCK_INFERENCE
from evalreg.registry.schema import Pin

SERVICE = "bedrock"
"""The SigV4 signing name of ``bedrock-runtime``."""


@register("bedrock")
class BedrockProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def __init__(self) -> None:
        self._credentials: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        system = [{"text": m["content"]} for m in messages if m["role"] == "system"]
        turns = (
            _tool_turns(messages)
            if has_tool_turns(messages)
            else [
                {"role": m["role"], "content": _blocks(m["content"])}
                for m in messages
                if m["role"] != "system"
            ]
        )
        body: dict[str, Any] = {"messages": turns}
        if system:
            body["system"] = system
        if tools is not None:
            body["toolConfig"] = _tool_config(tools)
        inference = {k: v for k, v in pin.params.items() if k in BEDROCK_INFERENCE}
        if inference:
            body["inferenceConfig"] = inference
        body.update((k, v) for k, v in pin.params.items() if k not in BEDROCK_INFERENCE)
        if pin.extra_params:
            body["additionalModelRequestFields"] = dict(pin.extra_params)
        return body

    def endpoint(self, pin: Pin) -> str:
        assert pin.aws is not None and pin.model is not None  # the schema requires both
        base = pin.base_url or f"https://bedrock-runtime.{pin.aws.region}.amazonaws.com"
        # Model ARNs and inference profile ids hold ':' and '/': one path segment.
        return f"{base.rstrip('/')}/model/{quote(pin.model, safe='')}/converse"

    def headers(self, pin: Pin) -> dict[str, str]:
        if pin.api_key_env is not None:
            return {"authorization": f"Bearer {api_key(pin)}"}
        self._chain(pin)  # fail before the run if there are no credentials at all
        return {}

    def credentials_problem(self, pin: Pin) -> str | None:
        """Why SigV4 cannot sign here (no botocore, no credentials in the chain), or None."""
        if pin.api_key_env is not None:
            return None
        try:
            self._chain(pin)
        except UsageError as exc:
            return str(exc)
        return None

    def sign(self, pin: Pin, url: str, headers: dict[str, str], content: bytes) -> dict[str, str]:
        """``headers`` with a SigV4 signature for this attempt (it covers the time)."""
        return self.signed(pin, "POST", url, headers, content)

    def signed(
        self, pin: Pin, method: str, url: str, headers: dict[str, str], content: bytes = b""
    ) -> dict[str, str]:
        """``headers`` with a SigV4 signature of ``method`` ``url`` with ``content`` (a
        Bedrock API key's bearer needs none)."""
        if pin.api_key_env is not None:
            return headers
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.exceptions import BotoCoreError

        assert pin.aws is not None
        try:
            # Temporary credentials (SSO, a role) are refreshed here as they near expiry.
            credentials = self._chain(pin).get_frozen_credentials()
        except BotoCoreError as exc:
            raise ProviderError("auth", f"refreshing AWS credentials failed: {exc}") from None
        # Whatever the chain resolved them from (variables, a profile, SSO, a role, a
        # web-identity token): the key id and session token travel in headers a server
        # may quote back, and each refresh brings new ones. Not the account id, which
        # model ARNs name.
        for value in (credentials.access_key, credentials.secret_key, credentials.token):
            redaction.watch_value(value)
        request = AWSRequest(method=method, url=url, data=content, headers=dict(headers))
        SigV4Auth(credentials, SERVICE, pin.aws.region).add_auth(request)
        return dict(request.headers.items())

    def _chain(self, pin: Pin) -> Any:
        """The credentials of the pin's profile (refreshed by botocore as they expire)."""
        assert pin.aws is not None
        profile = pin.aws.profile
        with self._lock:
            if profile in self._credentials:
                return self._credentials[profile]
            try:
                import botocore.session
                from botocore.exceptions import BotoCoreError
            except ImportError:
                raise UsageError(
                    "signing Bedrock requests needs botocore: pip install 'evalreg[aws]' "
                    "(or set api_key_env to a Bedrock API key's variable)"
                ) from None
            try:
                credentials = botocore.session.Session(profile=profile).get_credentials()
            except BotoCoreError as exc:
                raise UsageError(f"AWS credentials for bedrock model {pin.model}: {exc}") from None
            if credentials is None:
                raise UsageError(
                    f"no AWS credentials found for bedrock model {pin.model}: set "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, run "
                    "`aws sso login`, or set the pin's api_key_env to a Bedrock API key"
                )
            self._credentials[profile] = credentials
            return credentials

    def parse(self, data: Any) -> Completion:
        try:
            blocks = data["output"]["message"]["content"]
            if not isinstance(blocks, list):
                raise TypeError("content is not a list")
            texts = [b["text"] for b in blocks if isinstance(b, dict) and "text" in b]
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("a text block is not text")
            calls = tuple(
                decoded(
                    b["toolUse"]["name"], b["toolUse"].get("input"), b["toolUse"].get("toolUseId")
                )
                for b in blocks
                if isinstance(b, dict) and "toolUse" in b
            )
            reason = data.get("stopReason")
            # No text with a stop reason is an answer: a guardrail's (guardrail_intervened,
            # content_filtered) or a limit reached (max_tokens).
            if not texts and not calls and not isinstance(reason, str):
                raise ValueError("no text blocks and no stop reason")
            usage = data.get("usage") or {}
            # Bedrock counts cache reads and writes apart from ``inputTokens``.
            cached = int(usage.get("cacheReadInputTokens") or 0)
            written = int(usage.get("cacheWriteInputTokens") or 0)
            router = (data.get("trace") or {}).get("promptRouter") or {}
            model = router.get("invokedModelId")
            return Completion(
                text="".join(texts),
                model=model if isinstance(model, str) else None,
                input_tokens=int(usage.get("inputTokens") or 0) + cached + written,
                output_tokens=int(usage.get("outputTokens") or 0),
                cached_input_tokens=cached,
                finish_reason=reason if isinstance(reason, str) else None,
                tool_calls=calls,
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                "malformed", f"response lacks output.message.content text: {exc}", retryable=True
            ) from None


def _tool_turns(messages: Messages) -> list[dict[str, Any]]:
    """A conversation with tool turns in Converse's form: an assistant's calls as
    ``toolUse`` blocks, each result a ``toolResult`` block of a user turn; consecutive
    turns of one role become one turn, as Converse requires."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            role = "user"
            blocks: list[dict[str, Any]] = [
                {
                    "toolResult": {
                        "toolUseId": m["tool_call_id"],
                        "content": [{"text": m["content"]}],
                    }
                }
            ]
        else:
            role = m["role"]
            blocks = _blocks(m["content"]) if m["content"] else []
            blocks.extend(
                {"toolUse": {"toolUseId": c["id"], "name": c["name"], "input": c["arguments"]}}
                for c in m.get("tool_calls") or ()
            )
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's content as Converse blocks: its text, or its parts with attachments."""
    return bedrock(content) if isinstance(content, list) else [{"text": content}]


def _tool_config(tools: Toolset) -> dict[str, Any]:
    """Converse's ``toolConfig``. Converse has no way to forbid calls: ``tool_choice: none``
    sends the tools with no ``toolChoice`` (the model's default, ``auto``)."""
    specs = [
        {"toolSpec": {**spec, "inputSchema": {"json": spec["inputSchema"]}}}
        for spec in tools.functions("inputSchema")
    ]
    config: dict[str, Any] = {"tools": specs}
    if tools.choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif tools.choice == "required":
        config["toolChoice"] = {"any": {}}
    elif tools.choice not in (None, "none"):
        config["toolChoice"] = {"tool": {"name": tools.choice}}
    return config
