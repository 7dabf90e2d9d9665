"""Protocol tests against the real ./rockstalkd: byte-exact replies for the
behaviours that depend on time, several connections, signals or the way bytes
arrive. (Single-connection request/reply exchanges live in protocol/exchanges
and are replayed against rockstalkd and beanstalkd 1.12 by
test_differential.py.)"""
import signal
import socket
import time

import pytest

from conftest import wait_for


class Client:
    """A blocking test client that reads exact bytes with a deadline."""

    def __init__(self, server):
        self.sock = server.connect()
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def read(self, n, timeout=3.0):
        end = time.monotonic() + timeout
        while len(self.buf) < n:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("wanted %d bytes, have %r" % (n, self.buf))
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("closed; have %r" % self.buf)
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def expect(self, data, timeout=3.0):
        got = self.read(len(data), timeout)
        assert got == data

    def silent(self, seconds):
        """Asserts that nothing arrives for the given time."""
        self.sock.settimeout(seconds)
        try:
            chunk = self.sock.recv(1)
        except socket.timeout:
            return
        assert False, "unexpected %r" % (self.buf + chunk)

    def cmd(self, line, reply, timeout=3.0):
        self.send(line)
        self.expect(reply, timeout)

    def close(self):
        self.sock.close()


@pytest.fixture
def srv(rockstalkd):
    return rockstalkd()


def test_put_reserve_delete(srv):
    c = Client(srv)
    c.cmd(b"put 0 0 10 5\r\nhello\r\n", b"INSERTED 1\r\n")
    c.cmd(b"reserve\r\n", b"RESERVED 1 5\r\nhello\r\n")
    c.cmd(b"delete 1\r\n", b"DELETED\r\n")
    c.cmd(b"delete 1\r\n", b"NOT_FOUND\r\n")


def test_pipelined_in_one_write(srv):
    c = Client(srv)
    c.send(b"put 1 0 10 3\r\nabc\r\nput 0 0 10 2\r\nxy\r\nuse t\r\n"
           b"put 0 0 10 1\r\nz\r\nreserve\r\nstats-tube t\r\nbogus\r\n"
           b"list-tube-used\r\n")
    c.expect(b"INSERTED 1\r\nINSERTED 2\r\nUSING t\r\nINSERTED 3\r\n"
             b"RESERVED 2 2\r\nxy\r\n")
    head = c.read(len(b"OK 284\r\n"))
    assert head.startswith(b"OK ")
    c.read(int(head[3:-2]) + 2)
    c.expect(b"UNKNOWN_COMMAND\r\nUSING t\r\n")


def test_one_byte_writes(srv):
    c = Client(srv)
    for b in b"put 0 0 10 4\r\nab\r\n\r\nreserve\r\n":
        c.send(bytes([b]))
        time.sleep(0.001)
    c.expect(b"INSERTED 1\r\nRESERVED 1 4\r\nab\r\n\r\n")


def test_binary_body(srv):
    c = Client(srv)
    body = bytes(range(256)) + b"\r\n\x00\r\n"
    c.cmd(b"put 0 0 10 %d\r\n" % len(body) + body + b"\r\n",
          b"INSERTED 1\r\n")
    c.cmd(b"peek 1\r\n", b"FOUND 1 %d\r\n" % len(body) + body + b"\r\n")


def test_large_body_and_limits(rockstalkd):
    s = rockstalkd("-z", "100000")
    c = Client(s)
    body = b"x" * 100000
    c.cmd(b"put 0 0 10 100000\r\n" + body + b"\r\n", b"INSERTED 1\r\n")
    c.cmd(b"put 0 0 10 100001\r\n" + body + b"y\r\n", b"JOB_TOO_BIG\r\n")
    c.cmd(b"reserve\r\n", b"RESERVED 1 100000\r\n" + body + b"\r\n")


def test_error_replies(srv):
    c = Client(srv)
    c.cmd(b"put 0 0 10 2\r\nabXY", b"EXPECTED_CRLF\r\n")
    c.cmd(b"put 0 0 10 70000\r\n" + b"a" * 70000 + b"\r\n", b"JOB_TOO_BIG\r\n")
    c.cmd(b"put 4294967296 0 10 1\r\n", b"BAD_FORMAT\r\n")
    c.cmd(b"x" * 300 + b"\r\n", b"BAD_FORMAT\r\n")
    c.cmd(b"frobnicate\r\n", b"UNKNOWN_COMMAND\r\n")
    c.cmd(b"ignore default\r\n", b"NOT_IGNORED\r\n")
    c.cmd(b"reserve-with-timeout 0\r\n", b"TIMED_OUT\r\n")
    c.cmd(b"stats-tube nosuch\r\n", b"NOT_FOUND\r\n")


