"""The multiplexed relay (the default with mTLS between the nodes;
ROCKSTALKD_RELAY_MUX=0 turns it off; cluster/muxrelay.h,
muxserve.h): a follower's plaintext clients reach the leader as streams of
one mutual-TLS link. Its own risks: many clients on one link, a client
that does not read stalling the others, the link's end closing every
client. The protocol through it is the follower suites' (make
ptest-follower with the same variable)."""
import socket
import ssl
import struct
import time

import pytest

from cluster import Cluster
from test_cluster_peer import line

MUX = {"ROCKSTALKD_RELAY_MUX": "1"}


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path / "c", (), MUX)
    yield c
    c.stop()


def established_to(port):
    """TCP connections on this host whose remote port is port."""
    n = 0
    for path in ("/proc/net/tcp",):
        with open(path) as f:
            for row in f.readlines()[1:]:
                f_ = row.split()
                if f_[3] == "01" and int(f_[2].split(":")[1], 16) == port:
                    n += 1
    return n


def put_reserve(s, body):
    s.sendall(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    assert line(s).startswith(b"INSERTED")


def test_many_clients_share_one_link(cluster):
    f = cluster.follower()
    lead = cluster.node(cluster.wait_leader())
    before = established_to(lead.raft_port)
    socks = [f.connect() for _ in range(30)]
    try:
        for i, s in enumerate(socks):
            s.settimeout(10)
            put_reserve(s, b"job%d" % i)
        # the per-client relay would hold 30 more links to the leader
        assert established_to(lead.raft_port) <= before + 2
        with lead.connect() as s:
            s.settimeout(10)
            s.sendall(b"stats\r\n")
            head = line(s)
            body = s.recv(int(head.split()[1]) + 2, socket.MSG_WAITALL)
        conns = int(body.split(b"current-connections: ")[1].split()[0])
        assert conns >= 31  # every stream is one of its connections
    finally:
        for s in socks:
            s.close()


def test_non_reading_client_does_not_stall_another(cluster):
    f = cluster.follower()
    hog = f.connect()
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        hog.settimeout(10)
        put_reserve(hog, b"x" * 60000)
        # pipelined peeks it never reads: megabytes of replies
        hog.sendall(b"peek-ready\r\n" * 200)
        time.sleep(1.0)
        with f.connect() as s:
            s.settimeout(5)
            t0 = time.monotonic()
            for i in range(50):
                put_reserve(s, b"small%d" % i)
            assert time.monotonic() - t0 < 5
    finally:
        hog.close()


def test_leader_dying_closes_every_relayed_client(cluster):
    f = cluster.follower()
    lead = cluster.node(cluster.wait_leader())
    socks = [f.connect() for _ in range(5)]
    for s in socks:
        s.settimeout(10)
        put_reserve(s, b"a")
    lead.kill9()
    for s in socks:
        try:
            assert s.recv(64) == b""
        except ConnectionError:
            pass
        s.close()


def test_leader_counts_streams_in_max_connections(tmp_path):
    c = Cluster(tmp_path / "m", ("--max-connections", "4"), MUX)
    try:
        f = c.follower()
        lead = c.node(c.wait_leader())
        time.sleep(0.5)  # the probes' connections are gone
        mine = [lead.connect() for _ in range(4)]  # the leader is full
        for s in mine:
            s.settimeout(5)
            s.sendall(b"list-tube-used\r\n")
            assert line(s) == b"USING default"
        with f.connect() as s:  # its stream is refused: closed at once
            s.settimeout(5)
            try:
                s.sendall(b"list-tube-used\r\n")
                assert s.recv(64) == b""
            except ConnectionError:
                pass
        mine.pop().close()
        time.sleep(0.3)
        with f.connect() as s:
            s.settimeout(5)
            s.sendall(b"list-tube-used\r\n")
            assert line(s) == b"USING default"
        for s in mine:
            s.close()
    finally:
        c.stop()


def frame(kind, sid, payload=b""):
    return bytes([kind]) + struct.pack("<I", sid) + \
        len(payload).to_bytes(3, "little") + payload


def read_frame(s):
    head = b""
    while len(head) < 8:
        chunk = s.recv(8 - len(head))
        if not chunk:
            return None
        head += chunk
    n = int.from_bytes(head[5:8], "little")
    body = b""
    while len(body) < n:
        body += s.recv(n - len(body))
    return head[0], struct.unpack("<I", head[1:5])[0], body


def test_a_malformed_frame_ends_the_link_only(cluster):
    """A peer (a voter's certificate and preamble, channel 6) gets its
    stream served; a malformed frame then closes its link, and the leader
    goes on serving."""
    lead_id = cluster.wait_leader()
    lead = cluster.node(lead_id)
    me = next(nd.id for nd in cluster.nodes if nd.id != lead_id)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cluster.cert(me), cluster.cert(me, "key"))
    raw = socket.create_connection(("127.0.0.1", lead.raft_port), 5)
    with ctx.wrap_socket(raw) as s:
        s.settimeout(10)
        s.sendall(b"RSPEER01" + struct.pack("<QQ", me, 6) +
                  frame(1, 5, b"\x00\x00") +
                  frame(2, 5, b"list-tube-used\r\n"))
        assert read_frame(s) == (2, 5, b"USING default\r\n")
        s.sendall(frame(2, 5, b"x" * 10) + frame(9, 5, b"junk"))
        try:
            assert s.recv(64) == b""
        except (ConnectionError, ssl.SSLError):
            pass
    with lead.connect() as c:
        c.settimeout(5)
        c.sendall(b"list-tube-used\r\n")
        assert line(c) == b"USING default"
