"""Run the operator in this process on its own kopf registry: what ``headwater operator``
calls once it has read its flags and the environment (:mod:`headwater.cli.operator`).

A bare ``kopf.OperatorRegistry()`` has none of the login handlers kopf's default
registry adds, so :func:`_register_login` adds one: the official ``kubernetes`` client
(part of the extra) loads the pod's service account or, outside a cluster, the
kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``), the same order the roll engine's
client uses.  Without that client, kopf's own minimal service-account and kubeconfig
readers stand in.
"""

from __future__ import annotations

import importlib
from typing import Any

import kopf

from headwater_operator import handlers
from headwater_operator.config import OperatorConfig
from headwater_operator.vault import OperatorVault


def run_operator(
    config: OperatorConfig,
    *,
    namespaces: list[str],
    clusterwide: bool,
    standalone: bool,
    peering_name: str | None,
    priority: int | None,
    liveness_endpoint: str | None,
    verbose: bool,
    debug: bool,
    quiet: bool,
) -> None:
    """Serve ``namespaces`` (or every namespace when ``clusterwide``) until stopped."""
    kopf.configure(verbose=verbose, debug=debug, quiet=quiet)
    registry = kopf.OperatorRegistry()
    _register_login(registry)
    handlers.register(registry, config)
    kopf.run(
        registry=registry,
        standalone=True if standalone else None,
        peering_name=peering_name,
        priority=priority,
        liveness_endpoint=liveness_endpoint,
        clusterwide=clusterwide,
        namespaces=[] if clusterwide else namespaces,
        vault=OperatorVault(),
    )


def _register_login(registry: kopf.OperatorRegistry) -> None:
    """Authenticate to the API server: in-cluster service account first, then kubeconfig."""
    try:
        importlib.import_module("kubernetes.config")
        has_client = True
    except ModuleNotFoundError:
        has_client = False

    def login(**kw: Any) -> Any:
        if has_client:
            return kopf.login_via_client(**kw)
        return kopf.login_with_service_account(**kw) or kopf.login_with_kubeconfig(**kw)

    kopf.on.login(registry=registry)(login)
