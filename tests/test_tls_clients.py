"""TLS for clients (issue 32, item 2): tls:// listeners with --tls-cert and
--tls-key, mutual TLS with --tls-ca, and the protocol over TLS exactly as
over plaintext (every exchange in protocol/exchanges replayed through a
tls:// listener: pipelining, large bodies, bytewise input, several
connections).

Certificates: scripts/cluster-certs.sh makes a CA and certificates (the
server presents node1's); client certificates with a chosen CN are signed
by that CA with the openssl CLI; another CA's come from a second run."""
import glob
import hashlib
import os
import signal
import socket
import ssl
import subprocess
import time

import pytest

import replay
from cluster import Cluster, make_certs
from conftest import free_port, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCHANGES = sorted(glob.glob(os.path.join(ROOT, "protocol", "exchanges",
                                          "*.txt")))


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tlscerts"))
    make_certs(d, 2)
    other = make_certs(os.path.join(d, "other"), 1)
    client_cert(d, "mailer")
    client_cert(other, "mailer")
    return d


def client_cert(d, cn):
    """d/cn.pem and d/cn.key: a client certificate with subject CN=cn,
    signed by d's CA."""
    key, csr, pem = (os.path.join(d, cn + ext)
                     for ext in (".key", ".csr", ".pem"))
    ext = os.path.join(d, cn + ".ext")
    with open(ext, "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                    "-subj", "/CN=" + cn, "-out", csr], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA",
                    os.path.join(d, "ca.pem"), "-CAkey",
                    os.path.join(d, "ca.key"), "-CAcreateserial", "-days", "2",
                    "-extfile", ext, "-out", pem], check=True,
                   capture_output=True)
    os.chmod(key, 0o600)


def tls_flags(certs, mutual=False):
    f = ["--tls-cert", os.path.join(certs, "node1.pem"), "--tls-key",
         os.path.join(certs, "node1.key")]
    return f + (["--tls-ca", os.path.join(certs, "ca.pem")] if mutual else [])


def start(rockstalkd, certs, mutual=False, extra=()):
    """A server with its plaintext -p (the fixture's) and a tls:// listener;
    (server, tls port)."""
    port = free_port()
    s = rockstalkd("--listen", "tls://127.0.0.1:%d" % port,
                   *tls_flags(certs, mutual), *extra)
    return s, port


def context(certs, cert=None, version=None):
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.check_hostname = False  # node1's certificate names no host
    if cert:
        ctx.load_cert_chain(cert + ".pem", cert + ".key")
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def tls_connect(port, ctx, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout)
    return ctx.wrap_socket(s)


def ask(s, data, lines=1):
    s.sendall(data)
    buf = b""
    while buf.count(b"\r\n") < lines:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    return buf


@pytest.mark.parametrize("path", EXCHANGES,
                         ids=[os.path.basename(p) for p in EXCHANGES])
def test_exchanges_over_tls(rockstalkd, certs, path):
    """Every exchange the plaintext suite replays gives the same replies
    through a tls:// listener."""
    s, port = start(rockstalkd, certs)
    replay.SSL_CONTEXT = context(certs)
    try:
        bad = replay.run_file(path, "127.0.0.1", port)
    finally:
        replay.SSL_CONTEXT = None
    assert not bad, "\n".join(str(m) for m in bad)


def test_versions(rockstalkd, certs):
    """TLS 1.2 and 1.3 are served; anything older is refused."""
    s, port = start(rockstalkd, certs)
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        with tls_connect(port, context(certs, version=v)) as c:
            assert c.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                   ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
            assert ask(c, b"put 0 0 60 2\r\nhi\r\n").startswith(b"INSERTED")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        pytest.fail("this Python cannot offer TLS 1.1 to test its refusal")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with tls_connect(port, ctx) as c:
            ask(c, b"stats\r\n", 2)
    # the server is still there for everyone else
    with tls_connect(port, context(certs)) as c:
        assert ask(c, b"list-tube-used\r\n") == b"USING default\r\n"


