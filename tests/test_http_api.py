"""The HTTP API's requests the loop answers (protocol/PROTOCOL.md section
18): GET tubes/NAME/jobs (paged with after/limit/next, in the order the
server acts on them), GET jobs/ID (the stats-job fields and the body,
base64 and a text preview; a body read back from disk), the actions (tube
kick and pause, job delete, kick and priority) each checked through the
protocol, every error (400, 404, 405, 409, 410), bearer tokens with an
--auth-file (401, 403, per tube) and the bound of 64 requests in flight
(503 at once, never a hang; the loop serves clients meanwhile)."""
import base64
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import free_port, wait_for
from httpclient import call, ok, yaml_map
from test_auth import TOKENS, Client, auth_text, write_auth

pytestmark = pytest.mark.not_via_follower("the HTTP server of one process")


def fill(s):
    """Tube a: ready 1..6 (pri 6..1, so 6 first), delayed 7..9, buried
    10..12 (bury order), reserved 13..14 by the returned client."""
    c = Client(s)
    assert c.word("use a") == "USING"
    for i in range(6):
        assert c.word("put %d 0 60 3" % (6 - i), b"r%02d" % i) == "INSERTED"
    for d in (300, 100, 200):
        assert c.word("put 5 %d 60 3" % d, b"del") == "INSERTED"
    assert c.word("watch a") == "WATCHING"
    assert c.word("ignore default") == "WATCHING"
    for i in range(3):  # 3 more at pri 0: reserved, then buried
        assert c.word("put 0 0 60 3", b"bur") == "INSERTED"
        ln, _ = c.cmd("reserve")
        assert ln.split()[:2] == ["RESERVED", str(10 + i)], ln
        assert c.word("bury %d 0" % (10 + i)) == "BURIED"
    for i in range(2):
        assert c.word("put 0 0 60%d 3" % i, b"res") == "INSERTED"
        ln, _ = c.cmd("reserve")
        assert ln.split()[:2] == ["RESERVED", str(13 + i)], ln
    return c


def pages(hp, state, limit):
    """Every id of a's list in state, page by page; the pages' count."""
    ids, after, n = [], None, 0
    while True:
        q = "tubes/a/jobs?state=%s&limit=%d" % (state, limit)
        body = ok(hp, q + ("&after=%d" % after if after else ""))
        n += 1
        assert body["tube"] == "a" and body["state"] == state
        assert len(body["jobs"]) <= limit
        ids += [j["id"] for j in body["jobs"]]
        for j in body["jobs"]:
            assert j["state"] == state and j["body-size"] == 3
            assert set(j) >= {"id", "pri", "delay", "ttr", "age",
                              "time-left"}
        if body["next"] is None:
            return ids, n
        assert body["next"] == ids[-1]
        after = body["next"]


def test_listing_pages_in_order(api):
    s, hp = api()
    c = fill(s)
    assert pages(hp, "ready", 4) == ([6, 5, 4, 3, 2, 1], 2)
    assert pages(hp, "ready", 1000) == ([6, 5, 4, 3, 2, 1], 1)
    assert pages(hp, "delayed", 2) == ([8, 9, 7], 2)
    assert pages(hp, "buried", 1) == ([10, 11, 12], 3)
    assert pages(hp, "reserved", 1) == ([13, 14], 2)
    # the same order as list-jobs
    ln, body = c.cmd("list-jobs a ready 10")
    assert [int(x[2:]) for x in body.decode().split("\n")[1:] if x] == \
        [6, 5, 4, 3, 2, 1]
    assert ok(hp, "tubes/a/jobs")["state"] == "ready"  # the default
    d = ok(hp, "tubes/a/jobs?state=delayed")["jobs"][0]
    assert d["id"] == 8 and d["delay"] == 100 and 95 <= d["time-left"] <= 100
    r = ok(hp, "tubes/a/jobs?state=reserved")["jobs"][1]
    assert r["ttr"] == 601 and r["time-left"] > 590
    assert ok(hp, "tubes/default/jobs")["jobs"] == []


