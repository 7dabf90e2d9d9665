"""Access control with --auth-file (issue 32): the handshake (auth TOKEN ->
AUTHENTICATED, UNAUTHORIZED and close), the class x tube matrix of allowed
and denied commands (generated: every command, every class, a permitted and
a forbidden tube), the pre-auth timeout, the cap on unauthenticated
connections, flood and slowloris with bounded RSS, SIGHUP reload, the file
refusals at start, stats and metrics, and the CLI's token.

Not here (they need the listeners and client-TLS work merged): cert
identities (conn_peer_cn), unix listeners trusted unless --auth-unix
(Conn.via), per-listener plaintext checks of --listen.

    /usr/bin/python3 -m pytest -q -s tests/test_auth.py   # -s: the matrix
"""
import hashlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import ROCKSTALKD, free_port, wait_for
from test_hostile import RssSampler, rss

pytestmark = pytest.mark.not_via_follower("one process's auth file")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALK_CLI", "rockstalk")))

TOKENS = {
    "root": "root-token",           # admin: everything
    "prod": "prod-token",           # produce:p.*
    "cons": "cons-token",           # consume:p.*
    "insp": "insp-token",           # inspect:p.*
    "tadm": "tadm-token",           # admin:p.* (every class on p.*)
    "other": "other-token",         # produce:q.* only
}
RULES = {
    "root": "admin",
    "prod": "produce:p.*",
    "cons": "consume:p.*",
    "insp": "inspect:p.*",
    "tadm": "admin:p.*",
    "other": "produce:q.*",
}
CLASS_OF = {"prod": "P", "cons": "C", "insp": "I", "tadm": "PCIA",
            "other": ""}


def digest(token):
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def auth_text(names=None, rules=None):
    rules = dict(RULES, **(rules or {}))
    lines = ["# test identities", ""]
    for n in names or TOKENS:
        lines.append("%-6s %s %s" % (n, digest(TOKENS[n]), rules[n]))
    return "\n".join(lines) + "\n"


def write_auth(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


@pytest.fixture
def authd(rockstalkd, tmp_path):
    """A rockstalkd with the test identities; returns the Server with
    .auth_path set."""
    def start(*flags, text=None):
        p = write_auth(tmp_path / "auth", text or auth_text())
        s = rockstalkd("--memory", "--auth-file", p, *flags)
        s.auth_path = p
        return s
    return start


class Client:
    """A line-level client: cmd() returns (status line, body or None)."""

    def __init__(self, srv, token=None, timeout=5.0):
        self.s = srv.connect(timeout)
        self.buf = b""
        if token is not None:
            assert self.cmd("auth " + token) == ("AUTHENTICATED", None)

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError(self.buf)
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode()

    def reply(self):
        ln = self.line()
        m = re.match(r"(?:OK|FOUND \d+|RESERVED \d+) (\d+)$", ln)
        if not m:
            return ln, None
        n = int(m.group(1)) + 2
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n - 2], self.buf[n:]
        return ln, body

    def cmd(self, line, body=None):
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.send(data)
        return self.reply()

    def word(self, line, body=None):
        return self.cmd(line, body)[0].split(" ")[0]

    def closed(self, timeout=5.0):
        """True once the server closed (EOF) within timeout."""
        self.s.settimeout(timeout)
        try:
            while True:
                if not self.s.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def stats(c):
    ln, body = c.cmd("stats")
    assert ln.startswith("OK"), ln
    return dict(re.findall(r"^([\w.-]+): (.*)$", body.decode(), re.M))


# --- the handshake ----------------------------------------------------------

def test_auth_then_commands(authd):
    s = authd()
    c = Client(s, TOKENS["prod"])
    assert c.cmd("use p.a") == ("USING p.a", None)
    assert c.word("put 0 0 10 2", b"hi") == "INSERTED"
    # re-authenticating as another identity takes its rights
    assert c.cmd("auth " + TOKENS["insp"]) == ("AUTHENTICATED", None)
    assert c.word("put 0 0 10 2", b"hi") == "DENIED"
    assert c.word("peek-ready") == "FOUND"
    c.close()


