"""A real S3 API on a loopback port (moto's server), for DVC remotes in object storage."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

AWS = {
    "AWS_ACCESS_KEY_ID": "AKIAEVALREGTEST",
    "AWS_SECRET_ACCESS_KEY": "evalreg-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never ask a cloud instance for credentials
}
"""The credentials the server takes, as the environment variables DVC's S3 plugin reads."""


def s3_client(url: str) -> Any:
    """A boto3 S3 client of the server at ``url``, with its credentials."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name=AWS["AWS_DEFAULT_REGION"],
        aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS["AWS_SECRET_ACCESS_KEY"],
    )


@contextlib.contextmanager
def s3_server(*buckets: str) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with ``buckets`` created, empty: its URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        client = s3_client(url)
        for bucket in buckets:
            client.create_bucket(Bucket=bucket)
        yield url
    finally:
        server.stop()
