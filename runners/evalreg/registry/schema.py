"""The registry's file contracts as pydantic models: pins, tasks, rubrics, selections, items.

Models are strict (YAML already typed every scalar, so ``"3"`` is not a number) and
forbid unknown keys. Cross-file references are checked by the loader, not here.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from datetime import date
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from evalreg.registry.params import KNOWN, param_problem, renamed_twice
from evalreg.text.utf16 import code_units

SCHEMA_VERSION = 1

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
Id = Annotated[str, Field(pattern=ID_PATTERN)]
RelPath = Annotated[str, Field(min_length=1, max_length=4096)]
LaxDate = Annotated[date, Field(strict=False)]
Text = Annotated[str, Field(max_length=200_000)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Default factories are functions, not ``list`` and ``dict``: pydantic asks each factory's
# signature whether it takes the validated data, and a builtin's signature is parsed from
# its text form (a quarter of a millisecond each, 7 ms for the first) at every start.
def _empty_list() -> list[Any]:
    return []


def _empty_dict() -> dict[str, Any]:
    return {}


class Model(BaseModel):
    # A field's docstring (the string under it) documents it in the reference and the JSON
    # Schemas (``field_docs``); read from this file only then, not at every start.
    # ``defer_build``: a model's validator is built when it first validates, not when this
    # module is imported. A command validates a few file kinds (the nested models are part
    # of their validators), so most of the fifty-odd validators are never built at all.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class VersionedFile(Model):
    schema_version: int


# ---------------------------------------------------------------- model pins
class Price(Model):
    """Prices from a dated price sheet, in USD per million tokens (or per call)."""

    input_per_mtok: NonNegative = 0.0
    output_per_mtok: NonNegative = 0.0
    reasoning_per_mtok: NonNegative | None = None
    cached_input_per_mtok: NonNegative | None = None
    """Input tokens served from the provider's prompt cache; the rest of the input is at
    ``input_per_mtok`` (unset: all input is at ``input_per_mtok``)."""
    batch_input_per_mtok: NonNegative | None = None
    """Non-cached input of a response bought through a batch API (unset: ``input_per_mtok``)."""
    batch_output_per_mtok: NonNegative | None = None
    """Output of a response bought through a batch API (unset: ``output_per_mtok``)."""
    per_call: NonNegative = 0.0
    as_of: LaxDate
    source: str | None = None
    review: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    """Why these prices are still to be confirmed: ``evalreg propose`` copies a new
    snapshot's prices from the pin it follows (no model list publishes prices) and says so
    here. ``check`` warns while it is set; remove it once the prices are confirmed."""


class Limits(Model):
    """How hard a run may push one pin's endpoint."""

    concurrency: Annotated[int, Field(ge=1, le=4096)] = 16
    """Requests in flight at once to this pin's endpoint."""
    requests_per_minute: Annotated[int, Field(ge=1)] | None = None
    tokens_per_minute: Annotated[int, Field(ge=1)] | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    """Seconds to wait for one response before it is a ``timeout`` error (retried)."""
    max_retries: Annotated[int, Field(ge=0, le=20)] = 6
    """Retries of a retryable error (429, 5xx, timeout, connection), with exponential
    backoff and ``Retry-After``; a 4xx other than 408 and 429 is not retried."""
    max_response_bytes: Annotated[int, Field(ge=1024, le=1 << 30)] = 16 << 20
    """Longest response body read (16 MiB by default): a longer one is a ``too_large``
    error for that request, read no further and never stored."""
    ca_bundle: RelPath | None = None
    """CA certificates (PEM, a repository path) trusted for this pin's endpoint besides the
    default ones: a private endpoint's or a TLS-inspecting proxy's CA."""


class Azure(Model):
    """How an ``azure_openai`` pin reaches its resource (``base_url``, the resource endpoint)."""

    endpoint: Literal["deployment", "v1"] = "deployment"
    """``deployment``: ``/openai/deployments/{deployment}/chat/completions?api-version=...``;
    ``v1``: the OpenAI-compatible ``/openai/v1/chat/completions`` (no api-version)."""
    deployment: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = None
    """The deployment name (deployment endpoint only; unset: the pin's ``model``)."""
    api_version: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}(-preview)?$")] | None = None
    """The ``api-version`` query parameter (needed by, and only by, the deployment endpoint)."""
    auth: Literal["key", "entra"] = "key"
    """``key``: the ``api-key`` header from ``api_key_env``; ``entra``: Microsoft Entra ID
    tokens from ``azure-identity``'s ``DefaultAzureCredential`` (extra ``evalreg[azure]``)."""

    @model_validator(mode="after")
    def _endpoint_fields(self) -> Azure:
        if self.endpoint == "deployment" and self.api_version is None:
            raise PydanticCustomError(
                "azure",
                "the deployment endpoint needs 'api_version' (like 2024-10-21): it is part "
                "of every request, so the pin fixes it",
            )
        if self.endpoint == "v1" and (self.api_version is not None or self.deployment):
            raise PydanticCustomError(
                "azure",
                "the v1 endpoint takes no 'api_version' or 'deployment': it names the "
                "deployment in the body's 'model'",
            )
        return self


class Benchmark(Model):
    """A public benchmark score: shortlist evidence only, never a selection criterion."""

    name: str
    score: float
    source: str
    date: LaxDate


class AwsTarget(Model):
    """Where a ``bedrock`` pin's requests go and whose credentials sign them."""

    region: Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")]
    """The AWS region (``us-east-1``, ``eu-central-1``): part of the endpoint and the signature."""
    profile: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.+@=,-]{1,128}$")] | None = None
    """A named profile of the shared AWS config files; by default, the standard chain
    (environment, ``AWS_PROFILE``, config files, SSO, instance or container role)."""


class VertexTarget(Model):
    """The Google Cloud project and location a ``gemini`` pin reaches through Vertex AI."""

    project: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")]
    location: Annotated[str, Field(pattern=r"^(global|[a-z]+-[a-z]+[0-9]+)$")]
    """A region (``us-central1``, ``europe-west4``) or ``global``."""


