"""A Kafka connection's SASL authentication (headwater.kafka.authentication): every edge of
the transition table, and every request refused before authentication."""

from __future__ import annotations

import pytest
from headwater.kafka.authentication import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    TRANSITIONS,
    Action,
    AuthState,
    ConnectionAuth,
    IllegalAuthTransition,
    StepOutcome,
    Verdict,
)
from headwater.security.principal import KafkaPrincipal

PRODUCE, FETCH, METADATA = 0, 1, 3
ALICE = KafkaPrincipal.user("alice")
MECH = "SCRAM-SHA-512"


def at(state: AuthState, *, reauth_ms: int = 0) -> ConnectionAuth:
    """A connection brought to ``state`` along legal edges only."""
    auth = ConnectionAuth(reauth_ms=reauth_ms)
    if state is AuthState.HANDSHAKE_OR_VERSIONS:
        return auth
    if state is AuthState.FAILED:
        auth.admit(PRODUCE, 9, now_ms=0)
        return auth
    if state is AuthState.HANDSHAKE:
        auth.admit(API_VERSIONS, 3, now_ms=0)
        return auth
    raw = state is AuthState.RAW_AUTHENTICATE
    assert auth.admit(SASL_HANDSHAKE, 0 if raw else 1, now_ms=0).action is Action.HANDSHAKE
    assert auth.handshake_answered(version=0 if raw else 1, mechanism=MECH, supported=True)
    if state in (AuthState.AUTHENTICATE, AuthState.RAW_AUTHENTICATE):
        return auth
    assert auth.step_answered(StepOutcome.CHALLENGE, now_ms=0, api_version=2) == ""
    assert auth.step_answered(StepOutcome.COMPLETE, now_ms=0, api_version=2, principal=ALICE) == ""
    if state is AuthState.AUTHENTICATED:
        return auth
    assert auth.admit(SASL_HANDSHAKE, 1, now_ms=0).action is Action.HANDSHAKE
    assert auth.handshake_answered(version=1, mechanism=MECH, supported=True)
    assert auth.state is AuthState.REAUTHENTICATE
    return auth


@pytest.mark.parametrize("state", list(AuthState))
def test_at_reaches_every_state(state: AuthState) -> None:
    assert at(state).state is state


def test_the_table_refuses_an_edge_it_does_not_have() -> None:
    with pytest.raises(IllegalAuthTransition, match="HANDSHAKE_OR_VERSIONS -> AUTHENTICATED"):
        AuthState.HANDSHAKE_OR_VERSIONS.transition_to(AuthState.AUTHENTICATED)
    assert TRANSITIONS[AuthState.FAILED] == frozenset()


# -- HANDSHAKE_OR_VERSIONS -------------------------------------------------------------------


def test_api_versions_first_moves_to_handshake() -> None:
    auth = at(AuthState.HANDSHAKE_OR_VERSIONS)
    assert auth.admit(API_VERSIONS, 3, now_ms=0) == Verdict(Action.SERVE)
    assert auth.state is AuthState.HANDSHAKE


def test_api_versions_at_an_unknown_version_is_answered_and_keeps_the_state() -> None:
    auth = at(AuthState.HANDSHAKE_OR_VERSIONS)
    assert auth.admit(API_VERSIONS, 9, now_ms=0, version_fallback=True).action is Action.SERVE
    assert auth.state is AuthState.HANDSHAKE_OR_VERSIONS


@pytest.mark.parametrize(
    ("version", "target"), [(1, AuthState.AUTHENTICATE), (0, AuthState.RAW_AUTHENTICATE)]
)
def test_handshake_first_moves_to_authenticate(version: int, target: AuthState) -> None:
    auth = at(AuthState.HANDSHAKE_OR_VERSIONS)
    assert auth.admit(SASL_HANDSHAKE, version, now_ms=0).action is Action.HANDSHAKE
    assert auth.handshake_answered(version=version, mechanism=MECH, supported=True)
    assert (auth.state, auth.mechanism) == (target, MECH)
    assert auth.admit_raw_token() is (target is AuthState.RAW_AUTHENTICATE)


@pytest.mark.parametrize("state", [AuthState.HANDSHAKE_OR_VERSIONS, AuthState.HANDSHAKE])
@pytest.mark.parametrize("api_key", [PRODUCE, FETCH, METADATA, SASL_AUTHENTICATE])
def test_any_other_request_before_the_handshake_closes(state: AuthState, api_key: int) -> None:
    auth = at(state)
    verdict = auth.admit(api_key, 1, now_ms=0)
    assert verdict.action is Action.CLOSE
    assert "before SASL authentication" in verdict.reason
    assert auth.state is AuthState.FAILED


