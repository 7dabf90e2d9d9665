"""Cluster mode against misbehaving peers, clients and configurations
(three rockstalkd nodes on loopback, tests/cluster.py). Each test names
what it guards against: a node that must stop rather than linger, a
resource that must stay bounded, a descriptor that must not leak, a peer
that must be found dead.

These clusters run without certificates (plaintext, allowed on loopback):
the tests reach libraft's own transport with forged messages, relays on
the leader's client port and rockstalk-snapshot there, which is what a
cluster without mutual TLS does. The mutual-TLS paths are
test_peer_security.py's."""
import ctypes
import os
import signal
import socket
import ssl
import struct
import subprocess
import time

import pytest

from cluster import ROCKSTALKD, Cluster, make_certs, node_port
from replay import free_port

# libraft 0.15's uv TCP transport (src/uv_tcp_connect.c, uv_encoding.c)
RAFT_HANDSHAKE_PROTOCOL = 1
RAFT_IO_APPEND_ENTRIES = 1
SNAPSHOT_REQ = b"rockstalk-snapshot\r\n"
O_CLOEXEC = 0o2000000


@pytest.fixture
def cluster(tmp_path):
    made = []

    def start(*flags, env=None):
        c = Cluster(tmp_path / ("c%d" % len(made)), flags, env, tls=False)
        made.append(c)
        return c

    yield start
    for c in made:
        c.stop()


def node_log(node):
    with open(node.dir + ".log", "rb") as f:
        return f.read()


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def line(s):
    """One reply line from socket s (blocking), without CRLF; b"" on EOF."""
    buf = b""
    while not buf.endswith(b"\r\n"):
        chunk = s.recv(1)
        if not chunk:
            return buf
        buf += chunk
    return buf[:-2]


def put_bodies(node, count, size):
    with node.connect(30) as s:
        s.settimeout(30)
        for i in range(count):
            body = b"%08d" % i + b"x" * (size - 8)
            s.sendall(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
            r = line(s)
            assert r.startswith(b"INSERTED"), r


def closed_at_once(s, timeout=2.0):
    """Whether the server closed s without answering a command."""
    s.settimeout(timeout)
    try:
        s.sendall(b"list-tube-used\r\n")
        return s.recv(64) == b""
    except ConnectionError:
        return True


def serves(s):
    s.settimeout(5)
    s.sendall(b"list-tube-used\r\n")
    return line(s) == b"USING default"


def node_serves(node):
    """Whether a new connection to node is served (relayed or not)."""
    try:
        with node.connect() as s:
            return serves(s)
    except OSError:
        return False


def stalled_snapshot(node):
    """A connection that asks node for the snapshot stream with a tiny
    receive buffer and then reads nothing more than the first reply line;
    returns (socket, that line)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", node.port))
    s.sendall(SNAPSHOT_REQ)
    return s, line(s)


# ---- dead-peer detection ----

_libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_getfd = 438  # x86_64 and most others (the generic table)


def their_sockets(pid):
    """Copies of pid's TCP sockets (pidfd_getfd): [socket]."""
    pidfd = os.pidfd_open(pid)
    out = []
    try:
        for name in os.listdir("/proc/%d/fd" % pid):
            try:
                what = os.readlink("/proc/%d/fd/%s" % (pid, name))
            except FileNotFoundError:
                continue
            if not what.startswith("socket:"):
                continue
            fd = _libc.syscall(SYS_pidfd_getfd, pidfd, int(name), 0)
            if fd < 0:
                continue
            sk = socket.socket(fileno=fd)
            if sk.family == socket.AF_INET and sk.type == socket.SOCK_STREAM:
                out.append(sk)
            else:
                sk.close()
    finally:
        os.close(pidfd)
    return out


def peer_port(sk):
    try:
        return sk.getpeername()[1]
    except OSError:  # a listening socket
        return None


def find(socks, local, peer):
    for sk in socks:
        if sk.getsockname()[1] == local and peer_port(sk) == peer:
            return sk
    raise AssertionError("no socket %s -> %s" % (local, peer))


def assert_keepalive(sk):
    opt = sk.getsockopt
    got = (opt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
           opt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
           opt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
           opt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
           opt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))
    assert got == (1, 30, 10, 3, 60000), (sk, got)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd_open")
