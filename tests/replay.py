#!/usr/bin/python3
"""Replay protocol exchange files (protocol/exchanges/*.txt) against a
beanstalkd-compatible server and report every mismatch.

The file format is defined in protocol/exchanges/README.md. In short:

    # comment
    1> put 0 0 1 5\\r\\nhello\\r\\n     connection 1 sends these bytes (no implicit CRLF)
    1< INSERTED 1\\r\\n                 connection 1 must receive exactly these bytes
    1~ OK \\d+\\r\\n---\\n.*            one framed reply must fully match this regex
    + continuation\\n                  appended to the previous >, >>, < or ~ step
    1>> use foo\\r\\n                  send one byte per write
    1 silent 0.5                      nothing may arrive on 1 for 0.5 s
    1 eof                             the server must close connection 1
    1 close                           the client closes 1 (next use reconnects)
    1 shutdown                        the client half-closes 1 (SHUT_WR)
    sleep 1.2                         wait

Library use:

    from replay import parse_file, run_file
    mismatches = run_file("protocol/exchanges/put.txt", "127.0.0.1", 11300)

CLI:

    /usr/bin/python3 tests/replay.py --port 11300 protocol/exchanges/put.txt
    /usr/bin/python3 tests/replay.py \\
        --server '/usr/bin/beanstalkd -l 127.0.0.1 -p {port}' \\
        protocol/exchanges/*.txt

Every exchange file assumes a fresh server (job ids start at 1, stats
counters at 0). With --port all files go to the same server, so give one
file at a time; --server starts a fresh server for each file.
"""
import argparse
import os
import re
import select
import shlex
import socket
import ssl
import subprocess
import sys
import tempfile
import time

DEFAULT_TIMEOUT = 2.0   # how long a missing reply / EOF is waited for
SETTLE = 0.05           # grace for trailing bytes after a mismatch
END_CHECK = 0.1         # how long to look for unexpected bytes at the end
BYTEWISE_GAP = 0.002    # pause between one-byte writes

# A framed reply: the status line, then for these three forms n+2 more bytes.
FRAMED = re.compile(rb"(?:OK|RESERVED \d+|FOUND \d+) (\d+)\r\n")


class ParseError(Exception):
    pass


class Step:
    """One line (plus its + continuations) of an exchange file."""

    def __init__(self, path, lineno, conn, op, arg):
        self.path, self.lineno, self.conn, self.op = path, lineno, conn, op
        self.parts = []
        self.part_lines = [lineno]
        self.arg = arg  # seconds for silent/sleep

    @property
    def data(self):
        return b"".join(self.parts)

    def __repr__(self):
        return "%s:%d %s%s %r" % (os.path.basename(self.path), self.lineno,
                                 self.conn or "", self.op, self.data or self.arg)


class Mismatch:
    def __init__(self, step, expected, got, note=""):
        self.path = step.path if step else "?"
        self.lineno = step.lineno if step else 0
        self.conn = step.conn if step else None
        self.expected, self.got, self.note = expected, got, note

    def __str__(self):
        where = "%s:%d" % (self.path, self.lineno)
        if self.conn is not None:
            where += " (connection %s)" % self.conn
        s = "%s: mismatch\n  expected: %s\n  got:      %s" % (
            where, self.expected, self.got)
        if self.note:
            s += "\n  note:     %s" % self.note
        return s

    __repr__ = __str__


def show(b):
    """Render bytes for a report: printable ASCII as is, the rest escaped."""
    if b is None:
        return "(nothing)"
    out = []
    for c in b:
        if c == 0x5C:
            out.append("\\\\")
        elif c == 0x0D:
            out.append("\\r")
        elif c == 0x0A:
            out.append("\\n")
        elif c == 0x09:
            out.append("\\t")
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    return '"' + "".join(out) + '"'


_REPEAT = re.compile(r"\\\[([^\]*]+)\*(\d+)\]")