def test_long_line_is_not_buffered_whole(srv):
    c = Client(srv)
    c.send(b"a" * (1 << 20))
    c.send(b"\r\nlist-tube-used\r\n")
    c.expect(b"BAD_FORMAT\r\nUSING default\r\n", timeout=10)


def test_blocking_reserve_woken_by_put(srv):
    w, p = Client(srv), Client(srv)
    w.send(b"watch jobs\r\n")
    w.expect(b"WATCHING 2\r\n")
    w.send(b"reserve\r\n")
    w.silent(0.3)
    p.cmd(b"use jobs\r\n", b"USING jobs\r\n")
    p.cmd(b"put 5 0 10 4\r\nwork\r\n", b"INSERTED 1\r\n")
    w.expect(b"RESERVED 1 4\r\nwork\r\n")


def test_closed_connection_releases_jobs(srv):
    a, b = Client(srv), Client(srv)
    a.cmd(b"put 0 0 100 1\r\nx\r\n", b"INSERTED 1\r\n")
    a.cmd(b"reserve\r\n", b"RESERVED 1 1\r\nx\r\n")
    b.cmd(b"reserve-with-timeout 0\r\n", b"TIMED_OUT\r\n")
    a.close()
    b.cmd(b"reserve-with-timeout 2\r\n", b"RESERVED 1 1\r\nx\r\n")


def test_ttr_expiry_while_holder_idle(srv):
    a, b = Client(srv), Client(srv)
    a.cmd(b"put 0 0 1 1\r\nx\r\n", b"INSERTED 1\r\n")
    a.cmd(b"reserve\r\n", b"RESERVED 1 1\r\nx\r\n")
    # a stays idle: the lease must still end on time (1.12 bug not copied)
    b.cmd(b"reserve-with-timeout 3\r\n", b"RESERVED 1 1\r\nx\r\n", timeout=4)
    b.send(b"stats-job 1\r\n")
    head = b.read(len(b"OK 1xx\r\n"))
    body = b.read(int(head[3:-2]) + 2)
    assert b"timeouts: 1\n" in body and b"reserves: 2\n" in body


def test_deadline_soon(srv):
    c = Client(srv)
    c.cmd(b"put 0 0 2 1\r\nx\r\n", b"INSERTED 1\r\n")
    c.cmd(b"reserve\r\n", b"RESERVED 1 1\r\nx\r\n")
    t0 = time.monotonic()
    c.cmd(b"reserve\r\n", b"DEADLINE_SOON\r\n", timeout=3)
    assert 0.5 < time.monotonic() - t0 < 1.8
    c.cmd(b"reserve\r\n", b"DEADLINE_SOON\r\n", timeout=1)
    c.cmd(b"touch 1\r\n", b"TOUCHED\r\n")


def test_delay_and_kick(srv):
    c = Client(srv)
    c.cmd(b"put 0 1 10 1\r\na\r\n", b"INSERTED 1\r\n")
    c.cmd(b"put 0 100 10 1\r\nb\r\n", b"INSERTED 2\r\n")
    c.cmd(b"peek-ready\r\n", b"NOT_FOUND\r\n")
    c.cmd(b"reserve-with-timeout 3\r\n", b"RESERVED 1 1\r\na\r\n", timeout=4)
    c.cmd(b"kick 10\r\n", b"KICKED 1\r\n")
    c.cmd(b"reserve-with-timeout 0\r\n", b"RESERVED 2 1\r\nb\r\n")
    c.cmd(b"release 2 0 1\r\n", b"RELEASED\r\n")
    c.cmd(b"peek-delayed\r\n", b"FOUND 2 1\r\nb\r\n")
    c.cmd(b"reserve-with-timeout 3\r\n", b"RESERVED 2 1\r\nb\r\n", timeout=4)


def test_pause_tube_delays_reserve(srv):
    c = Client(srv)
    c.cmd(b"put 0 0 10 1\r\nx\r\n", b"INSERTED 1\r\n")
    c.cmd(b"pause-tube default 1\r\n", b"PAUSED\r\n")
    t0 = time.monotonic()
    c.cmd(b"reserve\r\n", b"RESERVED 1 1\r\nx\r\n", timeout=3)
    assert time.monotonic() - t0 > 0.8


def test_reserve_with_timeout_times_out(srv):
    c = Client(srv)
    t0 = time.monotonic()
    c.cmd(b"reserve-with-timeout 1\r\n", b"TIMED_OUT\r\n", timeout=3)
    assert 0.8 < time.monotonic() - t0 < 2.5


@pytest.mark.not_via_follower("SIGUSR1 drains the process it is sent "
                               "to; through a follower, stats and puts "
                               "are the leader's")
