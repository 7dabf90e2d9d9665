"""The commit journal (protocol/PROTOCOL.md, section 11.5): what recovery
does with a journal whose tail is torn.

Each case starts rockstalkd in the default mode (and again with -f 50,
whose journal records are written but synced only every 50 ms: a SIGKILL
keeps them all the same) with ROCKSTALKD_FAULT_DEFER_UNSYNCED=1, so RocksDB's writes since its last WAL
sync are lost at a SIGKILL, as a power cut would lose them: the
acknowledged jobs then survive only through the journal. The test puts and
deletes jobs (each acknowledged), kills the server, damages what follows
the last valid record the way a crash can leave it, restarts without the
fault and checks that every acknowledged job is back with its body, that
the acknowledged delete stays deleted, and that nothing else appears:

  * torn:    a record for one more put, cut in the middle of its payload
             (a write the crash interrupted, so never acknowledged);
  * garbage: random bytes after the last record;
  * stale:   a complete record with a correct crc but an earlier
             generation (left by an earlier lap of the file), holding a put;
  * valid:   the control: the same record as in `torn`, complete, whose job
             must come back. It shows the crafted records are well formed,
             so the other cases are rejected for their damage alone.

    /usr/bin/python3 -m pytest -q tests/test_journal.py
"""
import os
import random
import re
import socket
import struct
import zlib

import pytest

from conftest import ROCKSTALKD

pytestmark = pytest.mark.skipif(
    not os.path.exists(ROCKSTALKD),
    reason="rockstalkd binary not built (%s does not exist)" % ROCKSTALKD)

HDR = struct.Struct("<IHHIIQQII")   # magic version flags len nrec gen group crc 0
MAGIC = 0x314A5352
REC = struct.Struct("<QQIHBB")      # seq id body_len meta_len op flag
OP_PUT = 1
JOURNAL_SIZE = 1 << 20
# The sync modes that keep the commit journal: the default (each record
# synced before its reply) and -f MS (written before the reply, synced
# every MS ms).
MODES = {"default": [], "f50": ["-f", "50"]}


def parse(path):
    """The valid records of one journal file: [(offset, gen, group, payload)]
    by the rules of PROTOCOL.md 11.5."""
    data = open(path, "rb").read()
    out, off, gen0, last = [], 0, None, 0
    while off + HDR.size <= len(data):
        magic, ver, flags, ln, nrec, gen, group, crc, z = HDR.unpack_from(
            data, off)
        if magic != MAGIC or ver != 1 or flags or z:
            break
        if (gen0 is not None and gen != gen0) or group <= last or \
                off + HDR.size + ln > len(data):
            break
        payload = data[off + HDR.size:off + HDR.size + ln]
        hdr0 = data[off:off + 32] + b"\0" * 8
        if zlib.crc32(payload, zlib.crc32(hdr0)) != crc:
            break
        out.append((off, gen, group, payload))
        gen0, last = gen, group
        off += HDR.size + ln
    return out, data


def record(gen, group, payload, nrec):
    hdr0 = HDR.pack(MAGIC, 1, 0, len(payload), nrec, gen, group, 0, 0)
    crc = zlib.crc32(payload, zlib.crc32(hdr0))
    return HDR.pack(MAGIC, 1, 0, len(payload), nrec, gen, group, crc, 0) + \
        payload


def ghost_put(payload, ghost_id, body):
    """A put record like the first put in payload, for ghost_id, with a
    body of the same length (the meta records the body's size)."""
    seq, jid, blen, mlen, op, flag = REC.unpack_from(payload, 0)
    assert op == OP_PUT and blen == len(body)
    meta = payload[REC.size:REC.size + mlen]
    return REC.pack(seq + 1000, ghost_id, blen, mlen, OP_PUT, 0) + meta + body


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
        body = self.f.read(int(m.group(2)) + 2)[:-2]
        return body

    def close(self):
        self.s.close()


BODY_LEN = 24


def body_of(i):
    return (b"job-%06d-" % i).ljust(BODY_LEN, b"x")