@pytest.mark.parametrize("first", [
    b"auth wrong-token\r\n",
    b"auth " + b"x" * 200 + b"\r\n",
    b"auth \r\n",
    b"auth\r\n",
    b"stats\r\n",
    b"use p.a\r\n",
    b"put 0 0 10 2\r\nhi\r\n",
    b"frobnicate\r\n",
    b"auth prod-token \r\n",     # a trailing space is part of the token
    b"x" * 5000 + b"\r\n",       # an over-long line
])
def test_refused_first_lines(authd, first):
    s = authd()
    c = Client(s)
    c.send(first + b"auth prod-token\r\nuse p.a\r\n")
    assert c.line() == "UNAUTHORIZED"
    assert c.closed(), c.buf
    assert c.buf == b""  # nothing after UNAUTHORIZED ran
    r = Client(s, TOKENS["root"])
    st = stats(r)
    assert st["rockstalk-auth-failures"] == "1"
    assert st["rockstalk-auth"] == "file"
    assert st["cmd-use"] == "0" and st["cmd-put"] == "0"


def test_quit_before_auth_just_closes(authd):
    s = authd()
    c = Client(s)
    c.send(b"quit\r\n")
    assert c.closed() and c.buf == b""
    assert stats(Client(s, TOKENS["root"]))["rockstalk-auth-failures"] == "0"


def test_no_auth_file_stays_open(rockstalkd):
    s = rockstalkd("--memory")
    c = Client(s)
    assert c.cmd("auth x") == ("UNKNOWN_COMMAND", None)  # as beanstalkd
    st = stats(c)
    assert st["rockstalk-auth"] == "none"
    assert "rockstalk-auth-failures" not in st
    assert c.word("put 0 0 10 2", b"hi") == "INSERTED"


def test_timeout_and_slowloris(authd):
    """An idle unauthenticated connection and one dribbling a byte a
    second are both closed 10-12 s after they opened; an authenticated
    idle one stays."""
    s = authd()
    idle, slow, good = Client(s), Client(s), Client(s, TOKENS["prod"])
    t0 = time.monotonic()
    stop = threading.Event()

    def dribble():
        for ch in b"auth prod-tok":
            if stop.is_set():
                return
            try:
                slow.send(bytes([ch]))
            except OSError:
                return
            time.sleep(1)
    th = threading.Thread(target=dribble)
    th.start()
    assert idle.closed(timeout=14)
    t_idle = time.monotonic() - t0
    assert slow.closed(timeout=3)
    stop.set()
    th.join()
    assert 9.5 <= t_idle <= 12.5, t_idle
    assert good.cmd("use p.b") == ("USING p.b", None)
    st = stats(Client(s, TOKENS["root"]))
    assert st["rockstalk-auth-timeouts"] == "2"
    assert st["rockstalk-auth-unauthenticated"] == "0"


def test_unauth_cap_closes_oldest(authd):
    s = authd("--max-unauth", "4")
    cs = [Client(s) for _ in range(6)]
    time.sleep(0.3)
    # the two oldest were closed to make room for the two newest
    assert cs[0].closed(2) and cs[1].closed(2)
    for c in cs[2:]:
        assert not c.closed(0.2)
    # an authenticating client gets in at once (it evicts the oldest)
    r = Client(s, TOKENS["root"])
    assert cs[2].closed(2)
    st = stats(r)
    assert st["rockstalk-auth-evicted"] == "3"
    assert st["rockstalk-auth-unauthenticated"] == "3"
    for c in cs[3:]:
        assert c.cmd("auth " + TOKENS["prod"]) == ("AUTHENTICATED", None)
    assert stats(r)["rockstalk-auth-unauthenticated"] == "0"