def test_suites(rockstalkd, certs):
    """The server picks AES-128-GCM (the cheapest per record with AES
    instructions, src/net/tlscreds.c) unless the client puts
    ChaCha20-Poly1305 first (a client without them): then that."""
    s, port = start(rockstalkd, certs)
    with tls_connect(port, context(certs)) as c:  # TLS 1.3, AES-256 first
        assert c.cipher()[0] == "TLS_AES_128_GCM_SHA256"
    v12 = ssl.TLSVersion.TLSv1_2
    with tls_connect(port, context(certs, version=v12)) as c:
        assert c.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    ctx = context(certs, version=v12)
    ctx.set_ciphers("ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-"
                    "SHA256")
    with tls_connect(port, ctx) as c:
        assert c.cipher()[0] == "ECDHE-ECDSA-CHACHA20-POLY1305"
        assert ask(c, b"put 0 0 60 2\r\nhi\r\n").startswith(b"INSERTED")


def test_plaintext_on_tls_port_and_tls_on_plain_port(rockstalkd, certs):
    """A plaintext command on the TLS port gets no protocol reply (the
    connection closes); a TLS client on the plaintext port gets no
    handshake. Neither disturbs the server."""
    s, port = start(rockstalkd, certs)
    with socket.create_connection(("127.0.0.1", port), 5) as c:
        c.sendall(b"put 0 0 60 2\r\nhi\r\n")
        got = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            got += b
        assert b"INSERTED" not in got
    with pytest.raises((ssl.SSLError, ConnectionError, socket.timeout)):
        with tls_connect(s.port, context(certs), timeout=2) as c:
            ask(c, b"stats\r\n", 2)
    with socket.create_connection(("127.0.0.1", s.port), 5) as c:
        assert ask(c, b"stats-tube default\r\n").startswith(b"OK ")
        st = ask(c, b"stats\r\n", 2)
    assert b"\ntotal-jobs: 0\n" in st


def test_mutual_tls(rockstalkd, certs):
    """With --tls-ca a client must present a certificate from that CA: none,
    or one from another CA, and the session fails; the CA's works."""
    s, port = start(rockstalkd, certs, mutual=True)
    with tls_connect(port, context(certs, cert=os.path.join(
            certs, "mailer"))) as c:
        assert ask(c, b"put 0 0 60 2\r\nhi\r\n").startswith(b"INSERTED")
    for cert in (None, os.path.join(certs, "other", "mailer")):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with tls_connect(port, context(certs, cert=cert)) as c:
                got = ask(c, b"put 0 0 60 2\r\nhi\r\n")
                if not got:
                    raise ConnectionError("closed without a reply")
    with socket.create_connection(("127.0.0.1", s.port), 5) as c:
        assert b"\ntotal-jobs: 1\n" in ask(c, b"stats\r\n", 2)


def test_openssl_s_client(rockstalkd, certs):
    """openssl s_client speaks to it (the tool an operator debugs with)."""
    s, port = start(rockstalkd, certs)
    out = subprocess.run(
        ["openssl", "s_client", "-quiet", "-connect", "127.0.0.1:%d" % port,
         "-CAfile", os.path.join(certs, "ca.pem")],
        input=b"put 0 0 60 5\r\nhello\r\npeek 1\r\nquit\r\n",
        capture_output=True, timeout=20)
    assert b"INSERTED 1\r\nFOUND 1 5\r\nhello\r\n" in out.stdout, out


