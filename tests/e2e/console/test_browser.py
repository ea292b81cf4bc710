"""The console in a real browser: Debian's Chromium, headless, driven by selenium.

A user creates a topic, produces from the message page and browses it, watches a group's
lag rise and fall (while a consumer runs) on its page without reloading (htmx polling under
the Content-Security-Policy), resets the group's offsets with a dry run first, and is
refused a change by a read-only console; on a cluster with ACLs, a user is refused
creating an ACL the console's principal may not create, and the page says why.  The
browser's console must log no CSP violation or script error.  Screenshots of each page are kept in
``test-artifacts/console/`` (gitignored).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from headwater.client import Admin, Consumer, Producer, TopicPartition
from headwater.console.server import RunningConsole
from headwater.security.acls import AclOperation, ResourceType
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.e2e.console.web import serve_console
from tests.e2e.security.acl_helpers import INTER_BROKER, acl, secured_cluster

# About a minute on 2 idle cores (a two-broker cluster, Chromium, several live refreshes):
# over make test's budget for one test, so `make console-browser` runs it.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "console"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 30


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    assert not missing, f"{missing} missing: run scripts/install-system-deps.sh"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shot(browser: WebDriver) -> Callable[[str], None]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> None:
        browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))

    return take


def fill(browser: WebDriver, form: str, **fields: str) -> None:
    for name, value in fields.items():
        element = browser.find_element(By.CSS_SELECTOR, f"#{form} [name={name}]")
        if element.tag_name == "select":
            Select(element).select_by_value(value)
        else:
            element.clear()
            element.send_keys(value)


def submit(browser: WebDriver, form: str, button: str = "") -> None:
    """Submit ``form`` and wait for the next page's message."""
    selector = f"#{form} button[type=submit]" + (f"[value={button}]" if button else "")
    old = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, selector).click()
    WebDriverWait(browser, WAIT_S).until(staleness_of(old))
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#message, #error")
    )


def message(browser: WebDriver) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, "#message, #error").text)