def test_client_and_relay_sockets_detect_dead_peers(cluster):
    """Keepalive (30 s, every 10 s, 3 probes) and TCP_USER_TIMEOUT (60 s)
    on the live sockets: a client's on the leader, and for a client on a
    follower all three of its hops (accepted by the follower, the
    follower's relay to the leader, and the leader's accepted end of it,
    which is what keeps taking jobs when the follower is cut off)."""
    c = cluster()
    leader = c.node(c.wait_leader())
    f = c.follower()
    direct = leader.connect()
    relayed = f.connect()
    assert serves(direct) and serves(relayed)
    on_leader = their_sockets(leader.proc.pid)
    on_follower = their_sockets(f.proc.pid)
    try:
        assert_keepalive(find(on_leader, leader.port,
                              direct.getsockname()[1]))
        assert_keepalive(find(on_follower, f.port,
                              relayed.getsockname()[1]))
        ups = [sk for sk in on_follower if peer_port(sk) == leader.port]
        assert ups, "no relay to the leader on the follower"
        for up in ups:
            assert_keepalive(up)
            assert_keepalive(find(on_leader, leader.port,
                                  up.getsockname()[1]))
    finally:
        for sk in on_leader + on_follower:
            sk.close()
        direct.close()
        relayed.close()


# ---- libraft's UNAVAILABLE state is a failure ----

def raft_message(raft_port, from_id, from_addr, mtype, header):
    """Connects to a node's Raft port as voter from_id (libraft's
    handshake: protocol, id, address length, the address padded to 8
    bytes) and sends one message (type, header length, header)."""
    addr = from_addr.encode() + b"\0"
    addr += b"\0" * (-len(addr) % 8)
    s = socket.create_connection(("127.0.0.1", raft_port), 5)
    s.sendall(struct.pack("<QQQ", RAFT_HANDSHAKE_PROTOCOL, from_id,
                          len(addr)) + addr)
    s.sendall(struct.pack("<QQ", mtype, len(header)) + header)
    return s


def test_unavailable_raft_node_exits(cluster):
    """An AppendEntries in the current term whose previous entry, at the
    follower's commit index, has another term makes libraft 0.15 turn the
    follower off for good (RAFT_UNAVAILABLE). The follower must not stay up
    answering nobody: it logs why and exits with status 2, and the other
    two go on serving."""
    c = cluster()
    lead = c.wait_leader()
    put_bodies(c.node(lead), 5, 16)
    f = c.follower()
    c.wait_caught_up(f.id)
    v = f.view()
    assert v["commit"] >= 1, v
    leader = c.node(lead)
    # term, prev_log_index, prev_log_term, leader_commit, no entries (and
    # the 8 bytes libraft's encoder counts for a leader id it never writes)
    ae = struct.pack("<QQQQQQ", v["term"], v["commit"], 1 << 40,
                     v["commit"], 0, 0)
    s = raft_message(f.raft_port, lead, "127.0.0.1:%d" % leader.raft_port,
                     RAFT_IO_APPEND_ENTRIES, ae)
    try:
        rc = f.proc.wait(10)
    finally:
        s.close()
    log = node_log(f)
    assert rc == 2, log[-2000:]
    assert b"the Raft node failed" in log and b"UNAVAILABLE" in log, \
        log[-2000:]
    assert c.wait_leader() in (1, 2, 3)


