"""Several listeners (issue 32, item 1): --listen tcp://, tls://, unix:
beside -l/-p, unix sockets (mode, live, stale and foreign files, removal at
exit), IPv6 literals, systemd socket activation with several sockets, the
refusals at start, and a cluster follower relaying clients from either of
its listeners (also after it stepped down and handed its listeners over to
its exec). Which sockets a server listens on is read from /proc (its
descriptors against /proc/PID/net/{tcp,tcp6,unix}), so a listener that
should not be there is seen, not just one that should."""
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import time
import warnings

import pytest

from cluster import Cluster, node_port
from conftest import ROCKSTALKD, wait_for
from test_cluster_peer import assert_keepalive, find, their_sockets
from test_hostile import socket_inodes

pytestmark = pytest.mark.not_via_follower("starts its own servers")


# Ports: cluster.node_port's, each given once in this process and below the
# kernel's ephemeral range: two bind-to-0 picks (free_port) may return the
# same port (seen: test_sixteen_listeners_serve refused as "given twice"),
# and an outgoing connection may take a picked one before the server binds.


def listening(pid):
    """The listening sockets of process pid: {("tcp", port)} for TCP (v4
    and v6), {("unix", path)} for unix ones."""
    inodes = socket_inodes(pid)
    out = set()
    for name in ("tcp", "tcp6"):
        with open("/proc/%d/net/%s" % (pid, name)) as f:
            for line in f.readlines()[1:]:
                x = line.split()
                if x[3] == "0A" and x[9] in inodes:  # TCP_LISTEN
                    out.add(("tcp", int(x[1].rsplit(":", 1)[1], 16)))
    with open("/proc/%d/net/unix" % pid) as f:
        for line in f.readlines()[1:]:
            x = line.split()
            # Num RefCount Protocol Flags Type St Inode [Path]
            if len(x) >= 8 and x[6] in inodes and int(x[3], 16) & 0x10000:
                out.add(("unix", x[7]))
    return out


def unix_connect(path, timeout=5.0):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    return s


def tcp_connect(port, host="127.0.0.1", timeout=5.0):
    s = socket.create_connection((host, port), timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def serves(connect):
    try:
        with connect() as s:
            s.settimeout(2.0)
            s.sendall(b"list-tube-used\r\n")
            return s.recv(64) == b"USING default\r\n"
    except OSError:
        return False


class Daemon:
    """rockstalkd with args (the test's tmp_path for its log); wait: a
    function returning a connected socket, tried until it serves."""

    def __init__(self, tmp_path, args, wait, argv0=None, pass_fds=()):
        self.log_path = str(tmp_path / ("d%d.log" % time.monotonic_ns()))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen((argv0 or [ROCKSTALKD]) + args,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     pass_fds=pass_fds)
        end = time.monotonic() + 20
        while not serves(wait):
            if self.proc.poll() is not None:
                raise AssertionError("exited %d: %s" %
                                     (self.proc.returncode, self.text()))
            if time.monotonic() > end:
                raise AssertionError("not serving: " + self.text())
            time.sleep(0.02)

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(15)
        self.log.close()
        return code


@pytest.fixture
def daemons():
    made = []
    yield made
    for d in made:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        d.log.close()


def start(daemons, tmp_path, args, wait, **kw):
    d = Daemon(tmp_path, args, wait, **kw)
    daemons.append(d)
    return d


def cmd(s, line, expect_prefix):
    s.sendall(line)
    got = b""
    while b"\r\n" not in got:
        chunk = s.recv(4096)
        assert chunk, "closed after %r" % line
        got += chunk
    assert got.startswith(expect_prefix), (line, got)
    return got


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(1 << 20, n - len(buf)))
        assert chunk, "closed with %d of %d bytes" % (len(buf), n)
        buf += chunk
    return bytes(buf)


def stats(s):
    """The stats command's YAML body."""
    s.sendall(b"stats\r\n")
    head = b""
    while not head.endswith(b"\r\n"):
        head += s.recv(1)
    assert head.startswith(b"OK "), head
    return recv_exact(s, int(head.split()[1]) + 2)


