#!/usr/bin/env python3
"""A person at a terminal, talking to the server through netcat.

    python3 tests/clients/telnet_session.py [HOST [PORT]]
    (or BEANSTALK_HOST / BEANSTALK_PORT; default 127.0.0.1:11300)

Runs `nc -C HOST PORT` (netcat-openbsd; -C sends CRLF for each Enter, as
telnet does) and types one line at a time, reading the reply before typing
the next: use a tube, put a job, mistype a command (UNKNOWN_COMMAND), carry
on in the same session, reserve, delete, quit. After quit the server has
closed the connection, so the next line typed ends nc without a reply.

Prints "ok - STEP" or "not ok - STEP: reason" per step, then
"N passed, M failed"; exits 1 if any step failed. A failed step ends the
session (later steps depend on it).
"""
import os
import re
import select
import subprocess
import sys
import time

HOST = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BEANSTALK_HOST", "127.0.0.1")
PORT = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("BEANSTALK_PORT", "11300")


class StepFailed(Exception):
    pass


class Terminal:
    def __init__(self):
        self.nc = subprocess.Popen(["nc", "-C", HOST, str(PORT)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.screen = b""  # everything nc has printed so far
        self.seen = 0      # how much of it has been matched

    def type(self, line):
        time.sleep(0.05)  # a (fast) person
        self.nc.stdin.write(line.encode() + b"\n")
        self.nc.stdin.flush()

    def _read(self, timeout):
        r, _, _ = select.select([self.nc.stdout], [], [], timeout)
        if not r:
            return False
        chunk = os.read(self.nc.stdout.fileno(), 65536)
        if not chunk:
            return None
        self.screen += chunk
        return True

    def expect(self, pattern, timeout=5.0):
        """Waits for the next reply to match pattern (a whole reply, CRLF
        line endings), with nothing else before or after it."""
        rx = re.compile(pattern.encode(), re.S)
        end = time.monotonic() + timeout
        while True:
            pending = self.screen[self.seen:]
            m = rx.fullmatch(pending)
            if m:
                # Anything more arriving now would be a reply too many.
                if self._read(0.1):
                    raise StepFailed("unexpected extra output %r" % self.screen[self.seen:])
                self.seen = len(self.screen)
                return m
            left = end - time.monotonic()
            got = self._read(left) if left > 0 else False
            if got is None or got is False:
                raise StepFailed("wanted %r, the screen shows %r%s" % (
                    pattern, pending, " (connection closed)" if got is None else ""))

    def silent(self, seconds):
        if self._read(seconds):
            raise StepFailed("unexpected output %r" % self.screen[self.seen:])

    def close(self):
        if self.nc.poll() is None:
            self.nc.kill()
        self.nc.wait()


def main():
    tube = "telnet-%d" % os.getpid()
    term = Terminal()
    state = {}

    def use():
        term.type("use %s" % tube)
        term.expect(r"USING %s\r\n" % re.escape(tube))

    def put():
        term.type("put 0 0 60 5")
        term.silent(0.2)  # the server waits for the body
        term.type("hello")
        state["id"] = term.expect(r"INSERTED (\d+)\r\n").group(1).decode()

    def typo():
        term.type("resrve")
        term.expect(r"UNKNOWN_COMMAND\r\n")

    def recover():
        term.type("list-tube-used")
        term.expect(r"USING %s\r\n" % re.escape(tube))
        term.type("peek %s" % state["id"])
        term.expect(r"FOUND %s 5\r\nhello\r\n" % state["id"])

    def reserve():
        term.type("watch %s" % tube)
        term.expect(r"WATCHING 2\r\n")
        term.type("ignore default")
        term.expect(r"WATCHING 1\r\n")
        term.type("reserve")
        term.expect(r"RESERVED %s 5\r\nhello\r\n" % state["id"])

    def delete():
        term.type("delete %s" % state["id"])
        term.expect(r"DELETED\r\n")
        term.type("delete %s" % state["id"])
        term.expect(r"NOT_FOUND\r\n")

    def quit_():
        term.type("quit")
        term.silent(0.3)  # quit has no reply
        # The connection is closed: the next line gets no reply and nc ends.
        try:
            term.type("list-tube-used")
        except BrokenPipeError:
            pass
        try:
            term.nc.wait(5)
        except subprocess.TimeoutExpired:
            raise StepFailed("nc still connected after quit; screen %r" % term.screen[term.seen:])
        if term.nc.stdout.read():
            raise StepFailed("reply after quit")

    passed = failed = 0
    steps = [("use", use), ("put", put), ("typo-unknown-command", typo), ("recover", recover),
             ("reserve", reserve), ("delete", delete), ("quit", quit_)]
    try:
        for name, step in steps:
            try:
                step()
            except (StepFailed, OSError) as e:
                print("not ok - %s: %s" % (name, e), flush=True)
                failed += 1
                break
            print("ok - %s" % name, flush=True)
            passed += 1
    finally:
        term.close()
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 and passed == len(steps) else 1


if __name__ == "__main__":
    sys.exit(main())