def unescape(text, path="?", lineno=0):
    """Decode the data escapes: \\r \\n \\t \\0 \\\\ \\xHH and \\[STR*N]."""
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out += c.encode("latin-1")
            i += 1
            continue
        if i + 1 >= n:
            raise ParseError("%s:%d: dangling backslash" % (path, lineno))
        e = text[i + 1]
        if e in "rnt0\\":
            out += {"r": b"\r", "n": b"\n", "t": b"\t", "0": b"\0",
                    "\\": b"\\"}[e]
            i += 2
        elif e == "x":
            h = text[i + 2:i + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{2}", h):
                raise ParseError("%s:%d: bad \\x escape" % (path, lineno))
            out.append(int(h, 16))
            i += 4
        elif e == "[":
            m = _REPEAT.match(text, i)
            if not m:
                raise ParseError("%s:%d: bad \\[STR*N] repeat" % (path, lineno))
            out += unescape(m.group(1), path, lineno) * int(m.group(2))
            i = m.end()
        else:
            raise ParseError("%s:%d: unknown escape \\%s" % (path, lineno, e))
    return bytes(out)


_DATA_LINE = re.compile(r"(\d+)(>>|>|<|~) (.*)")
_WORD_LINE = re.compile(r"(\d+) (silent|eof|close|shutdown)(?: (.*))?")
_SLEEP_LINE = re.compile(r"sleep (.*)")
_OPS = {">": "send", ">>": "bytewise", "<": "expect", "~": "match"}


def _seconds(s, path, lineno):
    try:
        v = float(s)
    except (TypeError, ValueError):
        raise ParseError("%s:%d: expected a number of seconds" % (path, lineno))
    if v < 0 or v > 30:
        raise ParseError("%s:%d: seconds out of range" % (path, lineno))
    return v


def parse_text(text, path="<string>"):
    """Parse an exchange file's text into a list of Steps."""
    steps = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            raise ParseError("%s:%d: CR at end of line (write \\r)" %
                             (path, lineno))
        if line.strip() == "" or line.startswith("#"):
            continue
        if line != line.rstrip(" \t"):
            raise ParseError("%s:%d: trailing whitespace (write \\x20)" %
                             (path, lineno))
        if line.startswith("+ "):
            if not steps or not steps[-1].parts:
                raise ParseError("%s:%d: + continues no data line" %
                                 (path, lineno))
            prev = steps[-1]
            rest = line[2:]
            prev.parts.append(rest if prev.op == "match"
                              else unescape(rest, path, lineno))
            prev.part_lines.append(lineno)
            continue
        m = _DATA_LINE.fullmatch(line)
        if m:
            conn, op, rest = m.group(1), _OPS[m.group(2)], m.group(3)
            if rest == "":
                raise ParseError("%s:%d: empty data" % (path, lineno))
            st = Step(path, lineno, conn, op, None)
            st.parts = [rest if op == "match" else unescape(rest, path, lineno)]
            steps.append(st)
            continue
        m = _WORD_LINE.fullmatch(line)
        if m:
            conn, word, arg = m.groups()
            if word == "silent":
                st = Step(path, lineno, conn, "silent",
                          _seconds(arg, path, lineno))
            elif arg is not None:
                raise ParseError("%s:%d: %s takes no argument" %
                                 (path, lineno, word))
            else:
                st = Step(path, lineno, conn, word, None)
            steps.append(st)
            continue
        m = _SLEEP_LINE.fullmatch(line)
        if m:
            steps.append(Step(path, lineno, None, "sleep",
                              _seconds(m.group(1), path, lineno)))
            continue
        raise ParseError("%s:%d: cannot parse: %r" % (path, lineno, line))
    # Compile the regexes now so that a bad one is a parse error.
    for st in steps:
        if st.op == "match":
            src = "".join(st.parts)
            try:
                st.regex = re.compile(src.encode("latin-1"))
            except re.error as e:
                raise ParseError("%s:%d: bad regex: %s" % (path, st.lineno, e))
            st.parts = [p.encode("latin-1") for p in st.parts]
    return steps


def parse_file(path):
    with open(path, encoding="latin-1") as f:
        return parse_text(f.read(), path)


# An ssl.SSLContext: every Conn speaks TLS through it (a tls:// listener,
# tests/test_tls_clients.py); None: plaintext.
SSL_CONTEXT = None


class Conn:
    """One client connection with a receive buffer."""

    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if SSL_CONTEXT is not None:  # the handshake blocks, then as plain
            self.sock = SSL_CONTEXT.wrap_socket(self.sock)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.eof = False

    def pump(self, deadline):
        """Wait until deadline for more bytes (or EOF); False on timeout."""
        if self.eof:
            return False
        while True:
            left = deadline - time.monotonic()
            if left < 0:
                left = 0
            # TLS may hold decrypted bytes the socket no longer shows
            held = SSL_CONTEXT is not None and self.sock.pending()
            r, _, _ = select.select([self.sock], [], [], 0 if held else left)
            if not r and not held:
                return False
            try:
                b = self.sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError):
                continue
            except (ConnectionResetError, ConnectionAbortedError,
                    ssl.SSLError):
                b = b""
            if not b:
                self.eof = True
                return False
            self.buf += b
            return True

    def drain(self, seconds):
        """Collect whatever arrives within seconds."""
        end = time.monotonic() + seconds
        while self.pump(end):
            pass

    def take(self, n=None):
        n = len(self.buf) if n is None else n
        b = bytes(self.buf[:n])
        del self.buf[:n]
        return b

    def send(self, data, bytewise=False):
        self.sock.setblocking(True)
        self.sock.settimeout(DEFAULT_TIMEOUT)
        try:
            if bytewise:
                for i in range(len(data)):
                    self.sock.sendall(data[i:i + 1])
                    time.sleep(BYTEWISE_GAP)
            else:
                self.sock.sendall(data)
        finally:
            self.sock.setblocking(False)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _regex_hint(step, got):
    """Name the first continuation line of a regex that stops matching."""
    for k in range(1, len(step.parts) + 1):
        try:
            rx = re.compile(b"".join(step.parts[:k]))
        except re.error:
            continue  # a part that only compiles together with the next one
        if not rx.match(got):
            return "first failing regex line: %s:%d" % (
                step.path, step.part_lines[k - 1])
    return ""


