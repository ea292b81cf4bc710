"""kafka-python packed for a pod's ``PYTHONPATH``: the Headwater image does not ship Kafka's
client, and the Kubernetes tier never pulls or installs anything in a pod.

The zip holds the whole package as installed here, its data files too: kafka-python 3
reads its protocol schemas (``kafka/protocol/schemas/**/*.json``) with
``importlib.resources``, which zipimport serves.  Compiled caches and type stubs are left
out (a ConfigMap holds at most 1 MiB).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

LEFT_OUT = frozenset({".pyc", ".pyi"})


def kafka_python_zip() -> bytes:
    import kafka  # type: ignore[import-untyped]

    package = Path(kafka.__file__).parent
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in LEFT_OUT:
                zf.write(path, str(path.relative_to(package.parent)))
    return out.getvalue()
