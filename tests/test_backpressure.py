"""Backpressure: when the mutation thread falls behind (here its fsync is
held back through the fault-injection seam), the server stops reading from
producers once the unwritten backlog crosses its high-water mark (64 MiB),
so memory stays bounded; once the store catches up every put that was sent
is acknowledged. The number of puts the server has taken in is read from
the metrics endpoint, whose numbers are not gated on the store."""
import os
import re
import socket
import subprocess
import time
import urllib.request

from conftest import ROCKSTALKD, free_port, wait_listening

BODY = 4096
PUT = b"put 0 0 60 %d\r\n" % BODY + b"b" * BODY + b"\r\n"
CONNS, PER_CONN = 40, 2000  # 80,000 puts, ~330 MB: far above the mark


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def puts_taken(mport):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport,
                                  timeout=5).read().decode()
    return int(re.search(r'rockstalk_commands_total\{cmd="put"\} (\d+)',
                         text).group(1))


def flood(socks, pid, seconds):
    """Sends until every socket has stalled for a second; returns bytes sent
    per socket and the peak RSS seen."""
    sent = [0] * len(socks)
    last = [time.monotonic()] * len(socks)
    data = PUT * PER_CONN
    peak, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        active = 0
        for i, s in enumerate(socks):
            if sent[i] == len(data):
                continue
            try:
                sent[i] += s.send(data[sent[i]:sent[i] + (1 << 18)])
                last[i] = time.monotonic()
            except BlockingIOError:
                pass
            if time.monotonic() - last[i] < 1.0:
                active += 1
        peak = max(peak, rss_kib(pid))
        if not active:
            break
        time.sleep(0.002)
    return sent, max(peak, rss_kib(pid))


def test_backlog_is_bounded_and_drains(tmp_path):
    hold = tmp_path / "hold"
    hold.write_text("")
    port, mport = free_port(), free_port()
    env = dict(os.environ, ROCKSTALKD_FAULT_SYNC_HOLD=str(hold))
    p = subprocess.Popen([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port),
                          "-b", str(tmp_path / "d"), "--metrics",
                          "127.0.0.1:%d" % mport], env=env,
                         stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, p)
        socks = [socket.create_connection(("127.0.0.1", port), 5)
                 for _ in range(CONNS)]
        for s in socks:
            s.setblocking(False)
        sent, peak = flood(socks, p.pid, 30)
        time.sleep(1.2)  # metrics are published once a second
        taken = puts_taken(mport)
        print("sent %d MiB, server took %d puts, peak RSS %d MiB"
              % (sum(sent) >> 20, taken, peak >> 10))
        # 64 MiB of 4 KiB puts is ~16,000; a margin for what is in flight
        assert taken < 30000, taken
        assert peak < 400 * 1024, "RSS %d KiB" % peak
        hold.unlink()  # the store catches up; reading resumes
        for i, s in enumerate(socks):
            s.setblocking(True)
            s.settimeout(60)
            rest = PUT * PER_CONN
            s.sendall(rest[sent[i]:sent[i] + (len(PUT) - sent[i] % len(PUT))
                           % len(PUT)])  # complete the last partial put
            puts = -(-sent[i] // len(PUT))
            got = b""
            while got.count(b"\r\n") < puts:
                chunk = s.recv(1 << 20)
                assert chunk, "closed"
                got += chunk
            assert got.startswith(b"INSERTED ") and b"\r\n\r\n" not in got
            assert got.count(b"INSERTED") == puts
    finally:
        if hold.exists():
            hold.unlink()  # else shutdown would wait on the held fsync
        p.terminate()
        assert p.wait(60) == 0
