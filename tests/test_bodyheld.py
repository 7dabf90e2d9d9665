"""Held ring files (store/bodyring.h): a large put body lives in the body
ring only; its job's ring reference (ring column family) is its home, and
reserve, peek and a backup read it from there. A ring file that must be
reused while a live job still refers to its generation is renamed
<dir>/bodies/held-<gen> and a fresh ring-k is made. At each reuse (a
cover) the writer deletes the held files whose jobs are all gone and
copies into RocksDB the live bodies of a held file less than a quarter of
which is still live, then deletes it; while a backup runs nothing is
reused in place or deleted. A start checks every live ring body's entry
header (rockstalk-body-ring-restored counts them) and copies nothing: the
files with live bodies become held files, the others go, the ring files
start free; a start with the ring off copies every live ring body into
RocksDB instead.

Small rings (4 x 1 MiB, bodies from 4096 bytes up) and bodies of about
64 KiB, so a few MiB make many laps; -m 0, so that every peek and reserve
reads its body from disk (a ring file, a held file or RocksDB), never from
the body cache.

  * live: laps with every job kept leave held files; the stats
    (rockstalk-body-ring-held-files, -held-bytes, -copied) agree with the
    directory; each held file is the generation it is named after; every
    body is exact by peek and by reserve.
  * freed: once their jobs are deleted, more laps remove every held file.
  * copy-out: a held file thinned to about 1 job in 10 is copied out and
    deleted; the kept bodies are exact, also after kill -9 (RocksDB's
    unsynced writes lost, ROCKSTALKD_FAULT_DEFER_UNSYNCED=1).
  * quarter rule: after covers with every delete applied, a held file
    less than a quarter live (weighed from its entries) is gone and its
    live bodies copied, one more than a quarter live is kept as it was.
  * sparse waits a cover: a held file found less than a quarter live is
    kept by that cover; its jobs deleted before the next, it goes with
    nothing copied.
  * races: peeks of the jobs of thinned held files, pipelined on several
    connections while covers copy those files out and delete them, all
    find their exact bodies (a read must not fall between the copy and
    the reference's removal, or the file's delete).
  * restart: with held files present, a clean stop or a kill -9, then a
    start: the files with live bodies (and only those) are held files,
    restored == the live ring bodies, bodies exact; a second start finds
    the same; covers later drop the held files it kept once their jobs go.
    A start with the ring off copies every body into RocksDB, one with
    resized ring files keeps the held files.
  * backup: a backup taken while held files exist and puts go on (slowed
    so that covers happen while it runs) serves every body of its moment
    exactly, and the files it kept go afterwards; one taken after a start
    kept held files serves them too.
  * damage: a flipped body byte in a held file is answered INTERNAL_ERROR
    (peek, reserve), never served; a zeroed entry or a removed held file
    makes the start refuse, naming a job.
  * concurrency: a putter, a reserver that deletes (and buries 1 in 5)
    and a peeker of random live ids for a few seconds: no error, every
    body exact, NOT_FOUND only for a job whose delete was sent.
  * kill -9 mid-covers: a putter and a reserver-deleter running while
    the writer renames, deletes and copies out held files, then SIGKILL
    with ROCKSTALKD_FAULT_DEFER_UNSYNCED=1: every acknowledged job back
    exact, every acknowledged delete kept, after the start only held
    files hold live bodies.

    /usr/bin/python3 -m pytest -q -n 3 tests/test_bodyheld.py
"""
import os
import random
import re
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import ROCKSTALKD
from test_backup import backup, contents, start, stop
from test_bodyring import FLAGS, MODES, RING_FILES, RING_HDR, MiB, Conn

pytestmark = [
    pytest.mark.skipif(not os.path.exists(ROCKSTALKD),
                       reason="rockstalkd binary not built (%s does not "
                       "exist)" % ROCKSTALKD),
    pytest.mark.not_via_follower("the body ring is a standalone's"),
]

HFLAGS = FLAGS + ["-m", "0"]
RING_MAGIC = 0x31425352
RING_ALIGN = 4096
SPARE_MAX = 2           # store/bodyring.h: RING_SPARE_MAX
APPLIED = 1.6           # s: the write-behind window (1 s) and some grace
CONC_RATE = 8 * MiB     # bytes/s put in the concurrency test
SIZES = [5000, 40000, 60000, 64000, 65536, 70000, 90000]


# ---- bodies that say what they are ----

def mk(i, n):
    """Body number i, n bytes: "iiiiiiii:nnnnnnn:" then bytes drawn from
    i and n, so any body can be checked without knowing its job."""
    head = b"%08d:%07d:" % (i, n)
    return head + random.Random(i * 1000003 + n).randbytes(n - len(head))


def body_no(b):
    """The number of a body made by mk(), after checking all of it."""
    m = re.match(rb"(\d{8}):(\d{7}):", b)
    assert m and int(m.group(2)) == len(b), b[:40]
    i = int(m.group(1))
    assert b == mk(i, len(b)), "body %d (%d bytes) is damaged" % (i, len(b))
    return i


class Bodies:
    """Numbers bodies, sizes drawn from SIZES (random.Random(seed))."""

    def __init__(self, seed, first):
        self.rng, self.i = random.Random(seed), first

    def next(self):
        self.i += 1
        return mk(self.i, self.rng.choice(SIZES))

    def some(self, nbytes):
        out, total = [], 0
        while total < nbytes:
            out.append(self.next())
            total += len(out[-1])
        return out


# ---- talking to the server ----

def read_reply(c):
    """(status line, body or None) of the next reply on c (Conn)."""
    ln = c.f.readline()
    assert ln.endswith(b"\r\n"), ln
    ln = ln[:-2].decode()
    w = ln.split()
    if w and w[0] in ("FOUND", "RESERVED", "OK"):
        body = c.f.read(int(w[-1]) + 2)
        assert body.endswith(b"\r\n"), w
        return ln, body[:-2]
    return ln, None


def reserve_one(c):
    """reserve-with-timeout 1 on c: (id, body), or None if it timed out."""
    c.s.sendall(b"reserve-with-timeout 1\r\n")
    ln, b = read_reply(c)
    if ln == "TIMED_OUT":
        return None
    m = re.fullmatch(r"RESERVED (\d+) (\d+)", ln)
    assert m, ln
    return int(m.group(1)), b


def stats(c):
    c.s.sendall(b"stats\r\n")
    ln, body = read_reply(c)
    assert ln.startswith("OK"), ln
    out = {}
    for line in body.decode().splitlines()[1:]:
        k, v = line.split(": ", 1)
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


def stat(st, name):
    assert name in st, "stats has no %s" % name
    return st[name]


def jobs(st):
    """Jobs in the server (every state), from stats st."""
    return sum(stat(st, "current-jobs-" + k)
               for k in ("ready", "reserved", "delayed", "buried"))