def test_start_refusals(tmp_path, certs):
    """tls:// without the credentials, one of them alone, or a file that
    does not load: the start fails with a message."""
    exe = os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd"))
    listen = ["--listen", "tls://127.0.0.1:%d" % free_port()]
    key = os.path.join(certs, "node1.key")
    pem = os.path.join(certs, "node1.pem")
    cases = [
        (listen, b"need --tls-cert and --tls-key"),
        (listen + ["--tls-cert", pem], b"go together"),
        (listen + ["--tls-ca", os.path.join(certs, "ca.pem")],
         b"go together"),
        (listen + ["--tls-cert", key, "--tls-key", key], b"certificate"),
        (listen + ["--tls-cert", pem, "--tls-key",
                   os.path.join(certs, "node2.key")], b"key"),
    ]
    for flags, msg in cases:
        p = subprocess.run([exe, "-b", str(tmp_path / "d")] + flags,
                           capture_output=True, timeout=20)
        assert p.returncode != 0, flags
        assert msg in p.stderr, (flags, p.stderr)


def test_sighup_reloads_certificates(rockstalkd, certs, tmp_path):
    """SIGHUP re-reads the certificate: new sessions get the new one, a
    session open before keeps working."""
    pem, key = str(tmp_path / "srv.pem"), str(tmp_path / "srv.key")
    for n in ("pem", "key"):
        with open(os.path.join(certs, "node1." + n), "rb") as f, \
                open(str(tmp_path / ("srv." + n)), "wb") as g:
            g.write(f.read())
    os.chmod(key, 0o600)
    port = free_port()
    s = rockstalkd("--listen", "tls://127.0.0.1:%d" % port, "--tls-cert",
                   pem, "--tls-key", key)
    old = tls_connect(port, context(certs))
    assert b"rockstalk-node-1" in subject_of(old)
    for n in ("pem", "key"):
        with open(os.path.join(certs, "node2." + n), "rb") as f, \
                open(str(tmp_path / ("srv." + n)), "wb") as g:
            g.write(f.read())
    s.proc.send_signal(signal.SIGHUP)

    def renewed():
        with tls_connect(port, context(certs)) as c:
            return b"rockstalk-node-2" in subject_of(c)
    wait_for(renewed, what="the new certificate served")
    assert ask(old, b"list-tube-used\r\n") == b"USING default\r\n"
    old.close()
    # a broken file keeps the current credentials
    with open(pem, "w") as f:
        f.write("not a certificate\n")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    with tls_connect(port, context(certs)) as c:
        assert b"rockstalk-node-2" in subject_of(c)
        assert ask(c, b"list-tube-used\r\n") == b"USING default\r\n"


def subject_of(c):
    """The DER of the server's certificate (its subject is inside)."""
    return c.getpeercert(binary_form=True)


def test_follower_runs_the_clients_tls(tmp_path):
    """A tls:// client of a follower: the follower runs the client's TLS
    and relays its commands to the leader over the nodes' mutual TLS."""
    c = Cluster(tmp_path / "c", start=False)
    ports = {nd.id: free_port() for nd in c.nodes}
    for nd in c.nodes:
        nd.flags = list(nd.flags) + [
            "--listen", "tls://127.0.0.1:%d" % ports[nd.id],
            "--tls-cert", c.cert(1), "--tls-key", c.cert(1, "key")]
        nd.start(wait=False)
    try:
        for nd in c.nodes:
            replay.wait_listening(nd.host, nd.port, nd.proc)
        lead = c.wait_leader()
        f = c.follower()
        ctx = context(c.certs)
        with tls_connect(ports[f.id], ctx) as s:
            assert ask(s, b"put 0 0 60 5\r\nhello\r\n") == b"INSERTED 1\r\n"
            got = ask(s, b"reserve-with-timeout 5\r\n", 2)
            assert got == b"RESERVED 1 5\r\nhello\r\n"
        with tls_connect(ports[lead], ctx) as s:
            assert ask(s, b"stats-job 1\r\n").startswith(b"OK ")
        # a client of the follower that never finishes its handshake is
        # dropped by the relay's deadline (5 s)
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", ports[f.id]), 30) as s:
            s.sendall(b"\x16\x03\x01\x00\xff")
            assert s.recv(100) == b""
        assert time.monotonic() - t0 <= 8
    finally:
        c.stop()