_RESERVED_PARAMS = frozenset(
    {"model", "messages", "system", "stream", "n", "contents", "systemInstruction"}
)
# Names that hold a credential, wherever they appear (a request param, a header, a URL's
# query), compared lower-case without '-', '_' or spaces: "X-API-Key", "api_key" and
# "apiKey" are one name. "max_tokens" ends in "tokens", not "token", and stays allowed.
_CREDENTIAL_NAMES = frozenset({"key", "bearer", "cookie", "pwd"})
_CREDENTIAL_ENDINGS = (
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "auth",
    "authorization",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
)
_NAME_NOISE = re.compile(r"[-_\s]")
_URL = re.compile(r"^https?://[^\s]+$")
_NEEDS_KEY_ENV = (
    "an HTTP pin needs 'api_key_env': the NAME of the environment variable holding the key "
    "(the key itself never goes in a file)"
)
_USE_THE_ENV = "name the environment variable holding the key in 'api_key_env' instead"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's hostname, brackets removed) names this machine: requests to
    it never leave it, so a credential may travel there over plain HTTP."""
    if host.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_credential_name(name: str) -> bool:
    """Whether a param, header or query parameter called ``name`` would hold a credential."""
    folded = _NAME_NOISE.sub("", name).casefold()
    return folded in _CREDENTIAL_NAMES or folded.endswith(_CREDENTIAL_ENDINGS)


def _check_header(name: str, value: str | EnvValue) -> None:
    """An ``http`` pin's header: a valid name evalreg does not set itself, and a literal
    value that is no secret and cannot split the request."""
    at = ("headers", name)
    if not _HEADER_NAME.match(name):
        raise PydanticCustomError("http", "is not a valid HTTP header name", {"at": at})
    if name.lower() in _SET_BY_EVALREG:
        raise PydanticCustomError(
            "http", "evalreg sets {name} itself (the body is JSON)", {"name": name, "at": at}
        )
    if isinstance(value, EnvValue):
        return
    # A header named "...key" is a key (X-Service-Key, Ocp-Apim-Subscription-Key).
    if _is_credential_name(name) or name.lower().endswith("key"):
        # Never echo the value: it may be the secret itself.
        raise PydanticCustomError(
            "credential",
            "names a credential, and this file is committed: write {env: NAME}, NAME being "
            "the environment variable that holds it",
            {"at": at},
        )
    if any(c in value for c in "\r\n\0"):
        raise PydanticCustomError("http", "a header value holds a line break", {"at": at})


def _check_body(value: Any, at: tuple[str | int, ...]) -> None:
    """Every string of an ``http`` pin's body is a template that parses; the rest is JSON."""
    from evalreg import templating

    if isinstance(value, str):
        try:
            templating.variables(value)
        except templating.TemplateProblem as exc:
            raise PydanticCustomError(
                "template", "is not a valid template: {problem}", {"problem": str(exc), "at": at}
            ) from None
    elif isinstance(value, dict):
        for key, inner in value.items():
            if not isinstance(key, str):
                raise PydanticCustomError(
                    "http",
                    "is not JSON: the key {key} is not text (quote it)",
                    {"key": repr(key), "at": (*at, key)},
                )
            _check_body(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _check_body(inner, (*at, index))
    elif isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("http", "is not JSON: {value}", {"value": value, "at": at})
    elif not (value is None or isinstance(value, (bool, int, float))):
        raise PydanticCustomError(
            "http", "is not JSON: a {kind}", {"kind": type(value).__name__, "at": at}
        )


def _credential_at(value: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The path of the first credential-named key holding a scalar in ``value``, if any.

    Only scalars count: in a tool's JSON schema, ``properties: {password: {type: string}}``
    names a field the model fills in, not a credential.
    """
    if isinstance(value, dict):
        for key, inner in value.items():
            scalar = isinstance(inner, (str, int, float)) and not isinstance(inner, bool)
            if scalar and _is_credential_name(str(key)):
                return (*path, key)
            found = _credential_at(inner, (*path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found = _credential_at(inner, (*path, index))
            if found is not None:
                return found
    return None


class EnvValue(Model):
    """A value read from an environment variable when the request is sent, never written
    anywhere: ``{env: FAQ_SERVICE_KEY}``."""

    env: Annotated[str, Field(pattern=ENV_NAME.pattern)]


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
_SET_BY_EVALREG = frozenset({"content-type", "content-length", "host", "transfer-encoding"})
_SERVICE_FIELDS = frozenset({"url", "method", "headers", "body", "output_path", "version"})
_NOT_FOR_SERVICES = ("model", "base_url", "api_key_env", "callable", "params", "extra_params")


class Pin(VersionedFile):
    """A model pin: one exact, callable configuration of a model or system."""

    description: Text | None = None
    provider: Literal[
        "openai",
        "anthropic",
        "python",
        "azure_openai",
        "openai_responses",
        "bedrock",
        "gemini",
        "http",
    ]
    model: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    allow_insecure_http: bool = False
    """Let this pin send its credential over plain ``http://`` to a host other than loopback:
    only for a service inside a private network. The report and the audit record show it."""
    callable: Annotated[str, Field(pattern=r"^[^:\s]+\.py:[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    files: list[RelPath] = Field(default_factory=_empty_list)
    params: dict[str, Any] = Field(default_factory=_empty_dict)
    """The provider's well-known request parameters, checked (``registry/params.py``)."""
    extra_params: dict[str, Any] = Field(default_factory=_empty_dict)
    """Parameters sent as given, unchecked: ones the endpoint takes that evalreg does not
    know (a vLLM server's ``top_k``, say). Sent after ``params``."""
    azure: Azure | None = None
    """Azure OpenAI's endpoint, deployment, api-version and auth (``azure_openai`` only)."""
    aws: AwsTarget | None = None
    """A ``bedrock`` pin's region (and, optionally, credentials profile)."""
    vertex: VertexTarget | None = None
    """A ``gemini`` pin served by Vertex AI instead of the Gemini API."""
    url: str | None = None
    """An ``http`` pin's endpoint: the team's service, sent ``body`` as JSON."""
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    """The HTTP method of an ``http`` pin's requests."""
    headers: dict[str, str | EnvValue] = Field(default_factory=_empty_dict)
    """An ``http`` pin's request headers: a literal value, or ``{env: NAME}`` for a secret
    (read when the request is sent, redacted everywhere, never part of the store key)."""
    body: Any = None
    """An ``http`` pin's request body, a YAML structure sent as JSON. Its strings are
    templates over ``messages`` (the rendered prompt), ``item`` (the item's input fields)
    and those fields by name; a string that is exactly one expression
    (``"{{ messages }}"``) is replaced by the value, with its JSON type."""
    output_path: Annotated[str, Field(min_length=1, max_length=1000)] | None = None
    """A JMESPath expression (``answer.text``) for the output in an ``http`` pin's JSON
    answer; absent, the whole answer is the output, as text."""
    version: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    """An ``http`` pin's service version as the team names it (a release, a commit): part
    of the store key, so a redeployed service is a changed pin, not a cache hit."""
    price: Price | None = None
    limits: Limits = Field(default_factory=Limits)
    benchmarks: list[Benchmark] = Field(default_factory=_empty_list)
    retired: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    """Why this pin's model can no longer be asked: its provider stopped listing it (set by
    ``evalreg propose``, with the date it was found). ``check`` warns about every selection
    that still has it as a candidate; its results stay the evidence they were."""

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            # Never echo the value: it may be the secret itself.
            raise PydanticCustomError(
                "env_name",
                "must be the name of an environment variable (like OPENAI_API_KEY), not a "
                "key: remove the secret from this file",
            )
        return value

    @field_validator("base_url", "url")
    @classmethod
    def _plain_url(cls, value: str | None) -> str | None:
        # Never echo the URL: it is the value under suspicion.
        if value is None:
            return value
        try:
            parts = urlsplit(value) if _URL.match(value) else None
        except ValueError:
            parts = None
        if parts is None or not parts.hostname:
            raise PydanticCustomError("url", "must be an http:// or https:// URL, without spaces")
        if "@" in parts.netloc:
            raise PydanticCustomError(
                "credential",
                "holds credentials (user-info before '@'): remove them and " + _USE_THE_ENV,
            )
        names = [n for n, _ in parse_qsl(parts.query, keep_blank_values=True)]
        if any(_is_credential_name(n) for n in names):
            raise PydanticCustomError(
                "credential",
                "holds a credential in its query string: remove it and " + _USE_THE_ENV,
            )
        return value

    @field_validator("params", "extra_params")
    @classmethod
    def _no_credentials(cls, value: dict[str, Any]) -> dict[str, Any]:
        found = _credential_at(value)
        if found is not None:
            # ``at`` points the finding at the key itself, below ``params``.
            raise PydanticCustomError(
                "credential",
                "params may not hold credentials (this file is committed and every request "
                "body is stored): remove it and " + _USE_THE_ENV,
                {"at": found},
            )
        return value

    @model_validator(mode="after")
    def _provider_fields(self) -> Pin:
        if self.azure is not None and self.provider != "azure_openai":
            raise PydanticCustomError(
                "azure", "'azure' is only for provider 'azure_openai'", {"at": ("azure",)}
            )
        if self.aws is not None and self.provider != "bedrock":
            raise ValueError("'aws' is only for provider 'bedrock'")
        if self.vertex is not None and self.provider != "gemini":
            raise ValueError("'vertex' is only for provider 'gemini'")
        for name in sorted(_SERVICE_FIELDS & self.model_fields_set):
            if self.provider != "http":
                raise PydanticCustomError(
                    "http", "'{name}' is only for provider 'http'", {"name": name, "at": (name,)}
                )
        if self.provider == "http":
            self._check_service()
            self._check_transport()
        elif self.provider == "python":
            if self.callable is None:
                raise ValueError("a 'python' pin needs 'callable: path/to/file.py:function'")
            if self.base_url is not None or self.api_key_env is not None:
                raise ValueError("a 'python' pin takes no base_url or api_key_env")
        else:
            if self.model is None:
                raise ValueError(f"a '{self.provider}' pin needs 'model': the exact snapshot id")
            if self.callable is not None:
                raise ValueError("'callable' is only for provider 'python'")
            if self.provider == "azure_openai":
                self._check_azure()
            else:
                self._check_auth()
            self._check_transport()
        for key, given in (("params", self.params), ("extra_params", self.extra_params)):
            reserved = sorted(set(given) & _RESERVED_PARAMS)
            if reserved:
                raise ValueError(f"{key} may not set {', '.join(reserved)}: evalreg sets them")
        self._check_params()
        return self

    def _check_azure(self) -> None:
        azure = self.azure
        if azure is None:
            raise ValueError(
                "an 'azure_openai' pin needs 'azure:' with 'api_version' (the deployment "
                "endpoint) or 'endpoint: v1'"
            )
        if self.base_url is None:
            raise ValueError(
                "an 'azure_openai' pin needs 'base_url': the resource endpoint, like "
                "https://<resource>.openai.azure.com"
            )
        if azure.auth == "key" and self.api_key_env is None:
            raise ValueError(_NEEDS_KEY_ENV)
        if azure.auth == "entra" and self.api_key_env is not None:
            raise PydanticCustomError(
                "azure",
                "'auth: entra' takes no 'api_key_env': the token comes from azure-identity's "
                "credential chain",
                {"at": ("api_key_env",)},
            )

    def _check_service(self) -> None:
        """An ``http`` pin: its URL, version and body, headers that keep secrets out of the
        file, templates that parse and an output path that compiles."""
        for name in _NOT_FOR_SERVICES:
            if name in self.model_fields_set:
                raise PydanticCustomError(
                    "http",
                    "an 'http' pin takes no '{name}': it names its service by 'url' and "
                    "'version', and sends 'body' and 'headers'",
                    {"name": name, "at": (name,)},
                )
        for name, why in (
            ("url", "the service's endpoint"),
            ("version", "the service's version as your team names it (a release, a commit)"),
            ("body", "the request's JSON body, a YAML structure of templates"),
        ):
            if getattr(self, name) is None:
                raise ValueError(f"an 'http' pin needs '{name}': {why}")
        for header, value in self.headers.items():
            _check_header(header, value)
        _check_body(self.body, ("body",))
        if self.output_path is not None:
            import jmespath
            from jmespath.exceptions import JMESPathError

            try:
                jmespath.compile(self.output_path)
            except JMESPathError as exc:
                raise PydanticCustomError(
                    "http",
                    "is not a JMESPath expression: {problem}",
                    {"problem": str(exc).splitlines()[0], "at": ("output_path",)},
                ) from None

    def snapshot(self) -> str | None:
        """What names the exact model or system called: the model snapshot, or an ``http``
        pin's service version at its URL (None: a ``python`` pin)."""
        if self.provider == "http":
            return f"{self.version} at {self.url}"
        return self.model

    def service_scope(self) -> str:
        """What besides its body decides an ``http`` pin's answer, as its store key reads
        it: method, URL, version and the literal headers (secrets are not)."""
        import json

        literal = {k.lower(): v for k, v in self.headers.items() if isinstance(v, str)}
        return json.dumps(
            [self.method, self.url, self.version, literal], sort_keys=True, ensure_ascii=False
        )

    def _check_auth(self) -> None:
        """How an HTTP pin's requests are authenticated."""
        if self.provider == "bedrock":
            # Without api_key_env, requests are signed (SigV4) with the AWS credential chain.
            if self.aws is None:
                raise ValueError("a 'bedrock' pin needs 'aws: {region: <region>}'")
            return
        if self.vertex is not None:
            if self.api_key_env is not None:
                raise ValueError(
                    "a Vertex AI pin authenticates with application-default credentials: "
                    "remove 'api_key_env'"
                )
            return
        if self.api_key_env is None:
            raise ValueError(_NEEDS_KEY_ENV)

    def credential(self) -> str | None:
        """What authenticates this pin's requests, for a reader (None: a ``python`` pin,
        which sends nothing)."""
        if self.provider == "python":
            return None
        if self.provider == "http":
            secret = [
                f"{k} (from {v.env})" for k, v in self.headers.items() if isinstance(v, EnvValue)
            ]
            return "the header " + ", ".join(secret) if secret else None
        if self.api_key_env is not None:
            return f"the key in {self.api_key_env}"
        if self.azure is not None:
            return "a Microsoft Entra ID token"
        if self.vertex is not None:
            return "a Google Cloud access token"
        return "AWS credentials (a SigV4-signed request)"

    def cleartext_host(self) -> str | None:
        """The host this pin's credential travels to in clear text: that of an ``http://``
        base_url other than loopback (None: over TLS, to this machine, or nothing sent)."""
        url = self.url if self.provider == "http" else self.base_url
        if url is None or self.credential() is None:
            return None
        parts = urlsplit(url)
        host = parts.hostname or ""
        return host if parts.scheme == "http" and not is_loopback(host) else None

    def _check_transport(self) -> None:
        """Refuse a credential over plain HTTP to another machine unless the pin says so."""
        host = self.cleartext_host()
        if host is None or self.allow_insecure_http:
            return
        raise PydanticCustomError(
            "insecure_http",
            "{credential} would travel in clear text to {host} (plain http://): use "
            "https://, or set 'allow_insecure_http: true' for a service inside a private "
            "network",
            {
                "at": ("url" if self.provider == "http" else "base_url",),
                "credential": self.credential(),
                "host": host,
            },
        )

    def _check_params(self) -> None:
        """Each of ``params`` must be a well-known parameter of the provider, of its type;
        ``extra_params`` must not hide one (there it would go unchecked) or repeat one."""
        known = KNOWN.get(self.provider)
        if known is None:
            if self.extra_params:
                raise ValueError(
                    f"a '{self.provider}' pin's params are all passed as given: write them "
                    "under 'params', not 'extra_params'"
                )
            return
        problems = [
            InitErrorDetails(
                type=PydanticCustomError("param", problem, {"at": ("params", name)}),
                loc=(),
                input=self.params,  # not the value: the message names it with its type
            )
            for name, value in self.params.items()
            if (problem := param_problem(self.provider, name, value)) is not None
        ]
        if problems:  # every one, each at its parameter, not only the first
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        twice = renamed_twice(self.provider, self.params)
        if twice is not None:
            raise PydanticCustomError(
                "param",
                f"{twice[0]!r} is sent as {twice[1]!r}: give one of them",
                {"at": ("params", twice[0])},
            )
        for name in self.extra_params:
            if name in known or name in self.params:
                where = "is also under 'params'" if name in self.params else "is well known"
                raise PydanticCustomError(
                    "param",
                    f"{name!r} {where}: write it under 'params' only, where it is checked",
                    {"at": ("extra_params", name)},
                )


# ---------------------------------------------------------------- graders
class _Grader(Model):
    pass


class _FieldGrader(_Grader):
    field: str | None = None
    """Dotted path into the parsed output; absent means the whole parsed answer."""
    expected_field: str | None = None
    """Key in the item's ``expected``; absent means ``field`` (or the whole expected)."""


Case = Literal["casefold", "lower"]
"""How ``ignore_case`` folds: Unicode case folding (``Straße`` is ``strasse``), or lower-casing
as JavaScript's ``toLowerCase`` and Python's ``str.lower`` do (``Straße`` stays ``straße``)."""
Match = Literal["all", "any"]
"""Of several expected values: ``all`` must hold; ``any`` one is enough."""


class _TextGrader(_FieldGrader):
    raw: bool = False
    """True: compare the output exactly as the model returned it (whitespace kept, not
    parsed), not the parsed answer; ``field`` is then not allowed."""

    @model_validator(mode="after")
    def _raw_whole(self) -> _TextGrader:
        if self.raw and self.field is not None:
            raise ValueError("'raw' compares the whole output: give no 'field'")
        return self


class ExactGrader(_TextGrader):
    type: Literal["exact"]
    value: Any = None
    """The value to equal; absent means the item's expected value (or its ``expected_field``)."""
    ignore_case: bool = False
    case: Case = "casefold"
    match: Match = "all"
    """``any``: the expected value is a list of acceptable answers (a lone value is a list
    of one), and equalling one of them passes."""
    compare: Literal["equal", "prefix", "components"] = "equal"
    """``prefix``: the answer (as text) starts with the expected text. ``components``: JSON
    compared component by component as OpenAI evals' JsonMatch does: objects over the union
    of their keys, lists in order and of one length, other values by value (``true``
    equals ``1``), and a missing key or ``null`` on either side never matches."""


class NormalizedGrader(_FieldGrader):
    type: Literal["normalized"]
    value: Any = None
    match: Match = "all"
    """``any``: the expected value is a list of acceptable answers; one agreeing passes."""
    form: Literal["unicode", "squad"] = "unicode"
    """``unicode``: NFKC, casefolded, Unicode punctuation dropped, single spaces. ``squad``:
    the SQuAD answer normalisation: lower-cased, ASCII punctuation dropped, the articles
    *a*, *an*, *the* dropped, single spaces."""
    compare: Literal["equal", "overlap"] = "equal"
    """``overlap``: either normal form contains the other (an empty one only equals empty)."""


class RegexGrader(_TextGrader):
    type: Literal["regex"]
    pattern: Annotated[str, Field(min_length=1, max_length=2000)]
    """A Python regular expression, searched anywhere in the text (anchor it with ``^``/``$``)."""
    ignore_case: bool = False
    must_match: bool = True
    """False: the criterion passes when the pattern does *not* match."""
    ascii: bool = False
    """True: ``\\d``, ``\\w``, ``\\b`` and ``ignore_case`` match ASCII only, as in JavaScript."""
    utf16: bool = False
    """True: the pattern and the text are read as UTF-16 code units, as JavaScript reads them
    without the ``u`` flag: a character beyond U+FFFF (most emoji) is two, its surrogate pair,
    so ``^.$`` does not match ``🙂``."""

    @model_validator(mode="after")
    def _compiles(self) -> RegexGrader:
        try:
            re.compile(code_units(self.pattern) if self.utf16 else self.pattern)
        except re.error as exc:
            # read as code units, the message may quote half a surrogate pair
            said = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
            raise ValueError(f"pattern is not a valid regular expression: {said}") from None
        return self


class ContainsGrader(_TextGrader):
    type: Literal["contains", "not_contains"]
    value: str | list[str] | None = None
    ignore_case: bool = True
    case: Case = "casefold"
    match: Match | None = None
    """``contains``: every needle (``all``, the default) or one of them (``any``) must appear.
    ``not_contains``: the output fails when one needle (``any``, the default) or every
    needle (``all``) appears."""

    @model_validator(mode="after")
    def _has_needle(self) -> ContainsGrader:
        if self.value is None and self.expected_field is None:
            raise ValueError("give 'value' (text or list) or 'expected_field'")
        return self


class JsonSchemaGrader(_Grader):
    type: Literal["json_schema"]
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    """Absent means the task's output schema."""
    parse: Literal["answer", "strict", "embedded", "tool_arguments"] = "answer"
    """What is validated: ``answer``, the task's parsed answer; ``strict``, the raw output
    parsed as one JSON document (surrounding whitespace allowed, nothing else); ``embedded``,
    the JSON objects and arrays found anywhere in the raw output, left to right, the first
    that validates passing; ``tool_arguments``, the arguments of every tool call the model
    made, each against the ``parameters`` its task declares for that tool (no ``schema``)."""

    @model_validator(mode="after")
    def _tool_schema(self) -> JsonSchemaGrader:
        if self.parse == "tool_arguments" and self.schema_ is not None:
            raise ValueError(
                "'tool_arguments' validates against the task's tools: give no 'schema'"
            )
        return self


class FieldExactGrader(_FieldGrader):
    type: Literal["field_exact"]
    field: str
    ignore_case: bool = False


class FieldNumericGrader(_FieldGrader):
    type: Literal["field_numeric"]
    field: str
    tolerance: NonNegative = 0.0
    """Largest accepted difference from the expected number (0: exactly equal)."""
    relative: bool = False
    """True: ``tolerance`` is a fraction of the expected value (0.01 is 1 %)."""


class FieldFuzzyGrader(_FieldGrader):
    type: Literal["field_fuzzy"]
    field: str
    threshold: Fraction = 0.8
    """Least similarity (rapidfuzz's normalised Indel similarity, 0 to 1) between the field and
    the expected text."""


class FieldSetF1Grader(_FieldGrader):
    type: Literal["field_set_f1"]
    field: str
    threshold: Fraction = 1.0
    """Least F1 between the list and the expected list, as sets (1.0: the same set)."""


class _ReferenceGrader(_TextGrader):
    value: str | Annotated[list[str], Field(min_length=1)] | None = None
    """The reference text, or several; absent: the item's expected value (or its
    ``expected_field``), text or a list of texts."""


class LevenshteinGrader(_ReferenceGrader):
    """Edit distance from the reference: the fewest characters inserted, deleted or
    substituted to turn one text into the other. With several references, the nearest
    counts. The score is the similarity, 1 - distance / the longer text's length."""

    type: Literal["levenshtein"]
    max_distance: Annotated[int, Field(ge=0)] | None = None
    """Most edits that pass (promptfoo's ``levenshtein`` threshold)."""
    min_similarity: Fraction | None = None
    """Least similarity that passes (0 to 1; 1 is equal)."""
    ignore_case: bool = False
    """True: both texts are compared with their case folded, as ``case`` says."""
    case: Case = "casefold"
    utf16: bool = False
    """True: count edits in UTF-16 code units, as JavaScript does: a character beyond U+FFFF
    (most emoji) is two."""

    @model_validator(mode="after")
    def _some_bound(self) -> LevenshteinGrader:
        if self.max_distance is None and self.min_similarity is None:
            raise ValueError("give 'max_distance' (edits), 'min_similarity' (0 to 1), or both")
        return self


class RougeGrader(_ReferenceGrader):
    """ROUGE F-measure against the reference, by Google's ``rouge-score``: both texts
    lower-cased, words are runs of the letters a-z and digits (other characters separate
    them). With several references, the best F-measure counts."""

    type: Literal["rouge"]
    variant: Literal["rouge1", "rouge2", "rougeL"] = "rouge1"
    """``rouge1``: words in common; ``rouge2``: pairs of adjacent words in common;
    ``rougeL``: the longest sequence of words both have in the same order."""
    threshold: Fraction = 0.75
    """Least F-measure that passes."""
    stemmer: bool = False
    """True: compare words of more than three letters by their Porter stem (``jumps`` and
    ``jumped`` are ``jump``), as rouge-score's ``use_stemmer``."""


class BleuGrader(_ReferenceGrader):
    """Sentence BLEU against the reference (several: BLEU's own multi-reference counting),
    by ``sacrebleu``: its defaults for one sentence (exponential smoothing, effective
    order), scaled to 0..1."""

    type: Literal["bleu"]
    threshold: Fraction = 0.5
    """Least BLEU (0 to 1) that passes."""
    tokenize: Literal["13a", "intl", "zh", "char", "none"] = "13a"
    """How the texts become words: ``13a``, sacrebleu's default (punctuation split off
    words); ``intl``, Unicode punctuation and symbols split off too; ``zh``, each Chinese
    character a word; ``char``, each character a word; ``none``, split at spaces only."""
    ignore_case: bool = False
    """True: lower-case both texts first (sacrebleu's ``lowercase``)."""


class _ToolGrader(_Grader):
    expected_field: str = "tool_calls"
    """Key in the item's ``expected`` holding the expected calls: a list of ``{name,
    arguments}`` (an empty list: the model should call no tool)."""


class ToolChoiceGrader(_ToolGrader):
    type: Literal["tool_choice"]
    """Pass when the model called the tool the item expects first (or, expecting no call,
    called none)."""


class ToolArgumentGrader(_ToolGrader):
    type: Literal["tool_argument"]
    tool: str | None = None
    """The tool whose call is checked (absent: the first expected call's tool)."""
    argument: str
    """Dotted path into the call's arguments (integers index lists)."""
    tolerance: NonNegative | None = None
    """Given: the argument is a number within this of the expected one (else: equal as JSON)."""
    relative: bool = False
    """True: ``tolerance`` is a fraction of the expected value (0.01 is 1 %)."""
    ignore_case: bool = False

    @model_validator(mode="after")
    def _numeric_options(self) -> ToolArgumentGrader:
        if self.tolerance is not None and self.ignore_case:
            raise ValueError("'ignore_case' compares text, 'tolerance' numbers: give one")
        if self.relative and self.tolerance is None:
            raise ValueError("'relative' needs 'tolerance'")
        return self


class ToolCallsF1Grader(_ToolGrader):
    type: Literal["tool_calls_f1"]
    match: Literal["name", "arguments"] = "arguments"
    """When a made call matches an expected one: same ``name``, or same name and equal
    ``arguments`` (as JSON)."""
    metric: Literal["f1", "precision", "recall"] = "f1"
    """The score, and what ``threshold`` bounds."""
    threshold: Fraction = 1.0


class RefusalGrader(_FieldGrader):
    type: Literal["refusal"]
    expected_field: str = "should_refuse"
    markers: list[str] = Field(
        default_factory=lambda: [
            "i can't",
            "i cannot",
            "i'm unable",
            "i am unable",
            "could you clarify",
            "need more information",
            "please provide",
        ]
    )


class LengthGrader(_FieldGrader):
    type: Literal["length"]
    min_chars: Annotated[int, Field(ge=0)] | None = None
    max_chars: Annotated[int, Field(ge=0)] | None = None
    min_words: Annotated[int, Field(ge=0)] | None = None
    max_words: Annotated[int, Field(ge=0)] | None = None
    max_lines: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _some_bound(self) -> LengthGrader:
        bounds = (self.min_chars, self.max_chars, self.min_words, self.max_words, self.max_lines)
        if all(b is None for b in bounds):
            raise ValueError("give at least one bound (min_chars, max_chars, min_words, ...)")
        return self


class PythonGrader(_Grader):
    type: Literal["python"]
    callable: Annotated[str, Field(pattern=r"^[^:\s]+\.py:[A-Za-z_][A-Za-z0-9_]*$")]
    files: list[RelPath] = Field(default_factory=_empty_list)
    params: dict[str, Any] = Field(default_factory=_empty_dict)
    """Keyword arguments passed to the function."""


JUDGE_PROMPT_VARIABLES = frozenset({"input", "output", "expected", "criterion", "tool_calls"})
"""What an ``llm_judge`` prompt may use: the graded item's input and expected value, the
response's text (``output``) and the functions it called (``tool_calls``: a list of
``{"name", "arguments"}``, with ``error`` where the arguments were not valid JSON; empty when
it called none), and the criterion's description."""


class JudgeGrader(_Grader):
    type: Literal["llm_judge"]
    judge: Id
    """The pin id of the judge model: there is no default judge."""
    prompt: Annotated[str, Field(min_length=1, max_length=100_000)]
    """A template over the graded item's ``input`` and ``expected``, the response's text
    (``output``) and calls (``tool_calls``: name and arguments of each), and the criterion's
    description (``criterion``)."""
    prompt_version: Annotated[str, Field(min_length=1, max_length=64)]
    """Your name for this prompt's version: shown in the report, part of the fingerprint."""
    pass_threshold: Fraction = 0.5
    """A judge score at or above this passes."""


class SimilarGrader(_Grader):
    """Cosine similarity of embeddings: the response's text and each reference, embedded by
    a pinned embedding model (an ``openai`` pin: any OpenAI-compatible ``/embeddings``). Its
    requests are stored and keyed like a judge's, so replays need no network."""

    type: Literal["similar"]
    embedder: Id
    """The pin id of the embedding model (provider ``openai``)."""
    value: (
        Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]] | None
    ) = None
    """The reference text, or several (the closest counts); absent: the item's expected
    value (or its ``expected_field``), text or a list of texts."""
    expected_field: str | None = None
    threshold: Annotated[float, Field(ge=-1.0, le=1.0)] = 0.75
    """A cosine similarity at or above this passes (promptfoo's default)."""


