"""The chart's Kafka-protocol listener (``kafka.*``), as `helm template` renders it.

Every broker gets a KAFKA listener in the broker's own keys (``kafka.listeners``,
``kafka.advertised.listeners`` naming the pod's stable DNS name under the headless Service,
``KAFKA:<protocol>`` in ``listener.security.protocol.map``), a named container port, and that
port on the headless and the bootstrap Service.  Its protocol follows the CLIENT listener
(SSL with client certificates, SASL_SSL with SCRAM-SHA-512, PLAINTEXT without TLS) unless
``kafka.securityProtocol`` says otherwise.  The brokers' generated certificate passes a real
TLS handshake with hostname checking for every broker's advertised name and the bootstrap
Service's names.  NetworkPolicy lets every namespace reach the port when the listener
authenticates.  Bad values fail `helm template` with the value named; NOTES.txt prints
the Kafka bootstrap.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.deploy import chart

HEADLESS = "hw-headwater-broker-headless"
BOOTSTRAP = "hw-headwater-bootstrap"
DOMAIN = "headwater.svc.cluster.local"


def props(values: dict[str, Any]) -> dict[str, str]:
    return chart.parse_properties(chart.broker_properties(chart.render(values)))


def service_ports(objs: list[chart.Obj], name: str) -> dict[str, tuple[int, Any]]:
    service = chart.one(objs, "Service", name)
    return {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}


def test_each_broker_advertises_its_own_name_on_the_kafka_port() -> None:
    objs = chart.render()
    p = chart.parse_properties(chart.broker_properties(objs))
    assert p["kafka.listeners"] == "KAFKA://0.0.0.0:9093"
    for ordinal in range(3):
        hostname = f"hw-headwater-broker-{ordinal}"
        env = chart.broker_env(objs, hostname=hostname)
        assert chart.expand_env(p["kafka.advertised.listeners"], env) == (
            f"KAFKA://{hostname}.{HEADLESS}.{DOMAIN}:9093"
        )
    # The KAFKA name is mapped beside the gRPC listeners, which are unchanged.
    assert p["listener.security.protocol.map"] == "INTERNAL:SSL,CLIENT:SSL,KAFKA:SSL"
    assert p["listeners"] == "INTERNAL://0.0.0.0:9091,CLIENT://0.0.0.0:9092"
    assert p["listener.name.kafka.ssl.client.auth"] == "required"
    # The keystore and truststore are the broker-wide ones (the brokers' Secret).
    assert not any(k.startswith("listener.name.kafka.ssl.keystore") for k in p)
    container = chart.broker_container(objs)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["kafka"] == 9093
    assert len(set(ports.values())) == len(ports)
    # The port is on the headless Service (per-broker names) and the bootstrap Service.
    sts = chart.broker_statefulset(objs)
    assert sts["spec"]["serviceName"] == HEADLESS
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    for name in (HEADLESS, BOOTSTRAP):
        assert service_ports(objs, name)["kafka"] == (9093, "kafka")
        selector = chart.one(objs, "Service", name)["spec"]["selector"]
        assert selector.items() <= pod_labels.items()
    assert chart.one(objs, "Service", HEADLESS)["spec"]["publishNotReadyAddresses"] is True


@pytest.mark.parametrize(
    ("values", "protocol", "client_auth", "mechanisms"),
    [
        ({}, "SSL", "required", None),
        ({"tls": {"clientAuthentication": "scram-sha-512"}}, "SASL_SSL", "none", "SCRAM-SHA-512"),
        ({"tls": {"clientAuthentication": "none"}}, "SSL", "none", None),
        ({"tls": {"enabled": False}}, "PLAINTEXT", None, None),
        ({"kafka": {"securityProtocol": "SASL_SSL"}}, "SASL_SSL", "none", "SCRAM-SHA-512"),
        (
            {"tls": {"enabled": False}, "kafka": {"securityProtocol": "SASL_PLAINTEXT"}},
            "SASL_PLAINTEXT",
            None,
            "SCRAM-SHA-512",
        ),
        ({"kafka": {"securityProtocol": "PLAINTEXT"}}, "PLAINTEXT", None, None),
    ],
    ids=["tls", "scram", "tls-anonymous", "plaintext", "sasl-ssl", "sasl-plaintext", "explicit"],
)
def test_the_kafka_listeners_protocol(
    values: dict[str, Any], protocol: str, client_auth: str | None, mechanisms: str | None
) -> None:
    p = props(values)
    assert p["listener.security.protocol.map"].split(",")[-1] == f"KAFKA:{protocol}"
    if not values.get("tls", {"enabled": True}).get("enabled", True):
        # Without TLS the gRPC listener is the single PLAINTEXT one.
        assert p["listener.security.protocol.map"] == f"PLAINTEXT:PLAINTEXT,KAFKA:{protocol}"
        assert p["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert p.get("listener.name.kafka.ssl.client.auth") == client_auth
    assert p.get("listener.name.kafka.sasl.enabled.mechanisms") == mechanisms


@pytest.mark.parametrize(
    ("values", "protocol", "client_auth", "mechanisms"),
    [
        ({}, "SSL", "required", ()),
        (
            {"tls": {"clientAuthentication": "scram-sha-512"}},
            "SASL_SSL",
            "none",
            ("SCRAM-SHA-512",),
        ),
        ({"tls": {"enabled": False}}, "PLAINTEXT", None, ()),
    ],
    ids=["tls", "scram", "plaintext"],
)
def test_the_broker_accepts_the_rendered_kafka_listener(
    values: dict[str, Any],
    protocol: str,
    client_auth: str | None,
    mechanisms: tuple[str, ...],
    tmp_path: Path,
) -> None:
    """The broker's own config loader, given the rendered server.properties and the pod's
    environment, yields the Kafka listener the chart means."""
    from headwater.server.config.loading import load_config

    objs = chart.render(values)
    config_file = tmp_path / "server.properties"
    config_file.write_text(chart.broker_properties(objs))
    hostname = "hw-headwater-broker-2"
    config = load_config(
        config_file=config_file,
        environ=chart.broker_env(objs, hostname=hostname),
        broker_id_from_hostname=True,
    )
    assert config.broker_id == 2
    (kafka,) = config.kafka_listener_configs
    assert kafka.name == "KAFKA"
    assert (kafka.endpoint.host, kafka.endpoint.port) == ("0.0.0.0", 9093)
    assert kafka.endpoint.protocol.value == protocol
    assert (kafka.advertised.host, kafka.advertised.port) == (
        f"{hostname}.{HEADLESS}.{DOMAIN}",
        9093,
    )
    assert (kafka.ssl.client_auth if kafka.ssl else None) == client_auth
    if kafka.ssl is not None:
        assert kafka.ssl.keystore_location == "/etc/headwater/tls/tls-combined.pem"
        assert kafka.ssl.truststore_location == "/etc/headwater/tls/ca.crt"
    assert kafka.sasl_mechanisms == mechanisms


def test_kafka_disabled_renders_no_kafka_listener() -> None:
    values = {"kafka": {"enabled": False}}
    objs = chart.render(values)
    p = chart.parse_properties(chart.broker_properties(objs))
    assert not any("kafka" in k for k in p), p
    assert p["listener.security.protocol.map"] == "INTERNAL:SSL,CLIENT:SSL"
    ports = {port["name"] for port in chart.broker_container(objs)["ports"]}
    assert "kafka" not in ports
    for name in (HEADLESS, BOOTSTRAP):
        assert "kafka" not in service_ports(objs, name)
    (policy,) = chart.component(objs, "NetworkPolicy", "broker")
    assert 9093 not in {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]}
    # Without TLS either, nothing but the single PLAINTEXT listener.
    bare = props({"kafka": {"enabled": False}, "tls": {"enabled": False}})
    assert "listener.security.protocol.map" not in bare


def test_user_config_still_wins_over_the_kafka_keys() -> None:
    mine = "KAFKA://${HOSTNAME}.example.com:9093"
    p = props({"brokers": {"config": {"kafka.advertised.listeners": mine}}})
    assert p["kafka.advertised.listeners"] == mine


def test_a_custom_port_reaches_every_place() -> None:
    objs = chart.render({"kafka": {"port": 19093}})
    p = chart.parse_properties(chart.broker_properties(objs))
    assert p["kafka.listeners"] == "KAFKA://0.0.0.0:19093"
    assert p["kafka.advertised.listeners"].endswith(":19093")
    ports = {port["name"]: port["containerPort"] for port in chart.broker_container(objs)["ports"]}
    assert ports["kafka"] == 19093
    for name in (HEADLESS, BOOTSTRAP):
        assert service_ports(objs, name)["kafka"] == (19093, "kafka")
    (policy,) = chart.component(objs, "NetworkPolicy", "broker")
    assert 19093 in {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]}


# -- certificates ------------------------------------------------------------------------------


def handshake(server_pem: Path, ca_pem: Path, server_hostname: str) -> None:
    """A TLS handshake in memory: a server with the brokers' keystore, a client trusting
    the CA and checking that the certificate names ``server_hostname``; raises if not."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(server_pem)
    client_ctx = ssl.create_default_context(cafile=str(ca_pem))
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(20):
        done = 0
        for side in (client, server):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done == 2:
            return
    raise AssertionError("the handshake did not finish")


