"""The rockstalk command-line client ($ROCKSTALK_CLI, default ./rockstalk):
one-shot commands (output and exit status) against rockstalkd and Debian's
beanstalkd 1.12, put bodies from stdin and files, the operator helpers, the
extension replies against a tiny fake server, the REPL through a
pseudo-terminal, `top` rendered in a fixed-size pseudo-terminal (read back
through pyte, a terminal emulator), and the error messages."""
import os
import re
import socket
import subprocess
import threading
import time

import pexpect
import pyte
import pytest

from conftest import ROCKSTALKD, ROOT, free_port, wait_for

CLI = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALK_CLI", "rockstalk")))

# top's screen size in the tests, and a terminal type pyte renders fully
# (xterm's terminfo lets ncurses use REP, "repeat character", which pyte
# lacks).
ROWS, COLS = 30, 100
TERM = "screen"


def cli(server, *args, input=b"", timeout=20):
    """Runs rockstalk against server; returns the CompletedProcess (bytes)."""
    return subprocess.run([CLI, "-p", str(server.port)] + list(args),
                          input=input, capture_output=True, timeout=timeout)


def ok(server, *args, input=b""):
    p = cli(server, *args, input=input)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def put(server, body, *args):
    """Puts body (bytes) with extra args; returns the new job's id."""
    p = ok(server, *args, "put", input=body)
    m = re.fullmatch(rb"INSERTED (\d+)\n", p.stderr)
    assert m, p.stderr
    return int(m.group(1))


def stat(server, *args):
    """A YAML stats reply as a dict of raw strings."""
    out = ok(server, *args).stdout.decode()
    return dict(re.findall(r"^([\w-]+): (.*)$", out, re.M))


def converse(c, data, nlines):
    """Sends data on socket c and returns the first nlines reply lines'
    bytes (replies of a durable server arrive in pieces)."""
    c.sendall(data)
    got = b""
    while got.count(b"\r\n") < nlines:
        chunk = c.recv(4096)
        assert chunk, got
        got += chunk
    return got


@pytest.fixture(params=["rockstalkd", "beanstalkd"])
def server(request):
    """Each one-shot test runs against both servers."""
    return request.getfixturevalue(request.param)()


# --- one-shot commands ---------------------------------------------------


def test_put_stdin_peek(server):
    jid = put(server, b"hello world")
    p = ok(server, "peek", str(jid))
    assert p.stdout == b"hello world"
    assert p.stderr == b"FOUND %d 11\n" % jid
    p = ok(server, "-v", "peek", str(jid))
    assert p.stdout == b"FOUND %d 11\nhello world" % jid and p.stderr == b""


def test_put_file_binary_60k(server, tmp_path):
    body = bytes(range(256)) * 240  # 60 KiB: NULs, CR, LF, high bytes
    f = tmp_path / "body.bin"
    f.write_bytes(body)
    p = ok(server, "put", str(f))
    jid = int(p.stderr.split()[1])
    p = ok(server, "peek", str(jid))
    assert p.stdout == body
    assert p.stderr == b"FOUND %d %d\n" % (jid, len(body))
    p = ok(server, "reserve")
    assert p.stdout == body
    assert p.stderr == b"RESERVED %d %d\n" % (jid, len(body))
    # put - reads stdin; an empty body is a job too.
    jid = int(ok(server, "put", "-", input=b"").stderr.split()[1])
    assert ok(server, "peek", str(jid)).stderr == b"FOUND %d 0\n" % jid


def test_put_numbers_and_tube(server, tmp_path):
    f = tmp_path / "b"
    f.write_bytes(b"abc")
    p = ok(server, "-t", "emails", "put", "7", "0", "30", str(f))
    jid = int(p.stderr.split()[1])
    st = stat(server, "stats-job", str(jid))
    assert (st["tube"], st["pri"], st["ttr"]) == ("emails", "7", "30")
    assert stat(server, "stats-tube", "emails")["current-jobs-ready"] == "1"
    # Without -t, reserve watches only default: nothing there.
    p = cli(server, "reserve-with-timeout", "0")
    assert (p.returncode, p.stderr, p.stdout) == (1, b"TIMED_OUT\n", b"")
    p = ok(server, "-t", "emails", "reserve-with-timeout", "0")
    assert p.stdout == b"abc" and p.stderr == b"RESERVED %d 3\n" % jid


