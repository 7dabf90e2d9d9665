"""rockstalkd --import-binlog (issue 28, item 3; rockstalkd(1), "Moving in
from beanstalkd"): Debian's beanstalkd 1.12 runs a scripted workload with a
small binlog size (-s), so that its jobs span many binlog files and its
compaction rewrites some of them; the test records `stats-job` and `peek`
of every live job, kills beanstalkd with SIGKILL (its binlog then is what a
crash leaves: the last file's zeroed, preallocated tail), imports the
binlog into an empty data directory and compares.

The reference is twofold: beanstalkd before it stopped, and beanstalkd
restarted on a copy of the same binlog. Exactly as beanstalkd-restarted:
the set of live jobs; per job id, tube, pri, ttr, delay, reserves,
timeouts, releases, buries, kicks, state and the body (a job beanstalkd
had reserved comes back ready, as beanstalkd itself does after a restart;
its time-left is then 0), with one exception: beanstalkd's replay buries a
buried job again (prot_replay -> bury_job), adding one to its buries
count; the import keeps the count beanstalkd had.

Exactly as beanstalkd-before-the-stop, the same, but for what beanstalkd
never wrote to its binlog (listed per job by the workload): it writes no
record when a job is reserved, when its TTR runs out, or when it is
released without a delay, so the job still reserved at the stop may have
one reserve fewer (unless compaction moved it since), and the job
released with a new priority and no delay comes back with the priority and
counts of its last record.

Within a tolerance: age (carried: created_at is in the binlog) and a
delayed job's time-left (the deadline is carried; the seconds between the
readings are allowed for). Differs by design: `file` (beanstalkd's binlog
file number; 0 here).

Then: a put after the import gets an id above every id beanstalkd used,
also after a restart (the highest was deleted); a torn last record
(the last binlog file cut inside the last put's body) is skipped with a
log line; and the refusals: a non-empty data directory, a garbage binlog,
a binlog whose beanstalkd still runs (its lock), --cluster, --memory.
"""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BEANSTALKD, ROCKSTALKD, Server, free_port


class Conn:
    """One protocol connection: cmd() returns (reply line, body or None)."""

    def __init__(self, server):
        self.sock = server.connect()
        self.buf = b""

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(self.buf)
            self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._need(len(self.buf) + 1)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def cmd(self, line, body=None):
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.sock.sendall(data)
        reply = self._line()
        w = reply.split()
        if w[0] in (b"OK", b"FOUND", b"RESERVED"):
            n = int(w[-1])
            self._need(n + 2)
            out, self.buf = self.buf[:n], self.buf[n + 2:]
            return reply, out
        return reply, None

    def close(self):
        self.sock.close()


def yaml_dict(body):
    out = {}
    for ln in body.decode().splitlines()[1:]:
        k, _, v = ln.partition(": ")
        out[k.strip()] = v.strip()
    return out


def body_for(i):
    """Bodies of 0 to ~1500 bytes with CRLF, NUL and high bytes inside."""
    n = (i * 97) % 1500
    b = bytes((i * 7 + k) % 256 for k in range(n))
    return b"\r\n" + b if i % 5 == 0 else b


TUBES = ["default", "emails", "img-resize", "a.b_c(1)", "x" * 200]
PRIS = [0, 1023, 1024, 4294967295, 100]
TTRS = [1, 30, 120, 3600, 7]