def put_on(conns, bodies, batch=8):
    """Puts bodies, batch at a time on each of conns at once (pipelined);
    returns {id: body}."""
    out, k = {}, 0
    while k < len(bodies):
        sent = []
        for c in conns:
            part = bodies[k:k + batch]
            k += len(part)
            if part:
                c.s.sendall(b"".join(b"put 0 0 120 %d\r\n%s\r\n" % (len(b), b)
                                     for b in part))
                sent.append((c, part))
        for c, part in sent:
            for b in part:
                ln, _ = read_reply(c)
                m = re.fullmatch(r"INSERTED (\d+)", ln)
                assert m, ln
                out[int(m.group(1))] = b
    return out


def delete_all(c, ids):
    ids = list(ids)
    for k in range(0, len(ids), 200):
        part = ids[k:k + 200]
        c.s.sendall(b"".join(b"delete %d\r\n" % j for j in part))
        for j in part:
            ln, _ = read_reply(c)
            assert ln == "DELETED", (j, ln)


def churn(c, src, nbytes):
    """Puts nbytes of bodies and deletes each batch once acknowledged."""
    bodies = src.some(nbytes)
    for k in range(0, len(bodies), 8):
        delete_all(c, put_on([c], bodies[k:k + 8]))


def check_peek(c, ids):
    for jid, body in sorted(ids.items()):
        c.s.sendall(b"peek %d\r\n" % jid)
        ln, got = read_reply(c)
        assert ln == "FOUND %d %d" % (jid, len(body)), (jid, ln)
        assert got == body, "peek %d: wrong body" % jid


def check_gone(c, ids):
    for jid in sorted(ids):
        c.s.sendall(b"peek %d\r\n" % jid)
        ln, _ = read_reply(c)
        assert ln == "NOT_FOUND", (jid, ln)


def check_reserve(c, ids):
    """Reserves every job (ids: {id: body}, all the ready jobs), checks
    each body, then releases them all."""
    seen = set()
    for _ in ids:
        c.s.sendall(b"reserve-with-timeout 0\r\n")
        ln, got = read_reply(c)
        m = re.fullmatch(r"RESERVED (\d+) (\d+)", ln)
        assert m, ln
        jid = int(m.group(1))
        assert jid in ids and jid not in seen, jid
        assert got == ids[jid], "reserve %d: wrong body" % jid
        seen.add(jid)
    c.s.sendall(b"reserve-with-timeout 0\r\n")
    assert read_reply(c)[0] == "TIMED_OUT"
    for jid in sorted(seen):
        assert c.cmd("release %d 0 0" % jid) == "RELEASED", jid


# ---- the ring's files ----

def spares(d):
    """Generations of the spare files of data dir d (held files emptied by
    their copy-out, kept for a cover to reuse), ascending; each one's
    first RING_ALIGN bytes must be zeroes, so that none of its stale
    entries reads as a generation's first."""
    bd = os.path.join(d, "bodies")
    gens = []
    for name in os.listdir(bd):
        if name.startswith("spare-"):
            assert re.fullmatch(r"spare-[1-9]\d*", name), name
            with open(os.path.join(bd, name), "rb") as f:
                assert f.read(RING_ALIGN).count(0) == RING_ALIGN, name
            gens.append(int(name[6:]))
    return sorted(gens)


def held(d):
    """Generations of the held files of data dir d, ascending; each file's
    first entry must be of the generation it is named after. Dead held
    files waiting for the reaper (dead-<gen>) and spare files (spares())
    are not held files."""
    bd = os.path.join(d, "bodies")
    gens = []
    for name in os.listdir(bd):
        if name.startswith("dead-"):
            assert re.fullmatch(r"dead-[1-9]\d*", name), name
            continue
        if name.startswith("spare-"):
            continue
        if not name.startswith("held-"):
            assert re.fullmatch(r"ring-[0-%d]" % (RING_FILES - 1), name), name
            continue
        assert re.fullmatch(r"held-[1-9]\d*", name), name
        gen = int(name[5:])
        with open(os.path.join(bd, name), "rb") as f:
            magic, _, g = struct.unpack("<IIQ", f.read(16))
        assert (magic, g) == (RING_MAGIC, gen), (name, hex(magic), g)
        gens.append(gen)
    return sorted(gens)


def held_bytes(d):
    return sum(os.path.getsize(os.path.join(d, "bodies", "held-%d" % g))
               for g in held(d))


def file_entries(path, gen=None):
    """(generation, [body]) of the entries at the start of ring or held
    file path that are of one generation (gen, or the first entry's)."""
    out, off = [], 0
    with open(path, "rb") as f:
        data = f.read()
    while off + RING_HDR <= len(data):
        magic, ln, g = struct.unpack_from("<IIQ", data, off)
        if magic != RING_MAGIC or (gen is not None and g != gen):
            break
        gen = g
        out.append(data[off + RING_HDR:off + RING_HDR + ln])
        off += (RING_HDR + ln + RING_ALIGN - 1) // RING_ALIGN * RING_ALIGN
    return gen, out


def entries(d, gen):
    """The bodies in held file gen of data dir d."""
    return file_entries(os.path.join(d, "bodies", "held-%d" % gen), gen)[1]


def number(b):
    """The number of a body made by mk() (None for anything else)."""
    m = re.match(rb"(\d{8}):(\d{7}):", b)
    return int(m.group(1)) if m and int(m.group(2)) == len(b) else None


def where(d, live):
    """{body number: (file name, generation)} of the bodies numbered in
    live found in data dir d's ring and held files."""
    out = {}
    bd = os.path.join(d, "bodies")
    for name in sorted(os.listdir(bd)):
        if name.startswith("dead-"):  # no live body: the reaper's
            continue
        gen = int(name[5:]) if name.startswith("held-") else None
        gen, bodies = file_entries(os.path.join(bd, name), gen)
        for b in bodies:
            i = number(b)
            if i in live:
                assert i not in out, (i, out[i], name)
                out[i] = (name, gen)
    return out


def nums(bodies):
    return {body_no(b) for b in bodies}


def check_held_live(d, live):
    """Every held file of d holds a body numbered in live."""
    for gen in held(d):
        assert any(number(b) in live for b in entries(d, gen)), \
            "held file %d holds no live body" % gen


def check_started(c, d, found, ring_size=MiB):
    """After a start with the ring on (PROTOCOL.md 11.5): found, the
    bodies number -> (file, generation) of the live ring jobs that the
    files held before the start (where()). The files that held any are
    held files now, no other held file is left, the ring files hold none
    of them (a fresh generation each), and rockstalk-body-ring-restored
    counts them; returns the stats."""
    st = check_held_stats(c, d, ring_size)
    assert held(d) == sorted({g for _, g in found.values()}), (held(d),
                                                               found)
    now = where(d, set(found))
    assert sorted(now) == sorted(found), "bodies moved at the start"
    assert all(n.startswith("held-") for n, _ in now.values()), now
    assert stat(st, "rockstalk-body-ring-restored") == len(found)
    return st


