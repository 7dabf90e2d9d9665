"""Membership changes online (issue 28, item 1; PROTOCOL.md 15.9, 15.10):
rockstalk-cluster-add and rockstalk-cluster-remove, `rockstalk cluster
add|remove`, rockstalkd --join, and the CLUSTER file that follows the
committed configuration.

Under a light put load from one client (through whichever member answers):
grow 3 -> 4 -> 5, shrink 5 -> 4, remove the leader (it hands over first)
-> 3, replace a killed node by a new one at a new address (remove the old,
add the new). Every INSERTED id is there afterwards and none was given
twice; the service gap of each change (the longest time without an
acknowledged put around it) is printed (run with -s to see it). A removed
node stops and refuses to start as a member again; a member restarted
with the new member list starts, one with the old list is refused.

Refusals: a non-admin identity with --auth-file (DENIED), an unknown id, a
duplicate id or address, a second change while one runs, an add whose node
never catches up (TIMED_OUT, it stays a standby, and can be removed), a bad
address, a standalone server, a new cluster of 4."""
import os
import subprocess
import threading
import time

import pytest

from cluster import Cluster, Node, ROCKSTALKD, make_certs, node_port
from conftest import wait_for
from test_auth import TOKENS, auth_text, write_auth
from test_cluster_ops import Line, cli, status

pytestmark = pytest.mark.not_via_follower("starts its own clusters")

CERTS = 8  # node certificates made for ids 1..8 (joiners included)


def node_by_id(c, nid):
    return next(nd for nd in c.nodes if nd.id == nid)


def new_cluster(base, **kw):
    """A 3-node cluster whose c.node(id) finds a node by id (nodes come
    and go; those removed stay in c.nodes, stopped)."""
    make_certs(os.path.join(str(base), "certs"), CERTS)
    c = Cluster(base, **kw)
    c.node = lambda nid: node_by_id(c, nid)
    return c


def spec_of(c, ids):
    return ",".join("%d@127.0.0.1:%d/%d" % (nd.id, nd.raft_port, nd.port)
                    for nd in sorted(c.nodes, key=lambda n: n.id)
                    if nd.id in ids)


def log_of(nd):
    with open(nd.dir + ".log", "rb") as f:
        return f.read().decode(errors="replace")


def members(port):
    """The member ids in the leader's status (through port)."""
    return sorted(v["id"] for v in status(port)["voters"])


def joiner(c, nid, ids):
    """Starts node nid with --join and --cluster naming ids and itself."""
    base = os.path.dirname(c.nodes[0].dir)
    nd = Node(c, nid, node_port(), node_port(), node_port(),
              os.path.join(base, "node%d" % nid))
    c.nodes.append(nd)
    c.spec = spec_of(c, set(ids) | {nid})
    nd.flags = ["--join"]
    nd.start(wait=False)
    wait_for(lambda: "joins: it serves nothing" in log_of(nd), 15,
             "node %d waiting to join" % nid)
    return nd


class Load:
    """One client putting a job every few milliseconds through the member
    client ports in self.ports (any member relays to the leader),
    reconnecting to the next one on any error. self.acks: (monotonic
    time, id) of every INSERTED."""

    def __init__(self, ports):
        self.ports, self.acks, self.errors = list(ports), [], 0
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        conn, k, i = None, 0, 0
        while not self.stop_ev.is_set():
            if conn is None:
                k += 1
                try:
                    conn = Line(self.ports[k % len(self.ports)], timeout=3)
                except OSError:
                    time.sleep(0.02)
                    continue
            body = b"job-%d" % i
            i += 1
            try:
                ln, _ = conn.cmd("put 0 0 60 %d" % len(body), body)
            except (OSError, EOFError):
                ln = None
            if ln and ln.startswith("INSERTED "):
                self.acks.append((time.monotonic(), int(ln.split()[1])))
                time.sleep(0.004)
                continue
            self.errors += 1
            conn.close()
            conn = None
            time.sleep(0.01)
        if conn:
            conn.close()

    def gap(self, t0, t1):
        """The longest time without an acknowledged put from the last one
        before t0 to the first one after t1, in ms."""
        times = [t for t, _ in self.acks]
        before = [t for t in times if t < t0][-1:]
        after = [t for t in times if t > t1][:1]
        inside = before + [t for t in times if t0 <= t <= t1] + after
        return max(b - a for a, b in zip(inside, inside[1:])) * 1000

    def stop(self):
        self.stop_ev.set()
        self.t.join(10)


def timed(load, gaps, name, fn):
    """Runs fn (a membership change) and records its service gap."""
    t0 = time.monotonic()
    out = fn()
    t1 = time.monotonic()
    n = len(load.acks)
    wait_for(lambda: len(load.acks) > n + 20, 30, "puts after " + name)
    gaps.append((name, (t1 - t0) * 1000, load.gap(t0, t1)))
    return out