def test_flood_bounded(authd):
    """2000 connections that never authenticate, some sending junk (one
    10 MiB line, many commands): RSS stays bounded, the cap holds, and an
    authenticated client is served throughout."""
    s = authd("--max-unauth", "128")
    pid = s.proc.pid
    base = rss(pid)
    sampler = RssSampler(pid)
    sampler.start()
    good = Client(s, TOKENS["prod"])
    socks = []
    try:
        big = socket.create_connection((s.host, s.port))
        big.settimeout(10)
        for i in range(2000):
            try:
                c = socket.create_connection((s.host, s.port), 5)
            except OSError:
                continue
            if i % 3 == 0:
                try:
                    c.sendall(b"put 0 0 10 100000\r\n" + b"x" * 1000)
                except OSError:
                    pass
            socks.append(c)
            if i % 200 == 0:
                assert good.cmd("use p.f%d" % i) == ("USING p.f%d" % i, None)
        try:
            big.sendall(b"y" * (10 << 20) + b"\r\n")
            assert big.recv(100).startswith(b"UNAUTHORIZED")
        except (ConnectionResetError, BrokenPipeError):
            pass  # evicted by the flood first: also bounded
        r = Client(s, TOKENS["root"])
        st = stats(r)
        assert int(st["rockstalk-auth-unauthenticated"]) <= 128
        gone = (int(st["rockstalk-auth-evicted"]) +
                int(st["rockstalk-auth-failures"]))  # the puts: refused
        assert gone >= 2000 - 128 - 10, st
    finally:
        sampler.stop()
        for c in socks:
            c.close()
    grown = (sampler.peak - base) / 1048576.0
    print("\n[auth flood] RSS before %.1f MiB, peak +%.1f MiB" %
          (base / 1048576.0, grown))
    assert grown < 48, grown
    assert good.cmd("use p.z") == ("USING p.z", None)


# --- the matrix -------------------------------------------------------------

# Each command: the classes that allow it on its tube, and how to run it on
# tube t as connection c, with root (a superuser connection) preparing the
# tube first. run() returns the final reply's status line; ok is the word it
# starts with when allowed.

def put_job(root, t, state="ready"):
    root.cmd("use " + t)
    delay = 100 if state == "delayed" else 0
    ln, _ = root.cmd("put 0 %d 60 3" % delay, b"job")
    jid = int(ln.split()[1])
    if state in ("buried", "reserved"):
        root.cmd("watch " + t)
        root.cmd("ignore default")
        ln, _ = root.cmd("reserve-job %d" % jid)
        assert ln.startswith("RESERVED"), ln
        if state == "buried":
            assert root.cmd("bury %d 0" % jid)[0] == "BURIED"
        root.cmd("watch default")
        root.cmd("ignore " + t)
    return jid


def own_job(c, root, t):
    """A job in t reserved by c if c may (else by nobody: ready)."""
    jid = put_job(root, t)
    c.cmd("watch " + t)
    c.cmd("reserve-job %d" % jid)
    return jid


