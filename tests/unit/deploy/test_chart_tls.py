"""The chart's security: TLS listeners from each certificate source, the operator as a super
user, User RBAC, and NetworkPolicies.

With ``tls.enabled`` the rendered server.properties has Kafka's listener keys (INTERNAL SSL
with client certificates, CLIENT SSL or SASL_SSL per ``tls.clientAuthentication``), the
PEM keystore and truststore at the paths where the brokers' Secret is mounted, the
principal mapping, the authorizer and ``super.users`` naming the certificates' CNs.  The
generated source renders a CA and certificates that really chain (checked with
``cryptography``), with every broker DNS name; cert-manager renders Issuers and
Certificates; an existing Secret renders none and is mounted.  The operator reaches the
INTERNAL listener with its own certificate.  Every object validates against the
Kubernetes schemas (cert-manager's kinds, whose CRDs we don't ship, by their fields).
``tls.enabled=false`` keeps today's single PLAINTEXT listener.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from tests.unit.deploy import chart

TLS = {"tls": {"enabled": True}}
HEADLESS = "hw-headwater-broker-headless"


def props(values: dict[str, Any]) -> dict[str, str]:
    return chart.parse_properties(chart.broker_properties(chart.render(values)))


def secret_data(objs: list[chart.Obj], name: str) -> dict[str, bytes]:
    secret = chart.one(objs, "Secret", name)
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def tls_secrets(objs: list[chart.Obj]) -> list[chart.Obj]:
    """Secrets other than the ZooKeeper digest password's (test_chart_zookeeper_acl.py)."""
    return [s for s in chart.find(objs, "Secret") if not s["metadata"]["name"].endswith("-digest")]