def refused_start(args, started):
    """Runs rockstalkd with args, expecting it to exit within 10 s; returns
    (exit status, its output as text). Fails with started if it does not
    exit."""
    p = subprocess.Popen([ROCKSTALKD] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(started)
    return p.returncode, out.decode()


# ---- a node whose relays would come back to itself ----

@pytest.mark.parametrize("listen", [["-l", "127.0.0.1"], []])
def test_relay_to_itself_refused(tmp_path, listen):
    """Voters on 127.0.0.1 with no /CLIENTPORT: a follower would relay its
    clients to 127.0.0.1 on its own -p, that is to itself, again and again
    until it runs out of descriptors. The node refuses to start (exit 1),
    naming a voter and /CLIENTPORT, before it touches its directory; on a
    wildcard listening address (the default) as on 127.0.0.1."""
    raft = [node_port() for _ in range(3)]
    spec = ",".join("%d@127.0.0.1:%d" % (i + 1, p) for i, p in
                    enumerate(raft))
    d = str(tmp_path / "n1")
    rc, out = refused_start(listen + ["-p", str(node_port()), "-b", d,
                                      "--cluster", spec, "--node-id", "1"],
                            "the node started and relays to itself")
    assert rc == 1, out
    assert "voter 2" in out and "/CLIENTPORT" in out, out
    assert not os.path.exists(os.path.join(d, "CLUSTER")), out


@pytest.mark.parametrize("tls", [False, True])
def test_raft_port_in_use_is_named(tmp_path, tls):
    """A node whose Raft port is taken cannot start; its log must say why
    (libraft 0.15 leaves its own message empty and keeps the transport's
    apart: the node printed "raft start in DIR: " and nothing more)."""
    raft = [node_port() for _ in range(3)]
    spec = ",".join("%d@127.0.0.1:%d/%d" % (i + 1, p, node_port())
                    for i, p in enumerate(raft))
    flags = []
    if tls:
        certs = str(tmp_path / "certs")
        make_certs(certs, 3)
        flags = ["--cluster-cert", os.path.join(certs, "node1.pem"),
                 "--cluster-key", os.path.join(certs, "node1.key"),
                 "--cluster-ca", os.path.join(certs, "ca.pem")]
    taken = socket.socket()
    taken.bind(("127.0.0.1", raft[0]))
    taken.listen(1)
    try:
        rc, out = refused_start(["-l", "127.0.0.1", "-p", str(node_port()),
                                 "-b", str(tmp_path / "n1"), "--cluster",
                                 spec, "--node-id", "1"] + flags,
                                "the node started on a taken Raft port")
    finally:
        taken.close()
    assert rc != 0, out
    line = [x for x in out.splitlines() if "raft start in" in x]
    assert line, out
    # the address it could not listen on, and why (the plaintext transport
    # of libraft gives no reason of its own; the mutual-TLS one does)
    assert "127.0.0.1:%d" % raft[0] in line[0] or "in use" in line[0], out
    assert "in use" in line[0], out


# ---- --max-connections on a follower ----

def test_follower_counts_relayed_and_parked(cluster):
    """A follower started with --max-connections 4 (the leader has no
    limit) holds at most 4 client connections, relayed or waiting for a
    leader: the 5th is closed at once, as the leader would close it."""
    c = cluster()
    c.wait_leader()
    f = c.follower()
    f.stop()
    f.flags = ["--max-connections", "4"]
    f.start()
    c.wait_caught_up(f.id)
    held = [f.connect() for _ in range(4)]
    assert all(serves(s) for s in held)  # relayed to the leader
    extra = f.connect()
    assert closed_at_once(extra), "a 5th relayed connection was served"
    extra.close()
    held.pop().close()  # a slot comes free once its relay ends
    wait_for(lambda: node_serves(f), 5, "a relay slot to come free")

    # no leader known: connections wait, and count as well
    for s in held:
        s.close()
    others = [nd for nd in c.nodes if nd is not f]
    for nd in others:
        nd.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: (f.view() or {}).get("leader", 1) == 0, 10,
                 "the follower to know no leader")
        time.sleep(0.3)  # the relays of the probes above are closed
        parked = [f.connect() for _ in range(4)]
        extra = f.connect()
        assert closed_at_once(extra), "a 5th waiting connection was kept"
        for s in parked:  # they wait (nothing is read) and stay open
            s.settimeout(0.5)
            s.sendall(b"list-tube-used\r\n")
            with pytest.raises(socket.timeout):
                s.recv(64)
        for s in parked + [extra]:
            s.close()
    finally:
        for nd in others:
            nd.proc.send_signal(signal.SIGCONT)


# ---- close-on-exec ----

def without_cloexec(pid):
    """The descriptors of pid above 2 that lack O_CLOEXEC: [(fd, what)]."""
    out = []
    for name in os.listdir("/proc/%d/fdinfo" % pid):
        if int(name) <= 2:
            continue
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, name)) as f:
                flags = next(ln for ln in f if ln.startswith("flags:"))
            what = os.readlink("/proc/%d/fd/%s" % (pid, name))
        except (FileNotFoundError, ProcessLookupError):
            continue  # closed meanwhile
        if not int(flags.split()[1], 8) & O_CLOEXEC:
            out.append((int(name), what))
    return out


def socket_inodes(pid):
    out = set()
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            what = os.readlink("/proc/%d/fd/%s" % (pid, name))
        except FileNotFoundError:
            continue
        if what.startswith("socket:["):
            out.add(int(what[8:-1]))
    return out


