"""The body ring (protocol/PROTOCOL.md, section 11.5): large put bodies
written and synced by their own thread into <dir>/bodies/ring-N before the
put is applied; the commit journal then holds the ring reference instead of
the body.

  * laps: a stream of large puts (through the ring) and small ones on
    several connections, over several laps of a small ring (4 x 1 MiB) and
    journal, in the default mode, with -f 50 and with 3 shards, then
    SIGKILL with
    ROCKSTALKD_FAULT_DEFER_UNSYNCED=1 (RocksDB's unsynced writes are lost,
    as a power cut would lose them): every acknowledged put is back with
    its exact body, the deleted jobs stay deleted.
  * tail: the ring entry the newest journal record refers to is damaged
    (bad crc, zeroed, the file cut short so the reference points past it):
    that record is a torn tail, the rest comes back; an older record's
    entry damaged (groups follow it, so it was acknowledged) makes the
    restart refuse, with a message, instead of losing it silently.
  * order: a large put pipelined with small commands on one connection
    gets its replies in command order.
  * closed: connections that close while their body is at the writer do
    not crash or leak (run it under ASan: ROCKSTALKD=build-asan/rockstalkd).
  * refusals: EXPECTED_CRLF and JOB_TOO_BIG for large bodies are as
    before.

    /usr/bin/python3 -m pytest -q tests/test_bodyring.py
"""
import os
import random
import re
import socket
import struct
import subprocess
import threading
import time
import zlib

import pytest

from conftest import ROCKSTALKD

pytestmark = pytest.mark.skipif(
    not os.path.exists(ROCKSTALKD),
    reason="rockstalkd binary not built (%s does not exist)" % ROCKSTALKD)

HDR = struct.Struct("<IHHIIQQII")   # magic version flags len nrec gen group crc 0
MAGIC = 0x314A5352
F_RING = 0x01
REC = struct.Struct("<QQIHBB")      # seq id body_len meta_len op flag
PUT_RING = 0x80
REF = struct.Struct("<QQII")        # gen off len crc
RING_HDR = 24
RING_FILES = 4
MiB = 1 << 20
FLAGS = ["--journal-size", str(MiB), "--body-ring", "4096",
         "--body-ring-size", str(MiB), "-z", str(MiB)]
MODES = {"default": [], "f50": ["-f", "50"], "shards3": ["--shards", "3"]}


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), 10)
        self.f = self.s.makefile("rb")

    def cmd(self, line, body=None):
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.s.sendall(data)
        return self.f.readline().rstrip(b"\r\n").decode()

    def peek(self, jid):
        r = self.cmd("peek %d" % jid)
        if r == "NOT_FOUND":
            return None
        m = re.fullmatch(r"FOUND (\d+) (\d+)", r)
        assert m, r
        return self.f.read(int(m.group(2)) + 2)[:-2]

    def stat(self, name):
        r = self.cmd("stats")
        text = self.f.read(int(r.split()[1]) + 2).decode()
        return int(re.search(r"\n%s: (\d+)" % name, text).group(1))

    def close(self):
        self.s.close()


def body_of(i, n):
    return (b"%06d-" % i) + bytes(random.Random(i).randrange(256)
                                  for _ in range(64)) * (n // 64) + \
        b"z" * (n % 64 - 7 if n % 64 >= 7 else 0)


def put_many(c, bodies):
    """Pipelines puts of bodies on c; returns their ids in order."""
    c.s.sendall(b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (len(b), b)
                         for b in bodies))
    ids = []
    for _ in bodies:
        r = c.f.readline().rstrip(b"\r\n").decode()
        m = re.fullmatch(r"INSERTED (\d+)", r)
        assert m, r
        ids.append(int(m.group(1)))
    return ids


def journal_records(d):
    """Every valid journal record of data dir d: [(gen, group, payload)],
    oldest first (PROTOCOL.md 11.5, flags allowing F_RING)."""
    out = []
    jdir = os.path.join(d, "journal")
    for name in sorted(os.listdir(jdir)):
        data = open(os.path.join(jdir, name), "rb").read()
        off, gen0, last = 0, None, 0
        while off + HDR.size <= len(data):
            magic, ver, flags, ln, nrec, gen, group, crc, z = HDR.unpack_from(
                data, off)
            if magic != MAGIC or ver != 1 or flags & ~F_RING or z:
                break
            if (gen0 is not None and gen != gen0) or group <= last or \
                    off + HDR.size + ln > len(data):
                break
            payload = data[off + HDR.size:off + HDR.size + ln]
            hdr0 = data[off:off + 32] + b"\0" * 8
            if zlib.crc32(payload, zlib.crc32(hdr0)) != crc:
                break
            out.append((gen, group, payload))
            gen0, last = gen, group
            off += HDR.size + ln
    out.sort(key=lambda r: r[1])
    return out


