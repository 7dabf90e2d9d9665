"""An idle server gives back the memory its writes left free (server.c,
maybe_trim): once 64 MiB were written to the store since the last trim,
the first second with no command and nothing waiting for the store frees
the hand-off's spare chunks and runs malloc_trim (logged at -V), so RocksDB's
memtable blocks and the chunks, reused through the heap while writes go
on, do not stay resident at rest (BENCHMARKS.md, "Memory row,
2026-11-28"). Fewer bytes written: no trim."""
import time

from conftest import wait_for
from test_protocol import Client

BODY = 8192
PUT = b"put 0 0 60 %d\r\n" % BODY + b"t" * BODY + b"\r\n"
BATCH = 500  # puts in flight at a time: 4 MiB


def load(server, n):
    """Puts n jobs of BODY bytes, BATCH at a time, each batch acknowledged
    (INSERTED) before the next is sent."""
    c = Client(server)
    for done in range(0, n, BATCH):
        k = min(BATCH, n - done)
        c.send(PUT * k)
        for _ in range(k):
            while b"\r\n" not in c.buf:
                c.buf += c.sock.recv(65536)
            line, c.buf = c.buf.split(b"\r\n", 1)
            assert line.startswith(b"INSERTED "), line
    c.close()


def trims(server):
    with open(server.dir + ".log", "rb") as f:
        return [l for l in f.read().splitlines() if b"malloc_trim after" in l]


def test_idle_trim_after_writes(rockstalkd):
    s = rockstalkd("-V")
    load(s, 1000)  # 8 MiB: below the 64 MiB that make a trim
    time.sleep(2.5)  # two idle seconds
    assert trims(s) == []
    load(s, 9000)  # 72 MiB more
    wait_for(lambda: trims(s), timeout=10, what="a malloc_trim")
    got = trims(s)
    assert len(got) == 1 and b"10000 -> 10000 jobs" in got[0], got
    written = int(got[0].split(b" jobs, ")[1].split(b" MiB")[0])
    assert written >= 64, got
    time.sleep(2.5)  # nothing written since: no second trim
    assert len(trims(s)) == 1
