"""Buy N synthetic responses through evalreg's fetch layer; a subprocess for crash tests.

Usage: python fetch_script.py ROOT BASE_URL N CONCURRENCY
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from evalreg.providers import get_provider
from evalreg.providers.fetch import fetch, make_job
from evalreg.providers.http import Backoff, HttpLayer
from evalreg.registry.schema import Pin
from evalreg.store.segments import ResponseStore, SegmentWriter


def pin_for(base_url: str, concurrency: int) -> Pin:
    # A timeout far beyond a loopback answer: on a busy machine a request given up on and
    # sent again would be counted twice by the server, which the tests count exactly.
    return Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "openai",
            "model": "test-model",
            "base_url": base_url,
            "api_key_env": "EVALREG_TEST_KEY",
            "params": {"temperature": 0},
            "limits": {"concurrency": concurrency, "timeout_s": 60, "max_retries": 2},
        }
    )


async def main(root: Path, base_url: str, n: int, concurrency: int) -> None:
    pin = pin_for(base_url, concurrency)
    provider = get_provider("openai")
    jobs = [
        make_job("p", pin, provider, [{"role": "user", "content": f"item {i}"}], None, 0, f"i{i}")
        for i in range(n)
    ]
    store = ResponseStore.open(root)
    async with HttpLayer(backoff=Backoff(initial=0.01, maximum=0.05)) as http:
        with SegmentWriter(root) as writer:
            report = await fetch(jobs, store, writer, http, concurrency=concurrency)
    print(f"fetched={report.fetched} cached={report.cached} errors={len(report.errors)}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
