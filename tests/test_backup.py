"""Backup and restore (issue 28, item 2): `rockstalk backup DIR` copies one
moment of a running standalone rockstalkd into a new data directory
(rockstalk-backup, PROTOCOL.md 11.7), and `rockstalkd -b DIR` serves it.

- Under load (producers, workers, a put-then-delete churner, several
  shards): every job acknowledged before the backup started and not
  deleted by then is in the copy with its body, and the copy's job set is
  the state of ONE moment: some instant M inside the backup's run has, for
  every job, "put before M and not deleted before M" exactly when the job
  is in the copy (each put and delete happened between its send and its
  reply).
- Refusals leave nothing that starts as if good: a non-empty DIR, an
  identity without bare admin, a server without a store, a stream cut
  short, damaged or stalled (a killed client leaves RESTORE.part, which
  rockstalkd refuses), and the senders are bounded (BACKUP_BUSY).
- Memory: 24 MiB of bodies copied with the client's peak RSS (wait4's
  ru_maxrss) within a few MiB of its baseline."""
import hashlib
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import ROCKSTALKD, ROOT, free_port, wait_listening

CLI = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALK_CLI", "rockstalk")))

pytestmark = pytest.mark.not_via_follower("backup is a standalone's")


class Conn:
    """A blocking line client: cmd() returns (status line, body or None)."""

    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError(self.buf)
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode()

    def reply(self):
        ln = self.line()
        w = ln.split()
        if w and w[0] in ("FOUND", "RESERVED", "OK"):
            n = int(w[-1]) + 2
            while len(self.buf) < n:
                self._fill()
            body, self.buf = self.buf[:n - 2], self.buf[n:]
            return ln, body
        return ln, None

    def cmd(self, line, body=None):
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.s.sendall(data)
        return self.reply()

    def put(self, body, pri=0):
        ln, _ = self.cmd("put %d 0 120 %d" % (pri, len(body)), body)
        assert ln.startswith("INSERTED "), ln
        return int(ln.split()[1])

    def close(self):
        self.s.close()


def start(d, *flags):
    """A rockstalkd on data directory d, its log in d.log; returns (Popen,
    port)."""
    port = free_port()
    log = open(str(d) + ".log", "ab")
    p = subprocess.Popen([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port),
                          "-b", str(d)] + list(flags),
                         stdout=log, stderr=subprocess.STDOUT)
    log.close()
    p.log_path = str(d) + ".log"
    wait_listening(port, p)
    return p, port