def server_inode(server_port, client_port):
    """The inode of the server side of a loopback TCP connection, from
    /proc/net/tcp; 0 if none (or orphaned)."""
    with open("/proc/net/tcp") as f:
        next(f)
        for row in f:
            col = row.split()
            if int(col[1].split(":")[1], 16) == server_port and \
                    int(col[2].split(":")[1], 16) == client_port:
                return int(col[9])
    return 0


def test_only_the_listening_socket_crosses_exec(cluster):
    """Every descriptor of a serving leader, a stalled snapshot stream's
    included, is close-on-exec, and so are a follower's (relays); a leader
    paused until it is deposed restarts itself (execv) with none of its
    old descriptors but the listening socket: the stream's socket is gone
    from the new image."""
    c = cluster("-z", "1048576")
    lead = c.wait_leader()
    old = c.node(lead)
    put_bodies(old, 48, 256 << 10)
    s, r = stalled_snapshot(old)
    assert r.startswith(b"SNAPSHOT "), r
    inode = server_inode(old.port, s.getsockname()[1])
    assert inode and inode in socket_inodes(old.proc.pid)
    f = c.follower()
    relayed = f.connect()
    assert serves(relayed)
    assert without_cloexec(old.proc.pid) == []
    assert without_cloexec(f.proc.pid) == []

    old.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: any((c.node(n).view() or {}).get("role") ==
                             "leader" for n in (1, 2, 3) if n != lead),
                 15, "another leader")
    finally:
        old.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: b"restarting as a follower" in node_log(old), 15,
             "the old leader to step down")
    c.wait_caught_up(lead, timeout=30)
    assert old.alive()
    assert without_cloexec(old.proc.pid) == []
    assert inode not in socket_inodes(old.proc.pid)
    s.close()
    relayed.close()


# ---- rockstalk-snapshot: bounded senders, send timeout, bounded stop ----

def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def test_snapshot_senders_bounded_and_stop_bounded(cluster):
    """20 clients ask the leader for its 12 MiB state and never read: two
    get a stream, 18 get OUT_OF_MEMORY (their connections stay usable);
    the leader runs two sender threads more, not 20; SIGTERM stops it
    within a few seconds although both streams are stalled."""
    c = cluster("-z", "1048576")
    lead = c.wait_leader()
    leader = c.node(lead)
    put_bodies(leader, 48, 256 << 10)
    time.sleep(1.0)  # RocksDB's flushes of the puts start their threads
    base = threads(leader.proc.pid)
    conns = [stalled_snapshot(leader) for _ in range(20)]
    time.sleep(1.0)
    grown = threads(leader.proc.pid) - base
    print("threads: %d before, %d more with 20 requests" % (base, grown))
    assert grown <= 2 + 2, grown  # 2 senders (and slack for RocksDB's)
    replies = [r for _, r in conns]
    streams = [r for r in replies if r.startswith(b"SNAPSHOT ")]
    refused = [r for r in replies if r == b"OUT_OF_MEMORY"]
    assert len(streams) == 2 and len(refused) == 18, replies
    s = next(s for s, r in conns if r == b"OUT_OF_MEMORY")
    assert serves(s)  # refused, not closed
    t0 = time.monotonic()
    leader.proc.send_signal(signal.SIGTERM)
    try:
        rc = leader.proc.wait(15)
    finally:
        for s, _ in conns:
            s.close()
    took = time.monotonic() - t0
    print("stopped %.2f s after SIGTERM, status %d" % (took, rc))
    assert rc == 0, node_log(leader)[-2000:]
    assert took < 8.0, took


def test_snapshot_send_timeout_frees_a_sender(cluster):
    """A sender whose reader takes nothing fails once its send timeout
    (here 2 s, ROCKSTALKD_SNAPSHOT_SEND_TIMEOUT) passes, releasing its
    RocksDB snapshot and its slot: a later request gets a stream again."""
    c = cluster("-z", "1048576",
                env={"ROCKSTALKD_SNAPSHOT_SEND_TIMEOUT": "2"})
    leader = c.node(c.wait_leader())
    put_bodies(leader, 48, 256 << 10)
    held = [stalled_snapshot(leader) for _ in range(2)]
    assert all(r.startswith(b"SNAPSHOT ") for _, r in held), held
    s, r = stalled_snapshot(leader)
    s.close()
    assert r == b"OUT_OF_MEMORY", r
    t0 = time.monotonic()
    got = None
    while time.monotonic() < t0 + 20 and got is None:
        time.sleep(0.5)
        s, r = stalled_snapshot(leader)
        s.close()
        if r.startswith(b"SNAPSHOT "):
            got = time.monotonic() - t0
    for s, _ in held:
        s.close()
    assert got is not None, "no sender slot came free in 20 s"
    print("a sender slot came free %.1f s after the streams stalled" % got)