def test_every_command(server):
    """Each protocol command once: its status line and exit status."""
    a = put(server, b"job-a")
    b = put(server, b"job-b", "-t", "t2")

    def expect(code, status, *args, out=None):
        p = cli(server, *args)
        assert (p.returncode, p.stderr) == (code, status), (args, p)
        if out is not None:
            assert p.stdout == out, args

    expect(0, b"USING foo\n", "use", "foo")
    expect(0, b"WATCHING 2\n", "watch", "foo")
    expect(1, b"NOT_IGNORED\n", "ignore", "default")
    expect(0, b"USING default\n", "list-tube-used")
    expect(0, b"OK 14\n", "list-tubes-watched", out=b"---\n- default\n")
    expect(0, b"FOUND %d 5\n" % a, "peek-ready", out=b"job-a")
    expect(1, b"NOT_FOUND\n", "peek-delayed")
    expect(1, b"NOT_FOUND\n", "peek-buried")
    expect(0, b"RESERVED %d 5\n" % a, "reserve-job", str(a), out=b"job-a")
    expect(1, b"NOT_FOUND\n", "touch", str(a))  # not reserved by this conn
    expect(0, b"RESERVED %d 5\n" % b, "reserve-job", str(b), out=b"job-b")
    expect(1, b"NOT_FOUND\n", "release", str(b), "0", "0")
    expect(1, b"NOT_FOUND\n", "bury", str(b), "0")
    # reserve-job then bury needs one connection: -t + the REPL's script
    # mode does that (see test_script_mode); here kick-job a delayed one.
    c = server.connect()
    d = int(converse(c, b"put 0 100 10 1\r\nx\r\n", 1).split()[1])
    c.close()
    expect(0, b"FOUND %d 1\n" % d, "peek-delayed", out=b"x")
    expect(0, b"KICKED\n", "kick-job", str(d))
    expect(1, b"NOT_FOUND\n", "kick-job", str(d))
    expect(0, b"KICKED 0\n", "kick", "10")
    expect(0, b"DELETED\n", "delete", str(d))
    expect(1, b"NOT_FOUND\n", "delete", str(d))
    expect(1, b"NOT_FOUND\n", "stats-job", str(d))
    expect(1, b"NOT_FOUND\n", "stats-tube", "nosuchtube")
    expect(0, b"PAUSED\n", "pause-tube", "t2", "0")
    p = cli(server, "list-tubes")
    assert p.returncode == 0 and b"- t2\n" in p.stdout
    st = stat(server, "stats")
    assert int(st["total-jobs"]) == 3 and int(st["cmd-put"]) == 3
    assert stat(server, "stats-tube", "t2")["cmd-pause-tube"] == "1"


def test_kick_and_peek_helpers(server):
    c = server.connect()
    assert converse(c, b"use work\r\nput 0 0 10 2\r\nb1\r\n", 2) == \
        b"USING work\r\nINSERTED 1\r\n"
    c.sendall(b"watch work\r\nreserve\r\nbury 1 5\r\n")
    wait_for(lambda: stat(server, "stats-tube", "work")[
        "current-jobs-buried"] == "1", what="a buried job")
    p = ok(server, "peek", "work", "buried")
    assert (p.stdout, p.stderr) == (b"b1", b"FOUND 1 2\n")
    p = cli(server, "peek", "work", "ready")
    assert (p.returncode, p.stderr) == (1, b"NOT_FOUND\n")
    p = cli(server, "peek", "work", "reserved")
    assert p.returncode == 2 and b"ready, delayed or buried" in p.stderr
    assert ok(server, "kick", "work").stderr == b"KICKED 1\n"
    assert ok(server, "kick", "work", "3").stderr == b"KICKED 0\n"
    assert stat(server, "stats-tube", "work")["current-jobs-ready"] == "1"
    c.close()


def test_tubes_table(server):
    c = server.connect()
    converse(c, b"use work\r\n" + b"put 0 0 10 1\r\nx\r\n" +
             b"put 2000 0 10 1\r\nx\r\n" * 3 + b"put 5 60 10 1\r\nx\r\n", 6)
    p = ok(server, "tubes")
    lines = p.stdout.decode().splitlines()
    assert lines[0].split() == ["TUBE", "READY", "URGENT", "RESERVED",
                                "DELAYED", "BURIED", "WAITING", "WATCHING"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:]}
    assert rows["work"] == ["4", "1", "0", "1", "0", "0", "0"]
    assert rows["default"][:5] == ["0", "0", "0", "0", "0"]
    c.close()


