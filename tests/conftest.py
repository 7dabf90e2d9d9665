"""Shared pytest fixtures: start a real rockstalkd or Debian's beanstalkd 1.12
on a free loopback port, each with a fresh data directory, and stop it after
the test.

    def test_x(rockstalkd):            # a running ./rockstalkd (or $ROCKSTALKD)
        s = rockstalkd()               # -> Server(host, port, proc, dir)
        s2 = rockstalkd("-f", "50")    # extra daemon flags
    def test_y(beanstalkd):            # the reference server, same interface

ROCKSTALK_TEST_VIA=follower: the rockstalkd fixture starts a 3-node cluster
(tests/cluster.py) per server instead and hands back a FollowerServer, the
same interface whose host, port and connect() reach one of the followers,
which relays every connection to the leader. `make test` runs
test_protocol.py, test_differential.py, test_extensions.py and
test_regressions.py this way too (`make ptest-follower`); the other test
files are about one process and its data directory and are not meant for
this mode. A test that is about the process
rather than the protocol carries @pytest.mark.not_via_follower("why") and is
skipped in this mode.

ROCKSTALK_KEEP_LOGS=DIR: when a test fails (or its fixtures do), every
*.log under the session's temporary directory that was written since the
test's setup began (the server logs of the rockstalkd fixture, each
cluster node's DIR.log, a test's own; not RocksDB's numbered write-ahead
logs) is copied to DIR/<test>-<time>/, keeping its path below that
directory, and the report names the copy.
pytest itself keeps only the last three sessions' temporary directories,
so a failure in a loop of runs would otherwise lose them.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

import replay
from cluster import Cluster
from replay import free_port  # noqa: F401 (tests import it from here)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROCKSTALKD = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd")))
BEANSTALKD = shutil.which("beanstalkd") or "/usr/bin/beanstalkd"
# "" (one rockstalkd per server) or "follower" (see above).
VIA = os.environ.get("ROCKSTALK_TEST_VIA", "")
KEEP_LOGS = os.environ.get("ROCKSTALK_KEEP_LOGS", "")
_setup_began = pytest.StashKey()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "not_via_follower(reason): skipped when "
        "ROCKSTALK_TEST_VIA=follower (a test of the process, not of the "
        "protocol)")
    if VIA not in ("", "follower"):
        raise pytest.UsageError("ROCKSTALK_TEST_VIA=%r: only 'follower' "
                                "(or unset)" % VIA)


def pytest_collection_modifyitems(config, items):
    if VIA != "follower":
        return
    for item in items:
        m = item.get_closest_marker("not_via_follower")
        if m:
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(
                reason="not via a follower: " + why))


def keep_logs(item, since):
    """Copies the *.log files (not RocksDB's NNNNNN.log) under the
    session's temporary directory written at or after since (time.time())
    to a fresh directory under KEEP_LOGS named after item; that directory,
    or None if none was written."""
    base = str(item.config._tmp_path_factory.getbasetemp())
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-120:]
    dest = os.path.join(os.path.abspath(KEEP_LOGS), "%s-%s-%d" % (
        name, time.strftime("%Y%m%d-%H%M%S"), os.getpid()))
    kept = 0
    for root, _, files in os.walk(base):
        for f in files:
            src = os.path.join(root, f)
            try:
                if not f.endswith(".log") or re.match(r"\d+\.log$", f) or \
                        os.path.getmtime(src) < since:
                    continue
                to = os.path.join(dest, os.path.relpath(src, base))
                os.makedirs(os.path.dirname(to), exist_ok=True)
                shutil.copy2(src, to)
                kept += 1
            except OSError:
                pass  # gone meanwhile (a test's own cleanup)
    return dest if kept else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """ROCKSTALK_KEEP_LOGS (see above): keeps a failed phase's logs."""
    outcome = yield
    if not KEEP_LOGS:
        return
    if call.when == "setup":
        item.stash[_setup_began] = call.start
    rep = outcome.get_result()
    if rep.failed:
        dest = keep_logs(item, item.stash.get(_setup_began, call.start))
        rep.sections.append(("rockstalk logs (ROCKSTALK_KEEP_LOGS)",
                             "kept in %s" % dest if dest else
                             "no log was written during the test"))


def wait_listening(port, proc, timeout=20.0):
    """replay.wait_listening on 127.0.0.1: returns once the server serves a
    connection and has forgotten it, so current-connections starts at 0."""
    replay.wait_listening("127.0.0.1", port, proc, timeout)


def wait_for(pred, timeout=10.0, what="condition"):
    """Poll pred() every 20 ms until it is true; AssertionError naming what
    if timeout (seconds) passes first. For what a test can only observe,
    in place of a fixed sleep that a loaded machine can outlast."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class Server:
    """A running server: host, port, proc (Popen), dir (data directory)."""

    def __init__(self, argv, dir, port, log):
        self.host, self.port, self.dir, self.argv = "127.0.0.1", port, dir, argv
        self.log = log
        self.env = None     # restart's environment (None: the test's own)
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_listening(port, self.proc)

    def connect(self, timeout=5.0):
        s = socket.create_connection((self.host, self.port), timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def restart(self):
        self.stop()
        self.proc = subprocess.Popen(self.argv, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env)
        wait_listening(self.port, self.proc)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class FollowerServer:
    """ROCKSTALK_TEST_VIA=follower: Server's interface over a fresh 3-node
    cluster, every node started with the test's flags. host, port and
    connect() reach a follower (a client there gets the leader's replies,
    relayed byte for byte); dir, proc, argv and log are that node's. The
    cluster is the server: stop(sig) signals all three nodes, kill9()
    kills all three, restart() starts all three again (the data survive in
    the Raft log and the shards) and the same node is followed, so port
    stays the same.

    Finding the leader sends no command: a command would show in the
    leader's stats (cmd-*, current-connections), which the tests assert
    from a fresh server. Once every node has served the readiness probe
    (quit, counted nowhere) the leader has logged that it serves; the
    metrics endpoint lags up to a second, so it is only the fallback."""

    def __init__(self, base, flags):
        self.base, self.flags = str(base), list(flags)
        self.env = None     # restart's environment (None: the test's own)
        self.cluster = Cluster(base, flags=self.flags, start=False)
        self.node = self.cluster.node(1)
        try:
            for nd in self.cluster.nodes:
                self._start(nd)
            for nd in self.cluster.nodes:
                replay.wait_listening(nd.host, nd.port, nd.proc)
            lead = self._leader()
            self.node = next(nd for nd in self.cluster.nodes
                             if nd.id != lead)
            # Its relay to the leader works before the test starts.
            replay.wait_listening(self.node.host, self.node.port,
                                  self.node.proc)
        except BaseException:
            self.close()
            raise
        self.host, self.port = self.node.host, self.node.port

    @property
    def dir(self):
        return self.node.dir

    @property
    def proc(self):
        return self.node.proc

    @property
    def argv(self):
        return self.node.argv()

    @property
    def log(self):
        return self.node.log

    def connect(self, timeout=5.0):
        return self.node.connect(timeout)

    def _leader(self, timeout=15.0):
        """The id of the node that serves, from the nodes' logs (only the
        initial start needs this: restart() keeps self.node a follower)."""
        leads = []
        for nd in self.cluster.nodes:
            with open(nd.dir + ".log", "rb") as f:
                text = f.read()
            up = text.rfind(b"cluster: leader in term ")
            if up >= 0 and up > text.rfind(b"cluster: no longer the leader"):
                leads.append(nd.id)
        if len(leads) == 1:
            return leads[0]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            views = self.cluster.views()
            for nid, v in views.items():
                if v and v["role"] == "leader" and any(
                        w and w["leader"] == nid
                        for k, w in views.items() if k != nid):
                    return nid
            time.sleep(0.05)
        raise AssertionError("no leader within %.0f s: %r" %
                             (timeout, self.cluster.views()))

    def _start(self, nd):
        env = self.env
        if env is None:
            env = dict(os.environ)
            env.update(self.cluster.env)
        nd.proc = subprocess.Popen(nd.argv(), stdout=nd.log,
                                   stderr=subprocess.STDOUT, env=env)

    def restart(self):
        """A whole-cluster restart. The other two nodes start first and
        elect a leader between them (each returns the readiness probe only
        once a leader serves); the followed node then joins a cluster that
        has one, and a node cannot depose a leader its peers hear from
        (pre-vote), so it stays a follower and port keeps relaying."""
        self.stop()
        others = [nd for nd in self.cluster.nodes if nd is not self.node]
        for nd in others:
            self._start(nd)
        for nd in others:
            replay.wait_listening(nd.host, nd.port, nd.proc)
        self._start(self.node)
        replay.wait_listening(self.host, self.port, self.node.proc)

    def kill9(self):
        for nd in self.cluster.nodes:
            if nd.alive():
                nd.proc.send_signal(signal.SIGKILL)
        for nd in self.cluster.nodes:
            if nd.proc is not None:
                nd.proc.wait()

    def stop(self, sig=signal.SIGTERM):
        """Signals the two other nodes (the leader among them), waits for
        them, then the followed node: so the leader keeps a quorum while it
        shuts down, and what it has in flight (say, the release of a job a
        test's connection held when it closed) commits, where with no
        follower left it would wait 10 s for it. Returns the followed
        node's exit status, or if that is 0 the first other node's that is
        not (so 0 means every node exited 0)."""
        others = [nd for nd in self.cluster.nodes if nd is not self.node]
        for group in (others, [self.node]):
            for nd in group:
                if nd.alive():
                    nd.proc.send_signal(sig)
            for nd in group:
                if nd.proc is None:
                    continue
                try:
                    nd.proc.wait(15)
                except subprocess.TimeoutExpired:
                    nd.proc.kill()
                    nd.proc.wait()
        codes = [nd.proc.returncode for nd in [self.node] + others
                 if nd.proc is not None]
        return next((c for c in codes if c), 0)

    def close(self):
        self.stop()
        for nd in self.cluster.nodes:
            nd.log.close()


class _Spares:
    """The next flagless FollowerServers, started in threads while tests
    run, since most of a cluster's start is waiting for its first election
    (1 to 2 s), longer than many a test: take() hands over the oldest,
    waiting for it if need be, and starts another, so that DEPTH are
    always on their way. A spare has served nothing but the readiness
    probes, like a server started in the test."""

    DEPTH = 2

    def __init__(self, tmp_path_factory):
        self.tmp = tmp_path_factory
        self.queue = []     # (thread, box) oldest first

    def _start(self):
        base = self.tmp.mktemp("cluster")
        box = {}

        def run():
            try:
                box["server"] = FollowerServer(base, [])
            except BaseException as e:  # raised again by take()
                box["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.queue.append((t, box))

    def take(self):
        while len(self.queue) < self.DEPTH:
            self._start()
        t, box = self.queue.pop(0)
        self._start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["server"]

    def close(self):
        for t, box in self.queue:
            t.join()
            if "server" in box:
                box["server"].close()
        self.queue = []


@pytest.fixture(scope="session")
def _follower_spare(tmp_path_factory):
    spare = _Spares(tmp_path_factory)
    yield spare
    spare.close()


def _follower_factory(request, tmp_path_factory):
    servers = []

    def start(*flags):
        if "--memory" in flags:
            pytest.skip("--memory: cluster mode needs a store")
        # -f and -F are accepted and have no effect in cluster mode: the
        # Raft log is the durable copy, written before a reply.
        if flags:
            s = FollowerServer(tmp_path_factory.mktemp("cluster"), flags)
        else:
            s = request.getfixturevalue("_follower_spare").take()
        with open(os.path.join(s.base, "TEST"), "a") as f:
            f.write("%s (following node %d)\n" % (request.node.nodeid,
                                                  s.node.id))
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def _factory(request, tmp_path_factory, make_argv):
    servers = []

    def start(*flags):
        d = str(tmp_path_factory.mktemp("data"))
        port = free_port()
        log = open(os.path.join(d + ".log"), "ab")
        s = Server(make_argv(port, d, list(flags)), d, port, log)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()
        s.log.close()


@pytest.fixture
def rockstalkd(request, tmp_path_factory):
    if VIA == "follower":
        yield from _follower_factory(request, tmp_path_factory)
        return
    yield from _factory(request, tmp_path_factory, lambda port, d, flags: [
        ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b", d] + flags)


@pytest.fixture
def beanstalkd(request, tmp_path_factory):
    # In memory unless the test passes -b itself (beanstalkd's default).
    yield from _factory(request, tmp_path_factory, lambda port, d, flags: [
        BEANSTALKD, "-l", "127.0.0.1", "-p", str(port)] + flags)


@pytest.fixture
def api(rockstalkd):
    """start(*flags) -> (server, HTTP port): rockstalkd with --http on a
    free port (the HTTP API tests)."""
    def start(*flags):
        hp = free_port()
        return rockstalkd("--http", "127.0.0.1:%d" % hp, *flags), hp
    return start
