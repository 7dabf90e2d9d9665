"""rockstalk's protocol extensions (protocol/PROTOCOL.md, "Extensions"):
reserve-batch, list-jobs, clear-tube and --max-timeouts.

    /usr/bin/python3 -m pytest -q tests/test_extensions.py
"""
import re
import socket
import threading
import time

from conftest import wait_for
from test_crash import Client, Hang


def c_of(srv):
    return Client(srv.port)


def reply(c, cmd):
    c.send(cmd)
    return c.line()


def list_jobs(c, tube, state, n):
    c.send(b"list-jobs %s %s %d\r\n" % (tube.encode(), state.encode(), n))
    ln = c.line()
    if ln == b"NOT_FOUND":
        return None
    m = re.fullmatch(rb"OK (\d+)", ln)
    assert m, ln
    body = c.data(int(m.group(1))).decode()
    if body == "--- []\n":
        return []
    assert body.startswith("---\n"), body
    return [int(x[2:]) for x in body[4:].splitlines()]


def batch(c, count, timeout):
    """[(id, body)] of a RESERVED_BATCH, or the other reply line."""
    c.send(b"reserve-batch %d %d\r\n" % (count, timeout))
    ln = c.line()
    m = re.fullmatch(rb"RESERVED_BATCH (\d+)", ln)
    if not m:
        return ln
    out = []
    for _ in range(int(m.group(1))):
        h = re.fullmatch(rb"RESERVED (\d+) (\d+)", c.line())
        assert h
        out.append((int(h.group(1)), c.data(int(h.group(2)))))
    return out


# ---- reserve-batch ----

def test_reserve_batch_order_and_counters(rockstalkd):
    s = rockstalkd()
    c = c_of(s)
    c.use("b")
    c.watch("b")
    ids = [c.put(p, 0, 30, b"j%d" % p) for p in (5, 1, 3, 1)]
    got = batch(c, 3, 0)
    # the order reserve takes them: priority, then id
    assert [i for i, _ in got] == [ids[1], ids[3], ids[2]], got
    assert [b for _, b in got] == [b"j1", b"j1", b"j3"]
    for jid, _ in got:
        sj = c.stats_job(jid)
        assert sj["state"] == "reserved" and sj["reserves"] == 1, sj
        assert 29 <= sj["time-left"] <= 30, sj
    assert batch(c, 10, 0) == [(ids[0], b"j5")]   # fewer than asked
    assert batch(c, 10, 0) == b"TIMED_OUT"
    st = c.stats()
    assert st["rockstalk-cmd-reserve-batch"] == 3, st
    assert st["rockstalk-batch-jobs"] == 4, st
    assert st["current-jobs-reserved"] == 4, st


def test_reserve_batch_bad_format(rockstalkd):
    c = c_of(rockstalkd())
    for bad in (b"reserve-batch 0 0", b"reserve-batch 1001 0",
                b"reserve-batch 5", b"reserve-batch x 0", b"reserve-batch "):
        assert reply(c, bad + b"\r\n") == b"BAD_FORMAT", bad


def test_reserve_batch_waits_then_pipelined(rockstalkd):
    """A blocked reserve-batch is served by a later put (one job: no further
    wait), and the commands pipelined behind it run after its reply."""
    s = rockstalkd()
    w = c_of(s)
    w.send(b"reserve-batch 10 5\r\nlist-tube-used\r\n")
    w.sock.settimeout(0.3)
    try:
        w.line()
        assert False, "reserve-batch answered with nothing ready"
    except Hang:
        pass
    p = c_of(s)
    jid = p.put(0, 0, 30, b"late")
    w.sock.settimeout(5)
    assert w.line() == b"RESERVED_BATCH 1"
    assert w.line() == b"RESERVED %d 4" % jid
    assert w.data(4) == b"late"
    assert w.line() == b"USING default"