def test_extensions_unsupported(beanstalkd):
    """beanstalkd 1.12 lacks the extensions: a clear message and exit 2."""
    server = beanstalkd()
    for args in (["list", "default", "ready"],
                 ["list-jobs", "default", "buried", "5"],
                 ["-y", "clear", "default"], ["clear-tube", "default"],
                 ["reserve-batch", "3", "0"]):
        p = cli(server, *args)
        assert p.returncode == 2, (args, p)
        name = "reserve-batch" if "reserve-batch" in args else (
            "clear-tube" if "clear" in " ".join(args) else "list-jobs")
        assert p.stderr == (b"rockstalk: this server does not support %s "
                            b"(a rockstalk extension)\n" % name.encode())
    # put-unique must not send its body to a server that would run it as
    # commands: here the body would delete job 1.
    jid = put(server, b"keep me")
    p = cli(server, "put-unique", "k1", input=b"delete %d" % jid)
    assert p.returncode == 2 and b"does not support put-unique" in p.stderr
    assert ok(server, "peek", str(jid)).stdout == b"keep me"


def test_extensions_rockstalkd(rockstalkd):
    """Against rockstalkd the extension commands and helpers work."""
    server = rockstalkd()
    a = put(server, b"one")
    b = put(server, b"two")
    p = ok(server, "list", "default", "ready")
    assert p.stdout == b"---\n- %d\n- %d\n" % (a, b), p
    p = ok(server, "list-jobs", "default", "ready", "1")
    assert p.stdout == b"---\n- %d\n" % a
    p = ok(server, "reserve-batch", "5", "0")
    assert p.stderr == (b"RESERVED_BATCH 2\nRESERVED %d 3\nRESERVED %d 3\n"
                        % (a, b)), p
    assert p.stdout == b"onetwo"
    p = ok(server, "put-unique", "k1", input=b"u")
    q = ok(server, "put-unique", "k1", input=b"again")
    assert p.stderr == q.stderr and p.stderr.startswith(b"INSERTED ")
    p = ok(server, "-y", "clear", "default")
    # the one-shot reserve-batch connection closed: its jobs came back
    assert p.stderr == b"CLEARED 3\n", p


def test_clear_needs_confirmation(rockstalkd):
    s = rockstalkd()
    p = cli(s, "clear", "default")  # stdin is not a terminal, no -y
    assert p.returncode == 2
    assert p.stderr == (b"rockstalk: clear needs a confirmation on a "
                        b"terminal, or -y\n")
    p = cli(s, "-y", "clear", "nosuchtube")
    assert (p.returncode, p.stderr) == (1, b"NOT_FOUND\n")


def test_unix_socket(tmp_path):
    path = str(tmp_path / "rs.sock")
    d = subprocess.Popen([ROCKSTALKD, "-l", "unix:" + path, "-b",
                          str(tmp_path / "d")], stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(path), what="the unix socket")
        wait_for(lambda: subprocess.run(
            [CLI, "-s", "unix:" + path, "stats"],
            capture_output=True).returncode == 0, what="a connection")
        p = subprocess.run([CLI, "-s", "unix:" + path, "put"], input=b"u",
                           capture_output=True)
        assert (p.returncode, p.stderr) == (0, b"INSERTED 1\n")
    finally:
        d.terminate()
        d.wait(10)


# --- errors ------------------------------------------------------------------