def add(port, nd):
    p = cli(port, "cluster", "add",
            "%d@127.0.0.1:%d/%d" % (nd.id, nd.raft_port, nd.port))
    assert p.returncode == 0 and b"ADDED %d" % nd.id in p.stdout, p
    return p


def remove(port, nid):
    p = cli(port, "cluster", "remove", str(nid))
    assert p.returncode == 0 and b"REMOVED %d" % nid in p.stdout, p
    return p


def check_removed(c, nd):
    """nd stopped itself; restarted as a member it is refused, naming the
    removal."""
    nd.proc.wait(15)
    assert "removed from the cluster's configuration" in log_of(nd)
    with open(os.path.join(nd.dir, "CLUSTER")) as f:
        assert "state removed" in f.read()
    nd.flags = []
    r = subprocess.run(nd.argv(), capture_output=True, timeout=20)
    assert r.returncode != 0
    assert b"node %d was removed from the cluster" % nd.id in r.stderr, r


def check_restart(c, nd, old_spec):
    """A member restarted with the current list starts; with the list from
    before the changes it is refused, naming the committed one."""
    nd.stop()
    spec, c.spec = c.spec, old_spec
    nd.flags = []
    r = subprocess.run(nd.argv(), capture_output=True, timeout=20)
    c.spec = spec
    assert r.returncode != 0
    assert b"its committed configuration" in r.stderr, r
    nd.start()
    c.wait_caught_up(nd.id, 30)


def verify(port, load):
    ids = [i for _, i in load.acks]
    assert len(ids) == len(set(ids)), "an id was given twice"
    conn = Line(port, timeout=10)
    try:
        missing = [i for i in ids if not conn.cmd("peek %d" % i)[0]
                   .startswith("FOUND")]
    finally:
        conn.close()
    assert not missing, "acknowledged puts lost: %r" % missing[:20]
    return len(ids)


def test_grow_shrink_replace_under_load(tmp_path):
    c = new_cluster(tmp_path / "c")
    gaps = []
    try:
        lead = c.wait_leader()
        load = Load([nd.port for nd in c.nodes])
        wait_for(lambda: len(load.acks) > 50, 15, "first puts")
        port = node_by_id(c, lead).port

        n4 = joiner(c, 4, [1, 2, 3])
        timed(load, gaps, "add 4 (3 -> 4)", lambda: add(port, n4))
        n5 = joiner(c, 5, [1, 2, 3, 4])
        timed(load, gaps, "add 5 (4 -> 5)", lambda: add(port, n5))
        load.ports += [n4.port, n5.port]
        assert members(n5.port) == [1, 2, 3, 4, 5]
        c.wait_caught_up(5, 30)

        load.ports.remove(n5.port)
        timed(load, gaps, "remove 5 (5 -> 4)", lambda: remove(n4.port, 5))
        check_removed(c, n5)

        lead = c.wait_leader()
        other = next(nd for nd in c.nodes if nd.id != lead)
        load.ports.remove(node_by_id(c, lead).port)
        p = timed(load, gaps, "remove leader %d (4 -> 3)" % lead,
                  lambda: remove(other.port, lead))
        assert b"TRANSFERRING" in p.stdout, p
        gone = node_by_id(c, lead)
        check_removed(c, gone)
        live = [nd.id for nd in c.nodes if nd.alive()]
        c.spec = spec_of(c, live)
        assert members(other.port) == sorted(live)

        lead = c.wait_leader()
        stale_spec = c.spec  # the members before the replacement
        dead = next(nd for nd in c.nodes if nd.id != lead and nd.alive())
        load.ports.remove(dead.port)
        dead.kill9()
        live.remove(dead.id)
        keep = node_by_id(c, lead)
        timed(load, gaps, "remove killed %d (3 -> 2)" % dead.id,
              lambda: remove(keep.port, dead.id))
        n6 = joiner(c, 6, live)
        timed(load, gaps, "add 6 at a new address (2 -> 3)",
              lambda: add(keep.port, n6))
        load.ports.append(n6.port)
        c.wait_caught_up(6, 30)
        assert members(n6.port) == sorted(live + [6])

        p = timed(load, gaps, "transfer to 6",
                  lambda: cli(n6.port, "cluster", "transfer", "6"))
        assert p.returncode == 0, p
        other = next(nd for nd in c.nodes if nd.alive() and nd.id != 6)
        check_restart(c, other, stale_spec)
        load.stop()
        n = verify(n6.port, load)
        print("\nmembership rounds: %d puts acknowledged, %d client errors "
              "(reconnects)" % (n, load.errors))
        for name, took, gap in gaps:
            print("  %-34s change %6.0f ms, service gap %6.0f ms" %
                  (name, took, gap))
        for name, took, gap in gaps:
            assert gap < 10000, (name, gap)
    finally:
        c.stop()