def test_reserve_batch_deadline_soon(rockstalkd):
    """Holding a job whose TTR ends within the second, reserve-batch
    answers DEADLINE_SOON like reserve-with-timeout."""
    s = rockstalkd()
    c = c_of(s)
    jid = c.put(0, 0, 1, b"x")
    assert c.reserve(0)[0] == jid
    assert batch(c, 5, 0) == b"DEADLINE_SOON"
    c.send(b"reserve-batch 5 10\r\n")
    c.sock.settimeout(5)
    # the TTR expires: the job is ready again and the batch takes it
    ln = c.line()
    assert ln in (b"DEADLINE_SOON", b"RESERVED_BATCH 1"), ln


def test_reserve_batch_timeout_and_hangup(rockstalkd):
    s = rockstalkd()
    c = c_of(s)
    t0 = time.monotonic()
    assert batch(c, 3, 1) == b"TIMED_OUT"
    assert time.monotonic() - t0 >= 0.9
    # a client that hangs up while blocked leaves nothing waiting
    raw = socket.create_connection(("127.0.0.1", s.port))
    raw.sendall(b"reserve-batch 3 100\r\n")
    raw.shutdown(socket.SHUT_WR)
    raw.settimeout(5)
    assert raw.recv(100) == b"TIMED_OUT\r\n"
    raw.close()
    wait_for(lambda: c.stats()["current-waiting"] == 0, 5, "no waiter")


# ---- list-jobs ----

def test_list_jobs_orders(rockstalkd):
    s = rockstalkd()
    c = c_of(s)
    c.use("l")
    c.watch("l")
    r = [c.put(p, 0, 60, b"r") for p in (9, 2, 2, 0)]
    d = [c.put(0, dl, 60, b"d") for dl in (300, 100, 200)]
    assert list_jobs(c, "l", "ready", 10) == [r[3], r[1], r[2], r[0]]
    assert list_jobs(c, "l", "ready", 2) == [r[3], r[1]]
    assert list_jobs(c, "l", "delayed", 10) == [d[1], d[2], d[0]]
    # bury two (the order kick takes them), reserve one with a short TTR
    b = []
    for _ in range(2):
        jid, _ = c.reserve(0)
        assert c.bury(jid, 5) == "BURIED"
        b.append(jid)
    assert list_jobs(c, "l", "buried", 10) == b
    c.send(b"kick 1\r\n")
    assert c.line() == b"KICKED 1"
    assert list_jobs(c, "l", "buried", 10) == b[1:]
    o = c_of(s)
    o.watch("l")
    o.send(b"ignore default\r\n")
    assert o.line() == b"WATCHING 1"
    first = o.reserve(0)[0]
    c.send(b"release %d 0 0\r\n" % b[0])   # not held by c: NOT_FOUND
    assert c.line() == b"NOT_FOUND"
    jid, _ = c.reserve(0)
    c.send(b"touch %d\r\n" % jid)
    assert c.line() == b"TOUCHED"
    # reserved: soonest TTR deadline first (both TTR 60, o's first)
    assert list_jobs(c, "l", "reserved", 10) == [first, jid]
    assert list_jobs(c, "nosuch", "ready", 1) is None
    assert list_jobs(c, "default", "ready", 5) == []
    for bad in (b"list-jobs l ready 0", b"list-jobs l ready 1001",
                b"list-jobs l bogus 1", b"list-jobs l ready",
                b"list-jobs l ready 1 x", b"list-jobs -bad ready 1"):
        assert reply(c, bad + b"\r\n") == b"BAD_FORMAT", bad
    # like 1.12's verbs that take arguments, the bare word is unknown
    assert reply(c, b"list-jobs\r\n") == b"UNKNOWN_COMMAND"


# ---- clear-tube ----