class HumanGrader(_Grader):
    """Grades imported from a file, by response.

    A response that fewer than ``min_raters`` graded is *not graded* for this criterion:
    it is left out of that response's score and level, as a criterion that does not apply
    is (its level comes from the criteria that graded it), and the record lists it in
    ``ungraded``. The criterion's pass rate and the judge-human agreement count graded
    responses only; ``coverage:<id>`` (graded / applicable) says how many those are, and a
    gate can require a minimum of it.
    """

    type: Literal["human"]
    file: RelPath
    """CSV or JSONL: a ``key`` column (the response's store key) and one column per rater."""
    min_raters: Annotated[int, Field(ge=1)] = 1
    calibrates: Id | None = None
    """The ``llm_judge`` criterion these grades check (judge calibration)."""


Grader = Annotated[
    ExactGrader
    | NormalizedGrader
    | RegexGrader
    | ContainsGrader
    | JsonSchemaGrader
    | FieldExactGrader
    | FieldNumericGrader
    | FieldFuzzyGrader
    | FieldSetF1Grader
    | LevenshteinGrader
    | RougeGrader
    | BleuGrader
    | ToolChoiceGrader
    | ToolArgumentGrader
    | ToolCallsF1Grader
    | RefusalGrader
    | LengthGrader
    | PythonGrader
    | JudgeGrader
    | SimilarGrader
    | HumanGrader,
    Field(discriminator="type"),
]