def workload(bs):
    """Drives beanstalkd; returns (ids of live jobs, highest id used, the
    id of the last put, the connection holding a reservation, the fields
    of jobs that beanstalkd changed without a binlog record)."""
    c = Conn(bs)
    ids = {}
    for i in range(60):
        tube = TUBES[i % len(TUBES)]
        c.cmd("use " + tube)
        delay = 300 if i % 11 == 3 else 0
        r, _ = c.cmd("put %d %d %d %d" % (PRIS[i % 5], delay, TTRS[i % 5],
                                          len(body_for(i))), body_for(i))
        assert r.startswith(b"INSERTED"), r
        ids[int(r.split()[1])] = tube
    for jid in sorted(ids)[::7]:  # deletes
        assert c.cmd("delete %d" % jid)[0] == b"DELETED"
        del ids[jid]
    # reserve-job + release with a delay (and a new priority), + bury, kick
    def first4(tube):
        return [j for j in sorted(ids) if ids[j] == tube and j % 11 != 4][:4]
    em, im = first4("emails"), first4("img-resize")
    for jid in em + im:
        r, _ = c.cmd("reserve-job %d" % jid)
        assert r.startswith(b"RESERVED"), r
    for jid in (em[0], im[0], em[1]):
        assert c.cmd("release %d 77 120" % jid)[0] == b"RELEASED"
    for jid in (em[2], em[3], im[1], im[2]):
        assert c.cmd("bury %d 5" % jid)[0] == b"BURIED"
    assert c.cmd("release %d 9 0" % im[3])[0] == b"RELEASED"
    # beanstalkd writes no record for a reservation, nor for a release
    # without delay: these fields of these jobs are not in its binlog
    unlogged = {im[3]: {"pri", "reserves", "releases"}}
    c.cmd("use emails")
    assert c.cmd("kick 1")[0] == b"KICKED 1"
    c.cmd("use img-resize")
    assert c.cmd("kick 1")[0] == b"KICKED 1"
    delayed = next(j for j in sorted(ids) if j % 11 == 4)  # put i=3
    assert c.cmd("kick-job %d" % delayed)[0] == b"KICKED"
    # one due while beanstalkd still runs (delay 1 s)
    c.cmd("use default")
    r, _ = c.cmd("put 5 1 10 3", b"due")
    ids[int(r.split()[1])] = "default"
    # churn, so that beanstalkd's compaction moves live jobs out of the
    # oldest files (full records of known ids) and removes those files
    # (short records of ids whose full record is gone)
    for k in range(250):
        r, _ = c.cmd("put 1 0 10 900", bytes([k]) * 900)
        assert c.cmd("delete %s" % r.split()[1].decode())[0] == b"DELETED"
    # a job left reserved by another connection
    holder = Conn(bs)
    holder.cmd("watch a.b_c(1)")
    holder.cmd("ignore default")  # its TTRs of 1 s would run out
    r, _ = holder.cmd("reserve-with-timeout 0")
    assert r.startswith(b"RESERVED"), r
    unlogged[int(r.split()[1])] = {"reserves"}
    # the last put (torn later), then a highest id that is deleted
    c.cmd("use emails")
    r, _ = c.cmd("put 3 0 60 1000", b"T" * 1000)
    last = int(r.split()[1])
    ids[last] = "emails"
    r, _ = c.cmd("put 3 0 60 1", b"z")
    top = int(r.split()[1])
    assert c.cmd("delete %d" % top)[0] == b"DELETED"
    time.sleep(1.2)  # the delay-1 job is due
    c.close()
    return ids, top, last, holder, unlogged


def snapshot(srv, ids):
    """{id: (stats-job dict, body)} and the time it was taken."""
    c = Conn(srv)
    out = {}
    for jid in sorted(ids):
        r, st = c.cmd("stats-job %d" % jid)
        assert r.startswith(b"OK"), (jid, r)
        r, body = c.cmd("peek %d" % jid)
        assert r.startswith(b"FOUND"), (jid, r)
        out[jid] = (yaml_dict(st), body)
    c.close()
    return out, time.monotonic()


@pytest.fixture(scope="module")
def beanstalkd_log(tmp_path_factory):
    """beanstalkd's binlog after the workload and a SIGKILL, with what it
    answered for every live job just before."""
    base = tmp_path_factory.mktemp("bsimport")
    bdir = str(base / "binlog")
    os.mkdir(bdir)
    port = free_port()
    with open(str(base / "beanstalkd.log"), "wb") as log:
        bs = Server([BEANSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b",
                     bdir, "-s", "12000"], bdir, port, log)
        try:
            ids, top, last, holder, unlogged = workload(bs)
            want, at = snapshot(bs, ids)
            stats = yaml_dict(Conn(bs).cmd("stats")[1])
        finally:
            bs.kill9()
    files = sorted((f for f in os.listdir(bdir) if f.startswith("binlog.")),
                   key=lambda f: int(f[7:]))
    # what beanstalkd itself serves when restarted on (a copy of) it
    again = str(base / "restarted")
    shutil.copytree(bdir, again)
    port = free_port()
    with open(str(base / "restarted.log"), "wb") as log:
        bs = Server([BEANSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b",
                     again], again, port, log)
        try:
            restarted, rat = snapshot(bs, ids)
        finally:
            bs.kill9()
    return dict(dir=bdir, base=base, ids=ids, top=top, last=last, want=want,
                at=at, stats=stats, files=files, holder=holder,
                unlogged=unlogged,
                restarted=restarted, rat=rat)