def ring_refs(payload):
    """The (id, gen, off, len, crc) of the ring puts in a journal payload."""
    refs, off = [], 0
    while off < len(payload):
        seq, jid, blen, mlen, op, flag = REC.unpack_from(payload, off)
        off += REC.size + mlen
        if flag & PUT_RING:
            refs.append((jid,) + REF.unpack_from(payload, off))
            off += REF.size
        else:
            off += blen
    return refs


def fill_and_thin(conns, seed, rounds, sizes, every):
    """Puts rounds x 4 bodies on each of conns, sizes drawn from sizes
    (random.Random(seed)), then deletes every every-th job by id; returns
    {id: body} of the jobs left."""
    ids, rng = {}, random.Random(seed)
    for rnd in range(rounds):
        for k, c in enumerate(conns):
            bodies = [body_of(rnd * 100 + k * 10 + i, rng.choice(sizes))
                      for i in range(4)]
            for jid, b in zip(put_many(c, bodies), bodies):
                ids[jid] = b
    for jid in sorted(ids)[::every]:
        assert conns[0].cmd("delete %d" % jid) == "DELETED"
        del ids[jid]
    return ids


@pytest.mark.parametrize("mode", sorted(MODES))
def test_ring_laps_survive_sigkill(rockstalkd, mode, monkeypatch):
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd(*FLAGS, *MODES[mode])
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    conns = [Conn(srv.port) for _ in range(3)]
    # ~14 MiB of ring entries: > 3 laps
    ids = fill_and_thin(conns, 5, 24, [10, 300, 5000, 70000, 200000], 9)
    assert conns[0].stat("current-jobs-ready") == len(ids)
    for c in conns:
        c.close()
    refs = [r for _, _, p in journal_records(srv.dir) for r in ring_refs(p)]
    assert refs, "no journal record refers to the body ring"
    srv.kill9()
    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    assert c.stat("current-jobs-ready") == len(ids)
    c.close()


def test_ring_sigkill_mid_stream(rockstalkd, monkeypatch):
    """SIGKILL while 4 producers still stream large and small puts (one in
    flight each): every put acknowledged before the kill is back with its
    exact body; nothing else is."""
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd(*FLAGS)
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    acked, stop = {}, threading.Event()

    def produce(k):
        c, rng, i = Conn(srv.port), random.Random(k), 0
        try:
            while not stop.is_set():
                b = body_of(k * 100000 + i, rng.choice([40, 90000, 250000]))
                r = c.cmd("put 0 0 60 %d" % len(b), b)
                m = re.fullmatch(r"INSERTED (\d+)", r)
                if not m:
                    return
                acked[int(m.group(1))] = b
                i += 1
        except OSError:
            pass

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    wait = time.time() + 10
    while len(acked) < 150 and time.time() < wait:
        time.sleep(0.05)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(10)
    got = dict(acked)
    assert len(got) >= 150, len(got)
    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(got.items()):
        assert c.peek(jid) == body, "acknowledged job %d lost" % jid
    assert c.stat("current-jobs-ready") <= len(got) + 4  # + puts in flight
    c.close()


