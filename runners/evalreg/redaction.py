"""Secrets kept out of everything evalreg writes or prints: the values of the environment
variables a registry names, replaced by ``[redacted]``.

The loader names the variables of every registry it loads (``watch``): each pin's
``api_key_env``, any other ``*_env`` field of a pin, and an ``http`` pin's secret headers. A
provider that resolves a credential itself (an AWS access key id and session token from the
credential chain, a Google or Microsoft Entra ID access token) registers each value it will
send before the request that carries it (``watch_value``). ``current()`` is a ``Redactor``
for what the variables hold in the environment now, for those values, and for the passwords
in the proxy variables' URLs (``PROXY_VARIABLES``). It is applied where text is made from
what a provider sent (provider errors, stored records), before stored text is cut for
display, and where text leaves the process (the terminal, report files, diffs, comments).
Results are graded from the redacted store, so they need no redaction of their own and stay
the same on a machine without the keys.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    from pydantic import BaseModel

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
"""Shorter values are never redacted (see ``Redactor``)."""

_REDACTED_BYTES = REDACTED.encode()


class Redactor:
    """Replaces each of some secret values, and its common encodings, with ``[redacted]``.

    The encodings are the ones a key is found in: JSON-escaped (a stored record),
    percent-encoded (a URL), and base64 at each of the three byte alignments, which finds
    it inside any longer base64 text too, such as the ``user:key`` of HTTP Basic auth.

    A value shorter than ``MIN_SECRET_CHARS`` (8) characters is left alone: replacing
    every ``true``, ``1234`` or ``openai`` in every output would mangle it, and a key that
    short is no secret worth the name.

    An empty redactor (no watched value is set or long enough) is false, so a hot path
    asks ``if redactor`` once and skips all the work.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for value in values:
            if len(value) >= MIN_SECRET_CHARS:
                forms |= _forms(value)
        # Longest first: a form that contains another one is replaced whole.
        self._texts = sorted(forms, key=lambda form: (-len(form), form))
        self._bytes = [form.encode("utf-8", "surrogateescape") for form in self._texts]

    def __bool__(self) -> bool:
        return bool(self._texts)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced (unchanged, and fast, when it holds none)."""
        for form in self._texts:
            if form in text:
                text = text.replace(form, REDACTED)
        return text

    def data(self, data: bytes) -> bytes:
        """``data`` (UTF-8) with every secret replaced; JSON stays JSON, since the
        replacement holds no character JSON escapes."""
        for form in self._bytes:
            if form in data:
                data = data.replace(form, _REDACTED_BYTES)
        return data


def _forms(value: str) -> set[str]:
    raw = value.encode("utf-8", "surrogateescape")
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], quote(raw, safe="")}
    for shift in range(3):
        # Behind ``shift`` other bytes, the first base64 digit made of key bits alone is
        # digit ceil(8 * shift / 6), and the last one is whole before the key's bits end.
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        first = (8 * shift + 5) // 6
        forms.add(encoded[first : 8 * (shift + len(raw)) // 6])
    return forms


def env_names(model: BaseModel) -> list[str]:
    """The environment variables a registry file names: its ``*_env`` fields that are set,
    and the ``{env: NAME}`` values of its ``headers`` (an ``http`` pin's secret headers)."""
    names = []
    for field in type(model).model_fields:
        value = getattr(model, field) if field.endswith("_env") else None
        if isinstance(value, str) and value:
            names.append(value)
    for header in (getattr(model, "headers", None) or {}).values():
        env = getattr(header, "env", None)
        if isinstance(env, str) and env:
            names.append(env)
    return names


_watched: set[str] = set()
_values: list[str] = []
"""Watched values in the order they came: a value is never removed, so how many there
are says whether the set changed."""
_value_set: set[str] = set()
_values_lock = threading.Lock()
PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)
"""The proxy variables the HTTP layer honours: credentials in their URLs are secrets too."""
_current: tuple[tuple[str | int | None, ...], Redactor] = ((), Redactor())


def watch(names: Iterable[str]) -> None:
    """Treat what these environment variables hold as secrets, from now on."""
    _watched.update(names)


def watch_value(value: str | None) -> None:
    """Treat ``value`` as a secret from now on: a credential resolved at run time (an
    access key id or session token from a credential chain, an access token), which no
    watched variable holds. Cheap for a value already watched: a provider calls it before
    every request with what that request carries, refreshed credentials included."""
    if not value or value in _value_set:
        return
    with _values_lock:
        if value not in _value_set:
            _value_set.add(value)
            _values.append(value)


def current() -> Redactor:
    """A redactor for what the watched variables hold now and the watched values (rebuilt
    only when those change)."""
    global _current
    values = (
        *(os.environ.get(name) for name in sorted(_watched)),
        len(_values),
        *(_proxy_password(os.environ.get(name)) for name in PROXY_VARIABLES),
    )
    if values != _current[0]:
        _current = (values, Redactor([*(v for v in values if isinstance(v, str)), *_values]))
    return _current[1]


def _proxy_password(url: str | None) -> str | None:
    """The password in a proxy URL (``http://user:password@proxy:3128``), if any."""
    if not url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def redact(text: str) -> str:
    """``text`` with every watched secret replaced by ``[redacted]``."""
    return current().text(text)


# Schemes whose URL names a login, not a credential, before the "@" (``ssh://git@host``).
_LOGIN_SCHEMES = frozenset({"ssh", "sftp", "hdfs", "webhdfs", "webhdfss"})


def url_without_credentials(url: str) -> str:
    """``url`` as it may be written down: a password in it (``user:password@``), every
    query value (a SAS token, a signature) and, outside schemes where it names a login, a
    user name standing alone (``https://TOKEN@host``) replaced by ``[redacted]``.

    For URLs committed by someone else (a DVC remote's), which no watched variable holds.
    Text that is not a URL comes back as it is: a path carries no credentials.
    """
    try:
        parts = urlsplit(url)
        password, user = parts.password, parts.username
    except ValueError:
        return url
    netloc = parts.netloc
    if user is not None or password is not None:
        host = netloc.rpartition("@")[2]
        if password is not None:
            who = f"{user}:{REDACTED}" if user else REDACTED
        elif user and parts.scheme.lower() in _LOGIN_SCHEMES:
            who = user
        else:
            who = REDACTED
        netloc = f"{who}@{host}"
    query = parts.query
    if query:
        query = "&".join(
            f"{name}={REDACTED}" if sep else name
            for name, sep, _ in (pair.partition("=") for pair in query.split("&"))
        )
    if netloc == parts.netloc and query == parts.query:
        return url
    return parts._replace(netloc=netloc, query=query).geturl()