def test_errors(rockstalkd, tmp_path):
    s = rockstalkd()

    def fails(msg, *args, code=2):
        p = cli(s, *args)
        assert (p.returncode, p.stdout, p.stderr) == (
            code, b"", b"rockstalk: " + msg + b"\n"), args

    fails(b"unknown command 'frob' (try: rockstalk help)", "frob")
    fails(b"wrong number of arguments; usage: delete ID", "delete")
    fails(b"wrong number of arguments; usage: delete ID", "delete", "1", "2")
    fails(b"wrong number of arguments; usage: tubes", "tubes", "x")
    fails(b"not a number: 'x1'", "delete", "x1")
    fails(b"invalid argument 'a b': no spaces allowed", "use", "a b")
    fails(b"unknown job state 'gone' (ready, delayed, buried, reserved)",
          "list-jobs", "t", "gone", "1")
    fails(b"cannot read %s: No such file or directory"
          % str(tmp_path / "nope").encode(), "put", str(tmp_path / "nope"))
    fails(b"cannot read %s: Is a directory" % str(tmp_path).encode(),
          "put", str(tmp_path))
    fails(b"put takes PRI DELAY TTR together, then optionally FILE",
          "put", "1", "2")
    fails(b"-p takes a port number (1-65535)", "-p", "x")
    p = subprocess.run([CLI, "-q"], capture_output=True)
    assert p.returncode == 2 and b"bad option -q" in p.stderr
    p = subprocess.run([CLI, "-s", "/tmp/x", "stats"], capture_output=True)
    assert (p.returncode, p.stderr) == (2, b"rockstalk: -s takes unix:PATH\n")
    p = subprocess.run([CLI, "drain"], capture_output=True)
    assert p.returncode == 2 and b"drain is not offered" in p.stderr


def test_no_server():
    port = free_port()
    p = subprocess.run([CLI, "-p", str(port), "stats"], capture_output=True)
    assert (p.returncode, p.stdout) == (2, b"")
    assert p.stderr == (b"rockstalk: cannot connect to 127.0.0.1:%d: "
                        b"Connection refused\n" % port)
    p = subprocess.run([CLI, "-s", "unix:/nonexistent/sock", "stats"],
                       capture_output=True)
    assert p.stderr == (b"rockstalk: cannot connect to unix:/nonexistent/"
                        b"sock: No such file or directory\n")


def test_help_lists_commands():
    p = subprocess.run([CLI, "help"], capture_output=True)
    assert p.returncode == 0
    for cmd in (b"tubes", b"top", b"peek TUBE STATE", b"kick TUBE [N]",
                b"clear TUBE", b"reserve-with-timeout SECONDS", b"list-jobs"):
        assert cmd in p.stdout
    p = subprocess.run([CLI, "--help"], capture_output=True)
    assert p.returncode == 0 and b"-s unix:PATH" in p.stdout


# --- extensions against a fake server -------------------------------------


class FakeServer:
    """Answers each command line with a canned reply: replies maps a verb to
    bytes; put-unique also reads its body into self.bodies. Records every
    line received in self.lines. hangup: close each connection after its
    first reply."""

    def __init__(self, replies, hangup=False):
        self.replies, self.lines, self.bodies = replies, [], []
        self.hangup = hangup
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as f:
                for line in f:
                    line = line.rstrip(b"\r\n")
                    self.lines.append(line)
                    words = line.split()
                    if words[0] == b"put-unique":
                        self.bodies.append(f.read(int(words[-1]) + 2))
                    conn.sendall(self.replies[words[0].decode()])
                    if self.hangup:
                        break

    def close(self):
        self.sock.close()


@pytest.fixture
def fake():
    servers = []

    def start(replies, hangup=False):
        servers.append(FakeServer(replies, hangup))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def test_fake_list_jobs_and_clear(fake):
    yaml = b"---\n- 3\n- 9\n"
    s = fake({"list-jobs": b"OK %d\r\n%s\r\n" % (len(yaml), yaml),
              "clear-tube": b"CLEARED 5\r\n",
              "stats-tube": b"OK 8\r\n---\nx: 1\r\n"})
    p = cli(s, "list", "work", "buried", "2")
    assert (p.returncode, p.stdout, p.stderr) == (0, yaml, b"OK 12\n")
    p = cli(s, "list", "work", "ready")
    assert p.returncode == 0
    p = cli(s, "-y", "clear", "work")
    assert (p.returncode, p.stderr) == (0, b"CLEARED 5\n")
    p = cli(s, "clear-tube", "work")
    assert (p.returncode, p.stderr) == (0, b"CLEARED 5\n")
    assert s.lines == [b"list-jobs work buried 2", b"list-jobs work ready 1000",
                       b"stats-tube work", b"clear-tube work",
                       b"clear-tube work"]
    p = cli(s, "list", "work", "ready", "1001")
    assert p.returncode == 2 and b"COUNT is 1 to 1000" in p.stderr


