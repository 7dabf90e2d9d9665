"""The nodes' Raft ports under mutual TLS (cluster/peer.h): what a stranger
without a certificate, a stranger with a certificate of another CA, and a
peer whose certificate names another node id can do to a cluster. Each
sends the messages that hurt libraft 0.15 when they reach it (the review
of cluster mode, reproduced on this machine over the plaintext transport):

  install-snapshot-2^63   a configuration length of 2^63: SIGSEGV
  request-vote-max-term   term 2^64-1, disrupt-leader: no leader ever again
  append-result-forged    AppendEntriesResult claiming a voter: a leader
                          acknowledges puts no follower holds
  append-conflict         a conflicting previous term: a follower goes
                          UNAVAILABLE for good
  install-snapshot-forged replaces a follower's log before we can refuse it
  request-vote-ids        20 invented ids: 20 outbound connections
  append-same-term        a same-term AppendEntries to the leader: a call
                          through the claimed id as a pointer

Under mTLS none may have any effect: every node keeps running, the term
does not move, the leader stays, the connections are refused (counted in
rockstalk-cluster-peer-refused) and the cluster serves after them.
test_plaintext_gives_the_port_away proves the messages are live: over the
plaintext transport the first one kills a node.
"""
import os
import signal
import socket
import ssl
import struct
import subprocess
import time

import pytest

from cluster import ROOT, Cluster, make_certs
from test_hostile import INSTRUMENTED_SLACK_MIB, instrumented

U64 = 2 ** 64 - 1


def handshake(claim_id, addr=b"127.0.0.1:9"):
    """libraft 0.15's TCP handshake (uv_tcp_listen.c): protocol 1, the
    sender's id, its address padded to 8 bytes."""
    a = addr + b"\0" * (8 - len(addr) % 8)
    return struct.pack("<QQQ", 1, claim_id, len(a)) + a


def message(kind, header):
    """One libraft message: type, header length, header (uv_encoding.c)."""
    return struct.pack("<QQ", kind, len(header)) + header


def snapshot_header(term, conf_len, conf, data_len):
    return (struct.pack("<QQQQQ", term, 1, 10 ** 6, 1, conf_len) + conf +
            struct.pack("<Q", data_len))


def payloads(term, leader):
    """name -> bytes, each a handshake and the message(s) after it."""
    conf = b"\x01" + bytes(8)
    return {
        "install-snapshot-2^63": handshake(4242) + message(
            5, snapshot_header(term, 1 << 63, conf, 0).ljust(56, b"\0")),
        "request-vote-max-term": handshake(4242) + message(
            3, struct.pack("<QQQQQ", U64, 4242, 0, 0, 1)),
        "append-result-forged": handshake(leader % 3 + 1) + b"".join(
            message(2, struct.pack("<QQQ", term, 0, 1 << 40))
            for _ in range(20)),
        "append-conflict": handshake(leader) + message(
            1, struct.pack("<QQQQQ", term + 1, 1, 1 << 40, 0, 0)),
        "install-snapshot-forged": handshake(leader) + message(
            5, snapshot_header(term + 1, len(conf), conf, 24)) +
        struct.pack("<IIQ", 0x4e534b52, 1, 10 ** 6) + bytes(8),
        "request-vote-ids": b"".join(
            handshake(5000 + i, b"127.0.0.1:%d" % (20000 + i)) + message(
                3, struct.pack("<QQQQQ", term + 1, 5000 + i, 0, 0, 1))
            for i in range(20)),
        "append-same-term": handshake(0x4141414141414141) + message(
            1, struct.pack("<QQQQQ", term, 0, 0, 0, 0)),
    }


def fd_count(node):
    return len(os.listdir("/proc/%d/fd" % node.proc.pid))


def plain(node, data):
    """A stranger without TLS: sends data, waits until the node closes."""
    try:
        s = socket.create_connection(("127.0.0.1", node.raft_port), 5)
    except OSError:
        return  # a node restarting itself has its port closed a moment
    with s:
        s.settimeout(8)
        try:
            s.sendall(data)
            while s.recv(4096):
                pass
        except OSError:
            pass


def over_tls(node, data, cert=None, key=None):
    """A TLS client with the given certificate (or none), which trusts any
    server: returns once the node closed the connection. The handshake or
    the first read fails; data is sent if the handshake gets that far."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    try:
        raw = socket.create_connection(("127.0.0.1", node.raft_port), 5)
    except OSError:
        return
    with raw:
        raw.settimeout(8)
        try:
            with ctx.wrap_socket(raw) as s:
                s.sendall(data)
                while s.recv(4096):
                    pass
        except (OSError, ssl.SSLError):
            pass


def preamble(claim_id):
    """rockstalk's peer preamble (peer.h): magic, node id, channel 1."""
    return b"RSPEER01" + struct.pack("<QQ", claim_id, 1)