def test_two_tcp_listeners_and_no_default_port(daemons, tmp_path):
    """Two --listen listeners serve one queue; --listen alone opens
    nothing else (no 11300, no 0.0.0.0)."""
    p1, p2 = node_port(), node_port()
    d = start(daemons, tmp_path,
              ["--memory", "--listen", "tcp://127.0.0.1:%d" % p1,
               "--listen", "tcp://127.0.0.1:%d" % p2],
              lambda: tcp_connect(p1))
    assert listening(d.proc.pid) == {("tcp", p1), ("tcp", p2)}
    with tcp_connect(p1) as a, tcp_connect(p2) as b:
        cmd(a, b"use t\r\n", b"USING t")
        cmd(a, b"put 0 0 60 5\r\nhello\r\n", b"INSERTED 1")
        cmd(b, b"watch t\r\n", b"WATCHING 2")
        assert cmd(b, b"reserve-with-timeout 5\r\n", b"RESERVED 1 5") == \
            b"RESERVED 1 5\r\nhello\r\n"
        cmd(b, b"delete 1\r\n", b"DELETED")
    text = d.text()
    assert "listening on tcp://127.0.0.1:%d" % p1 in text
    assert "listening on tcp://127.0.0.1:%d" % p2 in text
    assert "warning" not in text  # loopback only
    assert d.stop() == 0


def test_port_flag_and_listen_together(daemons, tmp_path):
    """-l/-p keep their listener when --listen adds one."""
    p0, p1 = node_port(), node_port()
    d = start(daemons, tmp_path,
              ["--memory", "-l", "127.0.0.1", "-p", str(p0), "--listen",
               "tcp://127.0.0.1:%d" % p1], lambda: tcp_connect(p0))
    assert listening(d.proc.pid) == {("tcp", p0), ("tcp", p1)}
    with tcp_connect(p1) as a, tcp_connect(p0) as b:
        cmd(a, b"put 0 0 60 1\r\nx\r\n", b"INSERTED 1")
        cmd(b, b"peek-ready\r\n", b"FOUND 1 1")
    # -p alone with --listen: the -l default, every address
    p2, p3 = node_port(), node_port()
    d2 = start(daemons, tmp_path,
               ["--memory", "-p", str(p2), "--listen",
                "tcp://127.0.0.1:%d" % p3], lambda: tcp_connect(p3))
    assert listening(d2.proc.pid) == {("tcp", p2), ("tcp", p3)}
    assert "warning: tcp://0.0.0.0:%d is reachable from other hosts" % p2 \
        in d2.text()
    assert d.stop() == 0 and d2.stop() == 0


def test_unix_socket_protocol(daemons, tmp_path):
    """A unix: listener speaks the whole protocol: a 1 MB body both ways,
    200 pipelined puts, and its file is 0660 and gone after SIGTERM."""
    path = str(tmp_path / "q.sock")
    p = node_port()
    d = start(daemons, tmp_path,
              ["--memory", "-z", "2000000", "--listen", "unix:" + path,
               "--listen", "tcp://127.0.0.1:%d" % p],
              lambda: unix_connect(path))
    assert listening(d.proc.pid) == {("unix", path), ("tcp", p)}
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660
    body = os.urandom(1000000)
    with unix_connect(path) as s:
        s.sendall(b"put 0 0 60 %d\r\n" % len(body) + body + b"\r\n")
        assert recv_exact(s, 12) == b"INSERTED 1\r\n"
        s.sendall(b"reserve\r\n")
        head = b""
        while not head.endswith(b"\r\n"):
            head += s.recv(1)
        assert head == b"RESERVED 1 %d\r\n" % len(body)
        assert recv_exact(s, len(body) + 2) == body + b"\r\n"
        s.sendall(b"delete 1\r\n")
        assert recv_exact(s, 9) == b"DELETED\r\n"
        n = 200
        s.sendall(b"".join(b"put 0 0 60 3\r\nj%02d\r\n" % (i % 100)
                           for i in range(n)))
        want = b"".join(b"INSERTED %d\r\n" % (i + 2) for i in range(n))
        assert recv_exact(s, len(want)) == want
    with tcp_connect(p) as t:  # the same queue from the TCP listener
        cmd(t, b"stats\r\n", b"OK")
    with unix_connect(path) as s:
        assert b"current-jobs-ready: 200\n" in stats(s)
    assert d.stop() == 0
    assert not os.path.lexists(path), "socket file left after SIGTERM"


