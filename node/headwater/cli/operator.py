"""``headwater operator``: run the Kubernetes operator (kopf) with ``kopf run``'s flags.

The operator is an optional extra (``headwater[operator]``), so kopf and the
``headwater_operator`` package are imported only when the command runs; the
rest of the CLI works without them.  Settings not on the command line come
from the environment the Helm chart sets (``HEADWATER_BOOTSTRAP``,
``HEADWATER_BROKER_STATEFULSET``, ``POD_NAMESPACE``, ``POD_NAME``,
``HEADWATER_OPERATOR_METRICS_PORT``).  With ``--peering`` and no
``--priority``, each replica takes a distinct priority derived from its pod
name, since kopf pauses every replica when priorities tie.

A bare ``kopf.OperatorRegistry()`` has none of the login handlers kopf's
default registry adds, so :func:`_register_login` adds one: the official
``kubernetes`` client (part of the extra) loads the pod's service account or,
outside a cluster, the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``), the
same order the roll engine's client uses.  Without that client, kopf's own
minimal service-account and kubeconfig readers stand in.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
from typing import Any

from headwater.cli._common import CliError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "operator",
        help="run the Kubernetes operator (Topics, safe rolling restarts)",
        description="Run the kopf operator; flags follow `kopf run`.",
    )
    p.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="namespace to serve (repeatable; default: $POD_NAMESPACE)",
    )
    p.add_argument("-A", "--all-namespaces", action="store_true", help="serve every namespace")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--standalone", action="store_true", help="no peering with other replicas")
    mode.add_argument("--peering", metavar="NAME", help="the KopfPeering object to elect through")
    p.add_argument("--priority", type=int, help="peering priority (default: from $POD_NAME)")
    p.add_argument("--liveness", metavar="URL", help="serve kopf's liveness probe at URL")
    p.add_argument("--bootstrap", help="brokers to connect to (default: $HEADWATER_BOOTSTRAP)")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--debug", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        # Imported by name: the core package does not depend on the operator extra.
        kopf: Any = importlib.import_module("kopf")
        handlers: Any = importlib.import_module("headwater_operator.handlers")
        op_config: Any = importlib.import_module("headwater_operator.config")
    except ModuleNotFoundError as exc:
        raise CliError(
            f"the operator needs the [operator] extra ({exc.name} is missing): "
            "pip install 'headwater[operator]'"
        ) from None
    try:
        config = op_config.OperatorConfig.from_env(os.environ)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    namespaces = list(args.namespace) or ([config.namespace] if not args.all_namespaces else [])
    if len(namespaces) == 1:
        config = dataclasses.replace(config, namespace=namespaces[0])
    if args.bootstrap:
        config = dataclasses.replace(config, bootstrap=args.bootstrap)
    priority = args.priority
    if priority is None and args.peering:
        priority = op_config.peering_priority(config.pod_name)
    kopf.configure(verbose=args.verbose, debug=args.debug, quiet=args.quiet)
    registry = kopf.OperatorRegistry()
    _register_login(kopf, registry)
    handlers.register(registry, config)
    kopf.run(
        registry=registry,
        standalone=True if args.standalone else None,
        peering_name=args.peering,
        priority=priority,
        liveness_endpoint=args.liveness,
        clusterwide=bool(args.all_namespaces),
        namespaces=[] if args.all_namespaces else namespaces,
    )
    return 0


def _register_login(kopf: Any, registry: Any) -> None:
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