def auth_file(tmp_path, text):
    p = tmp_path / "auth"
    p.write_text(text)
    os.chmod(str(p), 0o600)
    return str(p)


def token_line(name, token, rules):
    return "%s sha256:%s %s\n" % (
        name, hashlib.sha256(token.encode()).hexdigest(), rules)


def test_cert_identities(rockstalkd, certs, tmp_path):
    """With --auth-file and --tls-ca, a client certificate whose CN names a
    `cert` identity authenticates the session: its rules apply at once, no
    auth command. A certificate naming no identity, or a plaintext client,
    must authenticate by token first."""
    f = auth_file(tmp_path, "mailer cert produce:emails.*\n" +
                  token_line("ops", "ops-token", "admin"))
    s, port = start(rockstalkd, certs, mutual=True, extra=("--auth-file", f))
    with tls_connect(port, context(certs, cert=os.path.join(
            certs, "mailer"))) as c:
        assert ask(c, b"use emails.a\r\n") == b"USING emails.a\r\n"
        assert ask(c, b"put 0 0 60 2\r\nhi\r\n") == b"INSERTED 1\r\n"
        assert ask(c, b"use other\r\n") == b"DENIED\r\n"
        assert ask(c, b"peek 1\r\n") == b"DENIED\r\n"
    # node2's certificate verifies but names no identity
    with tls_connect(port, context(certs, cert=os.path.join(
            certs, "node2"))) as c:
        assert ask(c, b"use emails.a\r\n") == b"UNAUTHORIZED\r\n"
        assert c.recv(100) == b""
    with tls_connect(port, context(certs, cert=os.path.join(
            certs, "node2"))) as c:
        assert ask(c, b"auth ops-token\r\n") == b"AUTHENTICATED\r\n"
        assert ask(c, b"peek 1\r\n", 2) == b"FOUND 1 2\r\nhi\r\n"
    with socket.create_connection(("127.0.0.1", s.port), 5) as c:
        assert ask(c, b"use emails.a\r\n") == b"UNAUTHORIZED\r\n"


def test_unix_listener_trust(rockstalkd, tmp_path):
    """With --auth-file a unix: listener trusts its socket file's mode; with
    --auth-unix its clients authenticate like the others."""
    f = auth_file(tmp_path, token_line("ops", "ops-token", "admin"))
    for extra, first in (((), b"USING x\r\n"),
                         (("--auth-unix",), b"UNAUTHORIZED\r\n")):
        path = str(tmp_path / ("s%d.sock" % len(extra)))
        rockstalkd("--auth-file", f, "--listen", "unix:" + path, *extra)
        with socket.socket(socket.AF_UNIX) as c:
            c.settimeout(5)
            c.connect(path)
            assert ask(c, b"use x\r\n") == first


def test_listener_policy_with_auth(tmp_path, certs):
    """--auth-file refuses a plaintext listener beyond loopback (tokens in
    the clear), naming it; a tls:// one there is fine."""
    exe = os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd"))
    f = auth_file(tmp_path, token_line("ops", "ops-token", "admin"))
    p = free_port()
    r = subprocess.run([exe, "--memory", "--auth-file", f, "-l", "127.0.0.1",
                        "-p", str(free_port()), "--listen",
                        "tcp://0.0.0.0:%d" % p], capture_output=True,
                       timeout=20)
    assert r.returncode != 0
    assert b"tcp://0.0.0.0:%d is plaintext beyond loopback" % p in r.stderr
    proc = subprocess.Popen(
        [exe, "--memory", "--auth-file", f, "-l", "127.0.0.1", "-p",
         str(free_port()), "--listen", "tls://0.0.0.0:%d" % p] +
        tls_flags(certs), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def up():
            try:
                with tls_connect(p, context(certs)) as c:
                    return ask(c, b"auth ops-token\r\n") == \
                        b"AUTHENTICATED\r\n"
            except OSError:
                return False
        wait_for(up, what="the tls:// listener beyond loopback serving")
    finally:
        proc.terminate()
        proc.wait(10)


def test_handshake_deadline(rockstalkd, certs):
    """A connection to a tls:// listener that never finishes its handshake
    is closed after about 10 s; an idle plaintext one stays (beanstalkd has
    no idle timeout)."""
    s, port = start(rockstalkd, certs)
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), 30) as stuck, \
            socket.create_connection(("127.0.0.1", s.port), 30) as idle:
        stuck.sendall(b"\x16\x03\x01\x00\xff")  # half a ClientHello header
        assert stuck.recv(100) == b""
        took = time.monotonic() - t0
        assert 9 <= took <= 13, took
        idle.sendall(b"list-tube-used\r\n")
        assert idle.recv(100) == b"USING default\r\n"


