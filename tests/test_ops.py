"""Operator-facing behaviour: start-up failures (clear message, exit 1), the
connection limit, the Prometheus endpoint, a Unix-domain socket, systemd
socket activation and the privilege drop."""
import os
import pwd
import re
import socket
import subprocess
import urllib.request

import pytest

from conftest import ROCKSTALKD, free_port, wait_for, wait_listening


def run_fail(args, timeout=20):
    """Runs rockstalkd expecting a start-up failure; returns (code, log)."""
    p = subprocess.run([ROCKSTALKD] + args, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stderr


def roundtrip(sock):
    sock.sendall(b"list-tube-used\r\n")
    assert sock.recv(64) == b"USING default\r\n"


def test_port_in_use(tmp_path):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        code, log = run_fail(["-l", "127.0.0.1", "-p", str(s.getsockname()[1]),
                              "-b", str(tmp_path)])
    assert code == 1 and "Address already in use" in log, log


def test_directory_not_writable(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o500)
    args = ["-l", "127.0.0.1", "-p", str(free_port()), "-b", str(d / "data")]
    if os.geteuid() == 0:  # root writes anywhere: use a path under a file
        (tmp_path / "file").write_text("x")
        args[-1] = str(tmp_path / "file" / "data")
    code, log = run_fail(args)
    assert code == 1 and "data" in log, log


def test_directory_locked_and_shard_mismatch(rockstalkd):
    s = rockstalkd()
    code, log = run_fail(["-l", "127.0.0.1", "-p", str(free_port()),
                          "-b", s.dir])
    assert code == 1 and "lock" in log, log
    s.stop()
    code, log = run_fail(["-l", "127.0.0.1", "-p", str(free_port()),
                          "-b", s.dir, "-S", "3"])
    assert code == 1 and "-S" in log, log


def test_bad_flag_is_usage_error():
    code, log = run_fail(["--no-such-flag"])
    assert code == 1 and "Use: rockstalkd" in log


def test_max_connections(rockstalkd):
    s = rockstalkd("--max-connections", "3")
    keep = [s.connect() for _ in range(3)]
    for c in keep:
        roundtrip(c)
    extra = s.connect()
    extra.settimeout(3)
    assert extra.recv(16) == b""  # closed at once
    keep.pop().close()
    # once the server has seen that hang-up, a new connection is served
    # (until then it is refused at once, like extra)
    wait_for(lambda: served(s), what="a connection served after a hang-up")


def served(s):
    """Whether a new connection to s gets a reply (False: closed at once)."""
    with s.connect() as c:
        c.settimeout(5)
        try:
            c.sendall(b"list-tube-used\r\n")
            got = c.recv(64)
        except (ConnectionResetError, BrokenPipeError):
            return False  # closed before our command arrived
        assert got in (b"", b"USING default\r\n"), got
        return got != b""


def test_metrics_endpoint(rockstalkd):
    port = free_port()
    s = rockstalkd("--metrics", "127.0.0.1:%d" % port)
    c = s.connect()
    c.sendall(b"use mt\r\nput 0 0 10 1\r\nx\r\n")
    body = ""

    def scrape():  # the metrics are published once a second
        nonlocal body
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                      timeout=5).read().decode()
        return 'rockstalk_commands_total{cmd="put"} 1' in body

    wait_for(scrape, what="the put in /metrics")
    assert 'rockstalk_tube_jobs{tube="mt",state="ready"} 1' in body
    assert "rockstalk_store_sync_seconds_count" in body
    assert "rockstalk_store_body_ring_puts_total 0" in body
    for line in body.splitlines():  # Prometheus text format, line by line
        assert re.fullmatch(
            r'# TYPE [a-z_]+ (counter|gauge|histogram)|'
            r'[a-z_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? [0-9.e+-]+',
            line), line
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen("http://127.0.0.1:%d/x" % port, timeout=5)


def test_unix_socket(tmp_path):
    path = str(tmp_path / "rs.sock")
    p = subprocess.Popen([ROCKSTALKD, "-l", "unix:" + path, "-b",
                          str(tmp_path / "d")], stderr=subprocess.DEVNULL)
    try:
        conns = []

        def connected():  # a fresh socket per try
            c = socket.socket(socket.AF_UNIX)
            if c.connect_ex(path) == 0:
                conns.append(c)
                return True
            c.close()
            return False

        wait_for(connected, what="the unix socket")
        c = conns[0]
        c.sendall(b"put 0 0 10 2\r\nhi\r\n")
        assert c.recv(64) == b"INSERTED 1\r\n"
    finally:
        p.terminate()
        assert p.wait(10) == 0


def test_socket_activation(tmp_path):
    """systemd passes the listening socket as fd 3 (LISTEN_PID/LISTEN_FDS)."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen()
    port = lsock.getsockname()[1]
    code = ("import os,sys; os.dup2(%d, 3); os.environ['LISTEN_FDS']='1';"
            "os.environ['LISTEN_PID']=str(os.getpid());"
            "os.execv(sys.argv[1], sys.argv[1:])" % lsock.fileno())
    p = subprocess.Popen(["/usr/bin/python3", "-c", code, ROCKSTALKD, "-b",
                          str(tmp_path / "d")], pass_fds=(lsock.fileno(),),
                         stderr=subprocess.DEVNULL)
    lsock.close()
    try:
        wait_listening(port, p)
        roundtrip(socket.create_connection(("127.0.0.1", port), 5))
    finally:
        p.terminate()
        assert p.wait(10) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to change user")
def test_user_drop(tmp_path):
    d = tmp_path / "d"
    for parent in (tmp_path, tmp_path.parent, tmp_path.parent.parent):
        os.chmod(parent, 0o755)  # nobody must reach the data directory
    port = free_port()
    p = subprocess.Popen([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port),
                          "-b", str(d), "-u", "nobody"],
                         stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, p)
        # the socket listens before privileges are dropped (a port below
        # 1024 needs root), but nothing is served until after: once a
        # command is answered, the server must run as nobody
        c = socket.create_connection(("127.0.0.1", port), 5)
        c.sendall(b"put 0 0 10 1\r\nx\r\n")  # storage still writable
        assert c.recv(64) == b"INSERTED 1\r\n"
        status = open("/proc/%d/status" % p.pid).read()
        uid = re.search(r"Uid:\s+(\d+)", status).group(1)
        assert int(uid) == pwd.getpwnam("nobody").pw_uid
    finally:
        p.terminate()
        assert p.wait(10) == 0
    owner = {os.stat(os.path.join(r, n)).st_uid
             for r, ds, fs in os.walk(d) for n in ds}
    assert owner == {pwd.getpwnam("nobody").pw_uid}
