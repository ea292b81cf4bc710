"""Which record codec is active: native when built, pure Python when forced or missing.

``HEADWATER_PURE_PYTHON_RECORDS=1`` selects the Python codec even when the
extension is built; ``record_codec().name`` reports the choice.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from headwater.records import NativeRecordCodec, PythonRecordCodec, native_available
from headwater.records.native import PURE_PYTHON_ENV, default_record_codec


def test_default_is_native_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)
    codec = default_record_codec()
    if native_available():
        assert isinstance(codec, NativeRecordCodec) and codec.name == "native"
    else:
        assert isinstance(codec, PythonRecordCodec) and codec.name == "python"


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_the_environment_forces_pure_python(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, value)
    assert isinstance(default_record_codec(), PythonRecordCodec)


@pytest.mark.parametrize("value", ["", "0", "no"])
def test_other_values_do_not(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, value)
    assert default_record_codec().name == ("native" if native_available() else "python")


def test_a_fresh_process_reports_its_codec() -> None:
    code = "import headwater.records as r; print(r.record_codec().name)"
    forced = subprocess.run(
        [sys.executable, "-c", code],
        env={PURE_PYTHON_ENV: "1", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert forced.stdout.strip() == "python"