def operator_container(objs: list[chart.Obj]) -> chart.Obj:
    (deployment,) = chart.component(objs, "Deployment", "operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_tls_off_renders_one_plaintext_listener() -> None:
    objs = chart.render({"tls": {"enabled": False}})
    p = chart.parse_properties(chart.broker_properties(objs))
    assert p["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    # The Kafka listener (test_chart_kafka.py) is PLAINTEXT too: only its name is mapped.
    assert p.pop("listener.security.protocol.map") == "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT"
    assert not any(k.startswith(("ssl.", "listener.", "super.users", "authorizer")) for k in p)
    assert tls_secrets(objs) == []
    container = chart.broker_container(objs)
    assert container["readinessProbe"]["grpc"] == {"port": 9092}
    env = {e["name"] for e in operator_container(objs)["env"]}
    assert "HEADWATER_SECURITY_PROTOCOL" not in env


def test_tls_listeners_use_kafkas_keys() -> None:
    objs = chart.render(TLS)
    p = chart.parse_properties(chart.broker_properties(objs))
    assert p["listeners"] == "INTERNAL://0.0.0.0:9091,CLIENT://0.0.0.0:9092"
    env = chart.broker_env(objs, hostname="hw-headwater-broker-1")
    host = f"hw-headwater-broker-1.{HEADLESS}.headwater.svc.cluster.local"
    assert chart.expand_env(p["advertised.listeners"], env) == (
        f"INTERNAL://{host}:9091,CLIENT://{host}:9092"
    )
    # (and KAFKA, the Kafka-protocol listener: test_chart_kafka.py)
    assert p["listener.security.protocol.map"] == "INTERNAL:SSL,CLIENT:SSL,KAFKA:SSL"
    assert p["inter.broker.listener.name"] == "INTERNAL"
    # The controller uses the inter-broker listener (Kafka refuses the same name twice).
    assert "control.plane.listener.name" not in p
    assert p["ssl.keystore.type"] == p["ssl.truststore.type"] == "PEM"
    assert p["listener.name.internal.ssl.client.auth"] == "required"
    assert p["listener.name.client.ssl.client.auth"] == "required"
    assert p["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert p["super.users"] == "User:hw-headwater-broker;User:hw-headwater-operator"
    assert p["allow.everyone.if.no.acl.found"] == "false"
    # The keystore and truststore are files of the mounted brokers' Secret.
    container = chart.broker_container(objs)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    pod = chart.broker_statefulset(objs)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret = chart.one(objs, "Secret", volumes["tls"]["secret"]["secretName"])
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        directory, _, file = p[key].rpartition("/")
        assert directory == mounts["tls"] and file in secret["data"], key
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert (ports["internal"], ports["client"]) == (9091, 9092)
    # The kubelet's gRPC probe cannot speak TLS: the probe script does, on INTERNAL.
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["python", "/opt/headwater-probe/broker-ready.py"]
    assert probe[2:] == ["9091", f".{HEADLESS}.headwater.svc.cluster.local"]
    script = chart.one(objs, "ConfigMap", volumes["ready-probe"]["configMap"]["name"])
    assert "ssl_target_name_override" in script["data"]["broker-ready.py"]
    for service in ("hw-headwater-bootstrap", HEADLESS):
        ports = {p["name"]: p["port"] for p in chart.one(objs, "Service", service)["spec"]["ports"]}
        assert ports["internal"] == 9091


@pytest.mark.parametrize(
    ("auth", "protocol", "client_auth"),
    [("tls", "SSL", "required"), ("scram-sha-512", "SASL_SSL", "none"), ("none", "SSL", "none")],
)
def test_client_listener_authentication(auth: str, protocol: str, client_auth: str) -> None:
    p = props({"tls": {"enabled": True, "clientAuthentication": auth}})
    assert p["listener.security.protocol.map"] == f"INTERNAL:SSL,CLIENT:{protocol},KAFKA:{protocol}"
    assert p["listener.name.client.ssl.client.auth"] == client_auth
    assert p["listener.name.internal.ssl.client.auth"] == "required"
    mechanisms = p.get("listener.name.client.sasl.enabled.mechanisms")
    assert mechanisms == ("SCRAM-SHA-512" if protocol == "SASL_SSL" else None)


def test_authorization_settings() -> None:
    p = props({**TLS, "authorization": {"superUsers": ["User:admin"]}})
    assert p["super.users"].split(";") == [
        "User:hw-headwater-broker",
        "User:hw-headwater-operator",
        "User:admin",
    ]
    off = props({**TLS, "authorization": {"enabled": False}})
    assert "authorizer.class.name" not in off and "super.users" not in off
    # brokers.config still wins over what the chart computes.
    mine = props({**TLS, "brokers": {"config": {"allow.everyone.if.no.acl.found": True}}})
    assert mine["allow.everyone.if.no.acl.found"] == "true"


def load_cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_generated_certificates_chain_to_the_generated_ca() -> None:
    objs = chart.render(TLS)
    ca = secret_data(objs, "hw-headwater-ca")
    broker = secret_data(objs, "hw-headwater-broker-tls")
    operator = secret_data(objs, "hw-headwater-operator-tls")
    ca_cert = load_cert(ca["tls.crt"])
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for data, cn in ((broker, "hw-headwater-broker"), (operator, "hw-headwater-operator")):
        cert = load_cert(data["tls.crt"])
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == cn
        assert data["ca.crt"] == ca["tls.crt"]
        public = ca_cert.public_key()
        assert isinstance(public, rsa.RSAPublicKey)
        assert cert.signature_hash_algorithm is not None
        public.verify(
            cert.signature,
            cert.tbs_certificate_bytes,
            padding.PKCS1v15(),
            cert.signature_hash_algorithm,
        )  # raises if the CA did not sign it
        key = serialization.load_pem_private_key(data["tls.key"], password=None)
        assert key.public_key().public_numbers() == cert.public_key().public_numbers()  # type: ignore[union-attr]
        assert cert.not_valid_after_utc > datetime.datetime.now(datetime.UTC)
    # Kafka's PEM keystore: the key, then the chain.
    assert broker["tls-combined.pem"] == broker["tls.key"] + broker["tls.crt"]
    names = load_cert(broker["tls.crt"]).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    dns = set(names.value.get_values_for_type(x509.DNSName))
    assert f"*.{HEADLESS}.headwater.svc.cluster.local" in dns
    assert "hw-headwater-bootstrap.headwater.svc.cluster.local" in dns


def test_operator_is_a_super_user_on_the_internal_listener() -> None:
    objs = chart.render(TLS)
    container = operator_container(objs)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HEADWATER_BOOTSTRAP"] == "hw-headwater-bootstrap.headwater.svc.cluster.local:9091"
    assert env["HEADWATER_SECURITY_PROTOCOL"] == "SSL"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["HEADWATER_SSL_CERTFILE"] == f"{mounts['tls']}/tls.crt"
    assert env["HEADWATER_SSL_KEYFILE"] == f"{mounts['tls']}/tls.key"
    assert env["HEADWATER_SSL_CAFILE"] == f"{mounts['tls']}/ca.crt"
    assert env["HEADWATER_CLIENTS_CA_DIR"] == mounts["clients-ca"]
    assert "User:hw-headwater-operator" in env["HEADWATER_SUPER_USERS"].split(";")
    (deployment,) = chart.component(objs, "Deployment", "operator")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "hw-headwater-operator-tls"
    assert volumes["clients-ca"]["secret"]["secretName"] == "hw-headwater-ca"


def test_cert_manager_source() -> None:
    objs = chart.render({"tls": {"enabled": True, "certManager": {"enabled": True}}})
    assert tls_secrets(objs) == []
    issuers = {o["metadata"]["name"]: o["spec"] for o in chart.find(objs, "Issuer")}
    assert issuers == {"hw-headwater-selfsigned": {"selfSigned": {}}, "hw-headwater-ca": {
        "ca": {"secretName": "hw-headwater-ca"}}}  # fmt: skip
    certs = {o["metadata"]["name"]: o["spec"] for o in chart.find(objs, "Certificate")}
    assert certs["hw-headwater-ca"]["isCA"] is True
    broker = certs["hw-headwater-broker-tls"]
    assert broker["secretName"] == "hw-headwater-broker-tls"
    assert broker["commonName"] == "hw-headwater-broker"
    assert f"*.{HEADLESS}.headwater.svc.cluster.local" in broker["dnsNames"]
    assert broker["additionalOutputFormats"] == [{"type": "CombinedPEM"}]
    assert broker["issuerRef"]["name"] == "hw-headwater-ca"
    assert {"server auth", "client auth"} <= set(broker["usages"])
    assert certs["hw-headwater-operator-tls"]["commonName"] == "hw-headwater-operator"
    # A given issuer: no Issuers of ours, and no clients CA for Users unless named.
    given = {"name": "corp", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    manager = {"enabled": True, "issuerRef": given}
    objs = chart.render({"tls": {"enabled": True, "certManager": manager}})
    assert chart.find(objs, "Issuer") == []
    assert {c["spec"]["issuerRef"]["name"] for c in chart.find(objs, "Certificate")} == {"corp"}
    env = {e["name"] for e in operator_container(objs)["env"]}
    assert "HEADWATER_CLIENTS_CA_DIR" not in env


def test_existing_secret_source() -> None:
    secrets = {"existingSecret": "my-brokers", "operatorExistingSecret": "my-operator"}
    values = {"tls": {"enabled": True, "clientsCaSecret": "my-ca", **secrets}}
    objs = chart.render(values)
    assert tls_secrets(objs) == [] and chart.find(objs, "Certificate") == []
    pod = chart.broker_statefulset(objs)["spec"]["template"]["spec"]
    assert {v["name"]: v for v in pod["volumes"]}["tls"]["secret"]["secretName"] == "my-brokers"
    (deployment,) = chart.component(objs, "Deployment", "operator")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "my-operator"
    assert volumes["clients-ca"]["secret"]["secretName"] == "my-ca"


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"tls": {"enabled": True, "existingSecret": "x"}}, "tls.operatorExistingSecret"),
        ({"tls": {"enabled": True, "internalPort": 9092}}, "tls.internalPort"),
        (
            {"tls": {"enabled": True, "existingSecret": "x", "operatorExistingSecret": "op",
                     "certManager": {"enabled": True}}},
            "choose one",
        ),
    ],
    ids=["no-operator-secret", "same-port", "two-sources"],
)  # fmt: skip
def test_templates_refuse_impossible_tls(values: dict[str, Any], named: str) -> None:
    assert named in chart.template_error(values)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"tls": {"enabled": "yes"}}, "tls/enabled"),
        ({"tls": {"clientAuthentication": "plain"}}, "tls/clientAuthentication"),
        ({"tls": {"certManager": {"issuerRef": {"kind": "Vault"}}}}, "issuerRef/kind"),
        ({"authorization": {"superUsers": ["admin"]}}, "superUsers/0"),
        ({"networkPolicy": {"enabeld": True}}, "enabeld"),
    ],
    ids=["bool", "client-auth", "issuer-kind", "principal", "typo"],
)
def test_schema_refuses_bad_security_values(values: dict[str, Any], named: str) -> None:
    assert named in chart.template_error(values)


