"""Shared pytest fixtures: start a real rockstalkd or Debian's beanstalkd 1.12
on a free loopback port, each with a fresh data directory, and stop it after
the test.

    def test_x(rockstalkd):            # a running ./rockstalkd (or $ROCKSTALKD)
        s = rockstalkd()               # -> Server(host, port, proc, dir)
        s2 = rockstalkd("-f", "50")    # extra daemon flags
    def test_y(beanstalkd):            # the reference server, same interface
"""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

import replay
from replay import free_port  # noqa: F401 (tests import it from here)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROCKSTALKD = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd")))
BEANSTALKD = shutil.which("beanstalkd") or "/usr/bin/beanstalkd"


def wait_listening(port, proc, timeout=20.0):
    """replay.wait_listening on 127.0.0.1: returns once the server serves a
    connection and has forgotten it, so current-connections starts at 0."""
    replay.wait_listening("127.0.0.1", port, proc, timeout)


def wait_for(pred, timeout=10.0, what="condition"):
    """Poll pred() every 20 ms until it is true; AssertionError naming what
    if timeout (seconds) passes first. For what a test can only observe,
    in place of a fixed sleep that a loaded machine can outlast."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class Server:
    """A running server: host, port, proc (Popen), dir (data directory)."""

    def __init__(self, argv, dir, port, log):
        self.host, self.port, self.dir, self.argv = "127.0.0.1", port, dir, argv
        self.log = log
        self.env = None     # restart's environment (None: the test's own)
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_listening(port, self.proc)

    def connect(self, timeout=5.0):
        s = socket.create_connection((self.host, self.port), timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def restart(self):
        self.stop()
        self.proc = subprocess.Popen(self.argv, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env)
        wait_listening(self.port, self.proc)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _factory(request, tmp_path_factory, make_argv):
    servers = []

    def start(*flags):
        d = str(tmp_path_factory.mktemp("data"))
        port = free_port()
        log = open(os.path.join(d + ".log"), "ab")
        s = Server(make_argv(port, d, list(flags)), d, port, log)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()
        s.log.close()


@pytest.fixture
def rockstalkd(request, tmp_path_factory):
    yield from _factory(request, tmp_path_factory, lambda port, d, flags: [
        ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b", d] + flags)


@pytest.fixture
def beanstalkd(request, tmp_path_factory):
    # In memory unless the test passes -b itself (beanstalkd's default).
    yield from _factory(request, tmp_path_factory, lambda port, d, flags: [
        BEANSTALKD, "-l", "127.0.0.1", "-p", str(port)] + flags)
