"""Every ```python block of README.md and docs/*.md runs as written.

Each block runs in a fresh ``python -W error`` subprocess, in an empty temporary working
directory, and fails the test with its file and line. HTML comments on the lines right
above a block's fence change how it runs:

- ``<!-- not-run: reason -->``: not run (say why: a fragment, a placeholder store…).
- ``<!-- needs: postgres, redis -->``: the servers it needs (postgres, mariadb, redis,
  redis-cluster, s3). Every URL of that scheme in the block is replaced by a test server's
  URL (``postgresql+psycopg://app@db/jobs`` stays readable in the docs): a fresh database
  for each block on PostgreSQL and MariaDB, the suite's Redis, a Redis Cluster started for
  this module. For s3, boto3 is pointed at a moto server with fake credentials, and every
  ``s3://bucket`` named in the block is created first.
- ``<!-- run: pytest -->``: the block is a test module, run by pytest.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from rill_executor_redis.testing import RedisCluster
from rill_executor_sql import SqlStore
from tests.adapters.s3.conftest import MotoServer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NEEDS = {
    "postgres": (re.compile(r"postgresql(?:\+\w+)?://[^\s\"']+"), "postgres_url"),
    "mariadb": (re.compile(r"(?:mysql|mariadb)(?:\+\w+)?://[^\s\"']+"), "mariadb_url"),
    "redis": (re.compile(r"rediss?://[^\s\"']+"), "redis_url"),
    "redis-cluster": (re.compile(r"rediss?\+cluster://[^\s\"']+"), "docs_cluster_url"),
    "s3": (None, "docs_s3_endpoint"),
}
FENCE = re.compile(r"^```(\S*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*([a-z-]+)\s*(?::\s*(.*?))?\s*-->$")

# Runs a block compiled under its page's name and line numbers, so that a traceback points
# into the Markdown file. Arguments: page, line of the fence, warnings to ignore (module:Class).
RUNNER = """
import sys, warnings
page, line, *quiet = sys.argv[1:]
for category in quiet:
    module, name = category.split(":")
    warnings.filterwarnings("ignore", category=getattr(__import__(module), name))
code = compile("\\n" * int(line) + sys.stdin.read(), page, "exec")
exec(code, {"__name__": "__main__"})
"""


@dataclass
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    code: str
    not_run: str | None = None
    needs: set[str] = field(default_factory=set)
    runner: str = "python"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def servers(self) -> str:
        return ",".join(sorted(self.needs))


def _directives(lines: list[str], fence: int, where: str) -> dict[str, str]:
    found: dict[str, str] = {}
    above = fence - 1
    while above >= 0 and (match := DIRECTIVE.match(lines[above].strip())):
        found[match[1]] = match[2] or ""
        above -= 1
    unknown = set(found) - {"not-run", "needs", "run"}
    if unknown:
        raise ValueError(f"{where}: unknown doc-test directive(s) {sorted(unknown)}")
    return found


def _block(page: str, lines: list[str], fence: int, code: str) -> Block:
    where = f"{page}:{fence + 1}"
    found = _directives(lines, fence, where)
    if "not-run" in found and not found["not-run"]:
        raise ValueError(f"{where}: <!-- not-run: … --> needs its reason")
    needs = {need.strip() for need in found.get("needs", "").split(",") if need.strip()}
    if needs - NEEDS.keys():
        raise ValueError(f"{where}: unknown needs {sorted(needs - NEEDS.keys())}")
    if found.get("run", "pytest") != "pytest":
        raise ValueError(f"{where}: only <!-- run: pytest --> is known")
    return Block(page, fence + 1, code, found.get("not-run"), needs, found.get("run", "python"))


def python_blocks(path: Path) -> Iterator[Block]:
    page = str(path.relative_to(ROOT))
    lines = path.read_text().splitlines()
    start: int | None = None
    language = ""
    for number, line in enumerate(lines):
        match = FENCE.match(line.strip())
        if not match:
            continue
        if start is None:
            start, language = number, match[1]
        else:
            if language == "python":
                body = "\n".join(lines[start + 1 : number]) + "\n"
                code = textwrap.dedent(body)  # a block inside a list item is indented
                yield _block(page, lines, start, code)
            start = None


BLOCKS = [block for page in PAGES for block in python_blocks(page)]


@pytest.fixture(scope="module")
def docs_s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = MotoServer(tmp_path_factory.mktemp("docs-moto") / "moto.log")
    yield server.endpoint
    server.stop()


@pytest.fixture(scope="module")
def docs_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = RedisCluster(tmp_path_factory.mktemp("docs-cluster"))
    yield cluster.url
    cluster.stop()


def _aws_env(endpoint: str, home: Path) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "absent"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "absent"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _create_buckets(code: str, env: dict[str, str]) -> None:
    client = boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    ).client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
    for bucket in set(re.findall(r"s3://([a-z0-9.-]+)", code)):
        client.create_bucket(Bucket=bucket)
    client.close()


@contextmanager
def _own_database(url: str) -> Iterator[str]:
    """A database of the block's own on the server of ``url``, with the current schema (as
    ``rill-executor schema upgrade`` installs it), dropped afterwards."""
    base = make_url(url)
    name = f"rill_docs_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        own = base.set(database=name).render_as_string(hide_password=False)
        SqlStore(own, upgrade=True).close()
        yield own
    finally:
        force = " WITH (FORCE)" if base.get_backend_name() == "postgresql" else ""
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name}{force}"))
        admin.dispose()


def _run(
    block: Block, code: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    # The test servers keep nothing on disk on purpose; a user's Redis should.
    quiet = ["rill_executor_redis:DurabilityWarning"] if "redis" in block.servers else []
    if block.runner == "pytest":
        module = cwd / "test_doc_block.py"
        module.write_text("\n" * block.line + code)  # the page's line numbers
        (cwd / "pytest.ini").write_text("[pytest]\n")
        command = [sys.executable, "-m", "pytest", "-q", "-W", "error", "-p", "no:cacheprovider"]
        command += [f"-Wignore::{category.replace(':', '.')}" for category in quiet]
        command.append(module.name)
        stdin = None
    else:
        command = [sys.executable, "-W", "error", "-c", RUNNER, block.page, str(block.line)]
        command += quiet
        stdin = code
    return subprocess.run(
        command,
        input=stdin,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.not_run is None], ids=lambda block: block.where
)
def test_doc_block_runs(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AWS_"))}
    code = block.code
    with ExitStack() as stack:
        for need in sorted(block.needs):
            pattern, fixture = NEEDS[need]
            value: str = request.getfixturevalue(fixture)
            if need in ("postgres", "mariadb"):
                value = stack.enter_context(_own_database(value))
            if need.startswith("redis"):  # as a user writes it: no durability=ignore
                value = value.removesuffix("durability=ignore").rstrip("?&")
            if pattern is not None:
                code = pattern.sub(value, code)
            else:
                env |= _aws_env(value, tmp_path)
                _create_buckets(code, env)
        done = _run(block, code, env, tmp_path)
    if done.returncode != 0:
        pytest.fail(
            f"{block.where}: the block failed (exit {done.returncode})\n"
            f"{done.stdout[-3000:]}{done.stderr[-5000:]}",
            pytrace=False,
        )


def test_blocks_are_found() -> None:
    """The parser sees the pages' blocks: an unclosed fence or a renamed page shows here."""
    assert {Path(b.page).name for b in BLOCKS} >= {"README.md", "usage.md", "outputs.md"}
