"""Turn what the chart renders for a pod into a process on 127.0.0.1, changing only addresses.

The "chart is real" tests take the broker and operator containers exactly as `helm template`
renders them and run them as local processes.  A laptop is not a Kubernetes node, so a few
things must differ, and all of them are here, in one place, so a reader can check that
nothing else is touched:

* host names become ``127.0.0.1`` and ports become free local ports (three brokers share
  one host, so each gets its own listener and metrics port): :func:`localize_listener`,
  :func:`localize_address`, :func:`localize_url` and, for server.properties,
  :func:`localize_properties`, which rewrites the values of :data:`ADDRESS_KEYS` (and
  :data:`KAFKA_ADDRESS_KEYS`, the Kafka listener's) only;
* ``log.dirs`` points at a temporary directory instead of the pod's volume
  (:data:`PATH_KEYS`), and ``--config`` at the rewritten file instead of the ConfigMap's
  mount point (:func:`localize_args`);
* the executable ``headwater`` is the one of this virtualenv (:func:`local_command`).

Everything else (every other configuration key and value, every other argument, every
environment variable, with the downward-API fields filled in as a kubelet would) is used
verbatim, and the tests assert it with :func:`changed_keys`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

LOCALHOST = "127.0.0.1"

ADDRESS_KEYS = frozenset({"listeners", "advertised.listeners", "metrics.port"})
"""server.properties keys whose host names and ports are rewritten."""

KAFKA_ADDRESS_KEYS = frozenset({"kafka.listeners", "kafka.advertised.listeners"})
"""With the chart's Kafka listener (``kafka.enabled``): its bound and advertised addresses,
rewritten like the gRPC listeners'."""

PATH_KEYS = frozenset({"log.dirs"})
"""server.properties keys whose paths are remapped to temporary directories."""

TLS_PATH_KEYS = frozenset({"ssl.keystore.location", "ssl.truststore.location"})
"""With the chart's TLS: the PEM keystore and truststore files, remapped to the test's own
certificates (the pod's are issued for Kubernetes DNS names, not 127.0.0.1)."""

_LISTENER = re.compile(r"(?P<protocol>[A-Za-z_]+)://(?P<host>[^:/]*):(?P<port>\d+)")


def localize_listener(value: str, *, port: int) -> str:
    """``PLAINTEXT://<any host>:<any port>`` -> ``PLAINTEXT://127.0.0.1:<port>``.

    The host may hold ``${VAR}`` references (the chart's advertised.listeners does); it is
    replaced whole.  Only one listener is expected: the chart renders one.
    """
    match = _LISTENER.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"not a single PROTOCOL://host:port listener: {value!r}")
    return f"{match['protocol']}://{LOCALHOST}:{port}"


def localize_listeners(value: str, *, ports: Mapping[str, int]) -> str:
    """``A://h:1,B://h:2`` -> ``A://127.0.0.1:<ports[A]>,B://127.0.0.1:<ports[B]>``: every
    named listener, in order, host replaced whole (it may hold ``${VAR}`` references)."""
    out = []
    for item in value.strip().split(","):
        match = _LISTENER.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"not a NAME://host:port listener: {item!r}")
        out.append(f"{match['protocol']}://{LOCALHOST}:{ports[match['protocol']]}")
    return ",".join(out)


def localize_address(value: str, *, port: int) -> str:
    """``host:port`` -> ``127.0.0.1:<port>``."""
    host, sep, old_port = value.rpartition(":")
    if not sep or not host or not old_port.isdigit():
        raise ValueError(f"not a host:port address: {value!r}")
    return f"{LOCALHOST}:{port}"


def localize_url(value: str, *, port: int) -> str:
    """``http://0.0.0.0:8080/healthz`` -> ``http://127.0.0.1:<port>/healthz`` (path kept)."""
    parts = urlsplit(value)
    if not parts.hostname or parts.port is None:
        raise ValueError(f"not a URL with a host and port: {value!r}")
    return urlunsplit(parts._replace(netloc=f"{LOCALHOST}:{port}"))


def localize_properties(
    text: str,
    *,
    listener_port: int = 0,
    metrics_port: int,
    log_dir: Path,
    listener_ports: Mapping[str, int] | None = None,
    tls_files: Mapping[str, Path] | None = None,
    kafka_port: int | None = None,
) -> str:
    """server.properties with only :data:`ADDRESS_KEYS` and :data:`PATH_KEYS` rewritten
    (and :data:`TLS_PATH_KEYS` to ``tls_files[key]``, :data:`KAFKA_ADDRESS_KEYS` to
    ``kafka_port``).

    ``listener_port`` for the chart's single listener, ``listener_ports`` (by listener
    name) for its named ones.  A rendered Kafka listener without ``kafka_port`` is an
    error: three local brokers cannot share its port.  Works line by line on the rendered
    text, so comments, order and every other line stay byte for byte as rendered.
    """
    out: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and not line.lstrip().startswith(("#", "!")):
            if key in ("listeners", "advertised.listeners") and listener_ports is not None:
                line = f"{key}={localize_listeners(value, ports=listener_ports)}"
            elif key in ("listeners", "advertised.listeners"):
                line = f"{key}={localize_listener(value, port=listener_port)}"
            elif key in KAFKA_ADDRESS_KEYS:
                if kafka_port is None:
                    raise ValueError(f"{key} is rendered: pass kafka_port")
                line = f"{key}={localize_listener(value, port=kafka_port)}"
            elif key in TLS_PATH_KEYS and tls_files is not None:
                line = f"{key}={tls_files[key]}"
            elif key == "metrics.port":
                line = f"{key}={metrics_port}"
            elif key in PATH_KEYS:
                line = f"{key}={log_dir}"
        out.append(line)
    return "\n".join(out) + "\n"


def changed_keys(before: Mapping[str, str], after: Mapping[str, str]) -> set[str]:
    """Keys whose values differ, or that one side lacks."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def localize_args(args: Sequence[str], *, config_path: Path) -> list[str]:
    """The container's args with ``--config <mount point>`` pointing at ``config_path``."""
    out = list(args)
    index = out.index("--config")
    out[index + 1] = str(config_path)
    return out


def local_command(command: Sequence[str]) -> list[str]:
    """The container's command with ``headwater`` resolved to this virtualenv's script."""
    if list(command[:1]) != ["headwater"]:
        raise ValueError(f"expected the container to run `headwater`, got {command!r}")
    return [str(Path(sys.executable).with_name("headwater")), *command[1:]]
