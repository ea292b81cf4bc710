"""The console's web layer: escaping, security headers, CSRF and read-only refusals.

The cluster here is a stand-in :class:`ClusterView` that returns hostile text and records
every change it is asked for, so a test can show that a refused request changed nothing;
the pages against real brokers are tests/e2e/console.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer
from headwater import errors
from headwater.client import ConsumerRecord, TopicPartition
from headwater.console import app as console_app
from headwater.console import backend, csrf, inputs, offsets
from headwater.console.app import Settings, make_app

EVIL = '<script>alert("x")</script>'
pytestmark = pytest.mark.asyncio

TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')


class StandIn(backend.ClusterView):
    """Pages with hostile names and values; changes recorded in ``changes``."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, Any]] = []

    def close(self) -> None:
        pass

    def topics(self) -> list[backend.TopicRow]:
        return [backend.TopicRow("orders", False, 3, 1, 0, 0)]

    def partition_count(self, name: str) -> int:
        return 2

    def topic(self, name: str) -> backend.TopicPage:
        return backend.TopicPage(
            name,
            False,
            [backend.PartitionRow(0, 1, (1,), (1,), 0, 5, 100)],
            [backend.ConfigRow("cleanup.policy", EVIL, "DYNAMIC_TOPIC_CONFIG", False)],
            "",
        )

    def browse(self, name: str, query: inputs.BrowseQuery) -> backend.Browse:
        record = ConsumerRecord(name, 0, 4, 0, EVIL.encode(), EVIL.encode(), ((EVIL, b"<b>"),))
        return backend.Browse(query, 4, 0, 5, [record])

    def groups(self) -> list[backend.GroupRow]:
        return [backend.GroupRow(EVIL, "Empty", "consumer", "classic", 0)]

    def group(self, gid: str) -> backend.GroupPage:
        lag = offsets.lag_rows({TopicPartition("orders", 0): 1}, {}, {})
        history = [(0, {"total": 1}), (9, {"total": 4, EVIL: 4})]
        return backend.GroupPage(gid, "Empty", "classic", "", 1, "1", [], lag, history)

    def security(self) -> backend.SecurityPage:
        row = backend.AclRow("TOPIC", EVIL, "LITERAL", "User:" + EVIL, "*", "READ", "ALLOW")
        return backend.SecurityPage([row], "", [backend.UserRow(EVIL, "SCRAM-SHA-256")], "")

    def alter_configs(self, name: str, change: inputs.ConfigChange) -> None:
        self.changes.append(("configs", change))

    def delete_group(self, gid: str) -> None:
        self.changes.append(("delete-group", gid))

    def create_topic(self, form: inputs.NewTopicForm) -> None:
        self.changes.append(("create", form))
        if form.name == "secret":
            raise errors.TopicAuthorizationFailedError("topic 'secret'")
        if form.name == "slow":
            raise errors.RequestTimedOutError("no answer in 10000 ms")

    def delete_topic(self, name: str) -> None:
        if name == "buggy":
            raise KeyError("a bug")
        self.changes.append(("delete", name))

    def produce(self, name: str, form: inputs.ProduceForm) -> tuple[int, int]:
        self.changes.append(("produce", form))
        return 0, 5


@pytest_asyncio.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(make_app(StandIn(), Settings()))) as c:
        yield c


async def token_of(client: TestClient[Any, Any], path: str = "/topics") -> str:
    resp = await client.get(path)
    found = TOKEN.search(await resp.text())
    assert found, "the page has no CSRF field"
    return found.group(1)


def changes(client: TestClient[Any, Any]) -> list[tuple[str, Any]]:
    view = client.server.app[console_app.VIEW]  # type: ignore[union-attr]
    assert isinstance(view, StandIn)
    return view.changes


@pytest.mark.parametrize(
    "path",
    ["/topics/orders", "/topics/orders/messages", "/groups", "/group?id=" + EVIL, "/acls"],
)
async def test_hostile_text_is_escaped_on_every_page(
    client: TestClient[Any, Any], path: str
) -> None:
    resp = await client.get(path)
    assert resp.status == 200, await resp.text()
    body = await resp.text()
    assert EVIL not in body
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in body
    assert "<b>" not in body


async def test_every_answer_has_the_security_headers(client: TestClient[Any, Any]) -> None:
    for path in ("/cluster-nope", "/topics", "/static/console.css"):
        resp = await client.get(path)
        csp = resp.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert resp.headers["X-Content-Type-Options"] == "nosniff"


async def test_pages_have_no_inline_script(client: TestClient[Any, Any]) -> None:
    body = await (await client.get("/topics/orders/messages")).text()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", body, re.S)
    assert scripts, "the page loads htmx"
    for attrs, inline in scripts:
        assert 'src="/static/' in attrs and inline == ""
    assert " on" not in re.sub(r">[^<]*<", "><", body).replace(" one", "")  # no on* handlers


async def test_a_form_with_the_token_changes(client: TestClient[Any, Any]) -> None:
    token = await token_of(client)
    resp = await client.post(
        "/topics", data={"csrf_token": token, "name": "new", "partitions": "2"}
    )
    assert resp.status == 200
    assert "Created topic new." in await resp.text()
    assert changes(client) == [("create", inputs.NewTopicForm("new", 2, -1, {}))]


