"""The rest round (src/store/idle.h): once the shards have taken no write
for 0.5 s, the mutation thread flushes every RocksDB memtable holding more
than 2 MiB (stats: rockstalk-idle-flushes counts such rounds,
rockstalk-memtable-bytes shows what the memtables hold), and the loop's
next idle second trims the heap (server.c maybe_trim: logged at -V with
the MiB flushed at rest), so what the memtables held when a load ended
does not stay resident. No round runs while writes go on."""
import time

from conftest import wait_for
from test_hostile import instrumented
from test_protocol import Client, stats_of

BODY = 8192
PUT = b"put 0 0 60 %d\r\n" % BODY + b"t" * BODY + b"\r\n"
JOBS = 2500  # 20 MiB: under the body CF's 32 MiB write buffer, so all of
# it is still in the memtable when the load ends


def put_all(c, n):
    """Pipelines n puts, then stats (read at once after the last
    INSERTED, before any round)."""
    c.send(PUT * n + b"stats\r\n")
    for _ in range(n):
        line = read_line(c)
        assert line.startswith(b"INSERTED "), line
    head = read_line(c)
    assert head.startswith(b"OK "), head
    body = c.read(int(head[3:]) + 2).decode()
    return dict(ln.split(": ", 1) for ln in body.split("\n")[1:-2])


def read_line(c):
    while b"\r\n" not in c.buf:
        c.buf += c.sock.recv(65536)
    line, c.buf = c.buf.split(b"\r\n", 1)
    return line


def num(st, key):
    return int(st["rockstalk-" + key])


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    raise AssertionError("no VmRSS")


def trims(server):
    with open(server.dir + ".log", "rb") as f:
        return [l for l in f.read().splitlines() if b"malloc_trim after" in l]


def test_rest_round_flushes_memtables_and_trims(rockstalkd):
    s = rockstalkd("-V")
    c = Client(s)
    st = put_all(c, JOBS)
    # the bodies reach the memtables once the write-behind window is
    # written (milliseconds), the round 0.5 s later
    while num(st, "memtable-bytes") < 16 << 20 and not num(st, "idle-flushes"):
        st = stats_of(c)
    before = num(st, "memtable-bytes")
    assert num(st, "idle-flushes") == 0, st
    rss_before = rss_kb(s.proc.pid)
    wait_for(lambda: num(stats_of(c), "idle-flushes") >= 1, timeout=10,
             what="a rest round")
    st = stats_of(c)
    assert num(st, "idle-flushes") == 1, st
    assert num(st, "memtable-bytes") < before // 8, (before, st)
    # the loop's next idle second trims, counting the flushed memtables
    # (20 MiB written: below the 64 MiB that make a trim by themselves)
    wait_for(lambda: trims(s), timeout=10, what="a malloc_trim")
    got = trims(s)
    assert len(got) == 1, got
    flushed = int(got[0].split(b" MiB written, ")[1].split(b" MiB")[0])
    assert flushed >= 16, got
    # the memtables' blocks went back to the system (not under ASan or
    # valgrind: their allocators keep freed memory in a quarantine and
    # malloc_trim does not reach it; the round and the trim are checked
    # above all the same)
    if not instrumented(s.proc.pid):
        assert rss_kb(s.proc.pid) < rss_before - (8 << 10), rss_before
    time.sleep(1.5)  # nothing written since: no second round, no trim
    assert num(stats_of(c), "idle-flushes") == 1
    assert len(trims(s)) == 1
    c.close()


def test_no_rest_round_while_writes_go_on(rockstalkd):
    s = rockstalkd()
    c = Client(s)
    put_all(c, JOBS)
    # one put every 0.2 s: never 0.5 s without a write
    for _ in range(10):
        time.sleep(0.2)
        c.send(b"put 0 0 60 1\r\nx\r\n")
        assert read_line(c).startswith(b"INSERTED ")
        assert num(stats_of(c), "idle-flushes") == 0
    assert num(stats_of(c), "memtable-bytes") >= 16 << 20
    wait_for(lambda: num(stats_of(c), "idle-flushes") == 1, timeout=10,
             what="the rest round after the writes")
    c.close()


def test_small_memtables_are_left(rockstalkd):
    """A round flushes only memtables above 2 MiB: a few puts are not
    flushed (no round counted, no table file for them)."""
    s = rockstalkd()
    c = Client(s)
    put_all(c, 100)  # 800 KiB
    time.sleep(1.5)
    st = stats_of(c)
    assert num(st, "idle-flushes") == 0, st
    assert num(st, "memtable-bytes") >= 800 << 10, st
    c.close()