CLI = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALK_CLI", "rockstalk")))


def cli(port, *args, stdin=None):
    return subprocess.run([CLI, "-p", str(port)] + list(args), input=stdin,
                          capture_output=True, timeout=30)


def test_cli_tls(rockstalkd, certs, tmp_path):
    """rockstalk --tls: the server's certificate must verify against
    --cacert and carry the name dialled (or --tls-name); with --cert/--key
    it authenticates by certificate; --token works over TLS; one-shot and
    the prompt fed on stdin."""
    ca = os.path.join(certs, "ca.pem")
    f = auth_file(tmp_path, "mailer cert produce:emails.* inspect:emails.*\n"
                  + token_line("ops", "ops-token", "admin"))
    s, port = start(rockstalkd, certs, mutual=True, extra=("--auth-file", f))
    me = ["--cert", os.path.join(certs, "mailer.pem"), "--key",
          os.path.join(certs, "mailer.key")]
    ok = ["--tls", "--cacert", ca, "--tls-name", "rockstalk-node-1"]
    r = cli(port, *ok, *me, "-t", "emails.x", "put", stdin=b"hello")
    assert r.returncode == 0 and r.stderr == b"INSERTED 1\n", r
    r = cli(port, *ok, *me, "-t", "emails.x", "peek-ready")
    assert r.returncode == 0 and b"hello" in r.stdout, r
    r = cli(port, *ok, *me, "-t", "other", "put", stdin=b"x")
    assert r.returncode != 0 and b"DENIED" in r.stdout + r.stderr, r
    r = cli(port, *ok, *me, stdin=b"use emails.y\nput 0 0 60\nhi\n")
    assert r.returncode == 0 and \
        r.stdout == b"USING emails.y\nINSERTED 2\n", r
    # a token instead of a certificate: the server wants one (--tls-ca)
    r = cli(port, *ok, "--token", "ops-token", "stats")
    assert r.returncode == 2, r
    # the certificate names rockstalk-node-1, not 127.0.0.1
    r = cli(port, "--tls", "--cacert", ca, *me, "stats")
    assert r.returncode == 2 and b"TLS handshake" in r.stderr, r
    r = cli(port, "--tls", "--cacert", ca, "--tls-name", "example.org", *me,
            "stats")
    assert r.returncode == 2 and b"verify" in r.stderr, r
    r = cli(port, "--tls", *me, "stats")  # no --cacert: not in the system's
    assert r.returncode == 2, r
    r = cli(port, "--cacert", ca, "stats")
    assert r.returncode == 2 and b"go with --tls" in r.stderr, r
    r = cli(port, "--tls", "--cert", ca, "stats")
    assert r.returncode == 2 and b"go together" in r.stderr, r
    # without --tls-ca the token does it over TLS
    s2, port2 = start(rockstalkd, certs, extra=("--auth-file", f))
    r = cli(port2, *ok, "--token", "ops-token", "-t", "q", "put", stdin=b"z")
    assert r.returncode == 0 and r.stderr == b"INSERTED 1\n", r


