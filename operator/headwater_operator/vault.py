"""kopf's credentials vault, closed for good when the operator exits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import aiohttp
import kopf
from kopf._cogs.structs.credentials import KubeContext, Vault, VaultKey

_T = TypeVar("_T")


class OperatorVault(Vault):
    """kopf's ``Vault`` whose ``close()`` is final.

    kopf closes the API sessions cached in its vault once its own tasks are done, but
    keeps the credentials, and ``extended()`` makes a new session for a credential
    whose session was closed.  A task that outlives the operator then opens a session
    that nothing closes: kopf 1.45's initial resource scan
    (``kopf._cogs.clients.scanning``) runs its requests as tasks of
    ``asyncio.as_completed``, which a stop during the scan leaves running.

    After ``close()`` every API context this vault makes holds an already closed
    session: kopf reads the failed request as a lost login, drops the credential and
    waits for a re-login, and at exit it cancels the waiting task.
    """

    def __init__(self) -> None:
        super().__init__()
        self._closed_session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        session = aiohttp.ClientSession()
        await session.close()
        self._closed_session = session  # before the caches go: no new session from now on
        await super().close()

    async def extended(
        self, factory: Callable[[KubeContext], _T], purpose: str | None = None
    ) -> AsyncIterator[tuple[VaultKey, KubeContext, _T]]:
        def make(info: KubeContext) -> _T:
            if self._closed_session is None:
                return factory(info)
            closed = kopf.AiohttpSession(
                server=info.server,
                default_namespace=info.default_namespace,
                aiohttp_session=self._closed_session,
            )
            return factory(closed)

        purpose = purpose if purpose is not None else repr(factory)
        async for key, info, obj in super().extended(make, purpose):
            yield key, info, obj
