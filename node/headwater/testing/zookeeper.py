"""A real standalone ZooKeeper server as a child process, for tests and ``headwater dev``.

Headwater's e2e tests run against the real thing rather than a fake: sessions,
ephemeral znodes, watches and multi-op fencing behave exactly as in production.
The server is started straight from the jars (``ZooKeeperServerMain``) rather
than through ``zkServer.sh`` so that the process we hold is the JVM itself and
stopping it leaves nothing behind.  It runs in its own process group, which is
killed on :meth:`ZooKeeperServer.stop` (and from an ``atexit`` hook as a last
resort).

Where ZooKeeper lives: ``$ZOOKEEPER_HOME`` (a tarball layout with ``lib/*.jar``
or Debian's ``/usr/share/zookeeper``) or, by default, Debian's jars in
``/usr/share/java``.  ``tickTime`` is short (500 ms) so that tests can use
session timeouts of one or two seconds (ZooKeeper bounds them to 2..20 ticks).

Thread safety: one thread owns a server object; ``stop`` is idempotent.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path
from types import TracebackType

_DEBIAN_JARS = Path("/usr/share/java")
_START_TIMEOUT_S = 30.0
_LIVE: weakref.WeakSet[ZooKeeperServer] = weakref.WeakSet()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (see :func:`free_ports`)."""
    (port,) = free_ports(1)
    return port


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1, free right now, all bound at once.

    A port is handed out free and bound later by a child process (a broker, ZooKeeper),
    seconds after. Two races would take it in between, and both are closed here:

    - the kernel's ``bind(0)`` picks among the ephemeral ports, which every outgoing
      connection on the machine also draws its local port from: a client connecting in
      that window could take a broker's port. Ports are drawn below the ephemeral range
      (``net.ipv4.ip_local_port_range``) instead, where only an explicit bind lands;
    - a port handed out here is not handed out again while it is among the last
      :data:`_REMEMBERED` given, so two calls in one test process never collide (a
      cluster's brokers, its ZooKeeper, a broker added later, a test's metrics ports);
      a port drawn twice in one call fails to bind the second time and is skipped.

    Falls back to ``bind(0)`` when the range below the ephemeral ports is too small.
    """
    low, high = _FIXED_PORTS_LOW, _ephemeral_low() - 1
    if high - low < _REMEMBERED:
        return _kernel_ports(count)
    sockets: list[socket.socket] = []
    try:
        for _ in range(count * 200):  # bounded: most draws in an idle range are free
            if len(sockets) == count:
                break
            port = _rng.randint(low, high)
            if port in _recent:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        if len(sockets) < count:
            raise RuntimeError(f"found {len(sockets)} of {count} free ports in {low}..{high}")
        ports = [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()
    _recent.extend(ports)
    return ports


_FIXED_PORTS_LOW = 15000
_REMEMBERED = 2048
_recent: collections.deque[int] = collections.deque(maxlen=_REMEMBERED)
_rng = random.Random()


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _kernel_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def four_letter_word(host: str, port: int, word: str, *, timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``, ``stat``) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def zookeeper_classpath() -> str:
    """The Java classpath for the ZooKeeper server, honouring ``$ZOOKEEPER_HOME``."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        root = Path(home)
        jars = sorted(root.glob("lib/*.jar")) + sorted(root.glob("*.jar"))
        if not jars and (root / "zookeeper.jar").exists():
            jars = [root / "zookeeper.jar"]
        if not jars:
            raise FileNotFoundError(f"no ZooKeeper jars under ZOOKEEPER_HOME={home}")
        return os.pathsep.join(str(j) for j in jars)
    main_jar = _DEBIAN_JARS / "zookeeper.jar"
    if not main_jar.exists():
        raise FileNotFoundError(
            "ZooKeeper not found: install Debian's `zookeeper` package or set ZOOKEEPER_HOME"
        )
    # Debian's zookeeper.jar names its dependencies in its manifest Class-Path;
    # slf4j-simple makes the server log to stderr, which we keep for error reports.
    parts = [str(main_jar)]
    simple = _DEBIAN_JARS / "slf4j-simple.jar"
    if simple.exists():
        parts.append(str(simple))
    return os.pathsep.join(parts)


class ZooKeeperServer:
    """A standalone ZooKeeper on 127.0.0.1, started in :meth:`start` and killed in :meth:`stop`.

    Invariants: while started, ``process`` is the JVM, the leader of its own
    process group; ``port`` is the client port it listens on.
    """

    def __init__(self, data_dir: Path, *, port: int = 0, tick_time_ms: int = 500) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.process: subprocess.Popen[bytes] | None = None
        self._log_path = self.data_dir / "zookeeper.log"
        self._paused = False

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def connect_string(self) -> str:
        """``host:port`` for a KazooClient (append a chroot for ``zookeeper.connect``)."""
        return f"{self.host}:{self.port}"

    def chroot_connect_string(self, chroot: str) -> str:
        return f"{self.connect_string}{chroot}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    f"minSessionTimeout={2 * self.tick_time_ms}",
                    f"maxSessionTimeout={60000}",
                    "autopurge.purgeInterval=0",
                    "",
                ]
            ),
            encoding="ascii",
        )
        return cfg

    def start(self, *, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Start the JVM and wait until it answers ``ruok`` (raises with the log tail if not)."""
        if self.running:
            return
        if not _port_free(self.port):
            raise RuntimeError(f"cannot start ZooKeeper: 127.0.0.1:{self.port} is already in use")
        cfg = self._write_config()
        java = shutil.which("java") or "java"
        cmd = [
            java,
            "-Xms32m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            zookeeper_classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(cfg),
        ]
        log = open(self._log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        _LIVE.add(self)
        try:
            self._wait_until_serving(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_until_serving(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error = ""
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = self.process.returncode if self.process else "?"
                raise RuntimeError(
                    f"ZooKeeper exited early (code {code}); log tail:\n{self.log_tail()}"
                )
            try:
                # ``ruok`` answers before the server has loaded its database; ``srvr`` does not.
                if "Mode:" in four_letter_word(self.host, self.port, "srvr", timeout_s=1.0):
                    return
            except OSError as e:
                last_error = str(e)
            time.sleep(0.1)
        raise TimeoutError(
            f"ZooKeeper on {self.connect_string} did not answer within {timeout_s:.0f}s"
            f" (last error: {last_error}); log tail:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def pause(self) -> None:
        """SIGSTOP the server: clients see it hang, sessions expire after it resumes."""
        if self.running and self.process is not None:
            os.killpg(self.process.pid, signal.SIGSTOP)
            self._paused = True

    def resume(self) -> None:
        if self.process is not None and self._paused:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGCONT)
            self._paused = False

    def stop(self) -> None:
        """Kill the process group and reap the JVM. Idempotent."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        else:
            # The JVM is gone; make sure no child it left in the group survives.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.process = None
        self._paused = False
        _LIVE.discard(self)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()