def stop(p):
    """Stops p; its log must hold no sanitizer report (make asan)."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    with open(p.log_path, "rb") as f:
        log = f.read()
    for bad in (b"Sanitizer", b"runtime error:"):
        assert bad not in log, log[-3000:]


def backup(port, d, *opts, timeout=60):
    """Runs rockstalk backup; returns the CompletedProcess (text)."""
    return subprocess.run([CLI, "-p", str(port)] + list(opts) +
                          ["backup", str(d)], capture_output=True, text=True,
                          timeout=timeout)


def contents(port, top):
    """{id: body} of every job with an id in 1..top (peek, pipelined)."""
    c = Conn(port, timeout=30)
    got = {}
    for lo in range(1, top + 1, 500):
        ids = range(lo, min(lo + 500, top + 1))
        c.s.sendall(b"".join(b"peek %d\r\n" % i for i in ids))
        for i in ids:
            ln, body = c.reply()
            if ln.startswith("FOUND"):
                got[i] = body
            else:
                assert ln == "NOT_FOUND", ln
    c.close()
    return got


def stats(port):
    c = Conn(port)
    _, body = c.cmd("stats")
    c.close()
    return dict(ln.split(": ", 1) for ln in body.decode().splitlines()[1:])


def one_moment(jobs, present, t0, t1):
    """The instants M in [t0, t1] that explain the copy: every present job
    was put (the put happened by its reply, put_ack) before M and not
    deleted (its delete happened no earlier than its send) before M; every
    absent job was not yet put (put after its send... at the latest by its
    reply) or already deleted. Returns (lo, hi, gaps): M may lie in
    (lo, hi) minus the merged forbidden intervals; gaps are the allowed
    pieces (empty: no single moment explains the copy)."""
    lo, hi = t0, t1
    forbid = []
    for j in jobs:
        if j["id"] in present:
            lo = max(lo, j["put_send"])
            if j.get("del_ack") is not None:
                hi = min(hi, j["del_ack"])
        else:
            # absent at M: M before the put took effect (< put_ack) or
            # after the delete did (> del_send)
            end = j["del_send"] if j.get("del_send") is not None else 1e30
            forbid.append((j["put_ack"], end))
    forbid.sort()
    gaps, cur = [], lo
    for a, b in forbid:
        if b <= cur:
            continue
        if a > cur:
            gaps.append((cur, min(a, hi)))
        cur = max(cur, b)
        if cur >= hi:
            break
    if cur < hi:
        gaps.append((cur, hi))
    return lo, hi, [g for g in gaps if g[0] < g[1]]


def test_one_moment_check_can_fail():
    """The checker itself: job 1 deleted (reply at 3) before job 2 was
    put (sent at 4); a copy holding both mixes two moments."""
    jobs = [dict(id=1, put_send=0.0, put_ack=1.0, del_send=2.0, del_ack=3.0),
            dict(id=2, put_send=4.0, put_ack=5.0, del_send=None,
                 del_ack=None)]
    assert one_moment(jobs, {1, 2}, 0.0, 10.0)[2] == []
    assert one_moment(jobs, {2}, 0.0, 10.0)[2]       # after 5
    assert one_moment(jobs, {1}, 0.0, 10.0)[2]       # before 3
    assert one_moment(jobs, set(), 0.0, 10.0)[2]     # between 3 and 4
    assert one_moment(jobs, {2}, 0.0, 3.9)[2] == []  # 2 not sent by then


def check_copy(copy, jobs, deletes, t0, t1, out):
    """Restores copy and checks it against the load's record (jobs: put
    times, deletes: id -> delete send and reply times) for a backup run
    between t0 and t1. Returns a line of figures."""
    for j in jobs:
        d = deletes.get(j["id"])
        j["del_send"], j["del_ack"] = d if d else (None, None)
    assert sorted(os.listdir(copy)) == ["RESTORE"]
    top = max(j["id"] for j in jobs)
    q, qport = start(copy)
    try:
        got = contents(qport, top + 100)
        st = stats(qport)
    finally:
        stop(q)
    byid = {j["id"]: j for j in jobs}
    assert set(got) <= set(byid), "the copy holds a job never put"
    for jid, body in got.items():
        assert body == byid[jid]["body"], jid
    # every job acknowledged before the backup started, and whose delete
    # was not even sent before it ended, is there
    must = [j["id"] for j in jobs if j["put_ack"] < t0 and
            (j["del_send"] is None or j["del_send"] > t1)]
    missing = [i for i in must if i not in got]
    assert not missing, missing[:10]
    # a job whose delete was acknowledged before it started is not
    gone = [j["id"] for j in jobs
            if j["del_ack"] is not None and j["del_ack"] < t0 and
            j["id"] in got]
    assert not gone, gone[:10]
    # nothing put after the backup ended
    late = [j["id"] for j in jobs if j["put_send"] > t1 and j["id"] in got]
    assert not late, late[:10]
    lo, hi, gaps = one_moment(jobs, set(got), t0, t1)
    assert gaps, ("no single moment explains the copy", lo - t0, hi - t0)
    total = sum(int(st["current-jobs-" + s])
                for s in ("ready", "reserved", "delayed", "buried"))
    assert total == len(got)
    during = sum(1 for j in jobs
                 if t0 <= j["put_ack"] and j["put_send"] <= t1)
    dels = sum(1 for j in jobs if j["del_ack"] and
               t0 <= j["del_ack"] and j["del_send"] <= t1)
    return ("%d in the copy, %d required present; %d puts and %d deletes "
            "overlapped the backup's %.3f s; one moment in %.1f ms of it "
            "(%d gaps); %s" %
            (len(got), len(must), during, dels, t1 - t0,
             sum(b - a for a, b in gaps) * 1e3, len(gaps),
             out.splitlines()[0])), during, dels


@pytest.mark.parametrize("mode", ["default", "F"])
def test_backup_under_load_is_one_moment(tmp_path, mode):
    """Four shards, 1500 jobs of 2 KiB before, then 2 producers, 2 workers
    (reserve, delete) and a churner (put, delete at once, often cancelled
    inside the commit journal's write-behind window) while three backups
    run one after another; each copy restores to one moment of the
    server's history. In the default mode (commit journal, write-behind
    window) and under -F (each group straight into RocksDB, where shards
    read one after another would show different moments)."""
    src = tmp_path / "src"
    p, port = start(src, "-S", "4", *(["-F"] if mode == "F" else []))
    jobs, lock, stop_load = [], threading.Lock(), threading.Event()
    deletes, runs = {}, []
    try:
        c = Conn(port)
        for i in range(1500):
            body = b"pre-%06d-" % i + b"x" * 2048
            t = time.monotonic()
            jid = c.put(body)
            jobs.append(dict(id=jid, body=body, put_send=t,
                             put_ack=time.monotonic()))
        c.close()

        def producer(k):
            c = Conn(port)
            n = 0
            while not stop_load.is_set():
                body = b"p%d-%06d-" % (k, n) + b"y" * (64 + 97 * (n % 40))
                t = time.monotonic()
                jid = c.put(body)
                with lock:
                    jobs.append(dict(id=jid, body=body, put_send=t,
                                     put_ack=time.monotonic()))
                n += 1
            c.close()

        def worker():
            c = Conn(port)
            while not stop_load.is_set():
                ln, _ = c.cmd("reserve-with-timeout 0")
                if not ln.startswith("RESERVED"):
                    continue
                jid = int(ln.split()[1])
                t = time.monotonic()
                assert c.cmd("delete %d" % jid)[0] == "DELETED"
                with lock:
                    deletes[jid] = (t, time.monotonic())
            c.close()

        def churner():
            c = Conn(port)
            assert c.cmd("use churn")[0] == "USING churn"  # workers: default
            n = 0
            while not stop_load.is_set():
                body = b"churn-%06d" % n
                t = time.monotonic()
                jid = c.put(body)
                t1 = time.monotonic()
                assert c.cmd("delete %d" % jid)[0] == "DELETED"
                with lock:
                    jobs.append(dict(id=jid, body=body, put_send=t,
                                     put_ack=t1))
                    deletes[jid] = (t1, time.monotonic())
                n += 1
            c.close()

        threads = [threading.Thread(target=producer, args=(k,))
                   for k in range(2)]
        threads += [threading.Thread(target=worker) for _ in range(2)]
        threads.append(threading.Thread(target=churner))
        for t in threads:
            t.start()
        for k in range(3):
            time.sleep(0.3)
            t0 = time.monotonic()
            r = backup(port, tmp_path / ("copy%d" % k))
            t1 = time.monotonic()
            assert r.returncode == 0, r.stderr
            assert "jobs" in r.stdout and "bytes" in r.stdout, r.stdout
            runs.append((t0, t1, r.stdout))
        time.sleep(0.3)
        stop_load.set()
        for t in threads:
            t.join(30)
    finally:
        stop_load.set()
        stop(p)
    overlap = [0, 0]
    for k, (t0, t1, out) in enumerate(runs):
        line, during, dels = check_copy(tmp_path / ("copy%d" % k), jobs,
                                        deletes, t0, t1, out)
        overlap[0] += during
        overlap[1] += dels
        print("backup %d under load (%s): %s" % (k, mode, line))
    print("load: %d jobs put in all, %d deleted" % (len(jobs), len(deletes)))
    assert overlap[0] > 0 and overlap[1] > 0, "no load overlapped a backup"


def test_backup_refusals(tmp_path, rockstalkd):
    """A non-empty DIR, a server without a store, an identity without bare
    admin: refused, and nothing is left that starts."""
    s = rockstalkd()
    c = Conn(s.port)
    ids = [c.put(b"job-%d" % i) for i in range(20)]
    c.close()
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("mine")
    r = backup(s.port, full)
    assert r.returncode == 2 and "not empty" in r.stderr, r.stderr
    assert sorted(os.listdir(full)) == ["keep"]

    mem = rockstalkd("--memory")
    r = backup(mem.port, tmp_path / "m")
    assert r.returncode == 1 and "BACKUP_UNAVAILABLE" in r.stderr, r.stderr
    assert not (tmp_path / "m").exists()
    # a reply still waiting to leave: the stream would overtake it
    c = Conn(s.port)
    c.s.sendall(b"put 0 0 60 1\r\nx\r\nrockstalk-backup\r\n")
    assert c.line().startswith("INSERTED")
    assert c.line() in ("BACKUP_UNAVAILABLE", "BACKUP 1"), c.buf[:100]
    c.close()

    def digest(t):
        return "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    auth = tmp_path / "auth"
    auth.write_text("root %s admin\ntadm %s admin:*\n" %
                    (digest("root-token"), digest("tadm-token")))
    os.chmod(auth, 0o600)
    a = rockstalkd("--auth-file", str(auth))
    r = backup(a.port, tmp_path / "t", "--token", "tadm-token")
    assert r.returncode == 1 and "DENIED" in r.stderr, r.stderr
    assert not (tmp_path / "t").exists()
    r = backup(a.port, tmp_path / "n")  # no token at all
    assert r.returncode != 0 and not (tmp_path / "n").exists(), r.stderr
    r = backup(a.port, tmp_path / "root", "--token", "root-token")
    assert r.returncode == 0, r.stderr
    # an empty directory that exists is fine; the copy serves
    empty = tmp_path / "empty"
    empty.mkdir()
    assert backup(s.port, empty).returncode == 0
    q, qport = start(empty)
    try:
        got = contents(qport, max(ids) + 5)
    finally:
        stop(q)
    want = {j: b"job-%d" % i for i, j in enumerate(ids)}
    want[max(ids) + 1] = b"x"  # the put before the refused backup
    assert got == want


def raw_stream(port):
    """The whole reply to rockstalk-backup, read with a plain socket."""
    c = socket.create_connection(("127.0.0.1", port), 10)
    c.sendall(b"rockstalk-backup\r\n")
    data = b""
    while True:
        d = c.recv(1 << 16)
        if not d:
            break
        data += d
    c.close()
    return data


class FakeServer:
    """Answers one connection's rockstalk-backup with data, then closes.
    data may be a list of pieces: each after the first waits for go (set
    it once per piece); sent[i] is set once piece i is out. With hold,
    keeps the connection open, silent, until done is set."""

    def __init__(self, data, hold=False):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.port = self.ls.getsockname()[1]
        self.data = data if isinstance(data, list) else [data]
        self.hold = hold
        self.done, self.go = threading.Event(), threading.Event()
        self.sent = [threading.Event() for _ in self.data]
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        c, _ = self.ls.accept()
        buf = b""
        while b"\n" not in buf:
            buf += c.recv(100)
        for i, piece in enumerate(self.data):
            if i > 0:
                self.go.wait(30)
                self.go.clear()
            c.sendall(piece)
            self.sent[i].set()
        if self.hold:
            self.done.wait(30)
        c.close()
        self.ls.close()


def test_backup_cut_short_leaves_nothing_that_starts(tmp_path, rockstalkd):
    """A stream cut at several points, a flipped byte, a missing
    BACKUP_DONE: the client fails and removes its file; a client killed
    mid-stream leaves RESTORE.part, which rockstalkd refuses; a RESTORE
    cut short fails at the restore and keeps failing (nothing served)."""
    s = rockstalkd("-S", "2")
    c = Conn(s.port)
    for i in range(200):
        c.put(b"body-%04d-" % i + b"z" * 1000)
    c.close()
    full = raw_stream(s.port)
    head, rest = full.split(b"\r\n", 1)
    assert head == b"BACKUP 2"
    stream, done = rest[:rest.rindex(b"BACKUP_DONE")], rest[
        rest.rindex(b"BACKUP_DONE"):]
    assert done.startswith(b"BACKUP_DONE 200 %d\r\n" % len(stream)), done
    cuts = [b"BACKUP 2\r\n" + stream[:n] for n in
            (0, 10, 16, 20, 5000, len(stream) // 2, len(stream) - 1)]
    cuts.append(b"BACKUP 2\r\n" + stream)  # no BACKUP_DONE
    flipped = bytearray(stream)
    flipped[len(stream) // 2] ^= 0x20  # inside a body: only the CRC sees it
    cuts.append(b"BACKUP 2\r\n" + bytes(flipped) + done)
    cuts.append(b"BACKUP 2\r\n" + stream + b"BACKUP_DONE 200 7\r\n")
    for k, data in enumerate(cuts):
        f = FakeServer(data)
        d = tmp_path / ("cut%d" % k)
        r = backup(f.port, d)
        assert r.returncode == 2, (k, r.stdout, r.stderr)
        assert not d.exists(), (k, os.listdir(d))
    # the whole thing through the fake server works (the test's control)
    f = FakeServer(b"BACKUP 2\r\n" + stream + done)
    assert backup(f.port, tmp_path / "whole").returncode == 0

    # killed mid-stream: RESTORE.part stays, and rockstalkd refuses it
    f = FakeServer(b"BACKUP 2\r\n" + stream[:len(stream) // 2], hold=True)
    d = tmp_path / "killed"
    cl = subprocess.Popen([CLI, "-p", str(f.port), "backup", str(d)],
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    part = d / "RESTORE.part"
    end = time.monotonic() + 10
    while time.monotonic() < end and (
            not part.exists() or part.stat().st_size < len(stream) // 2):
        time.sleep(0.02)
    cl.send_signal(signal.SIGKILL)
    cl.wait()
    f.done.set()
    assert part.exists()
    r = subprocess.run([ROCKSTALKD, "-l", "127.0.0.1", "-p",
                        str(free_port()), "-b", str(d)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "unfinished backup" in r.stderr, r.stderr
    assert not (d / "FORMAT").exists()

    # a RESTORE cut short (by hand): the restore fails, every time
    d = tmp_path / "short"
    d.mkdir()
    (d / "RESTORE").write_bytes(stream[:len(stream) - 100])
    for _ in range(2):
        r = subprocess.run([ROCKSTALKD, "-l", "127.0.0.1", "-p",
                            str(free_port()), "-b", str(d)],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode != 0 and "ended early" in r.stderr, r.stderr
        assert (d / "RESTORE").exists()
    # and with RESTORE gone, the half-restored shards are not served
    os.unlink(d / "RESTORE")
    r = subprocess.run([ROCKSTALKD, "-l", "127.0.0.1", "-p",
                        str(free_port()), "-b", str(d)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "unfinished restore" in r.stderr, r.stderr


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def test_backup_memory_bounded_and_senders_bounded(tmp_path):
    """24 MiB of bodies: the client's peak RSS (VmHWM) once the whole
    stream is in, read while a fake server holds BACKUP_DONE back, stays
    within 4 MiB of its peak before the first byte of the stream; two
    backups whose clients read nothing hold both senders, a third is
    BACKUP_BUSY while the loop serves on, and closing them frees the
    senders."""
    src = tmp_path / "src"
    p, port = start(src, "-z", "1048576")
    try:
        c = Conn(port)
        body = b"m" * (512 << 10)
        ids = [c.put(body[:-8] + b"%08d" % i) for i in range(48)]
        c.close()
        r = backup(port, tmp_path / "copy")
        assert r.returncode == 0, r.stderr
        full = raw_stream(port)
        cut = full.rindex(b"BACKUP_DONE")
        f = FakeServer([b"", full[:cut], full[cut:]])
        cl = subprocess.Popen([CLI, "-p", str(f.port), "backup",
                               str(tmp_path / "copy2")],
                              stdout=subprocess.PIPE, text=True)
        f.sent[0].wait(10)
        time.sleep(0.2)
        base = vm_hwm_kib(cl.pid)
        f.go.set()
        f.sent[1].wait(10)
        part = tmp_path / "copy2" / "RESTORE.part"
        end = time.monotonic() + 20
        while time.monotonic() < end and part.stat().st_size < cut - 20:
            time.sleep(0.02)
        time.sleep(0.2)
        peak = vm_hwm_kib(cl.pid)
        f.go.set()
        out, _ = cl.communicate(timeout=20)
        assert cl.returncode == 0
        size = os.path.getsize(tmp_path / "copy2" / "RESTORE")
        print("client peak RSS %d KiB (%d KiB before the stream) for a %d "
              "KiB stream; %s" % (peak, base, size // 1024,
                                  r.stdout.splitlines()[0]))
        assert size > 24 << 20
        assert base > 0 and peak - base < 4096, (peak, base)

        # senders: two stalled clients hold both; a third is refused
        stalled = []
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", port), 10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"rockstalk-backup\r\n")
            stalled.append(s)
        time.sleep(0.3)
        c = Conn(port)
        assert c.cmd("rockstalk-backup") == ("BACKUP_BUSY", None)
        assert c.cmd("stats")[0].startswith("OK")  # the loop is not held
        c.close()
        for s in stalled:
            s.close()
        r = None
        end = time.monotonic() + 10
        while time.monotonic() < end:
            r = backup(port, tmp_path / "again")
            if r.returncode == 0:
                break
            time.sleep(0.1)
        assert r.returncode == 0, r.stderr
        # a stop with a sender blocked on a reader that takes nothing:
        # its socket is shut down, the server exits at once and cleanly
        s = socket.create_connection(("127.0.0.1", port), 10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"rockstalk-backup\r\n")
        time.sleep(0.3)
        t = time.monotonic()
        stop(p)
        assert p.returncode == 0 and time.monotonic() - t < 5, p.returncode
        s.close()
    finally:
        stop(p)
    q, qport = start(tmp_path / "copy", "-z", "1048576")
    try:
        got = contents(qport, max(ids) + 5)
    finally:
        stop(q)
    assert sorted(got) == ids
    assert all(got[j] == body[:-8] + b"%08d" % i for i, j in enumerate(ids))


def test_backup_over_tls(tmp_path, rockstalkd):
    """rockstalk --tls backup: the stream goes through the connection's own
    TLS session, which the sender thread takes over (8 MiB, so the socket
    fills and the sender waits for it); the copy serves every job."""
    from cluster import make_certs
    certs = str(tmp_path / "certs")
    make_certs(certs, 1)
    tport = free_port()
    s = rockstalkd("-z", "1048576", "--listen", "tls://127.0.0.1:%d" % tport,
                   "--tls-cert", os.path.join(certs, "node1.pem"),
                   "--tls-key", os.path.join(certs, "node1.key"))
    c = Conn(s.port)
    body = b"t" * (256 << 10)
    ids = [c.put(body[:-8] + b"%08d" % i) for i in range(32)]
    c.close()
    tls = ["--tls", "--cacert", os.path.join(certs, "ca.pem"),
           "--tls-name", "rockstalk-node-1"]
    r = backup(tport, tmp_path / "copy", *tls)
    assert r.returncode == 0, r.stderr
    assert "32 jobs" in r.stdout, r.stdout
    q, qport = start(tmp_path / "copy", "-z", "1048576")
    try:
        got = contents(qport, max(ids) + 5)
    finally:
        stop(q)
    assert sorted(got) == ids
    assert all(got[j] == body[:-8] + b"%08d" % i for i, j in enumerate(ids))


def test_backup_from_a_cluster_through_a_follower(tmp_path):
    """A 3-node cluster (mutual TLS between nodes), a producer putting on
    the leader: `rockstalk backup` against a follower is relayed to the
    leader, which sends the shards as of one applied Raft entry; the copy
    restores as a standalone server with every job acknowledged before the
    backup started and nothing put after it ended."""
    from cluster import Cluster
    c = Cluster(tmp_path / "c", ["-S", "2"])
    try:
        lead = c.node(c.wait_leader())
        f = c.follower()
        conn = Conn(lead.port)
        acked = [(conn.put(b"before-%d" % i), b"before-%d" % i, 0.0)
                 for i in range(100)]
        conn.close()
        stop_load, later = threading.Event(), []

        def producer():
            cn = Conn(lead.port)
            n = 0
            while not stop_load.is_set():
                body = b"during-%d" % n
                t = time.monotonic()
                later.append((cn.put(body), body, t, time.monotonic()))
                n += 1
            cn.close()
        t = threading.Thread(target=producer)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        r = backup(f.port, tmp_path / "copy")
        t1 = time.monotonic()
        stop_load.set()
        t.join(20)
        assert r.returncode == 0, r.stderr
        # a follower's own refusal path: the leader sends; a node that is
        # not the leader never parses the command (it relays)
    finally:
        stop_load.set()
        c.stop()
    assert sorted(os.listdir(tmp_path / "copy")) == ["RESTORE"]
    top = max(j for j, *_ in acked + later)
    q, qport = start(tmp_path / "copy")
    try:
        got = contents(qport, top + 5)
    finally:
        stop(q)
    for jid, body, *_ in acked:
        assert got.get(jid) == body, jid
    for jid, body, ts, ta in later:
        if ta < t0:
            assert got.get(jid) == body, jid
        if ts > t1:
            assert jid not in got, jid
    # one moment: the puts in the copy are a prefix of the producer's
    present = [jid in got for jid, *_ in later]
    assert present == sorted(present, reverse=True), "a gap in the puts"
    print("cluster backup through a follower: %d jobs in the copy of %d "
          "put; %s" % (len(got), len(acked) + len(later),
                       r.stdout.splitlines()[0]))
