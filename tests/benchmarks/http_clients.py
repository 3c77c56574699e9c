"""Requests per second of HTTP client strategies against the loopback LLM server.

The evidence behind the shared HTTP layer's design: each strategy sends N chat-completion
requests with C in flight to ``tests/support/llm_server.py`` (its own process), at server
latency 0 (client CPU cost per request) and 50 ms (can the client keep C requests in
flight?). Each strategy runs in a fresh child process.

Strategies:
  one-client        one httpx.AsyncClient, pool of C connections
  client-per-worker C httpx.AsyncClients, one connection each
  sharded-K         one httpx.AsyncClient over K httpx.AsyncHTTPTransport pools (least busy)
  evalreg-pool-client  one httpx.AsyncClient over evalreg's ConnectionPool transport
  evalreg-pool-direct  httpx.Request straight into evalreg's ConnectionPool (no client)
  evalreg           evalreg's HttpLayer.post (retries, limits, parsing included)
  aiohttp-client    one httpx.AsyncClient over httpx-aiohttp's AiohttpTransport
  evalreg-aiohttp   evalreg's HttpLayer.post over httpx-aiohttp's AiohttpTransport
  raw-asyncio       hand-written HTTP/1.1 over asyncio streams: the floor, not a candidate

The two aiohttp contenders need ``httpx-aiohttp`` installed (it is no dependency of evalreg):
they are the maintained transport the OpenAI and Anthropic SDKs offer, measured against
evalreg's own ``ConnectionPool``.

Run: python tests/benchmarks/http_clients.py [--items N] [--concurrency C] [--strategy S ...]
"""

from __future__ import annotations

import argparse
import sys
import textwrap

import harness

CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import httpx

    strategy, base, key, n, c, model = sys.argv[1:7]
    n, c = int(n), int(c)
    url = f"{base}/chat/completions"
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}

    def body(i):
        return json.dumps({"model": model, "messages": [{"role": "user", "content": f"m{i}"}]},
                          separators=(",", ":")).encode()

    class Sharded(httpx.AsyncBaseTransport):
        def __init__(self, k, per):
            limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
            self.pools = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(k)]
            self.busy = [0] * k

        async def handle_async_request(self, request):
            i = min(range(len(self.pools)), key=self.busy.__getitem__)
            self.busy[i] += 1
            try:
                return await self.pools[i].handle_async_request(request)
            finally:
                self.busy[i] -= 1

        async def aclose(self):
            for p in self.pools:
                await p.aclose()

    async def raw_loop(todo):
        host, port = base.split("//")[1].split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        path = "/" + base.split("//")[1].split("/", 1)[1] + "/chat/completions"
        while todo:
            i = todo.pop()
            data = body(i)
            writer.write(
                f"POST {path} HTTP/1.1\\r\\nhost: {host}:{port}\\r\\n"
                f"authorization: Bearer {key}\\r\\ncontent-type: application/json\\r\\n"
                f"content-length: {len(data)}\\r\\n\\r\\n".encode() + data
            )
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            length = 0
            for line in head.split(b"\\r\\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            assert head.startswith(b"HTTP/1.1 200"), head[:40]
            json.loads(await reader.readexactly(length))
        writer.close()

    async def main():
        todo = list(range(n))
        started = None
        if strategy == "raw-asyncio":
            started = time.perf_counter()
            await asyncio.gather(*(raw_loop(todo) for _ in range(c)))
        elif strategy in ("evalreg-pool-client", "evalreg-pool-direct"):
            from evalreg.providers.http import ConnectionPool
            pool = ConnectionPool()
            client = httpx.AsyncClient(transport=pool, timeout=60)
            target = httpx.URL(url)
            ext = {"timeout": {"connect": 60, "read": 60, "write": 60, "pool": 60}}

            async def worker():
                while todo:
                    i = todo.pop()
                    if strategy == "evalreg-pool-client":
                        r = await client.post(target, content=body(i), headers=headers)
                    else:
                        req = httpx.Request("POST", target, content=body(i), headers=headers,
                                            extensions=ext)
                        r = await pool.handle_async_request(req)
                        await r.aread()
                    assert r.status_code == 200
                    json.loads(r.content)

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(c)))
            await client.aclose()
        elif strategy in ("evalreg", "evalreg-aiohttp"):
            from evalreg.providers.http import HttpLayer
            from evalreg.providers.openai import OpenAIProvider
            from evalreg.registry.schema import Limits
            limits = Limits(concurrency=c, timeout_s=60)
            parse = OpenAIProvider().parse
            transport = None
            if strategy == "evalreg-aiohttp":
                from httpx_aiohttp import AiohttpTransport
                transport = AiohttpTransport(limits=httpx.Limits(max_connections=512))
            async with HttpLayer(transport=transport) as http:
                async def worker():
                    while todo:
                        i = todo.pop()
                        await http.post("p", limits, url, headers, body(i), parse)
                started = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(c)))
        else:
            if strategy == "aiohttp-client":
                from httpx_aiohttp import AiohttpTransport
                lim = httpx.Limits(max_connections=c, max_keepalive_connections=c)
                clients = [httpx.AsyncClient(transport=AiohttpTransport(limits=lim), timeout=60)]
            elif strategy == "one-client":
                lim = httpx.Limits(max_connections=c, max_keepalive_connections=c)
                clients = [httpx.AsyncClient(limits=lim, timeout=60)]
            elif strategy == "client-per-worker":
                lim = httpx.Limits(max_connections=1, max_keepalive_connections=1)
                clients = [httpx.AsyncClient(limits=lim, timeout=60) for _ in range(c)]
            elif strategy.startswith("sharded-"):
                k = int(strategy.split("-")[1])
                per = -(-c // k)
                clients = [httpx.AsyncClient(transport=Sharded(k, per), timeout=60)]
            else:
                raise SystemExit(f"unknown strategy {strategy}")

            async def worker(w):
                client = clients[w % len(clients)]
                while todo:
                    i = todo.pop()
                    r = await client.post(url, content=body(i), headers=headers)
                    r.raise_for_status()
                    json.loads(r.content)

            started = time.perf_counter()
            await asyncio.gather(*(worker(w) for w in range(c)))
            for client in clients:
                await client.aclose()
        print(n / (time.perf_counter() - started))

    asyncio.run(main())
    """
)

STRATEGIES = (
    "one-client",
    "client-per-worker",
    "sharded-4",
    "sharded-8",
    "sharded-16",
    "evalreg-pool-client",
    "evalreg-pool-direct",
    "evalreg",
    "aiohttp-client",
    "evalreg-aiohttp",
    "raw-asyncio",
)


def rate(server: harness.Server, strategy: str, n: int, c: int, extra_path: str | None) -> str:
    import subprocess

    env = harness.env()
    if extra_path:
        env["PYTHONPATH"] = extra_path + ":" + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [
            harness.PYTHON,
            "-c",
            CHILD,
            strategy,
            server.base_url,
            harness.API_KEY,
            str(n),
            str(c),
            harness.MODEL,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        return "failed: " + proc.stderr.strip().splitlines()[-1]
    return f"{float(proc.stdout):8.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.05])
    parser.add_argument("--strategy", nargs="+", default=list(STRATEGIES))
    parser.add_argument(
        "--extra-path",
        help="a directory put first on PYTHONPATH of the children (e.g. one holding sniffio)",
    )
    args = parser.parse_args(argv)
    n, c = args.items, args.concurrency
    for latency in args.latency:
        ideal = c / latency if latency else None
        label = f"L = {latency * 1000:.0f} ms" + (f", ideal {ideal:.0f} req/s" if ideal else "")
        print(f"N = {n}, C = {c}, {label}")
        with harness.llm_server(latency) as server:
            for strategy in args.strategy:
                print(f"  {strategy:20s} {rate(server, strategy, n, c, args.extra_path)} req/s")
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