MODEL_GRADED = (JudgeGrader, SimilarGrader)
"""Graders whose verdict rests on a pinned model's stored responses (a judge's, an
embedding model's): bought after the responses they grade, stored and keyed alike."""


def grading_pin(grader: Any) -> str | None:
    """The pin a model-graded criterion asks (its judge or embedder), or None."""
    if isinstance(grader, JudgeGrader):
        return grader.judge
    if isinstance(grader, SimilarGrader):
        return grader.embedder
    return None


# ---------------------------------------------------------------- rubrics
class Criterion(Model):
    id: Id
    description: Text
    grader: Grader
    weight: Annotated[float, Field(gt=0)] = 1.0
    """The criterion's weight in the item's weighted mean score."""
    critical: bool = False
    """Critical criteria decide ``require: critical`` level rules."""
    slices: Annotated[list[str], Field(min_length=1)] | None = None
    """When given, the criterion applies only to items tagged with one of these slices."""


class LevelRule(Model):
    require: Literal["all", "critical", "none"] | list[Id] = "all"
    min_score: Fraction | None = None
    """Minimum weighted mean score of the applicable criteria (partial credit counts)."""


class Levels(Model):
    correct: LevelRule = Field(default_factory=lambda: LevelRule(require="all"))
    acceptable: LevelRule = Field(default_factory=lambda: LevelRule(require="critical"))