MATRIX = {
    # command: (classes, runner, ok word)
    "use": ("PIA", lambda c, r, t: c.cmd("use " + t)[0], "USING"),
    "put": ("P", lambda c, r, t: (c.cmd("use " + t),
                                  c.cmd("put 0 0 10 1", b"x"))[1][0],
            "INSERTED"),
    "put-unique": ("P", lambda c, r, t: (c.cmd("use " + t),
                                         c.cmd("put-unique k1 0 0 10 1",
                                               b"x"))[1][0], "INSERTED"),
    "watch": ("C", lambda c, r, t: c.cmd("watch " + t)[0], "WATCHING"),
    "ignore": ("C", lambda c, r, t: c.cmd("ignore " + t)[0], "WATCHING"),
    "reserve": ("C", lambda c, r, t: (put_job(r, t), c.cmd("watch " + t),
                                      c.cmd("reserve"))[2][0], "RESERVED"),
    "reserve-with-timeout": ("C", lambda c, r, t: (
        put_job(r, t), c.cmd("watch " + t),
        c.cmd("reserve-with-timeout 0"))[2][0], "RESERVED"),
    "reserve-batch": ("C", lambda c, r, t: (
        put_job(r, t), c.cmd("watch " + t), c.cmd("reserve-batch 1 0"))[2][0],
        "RESERVED_BATCH"),
    "reserve-job": ("C", lambda c, r, t: c.cmd(
        "reserve-job %d" % put_job(r, t))[0], "RESERVED"),
    "release": ("C", lambda c, r, t: c.cmd(
        "release %d 0 0" % own_job(c, r, t))[0], "RELEASED"),
    "bury": ("C", lambda c, r, t: c.cmd(
        "bury %d 0" % own_job(c, r, t))[0], "BURIED"),
    "touch": ("C", lambda c, r, t: c.cmd(
        "touch %d" % own_job(c, r, t))[0], "TOUCHED"),
    "delete-reserved": ("C", lambda c, r, t: c.cmd(
        "delete %d" % own_job(c, r, t))[0], "DELETED"),
    "delete-other": ("A", lambda c, r, t: c.cmd(
        "delete %d" % put_job(r, t, "buried"))[0], "DELETED"),
    "kick": ("A", lambda c, r, t: (put_job(r, t, "buried"), c.cmd("use " + t),
                                   c.cmd("kick 10"))[2][0], "KICKED"),
    "kick-job": ("A", lambda c, r, t: c.cmd(
        "kick-job %d" % put_job(r, t, "buried"))[0], "KICKED"),
    "peek": ("I", lambda c, r, t: c.cmd("peek %d" % put_job(r, t))[0],
             "FOUND"),
    "peek-ready": ("I", lambda c, r, t: (put_job(r, t), c.cmd("use " + t),
                                         c.cmd("peek-ready"))[2][0], "FOUND"),
    "peek-delayed": ("I", lambda c, r, t: (
        put_job(r, t, "delayed"), c.cmd("use " + t),
        c.cmd("peek-delayed"))[2][0], "FOUND"),
    "peek-buried": ("I", lambda c, r, t: (
        put_job(r, t, "buried"), c.cmd("use " + t),
        c.cmd("peek-buried"))[2][0], "FOUND"),
    "stats-job": ("I", lambda c, r, t: c.cmd(
        "stats-job %d" % put_job(r, t))[0], "OK"),
    "stats-tube": ("I", lambda c, r, t: (put_job(r, t),
                                         c.cmd("stats-tube " + t))[1][0],
                   "OK"),
    "list-jobs": ("I", lambda c, r, t: (put_job(r, t), c.cmd(
        "list-jobs %s ready 10" % t))[1][0], "OK"),
    "pause-tube": ("A", lambda c, r, t: (put_job(r, t), c.cmd(
        "pause-tube %s 0" % t))[1][0], "PAUSED"),
    "clear-tube": ("A", lambda c, r, t: (put_job(r, t), c.cmd(
        "clear-tube " + t))[1][0], "CLEARED"),
}

# Commands not about a tube: who may run them.
GLOBAL = {
    "stats": ("I", "OK"),               # any inspect rule
    "list-tubes": ("I", "OK"),
    "list-tube-used": ("*", "USING"),   # the connection's own state
    "list-tubes-watched": ("*", "OK"),
    "rockstalk-snapshot": ("root", None),  # bare admin only
    "rockstalk-backup": ("root", None),    # bare admin only
}

IDENTS = ["prod", "cons", "insp", "tadm", "other", "root"]


def expected(cmd_classes, ident, permitted):
    if ident == "root":
        return True
    return permitted and any(k in CLASS_OF[ident] for k in cmd_classes)


