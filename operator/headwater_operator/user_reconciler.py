"""The User reconciler: one User resource in, the cluster and its Secret changed, a status out.

Like :mod:`topic_reconciler`, this knows nothing of kopf: it reads the resource as a
plain mapping, talks to the brokers through :class:`UserAdmin` (ACLs and SCRAM
credentials, over :class:`headwater.Admin` in :mod:`users_kube`), to Kubernetes Secrets
through :class:`SecretStore`, and signs client certificates with a :class:`ClientsCa`;
it returns an :class:`Outcome` that the kopf layer (:mod:`user_handlers`) applies.
What to do is decided by the pure :func:`users.plan`; this module only gathers the
actual state and runs the actions in the plan's order.

Ownership of Secrets: the operator writes only Secrets labelled
``headwater.io/user=<name>``; a Secret of the user's name without the label is someone
else's and the User is refused (``SecretConflict``), never overwritten.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from headwater import errors

from headwater_operator import conditions, users
from headwater_operator.users import (
    AclRule,
    Action,
    ActualUser,
    Authentication,
    CertificateState,
    Reason,
    Refusal,
)

READY = "Ready"
USER_LABEL = "headwater.io/user"


Event = conditions.Event
Outcome = conditions.Outcome[Action, Refusal]


class UserResource(NamedTuple):
    namespace: str
    name: str
    uid: str
    generation: int | None
    spec: Mapping[str, Any]
    status: Mapping[str, Any]

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> UserResource:
        meta = body.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            generation=meta.get("generation"),
            spec=body.get("spec") or {},
            status=body.get("status") or {},
        )


class UserAdmin(Protocol):
    """The brokers' side of a user; raises :class:`headwater.errors.HeadwaterError`."""

    def acls_of(self, principal: str) -> frozenset[AclRule]: ...
    def create_acls(self, principal: str, rules: tuple[AclRule, ...]) -> None: ...
    def delete_acls(self, principal: str, rules: tuple[AclRule, ...]) -> None: ...
    def has_scram(self, user: str) -> bool: ...
    def upsert_scram(self, user: str, password: str, iterations: int) -> None: ...
    def delete_scram(self, user: str) -> None: ...
    def quotas_of(self, user: str) -> tuple[tuple[str, float], ...]: ...
    def alter_quotas(
        self, user: str, values: tuple[tuple[str, float], ...], removed: tuple[str, ...]
    ) -> None: ...


class SecretStore(Protocol):
    """Kubernetes Secrets of one namespace (string values; the store encodes them)."""

    def read(self, name: str) -> tuple[dict[str, str], dict[str, str]] | None:
        """(labels, data) of the Secret, or None if there is none."""
        ...

    def write(self, name: str, data: Mapping[str, str], *, owner: UserResource) -> None:
        """Create or replace the Secret, labelled as the user's and owned by the User."""
        ...

    def delete(self, name: str) -> bool: ...


class ClientsCa(Protocol):
    """Signs and checks Users' client certificates (subject ``CN=<user>``)."""

    def issue(self, user: str) -> dict[str, str]:
        """Secret data: ``ca.crt`` (to trust the brokers), ``user.crt``, ``user.key`` and
        ``user-keystore.pem`` (the two as Kafka's PEM keystore)."""
        ...

    def state(self, user: str, data: Mapping[str, str]) -> CertificateState: ...


class KubernetesError(Exception):
    """A Secret could not be read or written (the API server's answer in the message)."""