def dead_files(d):
    return sorted(n for n in os.listdir(os.path.join(d, "bodies"))
                  if n.startswith("dead-"))


def reaped(c, d, timeout=20):
    """Waits until the reaper has run every copy-out queued and deleted
    every dead held file (store/bodyreap.h), nothing being put meanwhile:
    the stats count none, and none is left in data dir d. Returns the
    stats."""
    end = time.monotonic() + timeout
    while True:
        st = stats(c)
        if (stat(st, "rockstalk-body-ring-copy-queue") == 0 and
                stat(st, "rockstalk-body-ring-dead-files") == 0):
            break
        assert time.monotonic() < end, "dead held files not deleted: %r" % (
            dead_files(d))
        time.sleep(0.02)
    assert stat(st, "rockstalk-body-ring-dead-bytes") == 0
    assert dead_files(d) == []
    return st


def check_held_stats(c, d, ring_size=MiB):
    """The held-file stats agree with the directory (nothing in flight,
    the dead held files reaped), the spare files' too; returns the
    stats."""
    reaped(c, d)
    st = stats(c)
    gens = held(d)
    assert stat(st, "rockstalk-body-ring-held-files") == len(gens), gens
    assert stat(st, "rockstalk-body-ring-spare-files") == len(spares(d))
    assert len(spares(d)) <= SPARE_MAX, spares(d)
    assert stat(st, "rockstalk-body-ring-held-bytes") == held_bytes(d), gens
    for k in range(RING_FILES):
        p = os.path.join(d, "bodies", "ring-%d" % k)
        assert os.path.getsize(p) == ring_size, p
    return st


def restarted(srv, live, gone):
    """A clean stop and a start of srv, whose live jobs are live ({id:
    body}) and gone jobs gone: check_started with the ring bodies found
    before it, the live bodies exact, the gone ones gone, no other job.
    Returns a connection."""
    assert srv.stop() == 0
    found = where(srv.dir, nums(live.values()))
    srv.restart()
    c = Conn(srv.port)
    check_started(c, srv.dir, found)
    check_peek(c, live)
    check_gone(c, gone)
    assert jobs(stats(c)) == len(live)
    return c


def filled(rockstalkd, seed, mib=8, flags=()):
    """A server on HFLAGS with mib MiB of ring bodies put on 2
    connections, every job kept; (server, conn, {id: body}, Bodies)."""
    srv = rockstalkd(*HFLAGS, *flags)
    conns = [Conn(srv.port) for _ in range(2)]
    src = Bodies(seed, seed * 100000)
    ids = put_on(conns, src.some(mib * MiB))
    conns[1].close()
    return srv, conns[0], ids, src


# ---- the tests ----

def test_held_files_keep_live_bodies(rockstalkd):
    srv, c, ids, _ = filled(rockstalkd, 1)
    gens = held(srv.dir)
    assert gens, "8 laps with every job live left no held file"
    st = check_held_stats(c, srv.dir)
    assert stat(st, "rockstalk-body-ring-copied") == 0
    assert stat(st, "rockstalk-body-ring-puts") == len(ids)
    assert stat(st, "rockstalk-body-ring-flushes") >= len(gens)
    assert stat(st, "current-jobs-ready") == len(ids)
    check_peek(c, ids)
    check_reserve(c, ids)
    check_peek(c, ids)
    assert held(srv.dir) == gens  # reads move nothing
    c.close()


def test_held_files_go_when_their_jobs_do(rockstalkd):
    srv, c, ids, src = filled(rockstalkd, 2)
    assert held(srv.dir), "8 laps with every job live left no held file"
    flushes = stat(stats(c), "rockstalk-body-ring-flushes")
    delete_all(c, ids)
    time.sleep(APPLIED)     # the deletes reach RocksDB (see the copy-out)
    churn(c, src, 6 * MiB)
    st = check_held_stats(c, srv.dir)
    assert stat(st, "rockstalk-body-ring-flushes") >= flushes + 4
    assert held(srv.dir) == [], "held files outlived their jobs"
    assert stat(st, "rockstalk-body-ring-held-bytes") == 0
    assert stat(st, "rockstalk-body-ring-copied") == 0, \
        "bodies of deleted jobs were copied"
    assert jobs(st) == 0
    check_gone(c, ids)
    c.close()
    srv.restart()
    c = Conn(srv.port)
    assert stat(stats(c), "rockstalk-body-ring-restored") == 0
    assert held(srv.dir) == []
    c.close()


def marked_held(d, ids):
    """Marks every held file of data dir d (at least two) with its
    generation (user.rktest: only the same file, renamed, carries it);
    returns the generations and where() of the bodies of ids."""
    gens = held(d)
    assert len(gens) >= 2, "8 laps with every job live left no held files"
    for g in gens:
        os.setxattr(os.path.join(d, "bodies", "held-%d" % g), "user.rktest",
                    b"%d" % g)
    return gens, where(d, {body_no(b) for b in ids.values()})


def marked(d):
    """{file name: mark} of data dir d's ring and held files that carry
    the user.rktest extended attribute (it goes with a file's renames)."""
    out = {}
    bd = os.path.join(d, "bodies")
    for name in os.listdir(bd):
        try:
            out[name] = os.getxattr(os.path.join(bd, name), "user.rktest")
        except OSError:
            pass
    return out


def test_dead_held_file_becomes_a_ring_file(rockstalkd):
    """A held file none of whose jobs is alive, when a cover must keep a
    ring file's generation, takes that ring file's place (its blocks
    written again, not freed and allocated anew) instead of a new file;
    the stale entries in it never pass for the new generation's, also
    after a restart; the other dead held files go as before."""
    srv, c, ids, src = filled(rockstalkd, 9)
    gens, at = marked_held(srv.dir, ids)
    gone = {j for j, b in ids.items() if at[body_no(b)][0].startswith("held-")}
    delete_all(c, gone)     # the ring files' jobs stay: covers keep them
    time.sleep(APPLIED)     # the deletes reach RocksDB
    live = {j: b for j, b in ids.items() if j not in gone}
    live.update(put_on([c], src.some(3 * MiB)))
    now = held(srv.dir)
    assert not set(now) & set(gens), "held files outlived their jobs"
    names = marked(srv.dir)
    assert names, "no dead held file was reused: %r" % sorted(
        os.listdir(os.path.join(srv.dir, "bodies")))
    assert all(n.startswith("ring-") or (n.startswith("held-") and
                                         int(n[5:]) in now)
               for n in names), names
    check_held_stats(c, srv.dir)
    check_held_live(srv.dir, nums(live.values()))
    check_peek(c, live)
    check_gone(c, gone)
    check_reserve(c, live)
    c.close()
    srv.restart()
    c = Conn(srv.port)
    st = stats(c)
    assert stat(st, "rockstalk-body-ring-restored") == len(live)
    assert jobs(st) == len(live)
    check_peek(c, live)
    check_reserve(c, live)
    c.close()


