"""The kopf layer of User resources (``users.headwater.io``): reconcile, finalize, status.

Users get their own finalizer, ``headwater.io/user``, not kopf's (one per operator,
``headwater.io/topic``, which the Topic handlers own): kopf adds its finalizer only for
mandatory deletion handlers and timers, so the User handlers have neither and manage
theirs by hand:

* create / update / resume: the reconcile adds ``headwater.io/user`` to the User's
  finalizers (in the same patch as its status), then runs
  :meth:`user_reconciler.UserReconciler.reconcile`; a retriable failure (a broker or the
  API server unreachable) is retried by kopf after 10 s;
* a User marked for deletion still holding ``headwater.io/user`` is seen by an event
  handler (event handlers need no finalizer), which removes the user's ACLs, SCRAM
  credential and Secret, then drops the finalizer.  If that fails, it waits
  :data:`CLEANUP_RETRY_S` and bumps an annotation, whose change is the next event, and
  so the next attempt; the User stays until its credentials are really gone.

There is no resync timer (a timer would make kopf add its own finalizer to Users): a
change made outside Kubernetes is corrected at the User's next change or the
operator's next start (resume).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kopf
from headwater import errors
from headwater.client import Admin

from headwater_operator import conditions, metrics
from headwater_operator.config import USER_FINALIZER, OperatorConfig
from headwater_operator.user_reconciler import (
    ClientsCa,
    KubernetesError,
    SecretStore,
    UserAdmin,
    UserReconciler,
    UserResource,
)

log = logging.getLogger(__name__)

USERS = ("headwater.io", "v1", "users")
CLEANUP_ANNOTATION = "headwater.io/user-cleanup-attempt"
CLEANUP_RETRY_S = 10.0


def _post(body: Any, type_: str, reason: str, message: str) -> None:
    try:
        kopf.event(body, type=type_, reason=reason, message=message[:1024])
    except LookupError:
        log.info("%s %s: %s", type_, reason, message)


def default_clients_ca(config: OperatorConfig) -> ClientsCa | None:
    """The CA of ``HEADWATER_CLIENTS_CA_DIR``, or None (tls Users are then refused)."""
    security = config.security
    if not security.clients_ca_dir:
        return None
    from headwater_operator.users_kube import PemClientsCa

    trust = Path(security.ssl_cafile).read_text() if security.ssl_cafile else ""
    return PemClientsCa(
        security.clients_ca_dir,
        trust_pem=trust,
        validity_days=security.user_cert_validity_days,
    )


def register(
    registry: kopf.OperatorRegistry,
    config: OperatorConfig,
    *,
    user_admin: Callable[[], UserAdmin] | None = None,
    secrets: Callable[[], SecretStore] | None = None,
    clients_ca: Callable[[], ClientsCa | None] | None = None,
    cleanup_retry_s: float = CLEANUP_RETRY_S,
) -> None:
    """Register the User handlers; the factories let tests swap the clients."""
    state: dict[str, UserReconciler] = {}

    def reconciler() -> UserReconciler:
        if "r" not in state:
            from headwater_operator import users_kube

            admin = (
                user_admin()
                if user_admin
                else users_kube.AdminUsers(Admin(config.bootstrap, **config.admin_options()))
            )
            store = secrets() if secrets else users_kube.KubeSecrets(config.namespace)
            ca = clients_ca() if clients_ca else default_clients_ca(config)
            state["r"] = UserReconciler(
                admin,
                store,
                clients_ca=ca,
                reserved=config.security.super_users,
                new_password=users_kube.new_password,
                ca_pem=(
                    Path(config.security.ssl_cafile).read_text()
                    if config.security.ssl_cafile
                    else ""
                ),
            )
        return state["r"]

    def reconcile(**kw: Any) -> None:
        body: Mapping[str, Any] = kw["body"]
        patch: kopf.Patch = kw["patch"]
        meta = body.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return  # the deletion event handler below owns this User now
        finalizers = list(meta.get("finalizers") or [])
        if USER_FINALIZER not in finalizers:
            patch.setdefault("metadata", {})["finalizers"] = [*finalizers, USER_FINALIZER]
        resource = UserResource.from_body(body)
        with metrics.reconcile_timer("User"):
            outcome = reconciler().reconcile(resource, now=conditions.now_rfc3339())
        refused = outcome.refusal.reason if outcome.refusal else None
        metrics.reconciled("User", refused_reason=refused)
        if dict(resource.status) != {**resource.status, **outcome.status}:
            patch.setdefault("status", {}).update(outcome.status)
        for event in outcome.events:
            _post(body, event.type, event.reason, event.message)
        if outcome.retriable and outcome.refusal is not None:
            raise kopf.TemporaryError(outcome.refusal.message, delay=10)

    for decorator in (kopf.on.create, kopf.on.update, kopf.on.resume):
        decorator(*USERS, id="reconcile-user", registry=registry)(reconcile)

    @kopf.on.event(*USERS, id="finalize-user", registry=registry)
    def finalize_user(**kw: Any) -> None:
        body: Mapping[str, Any] = kw["body"]
        patch: kopf.Patch = kw["patch"]
        meta = body.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if (
            kw.get("type") == "DELETED"
            or not meta.get("deletionTimestamp")
            or USER_FINALIZER not in finalizers
        ):
            return
        resource = UserResource.from_body(body)
        try:
            events = reconciler().finalize(resource)
        except (errors.HeadwaterError, KubernetesError) as exc:
            metrics.reconciled("User", error=True)
            _post(body, "Warning", "CleanupFailed", f"cannot remove User:{resource.name}: {exc}")
            time.sleep(cleanup_retry_s)
            attempt = int((meta.get("annotations") or {}).get(CLEANUP_ANNOTATION) or 0) + 1
            patch.setdefault("metadata", {}).setdefault("annotations", {})[CLEANUP_ANNOTATION] = (
                str(attempt)
            )
            return
        for event in events:
            _post(body, event.type, event.reason, event.message)
        patch.setdefault("metadata", {})["finalizers"] = [
            f for f in finalizers if f != USER_FINALIZER
        ]