def test_fake_reserve_batch(fake):
    s = fake({"reserve-batch": b"RESERVED_BATCH 2\r\nRESERVED 4 3\r\nabc\r\n"
              b"RESERVED 5 4\r\n\r\n\x00\xff\r\n"})
    p = cli(s, "reserve-batch", "2", "0")
    assert p.returncode == 0
    assert p.stderr == b"RESERVED_BATCH 2\nRESERVED 4 3\nRESERVED 5 4\n"
    assert p.stdout == b"abc\r\n\x00\xff"
    p = cli(s, "-v", "reserve-batch", "2", "0")
    assert p.stdout == (b"RESERVED_BATCH 2\nRESERVED 4 3\nabcRESERVED 5 4\n"
                        b"\r\n\x00\xff")
    assert s.lines == [b"reserve-batch 2 0"] * 2


@pytest.mark.parametrize("reply,code,status", [
    (b"TIMED_OUT\r\n", 1, b"TIMED_OUT\n"),
    (b"DEADLINE_SOON\r\n", 1, b"DEADLINE_SOON\n"),
    (b"RESERVED_BATCH 0\r\n", 0, b"RESERVED_BATCH 0\n"),
])
def test_fake_reserve_batch_replies(fake, reply, code, status):
    p = cli(fake({"reserve-batch": reply}), "reserve-batch", "5", "1")
    assert (p.returncode, p.stderr, p.stdout) == (code, status, b"")


@pytest.mark.parametrize("reply,msg", [
    (b"RESERVED_BATCH 1\r\nRESERVED 4 3\r\nabcd\r\n", b"lacks its CRLF"),
    (b"RESERVED_BATCH 2\r\nRESERVED 4 1\r\na\r\nFOUND 1 1\r\nb\r\n",
     b"malformed reply"),
    (b"RESERVED_BATCH 1\r\n", b"connection closed by"),
    (b"RESERVED_BATCH x\r\n", b"malformed reply"),
])
def test_fake_bad_framing(fake, reply, msg):
    s = fake({"reserve-batch": reply}, hangup=True)
    p = cli(s, "reserve-batch", "2", "0")
    assert p.returncode == 2 and msg in p.stderr, p.stderr


def test_fake_put_unique(fake, tmp_path):
    stats = b"---\nrockstalk-cmd-put-unique: 0\n"
    s = fake({"put-unique": b"INSERTED 9\r\n",
              "stats": b"OK %d\r\n%s\r\n" % (len(stats), stats)})
    f = tmp_path / "b"
    f.write_bytes(b"a\r\nb")
    p = cli(s, "put-unique", "order-17", "3", "0", "60", str(f))
    assert (p.returncode, p.stderr) == (0, b"INSERTED 9\n")
    p = cli(s, "put-unique", "order-18", input=b"xyz")
    assert (p.returncode, p.stderr) == (0, b"INSERTED 9\n")
    assert s.lines == [b"stats", b"put-unique order-17 3 0 60 4",
                       b"stats", b"put-unique order-18 1024 0 60 3"]
    assert s.bodies == [b"a\r\nb\r\n", b"xyz\r\n"]


# --- REPL ----------------------------------------------------------------------


def spawn(args, home, **kw):
    env = dict(os.environ, HOME=str(home), TERM=TERM)
    return pexpect.spawn(CLI, args, env=env, timeout=10,
                         dimensions=(ROWS, COLS), **kw)


def test_repl(rockstalkd, tmp_path):
    s = rockstalkd()
    port = str(s.port)
    c = spawn(["-p", port], tmp_path)
    c.expect_exact("127.0.0.1:%s (default)> " % port)
    c.sendline("use jobs")
    c.expect_exact("USING jobs")
    c.expect_exact("(jobs)> ")
    c.sendline("put 5 0 60")
    c.expect_exact("body> ")
    c.send("two words\r\r\n")  # CRLF typed: the CR is not part of the body
    c.expect(r"INSERTED (\d+)")
    jid = int(c.match.group(1))
    c.sendline("put 1 0 60 3")
    c.sendline("abcd")
    c.expect_exact("rockstalk: the body is 4 bytes, not 3")
    c.sendline("peek %d" % jid)
    c.expect_exact("FOUND %d 9\r\ntwo words\r\n" % jid)
    c.sendline("stats-job %d" % jid)
    c.expect_exact("tube: jobs")
    c.sendline("peek 999")
    c.expect_exact("NOT_FOUND")
    c.sendline("frob")
    c.expect_exact("rockstalk: unknown command 'frob'")
    c.sendline("help")
    c.expect_exact("Operator commands:")
    c.expect_exact("put [PRI DELAY TTR] takes the job body from the next line")
    c.sendline("tubes")
    c.expect(r"jobs +1 +1 +0")
    c.sendline("quit")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    hist = (tmp_path / ".rockstalk_history").read_text()
    assert "use" in hist and "peek" in hist
    # Line editing: a new session recalls history with the up arrow.
    c = spawn(["-p", port], tmp_path)
    c.expect_exact("(default)> ")
    c.send("\x1b[A")  # up: "quit"
    c.send("\x1b[A")  # up: "tubes"
    c.send("\r")
    c.expect(r"jobs +1 +1 +0")
    c.sendeof()
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0