@pytest.fixture
def secure(tmp_path):
    c = Cluster(tmp_path / "c")
    yield c
    c.stop()


def settled_views(c, timeout=10.0):
    """The leader and term once every node knows both (a follower learns
    them with the leader's next heartbeat)."""
    end = time.monotonic() + timeout
    while True:
        lead = c.wait_leader()
        v = c.views()
        if all(x and x["term"] == v[lead]["term"] and x["leader"] == lead
               for x in v.values()):
            return lead, v[lead]["term"]
        assert time.monotonic() < end, v
        time.sleep(0.05)


def check_unmoved(c, lead, term, fds):
    """Every node alive, same leader and term, no descriptor kept, and the
    cluster acknowledges a put and hands it out."""
    for nd in c.nodes:
        assert nd.alive(), "node %d died: %r" % (nd.id, nd.proc.returncode)
    assert c.wait_leader() == lead
    v = c.views()
    assert {x["term"] for x in v.values()} == {term}, v
    time.sleep(0.5)
    for nd in c.nodes:
        assert fd_count(nd) <= fds[nd.id] + 2, (nd.id, fds, fd_count(nd))
    s = c.node(lead).connect()
    s.sendall(b"put 0 0 60 2\r\nok\r\nreserve-with-timeout 5\r\n")
    got = b""
    while got.count(b"\r\n") < 3:
        got += s.recv(4096)
    assert got.startswith(b"INSERTED ") and b"RESERVED " in got, got
    s.close()


def test_strangers_and_wrong_ids_change_nothing(secure, tmp_path):
    c = secure
    lead, term = settled_views(c)
    other = make_certs(str(tmp_path / "other-ca"), 3)
    fds = {nd.id: fd_count(nd) for nd in c.nodes}
    refused0 = {nd.id: c.node(nd.id).view()["refused"] for nd in c.nodes}
    sent = 0
    for name, data in payloads(term, lead).items():
        for nd in c.nodes:
            plain(nd, data)
            over_tls(nd, data)  # no certificate
            over_tls(nd, data, os.path.join(other, "node%d.pem" % nd.id),
                     os.path.join(other, "node%d.key" % nd.id))
            # a real node's certificate, claiming another voter's id
            liar = nd.id % 3 + 1
            claim = liar % 3 + 1
            over_tls(nd, preamble(claim) + data, c.cert(liar),
                     c.cert(liar, "key"))
            # a certificate of this CA for an id no voter has
            over_tls(nd, preamble(4) + data, c.cert(4), c.cert(4, "key"))
            sent += 5
        for nd in c.nodes:
            assert nd.alive(), "%s killed node %d" % (name, nd.id)
    check_unmoved(c, lead, term, fds)
    # each node's metrics text is published once a second
    end = time.monotonic() + 5
    while True:
        got = sum(c.node(n).view()["refused"] - refused0[n]
                  for n in refused0)
        if got >= sent or time.monotonic() > end:
            break
        time.sleep(0.2)
    assert got >= sent, (got, sent)


def test_forged_acks_acknowledge_nothing(secure, tmp_path):
    """With both followers dead, forged AppendEntriesResults from strangers
    and from a certificate of another CA do not make a majority: a put
    through the leader is not acknowledged, and the leader, which hears
    from no voter, stops leading (over plaintext the forged results kept a
    cut-off leader leading for ever)."""
    c = secure
    lead, term = settled_views(c)
    other = make_certs(str(tmp_path / "other-ca"), 3)
    for nd in c.nodes:
        if nd.id != lead:
            nd.kill9()
    ld = c.node(lead)
    s = ld.connect()
    s.sendall(b"put 0 0 60 5\r\nforge\r\n")
    forged = payloads(term, lead)["append-result-forged"]
    end = time.monotonic() + 4
    while time.monotonic() < end:
        plain(ld, forged)
        over_tls(ld, forged, os.path.join(other, "node2.pem"),
                 os.path.join(other, "node2.key"))
    s.settimeout(1)
    try:
        got = s.recv(4096)
    except OSError:
        got = b""
    assert not got.startswith(b"INSERTED"), got
    s.close()
    v = ld.view()
    assert v is None or v["role"] != "leader", v