@pytest.mark.parametrize(
    "forge",
    [
        {},
        {"csrf_token": "0" * 64},
        {"csrf_token": csrf.form_token(b"another secret", "c" * 43)},
    ],
)
async def test_a_forged_form_is_refused_and_changes_nothing(
    client: TestClient[Any, Any], forge: dict[str, str]
) -> None:
    await token_of(client)  # the browser has its cookie
    resp = await client.post("/topics", data={"name": "forged", **forge})
    assert resp.status == 403
    assert "Refused: the form" in await resp.text()
    assert changes(client) == []


async def test_a_form_without_the_cookie_is_refused(client: TestClient[Any, Any]) -> None:
    token = await token_of(client)
    client.session.cookie_jar.clear()
    resp = await client.post("/topics", data={"name": "forged", "csrf_token": token})
    assert resp.status == 403
    assert "cookie is missing" in await resp.text()
    assert changes(client) == []


async def test_a_form_from_another_origin_is_refused(client: TestClient[Any, Any]) -> None:
    token = await token_of(client)
    resp = await client.post(
        "/topics",
        data={"name": "x", "csrf_token": token},
        headers={"Origin": "https://evil.example"},
    )
    assert resp.status == 403
    assert "another site (https://evil.example)" in await resp.text()
    assert changes(client) == []


async def test_bad_input_is_a_clear_message_and_changes_nothing(
    client: TestClient[Any, Any],
) -> None:
    token = await token_of(client)
    resp = await client.post("/topics", data={"csrf_token": token, "name": "bad name!"})
    assert resp.status == 400
    body = await resp.text()
    assert "name: &#39;bad name!&#39; has characters a topic name cannot have" in body
    resp = await client.get("/topics/orders/messages?limit=100000")
    assert resp.status == 400
    assert "limit: 100000 is out of range; expected 1 to 500" in await resp.text()
    resp = await client.get("/topics/orders/messages?start=offset&offset=abc")
    assert resp.status == 400
    resp = await client.get("/topics/a%20b")
    assert resp.status == 400
    assert changes(client) == []


async def test_an_acl_refusal_is_shown_as_such(client: TestClient[Any, Any]) -> None:
    token = await token_of(client)
    resp = await client.post("/topics", data={"csrf_token": token, "name": "secret"})
    assert resp.status == 403
    assert "Refused by the cluster&#39;s ACLs: TOPIC_AUTHORIZATION_FAILED" in await resp.text()


async def test_a_cluster_that_does_not_answer_is_said_so(client: TestClient[Any, Any]) -> None:
    token = await token_of(client)
    resp = await client.post("/topics", data={"csrf_token": token, "name": "slow"})
    assert resp.status == 503
    assert "The cluster did not answer in time; try again: REQUEST_TIMED_OUT" in (await resp.text())


async def test_a_bug_is_a_page_with_the_security_headers(
    client: TestClient[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    token = await token_of(client)
    resp = await client.post("/topics/buggy/delete", data={"csrf_token": token, "confirm": "buggy"})
    assert resp.status == 500
    assert "The console failed: KeyError: &#39;a bug&#39;" in await resp.text()
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    assert "console: POST /topics/buggy/delete failed" in caplog.text


async def test_read_only_refuses_every_change() -> None:
    view = StandIn()
    async with TestClient(TestServer(make_app(view, Settings(read_only=True)))) as c:
        token = await token_of(c)
        assert "Read-only console" in await (await c.get("/topics")).text()
        for path, data in [
            ("/topics", {"name": "t"}),
            ("/topics/orders/delete", {"confirm": "orders"}),
            ("/topics/orders/partitions", {"partitions": "9"}),
            ("/topics/orders/messages", {"value": "v"}),
            ("/group/reset", {"group": "g", "topic": "orders", "spec": "to-earliest"}),
            ("/group/delete", {"group": "g", "confirm": "g"}),
            ("/topics/orders/configs", {"set": "retention.ms=1"}),
        ]:
            resp = await c.post(path, data={"csrf_token": token, **data})
            assert resp.status == 403, path
            assert "The console is read-only" in await resp.text()
    assert view.changes == []


async def test_the_group_page_draws_its_lag_as_svg(client: TestClient[Any, Any]) -> None:
    body = await (await client.get("/group?id=g")).text()
    assert '<polyline class="lag series-0" points="0.0,120.0 600.0,0.0"/>' in body
    assert '<polyline class="lag series-1" points="600.0,0.0"/>' in body


async def test_config_changes_and_group_deletion(client: TestClient[Any, Any]) -> None:
    token = await token_of(client)
    resp = await client.post(
        "/topics/orders/configs",
        data={"csrf_token": token, "set": "retention.ms=1000", "delete": "cleanup.policy"},
    )
    assert resp.status == 200
    assert "Topic orders: set retention.ms=1000, deleted cleanup.policy." in await resp.text()
    resp = await client.post("/group/delete", data={"csrf_token": token, "group": "g"})
    assert resp.status == 400
    assert "type the group&#39;s id to delete it" in await resp.text()
    resp = await client.post(
        "/group/delete", data={"csrf_token": token, "group": "g", "confirm": "g"}
    )
    assert "Deleted group g." in await resp.text()
    assert changes(client) == [
        ("configs", inputs.ConfigChange({"retention.ms": "1000"}, ["cleanup.policy"])),
        ("delete-group", "g"),
    ]
