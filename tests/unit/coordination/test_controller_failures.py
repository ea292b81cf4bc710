"""How a failure while handling an event is answered: a fenced write deposes the
controller, known errors go back as they are, ZooKeeper errors become NotControllerError,
anything else an UnknownServerError that is logged with its traceback."""

from __future__ import annotations

from headwater import errors
from headwater.coordination.controller_state import on_failure
from kazoo.exceptions import ConnectionLoss


def test_a_stale_epoch_resigns() -> None:
    outcome = on_failure(errors.StaleControllerEpochError("epoch 3 is stale"))
    assert outcome.resign and not outcome.unexpected
    assert isinstance(outcome.error, errors.NotControllerError)
    assert "epoch 3 is stale" in str(outcome.error)


def test_a_headwater_error_is_answered_as_is() -> None:
    error = errors.BrokerNotAvailableError("broker 9 is not registered")
    outcome = on_failure(error)
    assert outcome.error is error
    assert not outcome.resign and not outcome.unexpected


def test_a_zookeeper_error_means_not_controller() -> None:
    outcome = on_failure(ConnectionLoss())
    assert isinstance(outcome.error, errors.NotControllerError)
    assert "ZooKeeper unavailable" in str(outcome.error)
    assert not outcome.resign and not outcome.unexpected


def test_anything_else_is_unexpected() -> None:
    outcome = on_failure(KeyError("x"))
    assert isinstance(outcome.error, errors.UnknownServerError)
    assert outcome.unexpected and not outcome.resign