class Rubric(VersionedFile):
    description: Text
    version: Annotated[str, Field(min_length=1, max_length=64)]
    criteria: Annotated[list[Criterion], Field(min_length=1)]
    levels: Levels = Field(default_factory=Levels)


# ---------------------------------------------------------------- tasks
class Prompt(Model):
    system: Text | None = None
    template: Text


class PromptVariant(Model):
    system: Text | None = None
    template: Text | None = None


class Output(Model):
    parser: Literal["text", "json", "regex"] = "text"
    pattern: str | None = None
    """For ``regex``: the first group (or the whole match) is the answer."""
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    extract: Literal["lenient", "strict"] = "lenient"
    """For ``json``: ``lenient`` also finds JSON in a code fence or in prose; ``strict`` takes
    the whole output as one JSON document (surrounding whitespace allowed, nothing else)."""

    @model_validator(mode="after")
    def _pattern(self) -> Output:
        if self.parser == "regex":
            if not self.pattern:
                raise ValueError("parser 'regex' needs 'pattern'")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        elif self.pattern is not None:
            raise ValueError("'pattern' is only for parser 'regex'")
        if self.schema_ is not None and self.parser != "json":
            raise ValueError("'schema' is only for parser 'json'")
        if self.extract != "lenient" and self.parser != "json":
            raise ValueError("'extract' is only for parser 'json'")
        return self


TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"
"""What every provider accepts as a function name."""


class Tool(Model):
    """A function the model may call: its arguments described by a JSON schema."""

    name: Annotated[str, Field(pattern=TOOL_NAME)]
    description: Text | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """A JSON schema of the arguments object."""

    @field_validator("parameters")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        from jsonschema import SchemaError  # imported when a task declares tools (start-up)
        from jsonschema.validators import Draft202012Validator, validator_for

        try:
            validator_for(value, default=Draft202012Validator).check_schema(value)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON schema: {exc.message}") from None
        if value.get("type", "object") != "object":
            raise ValueError("a tool's arguments are an object: 'type' must be 'object'")
        return value


ToolChoice = Literal["auto", "required", "none"] | Annotated[str, Field(pattern=TOOL_NAME)]


class FailureMode(Model):
    id: Id
    description: Text
    cost_usd: NonNegative
    """What one occurrence costs the business, in USD."""
    detected_by: Annotated[list[Id], Field(min_length=1)]


class Task(VersionedFile):
    description: Text
    evalset: RelPath
    holdout: RelPath | None = None
    """A sealed hold-out eval set: run only with ``evalreg run --holdout``, reported apart."""
    prompt: Prompt
    output: Output = Field(default_factory=Output)
    rubric: Id
    repeats: Annotated[int, Field(ge=1, le=100)] = 1
    monthly_volume: Annotated[int, Field(ge=0)] | None = None
    failure_modes: list[FailureMode] = Field(default_factory=_empty_list)
    redact: list[Annotated[str, Field(pattern=r"^(input|expected|messages|output)(\.[^.]+)*$")]] = (
        Field(default_factory=_empty_list)
    )
    """Fields never quoted in diffs, comments or reports, e.g. ``input.email``,
    ``messages.content`` or ``output.summary`` (a field of a JSON answer)."""
    tools: list[Tool] = Field(default_factory=_empty_list)
    """Functions the model may call; each request carries them in its provider's form."""
    tool_choice: ToolChoice | None = None
    """``auto``, ``required`` (some tool), ``none``, or one declared tool's name; absent:
    the provider's default (``auto``)."""

    @model_validator(mode="after")
    def _tools(self) -> Task:
        seen: set[str] = set()
        for index, tool in enumerate(self.tools):
            if tool.name in seen:
                raise PydanticCustomError(
                    "tool",
                    f"tool {tool.name!r} is declared twice",
                    {"at": ("tools", index, "name")},
                )
            seen.add(tool.name)
        if self.tool_choice is not None:
            if not self.tools:
                raise PydanticCustomError(
                    "tool", "'tool_choice' needs 'tools'", {"at": ("tool_choice",)}
                )
            if self.tool_choice not in ("auto", "required", "none", *seen):
                raise PydanticCustomError(
                    "tool",
                    f"tool_choice {self.tool_choice!r} is not a declared tool",
                    {"at": ("tool_choice",)},
                )
        return self


