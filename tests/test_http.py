"""The HTTP server (--http HOST:PORT, alias --metrics; protocol/PROTOCOL.md
section 18): /healthz, /readyz, /metrics and the JSON API under /api/v1/
(stats, tubes, tubes/NAME, cluster) checked against what the protocol's
stats and stats-tube say; the rates; 404, 405 and 401 (an --auth-file
closes the API); the loopback default; /readyz while stopping and in a
cluster. The documents are published once a second, so every check waits
for them (wait_for) rather than sleeping."""
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from cluster import Cluster
from conftest import ROCKSTALKD, free_port, wait_for
from test_auth import Client, auth_text, write_auth

pytestmark = pytest.mark.not_via_follower("the HTTP server of one process")


def get(port, path, method="GET"):
    """(status, headers, body bytes) of one request to 127.0.0.1:port."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get_json(port, path):
    st, hd, body = get(port, path)
    assert hd["Content-Type"] == "application/json", hd
    return st, json.loads(body)


def yaml_map(body):
    return dict(re.findall(r"^([\w.-]+): (.*)$", body.decode(), re.M))


def same(api, text):
    """Whether a JSON value and the YAML text of the same field agree."""
    if isinstance(api, bool):
        return text == ("true" if api else "false")
    if isinstance(api, (int, float)):
        return float(text) == float(api)
    return text.strip('"') == api


@pytest.fixture
def httpd(rockstalkd):
    """A server with --http on a free port: (Server, http port)."""
    def start(*flags, opt="--http"):
        hp = free_port()
        return rockstalkd(opt, "127.0.0.1:%d" % hp, *flags), hp
    return start


def fill(s):
    """Jobs in every state in tube a (2 ready of which 1 urgent, 1
    reserved, 1 delayed, 1 buried), b paused with 1 ready (urgent).
    Returns the client that holds the reservation."""
    c = Client(s)
    assert c.word("use a") == "USING"
    for pri, delay in ((0, 0), (5000, 0), (10, 0), (10, 0), (10, 100)):
        assert c.word("put %d %d 60 1" % (pri, delay), b"x") == "INSERTED"
    assert c.word("watch a") == "WATCHING"
    assert c.word("ignore default") == "WATCHING"
    ln, _ = c.cmd("reserve")  # the urgent one (pri 0)
    assert ln.startswith("RESERVED"), ln
    ln, _ = c.cmd("reserve")  # then pri 10, id 3
    jid = ln.split()[1]
    assert c.word("bury %s 10" % jid) == "BURIED"
    assert c.word("use b") == "USING"
    assert c.word("put 1 0 60 2", b"yy") == "INSERTED"
    assert c.word("pause-tube b 60") == "PAUSED"
    return c


def test_api_matches_protocol(httpd):
    s, hp = httpd()
    c = fill(s)
    wait_for(lambda: get_json(hp, "/api/v1/stats")[1]["cmd-pause-tube"] == 1,
             what="the jobs in /api/v1/stats")
    status, api = get_json(hp, "/api/v1/stats")
    assert status == 200
    ys = yaml_map(c.cmd("stats")[1])
    assert list(api) == list(ys)  # the same keys in the same order
    moving = {"uptime", "rusage-utime", "rusage-stime", "cmd-stats"}
    for k, v in api.items():
        if k not in moving:
            assert same(v, ys[k]), (k, v, ys[k])
    for k in ("current-jobs-ready", "total-jobs", "pid", "uptime",
              "rusage-utime", "rockstalk-mutations-per-group"):
        assert isinstance(api[k], (int, float)) and not isinstance(
            api[k], bool), k
    assert api["draining"] is False and isinstance(api["version"], str)
    assert isinstance(api["id"], str) and len(api["id"]) == 16
    assert api["current-jobs-ready"] == 3 and api["current-jobs-urgent"] == 2
    assert (api["current-jobs-reserved"], api["current-jobs-delayed"],
            api["current-jobs-buried"]) == (1, 1, 1)

    status, doc = get_json(hp, "/api/v1/tubes")
    assert status == 200
    names = [t["name"] for t in doc["tubes"]]
    assert names == ["a", "b", "default"]  # by name
    assert (doc["count"], doc["listed"], doc["truncated"]) == (3, 3, False)
    keys = {"ready": "current-jobs-ready", "urgent": "current-jobs-urgent",
            "reserved": "current-jobs-reserved",
            "delayed": "current-jobs-delayed",
            "buried": "current-jobs-buried", "total-jobs": "total-jobs",
            "using": "current-using", "watching": "current-watching",
            "waiting": "current-waiting", "cmd-delete": "cmd-delete",
            "cmd-pause-tube": "cmd-pause-tube", "pause": "pause"}
    for t in doc["tubes"]:
        ys = yaml_map(c.cmd("stats-tube " + t["name"])[1])
        for k, yk in keys.items():
            assert t[k] == int(ys[yk]), (t["name"], k, t[k], ys[yk])
        assert abs(t["pause-time-left"] - int(ys["pause-time-left"])) <= 1
        assert set(t["rates"]) == {"puts", "reserves", "deletes"}
        status, one = get_json(hp, "/api/v1/tubes/" + t["name"])
        assert status == 200 and one == t
    a, b = doc["tubes"][0], doc["tubes"][1]
    assert (a["ready"], a["urgent"], a["reserved"], a["delayed"],
            a["buried"], a["total-jobs"]) == (2, 1, 1, 1, 1, 5)
    assert a["paused"] is False and b["paused"] is True
    assert b["pause"] == 60 and 0 < b["pause-time-left"] <= 60

    assert get_json(hp, "/api/v1/cluster") == (200, {"mode": "standalone"})
    status, hd, body = get(hp, "/metrics")
    assert status == 200 and hd["Content-Type"].startswith("text/plain")
    assert b'rockstalk_tube_jobs{tube="a",state="buried"} 1' in body
    for path in ("/healthz", "/readyz", "/api/v1/stats", "/metrics",
                 "/nope"):
        _, hd, _ = get(hp, path)
        assert hd["Cache-Control"] == "no-store", path
        assert hd["X-Content-Type-Options"] == "nosniff", path
    assert get_json(hp, "/healthz") == (200, {"status": "ok"})
    assert get_json(hp, "/readyz") == (200, {"ready": True,
                                             "status": "serving"})
    c.close()


def test_errors(httpd):
    s, hp = httpd()
    wait_for(lambda: get(hp, "/api/v1/stats")[0] == 200, what="the API")
    # "/" is the web console (tests/test_console.py)
    for path in ("/api", "/api/v1", "/api/v1/", "/api/v1/nope",
                 "/api/v1/tubes/", "/api/v1/tubes/nope", "/api/v2/stats",
                 "/metricsx", "/healthz/"):
        status, hd, body = get(hp, path)
        assert status == 404, path
        assert hd["Content-Type"] == "application/json"
        assert "error" in json.loads(body), path
    for path in ("/api/v1/stats", "/api/v1/tubes/default", "/healthz",
                 "/metrics"):
        for method in ("POST", "DELETE", "PUT"):
            status, hd, body = get(hp, path, method)
            assert status == 405, (method, path)
            assert hd["Allow"] == "GET, HEAD"
            assert json.loads(body) == {"error": "method not allowed"}
    status, hd, body = get(hp, "/api/v1/stats", "HEAD")
    assert status == 200 and body == b"" and int(hd["Content-Length"]) > 0


def test_rates(httpd):
    s, hp = httpd()
    stop = threading.Event()

    def work():
        c = Client(s)
        c.cmd("use r"), c.cmd("watch r")
        while not stop.is_set():
            c.cmd("put 0 0 60 1", b"x")
            ln, _ = c.cmd("reserve")
            c.cmd("delete " + ln.split()[1])
        c.close()
    th = threading.Thread(target=work)
    th.start()
    try:
        def busy():
            st, t = get_json(hp, "/api/v1/tubes/r")
            return st == 200 and all(t["rates"][k] > 0 for k in t["rates"])
        wait_for(busy, timeout=10, what="non-zero rates of tube r")
    finally:
        stop.set()
        th.join()
    _, t = get_json(hp, "/api/v1/tubes/r")
    # every job put was reserved and deleted: the three rates are close
    assert abs(t["rates"]["puts"] - t["rates"]["deletes"]) <= \
        0.2 * t["rates"]["puts"] + 2, t["rates"]
    _, d = get_json(hp, "/api/v1/tubes/default")
    assert d["rates"] == {"puts": 0, "reserves": 0, "deletes": 0}


def test_metrics_alias_and_flags(httpd, tmp_path):
    s, hp = httpd(opt="--metrics")
    wait_for(lambda: b"rockstalk_uptime_seconds" in get(hp, "/metrics")[2],
             what="/metrics through --metrics")
    assert get(hp, "/healthz")[0] == 200
    wait_for(lambda: get(hp, "/api/v1/stats")[0] == 200, what="the API")
    for flags, msg in ((["--http", "127.0.0.1:1", "--metrics",
                         "127.0.0.1:2"], "given twice"),
                       (["--http", "nohost:80"], "bad --http address"),
                       (["--metrics", "1.2.3.4:99999"],
                        "bad --metrics address"),
                       (["--http", "[::1:80"], "bad --http address")):
        r = subprocess.run([ROCKSTALKD, "--memory", "-l", "127.0.0.1", "-p",
                            str(free_port())] + flags, capture_output=True,
                           timeout=10)
        assert r.returncode == 1, flags
        assert msg in r.stderr.decode(), (flags, r.stderr)


def listening_on(port):
    """The local addresses (hex, as /proc/net/tcp{,6} shows them) of the
    sockets listening on port."""
    out = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(f) as fh:
            for line in fh.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if state == "0A" and int(p, 16) == port:
                    out.append(addr)
    return out


def test_loopback_unless_told(rockstalkd):
    for arg, want in ((":%d", "0100007F"), ("%d", "0100007F"),
                      ("localhost:%d", "0100007F"),
                      ("0.0.0.0:%d", "00000000"),
                      ("[::1]:%d", "0" * 24 + "01000000")):
        hp = free_port()
        s = rockstalkd("--memory", "--http", arg % hp)
        assert listening_on(hp) == [want], arg
        if "::" not in arg:  # (no test traffic beyond 127.0.0.0/8)
            assert get(hp, "/healthz")[0] == 200
        s.stop()


def test_auth_file_closes_the_api(rockstalkd, tmp_path):
    hp = free_port()
    p = write_auth(tmp_path / "auth", auth_text())
    rockstalkd("--memory", "--auth-file", p, "--http", "127.0.0.1:%d" % hp)
    wait_for(lambda: b"rockstalk_auth_enabled 1" in get(hp, "/metrics")[2],
             what="/metrics")
    for path in ("/api/v1/stats", "/api/v1/tubes", "/api/v1/tubes/default",
                 "/api/v1/cluster"):
        status, hd, body = get(hp, path)
        assert status == 401, path
        assert hd["WWW-Authenticate"].startswith("Bearer")
        assert "error" in json.loads(body)
    assert get(hp, "/api/v1/nope")[0] == 404
    assert get(hp, "/healthz")[0] == 200
    assert get(hp, "/readyz")[0] == 200


def test_readyz_while_stopping(httpd):
    s, hp = httpd()
    wait_for(lambda: get(hp, "/readyz")[0] == 200, what="ready")
    c = Client(s)  # held open: the stop lingers (SHUTDOWN_LINGER_S)
    assert c.word("list-tube-used") == "USING"
    s.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: get(hp, "/readyz")[0] == 503, timeout=2,
             what="/readyz 503 while stopping")
    assert s.proc.poll() is None  # still lingering for c
    assert get_json(hp, "/readyz") == (503, {"ready": False,
                                             "status": "stopping"})
    assert get(hp, "/healthz")[0] == 200
    assert c.closed()  # the server's FIN
    c.close()
    assert s.proc.wait(10) == 0


def test_cluster(tmp_path):
    c = Cluster(tmp_path, tls=False)
    try:
        lead = c.wait_leader()
        views = {}

        def all_ready():
            for nd in c.nodes:
                st, v = get_json(nd.metrics_port, "/api/v1/cluster")
                if st != 200 or v["leader"] != lead:
                    return False
                views[nd.id] = v
            return all(get(nd.metrics_port, "/readyz")[0] == 200
                       for nd in c.nodes)
        wait_for(all_ready, timeout=15, what="every node ready")
        for nid, v in views.items():
            assert v["mode"] == "cluster" and v["node-id"] == nid
            assert v["role"] == ("leader" if nid == lead else "follower")
            assert v["serving"] == (nid == lead)
            assert v["term"] >= 1 and v["commit-index"] >= 1
            assert [w["id"] for w in v["voters"]] == [1, 2, 3]
            _, r = get_json(c.node(nid).metrics_port, "/readyz")
            assert r["status"] == ("serving" if nid == lead
                                   else "relaying to the leader")
        # the API's requests: a follower does not serve them (503 naming
        # the leader); the leader does
        for nd in c.nodes:
            st, _, body = get(nd.metrics_port, "/api/v1/jobs/1/kick",
                              method="POST")
            want = (404, None) if nd.id == lead else (503, lead)
            assert (st, json.loads(body).get("leader")) == want, body
        # alone, the last node knows no leader: not ready
        last = next(nd for nd in c.nodes if nd.id != lead)
        for nd in c.nodes:
            if nd is not last:
                nd.kill9()
        wait_for(lambda: get(last.metrics_port, "/readyz")[0] == 503,
                 timeout=15, what="/readyz 503 without a leader")
        _, r = get_json(last.metrics_port, "/readyz")
        assert r == {"ready": False, "status": "no leader"} or \
            r["status"] == "leading, not serving yet", r
        assert get(last.metrics_port, "/healthz")[0] == 200
    finally:
        c.stop()


def test_tubes_bounded_and_names(httpd):
    """More tubes than HTTPTUBES_MAX (1000): the first 1000 by name
    are listed, truncated says so, and a tube past them is not found; a
    name with '/' is found whole, percent-encoded or not."""
    s, hp = httpd()
    c = Client(s)
    names = ["t%04d" % i for i in range(1001)] + ["a/b$(x)"]
    c.send(b"".join(b"watch %s\r\n" % n.encode() for n in names))
    for _ in names:
        assert c.line().startswith("WATCHING")
    wait_for(lambda: get_json(hp, "/api/v1/tubes")[1]["count"] == 1003,
             what="1003 tubes in /api/v1/tubes")
    _, doc = get_json(hp, "/api/v1/tubes")
    listed = [t["name"] for t in doc["tubes"]]
    assert (doc["listed"], doc["truncated"]) == (1000, True)
    assert listed == sorted(["default"] + names)[:1000]
    assert listed[:2] == ["a/b$(x)", "default"] and listed[-1] == "t0997"
    assert get(hp, "/api/v1/tubes/t0997")[0] == 200
    assert get(hp, "/api/v1/tubes/t0998")[0] == 404
    for path in ("/api/v1/tubes/a/b$(x)", "/api/v1/tubes/a%2Fb%24%28x%29"):
        st, t = get_json(hp, path)
        assert st == 200 and t["name"] == "a/b$(x)", path
        assert t["watching"] == 1
    c.close()