def test_listing_deep_pages(api):
    """Past the first 1024 of a heap the page comes from one pass."""
    s, hp = api("--memory")
    c = Client(s)
    assert c.word("use big") == "USING"
    for i in range(1500):
        c.send(b"put %d 0 60 1\r\nx\r\n" % (i % 7))
    for i in range(1500):
        assert c.line().startswith("INSERTED")
    want = sorted(range(1, 1501), key=lambda i: ((i - 1) % 7, i))
    got, after = [], None
    while True:
        q = "tubes/big/jobs?limit=1000" + ("&after=%d" % after if after
                                          else "")
        b = ok(hp, q)
        got += [j["id"] for j in b["jobs"]]
        after = b["next"]
        if after is None:
            break
    assert got == want


def test_job_and_body(api):
    s, hp = api("-m", "0")  # bodies leave memory once stored
    c = Client(s)
    text = "héllo wörld " * 30  # 390 bytes of UTF-8
    raw = bytes(range(256))
    assert c.word("put 7 0 30 %d" % len(text.encode()), text.encode()) \
        == "INSERTED"
    assert c.word("put 8 0 30 256", raw) == "INSERTED"
    assert c.word("put 9 0 30 0", b"") == "INSERTED"
    wait_for(lambda: yaml_map(c.cmd("stats")[1])[
        "rockstalk-body-cache-bytes"] == "0", what="the bodies on disk only")
    j = ok(hp, "jobs/1")
    # read back from disk, as a peek's would be
    assert yaml_map(c.cmd("stats")[1])["rockstalk-body-cache-misses"] == "1"
    ln, st = c.cmd("stats-job 1")
    for k, v in yaml_map(st).items():
        if k not in ("age", "time-left"):
            assert str(j[k]) == v, k
    assert base64.b64decode(j["body"]) == text.encode()
    pv = j["preview"].encode()
    assert len(pv) <= 256 and text.encode().startswith(pv)
    assert len(pv) >= 253  # cut only at a character's start
    j = ok(hp, "jobs/2")
    assert base64.b64decode(j["body"]) == raw and j["preview"] is None
    j = ok(hp, "jobs/3")
    assert j["body"] == "" and j["preview"] == "" and j["body-size"] == 0
    # the protocol still gets the same bytes
    ln, body = c.cmd("peek 2")
    assert ln == "FOUND 2 256" and body == raw


def test_actions_through_the_protocol(api):
    s, hp = api()
    c = fill(s)
    # kick a tube: buried first
    assert ok(hp, "tubes/a/kick?n=2", "POST") == {"ok": True, "kicked": 2}
    assert yaml_map(c.cmd("stats-job 10")[1])["state"] == "ready"
    assert yaml_map(c.cmd("stats-job 12")[1])["state"] == "buried"
    assert ok(hp, "tubes/a/kick", "POST")["kicked"] == 1  # n: 1
    assert ok(hp, "tubes/a/kick?n=10", "POST")["kicked"] == 3  # the delayed
    assert ok(hp, "tubes/a/kick?n=10", "POST")["kicked"] == 0
    # kick a job
    assert c.word("reserve-job 7") == "RESERVED"
    assert c.word("bury 7 3") == "BURIED"
    assert ok(hp, "jobs/7/kick", "POST") == {"ok": True, "kicked": 7}
    st = yaml_map(c.cmd("stats-job 7")[1])
    assert st["state"] == "ready" and st["kicks"] == "2"
    st, _, e = call(hp, "jobs/7/kick", "POST")
    assert st == 409 and "error" in e
    # priority: the job moves to the front
    assert ok(hp, "jobs/5/priority?pri=0", "POST") == {"ok": True, "pri": 0}
    assert yaml_map(c.cmd("stats-job 5")[1])["pri"] == "0"
    # pri 0 like 10..12, and the lowest id of them
    assert c.cmd("peek-ready")[0].split()[:2] == ["FOUND", "5"]
    assert ok(hp, "jobs/6/priority?pri=4294967295", "POST")["pri"] == \
        4294967295
    st, _, e = call(hp, "jobs/13/priority?pri=1", "POST")
    assert st == 409, e  # reserved
    # delete
    assert ok(hp, "jobs/6", "DELETE") == {"ok": True, "deleted": 6}
    assert c.cmd("peek 6")[0] == "NOT_FOUND"
    assert call(hp, "jobs/6", "DELETE")[0] == 404
    assert call(hp, "jobs/13", "DELETE")[0] == 409  # reserved
    # pause
    assert ok(hp, "tubes/a/pause?seconds=30", "POST")["seconds"] == 30
    st = yaml_map(c.cmd("stats-tube a")[1])
    assert st["pause"] == "30" and int(st["pause-time-left"]) >= 29
    # durable: a restart keeps what the actions did
    c.close()
    s.restart()
    c = Client(s)
    assert c.cmd("peek 6")[0] == "NOT_FOUND"
    assert yaml_map(c.cmd("stats-job 5")[1])["pri"] == "0"
    assert yaml_map(c.cmd("stats-job 7")[1])["state"] == "ready"
    assert s.log.name and "deleted job 6" in open(s.log.name).read()