def start_import(base, name, binlog, *extra):
    data = str(base / name)
    port = free_port()
    log = open(str(base / (name + ".log")), "wb")
    srv = Server([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b", data,
                  "--import-binlog", binlog] + list(extra), data, port, log)
    return srv, log


def log_text(base, name):
    with open(str(base / (name + ".log")), "rb") as f:
        return f.read().decode(errors="replace")


EXACT = ("id", "tube", "pri", "ttr", "delay", "reserves", "timeouts",
         "releases", "buries", "kicks")


def test_import_matches_beanstalkd(beanstalkd_log):
    b = beanstalkd_log
    assert len(b["files"]) >= 5, b["files"]  # spans several files
    assert b["files"][0] != "binlog.1", b["files"]  # compaction ran
    srv, log = start_import(b["base"], "data", b["dir"])
    try:
        got, at = snapshot(srv, b["ids"])
        dt = at - b["at"]
        states = {}
        for jid, (ws, wbody) in b["want"].items():
            gs, gbody = got[jid]
            assert gbody == wbody, jid
            rs = b["restarted"][jid][0]
            if rs["state"] == "buried":  # its replay counts a bury again
                rs = dict(rs, buries=str(int(rs["buries"]) - 1))
            for k in EXACT:  # as beanstalkd restarted on it, exactly
                assert gs[k] == rs[k], (jid, k, gs[k], rs[k])
            assert gs["state"] == rs["state"], (jid, gs, rs)
            skip = b["unlogged"].get(jid, set())
            for k in EXACT:  # as beanstalkd before it stopped
                if k not in skip:
                    assert gs[k] == ws[k], (jid, k, gs[k], ws[k])
            want_state = "ready" if ws["state"] == "reserved" else ws["state"]
            assert gs["state"] == want_state, (jid, gs, ws)
            states[ws["state"]] = states.get(ws["state"], 0) + 1
            assert abs(int(gs["age"]) - int(ws["age"]) - dt) <= 2, (jid, gs)
            if want_state == "delayed":
                left = int(ws["time-left"]) - dt
                assert abs(int(gs["time-left"]) - left) <= 2, (jid, gs, ws)
                left = int(rs["time-left"]) - (at - b["rat"])
                assert abs(int(gs["time-left"]) - left) <= 2, (jid, gs, rs)
            elif want_state in ("ready", "buried"):
                assert gs["time-left"] == "0"
        # the workload made every kind
        assert states.keys() == {"ready", "reserved", "delayed", "buried"}
        print("compared %d jobs from %d binlog files (%s .. %s), states "
              "before the stop %s, %d s between the readings" %
              (len(got), len(b["files"]), b["files"][0], b["files"][-1],
               dict(sorted(states.items())), round(dt)))
        c = Conn(srv)
        st = yaml_dict(c.cmd("stats")[1])
        ws = b["stats"]
        assert int(st["current-jobs-ready"]) == (
            int(ws["current-jobs-ready"]) + int(ws["current-jobs-reserved"]))
        for k in ("current-jobs-delayed", "current-jobs-buried"):
            assert st[k] == ws[k], k
        # urgent: the ready jobs of priority < 1024 (one unlogged priority
        # differs from beanstalkd-before-the-stop)
        urgent = sum(1 for g, _ in got.values()
                     if g["state"] == "ready" and int(g["pri"]) < 1024)
        assert int(st["current-jobs-urgent"]) == urgent
        # nothing more than beanstalkd's live jobs
        assert int(st["current-jobs-ready"]) + int(
            st["current-jobs-delayed"]) + int(
            st["current-jobs-buried"]) == len(b["ids"])
        r, _ = c.cmd("put 1 0 5 2", b"hi")
        first = int(r.split()[1])
        assert first == b["top"] + 1, (r, b["top"])  # the highest was deleted
        c.close()
        text = log_text(b["base"], "data")
        assert ("import: %d jobs from %d binlog files" %
                (len(b["ids"]), len(b["files"]))) in text, text
        assert "cut short" not in text
        # a plain restart serves the same, and ids still go up
        srv.argv = srv.argv[:-2]  # without --import-binlog
        srv.restart()
        again, _ = snapshot(srv, list(b["ids"]) + [first])
        assert {j: v[1] for j, v in again.items() if j != first} == {
            j: v[1] for j, v in got.items()}
        c = Conn(srv)
        r, _ = c.cmd("put 1 0 5 2", b"hi")
        assert int(r.split()[1]) == first + 1, r
        c.close()
    finally:
        srv.stop()
        log.close()