def test_class_tube_matrix(authd):
    s = authd()
    root = Client(s, TOKENS["root"])
    rows, bad = [], []
    for cmd, (classes, run, ok) in MATRIX.items():
        for ident in IDENTS:
            for permitted in (True, False):
                t = "%s.%s.%s" % ("p" if permitted else "f", cmd, ident)
                c = Client(s, TOKENS[ident])
                got = run(c, root, t)
                c.close()
                want = expected(classes, ident, permitted)
                good = got.startswith(ok) if want else got == "DENIED"
                rows.append((cmd, ident, permitted, want, got))
                if not good:
                    bad.append((cmd, ident, permitted, want, got))
    for cmd, (who, ok) in GLOBAL.items():
        for ident in IDENTS:
            c = Client(s, TOKENS[ident])
            got = c.cmd(cmd)[0]
            c.close()
            if who == "*":
                want = True
            elif who == "root":
                want = ident == "root"
            else:
                want = ident == "root" or who in CLASS_OF[ident]
            good = (got != "DENIED") if want and ok is None else (
                got.startswith(ok) if want else got == "DENIED")
            rows.append((cmd, ident, None, want, got))
            if not good:
                bad.append((cmd, ident, None, want, got))
    allowed = sum(1 for r in rows if r[3])
    print("\n[auth matrix] %d cases: %d allowed as expected, %d denied as "
          "expected, %d wrong" % (len(rows), allowed - sum(
              1 for b in bad if b[3]), len(rows) - allowed - sum(
              1 for b in bad if not b[3]), len(bad)))
    for cmd in list(MATRIX) + list(GLOBAL):
        cells = []
        for ident in IDENTS:
            for r in rows:
                if r[0] == cmd and r[1] == ident:
                    cells.append("%s%s:%s" % (
                        ident, {True: "+", False: "-", None: ""}[r[2]],
                        "ok" if r[3] else "DENIED"))
        print("  %-21s %s" % (cmd, " ".join(cells)))
    assert not bad, bad


def test_reserve_considers_only_consumable_tubes(authd):
    s = authd()
    root = Client(s, TOKENS["root"])
    put_job(root, "default")
    c = Client(s, TOKENS["cons"])
    # default (not consumable) left the watch list at auth
    ln, body = c.cmd("list-tubes-watched")
    assert body == b"---\n", body
    assert c.cmd("reserve-with-timeout 0") == ("DENIED", None)  # nothing
    assert c.cmd("ignore default") == ("WATCHING 0", None)  # always allowed
    assert c.cmd("watch p.r") == ("WATCHING 1", None)
    assert c.cmd("reserve-with-timeout 0") == ("TIMED_OUT", None)
    assert c.cmd("peek-ready")[0] == "DENIED"
    assert c.word("put 0 0 10 1", b"x") == "DENIED"
    # the denied put's body was discarded, not run as a command
    assert c.cmd("list-tube-used") == ("USING default", None)
    # an unprivileged reserve blocks on its tubes only
    c.send(b"reserve\r\n")
    put_job(root, "default")
    jid = put_job(root, "p.r")
    assert c.reply() == ("RESERVED %d 3" % jid, b"job")


def test_list_tubes_and_stats_show_only_permitted(authd):
    s = authd()
    root = Client(s, TOKENS["root"])
    for t in ("p.one", "p.two", "f.x", "q.y"):
        put_job(root, t)
    insp = Client(s, TOKENS["insp"])
    ln, body = insp.cmd("list-tubes")
    assert body.decode().split("\n")[1:-1] == ["- p.one", "- p.two"]
    assert insp.cmd("stats-tube f.x") == ("DENIED", None)
    assert insp.cmd("stats-tube p.one")[0].startswith("OK")
    assert insp.cmd("stats-tube p.nothing") == ("NOT_FOUND", None)
    st = stats(insp)
    assert "rockstalk-auth-connections-insp" not in st  # not a superuser
    st = stats(root)
    assert st["rockstalk-auth-connections-insp"] == "1"
    assert st["rockstalk-auth-connections-root"] == "1"
    assert st["rockstalk-auth-connections-prod"] == "0"
    insp.close()
    wait_for(lambda: stats(root)["rockstalk-auth-connections-insp"] == "0",
             what="insp's count back to 0")


def test_metrics(authd):
    mport = free_port()
    s = authd("--metrics", "127.0.0.1:%d" % mport)
    Client(s).send(b"auth nope\r\n")
    prod = Client(s, TOKENS["prod"])  # noqa: F841 (stays open)
    url = "http://127.0.0.1:%d/metrics" % mport

    def scrape():
        return urllib.request.urlopen(url, timeout=5).read().decode()
    wait_for(lambda: "rockstalk_auth_failures_total 1" in scrape(),
             what="auth failures in the metrics")
    text = scrape()
    assert "rockstalk_auth_enabled 1" in text
    assert ('rockstalk_auth_connections{identity="prod",kind="identity"} 1'
            in text)


# --- reload and refusals ------------------------------------------------------