def test_handshake_flood_and_slowloris_stay_bounded(secure):
    """200 connections that send nothing and 200 that send a ClientHello
    without a certificate: descriptors stay within the pending bound (64)
    while they last, the cluster commits meanwhile, and every descriptor
    is given back once the handshake deadline (5 s) passed; the node's
    memory grows by less than 16 MiB."""
    c = secure
    lead, term = settled_views(c)
    nd = c.node(lead % 3 + 1)
    fds, rss0 = fd_count(nd), rss_kib(nd)
    idle, peak = [], 0
    for _ in range(200):
        try:
            idle.append(socket.create_connection(("127.0.0.1",
                                                  nd.raft_port), 2))
        except OSError:
            pass
        peak = max(peak, fd_count(nd))
    for _ in range(200):
        over_tls(nd, b"x")
        peak = max(peak, fd_count(nd))
    assert peak <= fds + 64 + 4, (fds, peak)
    ld = c.node(lead).connect()
    ld.sendall(b"put 0 0 60 5\r\nflood\r\n")
    ld.settimeout(5)
    assert ld.recv(4096).startswith(b"INSERTED "), "no commit in the flood"
    ld.close()
    time.sleep(6)
    assert fd_count(nd) <= fds + 2, (fds, fd_count(nd))
    bound_mib = 16
    if instrumented(nd.proc.pid):  # ASan's quarantine keeps freed memory
        bound_mib = bound_mib * 4 + INSTRUMENTED_SLACK_MIB
    assert rss_kib(nd) - rss0 < bound_mib * 1024, (rss0, rss_kib(nd))
    for s in idle:
        s.close()
    check_unmoved(c, lead, term, {n.id: fd_count(n) for n in c.nodes})


def rss_kib(node):
    with open("/proc/%d/status" % node.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_plaintext_gives_the_port_away(tmp_path):
    """What --cluster-insecure gives up: over libraft's own transport the
    first message above kills a node (the bytes the tests send are live)."""
    c = Cluster(tmp_path / "plain", tls=False)
    try:
        lead, term = settled_views(c)
        nd = c.node(lead % 3 + 1)
        plain(nd, payloads(term, lead)["install-snapshot-2^63"])
        try:
            rc = nd.proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        with open(nd.dir + ".log", "rb") as f:
            log = f.read()[-1500:]
        # SIGSEGV (-11) in libraft's decoder, as reproduced; any death of
        # the node proves the same
        assert rc is not None and rc != 0, (rc, log)
    finally:
        c.stop()


def run(args, timeout=10):
    return subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout)


def test_start_refuses_without_credentials_off_loopback(tmp_path):
    rsd = os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd"))
    spec = "1@10.9.9.1:7001,2@10.9.9.2:7001,3@10.9.9.3:7001"
    r = run([rsd, "-b", str(tmp_path / "d"), "--cluster", spec,
             "--node-id", "1"])
    assert r.returncode == 1
    assert "off loopback" in r.stderr and "--cluster-insecure" in r.stderr
    certs = make_certs(str(tmp_path / "certs"), 3)
    base = [rsd, "-b", str(tmp_path / "d"), "--cluster", spec, "--node-id",
            "1", "--cluster-ca", os.path.join(certs, "ca.pem")]
    r = run(base + ["--cluster-cert", os.path.join(certs, "node1.pem")])
    assert r.returncode == 1 and "go together" in r.stderr, r.stderr
    r = run(base + ["--cluster-cert", os.path.join(certs, "node2.pem"),
                    "--cluster-key", os.path.join(certs, "node2.key"),
                    "--cluster-insecure"])
    assert r.returncode == 1 and "contradicts" in r.stderr, r.stderr