# ---------------------------------------------------------------- selections
BASE_METRICS = (
    "pass_rate",
    "correct_rate",
    "acceptable_rate",
    "unacceptable_rate",
    "error_rate",
    "consistency",
    "latency_p50_ms",
    "latency_p95_ms",
    "cost_per_item_usd",
    "monthly_cost_usd",
    "failure_cost_per_1k_usd",
    "judge_human_agreement",
    "judge_human_kappa",
)
"""Metric names a gate or objective may use; ``criterion:<id>`` adds per-criterion pass
rates (on the samples the criterion graded), ``coverage:<id>`` a human criterion's share of
graded samples among those it applies to."""


class Gate(Model):
    metric: str
    """A metric name (see Metrics), ``criterion:<id>`` or ``coverage:<id>``."""
    slice: str = "all"
    min: float | None = None
    """The metric must be at least this (give ``min`` or ``max``, not both)."""
    max: float | None = None
    on: Literal["point", "lower_bound", "upper_bound"] = "point"
    """Test the point estimate, or the interval's lower or upper bound (a cautious gate)."""

    @model_validator(mode="after")
    def _one_bound(self) -> Gate:
        if (self.min is None) == (self.max is None):
            raise ValueError("a gate needs exactly one of 'min' or 'max'")
        return self


class Term(Model):
    maximize: str | None = None
    minimize: str | None = None
    weight: Annotated[float, Field(gt=0)] = 1.0

    @model_validator(mode="after")
    def _one_goal(self) -> Term:
        if (self.maximize is None) == (self.minimize is None):
            raise ValueError("a term needs exactly one of 'maximize' or 'minimize'")
        return self

    @property
    def metric(self) -> str:
        return self.maximize if self.maximize is not None else str(self.minimize)