def test_the_brokers_certificate_names_every_broker_and_the_bootstrap(tmp_path: Path) -> None:
    objs = chart.render({"brokers": {"replicas": 4, "config": {"min.insync.replicas": 2}}})
    broker = chart.secret_data(objs, "hw-headwater-broker-tls")
    (tmp_path / "keystore.pem").write_text(broker["tls-combined.pem"])
    (tmp_path / "ca.crt").write_text(broker["ca.crt"])
    p = chart.parse_properties(chart.broker_properties(objs))
    advertised = [
        chart.expand_env(
            p["kafka.advertised.listeners"],
            chart.broker_env(objs, hostname=f"hw-headwater-broker-{i}"),
        )
        .removeprefix("KAFKA://")
        .rpartition(":")[0]
        for i in range(4)
    ]
    names = [
        *advertised,
        *(name.removesuffix(".cluster.local") for name in advertised),
        f"{BOOTSTRAP}.{DOMAIN}",
        f"{BOOTSTRAP}.headwater.svc",
        f"{BOOTSTRAP}.headwater",
        BOOTSTRAP,
    ]
    for name in names:
        handshake(tmp_path / "keystore.pem", tmp_path / "ca.crt", name)
    # The check is real: a name the certificate does not cover fails.
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(tmp_path / "keystore.pem", tmp_path / "ca.crt", f"x.other.{DOMAIN}")


