"""Cluster operations (issue 28, item 1, first part; PROTOCOL.md 15.8):
rockstalk-cluster-status and rockstalk-cluster-transfer against any member
of a 3-node cluster, and `rockstalk cluster status|transfer ID`.

Status through a follower and through the leader is the leader's, names
the right leader and every voter with its addresses; a transfer makes the
chosen follower the leader (its own view says so) and keeps the jobs; a
bad, unknown or own id is refused and changes nothing; a standalone server
answers UNKNOWN_COMMAND; with --auth-file only a bare admin may transfer
and status needs inspect."""
import os
import socket
import subprocess
import time

import pytest
import yaml

from cluster import Cluster
from conftest import wait_for
from test_auth import TOKENS, auth_text, write_auth

pytestmark = pytest.mark.not_via_follower("starts its own clusters")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALK_CLI", "rockstalk")))


class Line:
    """A blocking line client on a node (or any host/port)."""

    def __init__(self, port, token=None, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout)
        self.s.settimeout(timeout)
        self.buf = b""
        if token:
            assert self.cmd("auth " + token)[0] == "AUTHENTICATED"

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise EOFError(self.buf)
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode()

    def cmd(self, line, body=None):
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.s.sendall(data)
        ln = self.line()
        if ln.startswith(("OK ", "FOUND ")):
            n = int(ln.split()[-1]) + 2
            while len(self.buf) < n:
                d = self.s.recv(65536)
                if not d:
                    raise EOFError(self.buf)
                self.buf += d
            body, self.buf = self.buf[:n - 2], self.buf[n:]
            return ln, body
        return ln, None

    def closed(self, timeout=10.0):
        """True once the server closed the connection within timeout."""
        self.s.settimeout(timeout)
        try:
            return self.s.recv(65536) == b"" or self.closed(timeout)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def status(port, token=None):
    c = Line(port, token)
    try:
        ln, body = c.cmd("rockstalk-cluster-status")
    finally:
        c.close()
    assert ln.startswith("OK "), ln
    assert int(ln.split()[1]) == len(body) and len(body) <= 2048
    return yaml.safe_load(body)


def cli(port, *args, token=None):
    env = dict(os.environ)
    env.pop("ROCKSTALK_TOKEN", None)
    argv = [CLI, "-p", str(port)] + (["--token", token] if token else [])
    return subprocess.run(argv + list(args), env=env, capture_output=True,
                          timeout=30)


def serving_leader(c, timeout=15.0):
    """The leader's id once its status answers through every node."""
    lead = c.wait_leader(timeout)
    wait_for(lambda: all(status(nd.port)["leader"] == lead
                         for nd in c.nodes), timeout, "status everywhere")
    return lead


def check_status(c, st, lead):
    assert st["leader"] == lead and st["node-id"] == lead
    assert st["term"] >= 1 and st["progress"] == "known"
    assert st["last-index"] >= st["commit-index"] >= st["applied-index"] > 0
    by_id = {v["id"]: v for v in st["voters"]}
    assert sorted(by_id) == [1, 2, 3]
    for nd in c.nodes:
        v = by_id[nd.id]
        assert v["raft-address"] == "127.0.0.1:%d" % nd.raft_port
        assert v["client-address"] == "127.0.0.1:%d" % nd.port
        assert v["role"] == ("leader" if nd.id == lead else "follower")
        assert 0 <= v["match-index"] <= st["last-index"]
        assert v["lag"] == st["last-index"] - v["match-index"]
        assert v["contact-ms"] >= 0


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path / "c")
    yield c
    c.stop()


def test_status_and_transfer(cluster):
    c = cluster
    lead = serving_leader(c)
    f1, f2 = [nd for nd in c.nodes if nd.id != lead]
    # status through the leader and through a follower agree
    a, b = status(c.node(lead).port), status(f1.port)
    check_status(c, a, lead)
    check_status(c, b, lead)
    assert a["term"] == b["term"]
    p = cli(f2.port, "cluster", "status")
    assert p.returncode == 0, p
    rows = [ln.split() for ln in p.stdout.decode().splitlines()]
    assert rows[0][:2] == ["leader", "%d," % lead], p.stdout
    assert rows[1][:2] == ["ID", "ROLE"]
    assert sorted((r[0], r[1]) for r in rows[2:5]) == sorted(
        (str(nd.id), "leader" if nd.id == lead else "follower")
        for nd in c.nodes)

    # jobs put before the transfers stay
    w = Line(c.node(lead).port)
    ids = [int(w.cmd("put 5 0 60 3", b"j%02d" % i)[0].split()[1])
           for i in range(10)]
    w.close()

    # the protocol: through f2, to f1: TRANSFERRING, then the close
    t = Line(f2.port)
    t0 = time.monotonic()
    assert t.cmd("rockstalk-cluster-transfer %d" % f1.id) == (
        "TRANSFERRING %d" % f1.id, None)
    assert t.closed(), "the relayed connection stays open"
    t.close()
    wait_for(lambda: (f1.view() or {}).get("role") == "leader", 10,
             "node %d to lead" % f1.id)
    took = time.monotonic() - t0
    assert serving_leader(c) == f1.id
    st = status(f2.port)
    check_status(c, st, f1.id)
    assert took < 5, took
    # the target won the election the hand-over made it start (one term
    # on), not a later one after its votes were lost (a stale peer link,
    # the old leader's restart) and election timeouts went by
    assert st["term"] == a["term"] + 1, (a["term"], st["term"])

    # the CLI, through the old leader: back to it, and it waits for it
    p = cli(c.node(lead).port, "cluster", "transfer", str(lead))
    out = p.stdout.decode()
    assert p.returncode == 0, p
    assert "node %d hands the leadership to node %d" % (f1.id, lead) in out
    assert "node %d leads now" % lead in out, out
    wait_for(lambda: (c.node(lead).view() or {}).get("role") == "leader",
             10, "node %d to lead" % lead)
    assert serving_leader(c) == lead
    # to a node that restarted when it handed the leadership over: its
    # peers' links to it are stale, and the old leader restarts at once
    assert status(f1.port)["term"] == st["term"] + 1, st["term"]
    r = Line(f1.port)
    for i, jid in enumerate(ids):
        assert r.cmd("peek %d" % jid) == ("FOUND %d 3" % jid,
                                           b"j%02d" % i)
    assert r.cmd("stats-tube default")[0].startswith("OK")
    r.close()
    # the CLI says so when the node leads already
    p = cli(f2.port, "cluster", "transfer", str(lead))
    assert p.returncode == 0 and b"leads already" in p.stdout, p