def server_cert(node, cert, key):
    """The DER certificate node presents on its Raft port to a client with
    a valid certificate (cert, key)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert, key)
    with socket.create_connection(("127.0.0.1", node.raft_port), 5) as raw:
        with ctx.wrap_socket(raw) as s:
            return s.getpeercert(binary_form=True)


def der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def wait_log(node, text, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(node.dir + ".log", "rb") as f:
            if text.encode() in f.read():
                return
        time.sleep(0.1)
    raise AssertionError("no %r in %s.log" % (text, node.dir))


def test_sighup_rereads_the_certificates(secure, tmp_path):
    """Bad files on SIGHUP keep the old credentials (logged); good ones are
    used by the next connection; a key readable by others is warned of."""
    c = secure
    lead, term = settled_views(c)
    nd = c.node(lead % 3 + 1)
    pem, key = c.cert(nd.id), c.cert(nd.id, "key")
    assert server_cert(nd, c.cert(lead), c.cert(lead, "key")) == der(pem)
    with open(pem, "rb") as f:
        old_pem = f.read()
    with open(pem, "wb") as f:
        f.write(b"not a certificate\n")
    nd.proc.send_signal(signal.SIGHUP)
    wait_log(nd, "SIGHUP: cluster certificates kept")
    # another node's certificate and key: refused, the old ones kept
    with open(key, "rb") as f:
        old_key = f.read()
    other = lead
    with open(c.cert(other), "rb") as f, open(pem, "wb") as g:
        g.write(f.read())
    with open(c.cert(other, "key"), "rb") as f, open(key, "wb") as g:
        g.write(f.read())
    nd.proc.send_signal(signal.SIGHUP)
    wait_log(nd, "does not name node %d" % nd.id)
    assert server_cert(nd, c.cert(lead), c.cert(lead, "key")) == \
        ssl.PEM_cert_to_DER_cert(old_pem.decode())
    with open(pem, "wb") as f:
        f.write(old_pem)
    with open(key, "wb") as f:
        f.write(old_key)
    # a new key and certificate for the same node from the same CA
    new_pem, new_key = reissue(c, nd.id, str(tmp_path))
    os.replace(new_pem, pem)
    os.replace(new_key, key)
    os.chmod(key, 0o644)
    nd.proc.send_signal(signal.SIGHUP)
    wait_log(nd, "SIGHUP: cluster certificates re-read")
    wait_log(nd, "is readable by group or others")
    assert server_cert(nd, c.cert(lead), c.cert(lead, "key")) == der(pem)
    assert nd.alive()
    check_unmoved(c, lead, term, {n.id: fd_count(n) + 4 for n in c.nodes})


def reissue(c, nid, scratch):
    """A new key and certificate for node nid signed by c's CA (openssl),
    in scratch; returns their paths."""
    key = os.path.join(scratch, "re%d.key" % nid)
    csr = os.path.join(scratch, "re%d.csr" % nid)
    pem = os.path.join(scratch, "re%d.pem" % nid)
    ext = os.path.join(scratch, "re%d.ext" % nid)
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:rockstalk-node-%d\n"
                "extendedKeyUsage=serverAuth,clientAuth\n" % nid)
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", csr,
                    "-subj", "/CN=rockstalk-node-%d" % nid],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", c.cert(0),
                    "-CAkey", c.cert(0, "key"), "-CAcreateserial",
                    "-days", "2", "-extfile", ext, "-out", pem],
                   check=True, capture_output=True)
    return pem, key


def test_a_node_with_another_nodes_certificate_is_refused(tmp_path):
    c = Cluster(tmp_path / "c", start=False)
    nd = c.node(1)
    argv = nd.argv()
    i = argv.index("--cluster-cert")
    argv[i + 1], argv[i + 3] = c.cert(2), c.cert(2, "key")
    r = run(argv)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "names node 2" in r.stdout + r.stderr, r.stdout + r.stderr


def test_relays_and_snapshots_use_the_peer_links(tmp_path):
    """With mutual TLS a follower relays its clients to the leader over the
    authenticated peer links, not to the leader's client port: with every
    /CLIENTPORT pointing at a closed port, clients on a follower are still
    served. rockstalk-snapshot on a client port is refused (the state goes
    to authenticated peers only): by the leader, and by a node without a
    leader, where it waits unread as any other connection."""
    c = Cluster(tmp_path / "c", start=False)
    closed = node_port_closed()
    c.spec = ",".join(item.split("/")[0] + "/%d" % closed
                      for item in c.spec.split(","))
    for nd in c.nodes:
        nd.start(wait=False)
    try:
        for nd in c.nodes:
            wait_listening_node(nd)
        lead = c.wait_leader()
        f = c.follower()
        s = f.connect()
        s.sendall(b"put 0 0 60 5\r\nhello\r\nreserve-with-timeout 5\r\n")
        got = b""
        while got.count(b"\r\n") < 3:
            chunk = s.recv(4096)
            assert chunk, got
            got += chunk
        assert got.startswith(b"INSERTED ") and b"RESERVED " in got, got
        s.close()
        s = c.node(lead).connect()
        s.sendall(b"rockstalk-snapshot\r\n")
        s.settimeout(5)
        assert s.recv(4096) == b"UNKNOWN_COMMAND\r\n"
        s.close()
        for nd in c.nodes:
            if nd.id != f.id:
                nd.kill9()
        end = time.monotonic() + 10
        while (f.view() or {}).get("leader", 1) != 0:
            assert time.monotonic() < end, f.view()
            time.sleep(0.05)
        s = f.connect()
        s.sendall(b"rockstalk-snapshot\r\n")
        s.settimeout(1)
        with pytest.raises(socket.timeout):
            s.recv(4096)
        s.close()
    finally:
        c.stop()


def node_port_closed():
    """A loopback port nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening_node(nd, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", nd.port), 1).close()
            return
        except OSError:
            assert nd.alive(), open(nd.dir + ".log").read()[-2000:]
            time.sleep(0.05)
    raise AssertionError("node %d does not listen" % nd.id)