def test_torn_tail_is_skipped(beanstalkd_log):
    b = beanstalkd_log
    torn = str(b["base"] / "torn")
    shutil.copytree(b["dir"], torn)
    os.unlink(os.path.join(torn, "lock"))
    # the file of the last put's record is cut inside its body, and the
    # files after it go: as if beanstalkd had died while writing it
    for name in reversed(b["files"]):
        path = os.path.join(torn, name)
        data = open(path, "rb").read()
        at = data.rfind(b"T" * 1000)
        if at > 0:
            with open(path, "r+b") as f:
                f.truncate(at + 500)
            break
        os.unlink(path)
    assert at > 0
    srv, log = start_import(b["base"], "torn-data", torn)
    try:
        c = Conn(srv)
        for jid in b["ids"]:
            r, body = c.cmd("peek %d" % jid)
            if jid == b["last"]:
                assert r == b"NOT_FOUND"
            else:
                assert body == b["want"][jid][1], jid
        c.close()
    finally:
        srv.stop()
        log.close()
    text = log_text(b["base"], "torn-data")
    assert "import: %d jobs" % (len(b["ids"]) - 1) in text, text
    assert "cut short (beanstalkd stopped while writing it): skipped" in text


def run_refused(base, name, args, what):
    port = free_port()
    data = str(base / name)
    p = subprocess.run([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b",
                        data] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=20)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 1, (p.returncode, out)
    assert what in out, out
    assert "Sanitizer" not in out and "runtime error" not in out, out
    return data


def test_refusals(beanstalkd_log, tmp_path):
    b = beanstalkd_log
    # a data directory with anything in it
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    run_refused(tmp_path, "full", ["--import-binlog", b["dir"]],
                "is not empty; importing needs a new (missing or empty) one")
    assert os.listdir(str(full)) == ["x"]
    # garbage: a bad version, then absurd lengths after a good header
    g = tmp_path / "garbage"
    g.mkdir()
    (g / "binlog.1").write_bytes(os.urandom(4000))
    d = run_refused(tmp_path, "g1", ["--import-binlog", str(g)],
                    "binlog format version")
    assert not os.path.exists(d)  # refused before anything was made
    (g / "binlog.1").write_bytes(b"\x07\x00\x00\x00" + b"\xff" * 4000)
    run_refused(tmp_path, "g2", ["--import-binlog", str(g)],
                "tube name length -1")
    (g / "binlog.1").write_bytes(b"\x07\x00")
    run_refused(tmp_path, "g3", ["--import-binlog", str(g)],
                "header cut short")
    run_refused(tmp_path, "g4", ["--import-binlog", str(tmp_path)],
                "no binlog.N files")
    # while beanstalkd still runs on it
    live = str(tmp_path / "live")
    os.mkdir(live)
    port = free_port()
    with open(str(tmp_path / "live.log"), "wb") as log:
        bs = Server([BEANSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b",
                     live], live, port, log)
        try:
            run_refused(tmp_path, "g5", ["--import-binlog", live],
                        "still holds %s/lock: stop it first" % live)
        finally:
            bs.stop(signal.SIGKILL)
    run_refused(tmp_path, "g6", ["--import-binlog", b["dir"], "--cluster",
                                 "1@127.0.0.1:1", "--node-id", "1"],
                "--import-binlog does not go with --cluster")
    run_refused(tmp_path, "g7", ["--import-binlog", b["dir"], "--memory"],
                "--import-binlog needs a data directory")