def test_snapshot_from_a_node_that_does_not_serve(cluster):
    """A node that does not serve, here left alone without a leader,
    answers a peer's rockstalk-snapshot on its client port itself, as the
    serving leader does (the fetching peer may be the vote it needs to
    serve): SNAPSHOT with its applied index and the stream, two at most
    (a third, sent in two pieces, gets OUT_OF_MEMORY, and its connection
    still waits and is still heard). A connection that says anything else
    waits for a leader unread, as before, and is served once there is one
    again."""
    c = cluster("-z", "1048576")
    leader = c.node(c.wait_leader())
    put_bodies(leader, 48, 256 << 10)
    f = c.follower()
    c.wait_caught_up(f.id)
    dead = [nd for nd in c.nodes if nd.id != f.id]
    for nd in dead:
        nd.kill9()
    wait_for(lambda: (f.view() or {}).get("leader", 1) == 0, 10,
             "the lone node to know no leader")
    other = f.connect()
    other.settimeout(1.0)
    other.sendall(b"list-tube-used\r\n")
    held = [stalled_snapshot(f) for _ in range(2)]
    for s, r in held:
        assert r.startswith(b"SNAPSHOT "), r
        assert int(r.split()[1]) >= 48, r  # one entry a put at least
    s = f.connect()
    s.settimeout(10)
    s.sendall(SNAPSHOT_REQ[:7])
    time.sleep(0.2)
    s.sendall(SNAPSHOT_REQ[7:])
    assert line(s) == b"OUT_OF_MEMORY"
    s.sendall(SNAPSHOT_REQ)
    assert line(s) == b"OUT_OF_MEMORY"
    with pytest.raises(socket.timeout):
        other.recv(64)  # waits for a leader, unread
    for x in [s] + [h for h, _ in held]:
        x.close()
    assert b"cluster: sending the state as of entry" in node_log(f)
    for nd in dead:
        nd.start(wait=False)
    other.settimeout(8.0)  # within the 10 s a connection may wait
    assert line(other) == b"USING default"
    other.close()


def test_snapshot_only_on_a_plain_tcp_port(tmp_path):
    """Without TLS between the nodes, the serving leader streams its state
    on its plain TCP client port only, where a peer asks for it: over a
    tls:// listener the raw stream would go under the client's TLS
    session, and on a unix: socket no peer asks. Both answer
    UNKNOWN_COMMAND, and the session goes on."""
    certs = make_certs(str(tmp_path / "certs"), 1)
    c = Cluster(tmp_path / "c", start=False, tls=False)
    tls_ports = {}
    try:
        for nd in c.nodes:
            tls_ports[nd.id] = free_port()
            nd.flags = ["--listen", "tls://127.0.0.1:%d" % tls_ports[nd.id],
                        "--listen", "unix:%s/n%d.sock" % (tmp_path, nd.id),
                        "--tls-cert", os.path.join(certs, "node1.pem"),
                        "--tls-key", os.path.join(certs, "node1.key")]
            nd.start(wait=False)
        lead = c.wait_leader()
        leader = c.node(lead)
        wait_for(lambda: node_serves(leader), 20, "the leader serving")
        ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
        ctx.check_hostname = False
        t = ctx.wrap_socket(socket.create_connection(
            ("127.0.0.1", tls_ports[lead]), 10))
        u = socket.socket(socket.AF_UNIX)
        u.settimeout(10)
        u.connect("%s/n%d.sock" % (tmp_path, lead))
        for s in (t, u):
            s.sendall(SNAPSHOT_REQ)
            assert line(s) == b"UNKNOWN_COMMAND"
            s.sendall(b"list-tube-used\r\n")
            assert line(s) == b"USING default"
            s.close()
        s, r = stalled_snapshot(leader)  # the plain port still streams
        s.close()
        assert r.startswith(b"SNAPSHOT "), r
    finally:
        c.stop()