def test_refusals(cluster, rockstalkd):
    c = cluster
    lead = serving_leader(c)
    f = next(nd for nd in c.nodes if nd.id != lead)
    term = status(f.port)["term"]
    x = Line(f.port)
    for line, want in (("rockstalk-cluster-transfer 9", "NOT_FOUND"),
                       ("rockstalk-cluster-transfer 0", "NOT_FOUND"),
                       ("rockstalk-cluster-transfer %d" % lead, "NOT_FOUND"),
                       ("rockstalk-cluster-transfer x", "BAD_FORMAT"),
                       ("rockstalk-cluster-transfer 2 3", "BAD_FORMAT"),
                       ("rockstalk-cluster-transfer ", "BAD_FORMAT"),
                       ("rockstalk-cluster-transfer", "UNKNOWN_COMMAND"),
                       ("rockstalk-cluster-status 1", "BAD_FORMAT")):
        assert x.cmd(line) == (want, None), line
    assert x.cmd("list-tube-used") == ("USING default", None)  # still open
    x.close()
    p = cli(f.port, "cluster", "transfer", "9")
    assert p.returncode == 1 and b"NOT_FOUND" in p.stderr, p
    p = cli(f.port, "cluster", "transfer", "x")
    assert p.returncode == 2 and b"node id" in p.stderr, p
    p = cli(f.port, "cluster", "frob")
    assert p.returncode == 2, p
    st = status(f.port)
    assert st["leader"] == lead and st["term"] == term  # nothing moved

    # a standalone server has no such commands
    s = rockstalkd("--memory")
    y = Line(s.port)
    assert y.cmd("rockstalk-cluster-status") == ("UNKNOWN_COMMAND", None)
    assert y.cmd("rockstalk-cluster-transfer 2") == ("UNKNOWN_COMMAND", None)
    y.close()
    p = cli(s.port, "cluster", "status")
    assert p.returncode == 1 and b"not a cluster node" in p.stderr, p


def test_access_classes(tmp_path):
    """With --auth-file: status needs inspect (on some tube), transfer a
    bare admin; the checks run on the leader, through a follower too."""
    p = write_auth(tmp_path / "auth", auth_text())
    c = Cluster(tmp_path / "c", flags=["--auth-file", p])
    try:
        wait_for(lambda: c.leader() != 0, 15, "a leader")
        lead = c.leader()
        f = next(nd for nd in c.nodes if nd.id != lead)

        def answers():
            try:
                return status(f.port, TOKENS["insp"])["leader"] == lead
            except (OSError, EOFError, AssertionError):
                return False
        wait_for(answers, 15, "status through the follower")
        check_status(c, status(f.port, TOKENS["insp"]), lead)
        for who, st_ok in (("prod", False), ("cons", False), ("insp", True),
                           ("tadm", True), ("other", False)):
            x = Line(f.port, TOKENS[who])
            ln = x.cmd("rockstalk-cluster-status")[0]
            assert ln.startswith("OK") if st_ok else ln == "DENIED", (who, ln)
            assert x.cmd("rockstalk-cluster-transfer %d" % f.id) == (
                "DENIED", None), who
            x.close()
        pre = Line(f.port)
        assert pre.cmd("rockstalk-cluster-status") == ("UNAUTHORIZED", None)
        pre.close()
        p = cli(f.port, "cluster", "transfer", str(f.id),
                token=TOKENS["tadm"])
        assert p.returncode == 1 and b"DENIED" in p.stderr, p
        assert c.leader() == lead
        # a bare admin may, through the CLI with its token
        p = cli(f.port, "cluster", "transfer", str(f.id),
                token=TOKENS["root"])
        assert p.returncode == 0, p
        assert b"node %d leads now" % f.id in p.stdout, p
        wait_for(lambda: (f.view() or {}).get("role") == "leader", 10,
                 "node %d to lead" % f.id)
    finally:
        c.stop()