def test_cert_manager_certificate_names_every_broker_and_the_bootstrap() -> None:
    manager = {"enabled": True}
    objs = chart.render({"tls": {"certManager": manager}})
    cert = chart.one(objs, "Certificate", "hw-headwater-broker-tls")["spec"]
    assert f"*.{HEADLESS}.{DOMAIN}" in cert["dnsNames"]
    assert f"*.{HEADLESS}.headwater.svc" in cert["dnsNames"]
    assert f"{BOOTSTRAP}.{DOMAIN}" in cert["dnsNames"]
    assert "server auth" in cert["usages"]


# -- network policy ------------------------------------------------------------------------


def kafka_rule(values: dict[str, Any]) -> chart.Obj:
    objs = chart.render(values)
    (policy,) = chart.component(objs, "NetworkPolicy", "broker")
    (rule,) = [r for r in policy["spec"]["ingress"] if {p["port"] for p in r["ports"]} == {9093}]
    return rule


@pytest.mark.parametrize(
    ("values", "peers"),
    [
        ({}, [{"namespaceSelector": {}}]),
        ({"tls": {"clientAuthentication": "scram-sha-512"}}, [{"namespaceSelector": {}}]),
        # No authentication: the namespace only, as the gRPC client port.
        ({"tls": {"clientAuthentication": "none"}}, [{"podSelector": {}}]),
        ({"tls": {"enabled": False}}, [{"podSelector": {}}]),
        (
            {"tls": {"enabled": False}, "networkPolicy": {"clientFrom": [{"ipBlock": {
                "cidr": "10.0.0.0/8"}}]}},
            [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
        ),
        (
            {"networkPolicy": {"kafkaFrom": [{"namespaceSelector": {"matchLabels": {
                "team": "orders"}}}]}},
            [{"namespaceSelector": {"matchLabels": {"team": "orders"}}}],
        ),
    ],
    ids=["mtls", "scram", "anonymous", "plaintext", "plaintext-clientFrom", "kafkaFrom"],
)  # fmt: skip
def test_network_policy_of_the_kafka_port(values: dict[str, Any], peers: list[Any]) -> None:
    assert kafka_rule(values)["from"] == peers


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"kafka": {"port": 0}}, "/kafka/port"),
        ({"kafka": {"port": 70000}}, "/kafka/port"),
        ({"kafka": {"port": "9093"}}, "/kafka/port"),
        ({"kafka": {"securityProtocol": "TLS"}}, "/kafka/securityProtocol"),
        ({"kafka": {"securityProtocol": "ssl"}}, "/kafka/securityProtocol"),
        ({"kafka": {"enabled": "yes"}}, "/kafka/enabled"),
        ({"kafka": {"prot": 9093}}, "prot"),
        ({"networkPolicy": {"kafkaFrom": "everyone"}}, "/networkPolicy/kafkaFrom"),
    ],
    ids=["zero", "too-high", "string", "unknown-protocol", "lower-case", "bool", "typo", "peers"],
)
def test_schema_refuses_bad_kafka_values(values: dict[str, Any], named: str) -> None:
    assert named in chart.template_error(values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"kafka": {"port": 9092}}, "kafka.port (9092) is already brokers.port"),
        ({"kafka": {"port": 9091}}, "kafka.port (9091) is already tls.internalPort"),
        ({"kafka": {"port": 9404}}, "kafka.port (9404) is already metrics.brokerPort"),
        (
            {"kafka": {"port": 9000}, "brokers": {"port": 9000}},
            "kafka.port (9000) is already brokers.port",
        ),
        (
            {"tls": {"enabled": False}, "kafka": {"securityProtocol": "SSL"}},
            "kafka.securityProtocol SSL needs tls.enabled",
        ),
        (
            {"tls": {"enabled": False}, "kafka": {"securityProtocol": "SASL_SSL"}},
            "kafka.securityProtocol SASL_SSL needs tls.enabled",
        ),
    ],
    ids=["grpc-port", "internal-port", "metrics-port", "moved-grpc-port", "ssl", "sasl-ssl"],
)
def test_templates_refuse_impossible_kafka_listeners(values: dict[str, Any], message: str) -> None:
    assert message in chart.template_error(values)


