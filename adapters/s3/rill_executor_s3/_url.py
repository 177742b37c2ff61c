"""Output-store URLs: ``s3://bucket[/prefix][?options]``.

    s3://media-outputs                                   the whole bucket
    s3://media-outputs/transcode/v1                      keys under ``transcode/v1/``
    s3://outputs?endpoint_url=http://127.0.0.1:9000&region=us-east-1&addressing_style=path

Options: ``endpoint_url`` (MinIO, moto, another S3-compatible service), ``region``,
``profile`` (a profile of the AWS config files), ``addressing_style`` (``path``,
``virtual`` or ``auto``), ``max_attempts`` (boto3's standard retry mode, first try
included), ``connect_timeout`` and ``read_timeout`` (seconds). An unknown option is a
``ConfigError`` naming it and the options (``unknown_url_option``, as every store's), not
ignored. Credentials never go in the URL: boto3's credential chain finds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from rill_executor import ConfigError
from rill_executor.store import unknown_url_option

__all__ = ["StoreUrl", "parse_url"]

_ADDRESSING = ("path", "virtual", "auto")
_OPTIONS = (
    "endpoint_url",
    "region",
    "profile",
    "addressing_style",
    "max_attempts",
    "connect_timeout",
    "read_timeout",
)


@dataclass(frozen=True, slots=True)
class StoreUrl:
    bucket: str
    prefix: str
    endpoint_url: str | None = None
    region_name: str | None = None
    profile_name: str | None = None
    addressing_style: Literal["auto", "virtual", "path"] | None = None
    max_attempts: int | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None


def _number(name: str, value: str, kind: type[int] | type[float]) -> int | float:
    try:
        number = kind(value)
    except ValueError:
        raise ConfigError(
            f"{name}={value!r} in the S3 output-store URL is not a {kind.__name__}"
        ) from None
    if number <= 0:
        raise ConfigError(f"{name}={value!r} in the S3 output-store URL must be positive")
    return number


def parse_url(url: str) -> StoreUrl:
    parts = urlsplit(url)
    if parts.scheme.lower() != "s3":
        raise ConfigError(
            f"output-store URL {url!r} is not an s3:// URL; use"
            " s3://bucket[/prefix][?endpoint_url=…&region=…]"
        )
    if "@" in parts.netloc or ":" in parts.netloc:
        raise ConfigError(
            "an s3:// URL names a bucket, not a host: put no credentials or port in it; use"
            " ?endpoint_url=http://host:port for another endpoint and boto3's credential chain"
        )
    bucket = parts.netloc
    if not bucket:
        raise ConfigError(f"output-store URL {url!r} names no bucket; use s3://bucket[/prefix]")
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name not in _OPTIONS:
            raise unknown_url_option(
                name, "the S3 output-store URL", ("rill-executor-s3", _OPTIONS), None, "docs/s3.md"
            )
        if name in options:
            raise ConfigError(f"option {name!r} appears twice in the S3 output-store URL")
        options[name] = value
    style = options.get("addressing_style")
    if style is not None and style not in _ADDRESSING:
        raise ConfigError(f"addressing_style={style!r}; use one of {', '.join(_ADDRESSING)}")
    max_attempts = options.get("max_attempts")
    connect_timeout = options.get("connect_timeout")
    read_timeout = options.get("read_timeout")
    return StoreUrl(
        bucket=bucket,
        prefix=unquote(parts.path).strip("/"),
        endpoint_url=options.get("endpoint_url") or None,
        region_name=options.get("region") or None,
        profile_name=options.get("profile") or None,
        addressing_style=cast(Literal["auto", "virtual", "path"] | None, style),
        max_attempts=None
        if max_attempts is None
        else int(_number("max_attempts", max_attempts, int)),
        connect_timeout=None
        if connect_timeout is None
        else _number("connect_timeout", connect_timeout, float),
        read_timeout=None if read_timeout is None else _number("read_timeout", read_timeout, float),
    )