class Objective(Model):
    lexicographic: Annotated[list[Term], Field(min_length=1)] | None = None
    weighted: Annotated[list[Term], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Objective:
        if (self.lexicographic is None) == (self.weighted is None):
            raise ValueError("an objective is either 'lexicographic' or 'weighted'")
        return self

    @property
    def terms(self) -> list[Term]:
        return list(self.lexicographic or self.weighted or [])


class NonInferiority(Model):
    metric: str = "pass_rate"
    margin: Fraction
    prefer: Term


class Sequential(Model):
    """Buy items in rounds until the decision is settled (``evalreg run --until-decided``)."""

    alpha: Annotated[float, Field(gt=0.0, le=0.2)] = 0.05
    """The chance, at most, that the decision differs from a full run's."""
    min_items: Annotated[int, Field(ge=1)] = 100
    """Items bought before the first look."""
    round: Annotated[int, Field(ge=1)] = 100
    """Items added between two looks (the runner takes at least its concurrency)."""


class Policy(Model):
    pass_level: Literal["correct", "acceptable"] = "correct"
    """The level an item must reach to count as passed in ``pass_rate``."""
    confidence: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.95
    """Confidence level of every interval and test in this selection."""
    gates: list[Gate] = Field(default_factory=_empty_list)
    objective: Objective
    """How the candidates that pass every gate are ranked."""
    non_inferiority: NonInferiority | None = None
    sequential: Sequential | None = None
    """Buy items in rounds and stop once the decision is settled: ``run`` behaves as
    ``run --until-decided`` for this use case. Part of the criteria fixed beforehand."""


class Candidate(Model):
    id: Id
    pin: Id
    prompt: PromptVariant | None = None
    description: Text | None = None


# A GitHub account name: letters, digits and inner hyphens, or an app's "name[bot]".
GITHUB_LOGIN_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$"


class Waiver(Model):
    candidate: Id
    reason: Annotated[str, Field(min_length=1)]
    approver: Annotated[str, Field(min_length=1)]
    date: LaxDate
    approver_login: Annotated[str, Field(pattern=GITHUB_LOGIN_PATTERN)] | None = None
    """The approver's GitHub login, which ``evalreg audit`` matches with an approving review
    on the pull request's final head commit; without it, ``approver`` itself is matched
    with reviewer logins (case-insensitively)."""


class Selection(VersionedFile):
    use_case: Annotated[str, Field(min_length=1, max_length=200)]
    description: Text | None = None
    task: Id
    candidates: Annotated[list[Candidate], Field(min_length=1)]
    policy: Policy
    selected: Id
    """The declared candidate: the model in production for this use case."""
    rationale: Text
    waivers: list[Waiver] = Field(default_factory=_empty_list)
    """Approved exceptions: a declared candidate the policy does not recommend needs one."""


# ---------------------------------------------------------------- registry settings
# What a pip requirement for evalreg may look like once it is interpolated into CI: a name
# pinned with ``==``, a URL (``git+https://...@<sha>``, a wheel's ``https://...whl``) or a
# path. No whitespace, quotes, ``$``, backticks, ``;``, ``|``, ``&``, ``<``, ``>`` or
# newlines, and no leading ``-`` (pip would read it as an option).
_INSTALL_SPEC = re.compile(r"^[A-Za-z0-9./][A-Za-z0-9._+\-=@:/#%\[\],]{0,499}$")
_DIRECT_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?@(?=[a-z+]+://)")
_PINNED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?==[A-Za-z0-9.+!_-]+$")


def install_spec_problem(spec: str) -> str | None:
    """Why ``spec`` cannot be CI's evalreg install, or None when it can.

    The spec must name one exact build: ``evalreg==X.Y.Z`` (on PyPI or an index the team
    controls), ``git+https://host/org/evalreg@<commit>``, a wheel URL or a local path. An
    unpinned name would install whatever whoever owns that name publishes next.
    """
    if not _INSTALL_SPEC.match(spec):
        return (
            f"{spec!r} is not a pip requirement evalreg can put in a workflow: use letters, "
            "digits and . _ + - = @ : / # % [ ] , only (no spaces, quotes or shell "
            "characters), not starting with '-'"
        )
    # PEP 508's direct reference, ``evalreg[s3]@git+https://…``: the URL is checked alike.
    direct = _DIRECT_REFERENCE.match(spec)
    url = spec[direct.end() :] if direct else spec
    if url.startswith(("git+", "hg+", "svn+", "bzr+")):
        if "@" not in url.partition("://")[2].rpartition("/")[2]:
            return f"{spec!r} names no commit: add @<commit sha> (or a tag) after the repository"
        return None
    if "://" in spec or "/" in spec or spec.startswith("."):
        return None  # a wheel or sdist URL, or a path: one exact build
    if not _PINNED_NAME.match(spec):
        return f"{spec!r} is not pinned: name one exact version, e.g. evalreg==X.Y.Z"
    return None


def _install_spec(value: str) -> str:
    problem = install_spec_problem(value)
    if problem is not None:
        raise PydanticCustomError("install_spec", "{problem}", {"problem": problem})
    return value


InstallSpec = Annotated[str, AfterValidator(_install_spec)]


class Privacy(Model):
    snippets: bool = True
    """Item text and model output in pull-request comments. Off for a public repository
    whose eval data (on a private DVC remote) must stay private."""


class Network(Model):
    """How the registry's requests reach the model APIs (proxies come from the environment)."""

    ca_bundle: RelPath | None = None
    """CA certificates (PEM, a repository path) trusted for every pin's endpoint besides the
    default ones (``SSL_CERT_FILE`` or certifi's): a corporate TLS-inspecting proxy's CA."""


class Settings(VersionedFile):
    """``registry/evalreg.yaml``: settings of the whole registry (an optional file)."""

    install: InstallSpec | None = None
    """The pip requirement CI installs evalreg from and the report's "How to reproduce"
    names; absent, ``evalreg==<the version that wrote the report>``."""
    privacy: Privacy = Field(default_factory=Privacy)
    network: Network = Field(default_factory=Network)


SETTINGS_FILE = "registry/evalreg.yaml"


# ---------------------------------------------------------------- eval items
class MessageToolCall(Model):
    """A tool call an earlier assistant turn made."""

    id: Annotated[str, Field(min_length=1, max_length=256)]
    name: Annotated[str, Field(pattern=TOOL_NAME)]
    arguments: dict[str, Any] = Field(default_factory=_empty_dict)


class Message(Model):
    role: Literal["system", "user", "assistant", "tool"]
    content: Text = ""
    """The turn's text; an assistant turn making ``tool_calls`` may leave it out."""
    tool_calls: Annotated[list[MessageToolCall], Field(min_length=1)] | None = None
    """An assistant turn's tool calls."""
    tool_call_id: str | None = None
    """A ``tool`` turn: the id of the call whose result ``content`` is."""

    @model_validator(mode="after")
    def _tool_parts(self) -> Message:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only an 'assistant' message makes 'tool_calls'")
        if self.tool_calls is None and "content" not in self.model_fields_set:
            raise ValueError("a message has 'content' (only tool calls may stand without it)")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("a 'tool' message, and only one, names its call's 'tool_call_id'")
        return self


class Attachment(Model):
    """A file an item attaches (a PNG, JPEG or PDF), by its repository path under
    ``evalsets/``; read, typed and hashed when the registry loads (``evalsets.attachments``)."""

    path: Annotated[str, Field(min_length=1)]


@dataclasses.dataclass(frozen=True)
class AttachedFile:
    """An attachment as read at one revision: its bytes, their type (from the magic
    bytes) and sha256."""

    path: str
    media_type: str
    sha256: str
    data: bytes = dataclasses.field(repr=False)


# The contract of one eval-set line, as validated (its JSON Schema is titled "Item"). A
# model instance costs about 1 KB beyond its values: the registry keeps ``Item``s instead.
class ItemLine(Model):
    model_config = ConfigDict(title="Item")

    id: Id
    input: dict[str, Any] | None = None
    messages: Annotated[list[Message], Field(min_length=1)] | None = None
    expected: Any = None
    tags: list[Annotated[str, Field(pattern=ID_PATTERN)]] = Field(default_factory=_empty_list)
    cluster: str | None = None
    meta: dict[str, Any] = Field(default_factory=_empty_dict)
    attachments: list[Attachment] = Field(default_factory=_empty_list)

    @model_validator(mode="after")
    def _input_or_messages(self) -> ItemLine:
        if (self.input is None) == (self.messages is None):
            raise ValueError("an item has exactly one of 'input' (template fields) or 'messages'")
        if self.messages is not None:
            if self.messages[-1].role not in ("user", "tool"):
                raise ValueError("a conversation must end with a 'user' or 'tool' message")
            calls: set[str] = set()
            for message in self.messages:
                calls.update(call.id for call in message.tool_calls or ())
                if message.tool_call_id is not None and message.tool_call_id not in calls:
                    raise ValueError(
                        f"tool result {message.tool_call_id!r} answers no earlier tool call"
                    )
        return self


NO_META: Mapping[str, Any] = MappingProxyType({})
"""The ``meta`` of every item that has none (one shared, read-only mapping)."""


class Item(NamedTuple):
    """One eval item, validated: what prompts, graders and reports read.

    Immutable and small (a tuple of its fields: a large eval set holds one per line, and
    forked workers inherit them); items with the same tags share one tuple of them.
    ``validate`` reads one from a line's JSON value; ``as_line`` gives pydantic's JSON form.
    """

    id: str
    input: dict[str, Any] | None = None
    messages: list[Message] | None = None
    expected: Any = None
    tags: tuple[str, ...] = ()
    cluster: str | None = None
    meta: Mapping[str, Any] = NO_META
    attachments: tuple[Attachment, ...] = ()
    files: tuple[AttachedFile, ...] = ()
    """The attachments as read when the registry loaded (empty until then)."""

    @classmethod
    def validate(cls, data: object, tags: Callable[[list[str]], tuple[str, ...]] = tuple) -> Item:
        """``data`` (one eval-set line's JSON value) as an item; pydantic's
        ``ValidationError`` when it is not one. ``tags`` makes the tags' tuple (to share
        equal ones)."""
        line = ItemLine.model_validate(data)
        return cls(
            line.id,
            line.input,
            line.messages,
            line.expected,
            tags(line.tags),
            line.cluster,
            line.meta or NO_META,
            tuple(line.attachments),
        )

    def __reduce__(self) -> tuple[type[Item], tuple[Any, ...]]:
        # A mapping proxy does not pickle: the shared empty ``meta`` travels as a dict.
        return (Item, (*self[:6], dict(self.meta), *self[7:]))

    def as_line(self) -> ItemLine:
        """This item as the model of its line (unvalidated: it was), for pydantic's JSON
        form of its values."""
        return ItemLine.model_construct(
            id=self.id,
            input=self.input,
            messages=self.messages,
            expected=self.expected,
            tags=list(self.tags),
            cluster=self.cluster,
            meta=dict(self.meta),
            attachments=list(self.attachments),
        )


KINDS: dict[str, type[VersionedFile]] = {
    "models": Pin,
    "tasks": Task,
    "rubrics": Rubric,
    "selections": Selection,
}


def field_docs(source: str = __file__) -> dict[tuple[str, str], str]:
    """Each model field's docstring in this module (or the module file ``source``), by
    (class name, field name): the string literal right under the field, cleaned as
    ``inspect.cleandoc`` does."""
    import ast
    import inspect
    from pathlib import Path

    tree = ast.parse(Path(source).read_text(encoding="utf-8"))
    out: dict[tuple[str, str], str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for field, doc in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)
            ):
                out[(node.name, field.target.id)] = inspect.cleandoc(doc.value.value)
    return out
