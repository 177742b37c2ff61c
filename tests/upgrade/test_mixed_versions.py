"""A rolling upgrade beside the previous release: its executor (the commit in ``PINNED``,
checked out with ``git worktree add`` from this repository) and the current one share a
store and a namespace, on SQLite, PostgreSQL and Redis, driven by the engine simulator.

The previous release holds a watched job when the store is upgraded, runs another job
beside the current executor, and is killed mid-run; a second dispatch of the first job's
business key reaches the current executor and joins it. Every engine task ends SUCCEED,
told once; once upgraded, the store keeps a process of the previous release out: it refuses
the store at open, and writes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from rill_executor import Ledger
from rill_executor.testing.rillflow import EngineSimulator, Pattern, Retry, Task, TaskStatus
from rill_executor_redis import RedisStore
from rill_executor_redis.testing import RedisServer
from rill_executor_sql import SCHEMA_VERSION, SqlStore
from tests.clocks import SIGNALS

from ..rillflow.service import ROOT, ExecutorService, source_path

pytestmark = pytest.mark.slow

PINNED = Path(__file__).with_name("PINNED")
LEASE = 2.0
RUN = 12.0  # a run's seconds: the first is still running when its executor is killed


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A checkout of the pinned commit, removed (and unregistered) after the module."""
    commit = next(w for w in PINNED.read_text().split() if not w.startswith("#"))
    exists = ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"]
    found = subprocess.run(exists, check=False)
    if found.returncode != 0:
        pytest.fail(
            f"the pinned commit {commit} (tests/upgrade/PINNED) is not in this clone's history;"
            f" fetch it: git fetch --unshallow (or git fetch origin {commit})",
            pytrace=False,
        )
    tree = tmp_path_factory.mktemp("previous") / "tree"
    git = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*git, "add", "--detach", "--quiet", str(tree), commit], check=True)
    try:
        # A regular package ahead of the installed one (older commits had a namespace one).
        (tree / "examples" / "__init__.py").touch()
        imported = run_previous(tree, _WHERE_FROM)
        assert imported.stdout.split() == [str(tree)] * 4, (imported.stdout, imported.stderr)
        yield tree
    finally:
        subprocess.run([*git, "remove", "--force", str(tree)], check=True)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store of the test's own: the previous release refuses it once it is upgraded."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.db'}"
    elif request.param == "redis":
        server = RedisServer(tmp_path, "--appendonly", "yes", "--appendfsync", "always")
        yield server.url
        server.stop()
    else:
        base = make_url(request.getfixturevalue("postgres_url"))
        name = f"rill_upgrade_{uuid.uuid4().hex[:8]}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        yield base.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