@pytest.fixture
def auth_cluster(tmp_path):
    path = write_auth(tmp_path / "auth", auth_text())
    c = new_cluster(tmp_path / "c", flags=["--auth-file", path],
                    env={"ROCKSTALKD_CLUSTER_CHANGE_MS": "2500"})
    yield c
    c.stop()


def test_refusals(auth_cluster, tmp_path):
    c = auth_cluster
    lead = c.wait_leader()
    f = next(nd for nd in c.nodes if nd.id != lead)
    root, tadm = TOKENS["root"], TOKENS["tadm"]
    n1 = node_by_id(c, 1)
    a = Line(f.port, root, timeout=30)
    try:
        # only a bare admin
        t = Line(f.port, tadm)
        assert t.cmd("rockstalk-cluster-add 9 127.0.0.1:1")[0] == "DENIED"
        assert t.cmd("rockstalk-cluster-remove 2")[0] == "DENIED"
        t.close()
        p = cli(f.port, "cluster", "remove", "2", token=tadm)
        assert p.returncode != 0 and b"admin" in p.stderr, p
        # unknown id, duplicates, bad address
        assert a.cmd("rockstalk-cluster-remove 9")[0] == "NOT_FOUND"
        assert a.cmd("rockstalk-cluster-add 2 127.0.0.1:1")[0] == \
            "DUPLICATE_ID"
        assert a.cmd("rockstalk-cluster-add 9 127.0.0.1:%d" %
                     n1.raft_port)[0] == "DUPLICATE_ADDRESS"
        assert a.cmd("rockstalk-cluster-add 9 127.0.0.1")[0] == "BAD_FORMAT"
        # the server resolves no names (the CLI does)
        assert a.cmd("rockstalk-cluster-add 9 localhost:1")[0] == \
            "BAD_FORMAT"
        assert a.cmd("rockstalk-cluster-add 0 127.0.0.1:1")[0] == \
            "BAD_FORMAT"
        # a node that never answers: the add times out, and while it runs
        # no other change starts
        ghost = node_port()
        a.s.sendall(b"rockstalk-cluster-add 9 127.0.0.1:%d\r\n" % ghost)
        time.sleep(0.3)
        b = Line(c.node(lead).port, root)
        assert b.cmd("rockstalk-cluster-remove %d" % f.id)[0] == \
            "CHANGE_IN_PROGRESS"
        assert b.cmd("rockstalk-cluster-remove %d" % lead)[0] == \
            "CHANGE_IN_PROGRESS"  # not even the leader's hand-over
        assert b.cmd("rockstalk-cluster-add 8 127.0.0.1:%d" %
                     node_port())[0] == "CHANGE_IN_PROGRESS"
        b.close()
        t0 = time.monotonic()
        assert a.line() == "TIMED_OUT"
        assert time.monotonic() - t0 < 10
        st = {v["id"]: v for v in status(f.port, root)["voters"]}
        assert st[9]["role"] == "standby"
        assert a.cmd("rockstalk-cluster-remove 9")[0] == "REMOVED 9"
        st = status(f.port, root)
        assert sorted(v["id"] for v in st["voters"]) == [1, 2, 3]
    finally:
        a.close()


def test_not_a_cluster_and_new_cluster_of_four(rockstalkd, tmp_path):
    s = rockstalkd()
    conn = Line(s.port)
    try:
        assert conn.cmd("rockstalk-cluster-add 4 127.0.0.1:1")[0] == \
            "UNKNOWN_COMMAND"
        assert conn.cmd("rockstalk-cluster-remove 1")[0] == "UNKNOWN_COMMAND"
    finally:
        conn.close()
    spec = ",".join("%d@127.0.0.1:%d/%d" % (i, node_port(), node_port())
                    for i in (1, 2, 3, 4))
    r = subprocess.run([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(node_port()),
                        "-b", str(tmp_path / "d"), "--cluster", spec,
                        "--node-id", "1"], capture_output=True, timeout=20)
    assert r.returncode != 0
    assert b"a new cluster has 3 or 5" in r.stderr, r
    assert not os.path.exists(tmp_path / "d" / "CLUSTER")