def test_repl_binary_body_readable(rockstalkd, tmp_path):
    s = rockstalkd()
    c = s.connect()
    assert converse(c, b"put 0 0 10 4\r\na\x00\x01\xff\r\n", 1) == \
        b"INSERTED 1\r\n"
    r = spawn(["-p", str(s.port)], tmp_path)
    r.expect_exact("> ")
    r.sendline("peek 1")
    r.expect_exact("FOUND 1 4\r\na\\x00\\x01\\xff\r\n")
    r.sendline("exit")
    r.expect(pexpect.EOF)
    c.close()


def test_repl_clear_confirmation(fake, tmp_path):
    s = fake({"clear-tube": b"CLEARED 2\r\n",
              "stats-tube": b"OK 30\r\n---\ncurrent-jobs-ready: 2\nx: 1\r\n"})
    c = spawn(["-p", str(s.port)], tmp_path)
    c.expect_exact("> ")
    c.sendline("clear work")
    c.expect_exact("delete every job in tube 'work' (2 ready, 0 delayed, "
                   "0 buried, 0 reserved)? [y/N] ")
    c.sendline("n")
    c.expect_exact("rockstalk: not cleared")
    c.sendline("clear work")
    c.expect_exact("[y/N] ")
    c.sendline("y")
    c.expect_exact("CLEARED 2")
    c.sendline("quit")
    c.expect(pexpect.EOF)
    assert s.lines == [b"stats-tube work", b"stats-tube work",
                       b"clear-tube work"]


def test_script_mode(server):
    """No command and stdin not a terminal: one command per line, one
    connection, CRLF line ends accepted."""
    script = (b"use q\r\nput 3 0 60\r\nbody one\r\nwatch q\r\n"
              b"reserve-with-timeout 0\r\nbury 1 7\r\nkick 1\nstats-job 1\n")
    p = cli(server, input=script)
    assert p.returncode == 0, p
    out = p.stdout.decode()
    assert out.startswith("USING q\nINSERTED 1\nWATCHING 2\n"
                          "RESERVED 1 8\nbody one\nBURIED\nKICKED 1\nOK ")
    assert "state: ready" in out and "pri: 7" in out and "kicks: 1" in out


# --- top -----------------------------------------------------------------------