def test_errors(api):
    s, hp = api("--memory")
    Client(s).word("put 1 0 60 1", b"x")
    cases = [
        ("tubes/nope/jobs", "GET", 404),
        ("tubes/nope/kick", "POST", 404),
        ("tubes/nope/pause?seconds=1", "POST", 404),
        ("jobs/99", "GET", 404),
        ("jobs/99", "DELETE", 404),
        ("jobs/99/kick", "POST", 404),
        ("jobs/1/nope", "POST", 404),
        ("tubes/default/nope", "GET", 404),
        ("tubes/default/jobs?state=gone", "GET", 400),
        ("tubes/default/jobs?limit=0", "GET", 400),
        ("tubes/default/jobs?limit=1001", "GET", 400),
        ("tubes/default/jobs?limit=x", "GET", 400),
        ("tubes/default/jobs?after=-1", "GET", 400),
        ("tubes/default/jobs?after=99", "GET", 410),
        ("tubes/default/jobs?after=1&state=buried", "GET", 410),
        ("tubes/default/jobs?state=" + "x" * 40, "GET", 400),
        ("tubes/default/kick?n=10001", "POST", 400),
        ("tubes/default/pause", "POST", 400),
        ("tubes/default/pause?seconds=4294967296", "POST", 400),
        ("jobs/1/priority", "POST", 400),
        ("jobs/1/priority?pri=1x", "POST", 400),
        ("jobs/abc", "GET", 400),
        ("jobs/0", "GET", 400),
        ("jobs/1", "POST", 405),
        ("jobs/1/kick", "GET", 405),
        ("jobs/1/kick", "DELETE", 405),
        ("tubes/default/jobs", "POST", 405),
        ("tubes/default/kick", "GET", 405),
        ("tubes/default/jobs", "PUT", 405),
        ("tubes", "POST", 405),
    ]
    for path, method, want in cases:
        st, hd, e = call(hp, path, method)
        assert st == want, (path, method, st, e)
        assert isinstance(e["error"], str), path
        if want == 405:
            assert "GET" in hd["Allow"], path
    assert call(hp, "tubes/default/jobs", "HEAD")[0] == 200


