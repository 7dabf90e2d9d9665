"""The workload: producers (put, put-unique) and workers (reserve,
release, bury, kick, peek, delete) on connections to every node,
reconnecting on any error; every request and reply recorded.

History records are dicts: {"p": process, "node", "op", "t0" (request
sent, time.monotonic()), "t1" (reply read, or the error), "id", "body",
"key", "reply"} where reply is the reply's first word ("INSERTED",
"DELETED", "RESERVED", "FOUND", ...) or None when no reply came (a lost
connection or a timeout: the request may or may not have taken effect).
"""
import random
import socket
import threading
import time

TUBE = "chaos"
TIMEOUT = 3.0  # s a request waits for its reply before it counts as lost


class Lost(Exception):
    """No reply: the connection failed or timed out."""


class Client:
    """One connection to one node, speaking the beanstalkd protocol."""

    def __init__(self, node, timeout=TIMEOUT):
        self.node = node
        self.sock = node.connect(1.0)
        self.sock.settimeout(timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _line(self):
        while b"\r\n" not in self.buf:
            try:
                d = self.sock.recv(65536)
            except (OSError, socket.timeout) as e:
                raise Lost(str(e))
            if not d:
                raise Lost("closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode("latin-1")

    def _data(self, n):
        while len(self.buf) < n + 2:
            try:
                d = self.sock.recv(65536)
            except (OSError, socket.timeout) as e:
                raise Lost(str(e))
            if not d:
                raise Lost("closed")
            self.buf += d
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data.decode("latin-1")

    def cmd(self, line, body=None):
        """Sends line (and body); returns (words of the reply line, data
        of a RESERVED/FOUND/OK reply or None). Raises Lost."""
        msg = line.encode() + b"\r\n"
        if body is not None:
            msg += body.encode() + b"\r\n"
        try:
            self.sock.sendall(msg)
        except OSError as e:
            raise Lost(str(e))
        words = self._line().split()
        data = None
        if words and words[0] in ("RESERVED", "FOUND", "OK") and \
                len(words) >= 2:
            data = self._data(int(words[-1]))
        return words, data


class History:
    def __init__(self):
        self.ops = []
        self.lock = threading.Lock()

    def add(self, **rec):
        with self.lock:
            self.ops.append(rec)


class Proc(threading.Thread):
    """One client process: a loop of operations until stop is set,
    reconnecting to a node drawn from rng after every error."""

    def __init__(self, cluster, hist, name, seed, stop):
        super().__init__(daemon=True)
        self.cluster, self.hist, self.name = cluster, hist, name
        self.rng = random.Random(seed)
        self.stop_ev = stop
        self.client = None
        self.n = 0
        self.timeout = TIMEOUT

    def connect(self):
        if self.client:
            return self.client
        nd = self.rng.choice(self.cluster.nodes)
        try:
            c = Client(nd, self.timeout)
            c.cmd("use " + TUBE)
            c.cmd("watch " + TUBE)
            c.cmd("ignore default")
        except (OSError, Lost):
            time.sleep(0.05)
            return None
        self.client = c
        return c

    def drop(self):
        if self.client:
            self.client.close()
        self.client = None
        time.sleep(0.02)

    def req(self, op, line, payload=None, **kw):
        """One recorded request; returns (words, data) or None if lost."""
        c = self.client
        t0 = time.monotonic()
        try:
            words, data = c.cmd(line, payload)
        except Lost:
            self.hist.add(p=self.name, node=c.node.id, op=op, t0=t0,
                          t1=time.monotonic(), reply=None, **kw)
            self.drop()
            return None
        rec = dict(p=self.name, node=c.node.id, op=op, t0=t0,
                   t1=time.monotonic(), reply=words[0] if words else "")
        rec.update(kw)
        if words and words[0] in ("INSERTED", "RESERVED", "FOUND"):
            rec["id"] = int(words[1])
        if data is not None and words[0] in ("RESERVED", "FOUND"):
            rec["body"] = data
        self.hist.add(**rec)
        return words, data

    def run(self):
        while not self.stop_ev.is_set():
            if not self.connect():
                continue
            try:
                self.step()
            except Exception as e:  # noqa: BLE001 - recorded, not raised
                self.hist.add(p=self.name, node=0, op="crash", t0=0, t1=0,
                              reply=repr(e))
                self.drop()
        self.drop()


class Producer(Proc):
    """delayed: a third of the plain puts get a delay of 2 to 4 s (their
    records carry "delay"; checker.early)."""
    delayed = False

    def step(self):
        self.n += 1
        body = "%s-%d" % (self.name, self.n)
        if self.delayed and self.rng.random() < 0.3:
            d = self.rng.randint(2, 4)
            self.req("put", "put 100 %d 30 %d" % (d, len(body)), body,
                     body=body, delay=d)
            return
        if self.rng.random() < 0.3:
            # put-unique, retried with the same key and body after a lost
            # reply, on another connection (maybe another node)
            key = "k" + body
            for _ in range(4):
                if not self.connect():
                    continue
                r = self.req("put", "put-unique %s 100 0 30 %d" %
                             (key, len(body)), body, body=body, key=key)
                if r is not None:
                    return
            return
        self.req("put", "put 100 0 30 %d" % len(body), body, body=body)


class Worker(Proc):
    """kick False: no bury and kick (a kick that finds nothing buried makes
    delayed jobs ready before their time, which checker.early would
    count)."""
    kick = True

    def step(self):
        r = self.req("reserve", "reserve-with-timeout 1")
        if r is None or r[0][0] != "RESERVED":
            return
        jid = int(r[0][1])
        x = self.rng.random()
        if x < 0.1:
            if self.req("release", "release %d 100 0" % jid, id=jid):
                return
        elif x < 0.2 and self.kick:
            if self.req("bury", "bury %d 100" % jid, id=jid):
                self.req("kick", "kick 5")
            return
        elif x < 0.3:
            if not self.req("peek", "peek %d" % jid, id=jid):
                return
        if self.client:
            self.req("delete", "delete %d" % jid, id=jid)


class Reader(Proc):
    """Asks for jobs whose DELETED came back lately (peek, reserve-job),
    each time on a new connection to a node drawn at random, sent at once:
    what the stale checker looks at (a request to a paused old leader
    waits there and is answered when it resumes)."""

    def connect(self):
        self.drop()
        try:
            self.client = Client(self.rng.choice(self.cluster.nodes))
        except OSError:
            time.sleep(0.05)
        return self.client

    def step(self):
        with self.hist.lock:
            done = [o["id"] for o in self.hist.ops[-100:]
                    if o["op"] == "delete" and o["reply"] == "DELETED"]
        if not done:
            time.sleep(0.05)
            return
        jid = self.rng.choice(done[-5:])
        if self.rng.random() < 0.5:
            self.req("peek", "peek %d" % jid, id=jid)
        else:
            r = self.req("reserve-job", "reserve-job %d" % jid, id=jid)
            if r and r[0][0] == "RESERVED":
                self.req("release", "release %d 100 0" % jid, id=jid)
        time.sleep(0.01)


def drain(cluster, hist, deadline_s=20.0):
    """Kicks and deletes every job left, through whichever node serves,
    recording every reply. Returns True once a reserve times out with
    nothing buried left, False if it could not finish in time."""
    end = time.monotonic() + deadline_s
    name = "drain"
    while time.monotonic() < end:
        for nd in cluster.nodes:
            try:
                c = Client(nd, timeout=5.0)
                c.cmd("use " + TUBE)
                c.cmd("watch " + TUBE)
            except (OSError, Lost):
                continue
            p = Proc(cluster, hist, name, 0, threading.Event())
            p.client = c
            ok = _drain_on(p, end)
            c.close()
            if ok:
                return True
        time.sleep(0.2)
    return False


def _drain_on(p, end):
    while time.monotonic() < end:
        if not p.client:
            return False
        r = p.req("kick", "kick 1000000")
        if r is None:
            return False
        r = p.req("reserve", "reserve-with-timeout 0")
        if r is None:
            return False
        if r[0][0] == "TIMED_OUT":
            s = p.req("stats-tube", "stats-tube " + TUBE)
            if s is None:
                return False
            counts = _yaml_counts(s[1] or "")
            if sum(counts.get(k, 0) for k in (
                    "current-jobs-ready", "current-jobs-reserved",
                    "current-jobs-delayed", "current-jobs-buried")) == 0:
                return True
            time.sleep(0.1)
            continue
        if r[0][0] != "RESERVED":
            return False
        if p.req("delete", "delete %s" % r[0][1], id=int(r[0][1])) is None:
            return False
    return False


def _yaml_counts(text):
    out = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            try:
                out[k.strip()] = int(v.strip())
            except ValueError:
                pass
    return out
