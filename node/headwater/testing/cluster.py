"""A real Headwater cluster for tests: ZooKeeper plus N broker processes on 127.0.0.1.

grpclib ships ``ChannelFor`` and kazoo a harness with ``expire_session()``;
this is Headwater's.  Brokers are real ``headwater broker``
processes, each in its own process group, so the faults a test injects are
the real ones: ``kill`` is SIGKILL, ``pause``/``resume`` are SIGSTOP/SIGCONT,
``stop`` is SIGTERM (a graceful, controlled shutdown), and ``expire_session``
really expires the broker's ZooKeeper session (the broker is started with a
test hook that does so on SIGUSR1).

``Cluster`` never leaves processes behind: ``close()`` (also on ``__exit__``
and at interpreter exit) SIGKILLs every process group it started.

Thread safety: one thread owns a ``Cluster``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from headwater.coordination import session
from headwater.coordination.store import ZkStore
from headwater.testing.zookeeper import ZooKeeperServer, free_port

_LIVE: weakref.WeakSet[Cluster] = weakref.WeakSet()

DEFAULT_OVERRIDES: Mapping[str, str] = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
    "controller.socket.timeout.ms": "5000",
    "log.retention.check.interval.ms": "60000",
    "auto.leader.rebalance.enable": "false",
}
"""Settings that keep failure detection fast in tests (Kafka's defaults are minutes)."""

KAFKA_LISTENER = "KAFKA"
"""The name of the Kafka-protocol listener ``Cluster(kafka_listener=True)`` gives brokers."""


def _wait(
    predicate: Callable[[], bool], *, timeout_s: float, what: str, progress: bool = False
) -> None:
    deadline = time.monotonic() + timeout_s
    next_note = time.monotonic() + 5.0
    while not predicate():
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        if progress and now >= next_note:
            print(f"headwater: still waiting for {what}...", file=sys.stderr, flush=True)
            next_note = now + 5.0
        time.sleep(0.05)


class BrokerProcess:
    """One broker process and where it keeps its things.

    ``ports`` maps each listener name to its port (named listeners); ``port`` is the first
    listener's, the one clients and the health probe use.
    """

    def __init__(
        self,
        broker_id: int,
        *,
        port: int,
        data_dir: Path,
        ports: Mapping[str, int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.port = port
        self.ports: dict[str, int] = dict(ports or {})
        self.data_dir = data_dir
        self.log_dir = data_dir / "logs"
        self.log_path = data_dir / "broker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def address_of(self, listener: str) -> str:
        """``127.0.0.1:<port>`` of a named listener."""
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def broker_command(
    broker_id: int,
    *,
    port: int,
    log_dir: Path,
    zookeeper_connect: str,
    overrides: Mapping[str, str],
    listeners: Mapping[str, int] | None = None,
    protocols: Mapping[str, str] | None = None,
    kafka_port: int | None = None,
) -> list[str]:
    """The command line of one test broker (``listeners``: name -> port, ``protocols``:
    name -> security protocol; default one PLAINTEXT listener on ``port``;
    ``kafka_port``: a PLAINTEXT Kafka-protocol listener named KAFKA there)."""
    named: dict[str, str] = {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    if listeners:
        named = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
            "listener.security.protocol.map": ",".join(
                f"{n}:{(protocols or {}).get(n, n)}" for n in listeners
            ),
        }
    settings = {
        **DEFAULT_OVERRIDES,
        **overrides,
        "broker.id": str(broker_id),
        **named,
        "log.dirs": str(log_dir),
        "zookeeper.connect": zookeeper_connect,
    }
    if kafka_port is not None:
        settings["kafka.listeners"] = f"{KAFKA_LISTENER}://127.0.0.1:{kafka_port}"
        protocol_map = settings.get("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")
        if KAFKA_LISTENER not in {entry.split(":")[0] for entry in protocol_map.split(",")}:
            protocol_map += f",{KAFKA_LISTENER}:PLAINTEXT"
        settings["listener.security.protocol.map"] = protocol_map
    cmd = [sys.executable, "-m", "headwater.cli.main", "broker", "--test-hooks"]
    for key, value in settings.items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


def broker_environment() -> dict[str, str]:
    """The parent's environment without HEADWATER_* settings (they would override ours)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}


def is_healthy(
    address: str, *, timeout_s: float = 1.0, credentials: grpc.ChannelCredentials | None = None
) -> bool:
    """True when the broker's gRPC health service reports SERVING (over TLS with
    ``credentials``)."""
    try:
        with (
            grpc.secure_channel(address, credentials)
            if credentials is not None
            else grpc.insecure_channel(address)
        ) as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
            )
    except grpc.RpcError:
        return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


class Cluster:
    """ZooKeeper + ``brokers`` broker processes; see the module docstring.

    ``overrides`` apply to every broker (Kafka config names, e.g.
    ``{"min.insync.replicas": "2"}``), ``broker_overrides`` to one broker each; pass
    ``zookeeper="host:port"`` to use an external ensemble (a fresh chroot is used
    either way).

    Named listeners: ``listeners={"CLIENT": "SSL", "INTERNAL": "SSL"}`` gives every
    broker one port per listener (the first is the clients' and the health probe's,
    :attr:`bootstrap`; :meth:`bootstrap_for` names another) and the protocol map; the
    TLS settings go in ``overrides`` and ``probe_credentials`` are the health probe's
    (a client certificate when the first listener requires one).

    ``kafka_listener=True`` gives every broker a PLAINTEXT Kafka-protocol listener too
    (:attr:`kafka_ports`, :attr:`kafka_bootstrap`); a ``kafka.listeners`` of its own in
    ``broker_overrides`` is the other way, for other protocols.
    """

    def __init__(
        self,
        *,
        brokers: int = 1,
        data_dir: Path | None = None,
        zookeeper: str | None = None,
        overrides: Mapping[str, str] | None = None,
        start_timeout_s: float = 60.0,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
        listeners: Mapping[str, str] | None = None,
        probe_credentials: grpc.ChannelCredentials | None = None,
        kafka_listener: bool = False,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="headwater-cluster-")
            data_dir = Path(self._tmp.name)
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.broker_overrides = {b: dict(o) for b, o in (broker_overrides or {}).items()}
        self.listeners = dict(listeners or {})
        self.probe_credentials = probe_credentials
        self.start_timeout_s = start_timeout_s
        self._external_zookeeper = zookeeper
        self.zookeeper_server: ZooKeeperServer | None = None
        self.chroot = f"/headwater-test-{uuid.uuid4().hex[:10]}"
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(brokers):
            ports = {name: free_port() for name in self.listeners}
            self.brokers[i] = BrokerProcess(
                i,
                port=next(iter(ports.values())) if ports else free_port(),
                data_dir=self.data_dir / f"broker-{i}",
                ports=ports,
            )
        self.kafka_ports: dict[int, int] = (
            {i: free_port() for i in self.brokers} if kafka_listener else {}
        )
        """broker id -> its Kafka-protocol port (``kafka_listener=True``)."""
        self._zk: ZkStore | None = None

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def zookeeper_hosts(self) -> str:
        if self._external_zookeeper is not None:
            return self._external_zookeeper
        if self.zookeeper_server is None:
            raise RuntimeError("the cluster is not started")
        return self.zookeeper_server.connect_string

    @property
    def zookeeper_connect(self) -> str:
        """``zookeeper.connect`` of the brokers, chroot included."""
        return self.zookeeper_hosts + self.chroot

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the brokers, for clients."""
        return ",".join(b.address for b in self.brokers.values())

    @property
    def kafka_bootstrap(self) -> str:
        """``host:port,...`` of the brokers' Kafka-protocol listeners, for Kafka clients."""
        if not self.kafka_ports:
            raise RuntimeError("the cluster has no Kafka listener: Cluster(kafka_listener=True)")
        return ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports.values())

    def bootstrap_for(self, listener: str) -> str:
        """``host:port,...`` of the brokers' named listener."""
        return ",".join(b.address_of(listener) for b in self.brokers.values())

    def start(self) -> Cluster:
        _LIVE.add(self)
        try:
            if self._external_zookeeper is None:
                self.zookeeper_server = ZooKeeperServer(self.data_dir / "zookeeper")
                self.zookeeper_server.start()
            for broker_id in self.brokers:
                self.start_broker(broker_id, wait=False)
            for broker_id in self.brokers:
                self.wait_until_ready(broker_id)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill every process this cluster started. Idempotent."""
        for broker in self.brokers.values():
            self._kill_group(broker, signal.SIGKILL)
            self._reap(broker)
        if self._zk is not None:
            with contextlib.suppress(Exception):
                session.close(self._zk.client)
            self._zk = None
        if self.zookeeper_server is not None:
            self.zookeeper_server.stop()
            self.zookeeper_server = None
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.cleanup()
            self._tmp = None
        _LIVE.discard(self)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- one broker -----------------------------------------------------------------------

    def start_broker(self, broker_id: int, *, wait: bool = True) -> None:
        broker = self.brokers[broker_id]
        if broker.running:
            return
        broker.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = broker_command(
            broker_id,
            port=broker.port,
            log_dir=broker.log_dir,
            zookeeper_connect=self.zookeeper_connect,
            overrides={**self.overrides, **self.broker_overrides.get(broker_id, {})},
            listeners=broker.ports or None,
            protocols=self.listeners,
            kafka_port=self.kafka_ports.get(broker_id),
        )
        with open(broker.log_path, "ab") as log:
            broker.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=broker_environment(),
            )
        broker.pid = broker.process.pid
        if wait:
            self.wait_until_ready(broker_id)

    def add_broker(self, *, wait: bool = True) -> int:
        """Start one more broker (the next id) with the cluster's settings; return its id.

        It holds no replica until something moves some there (a rebalance).
        """
        broker_id = max(self.brokers, default=-1) + 1
        self.brokers[broker_id] = BrokerProcess(
            broker_id, port=free_port(), data_dir=self.data_dir / f"broker-{broker_id}"
        )
        self.start_broker(broker_id, wait=wait)
        return broker_id

    def remove_broker(self, broker_id: int, *, timeout_s: float = 60.0) -> None:
        """Stop the broker gracefully, wait until its registration is gone, and forget it.

        Decommissioning: drain it first (``Admin.plan_drain`` then
        ``execute_reassignment``), or its replicas are left on a missing broker.
        """
        self.stop(broker_id, timeout_s=timeout_s)
        _wait(
            lambda: self.zk.get_broker(broker_id) is None,
            timeout_s=timeout_s,
            what=f"broker {broker_id} to deregister",
        )
        del self.brokers[broker_id]

    def wait_until_ready(self, broker_id: int, *, progress: bool = False) -> None:
        """Wait until the broker is registered in ZooKeeper and its health is SERVING."""
        broker = self.brokers[broker_id]

        def ready() -> bool:
            if not broker.running:
                code = broker.process.returncode if broker.process is not None else "?"
                raise RuntimeError(
                    f"broker {broker_id} exited (code {code}); log tail:\n{broker.log_tail()}"
                )
            return (
                is_healthy(broker.address, credentials=self.probe_credentials)
                and self.zk.get_broker(broker_id) is not None
            )

        try:
            _wait(
                ready,
                timeout_s=self.start_timeout_s,
                what=f"broker {broker_id} to be ready",
                progress=progress,
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; log tail:\n{broker.log_tail()}") from None

    def _kill_group(self, broker: BrokerProcess, sig: signal.Signals) -> None:
        if broker.process is not None and broker.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(broker.process.pid, sig)

    def _reap(self, broker: BrokerProcess, timeout_s: float = 10.0) -> int | None:
        proc = broker.process
        if proc is None:
            return None
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait(timeout=10)
        broker.process = None
        return code

    def kill(self, broker_id: int) -> None:
        """SIGKILL the broker (no controlled shutdown, no clean log close)."""
        broker = self.brokers[broker_id]
        self._kill_group(broker, signal.SIGCONT)
        self._kill_group(broker, signal.SIGKILL)
        self._reap(broker)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the broker hangs; its ZooKeeper session expires after the timeout."""
        self._kill_group(self.brokers[broker_id], signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self._kill_group(self.brokers[broker_id], signal.SIGCONT)

    def stop(self, broker_id: int, *, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (graceful, controlled shutdown) and wait; returns the exit code."""
        broker = self.brokers[broker_id]
        self._kill_group(broker, signal.SIGTERM)
        return self._reap(broker, timeout_s)

    def restart(self, broker_id: int, *, graceful: bool = True) -> None:
        if graceful:
            self.stop(broker_id)
        else:
            self.kill(broker_id)
        self.start_broker(broker_id)

    def expire_session(self, broker_id: int, *, timeout_s: float = 30.0) -> None:
        """Expire the broker's ZooKeeper session; return once it has registered again."""
        before = self.zk.get_broker(broker_id)
        old_epoch = before.epoch if before is not None else None
        self._kill_group(self.brokers[broker_id], signal.SIGUSR1)

        def reregistered() -> bool:
            now = self.zk.get_broker(broker_id)
            return now is not None and now.epoch != old_epoch

        _wait(reregistered, timeout_s=timeout_s, what=f"broker {broker_id} to re-register")

    # -- cluster state ----------------------------------------------------------------------

    @property
    def zk(self) -> ZkStore:
        """A ZooKeeper client on the cluster's chroot (for inspection in tests)."""
        if self._zk is None:
            self._zk = ZkStore(session.connect(self.zookeeper_connect, session_timeout_ms=10000))
        return self._zk

    def controller_id(self) -> int | None:
        return self.zk.get_controller_id()

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The partition's leader according to ZooKeeper (None: none or unknown)."""
        state = self.zk.get_partition_state(topic, partition)
        if state is None or state.leader < 0:
            return None
        return state.leader

    def isr_for(self, topic: str, partition: int) -> tuple[int, ...]:
        state = self.zk.get_partition_state(topic, partition)
        return state.isr if state is not None else ()

    def live_broker_ids(self) -> list[int]:
        return sorted(self.zk.get_brokers())

    def wait_for(
        self, predicate: Callable[[], bool], *, timeout_s: float = 30.0, what: str = "condition"
    ) -> None:
        """Poll ``predicate`` every 50 ms until true (TimeoutError naming ``what`` if not)."""
        _wait(predicate, timeout_s=timeout_s, what=what)


@atexit.register
def _close_all() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.close()