class Runner:
    def __init__(self, host, port, timeout=DEFAULT_TIMEOUT, trace=None):
        self.host, self.port, self.timeout = host, port, timeout
        self.trace = trace  # a file to log every step and reply to, or None
        self.conns = {}

    def log(self, st, what, data):
        if self.trace:
            print("%s:%d %s %s %s" % (os.path.basename(st.path), st.lineno,
                                      st.conn or "-", what, show(data)),
                  file=self.trace)

    def conn(self, name):
        c = self.conns.get(name)
        if c is None:
            c = self.conns[name] = Conn(self.host, self.port, self.timeout)
        return c

    def close_all(self):
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    # Each step method returns None or a Mismatch.
    def do_send(self, st, bytewise=False):
        self.log(st, ">", st.data)
        try:
            self.conn(st.conn).send(st.data, bytewise)
        except OSError as e:
            return Mismatch(st, "send " + show(st.data),
                            "send failed: %s" % e)
        return None

    def do_bytewise(self, st):
        return self.do_send(st, True)

    def do_expect(self, st):
        c = self.conn(st.conn)
        want = st.data
        deadline = time.monotonic() + self.timeout
        while len(c.buf) < len(want):
            have = bytes(c.buf)
            # Stop early once a received, complete line already differs.
            if not want.startswith(have):
                i = next(k for k in range(len(have)) if have[k] != want[k])
                if b"\r\n" in have[i:]:
                    break
            if not c.pump(deadline):
                break
        if bytes(c.buf[:len(want)]) == want:
            self.log(st, "<", c.take(len(want)))
            return None
        c.drain(SETTLE)
        got = c.take()
        note = ""
        if not got:
            note = ("connection closed by server" if c.eof else
                    "no reply within %.1f s" % self.timeout)
        elif c.eof:
            note = "then the connection was closed"
        return Mismatch(st, show(want), show(got) if got else "(nothing)",
                        note)

    def read_framed(self, c, deadline):
        """Read one framed reply (status line, plus n+2 bytes for OK, FOUND,
        RESERVED). Returns (bytes, complete?)."""
        while b"\r\n" not in c.buf:
            if not c.pump(deadline):
                return c.take(), False
        line_end = c.buf.index(b"\r\n") + 2
        m = FRAMED.fullmatch(bytes(c.buf[:line_end]))
        total = line_end + (int(m.group(1)) + 2 if m else 0)
        while len(c.buf) < total:
            if not c.pump(deadline):
                return c.take(), False
        return c.take(total), True

    def do_match(self, st):
        c = self.conn(st.conn)
        got, complete = self.read_framed(c, time.monotonic() + self.timeout)
        self.log(st, "~", got)
        if complete and st.regex.fullmatch(got):
            return None
        c.drain(SETTLE)
        got += c.take()
        if not got:
            note = ("connection closed by server" if c.eof else
                    "no reply within %.1f s" % self.timeout)
        elif not complete:
            note = "incomplete reply"
        else:
            note = _regex_hint(st, got)
        return Mismatch(st, "/%s/" % st.data.decode("latin-1"),
                        show(got) if got else "(nothing)", note)

    def do_silent(self, st):
        c = self.conn(st.conn)
        if not c.buf:
            c.pump(time.monotonic() + st.arg)
        if c.buf:
            c.drain(SETTLE)
            return Mismatch(st, "silence for %g s" % st.arg, show(c.take()))
        if c.eof:
            return Mismatch(st, "silence for %g s" % st.arg,
                            "connection closed by server")
        return None

    def do_eof(self, st):
        c = self.conn(st.conn)
        deadline = time.monotonic() + self.timeout
        while c.pump(deadline):
            pass
        got = c.take()
        # Either way the connection is done with: a later step on the same
        # name opens a new one (this also stops one missing close from
        # spoiling every later step).
        self.conns.pop(st.conn).close()
        if c.eof and not got:
            return None
        return Mismatch(st, "connection closed by server",
                        show(got) if got else "(nothing)",
                        "then closed" if c.eof else
                        "connection still open (the replay closed it)")

    def do_close(self, st):
        c = self.conns.pop(st.conn, None)
        if c is not None:
            c.close()
        return None

    def do_shutdown(self, st):
        try:
            # TLS: a FIN alone (ssl's own shutdown would drop the session
            # and read ciphertext after it); the server takes it as the end
            socket.socket.shutdown(self.conn(st.conn).sock, socket.SHUT_WR)
        except OSError as e:
            return Mismatch(st, "half-close", "shutdown failed: %s" % e)
        return None

    def do_sleep(self, st):
        time.sleep(st.arg)
        return None

    def end_check(self, path, lineno):
        """Any bytes still unread at the end of a file are a mismatch."""
        out = []
        time.sleep(END_CHECK)
        for name, c in sorted(self.conns.items()):
            c.drain(0)
            if c.buf:
                st = Step(path, lineno, name, "end", None)
                out.append(Mismatch(st, "no further replies",
                                    show(c.take()), "unread at end of file"))
        return out