def test_sighup_reload(authd, tmp_path):
    s = authd()
    prod = Client(s, TOKENS["prod"])
    cons = Client(s, TOKENS["cons"])
    assert cons.cmd("watch p.h") == ("WATCHING 1", None)
    other = Client(s, TOKENS["other"])
    assert prod.cmd("use p.h") == ("USING p.h", None)
    # a reserve blocked on p.h when the reload takes p.h away
    waiter = Client(s, TOKENS["cons"])
    assert waiter.cmd("watch p.h") == ("WATCHING 1", None)
    waiter.send(b"reserve-with-timeout 3\r\n")
    root0 = Client(s, TOKENS["root"])
    wait_for(lambda: stats(root0)["current-waiting"] == "1",
             what="the reserve blocked")
    # prod loses p.*, gains h.*; cons loses p.h; other is removed
    text = auth_text([n for n in TOKENS if n != "other"],
                     {"prod": "produce:h.*", "cons": "consume:p.x*"})
    write_auth(tmp_path / "auth", text)
    s.proc.send_signal(signal.SIGHUP)
    assert other.closed(5)
    assert prod.word("put 0 0 10 1", b"x") == "DENIED"  # p.h: no more
    put_job(root0, "p.h")
    assert waiter.reply() == ("TIMED_OUT", None)  # p.h left its watch list
    assert stats(root0)["rockstalk-auth-connections-cons"] == "2"
    assert prod.cmd("use h.a") == ("USING h.a", None)
    assert prod.word("put 0 0 10 1", b"x") == "INSERTED"
    assert cons.cmd("list-tubes-watched")[1] == b"---\n"  # p.h pruned
    assert Client(s).cmd("auth " + TOKENS["other"])[0] == "UNAUTHORIZED"
    # a bad file (exposed, then malformed) keeps the rules in force
    def log():
        s.log.flush()
        return open(s.log.name).read()
    write_auth(tmp_path / "auth", text, mode=0o644)
    s.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "group or others" in log(), what="the mode refusal")
    write_auth(tmp_path / "auth", text + "bad line\n")
    s.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "line 8" in log(), what="the line refusal")
    assert prod.word("put 0 0 10 1", b"x") == "INSERTED"
    r = Client(s, TOKENS["root"])
    st = stats(r)
    assert st["rockstalk-auth-reloads"] == "1"
    text = log()
    assert "keeping the previous auth file" in text
    assert "identity other is gone" in text
    for t in TOKENS.values():
        assert t not in text  # tokens are never logged


def start_fail(*args):
    p = subprocess.run([ROCKSTALKD, "--memory", "-p", str(free_port())] +
                       list(args), capture_output=True, timeout=20)
    assert p.returncode != 0
    return p.stdout.decode() + p.stderr.decode()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_exposed_file_refused(tmp_path, mode):
    p = write_auth(tmp_path / "auth", auth_text(), mode)
    out = start_fail("-l", "127.0.0.1", "--auth-file", p)
    assert "group or others" in out and "chmod 600" in out, out


@pytest.mark.parametrize("text,want", [
    ("a sha256:00 produce:*\n", "line 1:"),
    ("# c\n\nb cert\n", "line 3: b has no rules"),
    ("c cert produce:*\nc cert consume:*\n", "line 2: identity c is defined"),
    ("d cert write:*\n", "line 1: rule 'write:*'"),
    ("", "no identities"),
])
def test_malformed_file_refused(tmp_path, text, want):
    p = write_auth(tmp_path / "auth", text)
    out = start_fail("-l", "127.0.0.1", "--auth-file", p)
    assert want in out, out


def test_missing_file_refused(tmp_path):
    out = start_fail("-l", "127.0.0.1", "--auth-file",
                     str(tmp_path / "none"))
    assert "No such file" in out


def test_plaintext_beyond_loopback(tmp_path, rockstalkd):
    p = write_auth(tmp_path / "auth", auth_text())
    out = start_fail("-l", "0.0.0.0", "--auth-file", p)
    assert "--allow-plaintext-auth" in out, out
    s = rockstalkd("--memory", "-l", "0.0.0.0", "--auth-file", p,
                   "--allow-plaintext-auth")
    assert Client(s, TOKENS["prod"]).cmd("use p.a")[0] == "USING p.a"
    s.log.flush()
    assert "tokens cross the network in the clear" in open(s.log.name).read()


