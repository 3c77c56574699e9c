"""Corporate networks: proxies from the environment and custom CA bundles, over real sockets.

The model API is the loopback LLM server behind TLS, with a certificate from a throwaway CA
(trustme) that no default bundle knows; the proxy is a real HTTP CONNECT proxy on loopback
(``tests/support/proxy.py``). Runs go through the CLI on a real registry repository.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from evalreg.providers.base import Completion, ProviderError
from evalreg.providers.http import HttpLayer, proxy_mounts
from evalreg.registry.schema import Limits

from conftest import LIVE_KEY, Repo, assert_refused, label_of, replace_tree
from support.llm_server import LLMServer
from support.proxy import ConnectProxy

PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
PROXY_PASSWORD = "pr0xy-s3cret-77f1"


@pytest.fixture(autouse=True)
def clean_network_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or CA variable of the machine running the tests leaks in."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server(ca: trustme.CA) -> Iterator[LLMServer]:
    """The loopback LLM server over TLS (``live`` points its pin here)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    with LLMServer(api_key=LIVE_KEY, responder=label_of, tls=context) as srv:
        yield srv


@pytest.fixture
def live(repo: Repo, server: LLMServer, monkeypatch, live_template: Path) -> Repo:
    """The shared standard registry, its OpenAI pin pointed at the TLS server."""
    monkeypatch.setenv("OPENAI_API_KEY", LIVE_KEY)
    live = replace_tree(repo, live_template)
    pin = "registry/models/mini.yaml"
    text = live.read(pin)
    old = next(line for line in text.splitlines() if line.startswith("base_url: "))
    live.write(pin, text.replace(old, f"base_url: {server.base_url}"))
    live.commit("the pin at the TLS server")
    return live


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "corp-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def with_ca_bundle(repo: Repo, ca: trustme.CA, where: str) -> None:
    """Commit the CA as ``certs/corp-ca.pem`` and name it in the pin or the registry."""
    repo.write("certs/corp-ca.pem", ca.cert_pem.bytes().decode())
    if where == "pin":
        repo.write(
            "registry/models/mini.yaml",
            repo.read("registry/models/mini.yaml") + "limits:\n  ca_bundle: certs/corp-ca.pem\n",
        )
    else:
        repo.write(
            "registry/evalreg.yaml",
            "schema_version: 1\nnetwork:\n  ca_bundle: certs/corp-ca.pem\n",
        )
    repo.commit(f"trust the corporate CA ({where})")


def post(server: LLMServer, limits: Limits | None = None) -> Completion:
    async def go() -> Completion:
        async with HttpLayer() as http:
            reply = await http.post(
                "mini",
                limits or Limits(max_retries=0),
                f"{server.base_url}/chat/completions",
                {"authorization": f"Bearer {LIVE_KEY}"},
                b'{"model":"m","messages":[{"role":"user","content":"q1"}]}',
                lambda data: Completion(text=data["choices"][0]["message"]["content"]),
            )
            return reply.completion

    return asyncio.run(go())


def everything_written(repo: Repo) -> bytes:
    """Every byte below the repository, its git objects included."""
    out = []
    for dirpath, _dirs, files in os.walk(repo.root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                out.append(path.read_bytes())
    return b"".join(out)


# ---------------------------------------------------------------- certificates
def test_a_server_whose_ca_is_unknown_is_a_connection_error_naming_verification(server):
    with pytest.raises(ProviderError) as caught:
        post(server)
    assert caught.value.kind == "connection"
    assert "TLS certificate verification failed" in str(caught.value)
    assert "SSL_CERT_FILE or a ca_bundle" in str(caught.value)
    assert server.count() == 0


def test_ssl_cert_file_makes_the_server_trusted(server, ca_file, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    assert post(server).text == '{"label": "a"}'
    assert server.count() == 1


def test_a_pin_ca_bundle_makes_its_server_trusted_for_a_run(live: Repo, cli, server, ca):
    with_ca_bundle(live, ca, "pin")
    result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 4
    assert "bought 4  errors 0" in result.err


def test_a_registry_ca_bundle_is_trusted_for_every_pin(live: Repo, cli, server, ca):
    with_ca_bundle(live, ca, "registry")
    result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 4


def test_without_a_ca_bundle_the_run_records_the_verification_failure(live: Repo, cli, server):
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml") + "limits:\n  max_retries: 0\n",
    )
    live.commit("no retries")
    result = cli(live, "run")
    assert result.code != 0
    assert "certificate verification failed" in result.out + result.err
    assert server.count() == 0


def test_a_ca_bundle_that_does_not_exist_is_refused_with_its_place(live: Repo, cli):
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml") + "limits:\n  ca_bundle: certs/missing.pem\n",
    )
    err = assert_refused(
        live, cli, "check", expect=("registry/models/mini.yaml:13:14:", "certs/missing.pem")
    )
    assert "CA bundle" in err


def test_a_registry_ca_bundle_outside_the_repository_is_refused(live: Repo, cli):
    live.write("registry/evalreg.yaml", "schema_version: 1\nnetwork:\n  ca_bundle: ../ca.pem\n")
    assert_refused(live, cli, "check", expect=("registry/evalreg.yaml:3:", "CA bundle"))