def test_the_same_port_is_fine_when_its_owner_is_off() -> None:
    # tls.internalPort is free without TLS; the Kafka listener may take it.
    p = props({"tls": {"enabled": False}, "kafka": {"port": 9091}})
    assert p["kafka.listeners"] == "KAFKA://0.0.0.0:9091"
    # And a disabled Kafka listener's port is not checked at all.
    assert "kafka.listeners" not in props({"kafka": {"enabled": False, "port": 9092}})


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"tls": {"enabled": False}},
        {"tls": {"clientAuthentication": "scram-sha-512"}},
        {"kafka": {"port": 19093}, "networkPolicy": {"kafkaFrom": [{"namespaceSelector": {}}]}},
    ],
    ids=["default", "plaintext", "scram", "custom"],
)
def test_every_object_validates_with_the_kafka_listener(values: dict[str, Any]) -> None:
    problems: list[str] = []
    for obj in chart.render(values):
        if chart.knows_kind(obj):
            label = f"{obj['kind']}/{obj['metadata']['name']}"
            problems += [f"{label}: {e}" for e in chart.k8s_errors(obj)]
    assert problems == []


# -- NOTES.txt -------------------------------------------------------------------------------


def render_notes(values: dict[str, Any], tmp_path: Path) -> str:
    """NOTES.txt as `helm install` prints it: `helm template` skips NOTES.txt, so a copy
    of the chart renders it through ``tpl`` into a ConfigMap."""
    helm = chart.require_helm()
    copy = tmp_path / "chart"
    shutil.copytree(chart.CHART_DIR, copy)
    shutil.copy(copy / "templates" / "NOTES.txt", copy / "notes.txt")
    (copy / "templates" / "notes-for-test.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n"
        '  notes: |\n    {{- tpl (.Files.Get "notes.txt") . | nindent 4 }}\n'
    )
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [helm, "template", chart.RELEASE, str(copy), "--namespace", chart.NAMESPACE,
         "-f", str(tmp_path / "values.yaml"), "--show-only", "templates/notes-for-test.yaml"],
        capture_output=True, text=True, timeout=chart.HELM_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes: str = yaml.safe_load(done.stdout)["data"]["notes"]
    return notes


def test_notes_print_the_kafka_bootstrap(tmp_path: Path) -> None:
    notes = render_notes({}, tmp_path / "default")
    assert f"{BOOTSTRAP}.{DOMAIN}:9093" in notes
    assert "Kafka listener (SSL)" in notes
    assert "ssl.certificate.location=user.crt" in notes
    scram = render_notes({"tls": {"clientAuthentication": "scram-sha-512"}}, tmp_path / "scram")
    assert "Kafka listener (SASL_SSL)" in scram and "sasl.mechanisms=SCRAM-SHA-512" in scram
    off = render_notes({"kafka": {"enabled": False}}, tmp_path / "off")
    assert ":9093" not in off and "Kafka listener" not in off