def test_an_unsupported_mechanism_closes() -> None:
    auth = at(AuthState.HANDSHAKE_OR_VERSIONS)
    auth.admit(SASL_HANDSHAKE, 1, now_ms=0)
    assert not auth.handshake_answered(version=1, mechanism="PLAIN", supported=False)
    assert auth.state is AuthState.FAILED


# -- HANDSHAKE --------------------------------------------------------------------------------


def test_api_versions_is_served_once() -> None:
    auth = at(AuthState.HANDSHAKE)
    assert auth.admit(API_VERSIONS, 3, now_ms=0).action is Action.CLOSE
    assert auth.state is AuthState.FAILED


@pytest.mark.parametrize(
    ("version", "target"), [(1, AuthState.AUTHENTICATE), (0, AuthState.RAW_AUTHENTICATE)]
)
def test_handshake_after_api_versions_moves_to_authenticate(
    version: int, target: AuthState
) -> None:
    auth = at(AuthState.HANDSHAKE)
    assert auth.admit(SASL_HANDSHAKE, version, now_ms=0).action is Action.HANDSHAKE
    assert auth.handshake_answered(version=version, mechanism=MECH, supported=True)
    assert auth.state is target


def test_an_unsupported_mechanism_after_api_versions_closes() -> None:
    auth = at(AuthState.HANDSHAKE)
    assert not auth.handshake_answered(version=1, mechanism="GSSAPI", supported=False)
    assert auth.state is AuthState.FAILED


# -- AUTHENTICATE and RAW_AUTHENTICATE ---------------------------------------------------------


def test_a_challenge_keeps_authenticating() -> None:
    auth = at(AuthState.AUTHENTICATE)
    assert auth.admit(SASL_AUTHENTICATE, 2, now_ms=0).action is Action.AUTHENTICATE
    assert auth.step_answered(StepOutcome.CHALLENGE, now_ms=0, api_version=2) == ""
    assert auth.state is AuthState.AUTHENTICATE
    assert auth.principal is None


@pytest.mark.parametrize("state", [AuthState.AUTHENTICATE, AuthState.RAW_AUTHENTICATE])
def test_a_completed_exchange_authenticates(state: AuthState) -> None:
    auth = at(state)
    assert auth.step_answered(StepOutcome.COMPLETE, now_ms=5, principal=ALICE) == ""
    assert (auth.state, auth.principal, auth.session_expires_ms) == (
        AuthState.AUTHENTICATED,
        ALICE,
        None,
    )


@pytest.mark.parametrize("state", [AuthState.AUTHENTICATE, AuthState.RAW_AUTHENTICATE])
def test_a_failed_step_closes(state: AuthState) -> None:
    auth = at(state)
    assert auth.step_answered(StepOutcome.FAILED, now_ms=0) == "SASL authentication failed"
    assert auth.state is AuthState.FAILED
    assert auth.principal is None


@pytest.mark.parametrize("api_key", [PRODUCE, METADATA, API_VERSIONS, SASL_HANDSHAKE])
def test_any_other_request_during_the_exchange_closes(api_key: int) -> None:
    auth = at(AuthState.AUTHENTICATE)
    assert auth.admit(api_key, 1, now_ms=0).action is Action.CLOSE
    assert auth.state is AuthState.FAILED


def test_a_kafka_request_where_a_raw_token_was_expected_closes() -> None:
    auth = at(AuthState.RAW_AUTHENTICATE)
    assert auth.admit(SASL_AUTHENTICATE, 1, now_ms=0).action is Action.CLOSE
    assert auth.state is AuthState.FAILED


def test_a_completed_step_needs_its_principal() -> None:
    with pytest.raises(ValueError, match="principal"):
        at(AuthState.AUTHENTICATE).step_answered(StepOutcome.COMPLETE, now_ms=0)


# -- AUTHENTICATED ----------------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [PRODUCE, FETCH, METADATA, API_VERSIONS])
def test_an_authenticated_connection_is_served(api_key: int) -> None:
    auth = at(AuthState.AUTHENTICATED)
    assert auth.admit(api_key, 1, now_ms=10**12) == Verdict(Action.SERVE)
    assert auth.state is AuthState.AUTHENTICATED