def test_join_by_state_fetch_in_plaintext(tmp_path):
    """Plaintext nodes (loopback), a leader whose log no longer reaches
    back to the start (small snapshot threshold): the joining node gets a
    snapshot, fetches the state through a peer's client port and catches
    up; once it leads, a follower relays its clients to the client port
    its Raft address carries (/CLIENTPORT)."""
    c = new_cluster(tmp_path / "c", tls=False,
                    env={"ROCKSTALKD_RAFT_THRESHOLD": "64",
                         "ROCKSTALKD_RAFT_TRAILING": "16"})
    try:
        lead = c.wait_leader()
        conn = Line(c.node(lead).port)
        ids = [int(conn.cmd("put 0 0 60 3", b"abc")[0].split()[1])
               for _ in range(300)]
        conn.close()
        n4 = joiner(c, 4, [1, 2, 3])
        p = cli(c.node(lead).port, "cluster", "add",  # a name: the CLI
                "4@localhost:%d/%d" % (n4.raft_port, n4.port))  # resolves it
        assert p.returncode == 0 and b"ADDED 4" in p.stdout, p
        wait_for(lambda: "fetched the state" in log_of(n4), 30,
                 "node 4 fetching the state")
        c.wait_caught_up(4, 30)
        p = cli(n4.port, "cluster", "transfer", "4")
        assert p.returncode == 0, p
        other = next(nd for nd in c.nodes if nd.id != 4)
        conn = Line(other.port)  # relayed to node 4's client port
        try:
            assert all(conn.cmd("peek %d" % i)[0].startswith("FOUND")
                       for i in ids)
            assert conn.cmd("stats")[1].count(b"rockstalk-cluster-leader: 4")
        finally:
            conn.close()
    finally:
        c.stop()


def test_seed_a_cluster_from_a_standalone_backup(tmp_path):
    """Issue 28 item 4: a standalone server's backup (rockstalk backup)
    becomes the single voter of a new cluster (rockstalkd --seed); two
    nodes join and fetch the state; every job is there with its state,
    served by a node that joined."""
    from replay import wait_listening
    sport = node_port()
    sdir = str(tmp_path / "standalone")
    sp = subprocess.Popen([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(sport),
                           "-b", sdir], stdout=subprocess.DEVNULL,
                          stderr=subprocess.STDOUT)
    try:
        wait_listening("127.0.0.1", sport, sp)
        conn = Line(sport)
        ids = {}
        for i in range(60):
            ln = conn.cmd("put %d %d 60 4" % (i, 3600 if i % 3 == 1 else 0),
                          b"j%03d" % i)[0]
            ids[int(ln.split()[1])] = "delayed" if i % 3 == 1 else "ready"
        for _ in range(10):  # buried ones
            jid = int(conn.cmd("reserve-with-timeout 0")[0].split()[1])
            conn.line()  # its body
            assert conn.cmd("bury %d 5" % jid)[0] == "BURIED"
            ids[jid] = "buried"
        conn.close()
        c = new_cluster(tmp_path / "c", start=False, n=1)
        n1 = c.node(1)
        p = cli(sport, "backup", n1.dir)
        assert p.returncode == 0, p
    finally:
        sp.terminate()
        sp.wait(15)
    try:
        # a list with other members, or no backup, is refused
        spec = c.spec
        c.spec = spec + ",2@127.0.0.1:%d" % node_port()
        n1.flags = ["--seed"]
        r = subprocess.run(n1.argv(), capture_output=True, timeout=20)
        assert r.returncode != 0 and b"names this node alone" in r.stderr, r
        c.spec = spec
        n1.start()
        wait_for(lambda: "seeded: the first snapshot is on disk" in
                 log_of(n1), 15, "the seed's first snapshot")
        n2 = joiner(c, 2, [1])
        add(n1.port, n2)
        n3 = joiner(c, 3, [1, 2])
        add(n1.port, n3)
        for nd in (n2, n3):
            assert "fetched the state" in log_of(nd), nd.id
        c.wait_caught_up(3, 30)
        p = cli(n3.port, "cluster", "transfer", "3")
        assert p.returncode == 0, p
        conn = Line(n2.port)  # relayed to node 3, which joined
        try:
            for jid, state in ids.items():
                ln, body = conn.cmd("stats-job %d" % jid)
                assert ln.startswith("OK"), (jid, ln)
                assert b"state: " + state.encode() in body, (jid, body)
            assert conn.cmd("stats")[1].count(b"rockstalk-cluster-leader: 3")
            ln = conn.cmd("put 0 0 60 1", b"x")[0]  # ids go on above
            assert int(ln.split()[1]) > max(ids), ln
        finally:
            conn.close()
        # a cluster node's backup does not seed another cluster
        bdir = str(tmp_path / "from-cluster")
        p = cli(n2.port, "backup", bdir)
        assert p.returncode == 0, p
        r = subprocess.run(
            [ROCKSTALKD, "-l", "127.0.0.1", "-p", str(node_port()), "-b",
             bdir, "--cluster", "9@127.0.0.1:%d/1" % node_port(),
             "--node-id", "9", "--seed", "--cluster-insecure"],
            capture_output=True, timeout=20)
        assert r.returncode != 0, r
        assert b"comes from a cluster node" in r.stderr, r
    finally:
        c.stop()