def run_steps(steps, host, port, timeout=DEFAULT_TIMEOUT, max_mismatches=5,
              path="<string>", trace=None):
    """Run steps against host:port; return the list of Mismatches (empty if
    the server behaved). Stops after max_mismatches (0 = no limit). trace:
    a file to log every send and reply to."""
    r = Runner(host, port, timeout, trace)
    out = []
    try:
        for st in steps:
            try:
                m = getattr(r, "do_" + st.op)(st)
            except OSError as e:
                m = Mismatch(st, "a working connection", "error: %s" % e)
            if m:
                out.append(m)
                if max_mismatches and len(out) >= max_mismatches:
                    out.append(Mismatch(st, "-", "-",
                                        "stopped after %d mismatches" %
                                        len(out)))
                    return out
        last = steps[-1].lineno if steps else 0
        out += r.end_check(path, last)
    finally:
        r.close_all()
    return out


def run_file(path, host, port, timeout=DEFAULT_TIMEOUT, max_mismatches=5,
             trace=None):
    """Parse and replay one exchange file; return the list of Mismatches."""
    return run_steps(parse_file(path), host, port, timeout, max_mismatches,
                     path, trace)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe(host, port):
    """Connect, send quit and read until the server closes. The server has
    dropped the probe from current-connections before its close reaches us,
    so a test that starts after this sees none of it (a bare connect and
    close can still be counted when the test's first command arrives)."""
    with socket.create_connection((host, port), 0.2) as s:
        s.settimeout(5.0)
        s.sendall(b"quit\r\n")
        while s.recv(4096):
            pass