class Screen:
    """rockstalk top in a ROWS x COLS pseudo-terminal, read through pyte."""

    def __init__(self, port, home):
        self.proc = spawn(["-p", str(port), "top"], home)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)

    def pump(self, quiet=0.3):
        """Feeds pyte what top wrote; returns False once top has been quiet
        for quiet seconds, so the screen holds a whole frame."""
        try:
            self.stream.feed(self.proc.read_nonblocking(65536, timeout=quiet))
            return True
        except pexpect.TIMEOUT:
            return False

    def until(self, pred, what, timeout=10):
        """Waits for a whole frame for which pred(display) holds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.pump() and pred(self.screen.display):
                return self.screen.display
        raise AssertionError("timed out waiting for " + what)

    def row(self, tube):
        for line in self.screen.display:
            if line.split()[:1] == [tube]:
                return line.split()[1:]
        return None


def load_known_state(s):
    """Tube work: 3 ready (1 urgent), 1 buried, 1 delayed, 1 reserved; a
    connection watching work. Returns the connection holding them."""
    c = s.connect()
    converse(c, b"use work\r\nwatch work\r\n" +
             b"put 2000 0 60 1\r\nx\r\n" * 2 +
             b"reserve\r\nreserve\r\nbury 2 9\r\n" +
             b"put 0 0 60 1\r\nx\r\n" + b"put 2000 0 60 1\r\nx\r\n" * 2 +
             b"put 5 300 60 1\r\nx\r\n", 13)
    return c


def test_top(rockstalkd, tmp_path):
    s = rockstalkd()
    c = load_known_state(s)
    t = Screen(s.port, tmp_path)
    d = t.until(lambda d: "work" in "".join(d), "top's first frame")
    assert d[0].startswith("rockstalk top")
    assert "durability fsync" in d[2]
    t.until(lambda d: t.row("work") is not None and "jobs: 3 ready" in
            "".join(d), "the work row")
    d = t.screen.display
    assert "jobs: 3 ready (1 urgent), 1 reserved, 1 delayed, 1 buried; 6 " \
           "total" in d[3]
    assert d[4].startswith("connections: 2 (1 producers, 1 workers")
    hdr = next(ln for ln in d if ln.startswith("TUBE"))
    assert hdr.split() == ["TUBE", "READY", "URGENT", "RESERVED", "DELAYED",
                           "BURIED", "WAITING", "WATCHING", "PUTS/S",
                           "DELS/S"]
    assert t.row("work")[:7] == ["3", "1", "1", "1", "1", "0", "1"]
    # Rates: 20 puts into work show up within the next frames.
    p = s.connect()
    p.sendall(b"use work\r\n" + b"put 2000 0 60 1\r\ny\r\n" * 20)
    t.until(lambda d: t.row("work") and t.row("work")[0] == "23" and
            t.row("work")[7] != "-" and float(t.row("work")[7]) > 0,
            "puts/s of work")  # "-": no earlier frame to take a rate from
    assert re.search(r"per second: [\d.]+ puts", "".join(t.screen.display))
    # Sorting: by name, default first; key 2 sorts by READY, work first.
    names = lambda: [ln.split()[0] for ln in t.screen.display  # noqa: E731
                     if ln.split()[:1] in (["work"], ["default"])]
    assert names() == ["default", "work"]
    t.proc.send("2")
    t.until(lambda d: names() == ["work", "default"] and
            "sort: ready" in d[1], "sort by ready")
    t.proc.send("r")
    t.until(lambda d: names() == ["default", "work"] and
            "(reversed)" in d[1], "reversed")
    t.proc.send("q")
    t.proc.expect(pexpect.EOF)
    t.proc.close()
    assert t.proc.exitstatus == 0
    p.close()
    c.close()


def test_top_beanstalkd_ctrl_c(beanstalkd, tmp_path):
    s = beanstalkd()
    t = Screen(s.port, tmp_path)
    d = t.until(lambda d: "durability" in d[2], "top's first frame")
    assert "durability - (not rockstalkd)" in d[2]
    assert "syncs" in d[5] and "us each" not in d[5]
    t.until(lambda d: t.row("default") is not None, "the default row")
    t.proc.send("\x03")
    t.proc.expect(pexpect.EOF)
    t.proc.close()
    assert t.proc.exitstatus == 0


def test_top_resize(rockstalkd, tmp_path):
    s = rockstalkd()
    t = Screen(s.port, tmp_path)
    t.until(lambda d: t.row("default") is not None, "the first frame")
    t.screen.resize(20, 120)
    t.proc.setwinsize(20, 120)
    t.until(lambda d: t.row("default") is not None and
            len(d) == 20, "a frame at 120 columns")
    t.proc.send("q")
    t.proc.expect(pexpect.EOF)


def test_top_needs_terminal(rockstalkd):
    p = cli(rockstalkd(), "top")
    assert p.returncode == 2
    assert p.stderr == (b"rockstalk: top needs a terminal "
                        b"(try: rockstalk tubes)\n")


def test_server_gone_mid_session(rockstalkd, tmp_path):
    s = rockstalkd()
    t = Screen(s.port, tmp_path)
    t.until(lambda d: t.row("default") is not None, "the first frame")
    s.stop()
    t.proc.expect(pexpect.EOF, timeout=10)
    t.proc.close()
    assert t.proc.exitstatus == 2
    assert "connection closed by 127.0.0.1:%d" % s.port in \
        t.proc.before.decode()
