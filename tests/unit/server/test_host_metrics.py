"""The broker's disk and certificate gauges: a certificate's notAfter read from its DER,
the log directories' filesystems, and what the scrape shows of them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from headwater.server import host_metrics, tls
from headwater.server.metrics import BrokerMetrics, CertificateExpiry, LogDirUsage
from headwater.testing.tls import CertificateAuthority
from prometheus_client import generate_latest


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.create()


@pytest.mark.parametrize(
    "not_after",
    [
        dt.datetime(2031, 2, 3, 4, 5, 6, tzinfo=dt.UTC),  # UTCTime
        dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.UTC),  # UTCTime, last year
        dt.datetime(2061, 7, 8, 9, 10, 11, tzinfo=dt.UTC),  # GeneralizedTime
    ],
)
def test_not_after_of_the_leaf(ca: CertificateAuthority, not_after: dt.datetime) -> None:
    issued = ca.issue("broker", not_after=not_after)
    # a keystore: the key, then the chain (leaf first, then the CA)
    keystore = issued.key_pem + issued.chain_pem + ca.pem
    assert tls.certificate_not_after(keystore) == not_after.timestamp()


def test_an_expired_certificate_reads_as_past(ca: CertificateAuthority) -> None:
    issued = ca.issue_expired("broker")
    assert tls.certificate_not_after(issued.chain_pem) < dt.datetime.now(dt.UTC).timestamp()


@pytest.mark.parametrize(
    "pem",
    [
        b"",
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        b"-----BEGIN CERTIFICATE-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n-----END CERTIFICATE-----\n",
    ],
    ids=["empty", "no-certificate", "truncated"],
)
def test_no_usable_certificate_is_a_value_error(pem: bytes) -> None:
    with pytest.raises(ValueError):
        tls.certificate_not_after(pem)


def test_disks_of_log_dirs(tmp_path: Path) -> None:
    (found,) = host_metrics.disks([tmp_path, tmp_path / "gone"])
    assert found.log_dir == str(tmp_path)
    assert 0 < found.free_bytes <= found.total_bytes


def test_the_scrape_shows_disks_and_certificates() -> None:
    metrics = BrokerMetrics()
    metrics.register_host(
        disks=lambda: [LogDirUsage("/data/0", 1000, 250)],
        certificates=lambda: [CertificateExpiry("CLIENT", 1.9e9)],
    )
    text = generate_latest(metrics.registry).decode()
    assert 'headwater_log_dir_total_bytes{log_dir="/data/0"} 1000.0' in text
    assert 'headwater_log_dir_free_bytes{log_dir="/data/0"} 250.0' in text
    assert 'headwater_tls_certificate_expiry_timestamp_seconds{listener="CLIENT"} 1.9e+09' in text