def test_clear_tube_states(rockstalkd):
    s = rockstalkd()
    c = c_of(s)
    c.use("c")
    c.watch("c")
    for i in range(5):
        c.put(0, 0, 60, b"r%d" % i)
    for i in range(3):
        c.put(0, 100, 60, b"d%d" % i)
    held, _ = c.reserve(0)
    bj, _ = c.reserve(0)
    assert c.bury(bj, 0) == "BURIED"
    # 3 ready (1 of 5 reserved, 1 buried), 3 delayed, 1 buried
    assert reply(c, b"clear-tube c\r\n") == b"CLEARED 7"
    c.send(b"stats-tube c\r\n")
    st = c._ok_yaml(c.line())
    assert st["current-jobs-ready"] == 0 and st["current-jobs-delayed"] == 0
    assert st["current-jobs-buried"] == 0
    assert st["current-jobs-reserved"] == 1      # stays with its holder
    assert c.delete(held) == "DELETED"
    assert reply(c, b"clear-tube nosuch\r\n") == b"NOT_FOUND"
    assert reply(c, b"clear-tube -x\r\n") == b"BAD_FORMAT"
    # cleared jobs stay gone after a restart; the count is in stats
    assert c.stats()["rockstalk-jobs-cleared"] == 7
    s.restart()
    c = c_of(s)
    assert c.stats()["current-jobs-ready"] == 0


