"""Run by .ci/wheel-check with the fresh environment's Python, from an empty directory:
the installed distributions are whole. Argument: the clone's root (only read, never imported)."""

import importlib
import importlib.metadata
import os
import pkgutil
import subprocess
import sys
import uuid
from importlib.resources import files
from pathlib import Path

from rill_executor import Claim, Ledger, Replay

ROOT = Path(sys.argv[1])
PACKAGES = {  # package: (distribution, its folder in the clone)
    "rill_executor": ("rill-executor", ROOT),
    "rill_executor_sql": ("rill-executor-sql", ROOT / "adapters/sql"),
    "rill_executor_redis": ("rill-executor-redis", ROOT / "adapters/redis"),
    "rill_executor_s3": ("rill-executor-s3", ROOT / "adapters/s3"),
}
version = (ROOT / "VERSION").read_text().strip()
failures: list[str] = []

for package, (distribution, folder) in PACKAGES.items():
    module = importlib.import_module(package)
    where = Path(module.__file__ or "").resolve()
    if not where.is_relative_to(Path(sys.prefix).resolve()):
        failures.append(f"{package} imported from {where}, not from the environment {sys.prefix}")
    if (found := importlib.metadata.version(distribution)) != version:
        failures.append(f"{distribution} {found} installed, VERSION says {version}")
    names = [package]
    names += [m.name for m in pkgutil.walk_packages(module.__path__, f"{package}.")]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failures.append(f"import {name}: {type(exc).__name__}: {exc}")
    print(f"{distribution} {found}: {len(names)} modules imported")
    # Every file of the package that is not Python (Lua scripts, SQL, py.typed) is there.
    listed = subprocess.run(
        ["git", "-C", str(folder), "ls-files", "--", package],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    data = [Path(name).relative_to(package) for name in listed if not name.endswith(".py")]
    missing = [str(d) for d in data if not files(package).joinpath(*d.parts).is_file()]
    if missing:
        failures.append(f"{distribution}: package files missing from the wheel: {missing}")
    print(f"{distribution}: {len(data) - len(missing)} of {len(data)} package data files found")

# The installed package reads them: the Lua scripts on Redis, the SQL on PostgreSQL.
redis_url = os.environ.get("RILL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
redis_url += ("&" if "?" in redis_url else "?") + "durability=ignore"  # the CI server's no AOF
postgres_url = os.environ.get(
    "RILL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
cli = Path(sys.executable).parent / "rill-executor"
subprocess.run([cli, "schema", "upgrade", "--store", postgres_url], check=True)
for url in (redis_url, postgres_url):
    try:
        with Ledger(url, namespace=f"wheel-check-{uuid.uuid4().hex[:8]}") as ledger:
            claim = ledger.claim("k")
            assert isinstance(claim, Claim), claim
            claim.commit({"ok": True})
            replay = ledger.claim("k")
            assert isinstance(replay, Replay) and replay.result() == {"ok": True}, replay
        print(f"{url.split(':', 1)[0]}: claim, commit and replay through the installed store")
    except Exception as exc:
        failures.append(f"{url}: {type(exc).__name__}: {exc}")

if failures:
    sys.exit("wheel-check failed:\n  " + "\n  ".join(failures))