def cert_manager_problems(obj: chart.Obj) -> list[str]:
    spec = obj["spec"]
    problems = []
    if obj["apiVersion"] != "cert-manager.io/v1":
        problems.append("apiVersion")
    if obj["kind"] == "Certificate":
        for key in ("secretName", "issuerRef"):
            if key not in spec:
                problems.append(f"no {key}")
        allowed = {"secretName", "issuerRef", "commonName", "dnsNames", "usages", "duration",
                   "renewBefore", "privateKey", "additionalOutputFormats", "isCA"}  # fmt: skip
        problems += [f"unknown field {k}" for k in set(spec) - allowed]
    elif not ({"selfSigned", "ca"} & set(spec)):
        problems.append("an Issuer needs selfSigned or ca")
    return problems


@pytest.mark.parametrize(
    "values",
    [
        TLS,
        {"tls": {"enabled": True, "clientAuthentication": "scram-sha-512"}},
        {"tls": {"enabled": True, "certManager": {"enabled": True}}},
        {"tls": {"enabled": True, "existingSecret": "a", "operatorExistingSecret": "b"}},
        {**TLS, "networkPolicy": {"clientFrom": [{"podSelector": {"matchLabels": {"a": "b"}}}],
                                  "metricsFrom": [{"namespaceSelector": {}}]}},
    ],
    ids=["generated", "scram", "cert-manager", "existing", "policies"],
)  # fmt: skip
def test_every_tls_object_validates(values: dict[str, Any]) -> None:
    problems: list[str] = []
    for obj in chart.render(values):
        label = f"{obj['kind']}/{obj['metadata']['name']}"
        if chart.knows_kind(obj):
            problems += [f"{label}: {e}" for e in chart.k8s_errors(obj)]
        elif obj["kind"] in ("Certificate", "Issuer"):
            problems += [f"{label}: {e}" for e in cert_manager_problems(obj)]
    assert problems == []