def damage_entry(d, ref, how):
    gen, off, ln, crc = ref
    path = os.path.join(d, "bodies", "ring-%d" % (gen % RING_FILES))
    with open(path, "r+b") as f:
        if how == "crc":                  # one body byte flipped
            f.seek(off + RING_HDR + ln // 2)
            b = f.read(1)
            f.seek(off + RING_HDR + ln // 2)
            f.write(bytes([b[0] ^ 0xFF]))
        elif how == "zero":               # never written (a torn entry)
            f.seek(off)
            f.write(b"\0" * (RING_HDR + ln))
        elif how == "short":              # the reference points past the file
            f.truncate(off + RING_HDR + ln // 3)
        else:
            raise AssertionError(how)


def fill(srv, big=200000):
    """Acknowledged puts, large and small, alternating; {id: body}."""
    c = Conn(srv.port)
    ids = {}
    for i in range(12):
        b = body_of(i, big if i % 2 == 0 else 50)
        ids[put_many(c, [b])[0]] = b
    c.close()
    return ids


@pytest.mark.parametrize("how", ["crc", "zero", "short"])
def test_ring_torn_tail(rockstalkd, how, monkeypatch):
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd(*FLAGS)
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    ids = fill(srv)
    c = Conn(srv.port)
    tail = put_many(c, [body_of(99, 150000)])[0]  # the newest record
    c.close()
    srv.kill9()
    recs = journal_records(srv.dir)
    last = ring_refs(recs[-1][2])
    assert [r[0] for r in last] == [tail], recs[-1][:2]
    damage_entry(srv.dir, last[0][1:], how)
    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    assert c.peek(tail) is None, "a torn ring entry was replayed"
    r = c.cmd("put 0 0 60 1", b"n")
    assert int(r.split()[1]) > max(ids), r
    c.close()


def test_ring_crc_is_zlibs(rockstalkd):
    """A ring entry's body CRC (stored in the journal's reference and in
    the entry) is zlib's CRC-32 of the body, whichever code computes it
    (PROTOCOL.md 11.5): bodies of odd lengths, so every tail is summed."""
    srv = rockstalkd(*FLAGS)
    c = Conn(srv.port)
    bodies = [body_of(i, n) for i, n in
              enumerate([65536, 65537, 99999, 200003, 262144])]
    ids = dict(zip(put_many(c, bodies), bodies))
    c.close()
    refs = [r for _, _, p in journal_records(srv.dir) for r in ring_refs(p)]
    assert sorted(r[0] for r in refs) == sorted(ids), refs
    for jid, gen, off, ln, crc in refs:
        assert ln == len(ids[jid]) and crc == zlib.crc32(ids[jid]), jid
        path = os.path.join(srv.dir, "bodies", "ring-%d" % (gen % RING_FILES))
        with open(path, "rb") as f:
            f.seek(off)
            entry = f.read(RING_HDR + ln)
        assert struct.unpack_from("<I", entry, 16)[0] == crc, jid
        assert entry[RING_HDR:] == ids[jid], jid


def test_ring_damaged_inside_refuses(rockstalkd, monkeypatch):
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd(*FLAGS)
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    fill(srv)
    srv.kill9()
    recs = journal_records(srv.dir)
    with_ref = [i for i, r in enumerate(recs) if ring_refs(r[2])]
    assert with_ref and with_ref[0] < len(recs) - 1, [r[:2] for r in recs]
    damage_entry(srv.dir, ring_refs(recs[with_ref[0]][2])[0][1:], "crc")
    p = subprocess.run(srv.argv, capture_output=True, timeout=30)
    assert p.returncode != 0
    assert b"ring bodies do not verify" in p.stdout + p.stderr, p


def test_ring_damaged_after_reply_never_served(rockstalkd):
    """A ring body's home is the ring (store/bodyheld.h): its entry damaged
    (one body byte) after the put's reply is never served as the body. The
    running server still has the body it was given (its body cache); after
    a restart the body is read from the ring, does not verify, and the
    reply is INTERNAL_ERROR; the other jobs are served exact."""
    srv = rockstalkd(*FLAGS)
    c = Conn(srv.port)
    bodies = [body_of(7, 200000), body_of(8, 100000)]
    jid, other = put_many(c, bodies)
    refs = {r[0]: r[1:] for rec in journal_records(srv.dir)
            for r in ring_refs(rec[2])}
    assert sorted(refs) == [jid, other], refs
    damage_entry(srv.dir, refs[jid], "crc")
    assert c.peek(jid) == bodies[0]
    c.close()
    assert srv.stop() == 0
    srv.restart()
    c = Conn(srv.port)
    assert c.stat("rockstalk-body-ring-restored") == 2
    assert c.cmd("peek %d" % jid) == "INTERNAL_ERROR"
    assert c.peek(other) == bodies[1]
    c.close()


def test_ring_pipeline_order(rockstalkd):
    srv = rockstalkd(*FLAGS)
    c = Conn(srv.port)
    big = body_of(1, 300000)
    c.s.sendall(b"put 0 0 60 %d\r\n%s\r\n" % (len(big), big) +
                b"put 0 0 60 3\r\nabc\r\nuse other\r\nput 0 0 60 2\r\nxy\r\n"
                b"list-tube-used\r\n")
    r = [c.f.readline().rstrip(b"\r\n").decode() for _ in range(5)]
    assert r[0] == "INSERTED 1" and r[1] == "INSERTED 2", r
    assert r[2] == "USING other" and r[3] == "INSERTED 3", r
    assert r[4] == "USING other", r
    assert c.peek(1) == big
    # big bodies on several connections at once, each answered in order
    conns = [Conn(srv.port) for _ in range(4)]
    for k, x in enumerate(conns):
        x.s.sendall(b"".join(b"put %d 0 60 %d\r\n%s\r\n" % (k, len(b), b)
                             for b in [big, b"s", big, b"t"]))
    for x in conns:
        r = [x.f.readline().rstrip(b"\r\n").decode() for _ in range(4)]
        got = [int(y.split()[1]) for y in r]
        assert got == sorted(got), r
        assert c.peek(got[2]) == big and c.peek(got[3]) == b"t"
        x.close()
    # stats counts the bodies that went through the ring, and only those
    assert c.stat("rockstalk-body-ring-puts") == 9
    assert c.stat("rockstalk-body-ring-bytes") == 9 * len(big)
    assert c.stat("rockstalk-body-ring-waits") >= 0
    c.close()


def test_ring_closed_midflight(rockstalkd):
    srv = rockstalkd(*FLAGS)
    big = body_of(3, 500000)
    for i in range(40):
        s = socket.create_connection(("127.0.0.1", srv.port), 10)
        s.sendall(b"put 0 0 60 %d\r\n%s\r\nput 0 0 60 1\r\nq\r\n" %
                  (len(big), big))
        if i % 2:
            s.shutdown(socket.SHUT_WR)
        s.close()
    c = Conn(srv.port)
    deadline = time.time() + 10
    while c.stat("current-connections") > 1 and time.time() < deadline:
        time.sleep(0.05)
    n = c.stat("current-jobs-ready")
    assert n <= 80 and n % 1 == 0
    for jid in range(1, 81):
        b = c.peek(jid)
        assert b in (None, big, b"q"), jid
    assert srv.stop() == 0, "the server did not stop cleanly"


def test_ring_turned_off_after_a_crash(rockstalkd, monkeypatch):
    """A run without the ring (--body-ring 0) still replays the references
    an earlier run's journal holds, then removes the ring's files."""
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd(*FLAGS)
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    ids = fill(srv)
    srv.kill9()
    srv.argv = srv.argv + ["--body-ring", "0"]
    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    big = body_of(7, 100000)
    jid = put_many(c, [big])[0]
    assert c.peek(jid) == big
    c.close()
    assert not os.path.exists(os.path.join(srv.dir, "bodies"))


def test_ring_refusals(rockstalkd):
    srv = rockstalkd("--body-ring", "4096", "-z", "100000")
    c = Conn(srv.port)
    big = b"x" * 90000
    c.s.sendall(b"put 0 0 60 %d\r\n%sXY" % (len(big), big))
    assert c.f.readline() == b"EXPECTED_CRLF\r\n"
    assert c.cmd("put 0 0 60 100001", b"y" * 100001) == "JOB_TOO_BIG"
    r = c.cmd("put 0 0 60 %d" % len(big), big)
    assert re.fullmatch(r"INSERTED \d+", r), r
    assert c.peek(int(r.split()[1])) == big
    c.close()


# ---- ring bodies kept out of RocksDB (store/bodyheld.h) ----
#
# A put through the ring writes its reference to RocksDB with the WAL (ring
# column family); its body stays in the ring, its home, and each start-up
# copies every live ring body into RocksDB (rockstalk-body-ring-restored).
# These tests kill without ROCKSTALKD_FAULT_DEFER_UNSYNCED, after waiting
# for the write-behind window (1 s, store/pend.h) to apply the puts, so the
# references are in RocksDB's WAL and the bodies in the ring only.

BIGRING = ["--journal-size", str(4 * MiB), "--body-ring", "4096",
           "--body-ring-size", str(8 * MiB), "-z", str(MiB)]
APPLIED = 1.6   # s: the write-behind window (1 s) and the applier's grace


def test_ring_unflushed_bodies_sigkill(rockstalkd):
    """(a) ring bodies, whose home is the ring, are back byte-exact after
    kill -9, copied into RocksDB at the start-up; (c) a deleted ring job's
    reference went with it (nothing restored for it)."""
    srv = rockstalkd(*BIGRING)
    c = Conn(srv.port)
    bodies = [body_of(i, [70000, 150000, 20, 9000][i % 4]) for i in range(16)]
    ids = dict(zip(put_many(c, bodies), bodies))
    ring = [j for j, b in ids.items() if len(b) >= 4096]
    gone = ring[::3]
    for jid in gone:
        assert c.cmd("delete %d" % jid) == "DELETED"
        del ids[jid]
    assert c.stat("rockstalk-body-ring-flushes") == 0
    c.close()
    time.sleep(APPLIED)
    srv.kill9()
    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    for jid in gone:
        assert c.peek(jid) is None, "deleted job %d came back" % jid
    assert c.stat("current-jobs-ready") == len(ids)
    assert c.stat("rockstalk-body-ring-restored") == len(ring) - len(gone)
    c.close()
    # a clean restart keeps them where they are (the ring, held files)
    assert srv.stop() == 0
    srv.restart()
    c = Conn(srv.port)
    assert c.stat("rockstalk-body-ring-restored") == len(ring) - len(gone)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the clean restart" % jid
    c.close()


def test_ring_deleted_refs_gone(rockstalkd):
    """(c) deleting every ring job deletes its body and its reference: a
    kill -9 then restores nothing and brings none back."""
    srv = rockstalkd(*BIGRING)
    c = Conn(srv.port)
    ids = put_many(c, [body_of(i, 80000) for i in range(8)])
    for jid in ids:
        assert c.cmd("delete %d" % jid) == "DELETED"
    c.close()
    time.sleep(APPLIED)
    srv.kill9()
    srv.restart()
    c = Conn(srv.port)
    assert c.stat("rockstalk-body-ring-restored") == 0
    assert c.stat("current-jobs-ready") == 0
    for jid in ids:
        assert c.peek(jid) is None
    c.close()


def test_ring_lapped_unflushed_sigkill(rockstalkd):
    """(b) after the ring lapped several times (a file whose generation
    still has live jobs kept as a held file, store/bodyheld.h), every live
    job's body is right after kill -9, with 3 shards."""
    srv = rockstalkd(*FLAGS, "--shards", "3")
    conns = [Conn(srv.port) for _ in range(3)]
    # ~10 MiB of ring entries: > 2 laps
    ids = fill_and_thin(conns, 11, 16, [30, 5000, 70000, 200000], 5)
    assert conns[0].stat("rockstalk-body-ring-flushes") >= 4
    for c in conns:
        c.close()
    time.sleep(APPLIED)
    srv.kill9()
    srv.restart()
    c = Conn(srv.port)
    assert c.stat("rockstalk-body-ring-restored") > 0
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    assert c.stat("current-jobs-ready") == len(ids)
    c.close()


@pytest.mark.parametrize("how", ["zero", "missing"])
def test_ring_unflushed_body_damaged_refuses(rockstalkd, how):
    """(d) a ring entry damaged (zeroed, or its file gone), its body
    nowhere else (kill -9): the restart, which checks every live ring
    entry's header, refuses, naming the job, instead of serving a wrong
    body (a body byte flipped is found when the body is read:
    test_ring_damaged_after_reply_never_served)."""
    srv = rockstalkd(*BIGRING)
    c = Conn(srv.port)
    ids = put_many(c, [body_of(i, 100000) for i in range(4)])
    c.close()
    time.sleep(APPLIED)
    srv.kill9()
    refs = {r[0]: r[1:] for _, _, p in journal_records(srv.dir)
            for r in ring_refs(p)}
    assert sorted(refs) == ids, refs
    if how == "missing":
        os.unlink(os.path.join(srv.dir, "bodies",
                               "ring-%d" % (refs[ids[2]][0] % RING_FILES)))
    else:
        damage_entry(srv.dir, refs[ids[2]], how)
    p = subprocess.run(srv.argv, capture_output=True, timeout=30)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    # the file gone: its first job is the first without its body
    bad, good = (ids[0], None) if how == "missing" else (ids[2], ids[0])
    assert b"does not verify" in out and b"job %d'" % bad in out, out
    if good:
        assert b"job %d'" % good not in out, out
