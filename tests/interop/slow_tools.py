"""Where the slow interop suites find the Java software they run (Kafka Connect, Spark's
Kafka connector): the directories ``scripts/fetch-interop-slow.sh`` fills under ``.tools``.

Without them (or without Java) a test skips, saying how to fetch them, unless ``CI`` is
set: then the fetch script runs, and a failure fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = ROOT / "scripts" / "fetch-interop-slow.sh"
KAFKA_VERSION = "3.9.1"


def connect_dir() -> Path:
    return ROOT / ".tools" / "kafka-connect" / KAFKA_VERSION


def spark_kafka_dir(pyspark_version: str) -> Path:
    return ROOT / ".tools" / "spark-kafka" / f"for-pyspark-{pyspark_version}"


def fetched(kind: str, directory: Path) -> Path:
    """``directory`` once ``fetch-interop-slow.sh kind`` has filled it (skip or fail if not)."""
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but `java` is not on PATH (run scripts/install-system-deps.sh)")
        pytest.skip("java is not installed")
    if (directory / ".complete").exists():
        return directory
    if not os.environ.get("CI"):
        pytest.skip(
            f"{directory.relative_to(ROOT)} is missing; run "
            f"`bash {FETCH_SCRIPT.relative_to(ROOT)} {kind}` (or `make interop-slow`)"
        )
    done = subprocess.run(
        ["bash", str(FETCH_SCRIPT), kind], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0 or not (directory / ".complete").exists():
        pytest.fail(f"{FETCH_SCRIPT.name} {kind} failed:\n{done.stdout}\n{done.stderr}")
    return directory