class UserReconciler:
    """Reconciles Users of one cluster; one reconcile per user name at a time."""

    def __init__(
        self,
        admin: UserAdmin,
        secrets: SecretStore,
        *,
        clients_ca: ClientsCa | None,
        reserved: tuple[str, ...] = (),
        new_password: Callable[[], str],
        ca_pem: str = "",
    ) -> None:
        """``ca_pem``: the CA(s) the brokers' certificates chain to, given to SCRAM users as
        ``ca.crt`` (TLS users get it from the clients CA)."""
        self.ca_pem = ca_pem
        self.admin = admin
        self.secrets = secrets
        self.clients_ca = clients_ca
        self.reserved = reserved
        self.new_password = new_password
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, user: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(user, threading.Lock())

    def _actual(
        self, user: str, secret: tuple[dict[str, str], dict[str, str]] | None
    ) -> ActualUser:
        data = secret[1] if secret is not None else {}
        certificate = CertificateState.MISSING
        if "user.crt" in data:
            certificate = (
                self.clients_ca.state(user, data)
                if self.clients_ca is not None
                else CertificateState.RENEW
            )
        return ActualUser(
            acls=self.admin.acls_of(f"User:{user}"),
            has_scram=self.admin.has_scram(user),
            secret_password=data.get("password"),
            certificate=certificate,
            quotas=self.admin.quotas_of(user),
        )

    def _read_own_secret(self, name: str) -> tuple[dict[str, str], dict[str, str]] | Refusal | None:
        secret = self.secrets.read(name)
        if secret is not None and secret[0].get(USER_LABEL) != name:
            return Refusal(
                Reason.SECRET_CONFLICT,
                f"Secret {name} exists and is not this User's (no label {USER_LABEL}={name}); "
                "it was left alone",
            )
        return secret

    def reconcile(self, resource: UserResource, *, now: str) -> Outcome:
        desired = users.parse_spec(resource.name, resource.spec, reserved=self.reserved)
        if isinstance(desired, Refusal):
            return self._refused(resource, desired, now=now)
        if desired.authentication is Authentication.TLS and self.clients_ca is None:
            return self._refused(
                resource,
                Refusal(
                    Reason.NO_CLIENTS_CA,
                    "tls authentication needs the clients CA (HEADWATER_CLIENTS_CA_DIR, the "
                    "chart's tls.clientsCaSecret); none is configured",
                ),
                now=now,
            )
        with self._lock(desired.name):
            done: list[Action] = []
            try:
                secret = self._read_own_secret(desired.name)
                if isinstance(secret, Refusal):
                    return self._refused(resource, secret, now=now)
                actual = self._actual(desired.name, secret)
                planned = users.plan(desired, actual, new_password=self.new_password())
                for action in planned:
                    self._apply(action, resource)
                    done.append(action)
            except errors.HeadwaterError as exc:
                out = self._refused(resource, Refusal(Reason.BROKER_ERROR, str(exc)), now=now)
                retriable = exc.retriable or isinstance(exc, errors.NetworkError)
                return out._replace(
                    actions=done, events=self._events(done) + out.events, retriable=retriable
                )
            except KubernetesError as exc:
                out = self._refused(resource, Refusal(Reason.KUBERNETES_ERROR, str(exc)), now=now)
                return out._replace(
                    actions=done, events=self._events(done) + out.events, retriable=True
                )
        status = self._status(
            resource,
            ready=True,
            reason=Reason.RECONCILED,
            message=f"User:{desired.name} is in line with the spec ({len(desired.acls)} ACL(s))",
            now=now,
            secret=desired.name if desired.authentication is not None else None,
        )
        return Outcome(status, self._events(done), done, None)

    def finalize(self, resource: UserResource) -> list[Event]:
        """The User is being deleted: remove its ACLs, SCRAM credential and Secret.

        Raises HeadwaterError or KubernetesError so the caller keeps the finalizer.
        """
        name = resource.name
        with self._lock(name):
            secret = self.secrets.read(name)
            own = secret is not None and secret[0].get(USER_LABEL) == name
            actual = self._actual(name, secret if own else None)
            done = []
            for action in users.plan_delete(name, actual):
                self._apply(action, resource)
                done.append(action)
        return [*self._events(done), Event("Normal", "Deleted", f"User:{name} removed")]

    def _apply(self, action: Action, resource: UserResource) -> None:
        principal = f"User:{action.user}"
        if isinstance(action, users.WriteScramSecret):
            data = {
                "password": action.password,
                "sasl.jaas.config": users.jaas_config(action.user, action.password),
            }
            if self.ca_pem:
                data["ca.crt"] = self.ca_pem
            self.secrets.write(action.user, data, owner=resource)
        elif isinstance(action, users.UpsertScram):
            self.admin.upsert_scram(action.user, action.password, action.iterations)
        elif isinstance(action, users.DeleteScram):
            self.admin.delete_scram(action.user)
        elif isinstance(action, users.IssueCertificate):
            assert self.clients_ca is not None  # refused before planning otherwise
            self.secrets.write(action.user, self.clients_ca.issue(action.user), owner=resource)
        elif isinstance(action, users.DeleteSecret):
            self.secrets.delete(action.user)
        elif isinstance(action, users.CreateAcls):
            self.admin.create_acls(principal, action.rules)
        elif isinstance(action, users.AlterQuotas):
            self.admin.alter_quotas(action.user, action.values, action.removed)
        else:
            self.admin.delete_acls(principal, action.rules)

    @staticmethod
    def _events(done: list[Action]) -> list[Event]:
        return [Event("Normal", type(a).__name__, a.describe()) for a in done]

    def _refused(self, resource: UserResource, refusal: Refusal, *, now: str) -> Outcome:
        old = conditions.find(resource.status.get("conditions"), READY)
        status = self._status(
            resource,
            ready=False,
            reason=refusal.reason,
            message=refusal.message,
            now=now,
            secret=resource.status.get("secret"),
        )
        new = conditions.find(status["conditions"], READY)
        events = (
            [] if conditions.same(old, new) else [Event("Warning", refusal.reason, refusal.message)]
        )
        return Outcome(status, events, [], refusal)

    @staticmethod
    def _status(
        resource: UserResource,
        *,
        ready: bool,
        reason: str,
        message: str,
        now: str,
        secret: str | None,
    ) -> dict[str, Any]:
        status: dict[str, Any] = {
            "conditions": conditions.set_condition(
                resource.status.get("conditions"),
                type_=READY,
                status=ready,
                reason=str(reason),
                message=message,
                now=now,
            ),
            "username": f"User:{resource.name}",
        }
        if resource.generation is not None:
            status["observedGeneration"] = resource.generation
        if secret is not None:
            status["secret"] = secret
        return status