@pytest.fixture(autouse=True)
def namespace(monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"segments-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("RILL_NAMESPACE", name)  # both executors' (see ExecutorService)
    return name


def run_previous(tree: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a process of the previous release (its library first on the path)."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        check=False,
        cwd=tree,
        env={**source_path(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


_WHERE_FROM = """
import examples, rill_executor, rill_executor_redis, rill_executor_sql
from pathlib import Path
for module in (examples, rill_executor, rill_executor_redis, rill_executor_sql):
    parents = Path(module.__file__).parents
    print(next(p for p in parents if (p / ".git").exists()))
"""
_PREVIOUS_SCHEMA = """
import sys
from rill_executor_sql import SCHEMA_VERSION, SqlStore
SqlStore(sys.argv[1], upgrade=True).close()
print(SCHEMA_VERSION)
"""
_PREVIOUS_CLAIM = """
import sys
from rill_executor import Ledger
Ledger(sys.argv[1], namespace=sys.argv[2]).claim("probe")
"""
_PREVIOUS_STORE_ID = _PREVIOUS_CLAIM + "print(Ledger(sys.argv[1], namespace='x').store.store_id())"


def upgrade(url: str) -> None:
    """The operator's step: the current code opens the store, upgrading it."""
    if url.startswith("redis"):
        RedisStore.from_url(_quiet(url)).close()
        return
    store = SqlStore(url, upgrade=True)
    with store.engine.connect() as conn:
        version = conn.execute(text("SELECT max(version) FROM rill_schema")).scalar_one()
    assert version == SCHEMA_VERSION
    store.close()


def encode(url: str, video: str, seconds: float = RUN) -> Task:
    return Task(
        "encode",
        f"{url}/segments",
        pattern=Pattern.TASK_ASYNC,
        input={"video": video, "segment": 1, "profile": "h264-v2", "seconds": seconds},
        retry=Retry(),
    )


def told_once(engine: EngineSimulator, execution: str) -> list[int]:
    view = engine.wait_for(execution, "encode", timeout=60)
    assert view.status is TaskStatus.SUCCEED, view
    return [c.status_code for c in engine.callbacks(execution, "encode")]


@pytest.mark.real_clock(SIGNALS)
def test_an_upgrade_beside_the_previous_release_ends_every_task_once(
    previous: Path, store_url: str, namespace: str, tmp_path: Path
) -> None:
    if store_url.startswith("postgres"):  # the previous release installs its schema
        made = run_previous(previous, _PREVIOUS_SCHEMA, store_url)
        assert made.stdout.split() == ["10"], made.stderr
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = ExecutorService(store_url, tmp_path / "old", lease=LEASE, workers=1, root=previous)
    new = ExecutorService(store_url, tmp_path / "new", lease=LEASE, workers=1)
    first, alone, other = (f"v{uuid.uuid4().hex[:10]}" for _ in range(3))
    key, lone_key = f"{first}:1:h264-v2", f"{alone}:1:h264-v2"
    try:
        with EngineSimulator() as engine:
            old.start()
            held = engine.submit(encode(old.url, first))
            lone = engine.submit(encode(old.url, alone))  # nobody joins it
            engine.wait_until(lambda: old.runs() == {key: 1, lone_key: 1}, timeout=20)
            upgrade(store_url)  # while the previous release holds the job
            new.start()
            joined = engine.submit(encode(new.url, first))  # the same key: joins the job
            # The previous release, open before the upgrade, still runs a job of its own.
            beside = engine.submit(encode(old.url, other, seconds=0.0))
            assert told_once(engine, beside) == [200]
            engine.wait_for_status(joined, "encode", TaskStatus.RUNNING, timeout=20)
            for running in (key, lone_key):  # held by the run about to be killed
                assert new.status(running).json()["state"] == "processing"
            old.kill()  # mid-run: the current executor re-drives the job when its lease ends
            assert told_once(engine, held) == [200]
            assert told_once(engine, joined) == [200]
            assert told_once(engine, lone) == [200]
            assert old.runs()[key] == 1 and new.runs()[key] == 1
            assert old.runs()[lone_key] == 1 and new.runs()[lone_key] == 1
            assert new.status(key).json()["state"] == "succeeded"
    finally:
        old.stop()
        new.stop()
    refused = run_previous(previous, _PREVIOUS_CLAIM, store_url, namespace)
    assert refused.returncode != 0, refused.stdout
    error = "SchemaMissing" if store_url.startswith(("sqlite", "postgres")) else "WRONGTYPE"
    assert error in refused.stderr, refused.stderr
    ledger = Ledger(_quiet(store_url), namespace=namespace)
    assert ledger.status("probe") is None
    ledger.close()


def _quiet(url: str) -> str:
    return f"{url}?durability=ignore" if url.startswith("redis") else url


def _rollback(language: str) -> str:
    """The rollback block in ``language`` of docs/operations.md."""
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page.split("### Rolling back", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


@pytest.mark.real_clock(SIGNALS)
def test_a_store_rolled_back_as_the_docs_say_is_the_previous_releases_again(
    previous: Path, store_url: str, namespace: str
) -> None:
    if store_url.startswith("postgres"):
        run_previous(previous, _PREVIOUS_SCHEMA, store_url)
    first = run_previous(previous, _PREVIOUS_CLAIM, store_url, namespace)
    assert first.returncode == 0, first.stderr
    upgrade(store_url)
    ledger = Ledger(_quiet(store_url), namespace=namespace)
    store_id = ledger.store.store_id()
    ledger.close()
    if store_url.startswith("redis"):
        script = _rollback("sh")
        env = {"REDIS_URL": store_url, "PATH": os.environ["PATH"]}
        subprocess.run(["bash", "-ec", script], env=env, check=True)
    else:
        engine = create_engine(store_url)
        with engine.begin() as conn:
            for statement in filter(str.strip, _rollback("sql").split(";")):
                conn.execute(text(statement))
        engine.dispose()
    again = run_previous(previous, _PREVIOUS_STORE_ID, store_url, namespace)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == [store_id]  # the same store, its identity kept