def test_unix_stale_socket_replaced(daemons, tmp_path):
    path = str(tmp_path / "stale.sock")
    old = socket.socket(socket.AF_UNIX)
    old.bind(path)  # a server that died without removing its file
    old.close()
    with pytest.raises(ConnectionRefusedError):
        unix_connect(path)
    d = start(daemons, tmp_path, ["--memory", "--listen", "unix:" + path],
              lambda: unix_connect(path))
    assert listening(d.proc.pid) == {("unix", path)}
    assert d.stop() == 0
    assert not os.path.lexists(path)


def test_unix_live_socket_refused(tmp_path):
    path = str(tmp_path / "live.sock")
    live = socket.socket(socket.AF_UNIX)
    live.bind(path)
    live.listen()
    p = subprocess.run([ROCKSTALKD, "--memory", "--listen", "unix:" + path],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert "unix:%s: a server is listening on that socket already" % path \
        in p.stderr, p.stderr
    with unix_connect(path):  # still the other server's
        pass
    c, _ = live.accept()
    c.close()
    live.close()


def test_unix_path_not_a_socket_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("precious")
    p = subprocess.run([ROCKSTALKD, "--memory", "--listen", "unix:%s" % path],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert "unix:%s: the path exists and is not a socket" % path in p.stderr, \
        p.stderr
    assert path.read_text() == "precious"


def test_listen_failure_removes_the_socket_files_made(tmp_path):
    """A start that fails after a unix listener was made (the next one's
    port is taken) leaves no socket file behind."""
    path = str(tmp_path / "made.sock")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = subprocess.run([ROCKSTALKD, "--memory", "--listen",
                            "unix:" + path, "--listen",
                            "tcp://127.0.0.1:%d" % port],
                           capture_output=True, text=True, timeout=20)
    assert p.returncode != 0 and "Address already in use" in p.stderr, \
        p.stderr
    assert not os.path.lexists(path)


def test_ipv6_loopback(daemons, tmp_path):
    lo = subprocess.run(["ip", "-6", "addr", "show", "lo"],
                        capture_output=True, text=True).stdout
    if "::1/128" not in lo:
        msg = ("THIS MACHINE HAS NO IPv6 LOOPBACK (ip -6 addr show lo: %r): "
               "tcp://[::1]:PORT is NOT TESTED" % lo)
        warnings.warn(msg)
        print(msg, file=sys.stderr)
        pytest.skip(msg)
    p = node_port()
    d = start(daemons, tmp_path, ["--memory", "--listen",
                                  "tcp://[::1]:%d" % p],
              lambda: tcp_connect(p, "::1"))
    assert listening(d.proc.pid) == {("tcp", p)}
    with tcp_connect(p, "::1") as s:
        assert s.family == socket.AF_INET6
        cmd(s, b"put 0 0 60 2\r\nv6\r\n", b"INSERTED 1")
    with pytest.raises(OSError):  # not on IPv4
        tcp_connect(p, "127.0.0.1", 1.0).close()
    assert "listening on tcp://[::1]:%d" % p in d.text()
    assert "warning" not in d.text()
    assert d.stop() == 0


# Sets fds 3.. to the sockets given (numbers in argv[1]), LISTEN_FDS,
# LISTEN_PID (this process: exec keeps it) and LISTEN_FDNAMES (argv[2]),
# then execs argv[3:], as systemd does.
ACTIVATE = """
import fcntl, os, sys
fds = [int(x) for x in sys.argv[1].split(",")]
hi = [fcntl.fcntl(f, fcntl.F_DUPFD, 100) for f in fds]
for i, h in enumerate(hi):
    os.dup2(h, 3 + i)
    os.close(h)
os.environ["LISTEN_FDS"] = str(len(fds))
os.environ["LISTEN_PID"] = str(os.getpid())
if sys.argv[2]:
    os.environ["LISTEN_FDNAMES"] = sys.argv[2]
os.execv(sys.argv[3], sys.argv[3:])
"""


def activated(daemons, tmp_path, socks, names, args, wait):
    fds = [s.fileno() for s in socks]
    argv0 = [sys.executable, "-c", ACTIVATE, ",".join(map(str, fds)),
             names, ROCKSTALKD]
    d = start(daemons, tmp_path, args, wait, argv0=argv0, pass_fds=fds)
    for s in socks:
        s.close()
    return d


def test_socket_activation_two_sockets(daemons, tmp_path):
    """Every inherited socket is a listener (beanstalkd takes only the
    first); they replace -l/-p; --listen adds; an inherited unix socket's
    file is systemd's, not removed at exit."""
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    t.listen()
    tport = t.getsockname()[1]
    upath = str(tmp_path / "act.sock")
    u = socket.socket(socket.AF_UNIX)
    u.bind(upath)
    u.listen()
    unused, extra = node_port(), node_port()
    d = activated(daemons, tmp_path, [t, u], "api:local",
                  ["--memory", "-p", str(unused), "--listen",
                   "tcp://127.0.0.1:%d" % extra],
                  lambda: unix_connect(upath))
    assert listening(d.proc.pid) == {("tcp", tport), ("unix", upath),
                                     ("tcp", extra)}
    with tcp_connect(tport) as a, unix_connect(upath) as b, \
            tcp_connect(extra) as c:
        cmd(a, b"put 0 0 60 1\r\na\r\n", b"INSERTED 1")
        cmd(b, b"put 0 0 60 1\r\nb\r\n", b"INSERTED 2")
        cmd(c, b"stats-job 2\r\n", b"OK")
    assert "inherited socket(s) replace -l and -p" in d.text()
    assert d.stop() == 0
    assert os.path.lexists(upath), "an inherited socket's file was removed"


def test_socket_activation_and_listen_at_its_address_refused(tmp_path):
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    t.listen()
    port = t.getsockname()[1]
    p = subprocess.run([sys.executable, "-c", ACTIVATE, str(t.fileno()), "",
                        ROCKSTALKD, "--memory", "--listen",
                        "tcp://127.0.0.1:%d" % port], pass_fds=[t.fileno()],
                       capture_output=True, text=True, timeout=20)
    t.close()
    assert p.returncode != 0
    assert "listener tcp://127.0.0.1:%d is given twice" % port in p.stderr, \
        p.stderr


def test_socket_activation_named_tls_refused(tmp_path):
    """An inherited socket named "tls" (FileDescriptorName=tls) is a TLS
    listener: refused like tls:// until TLS for clients exists."""
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    t.listen()
    p = subprocess.run([sys.executable, "-c", ACTIVATE, str(t.fileno()),
                        "tls", ROCKSTALKD, "--memory"], pass_fds=[t.fileno()],
                       capture_output=True, text=True, timeout=20)
    t.close()
    assert p.returncode != 0
    assert "tls:// listeners need --tls-cert and --tls-key" in p.stderr


def test_socket_activation_not_a_listener_refused(tmp_path):
    c = socket.socket()  # never listened
    p = subprocess.run([sys.executable, "-c", ACTIVATE, str(c.fileno()), "",
                        ROCKSTALKD, "--memory"], pass_fds=[c.fileno()],
                       capture_output=True, text=True, timeout=20)
    c.close()
    assert p.returncode != 0
    assert "inherited fd 3 (LISTEN_FDS) is not a listening stream socket" \
        in p.stderr, p.stderr


BAD = [
    ("tcp://127.0.0.1", "no port"),
    ("tcp://127.0.0.1:0", "port 0"),
    ("tcp://127.0.0.1:65536", "port beyond 65535"),
    ("udp://127.0.0.1:11300", "unknown scheme"),
    ("127.0.0.1:11300", "unknown scheme"),
    ("tcp://[::1:11300", "unterminated '['"),
    ("tcp://[::1]", "no port"),
    ("tcp://::1:11300", "an IPv6 address goes in brackets"),
    ("tcp://:11300", "no host"),
    ("unix:", "empty path"),
    ("unix:/" + "x" * 107, "path longer than 107 bytes"),
    ("tcp://127.0.0.1:11300/x", "junk after the port"),
    ("tcp://127.0.0.1:113a", "junk after the port"),
    ("tls://127.0.0.1:11300", "tls:// listeners need --tls-cert and "
     "--tls-key"),
]


@pytest.mark.parametrize("url,why", BAD)
def test_bad_listener_refused(tmp_path, url, why):
    p = subprocess.run([ROCKSTALKD, "--memory", "--listen", url],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert why in p.stderr, p.stderr
    if not url.startswith("tls://"):  # the URL is named
        assert "--listen '%s': " % url in p.stderr, p.stderr


def test_too_many_and_twice_refused(tmp_path):
    ports = [node_port() for _ in range(17)]
    args = [ROCKSTALKD, "--memory"]
    for p in ports:
        args += ["--listen", "tcp://127.0.0.1:%d" % p]
    r = subprocess.run(args, capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "more than 16 listeners" in r.stderr
    # 15 --listen and -p: 16 is fine; one more is not
    r = subprocess.run(args[:2 + 2 * 16] + ["-l", "127.0.0.1", "-p",
                                            str(ports[16])],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "more than 16 listeners" in r.stderr
    p = ports[0]
    r = subprocess.run([ROCKSTALKD, "--memory", "--listen",
                        "tcp://127.0.0.1:%d" % p, "--listen",
                        "tls://127.0.0.1:%d" % p],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert "listener tls://127.0.0.1:%d is given twice" % p in r.stderr
    r = subprocess.run([ROCKSTALKD, "--memory", "-l", "127.0.0.1", "-p",
                        str(p), "--listen", "tcp://127.0.0.1:%d" % p],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "given twice" in r.stderr, r.stderr


def test_sixteen_listeners_serve(daemons, tmp_path):
    ports = [node_port() for _ in range(15)]
    args = ["--memory", "-l", "127.0.0.1", "-p", str(node_port())]
    for p in ports:
        args += ["--listen", "tcp://127.0.0.1:%d" % p]
    d = start(daemons, tmp_path, args, lambda: tcp_connect(ports[-1]))
    assert len(listening(d.proc.pid)) == 16
    for p in ports:
        assert serves(lambda: tcp_connect(p))
    assert d.stop() == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to change user")
def test_unix_socket_given_to_user(daemons, tmp_path):
    """Started as root with -u: the socket file is the user's (mode 0660),
    and the server, as that user, removes it at exit."""
    nobody = pwd.getpwnam("nobody")
    sockdir = tmp_path / "run"
    sockdir.mkdir()
    os.chown(sockdir, nobody.pw_uid, nobody.pw_gid)
    # nobody must reach the socket's directory: each directory above it
    # that others cannot search (pytest-of-<user> and below: one level
    # more under pytest-xdist), up to the first one they can.
    for parent in [tmp_path] + list(tmp_path.parents):
        if os.stat(parent).st_mode & stat.S_IXOTH:
            break
        os.chmod(parent, 0o755)
    path = str(sockdir / "u.sock")
    d = start(daemons, tmp_path, ["--memory", "-u", "nobody", "--listen",
                                  "unix:" + path],
              lambda: unix_connect(path))
    st = os.lstat(path)
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert d.stop() == 0
    assert not os.path.lexists(path)


def put_reserve(a, b, tube):
    """Puts on a, reserves and deletes the job on b."""
    cmd(a, b"use %s\r\n" % tube, b"USING")
    jid = int(cmd(a, b"put 0 0 60 3\r\nabc\r\n", b"INSERTED").split()[1])
    cmd(b, b"watch %s\r\n" % tube, b"WATCHING")
    cmd(b, b"ignore default\r\n", b"WATCHING")
    got = cmd(b, b"reserve-with-timeout 10\r\n", b"RESERVED")
    assert got.split()[1] == str(jid).encode(), got
    cmd(b, b"delete %d\r\n" % jid, b"DELETED")


@pytest.mark.parametrize("tls", [True, False], ids=["mtls", "plaintext"])
def test_cluster_follower_relays_both_listeners(tmp_path, tls):
    """A follower relays clients from its -l/-p port and from a unix
    --listen to the leader (over the peer links with mutual TLS, to the
    leader's client port in plaintext); a leader that steps down (SIGSTOP
    until another leads) execs itself with every listener handed over: it
    keeps both, opens no new one, and still removes its socket file at
    exit."""
    c = Cluster(tmp_path, start=False, tls=tls)
    try:
        for nd in c.nodes:
            nd.flags = ["--listen", "unix:%s/n%d.sock" % (tmp_path, nd.id)]
            nd.start(wait=False)
        lead = c.wait_leader()
        f = c.follower()
        fpath = "%s/n%d.sock" % (tmp_path, f.id)
        wait_for(lambda: serves(lambda: unix_connect(fpath)),
                 what="the follower's unix socket")
        with unix_connect(fpath) as a, f.connect() as b:
            put_reserve(a, b, b"relay1")
        with f.connect() as a, unix_connect(fpath) as b:
            put_reserve(a, b, b"relay2")
        # the leader steps down: SIGSTOP until another one leads
        old = c.node(lead)
        opath = "%s/n%d.sock" % (tmp_path, lead)
        before = listening(old.proc.pid)
        assert ("unix", opath) in before and ("tcp", old.port) in before
        old.proc.send_signal(signal.SIGSTOP)
        try:
            def other_leads():
                return any((c.node(n).view() or {}).get("role") == "leader"
                           for n in range(1, 4) if n != lead)
            wait_for(other_leads, timeout=20, what="a new leader")
        finally:
            old.proc.send_signal(signal.SIGCONT)
        log = lambda: open(old.dir + ".log", "rb").read()  # noqa: E731
        wait_for(lambda: b"restarting as a follower" in log(), timeout=20,
                 what="the old leader's restart")
        wait_for(lambda: serves(lambda: unix_connect(opath)), timeout=20,
                 what="the restarted node's unix socket")
        assert old.alive()
        assert listening(old.proc.pid) == before
        assert b"a server is listening" not in log()
        with unix_connect(opath) as a, old.connect() as b:
            put_reserve(a, b, b"relay3")
        old.stop()
        assert old.proc.returncode == 0
        assert not os.path.lexists(opath), "handed-over socket file left"
    finally:
        c.stop()


def assert_client_socket_options(pid, ports, clients):
    """The server's end of each client connection (clients[i] connected to
    ports[i]) has TCP_NODELAY, keepalive (30 s, every 10 s, 3 probes) and
    TCP_USER_TIMEOUT (60 s): set on the listener and copied by the
    kernel into every accepted socket (listeners.c, tune_listeners)."""
    theirs = their_sockets(pid)
    try:
        for port, c in zip(ports, clients):
            sk = find(theirs, port, c.getsockname()[1])
            assert sk.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            assert_keepalive(sk)
    finally:
        for sk in theirs:
            sk.close()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd_open")
def test_accepted_sockets_have_nodelay_and_keepalive(daemons, tmp_path):
    """On -l/-p's listener, a --listen tcp:// one and an inherited one
    (whose options systemd set, or not: the server sets them)."""
    p0, p1 = node_port(), node_port()
    d = start(daemons, tmp_path,
              ["--memory", "-l", "127.0.0.1", "-p", str(p0), "--listen",
               "tcp://127.0.0.1:%d" % p1], lambda: tcp_connect(p0))
    with tcp_connect(p0) as a, tcp_connect(p1) as b:
        cmd(a, b"put 0 0 60 1\r\nx\r\n", b"INSERTED 1")
        cmd(b, b"peek-ready\r\n", b"FOUND 1 1")
        assert_client_socket_options(d.proc.pid, [p0, p1], [a, b])
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    t.listen()
    tport = t.getsockname()[1]
    d2 = activated(daemons, tmp_path, [t], "", ["--memory"],
                   lambda: tcp_connect(tport))
    with tcp_connect(tport) as c:
        cmd(c, b"put 0 0 60 1\r\nx\r\n", b"INSERTED 1")
        assert_client_socket_options(d2.proc.pid, [tport], [c])
    assert d.stop() == 0 and d2.stop() == 0