def policy_for(objs: list[chart.Obj], component: str) -> chart.Obj:
    (policy,) = chart.component(objs, "NetworkPolicy", component)
    return policy


def peers(rule: chart.Obj) -> set[str]:
    out = set()
    for peer in rule.get("from", []):
        labels = peer.get("podSelector", {}).get("matchLabels", {})
        out.add(labels.get("app.kubernetes.io/component", "<any pod>"))
    return out


def rule_for(policy: chart.Obj, port: int) -> chart.Obj:
    (rule,) = [r for r in policy["spec"]["ingress"] if {p["port"] for p in r["ports"]} >= {port}]
    return rule


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_network_policies(tls: bool) -> None:
    objs = chart.render({"tls": {"enabled": tls}})
    zk = policy_for(objs, "zookeeper")
    assert peers(rule_for(zk, 2181)) == {"broker", "zookeeper"}
    assert peers(rule_for(zk, 2888)) == {"zookeeper"}
    brokers = policy_for(objs, "broker")
    client = rule_for(brokers, 9092)
    assert "<any pod>" in peers(client)
    if tls:
        assert peers(rule_for(brokers, 9091)) == {"broker", "operator"}
    else:
        assert peers(client) == {"<any pod>", "broker", "operator"}
    assert "from" not in rule_for(brokers, 9404)
    operator = policy_for(objs, "operator")
    assert {p["port"] for r in operator["spec"]["ingress"] for p in r["ports"]} == {9405, 8080}
    # Every policy selects pods of this release.
    for policy in chart.find(objs, "NetworkPolicy"):
        labels = policy["spec"]["podSelector"]["matchLabels"]
        assert labels["app.kubernetes.io/instance"] == "hw"


def test_network_policies_follow_their_values() -> None:
    custom = [{"podSelector": {"matchLabels": {"role": "client"}}}]
    objs = chart.render({**TLS, "networkPolicy": {"clientFrom": custom}})
    assert rule_for(policy_for(objs, "broker"), 9092)["from"] == custom
    external = chart.render({"zookeeper": {"external": "zk:2181"}})
    assert chart.component(external, "NetworkPolicy", "zookeeper") == []
    assert chart.find(chart.render({"networkPolicy": {"enabled": False}}), "NetworkPolicy") == []


def test_operator_may_manage_users_and_their_secrets_only() -> None:
    objs = chart.render()
    role = chart.one(objs, "Role", "hw-headwater-operator-users")
    rules = {(g, r): set(rule["verbs"]) for rule in role["rules"]
             for g in rule["apiGroups"] for r in rule["resources"]}  # fmt: skip
    assert {"get", "list", "watch", "patch"} <= rules[("headwater.io", "users")]
    assert "patch" in rules[("headwater.io", "users/status")]
    # Secrets by name: no list or watch of the namespace's Secrets.
    assert rules[("", "secrets")] == {"get", "create", "patch", "update", "delete"}
    binding = chart.one(objs, "RoleBinding", "hw-headwater-operator-users")
    assert binding["subjects"][0]["name"] == "hw-headwater-operator"
