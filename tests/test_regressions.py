"""Regression tests for the defects of issue 12, one test (or more) each.
Each failed on the code before its fix; the docstring says how.

    /usr/bin/python3 -m pytest -q tests/test_regressions.py
"""
import re
import resource
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import ROCKSTALKD, wait_for
from test_crash import Client, Dead, Hang, _log, _start, _stop

ASAN = "asan" in ROCKSTALKD


def _restart_peek(tmp_path, datadir, ids):
    """Restarts a server on datadir (no fault injection) and returns
    {id: (state, body)} of ids that exist."""
    proc, port = _start([], {}, datadir, tmp_path / "restart.log")
    out = {}
    try:
        c = Client(port)
        for jid in ids:
            sj = c.stats_job(jid)
            if sj is None:
                continue
            c.send(b"peek %d\r\n" % jid)
            out[jid] = (sj["state"], c._read_found()[1])
        c.close()
    finally:
        assert _stop(proc) == 0, _log(tmp_path / "restart.log")
    return out


# ---- 1. SIGTERM writes the replies of changes it made durable ----

def test_sigterm_writes_durable_replies(tmp_path):
    """Before the fix, SIGTERM synced the held put and then closed every
    connection without writing its INSERTED: the client saw EOF, and the job
    was there after a restart (a retrying client makes a duplicate)."""
    hold, logpath = tmp_path / "hold", tmp_path / "server.log"
    datadir = tmp_path / "data"
    proc, port = _start([], {"ROCKSTALKD_FAULT_SYNC_HOLD": str(hold)},
                        datadir, logpath)
    try:
        c = Client(port)
        hold.touch()
        c.sock.settimeout(0.5)
        c.send(b"put 0 0 60 5\r\nhello\r\n")
        with pytest.raises(Hang):
            c.line()        # held: the put is not durable, no reply yet
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "shutting down" in _log(logpath), 10,
                 "the server to take SIGTERM")
        hold.unlink()
        c.sock.settimeout(10)
        ln = c.line()
        m = re.fullmatch(rb"INSERTED (\d+)", ln)
        assert m, ln
        with pytest.raises(Dead):   # then the server closes
            c.line()
        assert proc.wait(10) == 0, _log(logpath)
    finally:
        if hold.exists():
            hold.unlink()
        _stop(proc)
    jid = int(m.group(1))
    assert _restart_peek(tmp_path, datadir, [jid]) == {jid: ("ready",
                                                             b"hello")}


def test_sigterm_writes_parked_replies(tmp_path):
    """A client that pipelines many puts and reads slowly has replies parked
    behind a full socket (EAGAIN) when SIGTERM comes. Before the fix they
    were dropped: the client read fewer INSERTED than jobs that exist after
    a restart. Now every stored put's reply reaches it, then EOF."""
    logpath, datadir = tmp_path / "server.log", tmp_path / "data"
    proc, port = _start(["-F"], {}, datadir, logpath)
    n = 600000
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))

        def send_all():     # the server stops reading once replies park
            try:
                s.sendall(b"put 0 0 60 1\r\nx\r\n" * n)
            except OSError:
                pass
        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        mon = Client(port)
        last = [-1]

        def settled():
            # the server has run all it will before the client reads
            cur = mon.stats()["total-jobs"]
            done = cur == last[0]
            last[0] = cur
            return done and cur > 0
        wait_for(lambda: time.sleep(0.2) or settled(), 20,
                 "the server to stop taking puts")
        stored = last[0]
        mon.close()
        assert stored < n, "no reply was parked: %d puts all ran" % stored
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "shutting down" in _log(logpath), 10,
                 "the server to take SIGTERM")
        got, buf = 0, b""
        s.settimeout(10)
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
        got = len(re.findall(rb"INSERTED \d+\r\n", buf))
        s.close()
        assert proc.wait(10) == 0, _log(logpath)
    finally:
        _stop(proc)
    proc, port = _start([], {}, datadir, logpath)
    try:
        c = Client(port)
        after = c.stats()["current-jobs-ready"]
        c.close()
    finally:
        _stop(proc)
    assert got == after == stored, (got, after, stored)


# ---- 2. a reserve-with-timeout that straddles a pause's end ----

