"""The ceiling probe's queue mode (scripts/bench/ceiling.c -q), the
same-work ceiling of make bench's cycle rows: the commands rsbench's cycle
mode sends (use, watch, ignore, put, reserve-with-timeout, delete) across
two tubes, a reserve blocked until a put arrives, a timeout, a reserved job
coming back when its connection closes, and the refusals; without a log
and with one (-b: replies and jobs only after their generation's
fdatasync, or -d's and -s's synchronous write); -d's and -s's log
holding each put in place, and their refusals; -L's body file (the split
sync ceiling of the big-beside-small row) and its refusals. Built as
run.sh builds it (common.sh's bench_build_ceiling),
into a temporary directory; a few seconds in all. Also rsbench's slow-ack
report (RSBENCH_SLOW_US) and its incompressible bodies (-R)."""
import os
import socket
import subprocess
import time
import zlib

import pytest

from replay import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_build(tmp_path_factory, call, name):
    """Builds one of scripts/bench's tools the way run.sh does (common.sh's
    call, a shell command) into a fresh directory; the binary's path."""
    build = tmp_path_factory.mktemp(name)
    script = ('say() { echo "$*" >&2; }; HERE=$1/scripts/bench REPO=$1 '
              'BUILD=$2; . "$HERE/common.sh"; ' + call)
    r = subprocess.run(["bash", "-c", script, "build", ROOT, str(build)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return str(build / name)


@pytest.fixture(scope="module")
def ceiling_bin(tmp_path_factory):
    return bench_build(tmp_path_factory, "bench_build_ceiling", "ceiling")


class Conn:
    """One blocking client connection; replies read line by line."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            got = self.s.recv(65536)
            assert got, "connection closed"
            self.buf += got
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def cmd(self, data):
        self.send(data + b"\r\n")
        return self.line()

    def put(self, body):
        r = self.cmd(b"put 1024 0 120 %d\r\n%s" % (len(body), body))
        assert r.startswith(b"INSERTED "), r
        return int(r.split()[1])

    def reserved(self, reply=None):
        """The (id, body) of a RESERVED reply (read here unless given)."""
        r = reply if reply is not None else self.line()
        word, jid, n = r.split()
        assert word == b"RESERVED", r
        while len(self.buf) < int(n) + 2:
            self.buf += self.s.recv(65536)
        body, self.buf = self.buf[:int(n)], self.buf[int(n) + 2:]
        return int(jid), body

    def reserve(self, secs=0):
        return self.cmd(b"reserve-with-timeout %d" % secs)

    def close(self):
        self.s.close()


def start(args, port):
    """Starts the ceiling (args) and waits for its port; returns the
    process."""
    proc = subprocess.Popen(args, stderr=subprocess.PIPE)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stderr.read().decode())
            time.sleep(0.02)
    proc.kill()
    pytest.fail("ceiling did not listen")


@pytest.fixture(params=["mem", "sync", "over", "overg", "overd", "overs"])
def ceiling(request, ceiling_bin, tmp_path):
    port = free_port()
    args = [ceiling_bin, "-q", "-l", "127.0.0.1", "-p", str(port)]
    if request.param != "mem":
        args += ["-b", str(tmp_path)]
    if request.param.startswith("over"):
        args += ["-o"]
    if request.param == "overg":
        args += ["-g"]  # the syncer fills each generation
    if request.param == "overd":
        args += ["-d"]  # O_DIRECT | O_DSYNC writes, no fdatasync
    if request.param == "overs":
        args += ["-s"]  # pwritev2 with RWF_DSYNC, no fdatasync
    proc = start(args, port)
    try:
        yield port
    finally:
        proc.kill()
        proc.wait()


def test_two_tubes(ceiling):
    p, w = Conn(ceiling), Conn(ceiling)
    assert p.cmd(b"use t1") == b"USING t1"
    a1, a2 = p.put(b"a1"), p.put(b"a2")
    assert p.cmd(b"use t2") == b"USING t2"
    b1 = p.put(b"b1")
    assert p.cmd(b"use t3") == b"USING t3"
    p.put(b"c1")  # in a tube w does not watch
    assert w.cmd(b"watch t2") == b"WATCHING 2"
    assert w.cmd(b"watch t1") == b"WATCHING 3"
    assert w.cmd(b"watch t1") == b"WATCHING 3"
    assert w.cmd(b"ignore default") == b"WATCHING 2"
    assert w.cmd(b"ignore nosuchtube") == b"WATCHING 2"
    # the oldest job of all the tubes watched, whichever tube it is in
    assert w.reserved(w.reserve()) == (a1, b"a1")
    assert p.cmd(b"delete %d" % a1) == b"NOT_FOUND"  # reserved by w
    assert w.cmd(b"delete %d" % a1) == b"DELETED"
    assert w.cmd(b"delete %d" % a1) == b"NOT_FOUND"
    assert w.reserved(w.reserve()) == (a2, b"a2")
    assert w.cmd(b"delete %d" % a2) == b"DELETED"
    assert p.cmd(b"delete %d" % b1) == b"DELETED"  # a ready job: anyone
    assert w.reserve() == b"TIMED_OUT"
    assert w.cmd(b"ignore t1") == b"WATCHING 1"
    assert w.cmd(b"ignore t2") == b"NOT_IGNORED"
    assert w.cmd(b"frobnicate") == b"UNKNOWN_COMMAND"
    assert w.cmd(b"use " + b"x" * 201) == b"BAD_FORMAT"


def test_blocked_reserve(ceiling):
    p, w = Conn(ceiling), Conn(ceiling)
    assert w.cmd(b"watch q") == b"WATCHING 2"
    # blocked; what follows the reserve waits for its reply
    w.send(b"reserve-with-timeout 5\r\nuse other\r\n")
    time.sleep(0.2)
    assert p.cmd(b"use q") == b"USING q"
    jid = p.put(b"hello")
    assert w.reserved() == (jid, b"hello")
    assert w.line() == b"USING other"
    # a job reserved by a connection that closes is ready again
    w.close()
    w2 = Conn(ceiling)
    assert w2.cmd(b"watch q") == b"WATCHING 2"
    deadline = time.time() + 5
    while True:
        r = w2.reserve()
        if r != b"TIMED_OUT" or time.time() > deadline:
            break
        time.sleep(0.02)
    assert w2.reserved(r) == (jid, b"hello")
    assert w2.cmd(b"delete %d" % jid) == b"DELETED"
    # a blocked reserve times out
    t0 = time.time()
    assert w2.reserve(1) == b"TIMED_OUT"
    assert 0.9 < time.time() - t0 < 3
    # reserve without a timeout waits for a put
    w2.send(b"reserve\r\n")
    time.sleep(0.1)
    big = os.urandom(100000)
    jid = p.put(big)
    assert w2.reserved() == (jid, big)


@pytest.mark.parametrize("flag", ["-d", "-s"])
def test_sync_write_log(ceiling_bin, tmp_path, flag):
    """-d and -s write each generation in place at the write position of
    the zero-filled log: what was acknowledged is there, in order, with
    -d's rewritten block heads intact and zeros after the last byte."""
    port = free_port()
    proc = start([ceiling_bin, "-q", "-l", "127.0.0.1", "-p", str(port),
                  "-b", str(tmp_path), "-o", flag], port)
    try:
        c = Conn(port)
        want = b""
        for i in range(40):  # past a block boundary, one put at a time
            body = b"%d" % i * (i * 7 % 300 + 1)
            c.put(body)
            want += b"put 1024 0 120 %d\r\n%s\r\n" % (len(body), body)
        assert c.cmd(b"delete 1") == b"DELETED"
        want += b"delete 1\r\n"
        with open(tmp_path / "ceiling.log", "rb") as f:
            log = f.read(len(want) + 8192)
        assert len(want) > 4096
        assert log[:len(want)] == want
        assert log[len(want):] == bytes(8192)
        assert os.path.getsize(tmp_path / "ceiling.log") == 64 << 20
        c.close()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("args", [["-d"], ["-o", "-d", "-s"], ["-o", "-u",
                                  "-d"], ["-o", "-s", "-w"]])
def test_sync_write_refusals(ceiling_bin, tmp_path, args):
    r = subprocess.run([ceiling_bin, "-p", "0", "-b", str(tmp_path)] + args,
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "-d or -s needs -b and -o" in r.stderr


@pytest.mark.parametrize("kick", [False, True])
def test_split_body_log(ceiling_bin, tmp_path, kick):
    """-L: a put's body of at least -L bytes goes to the body file and not
    the log (its line does), a smaller one to the log as before; each put
    is answered once its whole body is read and synced, not before; the
    body file grows by 64 MiB steps."""
    port = free_port()
    proc = start([ceiling_bin, "-l", "127.0.0.1", "-p", str(port), "-b",
                  str(tmp_path), "-o", "-L", "1000"] + (["-K"] if kick else []),
                 port)
    try:
        c = Conn(port)
        small, big = b"s" * 999, bytes(range(256)) * 1200  # 307,200 bytes
        want_log = b"put 0 0 1 999\r\n" + small + b"\r\n"
        assert c.cmd(want_log[:-2]) == b"INSERTED 1"
        line = b"put 0 0 1 %d\r\n" % len(big)
        c.send(line + big[:1000])  # the line and part of the body
        c.s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            c.line()  # no reply before the body is all there
        c.s.settimeout(5)
        c.send(big[1000:] + b"\r\n" + want_log)  # and a small put after
        assert c.line() == b"INSERTED 1"
        assert c.line() == b"INSERTED 1"
        want_log += line + want_log
        with open(tmp_path / "ceiling.log", "rb") as f:
            log = f.read(len(want_log) + 64)
        assert log == want_log + bytes(64)
        assert os.path.getsize(tmp_path / "ceiling.body") == 64 << 20
        with open(tmp_path / "ceiling.body", "rb") as f:
            body = f.read(len(big) + 2 + 64)
        assert body == big + b"\r\n" + bytes(64)
        c.close()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("args", [["-q"], ["-o", "-u"], ["-k"], ["-n", "2"],
                                  ["-R", "1", "-r", "1@127.0.0.1:1"]])
def test_split_refusals(ceiling_bin, tmp_path, args):
    r = subprocess.run([ceiling_bin, "-p", "0", "-b", str(tmp_path), "-L",
                        "65536"] + args, capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    assert "-L needs -b, not -q, -u, -k, -R or -n" in r.stderr
    r = subprocess.run([ceiling_bin, "-p", "0", "-b", str(tmp_path), "-K"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "-K needs -L" in r.stderr
    r = subprocess.run([ceiling_bin, "-p", "0", "-L", "65536"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "-L needs -b" in r.stderr


def tables(shard):
    """The bytes of a RocksDB directory's table files (one deleted while
    it is read is left out)."""
    found = b""
    for f in os.listdir(shard):
        try:
            found += (shard / f).read_bytes() if f.endswith(".sst") else b""
        except FileNotFoundError:
            pass
    return found


def test_raft_ceiling_keeps_jobs(ceiling_bin, tmp_path):
    """-R -k: a one-node Raft ceiling answers each put once its entry is
    applied and puts the job into a rockstalkd shard (DIR/shard-00), as a
    cluster node does; once the memtable fills (16 MiB), the jobs are in
    the shard's table files."""
    port, rport = free_port(), free_port()
    proc = start([ceiling_bin, "-l", "127.0.0.1", "-p", str(port), "-b",
                  str(tmp_path), "-R", "1", "-r", "1@127.0.0.1:%d" % rport,
                  "-k"], port)
    try:
        c = Conn(port)
        bodies = [os.urandom(200) for _ in range(1000)]
        batch = b"".join(b"put 1024 0 120 200\r\n%s\r\n" % b
                         for b in bodies)
        for _ in range(100):  # 100,000 jobs, 32 MiB in the memtable
            c.send(batch)
            for _ in bodies:
                assert c.line() == b"INSERTED 1"
        for _ in range(500):
            found = tables(tmp_path / "shard-00")
            if all(b[:32] in found for b in bodies[:20]):
                break
            time.sleep(0.02)
        assert all(b[:32] in found for b in bodies[:20])
        assert proc.poll() is None
        c.close()
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def rsbench_bin(tmp_path_factory):
    return bench_build(tmp_path_factory, "bench_build rsbench", "rsbench")


def run_bigsmall(rsbench, port, slow):
    env = dict(os.environ)
    env.pop("RSBENCH_SLOW_US", None)
    if slow is not None:
        env["RSBENCH_SLOW_US"] = slow
    r = subprocess.run([rsbench, "-p", str(port), "-m", "bigsmall", "-c",
                        "1", "-s", "100", "-g", "1", "-G", "4096", "-n",
                        "30", "-d", "10"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    res = dict(kv.split("=", 1) for kv in
               r.stdout.strip().splitlines()[-1].split()[1:])
    slows = [ln.split() for ln in r.stderr.splitlines()
             if ln.startswith("slow ")]
    return int(res["small_ops"]) + int(res.get("late", 0)), slows


def test_rsbench_slow_acks(rsbench_bin, rockstalkd):
    """RSBENCH_SLOW_US=0 prints every small put (never a large one), with
    its send time in Unix microseconds and its latency; a bound no put
    reaches, or none given, prints none."""
    srv = rockstalkd()
    small, slows = run_bigsmall(rsbench_bin, srv.port, "0")
    assert small > 0 and len(slows) == small
    now = time.time() * 1e6
    for _, sent, lat in slows:
        assert now - 60e6 < int(sent) <= now and 0 <= int(lat) < 60e6
    assert run_bigsmall(rsbench_bin, srv.port, "1000000000")[1] == []
    assert run_bigsmall(rsbench_bin, srv.port, None)[1] == []


@pytest.mark.parametrize("bad", ["-1", "x", "10ms", "99999999999999999999"])
def test_rsbench_slow_us_refused(rsbench_bin, bad):
    """A value of RSBENCH_SLOW_US that is not a count of microseconds
    stops rsbench before it connects anywhere."""
    r = subprocess.run([rsbench_bin, "-p", "1"], capture_output=True,
                       text=True, env=dict(os.environ, RSBENCH_SLOW_US=bad),
                       timeout=10)
    assert r.returncode != 0
    assert "RSBENCH_SLOW_US: expected microseconds" in r.stderr


@pytest.fixture
def queue_ceiling(ceiling_bin):
    """The ceiling probe in queue mode, in memory: its port."""
    port = free_port()
    proc = start([ceiling_bin, "-q", "-l", "127.0.0.1", "-p", str(port)],
                 port)
    try:
        yield port
    finally:
        proc.kill()
        proc.wait()


def rsbench_put(rsbench, port, tube, args):
    """Runs rsbench (args) into tube, then reserves every job it left:
    their bodies, in order."""
    r = subprocess.run([rsbench, "-p", str(port), "-t", tube, "-x"] + args,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c = Conn(port)
    assert c.cmd(b"watch " + tube.encode()).startswith(b"WATCHING")
    bodies = []
    while True:
        reply = c.reserve()
        if reply == b"TIMED_OUT":
            break
        jid, body = c.reserved(reply)
        bodies.append(body)
        assert c.cmd(b"delete %d" % jid) == b"DELETED"
    c.close()
    return bodies


def incompressible(data):
    return len(zlib.compress(data, 9)) >= 0.95 * len(data)


def test_rsbench_random_bodies(rsbench_bin, queue_ceiling):
    """-R: a small body and a large one are each incompressible, and so
    are many small ones together (a store compresses a block of them at
    once: they must not repeat one another); without -R bodies are the
    repeating alphabet, which compresses."""
    port = queue_ceiling
    small = rsbench_put(rsbench_bin, port, "rs",
                        ["-m", "put", "-s", "100", "-n", "40", "-R"])
    assert len(small) == 40 and all(len(b) == 100 for b in small)
    assert all(incompressible(b[16:]) for b in small)
    assert incompressible(b"".join(b[16:] for b in small))
    large = rsbench_put(rsbench_bin, port, "rl",
                        ["-m", "bigsmall", "-c", "0", "-g", "1", "-G",
                         "262144", "-n", "3", "-d", "10", "-R"])
    assert len(large) == 3 and all(len(b) == 262144 for b in large)
    assert all(incompressible(b) for b in large)
    plain = rsbench_put(rsbench_bin, port, "p",
                        ["-m", "put", "-s", "4096", "-n", "2"])
    assert len(plain) == 2
    assert all(len(zlib.compress(b)) < 0.1 * len(b) for b in plain)
    assert plain[0][16:] == bytes(b"abcdefghijklmnopqrstuvwxyz"[i % 26]
                                  for i in range(16, 4096))


@pytest.mark.parametrize("args", [["-s", "100"], ["-s", "5000", "-r", "7"]])
def test_rsbench_random_bodies_reserved(rsbench_bin, queue_ceiling, args):
    """-R in cycle mode: every reserved body (any byte: of 150-odd 5000-byte
    ones, some hold a CRLF; read in 7-byte pieces too) checks against the
    body put."""
    r = subprocess.run([rsbench_bin, "-p", str(queue_ceiling), "-m",
                        "cycle", "-c", "2", "-n", "300", "-d", "10", "-x",
                        "-R"] + args, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    res = r.stdout.strip().splitlines()[-1]
    assert res.startswith("RESULT ") and " ops=300" in res, res