def test_copied_out_file_becomes_a_spare_then_a_ring_file(rockstalkd):
    """A held file emptied by its copy-out is no held file any more: it is
    a spare (spare-<gen>, its head zeroes); the next cover that must keep
    a ring file's generation puts that same file in the ring file's place
    (its blocks written again); its stale entries, which repeat the bodies
    the copy-out moved into RocksDB, never pass for the ring file's; every
    kept body is exact, also after a restart."""
    srv, c, ids, src = filled(rockstalkd, 12)
    gens, at = marked_held(srv.dir, ids)
    mine = sorted(j for j, b in ids.items()
                  if at[body_no(b)][0].startswith("held-"))
    keep = {j: ids[j] for j in mine[::10]}  # a tenth stays: sparse
    gone = [j for j in mine if j not in keep]
    delete_all(c, gone)
    time.sleep(APPLIED)     # the deletes reach RocksDB
    copied0 = stat(stats(c), "rockstalk-body-ring-copied")
    live = {j: b for j, b in ids.items() if j not in gone}
    for _ in range(6):      # sparse at two covers, then the copy-out
        live.update(cover_once(c, src))
        reaped(c, srv.dir)
        if spares(srv.dir):
            break
    sp = spares(srv.dir)
    assert sp, "no copied-out file became a spare: %r" % sorted(
        os.listdir(os.path.join(srv.dir, "bodies")))
    assert stat(stats(c), "rockstalk-body-ring-copied") > copied0
    assert not set(sp) & set(held(srv.dir))
    assert {n: m for n, m in marked(srv.dir).items()
            if n.startswith("spare-")} == {"spare-%d" % g: b"%d" % g
                                           for g in sp}
    check_held_stats(c, srv.dir)
    live.update(cover_once(c, src))     # keeps a ring generation: reuse
    names = {n: int(m) for n, m in marked(srv.dir).items()}
    reused = {n: g for n, g in names.items()
              if n.startswith("ring-") and g in sp}
    assert reused, "no spare took a ring file's place: %r" % names
    for n, g in reused.items():
        first, _ = file_entries(os.path.join(srv.dir, "bodies", n))
        assert first != g, (n, g)   # the new generation's, or none
    moved = where(srv.dir, nums(keep.values()))
    assert not [w for w in moved.values() if not w[0].startswith("held-")], \
        moved   # a copied body is in RocksDB, never read from a ring file
    check_held_stats(c, srv.dir)
    check_peek(c, live)
    check_gone(c, gone)
    c.close()
    c = restarted(srv, live, gone)
    check_reserve(c, live)
    c.close()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_held_copy_out_survives_sigkill(rockstalkd, monkeypatch, mode):
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv, c, ids, src = filled(rockstalkd, 3, flags=MODES[mode])
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    before = held(srv.dir)
    assert len(before) >= 2, before
    keep = {j: ids[j] for j in sorted(ids)[::10]}
    gone = [j for j in ids if j not in keep]
    delete_all(c, gone)
    # The covers count a job live until its delete reaches RocksDB, at most
    # the write-behind window (1 s, store/pend.h) after its reply; once it
    # has, a copy-out copies the kept bodies and no other.
    time.sleep(APPLIED)
    churn(c, src, 6 * MiB)
    st = check_held_stats(c, srv.dir)
    copied = stat(st, "rockstalk-body-ring-copied")
    assert 0 < copied <= len(keep), (copied, len(keep))
    after = held(srv.dir)
    assert len(after) < len(before), (before, after)
    assert jobs(st) == len(keep)
    check_peek(c, keep)
    check_reserve(c, keep)
    c.close()
    srv.kill9()
    # each kept body was copied out (durably), or is in its ring or held
    # file still
    found = where(srv.dir, nums(keep.values()))
    assert len(found) + copied == len(keep), (len(found), copied)
    srv.restart()
    c = Conn(srv.port)
    check_peek(c, keep)
    check_gone(c, gone)
    st = check_started(c, srv.dir, found)
    assert stat(st, "current-jobs-ready") == len(keep)
    check_reserve(c, keep)
    c.close()


def test_held_quarter_rule(rockstalkd):
    """Held files thinned to live fractions from 0 to about a half (the
    older a job the likelier its delete), the deletes applied, then two
    covers: a held file less than a quarter live (its live entries' bytes,
    header included, against its size) was copied out and deleted, one
    more than a quarter live is still there untouched, and every held file
    has a live job."""
    srv, c, ids, src = filled(rockstalkd, 9, mib=9)
    order = sorted(ids)
    rng = random.Random(9)
    gone = [j for k, j in enumerate(order)
            if rng.random() > k / len(order)]
    delete_all(c, gone)
    live = {body_no(ids[j]) for j in ids if j not in gone}
    time.sleep(APPLIED)     # the deletes reach RocksDB

    def fractions():
        out = {}
        for gen in held(srv.dir):
            es = entries(srv.dir, gen)
            assert es, gen
            size = os.path.getsize(os.path.join(srv.dir, "bodies",
                                                "held-%d" % gen))
            n = [b for b in es if body_no(b) in live]
            out[gen] = (len(n), sum(RING_HDR + len(b) for b in n) / size)
        return out

    before = fractions()
    assert len(before) >= 3, before
    assert any(f < 0.2 for _, f in before.values()), before
    assert any(f > 0.3 for _, f in before.values()), before
    copied0 = stat(stats(c), "rockstalk-body-ring-copied")
    more = put_on([c], src.some(2 * MiB))      # two covers, nothing deleted
    ids.update(more)
    live |= {body_no(b) for b in more.values()}
    reaped(c, srv.dir)      # the copy-outs, on the reaper's thread
    after = fractions()
    last = max(after)       # retired by the last cover, not yet weighed
    for gen, (n, f) in before.items():
        if f < 0.24:
            assert gen not in after, ("held file %d, %.2f live, was kept"
                                      % (gen, f), before, after)
        elif f > 0.26:
            assert after.get(gen) == (n, f), ("held file %d, %.2f live, "
                                              "was not kept as it was"
                                              % (gen, f), before, after)
    for gen, (n, f) in after.items():
        assert n > 0, ("held file %d without a live job" % gen, after)
        assert gen == last or f >= 0.24, (gen, f, after)
    copied = stat(stats(c), "rockstalk-body-ring-copied") - copied0
    assert copied == sum(n for g, (n, f) in before.items()
                         if g not in after), (copied, before, after)
    check_held_stats(c, srv.dir)
    check_peek(c, {j: b for j, b in ids.items() if j not in gone})
    c.close()


def cover_once(c, src):
    """Puts bodies one at a time until the writer has done one more cover
    (rockstalk-body-ring-flushes); returns {id: body}."""
    first = stat(stats(c), "rockstalk-body-ring-flushes")
    out = {}
    while stat(stats(c), "rockstalk-body-ring-flushes") == first:
        out.update(put_on([c], [src.next()]))
        assert len(out) < 200, "no cover after %d puts" % len(out)
    assert stat(stats(c), "rockstalk-body-ring-flushes") == first + 1
    return out