def test_open_beyond_loopback_warns(rockstalkd):
    s = rockstalkd("--memory", "-l", "0.0.0.0")
    s.log.flush()
    log = open(s.log.name).read()
    assert "no --auth-file" in log and "--tls-cert" in log, log


def test_help_names_the_flags():
    out = subprocess.run([ROCKSTALKD, "--help"], capture_output=True,
                         timeout=10).stdout.decode()
    for flag in ("--auth-file", "--auth-unix", "--allow-plaintext-auth",
                 "--max-unauth"):
        assert flag in out


# --- the CLI ----------------------------------------------------------------

def cli(srv, *args, env=None, input=b""):
    e = dict(os.environ)
    e.pop("ROCKSTALK_TOKEN", None)
    e.update(env or {})
    return subprocess.run([CLI, "-p", str(srv.port)] + list(args), env=e,
                          input=input, capture_output=True, timeout=20)


def test_cli_hash_token():
    p = subprocess.run([CLI, "hash-token", "secret1"], capture_output=True)
    assert p.returncode == 0
    assert p.stdout.decode() == digest("secret1") + "\n"
    p = subprocess.run([CLI, "hash-token", "-"], input=b"secret1\n",
                       capture_output=True)
    assert p.stdout.decode() == digest("secret1") + "\n"


def test_cli_token_one_shot_and_script(authd):
    s = authd()
    p = cli(s, "--token", TOKENS["prod"], "-t", "p.c", "put", input=b"hey")
    assert p.returncode == 0 and p.stderr == b"INSERTED 1\n", p
    p = cli(s, "-t", "p.c", "peek-ready",
            env={"ROCKSTALK_TOKEN": TOKENS["insp"]})
    assert p.returncode == 0 and p.stdout == b"hey", p
    p = cli(s, "--token", "wrong", "stats")
    assert p.returncode == 2 and b"refused the token (UNAUTHORIZED)" in \
        p.stderr, p
    assert b"wrong" not in p.stderr
    p = cli(s, "stats")
    assert p.returncode == 1 and b"UNAUTHORIZED" in p.stderr, p
    # script mode (stdin not a terminal): auth first, then every line
    p = cli(s, input=b"use p.c\nput 0 0 10\nmore\n",
            env={"ROCKSTALK_TOKEN": TOKENS["prod"]})
    assert p.returncode == 0 and p.stdout == b"USING p.c\nINSERTED 2\n", p