def text_of(browser: WebDriver, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def wait_until(browser: WebDriver, done: Callable[[WebDriver], bool]) -> None:
    """Wait for ``done`` (htmx may swap the live section between a find and a read)."""
    WebDriverWait(
        browser, WAIT_S, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    ).until(done)


def wait_text(browser: WebDriver, css: str, expected: str) -> None:
    wait_until(browser, lambda d: text_of(d, css) == expected)


def script_errors(browser: WebDriver) -> list[str]:
    return [
        str(entry["message"])
        for entry in browser.get_log("browser")  # type: ignore[no-untyped-call]
        if entry["level"] == "SEVERE" and "favicon" not in entry["message"]
    ]


def test_a_user_in_the_browser(
    browser: WebDriver, shot: Callable[[str], None], cluster: Cluster, console: RunningConsole
) -> None:
    base = console.url
    topic = f"browser-{uuid.uuid4().hex[:8]}"
    group = f"browser-group-{uuid.uuid4().hex[:8]}"

    browser.get(base + "/cluster")
    assert "racks: r1, r2" in text_of(browser, "main")
    shot("cluster")

    browser.get(base + "/topics")
    fill(browser, "create-topic", name=topic, partitions="1", replication_factor="2")
    submit(browser, "create-topic")
    assert message(browser) == f"Created topic {topic}."
    shot("topics")

    browser.get(f"{base}/topics/{topic}")
    wait_until(browser, lambda d: "offline" not in text_of(d, "#partitions"))
    shot("topic")
    browser.find_element(By.ID, "browse").click()
    fill(browser, "produce", key="user-1", value='{"hello": "browser"}', headers="source: web")
    submit(browser, "produce")
    assert message(browser) == f"Produced to {topic}, partition 0 at offset 0."
    assert '{"hello": "browser"}' in text_of(browser, "#records")
    fill(browser, "browse-form", format="json")
    browser.find_element(By.CSS_SELECTOR, "#browse-form button").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "format=json" in d.current_url)
    assert '"hello": "browser"' in text_of(browser, "#records")
    assert "source: web" in text_of(browser, "#records")
    shot("messages")

    with Producer(cluster.bootstrap, linger_ms=0) as producer:
        for i in range(9):
            producer.send(topic, f"r{i}".encode(), partition=0)
        producer.flush()
    with Consumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 10 and time.monotonic() < deadline:
            seen += len(consumer.poll(1000))
        consumer.commit()

    browser.get(base + "/groups")
    wait_until(browser, lambda d: group in text_of(d, "#groups"))
    browser.find_element(By.LINK_TEXT, group).click()
    assert text_of(browser, "#total-lag") == "0"
    browser.execute_script("window.notReloaded = true")  # type: ignore[no-untyped-call]
    with Producer(cluster.bootstrap, linger_ms=0) as producer:
        for i in range(5):
            producer.send(topic, f"late{i}".encode(), partition=0)
        producer.flush()
    wait_text(browser, "#total-lag", "5")
    assert browser.execute_script("return window.notReloaded") is True  # type: ignore[no-untyped-call]
    shot("group-lag-rising")

    with Consumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        enable_auto_commit=False,
    ) as consumer:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 5 and time.monotonic() < deadline:
            seen += len(consumer.poll(1000))
        consumer.commit()
        wait_text(browser, "#total-lag", "0")  # the lag falls as the consumer commits
        wait_until(browser, lambda d: "No members." not in text_of(d, "#members"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "#lag-chart polyline")) == 2
        shot("group-lag-falling")
    wait_until(browser, lambda d: "State Empty" in text_of(d, "#group-state"))

    fill(browser, "reset-offsets", topic=topic, spec="to-offset", value="3")
    submit(browser, "reset-offsets", "dry-run")
    assert message(browser).startswith(f"Dry run: group {group} would move")
    assert "0 15 3" in text_of(browser, "#plan")
    with Admin(cluster.bootstrap) as admin:
        tp = TopicPartition(topic, 0)
        assert admin.list_consumer_group_offsets(group)[tp].offset == 15
        shot("reset-dry-run")
        submit(browser, "reset-offsets", "execute")
        assert message(browser) == f"Committed new offsets of group {group} on {topic}."
        assert admin.list_consumer_group_offsets(group)[tp].offset == 3
    wait_text(browser, "#total-lag", "12")
    shot("reset-executed")
    assert script_errors(browser) == []

    with serve_console(cluster.bootstrap, read_only=True) as read_only:
        refused = f"refused-{uuid.uuid4().hex[:8]}"
        browser.get(read_only.url + "/topics")
        assert "Read-only console" in text_of(browser, "#read-only")
        fill(browser, "create-topic", name=refused)
        submit(browser, "create-topic")
        assert message(browser) == "The console is read-only: it changes nothing."
        shot("read-only-refused")
    with Admin(cluster.bootstrap) as admin:
        assert refused not in admin.list_topics()


def test_a_change_the_acls_refuse_in_the_browser(
    browser: WebDriver,
    shot: Callable[[str], None],
    zookeeper: ZooKeeperServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The console's principal may describe the cluster (and so list ACLs) but not ALTER
    it: creating an ACL is refused by the broker, and the page says so."""
    describe = acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    browser.get("about:blank")  # the last test's page stops polling its stopped console
    script_errors(browser)  # and what it logged is read and dropped
    with (
        secured_cluster(
            zookeeper.connect_string,
            tmp_path_factory.mktemp("browser-acls"),
            initial=(INTER_BROKER, describe),
        ) as (cluster, writer),
        serve_console(cluster.bootstrap) as console,
    ):
        browser.get(console.url + "/acls")
        assert "DESCRIBE" in text_of(browser, "#acls")
        fill(
            browser,
            "create-acl",
            resource_type="TOPIC",
            resource_name="payments",
            principal="User:mallory",
            operation="WRITE",
        )
        submit(browser, "create-acl")
        assert message(browser).startswith(
            "Refused by the cluster's ACLs: CLUSTER_AUTHORIZATION_FAILED"
        ), message(browser)
        shot("acl-refused")
        assert not [b for b in writer.all() if b.pattern.name == "payments"]
        # The refusal is the page's own status (403), which the browser logs as such.
        refusal = f"{console.url}/acls - Failed to load resource: the server responded with a "
        refusal += "status of 403"
        assert [e for e in script_errors(browser) if not e.startswith(refusal)] == []