def test_drain_mode_sigusr1(srv):
    c = Client(srv)
    c.cmd(b"put 0 0 10 1\r\na\r\n", b"INSERTED 1\r\n")
    assert stats_of(c)["draining"] == "false"
    srv.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: stats_of(c)["draining"] == "true", what="draining")
    c.cmd(b"put 0 0 10 1\r\nb\r\n", b"DRAINING\r\n")
    c.cmd(b"reserve\r\n", b"RESERVED 1 1\r\na\r\n")


def test_sigterm_exits_zero(srv):
    c = Client(srv)
    c.cmd(b"put 0 0 10 1\r\na\r\n", b"INSERTED 1\r\n")
    assert srv.stop(signal.SIGTERM) == 0
    srv.restart()
    c = Client(srv)
    c.cmd(b"peek 1\r\n", b"FOUND 1 1\r\na\r\n")
    c.cmd(b"put 0 0 10 1\r\nb\r\n", b"INSERTED 2\r\n")


def test_sigint_exits_zero(srv):
    assert srv.stop(signal.SIGINT) == 0


def test_many_pipelined_puts_share_groups(srv):
    c = Client(srv)
    n = 2000
    c.send(b"".join(b"put 0 0 10 3\r\nabc\r\n" for _ in range(n)))
    c.expect(b"".join(b"INSERTED %d\r\n" % (i + 1) for i in range(n)),
             timeout=20)
    c.send(b"stats\r\n")
    head = c.read(len(b"OK 1000\r\n"))
    stats = dict(line.split(": ", 1) for line in
                 c.read(int(head[3:-2]) + 2).decode().split("\n")[1:-2])
    assert int(stats["rockstalk-groups"]) < n / 4, stats["rockstalk-groups"]
    assert int(stats["binlog-records-written"]) == n


def stats_of(c):
    c.send(b"stats\r\n")
    head = c.read(len(b"OK 1000\r\n"))
    body = c.read(int(head[3:-2]) + 2).decode()
    return dict(line.split(": ", 1) for line in body.split("\n")[1:-2])


def put_bodies(c, first, bodies):
    """Puts each body in turn; job ids must run from first."""
    for i, b in enumerate(bodies):
        c.cmd(b"put 0 0 60 %d\r\n" % len(b) + b + b"\r\n",
              b"INSERTED %d\r\n" % (first + i))


def reserve_expect(c, jid, body):
    c.cmd(b"reserve\r\n", b"RESERVED %d %d\r\n" % (jid, len(body)) + body +
          b"\r\n")


def test_body_cache_bound(rockstalkd):
    """With a tiny body cache, bodies past the budget live only on disk
    and are read back, intact, on reserve and peek, also after a restart."""
    s = rockstalkd("-m", "2000")
    c = Client(s)
    bodies = [bytes([65 + i % 26]) * (100 + i) + b"\r\n\x00" for i in range(60)]
    put_bodies(c, 1, bodies)
    wait_for(lambda: int(stats_of(c)["rockstalk-body-cache-bytes"]) <=
             2000 + 200, what="the body cache back under its budget")
    c.cmd(b"peek 60\r\n", b"FOUND 60 %d\r\n" % len(bodies[59]) +
          bodies[59] + b"\r\n")
    for i in range(30):
        reserve_expect(c, i + 1, bodies[i])
        c.cmd(b"delete %d\r\n" % (i + 1), b"DELETED\r\n")
    assert int(stats_of(c)["rockstalk-body-cache-misses"]) > 0
    s.kill9()
    s.restart()
    c = Client(s)
    for i in range(30, 60):
        reserve_expect(c, i + 1, bodies[i])


def test_bodies_read_ahead(rockstalkd):
    """After a restart every body is on disk: the first reserve waits for
    the body reader thread to read its body (a cache miss), and the reader
    reads the next ones ahead (up to 128 a tube), so later reserves find
    theirs in memory, and every body is intact."""
    s = rockstalkd("-m", "2000")
    c = Client(s)
    bodies = [bytes([97 + i % 26]) * (100 + i) + b"\r\n" for i in range(60)]
    put_bodies(c, 1, bodies)
    s.kill9()
    s.restart()
    c = Client(s)
    for i in range(60):
        reserve_expect(c, i + 1, bodies[i])
        if i == 0:  # the reader thread reads the other 59 bodies
            wait_for(lambda: int(stats_of(c)["rockstalk-body-prefetched"]) >=
                     59, what="59 bodies read ahead")
            st = stats_of(c)
            assert int(st["rockstalk-body-cache-misses"]) == 1, st
            assert int(st["rockstalk-body-prefetched"]) == 59, st
        c.cmd(b"delete %d\r\n" % (i + 1), b"DELETED\r\n")
    st = stats_of(c)
    assert int(st["rockstalk-body-cache-misses"]) == 1, st
    assert int(st["rockstalk-body-prefetched"]) == 59, st
    c.cmd(b"reserve-with-timeout 0\r\n", b"TIMED_OUT\r\n")