def test_clear_large_tube_others_served(rockstalkd):
    """Clearing 200,000 jobs goes in bounded steps: a light client's round
    trips stay short meanwhile, and a reserver blocked on another tube is
    served by a put made during the clear."""
    s = rockstalkd("-F")
    p = c_of(s)
    p.use("big")
    n = 200000
    chunk = b"put 0 0 60 1\r\nx\r\n" * 5000
    for _ in range(n // 5000):
        p.send(chunk)
        for _ in range(5000):
            p.line()
    w = c_of(s)
    w.watch("other")
    w.send(b"ignore default\r\nreserve-with-timeout 30\r\n")
    assert w.line() == b"WATCHING 1"
    clr = c_of(s)
    clr.sock.settimeout(60)
    result = {}

    def clear():
        result["reply"] = reply(clr, b"clear-tube big\r\n")
    t = threading.Thread(target=clear)
    t.start()
    light = c_of(s)
    light.use("other")
    rtts = []
    jid = None
    while t.is_alive() or not rtts:
        t0 = time.monotonic()
        if jid is None:
            jid = light.put(0, 0, 60, b"meanwhile")
        else:
            assert reply(light, b"list-tube-used\r\n") == b"USING other"
        rtts.append(time.monotonic() - t0)
    t.join()
    assert result["reply"] == b"CLEARED %d" % n
    w.sock.settimeout(5)
    assert w.line() == b"RESERVED %d 9" % jid
    rtts.sort()
    p99 = rtts[int(len(rtts) * 0.99) - 1] if len(rtts) > 1 else rtts[0]
    print("\nclear-tube of %d jobs: %d light round trips, p99 %.2f ms, "
          "max %.2f ms" % (n, len(rtts), p99 * 1e3, rtts[-1] * 1e3))
    assert len(rtts) >= 5, "the clear was too quick to measure"
    assert p99 < 0.2, "p99 %.1f ms" % (p99 * 1e3)


# ---- --max-timeouts ----

def test_max_timeouts_buries_poison_job(rockstalkd):
    s = rockstalkd("--max-timeouts", "2")
    c = c_of(s)
    jid = c.put(0, 0, 1, b"poison")
    for round_ in range(2):
        got = c.reserve(5)
        assert got and got[0] == jid, (round_, got)
        wait_for(lambda: c.stats_job(jid)["state"] != "reserved", 5,
                 "the TTR to run out")
    sj = c.stats_job(jid)
    assert sj["state"] == "buried" and sj["timeouts"] == 2, sj
    assert c.stats()["rockstalk-timeout-buries"] == 1
    s.restart()           # the bury was stored
    c = c_of(s)
    assert c.stats_job(jid)["state"] == "buried"


def test_max_timeouts_off_by_default(rockstalkd):
    s = rockstalkd()
    c = c_of(s)
    jid = c.put(0, 0, 1, b"x")
    for _ in range(3):
        assert c.reserve(5)[0] == jid
        wait_for(lambda: c.stats_job(jid)["state"] != "reserved", 5,
                 "the TTR to run out")
    assert c.stats_job(jid)["state"] == "ready"


def test_clear_tube_memory_mode(tmp_path):
    """Without a store no acknowledgement wakes the loop: the steps go on
    by themselves."""
    from test_crash import _start, _stop
    proc, port = _start(["--memory"], {}, tmp_path / "d", tmp_path / "l")
    try:
        c = Client(port)
        c.use("m")
        c.send(b"put 0 0 60 1\r\nx\r\n" * 5000)
        for _ in range(5000):
            c.line()
        assert reply(c, b"clear-tube m\r\n") == b"CLEARED 5000"
        assert c.stats()["current-jobs-ready"] == 0
    finally:
        _stop(proc)


# ---- put-unique ----

def put_unique(c, key, body, pri=0, delay=0, ttr=60):
    c.send(b"put-unique %s %d %d %d %d\r\n%s\r\n"
           % (key.encode(), pri, delay, ttr, len(body), body))
    ln = c.line()
    m = re.fullmatch(rb"INSERTED (\d+)", ln)
    return int(m.group(1)) if m else ln


def test_put_unique_dedups_per_tube(rockstalkd):
    s = rockstalkd()
    c = c_of(s)
    a = put_unique(c, "order-17", b"first")
    assert put_unique(c, "order-17", b"second") == a   # a retry
    c.send(b"peek %d\r\n" % a)
    assert c._read_found() == (a, b"first")            # not replaced
    assert c.stats()["current-jobs-ready"] == 1
    c.use("other")
    b = put_unique(c, "order-17", b"other tube")
    assert b != a                                       # keys are per tube
    c.use("default")
    # the key outlives its job within the window
    assert c.delete(a) == "DELETED"
    assert put_unique(c, "order-17", b"third") == a
    assert c.stats()["current-jobs-ready"] == 1       # only the other tube's
    st = c.stats()
    assert st["rockstalk-cmd-put-unique"] == 4, st
    assert st["rockstalk-dedup-hits"] == 2, st
    assert st["rockstalk-dedup-keys"] == 2, st


def test_put_unique_window(rockstalkd):
    s = rockstalkd("--dedup-window", "1")
    c = c_of(s)
    a = put_unique(c, "k", b"x")
    b = put_unique(c, "gone", b"y")
    assert c.delete(b) == "DELETED"
    time.sleep(2.2)            # both windows are over
    # a's job still exists: its key is still remembered
    assert put_unique(c, "k", b"again") == a
    # b's job is gone and its window over: a new job
    nb = put_unique(c, "gone", b"new")
    assert nb not in (a, b)
    assert c.delete(a) == "DELETED"
    wait_for(lambda: c.stats()["rockstalk-dedup-keys"] == 1, 5,
             "a's key to go with its job")
    assert put_unique(c, "k", b"fresh") not in (a, b, nb)


def test_put_unique_errors(rockstalkd):
    s = rockstalkd("-z", "10")
    c = c_of(s)
    for bad in (b"put-unique k 0 0 60", b"put-unique  0 0 60 1",
                b"put-unique k x 0 60 1", b"put-unique " + b"k" * 201 +
                b" 0 0 60 1", b"put-unique k\x01 0 0 60 1"):
        assert reply(c, bad + b"\r\n") == b"BAD_FORMAT", bad
    c.send(b"put-unique k 0 0 60 11\r\n" + b"x" * 11 + b"\r\n")
    assert c.line() == b"JOB_TOO_BIG"
    c.send(b"put-unique k 0 0 60 2\r\nabc\r\n")
    assert c.line() == b"EXPECTED_CRLF"
    assert reply(c, b"put-unique\r\n") == b"UNKNOWN_COMMAND"
    assert put_unique(c, "k" * 200, b"max key") > 0


def test_put_unique_reply_waits_like_put(rockstalkd):
    """A retry's INSERTED is a reply like any other: pipelined behind other
    commands it keeps its place."""
    s = rockstalkd()
    c = c_of(s)
    c.send(b"put-unique p 1 0 60 1\r\na\r\nlist-tube-used\r\n"
           b"put-unique p 1 0 60 1\r\nb\r\n")
    m = re.fullmatch(rb"INSERTED (\d+)", c.line())
    assert m
    assert c.line() == b"USING default"
    assert c.line() == b"INSERTED " + m.group(1)