def wait_listening(host, port, proc, timeout=20.0):
    """Wait until the server at host:port accepts and serves a connection;
    RuntimeError if proc exits first or timeout (seconds) passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %d" % proc.returncode)
        try:
            _probe(host, port)
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("server did not listen on %d" % port)


def run_with_server(template, path, timeout, max_mismatches, trace=None):
    """Start a fresh server from template ({port} and {dir} are filled in),
    replay path against it, stop it."""
    with tempfile.TemporaryDirectory(prefix="replay-") as d:
        port = free_port()
        argv = [a.format(port=port, dir=d) for a in shlex.split(template)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_listening("127.0.0.1", port, proc)
            return run_file(path, "127.0.0.1", port, timeout, max_mismatches,
                            trace)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Replay protocol exchange files against a server.")
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int,
                    help="replay against a running server (each file "
                         "assumes a fresh server)")
    ap.add_argument("--server", metavar="CMD",
                    help="start a fresh server per file: a command line "
                         "with {port} (and optionally {dir}), e.g. "
                         "'/usr/bin/beanstalkd -l 127.0.0.1 -p {port}'")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                    help="seconds to wait for a reply (default %(default)s)")
    ap.add_argument("--max-mismatches", type=int, default=5,
                    help="stop a file after this many (0 = no limit)")
    ap.add_argument("--trace", action="store_true",
                    help="print every send and every reply received")
    a = ap.parse_args(argv)
    trace = sys.stdout if a.trace else None
    if (a.port is None) == (a.server is None):
        ap.error("give exactly one of --port and --server")
    total_steps = total_bad = 0
    bad_files = 0
    for path in a.files:
        try:
            steps = parse_file(path)
        except (OSError, ParseError) as e:
            print("%s: %s" % (path, e))
            bad_files += 1
            continue
        total_steps += len(steps)
        t0 = time.monotonic()
        try:
            if a.server:
                ms = run_with_server(a.server, path, a.timeout,
                                     a.max_mismatches, trace)
            else:
                ms = run_file(path, a.host, a.port, a.timeout,
                              a.max_mismatches, trace)
        except (OSError, RuntimeError) as e:
            ms = [Mismatch(None, "a server", "error: %s" % e)]
            ms[0].path = path
        dt = time.monotonic() - t0
        print("%s: %s (%d steps, %.1f s)" % (
            path, "ok" if not ms else "%d mismatch(es)" % len(ms),
            len(steps), dt))
        for m in ms:
            print(m)
        if ms:
            bad_files += 1
            total_bad += len(ms)
    print("%d file(s), %d step(s), %d file(s) failing, %d mismatch(es)" % (
        len(a.files), total_steps, bad_files, total_bad))
    return 1 if bad_files else 0


if __name__ == "__main__":
    sys.exit(main())
