"""The Dockerfile and the chart agree, and the image stays small and unprivileged.

No container engine runs here, so the image is not built; instead the Dockerfile is read:
two stages (a wheel built in the first, installed offline in the final one, which has no
build tools), the non-root uid the chart's securityContext runs as, `headwater` as the
entrypoint the chart's commands assume, the ports the chart names, OCI labels; and
.dockerignore keeps local environments, caches and test data out of the build context.
"""

from __future__ import annotations

import re

from tests.unit.deploy import chart

DOCKERFILE = (chart.REPO / "Dockerfile").read_text(encoding="utf-8")
DOCKERIGNORE = (chart.REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()


def final_stage() -> str:
    return DOCKERFILE.split("\nFROM ")[-1]


def test_two_stages_and_an_offline_install() -> None:
    froms = re.findall(r"^FROM (.+)$", DOCKERFILE, flags=re.MULTILINE)
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE
    assert "pip wheel" in DOCKERFILE
    final = final_stage()
    assert "--no-index" in final
    assert '"headwater[operator,console]"' in final  # the console runs from the same image
    assert not re.search(r"apt-get install|build-essential|gcc|COPY \. ", final)


def test_the_build_stage_can_compile_the_native_codec() -> None:
    """headwater.records._speedups is a C extension; slim Python images have no compiler."""
    build = DOCKERFILE.split("\nFROM ")[1]
    assert re.search(r"apt-get install[^\n]*\bgcc\b", build)
    assert build.index("gcc") < build.index("pip wheel")


def test_user_and_entrypoint_match_the_chart() -> None:
    final = final_stage()
    (user,) = re.findall(r"^USER (\d+):(\d+)$", final, flags=re.MULTILINE)
    objs = chart.render({"brokers": {"rack": {"enabled": True}}})
    for _, pod in chart.pod_templates(objs):
        for container in pod.get("initContainers", []) + pod["containers"]:
            if container["image"].startswith("headwater:"):
                assert pod["securityContext"]["runAsUser"] == int(user[0])
                assert pod["securityContext"]["runAsGroup"] == int(user[1])
                assert container["command"][0] in ("headwater", "python")
    assert 'ENTRYPOINT ["headwater"]' in final


def test_exposed_ports_are_the_charts() -> None:
    (exposed,) = re.findall(r"^EXPOSE (.+)$", final_stage(), flags=re.MULTILINE)
    objs = chart.render({"tls": {"enabled": True}})  # every port: TLS adds INTERNAL
    ports = {
        p["containerPort"]
        for workload, pod in chart.pod_templates(objs)
        if not workload["metadata"]["name"].endswith("zookeeper")
        for c in pod["containers"]
        for p in c["ports"]
    }
    assert {int(p) for p in exposed.split()} == ports


def test_oci_labels() -> None:
    for label in ("title", "description", "version", "licenses"):
        assert f"org.opencontainers.image.{label}=" in DOCKERFILE


def test_dockerignore_keeps_the_context_small() -> None:
    for pattern in (".git", ".venv", ".tools", "**/__pycache__", ".mypy_cache", "tests"):
        assert pattern in DOCKERIGNORE
    # ...but not what the wheel is built from.
    for needed in ("node", "operator", "spark", "pyproject.toml", "README.md"):
        assert needed not in DOCKERIGNORE