# ---------------------------------------------------------------- proxies
def test_https_proxy_carries_the_run_through_a_connect_tunnel(
    live: Repo, cli, server, ca, monkeypatch
):
    with_ca_bundle(live, ca, "pin")
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 4
    assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{server.port}"}
    assert len(proxy.tunnels) <= 4  # kept-alive tunnels carry several requests


def test_lower_case_https_proxy_is_honoured(server, ca_file, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    with ConnectProxy() as proxy:
        monkeypatch.setenv("https_proxy", proxy.url)
        post(server)
    assert proxy.tunnels == [f"127.0.0.1:{server.port}"]


def test_no_proxy_sends_matching_hosts_direct(live: Repo, cli, server, ca, monkeypatch):
    with_ca_bundle(live, ca, "pin")
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.internal,127.0.0.1")
        result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 4
    assert proxy.tunnels == []


def test_proxy_credentials_are_sent_and_never_written(live: Repo, cli, server, ca, monkeypatch):
    with_ca_bundle(live, ca, "pin")
    with ConnectProxy(credentials=("alice", PROXY_PASSWORD)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url_with_credentials("alice", PROXY_PASSWORD))
        result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 4 and proxy.tunnels and proxy.refused == 0
    assert all(a and a.startswith("Basic ") for a in proxy.authorizations)
    assert PROXY_PASSWORD not in result.out + result.err
    assert PROXY_PASSWORD.encode() not in everything_written(live)


def test_a_refused_proxy_login_is_an_error_without_the_password(
    live: Repo, cli, server, ca, monkeypatch
):
    with_ca_bundle(live, ca, "pin")
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml") + "  max_retries: 0\n",
    )
    live.commit("no retries")
    wrong = PROXY_PASSWORD + "-old"
    with ConnectProxy(credentials=("alice", PROXY_PASSWORD)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url_with_credentials("alice", wrong))
        result = cli(live, "run")
    assert result.code != 0
    assert proxy.refused >= 1 and proxy.tunnels == [] and server.count() == 0
    assert "407" in result.out + result.err
    assert wrong not in result.out + result.err
    assert wrong.encode() not in everything_written(live)


def routed(mounts: dict[str, httpx.AsyncBaseTransport | None], url: str) -> str:
    """Which way a client with ``mounts`` sends ``url``: ``proxy`` or ``direct``."""

    def answer(way: str) -> httpx.MockTransport:
        return httpx.MockTransport(lambda request: httpx.Response(200, text=way))

    stand_ins = {k: None if v is None else answer("proxy") for k, v in mounts.items()}

    async def go() -> str:
        async with httpx.AsyncClient(transport=answer("direct"), mounts=stand_ins) as client:
            return (await client.get(url)).text

    return asyncio.run(go())


def test_proxy_variables_are_read_as_httpx_reads_them(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("http_proxy", "proxy.corp:8080")  # no scheme: http://
    monkeypatch.setenv(
        "NO_PROXY", " .internal.corp, example.com,10.1.2.3, ::1 ,localhost,http://plain.test"
    )
    mounts = proxy_mounts(True, httpx.Limits())
    assert all(isinstance(mounts[k], httpx.AsyncHTTPTransport) for k in ("https://", "http://"))
    assert {k for k, v in mounts.items() if v is None} == {
        "all://*.internal.corp",
        "all://*example.com",
        "all://10.1.2.3",
        "all://[::1]",
        "all://localhost",
        "http://plain.test",
    }
    ways = {
        "https://api.openai.com/v1": "proxy",
        "http://api.openai.com/v1": "proxy",
        "https://llm.internal.corp/v1": "direct",
        "https://internal.corp/v1": "proxy",  # ".internal.corp": its subdomains only
        "https://example.com/v1": "direct",
        "https://www.example.com/v1": "direct",
        "https://notexample.com/v1": "proxy",
        "https://10.1.2.3:8443/v1": "direct",
        "http://[::1]:8000/v1": "direct",
        "http://localhost:8000/v1": "direct",
        "http://plain.test/v1": "direct",
        "https://plain.test/v1": "proxy",
    }
    assert {url: routed(mounts, url) for url in ways} == ways


def test_no_proxy_star_and_no_variables_send_everything_direct(monkeypatch):
    assert proxy_mounts(True, httpx.Limits()) == {}
    monkeypatch.setenv("ALL_PROXY", "http://proxy.corp:3128")
    assert routed(proxy_mounts(True, httpx.Limits()), "https://api.openai.com/v1") == "proxy"
    monkeypatch.setenv("NO_PROXY", "example.com,*")
    assert proxy_mounts(True, httpx.Limits()) == {}


def test_a_connection_error_never_shows_proxy_credentials(monkeypatch):
    # Nothing listens on port 9: whatever the error says, the URL's userinfo is gone.
    monkeypatch.setenv("HTTPS_PROXY", "http://bob:hunter2@127.0.0.1:9")

    async def go() -> ProviderError:
        async with HttpLayer() as http:
            with pytest.raises(ProviderError) as caught:
                await http.post(
                    "p",
                    Limits(max_retries=0),
                    "https://api.example.test/v1/chat/completions",
                    {},
                    b"{}",
                    lambda data: Completion(text=""),
                )
            return caught.value

    error = asyncio.run(go())
    assert error.kind == "connection"
    assert "hunter2" not in str(error) and "bob" not in str(error)