def test_reserve_timeout_at_pause_end(tmp_path):
    """Worker A blocks on paused tube t, which holds one ready job. Client B
    pipelines a long kick and `reserve-with-timeout 0` so that the pause
    ends during the kick, before the pause's timer has run. Before the fix
    the job went to A (the older waiter) and B was left waiting with no
    timer at all: it never heard TIMED_OUT."""
    proc, port = _start(["--memory"], {}, tmp_path / "d", tmp_path / "l")
    try:
        p = Client(port)
        p.use("other")
        many = 300000
        t0 = time.monotonic()
        p.send(b"put 0 3600 60 1\r\nx\r\n" * many)
        for _ in range(many):
            p.line()
        p.send(b"kick 100000\r\n")          # calibrate: how long a kick takes
        t1 = time.monotonic()
        assert p.line() == b"KICKED 100000"
        kick_secs = (time.monotonic() - t1) * (many - 100000) / 100000
        assert kick_secs > 0.02, "kick too fast to straddle: %.3f" % kick_secs
        del t0
        p.use("t")
        p.send(b"pause-tube t 1\r\n")
        assert p.line() == b"PAUSED"
        paused_at = time.monotonic()
        p.put(0, 0, 60, b"job")
        a = Client(port)
        a.watch("t")
        a.send(b"ignore default\r\nreserve\r\n")
        assert a.line() == b"WATCHING 1"
        b = Client(port)
        b.use("other")
        b.watch("t")
        b.send(b"ignore default\r\n")
        assert b.line() == b"WATCHING 1"
        # start the kick so that the pause ends in its middle
        time.sleep(max(0, paused_at + 1.0 - kick_secs / 2 - time.monotonic()))
        b.send(b"kick %d\r\nreserve-with-timeout 0\r\n" % many)
        b.sock.settimeout(5)
        assert b.line() == b"KICKED %d" % (many - 100000)
        ln = b.line()   # before the fix: Hang, no reply at all
        assert ln in (b"TIMED_OUT", b"RESERVED 300001 3"), ln
        a.sock.settimeout(5)
        if ln == b"TIMED_OUT":
            assert a.line() == b"RESERVED 300001 3"
    finally:
        _stop(proc)


# ---- 3. OUT_OF_MEMORY on a put skips its body ----

def _limit_as(limit):
    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return pre


@pytest.mark.skipif(ASAN, reason="ASan reserves terabytes of address space; "
                    "RLIMIT_AS cannot make one malloc fail under it")
def test_put_out_of_memory_skips_body(tmp_path):
    """Under an address-space limit a put announcing a huge body gets
    OUT_OF_MEMORY. Before the fix the body was then read as commands: a
    body holding `put 0 0 60 4\\r\\nevil` inserted a job. Now the announced
    bytes are discarded, as for JOB_TOO_BIG, and nothing is inserted."""
    from conftest import free_port, wait_listening
    port = free_port()
    log = open(tmp_path / "l", "ab")
    proc = subprocess.Popen(
        [ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port), "--memory",
         "-z", str(1 << 30)], stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=_limit_as(1 << 30))
    try:
        wait_listening(port, proc)
        c = Client(port)
        size = (1 << 30) - 16
        c.send(b"put 0 0 60 %d\r\n" % size)
        evil = b"put 0 0 60 4\r\nevil\r\n"
        c.send(evil)
        m = Client(port)
        wait_for(lambda: m.stats()["cmd-put"] >= 1, 5, "the put to be read")
        time.sleep(0.2)
        st = m.stats()
        assert st["current-jobs-ready"] == 0 and st["cmd-put"] == 1, \
            "the body ran as a put"
        # the rest of the announced body is discarded; then the reply (as
        # 1.12: OUT_OF_MEMORY after the body), then commands run again
        left = size + 2 - len(evil)
        chunk = b"y" * (1 << 20)
        while left:
            k = min(left, len(chunk))
            c.send(chunk[:k])
            left -= k
        c.send(b"list-tube-used\r\n")
        c.sock.settimeout(30)
        assert c.line() == b"OUT_OF_MEMORY"
        assert c.line() == b"USING default"
        assert m.stats()["current-jobs-ready"] == 0
    finally:
        proc.kill()
        proc.wait()
        log.close()


# ---- 4. a body that cannot be read leaves no ghost reservation ----

def test_unreadable_body_no_ghost_reservation(tmp_path):
    """After a restart the bodies are on disk only. With every body read
    failing, `reserve` answers INTERNAL_ERROR. Before the fix the job stayed
    reserved by that client (no id given), then cycled through its TTR
    forever. Now the job is buried and logged, and nothing holds it."""
    datadir, logpath = tmp_path / "data", tmp_path / "server.log"
    proc, port = _start([], {}, datadir, logpath)
    try:
        c = Client(port)
        jid = c.put(5, 0, 1, b"body")
        c.close()
    finally:
        assert _stop(proc) == 0
    proc, port = _start(["-m", "0"], {"ROCKSTALKD_FAULT_READ_FAIL": "1"},
                        datadir, logpath)
    try:
        c = Client(port)
        c.send(b"reserve-with-timeout 0\r\n")
        assert c.line() == b"INTERNAL_ERROR"
        sj = c.stats_job(jid)
        assert sj["state"] == "buried", sj
        st = c.stats()
        assert st["current-jobs-reserved"] == 0, st
        assert st["current-jobs-buried"] == 1, st
        c.send(b"reserve-job %d\r\n" % jid)
        assert c.line() == b"INTERNAL_ERROR"
        assert c.stats_job(jid)["state"] == "buried"
        assert "cannot read the body of job %d" % jid in _log(logpath)
        c.close()
    finally:
        assert _stop(proc) == 0
    # the bury was stored; the body is intact on disk
    assert _restart_peek(tmp_path, datadir, [jid]) == {jid: ("buried",
                                                             b"body")}


