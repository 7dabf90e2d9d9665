"""Where the store keeps a job's body (protocol/PROTOCOL.md, section 11.1):
inline, after its meta in one value of the meta column family, for bodies
of at most 256 bytes (one RocksDB entry per put), in the body column family
above. An update of an inline job (bury, kick, release with a new priority)
is a RocksDB Merge that must keep the body; a put-unique job's delete keeps
its key's record and drops the body; deletes must find the right keys.

Each case runs in every sync mode (default, -f 50, -F: no commit journal,
so every change goes straight to RocksDB) with -m 0, so that every body
read comes from disk, and checks each job's state, priority and body after
the changes, after a clean restart (the write-behind window written to
RocksDB), after a SIGKILL (what RocksDB lacks replayed from the journal)
and after more changes to the recovered jobs.
"""
import pytest

from test_protocol import Client

MODES = {"default": (), "f50": ("-f", "50"), "F": ("-F",)}
SIZES = (0, 1, 100, 255, 256, 257, 1000, 5000)


def body_of(i, n):
    """n bytes, with CRLF and NUL inside when there is room."""
    b = bytearray(bytes([65 + i]) * n)
    if n >= 5:
        b[n // 2:n // 2 + 3] = b"\r\n\x00"
    return bytes(b)


def line(c):
    while b"\r\n" not in c.buf:
        c.buf = c.read(len(c.buf) + 1) + c.buf  # waits for one more byte
    head, c.buf = c.buf.split(b"\r\n", 1)
    return head


def yaml_of(c, cmd):
    c.send(cmd)
    head = line(c)
    assert head.startswith(b"OK "), head
    body = c.read(int(head[3:]) + 2).decode()
    return dict(x.split(": ", 1) for x in body.split("\n")[1:-2])


def check(c, jobs):
    """jobs: id -> (state, pri, body), or None for a deleted job."""
    for jid, want in sorted(jobs.items()):
        if want is None:
            c.cmd(b"peek %d\r\n" % jid, b"NOT_FOUND\r\n")
            continue
        state, pri, body = want
        c.cmd(b"peek %d\r\n" % jid,
              b"FOUND %d %d\r\n" % (jid, len(body)) + body + b"\r\n")
        st = yaml_of(c, b"stats-job %d\r\n" % jid)
        assert (st["state"], int(st["pri"])) == (state, pri), (jid, st)


def reserve_job(c, jid, body):
    c.cmd(b"reserve-job %d\r\n" % jid,
          b"RESERVED %d %d\r\n" % (jid, len(body)) + body + b"\r\n")


@pytest.mark.not_via_follower("about one process's data directory")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_bodies_kept_through_updates_and_restarts(rockstalkd, mode):
    s = rockstalkd("-m", "0", *MODES[mode])
    c = Client(s)
    jobs = {}
    for i, n in enumerate(SIZES):
        b = body_of(i, n)
        c.cmd(b"put %d 0 60 %d\r\n" % (i, n) + b + b"\r\n",
              b"INSERTED %d\r\n" % (i + 1))
        jobs[i + 1] = ("ready", i, b)
    # a put-unique job deleted: its key's record stays, its body goes
    c.cmd(b"put-unique k1 0 0 60 5\r\nhello\r\n", b"INSERTED 9\r\n")
    c.cmd(b"delete 9\r\n", b"DELETED\r\n")
    # updates: buried (1 byte, 256 and 1000 bytes), one kicked back,
    # released with a new priority (100 bytes)
    for jid, pri in ((2, 50), (5, 51), (7, 52)):
        reserve_job(c, jid, jobs[jid][2])
        c.cmd(b"bury %d %d\r\n" % (jid, pri), b"BURIED\r\n")
        jobs[jid] = ("buried", pri, jobs[jid][2])
    c.cmd(b"kick-job 2\r\n", b"KICKED\r\n")
    jobs[2] = ("ready", 50, jobs[2][2])
    reserve_job(c, 3, jobs[3][2])
    c.cmd(b"release 3 77 0\r\n", b"RELEASED\r\n")
    jobs[3] = ("ready", 77, jobs[3][2])
    # deletes: inline never rewritten (255), inline rewritten (256), in
    # the body column family (5000)
    for jid in (4, 5, 8):
        c.cmd(b"delete %d\r\n" % jid, b"DELETED\r\n")
        jobs[jid] = None
    check(c, jobs)
    c.close()

    s.restart()  # SIGTERM: the window is written to RocksDB
    c = Client(s)
    check(c, jobs)
    c.cmd(b"put-unique k1 0 0 60 1\r\nz\r\n", b"INSERTED 9\r\n")  # remembered
    # more changes to recovered jobs: an inline rewritten job buried again
    # and deleted, an inline job never rewritten buried, a large one kicked
    reserve_job(c, 2, jobs[2][2])
    c.cmd(b"bury 2 60\r\n", b"BURIED\r\n")
    c.cmd(b"delete 2\r\n", b"DELETED\r\n")
    jobs[2] = None
    reserve_job(c, 1, jobs[1][2])
    c.cmd(b"bury 1 61\r\n", b"BURIED\r\n")
    jobs[1] = ("buried", 61, jobs[1][2])
    c.cmd(b"kick-job 7\r\n", b"KICKED\r\n")
    jobs[7] = ("ready", 52, jobs[7][2])
    check(c, jobs)
    c.close()

    s.kill9()
    s.restart()
    c = Client(s)
    check(c, jobs)
    c.close()
    s.restart()
    c = Client(s)
    check(c, jobs)
    c.close()
