"""What the broker's host metrics read at scrape time: the disks under ``log.dirs`` and
the certificates the TLS listeners serve (both may change while the broker runs: disks
fill, certificates are rotated in place and reloaded)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from headwater.server import tls
from headwater.server.listeners import ListenerConfig
from headwater.server.metrics import CertificateExpiry, LogDirUsage

log = logging.getLogger(__name__)


def disks(log_dirs: Iterable[str | Path]) -> Iterator[LogDirUsage]:
    """Total and free bytes of each log directory's filesystem; a directory that cannot
    be read (a failed disk) is left out, which the offline-log-dir alerts cover."""
    for d in log_dirs:
        try:
            usage = shutil.disk_usage(d)
        except OSError as exc:
            log.debug("disk usage of %s: %s", d, exc)
            continue
        yield LogDirUsage(str(d), usage.total, usage.free)


def certificates(listeners: Iterable[ListenerConfig]) -> Iterator[CertificateExpiry]:
    """The expiry of the leaf certificate of each TLS listener's keystore, read now (so a
    rotated certificate is seen at the next scrape); one that cannot be read is left out
    and logged without its contents."""
    for listener in listeners:
        if listener.ssl is None:
            continue
        try:
            keystore = tls.load_keystore(listener.ssl)
            not_after = tls.certificate_not_after(keystore.certificate_chain)
        except ValueError as exc:  # TlsMaterialError is a ValueError
            log.warning("certificate expiry of listener %s not exported: %s", listener.name, exc)
            continue
        yield CertificateExpiry(listener.name, not_after)