# ---- 5. a job made ready again is stored as ready ----

def test_ready_again_is_stored(tmp_path):
    """Jobs taken with reserve-job from buried or delayed and then released
    (delay 0, same priority), expired (TTR), or let go by a closed
    connection are ready in memory. Before the fix no change was stored, so
    after a restart they came back buried or delayed."""
    datadir, logpath = tmp_path / "data", tmp_path / "server.log"
    proc, port = _start([], {}, datadir, logpath)
    try:
        c = Client(port)
        ids = {}
        for how in ("released", "expired", "closed"):
            for src in ("buried", "delayed"):
                jid = c.put(7, 3600 if src == "delayed" else 0, 1,
                            b"%s-%s" % (how.encode(), src.encode()))
                if src == "buried":
                    c.send(b"reserve-job %d\r\n" % jid)
                    assert c.line().startswith(b"RESERVED %d " % jid)
                    c.data(len(b"%s-%s" % (how.encode(), src.encode())))
                    assert c.bury(jid, 7) == "BURIED"
                ids[(how, src)] = jid
        holder = Client(port)
        for (how, src), jid in ids.items():
            who = holder if how == "closed" else c
            who.send(b"reserve-job %d\r\n" % jid)
            ln = who.line()
            assert ln.startswith(b"RESERVED %d " % jid), ln
            who.data(int(ln.split()[2]))
            if how == "released":
                assert who.release(jid, 7, 0) == "RELEASED"
        holder.close()
        wait_for(lambda: all(c.stats_job(j)["state"] == "ready"
                             for j in ids.values()), 5, "jobs ready again")
        c.close()
    finally:
        assert _stop(proc) == 0
    found = _restart_peek(tmp_path, datadir, ids.values())
    for (how, src), jid in ids.items():
        assert found[jid][0] == "ready", (how, src, found[jid])


# ---- 7. the loop never waits for a body read ----

def test_body_read_does_not_block_loop(tmp_path):
    """After a restart the bodies are on disk. With the reader's disk held
    (ROCKSTALKD_FAULT_READ_HOLD), a reserve and a peek that need a body wait
    for it, with the commands pipelined behind them, while other clients
    are served at once. Before the fix a body the read-ahead had missed was
    read with a synchronous RocksDB Get on the loop thread."""
    datadir, logpath = tmp_path / "data", tmp_path / "server.log"
    hold = tmp_path / "hold"
    proc, port = _start([], {}, datadir, logpath)
    try:
        c = Client(port)
        ids = [c.put(1, 0, 60, b"body-%d" % i) for i in range(3)]
        c.close()
    finally:
        assert _stop(proc) == 0
    proc, port = _start([], {"ROCKSTALKD_FAULT_READ_HOLD": str(hold)},
                        datadir, logpath)
    try:
        hold.touch()
        w = Client(port)
        w.sock.settimeout(0.5)
        w.send(b"reserve\r\nlist-tube-used\r\npeek %d\r\nstats-job %d\r\n"
               % (ids[1], ids[1]))
        with pytest.raises(Hang):
            w.line()
        o = Client(port)
        o.sock.settimeout(2)
        t0 = time.monotonic()
        jid = o.put(1, 0, 60, b"fresh")     # served while the read waits
        o.send(b"peek %d\r\n" % jid)         # in memory: no wait
        assert o._read_found() == (jid, b"fresh")
        assert o.stats_job(ids[0])["state"] == "reserved"
        assert time.monotonic() - t0 < 1.5
        hold.unlink()
        w.sock.settimeout(10)
        assert w.line() == b"RESERVED %d 6" % ids[0]
        assert w.data(6) == b"body-0"
        assert w.line() == b"USING default"
        assert w._read_found() == (ids[1], b"body-1")
        assert w._read_stats_job()["id"] == ids[1]
        st = o.stats()
        assert st["rockstalk-body-cache-misses"] >= 1, st
        o.close()
        w.close()
    finally:
        if hold.exists():
            hold.unlink()
        assert _stop(proc) == 0