def test_cli_token_repl_and_top(authd, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    s = authd()
    env = dict(os.environ, HOME=str(tmp_path), TERM="screen")
    env.pop("ROCKSTALK_TOKEN", None)
    c = pexpect.spawn(CLI, ["-p", str(s.port), "--token", TOKENS["insp"]],
                      env=env, timeout=10, dimensions=(30, 100))
    c.expect_exact("(default)> ")
    c.sendline("use p.r")
    c.expect_exact("USING p.r")
    c.sendline("peek-ready")
    c.expect_exact("NOT_FOUND")
    c.sendline("put 0 0 10 1")
    c.sendline("x")
    c.expect_exact("DENIED")
    c.sendline("quit")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    env["ROCKSTALK_TOKEN"] = TOKENS["root"]
    t = pexpect.spawn(CLI, ["-p", str(s.port), "top"], env=env, timeout=10,
                      dimensions=(30, 100))
    t.expect("rockstalk top")
    t.expect("TUBE")
    t.send("q")
    t.expect(pexpect.EOF)
    t.close()
    assert t.exitstatus == 0
    # without a token top gets no stats and says so
    env.pop("ROCKSTALK_TOKEN")
    t = pexpect.spawn(CLI, ["-p", str(s.port), "top"], env=env, timeout=10,
                      dimensions=(30, 100))
    t.expect(pexpect.EOF)
    t.close()
    assert t.exitstatus != 0


# --- cluster mode -----------------------------------------------------------

def test_cluster_needs_certificates_with_auth(tmp_path):
    p = write_auth(tmp_path / "auth", auth_text())
    out = start_fail("-l", "127.0.0.1", "--auth-file", p, "--cluster",
                     "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
                     "--node-id", "1")
    assert "--auth-file in cluster mode needs --cluster-cert" in out, out


def test_cluster_follower_relays_the_handshake(tmp_path):
    """A follower relays its clients' bytes to the leader, which runs the
    handshake and the checks: a token works through a follower. A client
    of the follower's unix socket is trusted as the leader's own unix
    clients are (the follower says so on its authenticated link), while
    its TCP clients still need a token."""
    from cluster import Cluster
    p = write_auth(tmp_path / "auth", auth_text())
    c = Cluster(tmp_path / "c", flags=["--auth-file", p], start=False)
    for nd in c.nodes:
        nd.flags = ["--listen", "unix:%s/n%d.sock" % (tmp_path, nd.id)]
        nd.start(wait=False)
    try:
        wait_for(lambda: c.leader() != 0, timeout=20, what="a leader")
        lead = c.leader()
        f = next(nd for nd in c.nodes if nd.id != lead)

        def served():
            try:
                cl = Client(f, TOKENS["prod"])
            except (OSError, EOFError, AssertionError):
                return False
            ok = cl.cmd("use p.cl") == ("USING p.cl", None)
            cl.close()
            return ok
        wait_for(served, timeout=20, what="an authenticated relay")
        cl = Client(f, TOKENS["prod"])
        assert cl.cmd("use p.cl") == ("USING p.cl", None)
        assert cl.word("put 0 0 10 2", b"hi") == "INSERTED"
        assert cl.cmd("use default") == ("DENIED", None)
        bad = Client(f)
        bad.send(b"auth nope\r\n")
        assert bad.line() == "UNAUTHORIZED" and bad.closed()
        pre = Client(f)
        pre.send(b"stats\r\n")
        assert pre.line() == "UNAUTHORIZED" and pre.closed()
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.settimeout(10)
        u.connect("%s/n%d.sock" % (tmp_path, f.id))
        u.sendall(b"use default\r\nput 0 0 10 2\r\nhi\r\n")
        got = b""
        while got.count(b"\r\n") < 2:
            chunk = u.recv(4096)
            assert chunk, got
            got += chunk
        u.close()
        assert got.startswith(b"USING default\r\nINSERTED "), got
        root = Client(c.node(lead), TOKENS["root"])
        st = stats(root)
        assert st["rockstalk-auth-failures"] == "2"
        assert st["rockstalk-auth-connections-prod"] == "1"
    finally:
        c.stop()


def test_reload_prunes_first_of_two_tubes_of_a_waiter(authd, tmp_path):
    """A reserve blocked on p.h and p.x1 when a reload takes p.h (the
    first of its watch list, so p.x1 moves into its place) goes on waiting
    on p.x1 alone: a put there reaches it, and it can wait again."""
    s = authd()
    root = Client(s, TOKENS["root"])
    waiter = Client(s, TOKENS["cons"])
    assert waiter.cmd("watch p.h") == ("WATCHING 1", None)
    assert waiter.cmd("watch p.x1") == ("WATCHING 2", None)
    waiter.send(b"reserve-with-timeout 5\r\n")
    wait_for(lambda: stats(root)["current-waiting"] == "1",
             what="the reserve blocked")
    write_auth(tmp_path / "auth", auth_text(rules={"cons": "consume:p.x*"}))
    s.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: stats(root)["rockstalk-auth-reloads"] == "1",
             what="the reload")
    put_job(root, "p.h")  # no longer watched: stays ready
    jid = put_job(root, "p.x1")
    assert waiter.reply() == ("RESERVED %d 3" % jid, b"job")
    assert waiter.cmd("list-tubes-watched")[1] == b"---\n- p.x1\n"
    waiter.send(b"reserve-with-timeout 5\r\n")
    wait_for(lambda: stats(root)["current-waiting"] == "1",
             what="the second reserve blocked")
    jid = put_job(root, "p.x1")
    assert waiter.reply() == ("RESERVED %d 3" % jid, b"job")