def test_held_sparse_waits_a_cover(rockstalkd):
    """A held file found less than a quarter live is copied out only if
    the next cover finds it so again: one whose last jobs go meanwhile
    (jobs that go in order) is deleted with nothing copied."""
    srv, c, ids, src = filled(rockstalkd, 11)
    at = where(srv.dir, {body_no(b) for b in ids.values()})
    gen = held(srv.dir)[0]
    mine = sorted(j for j, b in ids.items()
                  if at[body_no(b)] == ("held-%d" % gen, gen))
    assert len(mine) >= 12, mine
    keep = mine[:len(mine) // 10]   # about a tenth stays: sparse
    delete_all(c, [j for j in mine if j not in keep])
    time.sleep(APPLIED)     # the deletes reach RocksDB
    copied0 = stat(stats(c), "rockstalk-body-ring-copied")
    ids.update(cover_once(c, src))
    assert gen in held(srv.dir), "copied out at the first sparse cover"
    assert stat(stats(c), "rockstalk-body-ring-copied") == copied0
    delete_all(c, keep)
    time.sleep(APPLIED)
    ids.update(cover_once(c, src))
    assert gen not in held(srv.dir), "a held file outlived its jobs"
    assert stat(stats(c), "rockstalk-body-ring-copied") == copied0, \
        "bodies of jobs deleted before the next cover were copied"
    check_held_stats(c, srv.dir)
    check_peek(c, {j: b for j, b in ids.items() if j not in mine})
    check_gone(c, mine)
    c.close()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_held_files_restart(rockstalkd, monkeypatch, how):
    if how == "sigkill":
        monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv, c, ids, src = filled(rockstalkd, 4)
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", raising=False)
    for jid in sorted(ids)[::7]:   # a few gone; no held file near a quarter
        assert c.cmd("delete %d" % jid) == "DELETED"
        del ids[jid]
    assert held(srv.dir), "8 laps with every job live left no held file"
    st = check_held_stats(c, srv.dir)
    # nothing was copied out: every live job's body is in the ring
    assert stat(st, "rockstalk-body-ring-copied") == 0
    c.close()
    if how == "sigkill":
        srv.kill9()
    else:
        assert srv.stop() == 0
    found = where(srv.dir, nums(ids.values()))
    assert len(found) == len(ids), "a live body in no ring or held file"
    srv.restart()
    c = Conn(srv.port)
    st = check_started(c, srv.dir, found)
    assert stat(st, "current-jobs-ready") == len(ids)
    check_peek(c, ids)
    check_reserve(c, ids)
    c.close()
    assert srv.stop() == 0
    again = where(srv.dir, nums(ids.values()))
    assert {i: g for i, (_, g) in again.items()} == \
        {i: g for i, (_, g) in found.items()}
    srv.restart()   # the same held files, the same bodies found
    c = Conn(srv.port)
    check_started(c, srv.dir, found)
    check_peek(c, ids)
    # laps after the restart: new generations, new held files beside the
    # ones the start kept
    old = dict(ids)
    more = put_on([c], src.some(6 * MiB))
    ids.update(more)
    assert set(held(srv.dir)) > {g for _, g in found.values()}
    check_held_stats(c, srv.dir)
    check_peek(c, ids)
    # the held files the start kept go once their jobs do
    delete_all(c, old)
    time.sleep(APPLIED)
    ids = more
    ids.update(put_on([c], src.some(2 * MiB)))
    check_held_stats(c, srv.dir)
    check_held_live(srv.dir, nums(ids.values()))
    assert not set(held(srv.dir)) & {g for _, g in found.values()}
    check_peek(c, ids)
    c.close()


def test_held_copy_out_races_reads(rockstalkd):
    """Peeks of the jobs of thinned held files, pipelined on 4 connections
    without a pause, while covers copy those files out and delete them
    (4 rounds): every peek finds its job with its exact body. A read that
    looks in the body column family before a copy-out and for the ring
    reference after it, or for the held file after its delete, must not
    lose the body."""
    srv = rockstalkd(*HFLAGS)
    c, c2 = Conn(srv.port), Conn(srv.port)
    src, kept, copied = Bodies(7, 700000), {}, 0
    for rnd in range(4):
        ids = put_on([c, c2], src.some(5 * MiB))
        keep = {j: ids[j] for j in sorted(ids)[::6]}
        delete_all(c, [j for j in ids if j not in keep])
        assert held(srv.dir)
        stop_all, errors, peeks = threading.Event(), [], [0]

        def reader(k):
            try:
                r = Conn(srv.port)
                order = sorted(keep)
                random.Random(k).shuffle(order)
                while not stop_all.is_set():
                    for at in range(0, len(order), 32):
                        part = order[at:at + 32]
                        r.s.sendall(b"".join(b"peek %d\r\n" % j
                                             for j in part))
                        for j in part:
                            ln, b = read_reply(r)
                            assert ln == "FOUND %d %d" % (j, len(keep[j])), \
                                (j, ln)
                            assert b == keep[j], "peek %d: wrong body" % j
                            peeks[0] += 1
                r.close()
            except Exception as e:  # reported by the main thread
                errors.append("round %d, reader %d: %r" % (rnd, k, e))
                stop_all.set()

        threads = [threading.Thread(target=reader, args=(k,))
                   for k in range(4)]
        for t in threads:
            t.start()
        try:
            churn(c, src, 4 * MiB)
        finally:
            stop_all.set()
            for t in threads:
                t.join(30)
        if errors:  # say whether the failed reads were transient
            bad = [j for j in sorted(keep) if c.peek(j) != keep[j]]
            pytest.fail("%s; then peeked again, %d unreadable: %s" %
                        (errors, len(bad), bad))
        assert peeks[0] > 2 * len(keep), peeks[0]
        st = check_held_stats(c, srv.dir)
        assert stat(st, "rockstalk-body-ring-copied") > copied, rnd
        copied = stat(st, "rockstalk-body-ring-copied")
        kept.update(keep)
        check_peek(c, kept)
    c.close()
    c2.close()


class SlowProxy:
    """Forwards one connection to 127.0.0.1:port, the server's bytes at
    about rate bytes/s and through a small receive buffer, so that the
    server's backup stream runs for seconds. first: time.monotonic() of
    the server's first byte; done: set when the connection ended."""

    def __init__(self, port, rate):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.port = self.ls.getsockname()[1]
        self.first, self.done = None, threading.Event()
        self.t = threading.Thread(target=self._run, args=(port, rate),
                                  daemon=True)
        self.t.start()

    @staticmethod
    def _up(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _run(self, port, rate):
        cl, _ = self.ls.accept()
        up = socket.socket()
        up.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
        up.connect(("127.0.0.1", port))
        threading.Thread(target=self._up, args=(cl, up), daemon=True).start()
        n = 0
        try:
            while True:
                d = up.recv(16384)
                if not d:
                    break
                if self.first is None:
                    self.first = time.monotonic()
                cl.sendall(d)
                n += len(d)
                ahead = self.first + n / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            cl.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            cl.close()
            up.close()
            self.ls.close()
            self.done.set()


REAP_STEP = 4 * MiB     # store/bodyreap.h: bytes the reaper frees a step


def started_ring_off(srv):
    """Starts stopped srv with the ring off (--body-ring 0): the bodies
    directory must be gone. Returns a connection and the stats."""
    srv.argv = srv.argv + ["--body-ring", "0"]
    srv.restart()
    assert not os.path.exists(os.path.join(srv.dir, "bodies"))
    c = Conn(srv.port)
    return c, stats(c)


def plant_dead(d, gen, nbytes):
    """A dead held file an earlier run left to its reaper: d's
    bodies/dead-<gen>, nbytes written (blocks allocated, not sparse) and
    synced. Returns its path."""
    path = os.path.join(d, "bodies", "dead-%d" % gen)
    chunk = random.Random(gen).randbytes(MiB)
    with open(path, "wb") as f:
        for _ in range(nbytes // MiB):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    return path


def watch_size(path, sizes, stop):
    """Adds every size path is seen at to sizes until it is gone or stop
    is set (a thread)."""
    while not stop.is_set():
        try:
            sizes.add(os.stat(path).st_size)
        except FileNotFoundError:
            return


def test_dead_held_files_reaped_in_steps(rockstalkd):
    """A dead held file (one a stopped or crashed run left to its reaper,
    dead-<gen>) is deleted after the next start REAP_STEP bytes at a time:
    the test sees it shrink step by step, where one unlink would free it
    all in one journal commit, which every fsync of the server then waits
    for (store/bodyreap.h). Its generation is not given again, and a clean
    stop deletes at once what the reaper has not reached yet."""
    srv = rockstalkd(*HFLAGS)
    srv.stop()
    path = plant_dead(srv.dir, 900, 128 * MiB)
    sizes, stop = set(), threading.Event()
    t = threading.Thread(target=watch_size, args=(path, sizes, stop))
    t.start()
    try:
        srv.restart()
        t.join(60)
    finally:
        stop.set()
        t.join()
    assert not os.path.exists(path), "the dead held file was not deleted"
    assert all(s % REAP_STEP == 0 for s in sizes), sorted(sizes)
    steps = sorted(s for s in sizes if 0 < s < 128 * MiB)
    assert len(steps) >= 2, "freed in one go: sizes seen %r" % sorted(sizes)
    c = Conn(srv.port)
    reaped(c, srv.dir)
    put_on([c], Bodies(11, 1100000).some(8 * MiB))  # laps: held files
    assert held(srv.dir) and min(held(srv.dir)) > 900, held(srv.dir)
    c.close()
    srv.stop()
    paths = [plant_dead(srv.dir, g, 32 * MiB) for g in (2901, 2902, 2903)]
    srv.restart()
    assert srv.stop() == 0
    assert [p for p in paths if os.path.exists(p)] == [], \
        "a clean stop left dead held files"


def test_dead_held_files_go_with_the_ring_off(rockstalkd):
    """A start with the ring off (--body-ring 0) deletes the dead held
    files an earlier run left, and the bodies directory with them."""
    srv = rockstalkd(*HFLAGS)
    srv.stop()
    plant_dead(srv.dir, 77, 8 * MiB)
    c, st = started_ring_off(srv)
    assert stat(st, "rockstalk-body-ring-dead-files") == 0
    assert stat(st, "rockstalk-body-ring-dead-bytes") == 0
    c.close()


def plant_spare(d, gen):
    """A spare file an earlier run left: d's bodies/spare-<gen>, one MiB,
    its head zeroes and its other bytes a held file's stale entries
    (random here), marked (user.rktest) with gen. Returns its path."""
    path = os.path.join(d, "bodies", "spare-%d" % gen)
    with open(path, "wb") as f:
        f.write(bytes(RING_ALIGN) +
                random.Random(gen).randbytes(MiB - RING_ALIGN))
    os.setxattr(path, "user.rktest", b"%d" % gen)
    return path


def test_spare_files_at_start(rockstalkd):
    """Spare files an earlier run left: a start with the ring on keeps
    RING_SPARE_MAX of them (the reaper deletes the others) and puts them
    in the places of the ring files it retires; a start with the ring off
    deletes them, and the bodies directory with them. Bodies exact."""
    srv = rockstalkd(*HFLAGS)
    c = Conn(srv.port)
    src = Bodies(13, 1300000)
    ids = put_on([c], src.some(MiB // 2))   # ring files with live bodies
    c.close()
    assert srv.stop() == 0
    planted = [9001, 9002, 9003]
    for g in planted:
        plant_spare(srv.dir, g)
    srv.restart()
    c = Conn(srv.port)
    st = check_held_stats(c, srv.dir)   # the third spare reaped, too
    names = {n: int(m) for n, m in marked(srv.dir).items()}
    assert len(names) == SPARE_MAX, names
    assert all(n.startswith(("ring-", "spare-")) for n in names), names
    assert any(n.startswith("ring-") for n in names), \
        "no spare took a retired ring file's place: %r" % names
    assert stat(st, "rockstalk-body-ring-restored") == len(ids)
    check_peek(c, ids)
    ids.update(put_on([c], src.some(3 * MiB)))  # laps over reused files
    check_held_stats(c, srv.dir)
    check_peek(c, ids)
    c.close()
    assert srv.stop() == 0
    plant_spare(srv.dir, 9100)
    c, st = started_ring_off(srv)
    assert stat(st, "rockstalk-body-ring-spare-files") == 0
    check_peek(c, ids)
    check_reserve(c, ids)
    c.close()


@pytest.mark.parametrize("how", ["off", "resized"])
def test_held_files_restart_reconfigured(rockstalkd, tmp_path, how):
    """Held files, a clean stop, then a start with the ring off
    (--body-ring 0: every body is copied into RocksDB, the bodies
    directory goes) or its files twice the size (the files with live
    bodies held, the ring files resized): every body comes back exact."""
    srv, c, ids, src = filled(rockstalkd, 10)
    assert held(srv.dir), "8 laps with every job live left no held file"
    c.close()
    assert srv.stop() == 0
    found = where(srv.dir, nums(ids.values()))
    assert len(found) == len(ids), "a live body in no ring or held file"
    srv.argv = srv.argv + (["--body-ring", "0"] if how == "off" else
                           ["--body-ring-size", str(2 * MiB)])
    srv.restart()
    c = Conn(srv.port)
    if how == "off":    # every body copied into RocksDB, the files gone
        st = stats(c)
        assert stat(st, "rockstalk-body-ring-restored") == len(ids)
        assert stat(st, "rockstalk-body-ring-held-files") == 0
        assert not os.path.exists(os.path.join(srv.dir, "bodies"))
    else:
        check_started(c, srv.dir, found, 2 * MiB)
    check_peek(c, ids)
    more = put_on([c], src.some(2 * MiB))
    ids.update(more)
    check_peek(c, ids)
    c.close()
    srv.restart()
    c = Conn(srv.port)
    check_peek(c, ids)
    c.close()
    if how == "resized":    # a backup reads the held files a start kept
        assert held(srv.dir)
        r = backup(srv.port, tmp_path / "copy")
        assert r.returncode == 0, r.stderr
        q, qport = start(tmp_path / "copy")
        try:
            got = contents(qport, max(ids) + 5)
        finally:
            stop(q)
        assert got == ids


@pytest.mark.parametrize("how", ["zeroed", "gone"])
def test_held_files_damaged(rockstalkd, how):
    """A body byte flipped in a held file: a peek of its job is answered
    INTERNAL_ERROR (never a wrong body), before and after a restart (the
    start checks headers only), a reserve too (the job is buried); the
    other jobs are exact. Then an entry zeroed, or a held file removed:
    the start refuses, naming a job."""
    srv, c, ids, _ = filled(rockstalkd, 11)
    gens = held(srv.dir)
    assert len(gens) >= 2, gens
    job_of = {body_no(b): j for j, b in ids.items()}

    def first_entry(gen):
        path = os.path.join(srv.dir, "bodies", "held-%d" % gen)
        with open(path, "rb") as f:
            _, ln = struct.unpack("<II", f.read(8))
            f.seek(RING_HDR)
            return path, job_of[number(f.read(ln))], ln

    path, victim, ln = first_entry(gens[0])
    with open(path, "r+b") as f:
        f.seek(RING_HDR + ln // 2)
        b = f.read(1)
        f.seek(RING_HDR + ln // 2)
        f.write(bytes([b[0] ^ 0x55]))
    rest = {j: b for j, b in ids.items() if j != victim}
    assert c.cmd("peek %d" % victim) == "INTERNAL_ERROR"
    check_peek(c, rest)
    # a reserve that meets it: INTERNAL_ERROR, the job buried; the others
    # are reserved with their exact bodies
    got, errs = set(), 0
    for _ in ids:
        c.s.sendall(b"reserve-with-timeout 0\r\n")
        ln, b = read_reply(c)
        if ln == "INTERNAL_ERROR":
            errs += 1
            continue
        jid = int(ln.split()[1])
        assert ln.startswith("RESERVED ") and b == rest.get(jid), (jid, ln)
        got.add(jid)
    assert errs == 1 and got == set(rest), (errs, len(got), len(rest))
    st = stats(c)
    assert stat(st, "current-jobs-buried") == 1, st
    for jid in got:
        assert c.cmd("release %d 0 0" % jid) == "RELEASED"
    c.close()
    assert srv.stop() == 0
    srv.restart()
    c = Conn(srv.port)
    assert c.cmd("peek %d" % victim) == "INTERNAL_ERROR"
    check_peek(c, rest)
    c.close()
    assert srv.stop() == 0
    path, victim, ln = first_entry(gens[1])
    if how == "zeroed":
        with open(path, "r+b") as f:
            f.write(b"\0" * (RING_HDR + ln))
    else:
        os.unlink(path)
    p = subprocess.Popen(srv.argv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        out = p.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail("started with a held entry %s" % how)
    assert p.returncode != 0, out
    assert b"does not verify" in out and b"job " in out, out
    if how == "zeroed":
        assert b"job %d" % victim in out, out


def test_held_files_backup(rockstalkd, tmp_path):
    """A backup, slowed to about 3 MiB/s, while held files exist and puts
    and deletes make covers: the copy holds every body of its moment
    exactly; afterwards the files the backup kept are freed."""
    srv, c, ids, src = filled(rockstalkd, 5)
    gone = sorted(ids)[::5]
    delete_all(c, gone)
    for jid in gone:
        del ids[jid]
    assert held(srv.dir), "8 laps with every job live left no held file"
    stop_put, errors, during, put_during = threading.Event(), [], {}, {}
    flushes = []    # (time, rockstalk-body-ring-flushes) while it runs

    def putter():
        try:
            p, w = Conn(srv.port), Conn(srv.port)
            mine = Bodies(55, 5550000)
            while not stop_put.is_set():
                got = put_on([p], [mine.next() for _ in range(4)])
                during.update(got)
                put_during.update(got)
                delete_all(p, sorted(got)[:1])
                del during[min(got)]
                flushes.append((time.monotonic(),
                                stat(stats(w), "rockstalk-body-ring-flushes")))
            p.close()
            w.close()
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    t = threading.Thread(target=putter)
    t.start()
    proxy = SlowProxy(srv.port, 3 * MiB)
    try:
        time.sleep(0.3)
        r = backup(proxy.port, tmp_path / "copy")
        proxy.done.wait(10)
        end = time.monotonic()
    finally:
        stop_put.set()
        t.join(30)
    assert not errors, errors
    assert r.returncode == 0, r.stderr
    assert proxy.first is not None and end - proxy.first > 1.5, \
        "the backup was not slowed down"
    covers = [n for at, n in flushes if proxy.first <= at <= end]
    assert covers and covers[-1] > covers[0], \
        "no cover while the backup ran: %r" % flushes
    check_held_stats(c, srv.dir)
    check_peek(c, ids)
    check_peek(c, during)
    q, qport = start(tmp_path / "copy")
    try:
        got = contents(qport, max(list(ids) + list(put_during)) + 10)
        qc = Conn(qport)
        st = stats(qc)
        qc.close()
    finally:
        stop(q)
    for jid, body in ids.items():   # everything from before the backup
        assert got.get(jid) == body, "job %d not in the copy as put" % jid
    for jid in gone:                # deleted before it
        assert jid not in got, jid
    for jid, body in got.items():   # puts during it, if in, are exact
        assert body == (ids.get(jid) or put_during.get(jid)), jid
    assert jobs(st) == len(got)
    # with the backup over, covers free what it kept
    delete_all(c, list(ids) + list(during))
    churn(c, src, 6 * MiB)
    check_held_stats(c, srv.dir)
    assert held(srv.dir) == [], "held files outlived the backup and jobs"
    c.close()


def test_held_files_concurrency(rockstalkd):
    """5 s of a putter (8 MiB/s), a reserver (deletes, buries 1 in 5;
    starting 1.5 s late, so it first reads held files while covers rename,
    delete and copy them) and a peeker of random live ids, over a 4 x 1
    MiB ring: bodies exact, deleted jobs stay deleted (a copy-out racing
    a delete does not bring the job back), also after a restart."""
    srv = rockstalkd(*HFLAGS)
    lock, stop_all, errors = threading.Lock(), threading.Event(), []
    acked, delete_sent, reserved, live = {}, set(), {}, []
    most_held = [0]

    def guard(fn):
        def run():
            try:
                fn()
            except Exception as e:  # reported by the main thread
                errors.append("%s: %r" % (fn.__name__, e))
                stop_all.set()
        return threading.Thread(target=run)

    def putter():
        c, src = Conn(srv.port), Bodies(6, 6000000)
        t0, n = time.monotonic(), 0
        while not stop_all.is_set():
            for jid, b in put_on([c], [src.next(), src.next()]).items():
                n += len(b)
                with lock:
                    acked[jid] = b
                    live.append(jid)
            ahead = t0 + n / CONC_RATE - time.monotonic()  # a lap in 0.5 s
            if ahead > 0:
                time.sleep(ahead)
        c.close()

    def reserver():
        c, n = Conn(srv.port), 0
        stop_all.wait(1.5)  # starts 3 laps behind: reads held files
        while not stop_all.is_set():
            got = reserve_one(c)
            if got is None:
                continue
            jid, b = got
            reserved[jid] = body_no(b)
            n += 1
            if n % 5 == 0:
                assert c.cmd("bury %d 0" % jid) == "BURIED", jid
                continue
            with lock:
                delete_sent.add(jid)
            assert c.cmd("delete %d" % jid) == "DELETED", jid
        c.close()

    def peeker():
        c, rng = Conn(srv.port), random.Random(7)
        while not stop_all.is_set():
            with lock:
                if not live:
                    jid = None
                else:
                    k = rng.randrange(len(live))
                    jid = live[k]
                    if jid in delete_sent:      # drop it from the pool
                        live[k] = live[-1]
                        live.pop()
                        jid = None
            if jid is None:
                time.sleep(0.001)
                continue
            c.s.sendall(b"peek %d\r\n" % jid)
            ln, b = read_reply(c)
            if ln == "NOT_FOUND":
                with lock:
                    assert jid in delete_sent, "peek %d: NOT_FOUND" % jid
                continue
            assert ln == "FOUND %d %d" % (jid, len(acked[jid])), (jid, ln)
            assert b == acked[jid], "peek %d: wrong body" % jid

    def watcher():
        c = Conn(srv.port)
        while not stop_all.is_set():
            n = stat(stats(c), "rockstalk-body-ring-held-files")
            most_held[0] = max(most_held[0], n)
            time.sleep(0.05)
        c.close()

    threads = [guard(f) for f in (putter, reserver, peeker, watcher)]
    for t in threads:
        t.start()
    stop_all.wait(5)
    stop_all.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(reserved) > 50 and len(acked) > 100, (len(reserved),
                                                     len(acked))
    for jid, i in reserved.items():    # the body of its own job
        assert body_no(acked[jid]) == i, jid
    left = {j: b for j, b in acked.items() if j not in delete_sent}
    c = Conn(srv.port)
    st = check_held_stats(c, srv.dir)
    assert most_held[0] > 0, "no held file in %d puts" % len(acked)
    assert stat(st, "rockstalk-body-ring-copied") > 0
    assert jobs(st) == len(left)
    check_peek(c, left)
    check_gone(c, delete_sent)
    c.close()
    restarted(srv, left, delete_sent).close()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_held_sigkill_mid_covers(rockstalkd, monkeypatch, mode):
    """kill -9 (RocksDB's unsynced writes lost) while a putter and a
    reserver that deletes (and buries 1 in 4) keep the writer renaming,
    deleting and copying out held files: after the restart every job
    acknowledged and not deleted is back with its exact body, every job
    whose delete was acknowledged stays deleted, and no held file is
    left."""
    # The body cache on (no -m 0): with the fault seam a RocksDB write
    # is not readable until its shard's next sync (store/fault.c), so the
    # reserver reads the bodies it takes from memory; after the restart
    # every body is read from disk.
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd(*FLAGS, *MODES[mode])
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    killed, errors = threading.Event(), []
    acked, sent, deleted = {}, set(), set()

    def guard(fn):
        def run():
            try:
                fn()
            except Exception as e:  # the kill ends them; anything else fails
                if not killed.is_set():
                    errors.append("%s: %r" % (fn.__name__, e))
        return threading.Thread(target=run)

    def putter():
        c, src = Conn(srv.port), Bodies(8, 8000000)
        t0, n = time.monotonic(), 0
        while True:
            got = put_on([c], [src.next(), src.next()])
            acked.update(got)
            n += sum(len(b) for b in got.values())
            ahead = t0 + n / CONC_RATE - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def reserver():
        c, n = Conn(srv.port), 0
        time.sleep(1.0)   # a backlog first: held files with live jobs
        while True:
            got = reserve_one(c)
            if got is None:
                continue
            jid, b = got
            body_no(b)
            n += 1
            if n % 4 == 0:
                assert c.cmd("bury %d 0" % jid) == "BURIED", jid
                continue
            sent.add(jid)
            assert c.cmd("delete %d" % jid) == "DELETED", jid
            deleted.add(jid)

    threads = [guard(f) for f in (putter, reserver)]
    for t in threads:
        t.start()
    time.sleep(3.5)
    w = Conn(srv.port)
    st = stats(w)
    w.close()
    killed.set()
    srv.kill9()
    assert stat(st, "rockstalk-body-ring-held-files") > 0, st
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(deleted) > 20 and len(acked) > 100, (len(deleted), len(acked))
    srv.restart()
    c = Conn(srv.port)
    top = max(acked) + 4     # puts in flight at the kill: at most 2 more
    found = {}
    for jid in range(1, top + 1):
        c.s.sendall(b"peek %d\r\n" % jid)
        ln, b = read_reply(c)
        if ln != "NOT_FOUND":
            assert ln.startswith("FOUND %d " % jid), (jid, ln)
            body_no(b)
            found[jid] = b
    for jid, body in acked.items():
        if jid in deleted:
            assert jid not in found, "deleted job %d is back" % jid
        elif jid not in sent:
            assert found.get(jid) == body, "job %d lost or changed" % jid
        elif jid in found:      # delete sent, no reply before the kill
            assert found[jid] == body, jid
    assert len([j for j in found if j not in acked]) <= 2, sorted(found)
    st = check_held_stats(c, srv.dir)
    assert jobs(st) == len(found)
    # the files with live ring bodies are held files, the ring files
    # fresh: a ring file may be a held file (or a spare) the start reused,
    # whose stale entries can repeat bodies that a copy-out had moved into
    # RocksDB (a kill between the copy-out and the file's renaming), but
    # its head is zeroes, so none reads as a ring file's entry. Every live
    # ring body (restored counts them) is in a held file; one there may
    # be a copy a copy-out made before the kill (its home RocksDB now).
    live = nums(found.values())
    check_held_live(srv.dir, live)
    at = where(srv.dir, live)
    assert all(n.startswith("held-") for n, _ in at.values()), \
        {j: w for j, w in at.items() if not w[0].startswith("held-")}
    assert 0 < stat(st, "rockstalk-body-ring-restored") <= len(at), at
    c.s.sendall(b"kick %d\r\n" % len(found))   # the buried, ready
    assert read_reply(c)[0].startswith("KICKED ")
    check_reserve(c, found)
    c.close()