def test_the_session_lasts_connections_max_reauth_ms() -> None:
    auth = at(AuthState.AUTHENTICATE, reauth_ms=1000)
    auth.step_answered(StepOutcome.COMPLETE, now_ms=100, api_version=2, principal=ALICE)
    assert auth.session_expires_ms == 1100
    assert auth.session_lifetime_ms(100) == 1000
    assert auth.admit(PRODUCE, 9, now_ms=1099).action is Action.SERVE


def test_a_request_after_the_session_expired_closes() -> None:
    auth = at(AuthState.AUTHENTICATE, reauth_ms=1000)
    auth.step_answered(StepOutcome.COMPLETE, now_ms=0, api_version=2, principal=ALICE)
    verdict = auth.admit(PRODUCE, 9, now_ms=1000)
    assert verdict.action is Action.CLOSE and "expired" in verdict.reason
    assert auth.state is AuthState.FAILED


def test_without_reauth_the_lifetime_is_zero() -> None:
    assert at(AuthState.AUTHENTICATED).session_lifetime_ms(0) == 0


def test_a_v1_handshake_after_authentication_starts_a_reauthentication() -> None:
    auth = at(AuthState.AUTHENTICATED, reauth_ms=1000)
    assert auth.admit(SASL_HANDSHAKE, 1, now_ms=5000).action is Action.HANDSHAKE
    assert auth.handshake_answered(version=1, mechanism=MECH, supported=True)
    assert auth.state is AuthState.REAUTHENTICATE


def test_a_reauthentication_must_keep_the_mechanism() -> None:
    auth = at(AuthState.AUTHENTICATED)
    assert not auth.handshake_answered(version=1, mechanism="SCRAM-SHA-256", supported=True)
    assert auth.state is AuthState.FAILED


@pytest.mark.parametrize(("api_key", "version"), [(SASL_AUTHENTICATE, 2), (SASL_HANDSHAKE, 0)])
def test_sasl_requests_an_authenticated_connection_cannot_take_are_illegal(
    api_key: int, version: int
) -> None:
    auth = at(AuthState.AUTHENTICATED)
    assert auth.admit(api_key, version, now_ms=0).action is Action.ILLEGAL_SASL_STATE
    assert auth.state is AuthState.AUTHENTICATED


def test_a_client_that_authenticated_with_v0_cannot_reauthenticate() -> None:
    auth = at(AuthState.AUTHENTICATE)
    auth.step_answered(StepOutcome.COMPLETE, now_ms=0, api_version=0, principal=ALICE)
    assert auth.admit(SASL_HANDSHAKE, 1, now_ms=0).action is Action.ILLEGAL_SASL_STATE


# -- REAUTHENTICATE ---------------------------------------------------------------------------


def test_a_reauthentication_as_the_same_principal_renews_the_session() -> None:
    auth = at(AuthState.REAUTHENTICATE, reauth_ms=1000)
    assert auth.admit(SASL_AUTHENTICATE, 2, now_ms=900).action is Action.AUTHENTICATE
    assert (
        auth.step_answered(StepOutcome.COMPLETE, now_ms=900, api_version=2, principal=ALICE) == ""
    )
    assert (auth.state, auth.session_expires_ms) == (AuthState.AUTHENTICATED, 1900)


def test_a_reauthentication_as_another_principal_closes() -> None:
    auth = at(AuthState.REAUTHENTICATE)
    reason = auth.step_answered(
        StepOutcome.COMPLETE, now_ms=0, api_version=2, principal=KafkaPrincipal.user("mallory")
    )
    assert "keeps its principal" in reason
    assert (auth.state, auth.principal) == (AuthState.FAILED, ALICE)


def test_a_failed_reauthentication_closes() -> None:
    auth = at(AuthState.REAUTHENTICATE)
    assert auth.step_answered(StepOutcome.FAILED, now_ms=0, api_version=2)
    assert auth.state is AuthState.FAILED


def test_any_other_request_during_a_reauthentication_closes() -> None:
    auth = at(AuthState.REAUTHENTICATE)
    assert auth.admit(PRODUCE, 9, now_ms=0).action is Action.CLOSE
    assert auth.state is AuthState.FAILED


# -- FAILED -----------------------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [API_VERSIONS, SASL_HANDSHAKE, PRODUCE])
def test_a_failed_connection_serves_nothing(api_key: int) -> None:
    auth = at(AuthState.FAILED)
    assert auth.admit(api_key, 1, now_ms=0).action is Action.CLOSE
    assert auth.state is AuthState.FAILED