def test_cert_identity_through_a_follower(tmp_path, certs):
    """A tls:// client of a follower that presents a certificate: the
    follower verifies it and tells the leader its CN over the nodes'
    authenticated link (channel 4), so a `cert` identity logs in there as
    on the leader; a client without one must still send a token."""
    c = Cluster(tmp_path / "c", start=False)
    f = auth_file(tmp_path, "mailer cert produce:emails.* inspect:emails.*\n"
                  + token_line("ops", "ops-token", "admin"))
    ports = {nd.id: free_port() for nd in c.nodes}
    for nd in c.nodes:
        nd.flags = list(nd.flags) + [
            "--listen", "tls://127.0.0.1:%d" % ports[nd.id],
            "--tls-cert", c.cert(1), "--tls-key", c.cert(1, "key"),
            "--tls-ca", os.path.join(certs, "ca.pem"), "--auth-file", f]
        nd.start(wait=False)
    try:
        lead = 0
        deadline = time.monotonic() + 20
        while not lead and time.monotonic() < deadline:
            lead = c.leader()
            time.sleep(0.1)
        assert lead, "no leader"
        fol = next(nd for nd in c.nodes if nd.id != lead)
        ctx = context(c.certs)
        ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
        ctx.load_cert_chain(os.path.join(certs, "mailer.pem"),
                            os.path.join(certs, "mailer.key"))

        def served():
            try:
                with tls_connect(ports[fol.id], ctx) as s:
                    return ask(s, b"use emails.a\r\n") == \
                        b"USING emails.a\r\n"
            except OSError:
                return False
        wait_for(served, timeout=20, what="the follower relaying")
        with tls_connect(ports[fol.id], ctx) as s:
            assert ask(s, b"use emails.a\r\n") == b"USING emails.a\r\n"
            assert ask(s, b"put 0 0 60 2\r\nhi\r\n").startswith(b"INSERTED")
            assert ask(s, b"use other\r\n") == b"DENIED\r\n"
        # node2's certificate (this CA) names no identity: a token it is
        ctx2 = context(c.certs)
        ctx2.load_verify_locations(os.path.join(certs, "ca.pem"))
        ctx2.load_cert_chain(os.path.join(certs, "node2.pem"),
                             os.path.join(certs, "node2.key"))
        with tls_connect(ports[fol.id], ctx2) as s:
            assert ask(s, b"use emails.a\r\n") == b"UNAUTHORIZED\r\n"
        with tls_connect(ports[fol.id], ctx2) as s:
            assert ask(s, b"auth ops-token\r\n") == b"AUTHENTICATED\r\n"
    finally:
        c.stop()


def test_handshake_flood_is_bounded(rockstalkd, certs):
    """8000 connections, 2000 at a time, each sending half a ClientHello
    and waiting: at most CONN_HANDSHAKES_MAX (256) handshakes are kept (one
    more closes the oldest), a real client is served throughout, and the
    server's memory stops growing: without the bound the 2000 sessions of
    a batch alone would hold 2000 x ~51 KiB; with it RSS levels off (glibc
    keeps what the closed sessions freed: about 145 MiB here, seen)."""
    from test_hostile import RssSampler, fd_count, instrumented, rss
    s, port = start(rockstalkd, certs)
    pid = s.proc.pid
    base, fds = rss(pid), fd_count(pid)
    sampler = RssSampler(pid)
    sampler.start()
    try:
        for _ in range(4):
            flood = []
            try:
                for _ in range(2000):
                    c = socket.create_connection(("127.0.0.1", port), 5)
                    c.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
                    flood.append(c)
                with tls_connect(port, context(certs), timeout=10) as c:
                    assert ask(c, b"list-tube-used\r\n") == \
                        b"USING default\r\n"
                assert fd_count(pid) <= fds + 256 + 2, fd_count(pid)
            finally:
                for c in flood:
                    c.close()
    finally:
        sampler.stop()
    grew = (sampler.peak - base) / (1 << 20)
    bound = 256 if not instrumented(pid) else 2048
    assert grew < bound, "RSS grew %.1f MiB" % grew
