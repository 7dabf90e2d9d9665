"""Workers watching many tubes get their jobs in exactly beanstalkd 1.12's
order (issue 30). rockstalkd gives a session watching 8 tubes or more a
heap of its tubes by best ready job (src/queue/watch.h) instead of looking
at each tube; this replays a seeded random mix of puts (3 priorities, 14
tubes), reserves by two workers watching 12 and 9 of them (one of them
sometimes blocked), deletes, releases with a new priority, buries, kicks,
ignores and watches again, and pauses, against a fresh beanstalkd 1.12 and
a fresh rockstalkd; every reply must match.

    /usr/bin/python3 -m pytest -q tests/test_many_watched.py
"""
import random
import time

import pytest

TUBES = ["t%d" % i for i in range(14)]


class Line:
    """One connection: send a command, read one framed reply."""

    def __init__(self, srv):
        self.s = srv.connect(5.0)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            assert d, "server closed the connection"
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode()

    def reply(self):
        ln = self._line()
        w = ln.split()
        if w and w[0] in ("RESERVED", "FOUND", "OK"):
            n = int(w[-1]) + 2
            while len(self.buf) < n:
                self.buf += self.s.recv(65536)
            body, self.buf = self.buf[:n - 2], self.buf[n:]
            return ln + " " + body.decode()
        return ln

    def cmd(self, line, body=None):
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body.encode() + b"\r\n"
        self.send(data)
        return self.reply()


def script(seed, steps=500):
    """The run: a list of (who, command, body, blocking) from the seed."""
    rnd = random.Random(seed)
    out = []
    for i in range(steps):
        r = rnd.random()
        t = rnd.choice(TUBES)
        if r < 0.40:
            out.append(("p", "use " + t, None, False))
            out.append(("p", "put %d 0 60 4" % rnd.choice((1, 5, 9)),
                        "j%03d" % (i % 1000), False))
        elif r < 0.75:
            out.append((rnd.choice(("w", "w2")), "reserve-with-timeout 0", None,
                        False))
        elif r < 0.80:
            out.append(("w2", "reserve-with-timeout 2", None, True))
            out.append(("p", "use " + rnd.choice(TUBES[5:]), None, False))
            out.append(("p", "put 5 0 60 4", "b%03d" % (i % 1000), False))
        elif r < 0.85:
            out.append(("p", "use " + t, None, False))
            out.append(("p", "kick 2", None, False))
        elif r < 0.90:
            out.append(("w", rnd.choice(("ignore ", "watch ")) + t, None,
                        False))
        elif r < 0.93:
            out.append(("p", "pause-tube %s 0" % t, None, False))
        else:
            out.append(("w", "stats-tube " + t, None, False))
    return out


def run(srv, seed):
    """Replays script(seed) on srv; returns every reply, in order."""
    conns = {"p": Line(srv), "w": Line(srv), "w2": Line(srv)}
    log = []
    for t in TUBES[:12]:
        log.append(conns["w"].cmd("watch " + t))
    for t in TUBES[5:]:
        log.append(conns["w2"].cmd("watch " + t))
    log.append(conns["w"].cmd("ignore default"))
    log.append(conns["w2"].cmd("ignore default"))
    held = {"w": [], "w2": []}
    rnd = random.Random(seed + 1)
    blocked = None
    for who, line, body, blocking in script(seed):
        if blocking:
            conns[who].send(line.encode() + b"\r\n")
            time.sleep(0.01)  # the reserve reaches the server first
            blocked = who
            continue
        rep = conns[who].cmd(line, body)
        if line.startswith("stats-tube"):  # keep the counts that matter
            rep = " ".join(x for x in rep.split("\n") if "jobs-" in x)
        log.append("%s %s -> %s" % (who, line, rep))
        if rep.startswith("RESERVED"):
            held[who].append(rep.split()[1])
        if blocked and line.startswith("put"):
            got = conns[blocked].reply()
            log.append("%s (blocked) -> %s" % (blocked, got))
            if got.startswith("RESERVED"):
                held[blocked].append(got.split()[1])
            blocked = None
        for w in ("w", "w2"):  # let go of what a worker holds
            while held[w] and rnd.random() < 0.5:
                jid = held[w].pop(0)
                act = rnd.choice(("delete %s", "release %s 3 0",
                                  "release %s 9 0", "bury %s 7"))
                log.append("%s %s -> %s" % (w, act % jid,
                                            conns[w].cmd(act % jid)))
    for c in conns.values():
        c.s.close()
    return log


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_many_watched_tubes_order_as_beanstalkd(beanstalkd, rockstalkd, seed):
    want = run(beanstalkd(), seed)
    got = run(rockstalkd(), seed)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        assert a == b, "reply %d differs:\n  1.12: %s\n  ours: %s" % (i, a, b)
    assert sum("RESERVED" in x for x in got) > 100  # it did reserve