def damage(case, path, recs, data):
    """Writes the case's damage after the last valid record of path."""
    off, gen, group, payload = recs[-1]
    end = off + HDR.size + len(payload)
    put = [r[3] for r in recs if REC.unpack_from(r[3], 0)[4] == OP_PUT][-1]
    ghost = ghost_put(put, 999999, b"G" * BODY_LEN)
    rng = random.Random(7)
    if case in ("torn", "valid"):
        rec = record(gen, group + 1, ghost, 1)
        blob = rec if case == "valid" else rec[:HDR.size + len(ghost) // 2]
    elif case == "garbage":
        blob = bytes(rng.randrange(256) for _ in range(4096))
    elif case == "stale":
        blob = record(max(gen - 2, 0), group + 1, ghost, 1)
    else:
        raise AssertionError(case)
    with open(path, "r+b") as f:
        f.seek(end)
        f.write(blob)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", ["torn", "garbage", "stale", "valid"])
def test_torn_journal_tail(rockstalkd, case, mode, monkeypatch):
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd("--journal-size", str(JOURNAL_SIZE), *MODES[mode])
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    c = Conn(srv.port)
    ids = {}
    for i in range(40):
        r = c.cmd("put %d 0 60 %d" % (i, BODY_LEN), body_of(i))
        m = re.fullmatch(r"INSERTED (\d+)", r)
        assert m, r
        ids[int(m.group(1))] = body_of(i)
    deleted = sorted(ids)[5]
    assert c.cmd("delete %d" % deleted) == "DELETED"
    del ids[deleted]
    c.close()
    srv.kill9()

    jdir = os.path.join(srv.dir, "journal")
    found = [(p, parse(os.path.join(jdir, p))) for p in sorted(os.listdir(jdir))]
    live = [(p, recs, data) for p, (recs, data) in found if recs]
    assert live, "no valid journal record after %d acknowledged puts" % len(ids)
    p, recs, data = max(live, key=lambda x: x[1][-1][2])  # the newest
    assert sum(HDR.size + len(r[3]) for r in recs) < JOURNAL_SIZE
    damage(case, os.path.join(jdir, p), recs, data)

    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    assert c.peek(deleted) is None, "deleted job %d came back" % deleted
    ghost = c.peek(999999)
    if case == "valid":
        assert ghost == b"G" * BODY_LEN, "a complete record was not replayed"
    else:
        assert ghost is None, "the %s tail invented job 999999" % case
    st = c.cmd("stats")
    n = int(st.split()[1])
    text = c.f.read(n + 2).decode()
    jobs = int(re.search(r"current-jobs-ready: (\d+)", text).group(1))
    assert jobs == len(ids) + (case == "valid"), text
    r = c.cmd("put 0 0 60 1", b"n")
    assert int(r.split()[1]) > max(ids), r
    c.close()
    log = open(srv.dir + ".log", "rb").read().decode("utf-8", "replace")
    assert "the commit journal gave" in log, log[-2000:]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_journal_laps(rockstalkd, mode, monkeypatch):
    """Several laps of a 1 MiB journal (each file started syncs the shards'
    WALs in the background before the other file is overwritten), then a
    SIGKILL that loses RocksDB's unsynced writes: every acknowledged job is
    back with its body, whether the shards or the journal held it."""
    monkeypatch.setenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED", "1")
    srv = rockstalkd("--journal-size", str(JOURNAL_SIZE), *MODES[mode])
    monkeypatch.delenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED")
    c = Conn(srv.port)
    ids, size = {}, 1000
    for batch in range(40):         # 40 x 100 puts of 1000 bytes: ~4 laps
        bodies = [(b"%05d-" % (batch * 100 + i)).ljust(size, b"b")
                  for i in range(100)]
        c.s.sendall(b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (size, b)
                             for b in bodies))
        for b in bodies:
            r = c.f.readline().rstrip(b"\r\n").decode()
            m = re.fullmatch(r"INSERTED (\d+)", r)
            assert m, r
            ids[int(m.group(1))] = b
    for jid in sorted(ids)[::7]:    # and some deletes
        assert c.cmd("delete %d" % jid) == "DELETED"
        del ids[jid]
    c.close()
    srv.kill9()
    srv.restart()
    c = Conn(srv.port)
    for jid, body in sorted(ids.items()):
        assert c.peek(jid) == body, "job %d after the restart" % jid
    st = c.cmd("stats")
    text = c.f.read(int(st.split()[1]) + 2).decode()
    assert "current-jobs-ready: %d\n" % len(ids) in text, text
    c.close()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_cancelled_put_keeps_its_id(rockstalkd, mode):
    """A put and its delete inside the journal's write-behind window are
    never written to the shards (PROTOCOL.md 11.5), but the id was given:
    after a clean stop (SIGTERM: nothing to replay from the journal) and a
    restart, the next put gets a higher id (ids are never reused)."""
    srv = rockstalkd("--journal-size", str(JOURNAL_SIZE), *MODES[mode])
    c = Conn(srv.port)
    ids = [int(c.cmd("put 0 0 60 1", b"a").split()[1]) for _ in range(3)]
    assert c.cmd("delete %d" % ids[-1]) == "DELETED"
    c.close()
    assert srv.stop() == 0
    srv.restart()
    c = Conn(srv.port)
    r = c.cmd("put 0 0 60 1", b"b")
    c.close()
    assert int(r.split()[1]) > ids[-1], "id given again after %r: %s" % (
        ids, r)