def test_auth(rockstalkd, tmp_path):
    hp = free_port()
    p = write_auth(tmp_path / "auth", auth_text())
    s = rockstalkd("--auth-file", p, "--http", "127.0.0.1:%d" % hp)
    c = Client(s, TOKENS["root"])
    for t in ("p.x", "q.x"):
        assert c.word("use " + t) == "USING"
        assert c.word("put 1 0 60 1", b"x") == "INSERTED"
    assert c.word("use p.x") == "USING"  # keeps p.x alive
    wait_for(lambda: call(hp, "tubes/p.x", token=TOKENS["root"])[0] == 200,
             what="the documents")
    # no token, a bad one, another scheme: 401 with a Bearer challenge
    for tok in (None, "wrong-token", ""):
        for path, m in (("tubes/p.x/jobs", "GET"), ("jobs/1", "DELETE"),
                        ("stats", "GET"), ("tubes/p.x", "GET")):
            st, hd, e = call(hp, path, m, tok)
            assert st == 401, (path, tok, e)
            assert hd["WWW-Authenticate"].startswith("Bearer")
    req = urllib.request.Request(
        "http://127.0.0.1:%d/api/v1/jobs/1" % hp,
        headers={"Authorization": "Basic " + TOKENS["root"]})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=5)
    assert ei.value.code == 401
    # reads need inspect on the tube, actions admin
    want = {  # token: (read p.x, act p.x, read q.x, act q.x)
        "root": (200, 200, 200, 200),
        "tadm": (200, 200, 403, 403),
        "insp": (200, 403, 403, 403),
        "prod": (403, 403, 403, 403),
        "cons": (403, 403, 403, 403),
        "other": (403, 403, 403, 403),
    }
    for who, (rp, ap, rq, aq) in want.items():
        tok = TOKENS[who]
        assert call(hp, "tubes/p.x/jobs", token=tok)[0] == rp, who
        assert call(hp, "jobs/1", token=tok)[0] == rp, who
        assert call(hp, "tubes/p.x", token=tok)[0] == rp, who
        assert call(hp, "tubes/p.x/pause?seconds=0", "POST", tok)[0] == ap
        assert call(hp, "jobs/1/priority?pri=2", "POST", tok)[0] == ap, who
        assert call(hp, "tubes/q.x/jobs", token=tok)[0] == rq, who
        assert call(hp, "jobs/2", token=tok)[0] == rq, who
        assert call(hp, "jobs/2/kick", "POST", tok)[0] in \
            ((409,) if aq == 200 else (aq,)), who
    # the documents: stats and cluster with any inspect
    wait_for(lambda: call(hp, "stats", token=TOKENS["root"])[0] == 200,
             what="the documents")
    assert call(hp, "stats", token=TOKENS["insp"])[0] == 200
    assert call(hp, "cluster", token=TOKENS["tadm"])[0] == 200
    assert call(hp, "stats", token=TOKENS["prod"])[0] == 403
    assert call(hp, "tubes", token=TOKENS["root"])[0] == 200
    # another identity sees the tubes it may inspect (test_http_api2.py)
    st, _, tl = call(hp, "tubes", token=TOKENS["tadm"])
    assert st == 200 and [t["name"] for t in tl["tubes"]] == ["p.x"]
    # an unknown tube: 403 without the right, 404 with it
    assert call(hp, "tubes/p.nope/jobs", token=TOKENS["insp"])[0] == 404
    assert call(hp, "tubes/q.nope/jobs", token=TOKENS["insp"])[0] == 403
    # a refused action changed nothing; an allowed one is logged with the
    # identity, never the token
    assert ok(hp, "jobs/1", "DELETE", TOKENS["tadm"])["deleted"] == 1
    assert yaml_map(c.cmd("stats-job 2")[1])["pri"] == "1"
    log = open(s.log.name).read()
    assert "http: tadm deleted job 1" in log
    assert "http: root set the priority of job 1" in log
    assert not any(t in log for t in TOKENS.values())
    c.close()  # (the server's stop would linger for it)


def test_queue_bound(api, monkeypatch):
    """Every answer held 1.5 s: beyond 64 in flight a request gets 503 at
    once; the rest answer; the loop serves clients meanwhile."""
    monkeypatch.setenv("ROCKSTALKD_FAULT_HTTP_DELAY_MS", "1500")
    s, hp = api("--memory")
    c = Client(s)
    assert c.word("put 1 0 60 1", b"x") == "INSERTED"
    res = []
    lock = threading.Lock()

    def one():
        t0 = time.monotonic()
        st = call(hp, "jobs/1", timeout=10)[0]
        with lock:
            res.append((st, time.monotonic() - t0))
    ts = [threading.Thread(target=one) for _ in range(100)]
    for t in ts:
        t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    assert c.word("stats-job 1") == "OK"  # the loop is not blocked
    assert time.monotonic() - t0 < 0.5
    for t in ts:
        t.join(15)
    assert len(res) == 100
    busy = [d for st, d in res if st == 503]
    served = [d for st, d in res if st == 200]
    assert len(served) + len(busy) == 100
    assert 1 <= len(served) <= 64 and len(busy) >= 36, len(served)
    assert max(busy) < 1.4 and min(served) >= 1.4
    # and afterwards the queue is free again
    assert call(hp, "jobs/1")[0] == 200
