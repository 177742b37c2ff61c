"""The conformance kit in a project of its own: none of this repository's pytest configuration,
``--strict-markers`` and ``-W error``, pytest as a subprocess of this environment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KIT_MODULE = """
import pytest

from rill_executor.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    multiprocess = False

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
"""


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=project,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_kit_collects_and_passes_under_strict_markers_outside_the_repo(
    tmp_path: Path,
) -> None:
    assert not tmp_path.is_relative_to(ROOT), "the throwaway project must be outside the repo"
    (tmp_path / "test_my_store.py").write_text(KIT_MODULE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir: no search above it
    done = run_pytest(
        tmp_path,
        "--strict-markers",
        "-W",
        "error",
        "-p",
        "no:cacheprovider",
        "-q",
        "-k",
        "fresh_claim_commit_then_replay or decorator_runs_once",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout


OPTED_OUT_MODULE = """
import pytest

from rill_executor.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    multiprocess = False
    skip_groups = {"races": "one process only"}
    skip_tests = {"test_ping_answers": "this store has no ping"}

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
"""


def test_a_store_opts_out_of_a_group_or_a_test_with_the_reason_reported(tmp_path: Path) -> None:
    (tmp_path / "test_my_store.py").write_text(OPTED_OUT_MODULE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = run_pytest(
        tmp_path,
        "--strict-markers",
        "-W",
        "error",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        "-k",
        "simultaneous or sigstopped or ping_answers or fresh_claim",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 10 skipped" in done.stdout, done.stdout
    reasons = [line.rsplit(": ", 1)[-1] for line in done.stdout.splitlines() if "SKIPPED" in line]
    assert sorted(reasons) == ["one process only"] * 2 + ["this store has no ping"], done.stdout

    (tmp_path / "test_my_store.py").write_text(OPTED_OUT_MODULE.replace('"races"', '"race"'))
    broken = run_pytest(tmp_path, "-p", "no:cacheprovider", "-q", "--collect-only")
    assert broken.returncode != 0
    assert "TestMemoryStore.skip_groups: the kit has no group 'race'" in broken.stdout


def test_the_plugin_imports_nothing_of_the_kit() -> None:
    """pytest loads the plugin in every run of an environment that has the package."""
    probe = textwrap.dedent(
        """
        import sys
        import rill_executor.testing._plugin
        kit = ("hypothesis", "time_machine", "rill_executor.testing.")
        print(sorted(m for m in sys.modules if m.startswith(kit)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "['rill_executor.testing._plugin']"
