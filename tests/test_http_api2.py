"""The HTTP API's newer requests (protocol/PROTOCOL.md section 18, issue
29): POST tubes/NAME/clear, POST jobs/ID/move (one stored unit: a kill -9
keeps the new job only), GET connections, GET history, a tube's
oldest-ready-age, per-identity filtering of GET tubes, console sessions
(cookie, CSRF token, Origin check), the security headers, and HTTPS with
--tls-cert (--http-plain to opt out)."""
import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import free_port, wait_for
from httpclient import call, ok, yaml_map
from test_auth import TOKENS, Client, auth_text, digest, write_auth

pytestmark = pytest.mark.not_via_follower("the HTTP server of one process")

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")


def put(c, tube, n, pri=5, delay=0, body=b"x"):
    assert c.word("use " + tube) == "USING"
    ids = []
    for _ in range(n):
        ln, _ = c.cmd("put %d %d 60 %d" % (pri, delay, len(body)), body)
        assert ln.startswith("INSERTED"), ln
        ids.append(int(ln.split()[1]))
    return ids


# ---- clear ----

def test_clear(api):
    s, hp = api()
    c = Client(s)
    ready = put(c, "a", 3)
    delayed = put(c, "a", 2, delay=300)
    assert c.word("watch a") == "WATCHING"
    buried = put(c, "a", 2)
    for j in buried:
        assert c.word("reserve-job %d" % j) == "RESERVED"
        assert c.word("bury %d 1" % j) == "BURIED"
    held = put(c, "a", 1)[0]
    assert c.word("reserve-job %d" % held) == "RESERVED"
    other = put(c, "b", 1)[0]
    # bad states: 400, nothing deleted
    for q in ("reserved", "ready,", "ready,bogus", "", "READY"):
        st, _, e = call(hp, "tubes/a/clear?state=" + q, "POST")
        assert st == 400 and "state" in e["error"], (q, st, e)
    assert call(hp, "tubes/a/clear", "GET")[0] == 405
    assert call(hp, "tubes/nope/clear", "POST")[0] == 404
    assert ok(hp, "tubes/a/clear?state=delayed", "POST") == \
        {"ok": True, "deleted": 2}
    for j in delayed:
        assert c.cmd("peek %d" % j)[0] == "NOT_FOUND"
    assert c.cmd("peek %d" % ready[0])[0].startswith("FOUND")
    assert ok(hp, "tubes/a/clear?state=buried,ready", "POST") == \
        {"ok": True, "deleted": 5}
    for j in ready + buried:
        assert c.cmd("peek %d" % j)[0] == "NOT_FOUND"
    # the reserved job and the other tube stay
    assert c.cmd("peek %d" % held)[0].startswith("FOUND")
    assert c.cmd("peek %d" % other)[0].startswith("FOUND")
    assert ok(hp, "tubes/a/clear", "POST")["deleted"] == 0
    # durable: a restart keeps the deletes
    c.close()
    s.restart()
    c = Client(s)
    for j in ready + delayed + buried:
        assert c.cmd("peek %d" % j)[0] == "NOT_FOUND"
    assert c.cmd("peek %d" % held)[0].startswith("FOUND")
    assert "http: (open API) cleared 5 jobs of tube a" in open(s.log.name).read()
    c.close()


def test_clear_many(api):
    s, hp = api("--memory")  # the loop turns on its own between steps
    c = Client(s)
    assert c.word("use big") == "USING"
    for i in range(1500):  # three steps of 512
        c.send(b"put 1 0 60 1\r\nx\r\n")
    for i in range(1500):
        assert c.line().startswith("INSERTED")
    assert ok(hp, "tubes/big/clear", "POST")["deleted"] == 1500
    assert yaml_map(c.cmd("stats-tube big")[1])["current-jobs-ready"] == "0"
    c.close()


# ---- move ----

def test_move(api):
    s, hp = api("-m", "0")  # bodies leave memory: read back first
    c = Client(s)
    a = put(c, "a", 1, pri=7, body=b"hello")[0]
    d = put(c, "a", 1, delay=300, body=b"later")[0]
    assert c.word("watch a") == "WATCHING"
    r = put(c, "a", 1)[0]
    wait_for(lambda: yaml_map(c.cmd("stats")[1])[
        "rockstalk-body-cache-bytes"] == "0", what="the bodies on disk only")
    assert c.word("reserve-job %d" % r) == "RESERVED"
    # refusals change nothing
    for q, want in (("", 400), ("?tube=", 400), ("?tube=-bad", 400),
                    ("?tube=" + "x" * 201, 400)):
        st, _, e = call(hp, "jobs/%d/move%s" % (a, q), "POST")
        assert st == want, (q, st, e)
    assert call(hp, "jobs/%d/move?tube=b" % r, "POST")[0] == 409
    assert call(hp, "jobs/999/move?tube=b", "POST")[0] == 404
    assert call(hp, "jobs/%d/move?tube=b" % a, "GET")[0] == 405
    assert c.cmd("peek %d" % a)[0].startswith("FOUND")  # (it reads it)
    wait_for(lambda: yaml_map(c.cmd("stats")[1])[
        "rockstalk-body-cache-bytes"] == "0", what="the bodies on disk again")
    misses = int(yaml_map(c.cmd("stats")[1])["rockstalk-body-cache-misses"])
    m = ok(hp, "jobs/%d/move?tube=b" % a, "POST")
    assert m["ok"] is True and m["moved"] == a and m["tube"] == "b"
    new = m["id"]
    assert new > r
    # its body was read back from disk first
    assert int(yaml_map(c.cmd("stats")[1])[
        "rockstalk-body-cache-misses"]) == misses + 1
    assert c.cmd("peek %d" % a)[0] == "NOT_FOUND"
    ln, body = c.cmd("peek %d" % new)
    assert ln == "FOUND %d 5" % new and body == b"hello"
    st = yaml_map(c.cmd("stats-job %d" % new)[1])
    assert (st["tube"], st["state"], st["pri"], st["ttr"]) == \
        ("b", "ready", "7", "60")
    # a delayed job becomes ready in its new tube
    m = ok(hp, "jobs/%d/move?tube=a" % d, "POST")
    st = yaml_map(c.cmd("stats-job %d" % m["id"])[1])
    assert (st["tube"], st["state"], st["delay"]) == ("a", "ready", "0")
    assert "moved job %d to tube b as job %d" % (a, new) in \
        open(s.log.name).read()
    # kill -9 after the reply: the move is durable, one job of the two
    c.close()
    s.kill9()
    s.restart()
    c = Client(s)
    assert c.cmd("peek %d" % a)[0] == "NOT_FOUND"
    ln, body = c.cmd("peek %d" % new)
    assert ln == "FOUND %d 5" % new and body == b"hello"
    assert yaml_map(c.cmd("stats-job %d" % new)[1])["tube"] == "b"
    c.close()


def test_move_buried_and_cluster_free_ids(api):
    s, hp = api()
    c = Client(s)
    assert c.word("watch a") == "WATCHING"
    j = put(c, "a", 1, pri=3, body=b"b1")[0]
    assert c.word("reserve-job %d" % j) == "RESERVED"
    assert c.word("bury %d 3" % j) == "BURIED"
    m = ok(hp, "jobs/%d/move?tube=a" % j, "POST")  # the same tube: fine
    assert yaml_map(c.cmd("stats-job %d" % m["id"])[1])["state"] == "ready"
    # a put after the move gets the next id
    assert put(c, "a", 1)[0] == m["id"] + 1
    c.close()


def test_move_in_a_cluster(tmp_path):
    """In cluster mode the move is one Raft entry: the leader killed right
    after the reply, the next leader has the new job and not the old."""
    from cluster import Cluster
    cl = Cluster(tmp_path, tls=False)
    try:
        lead = cl.node(cl.wait_leader())
        c = Client(lead)
        old = put(c, "a", 1, pri=4, body=b"moved")[0]
        wait_for(lambda: call(lead.metrics_port, "jobs/%d" % old)[0] == 200,
                 what="the API on the leader")
        m = ok(lead.metrics_port, "jobs/%d/move?tube=b" % old, "POST")
        c.close()
        for nd in cl.nodes:  # each node's log holds the entry
            if nd is not lead:
                cl.wait_caught_up(nd.id)
        lead.kill9()
        nxt = cl.node(cl.wait_leader())
        c = Client(nxt)
        assert c.cmd("peek %d" % old)[0] == "NOT_FOUND"
        ln, body = c.cmd("peek %d" % m["id"])
        assert ln == "FOUND %d 5" % m["id"] and body == b"moved"
        st = yaml_map(c.cmd("stats-job %d" % m["id"])[1])
        assert (st["tube"], st["pri"], st["state"]) == ("b", "4", "ready")
        c.close()
    finally:
        cl.stop()


# ---- connections ----

def test_connections(api):
    s, hp = api()
    p = Client(s)
    put(p, "pt", 1)
    w = Client(s)
    assert w.word("watch pt") == "WATCHING"
    ln, _ = w.cmd("reserve")
    assert ln.startswith("RESERVED")
    b = Client(s)
    assert b.word("watch other") == "WATCHING"
    b.send(b"reserve\r\n")  # blocks
    time.sleep(0.3)
    body = ok(hp, "connections")
    assert body["count"] == body["listed"] == 3
    assert body["truncated"] is False
    cs = body["connections"]
    assert [x["id"] for x in cs] == sorted(x["id"] for x in cs)
    cp, cw, cb = cs
    for x in cs:
        assert x["transport"] == "tcp" and x["identity"] is None
        assert x["addr"].startswith("127.0.0.1:")
        assert isinstance(x["age"], int) and isinstance(x["idle"], int)
        assert set(x) == {"id", "transport", "addr", "identity", "using",
                          "watching", "reserved", "waiting", "producer",
                          "worker", "age", "idle"}
    assert cp["using"] == "pt" and cp["producer"] and not cp["worker"]
    assert cw["reserved"] == 1 and cw["worker"] and not cw["waiting"]
    assert cw["watching"] == ["default", "pt"]
    assert cb["waiting"] is True and cb["reserved"] == 0
    assert call(hp, "connections", "POST")[0] == 405
    # idle counts from the last command
    time.sleep(1.1)
    assert p.word("use pt") == "USING"
    cs = ok(hp, "connections")["connections"]
    assert cs[0]["idle"] == 0 and cs[1]["idle"] >= 1
    for x in (p, w, b):
        x.close()


# ---- history ----

def test_history(api, monkeypatch):
    monkeypatch.setenv("ROCKSTALKD_FAULT_HTTP_HIST_MS", "200")
    s, hp = api()
    c = Client(s)
    h = ok(hp, "history")
    assert h["interval"] == 0.2
    put(c, "h", 20)
    assert c.word("watch h") == "WATCHING"
    for _ in range(5):
        ln, _ = c.cmd("reserve")
        assert c.word("delete " + ln.split()[1]) == "DELETED"
    time.sleep(0.7)
    h = ok(hp, "history")
    n = len(h["t"])
    assert 2 <= n <= 360
    for k in ("puts", "reserves", "deletes", "timeouts"):
        assert len(h[k]) == n, k
    assert h["t"] == sorted(h["t"])
    assert abs(h["t"][-1] - time.time()) < 3
    # the activity shows, then quiet intervals are 0 (the rates use each
    # interval's measured length, which a loaded machine stretches)
    for k in ("puts", "reserves", "deletes"):
        assert sum(h[k]) > 0, (k, h[k])
    assert sum(h["timeouts"]) == 0
    assert all(round(v, 2) == v for k in ("puts", "reserves", "deletes")
               for v in h[k])
    n0 = len(h["t"])
    wait_for(lambda: len(ok(hp, "history")["t"]) >= n0 + 2)
    h = ok(hp, "history")
    assert [h[k][-1] for k in ("puts", "reserves", "deletes")] == [0, 0, 0]
    assert call(hp, "history", "DELETE")[0] == 405
    c.close()


def test_history_default_interval(api):
    s, hp = api()
    h = ok(hp, "history")
    assert h == {"interval": 10, "t": [], "puts": [], "reserves": [],
                 "deletes": [], "timeouts": []}


# ---- oldest-ready-age ----

def churn(c, tube, rounds=3, n=300):
    """n jobs put, reserved and deleted, rounds times (the tube's id heap
    is pruned and rebuilt)."""
    assert c.word("use " + tube) == "USING"
    assert c.word("watch " + tube) == "WATCHING"
    for _ in range(rounds):
        c.send(b"put 0 0 60 1\r\nx\r\n" * n)
        ids = []
        for _ in range(n):
            ln = c.line()
            assert ln.startswith("INSERTED"), ln
            ids.append(int(ln.split()[1]))
        c.send(b"".join(b"reserve-job %d\r\ndelete %d\r\n" % (j, j)
                        for j in ids))
        for j in ids:
            assert c.reply()[0] == "RESERVED %d 1" % j
            assert c.reply()[0] == "DELETED"


def test_oldest_ready_age(api):
    s, hp = api()
    c = Client(s)
    t0 = time.monotonic()
    old = put(c, "o", 1, pri=9)[0]
    put(c, "e", 1, delay=300)  # none ready: 0
    churn(c, "o")
    time.sleep(max(0, 2.1 - (time.monotonic() - t0)))
    put(c, "o", 2, pri=1)  # better priority, younger

    def tube(name):  # (the documents are up to a second old)
        wait_for(lambda: ok(hp, "tubes/" + name)["ready"] >= 0)
        return ok(hp, "tubes/" + name)

    wait_for(lambda: tube("o")["ready"] == 3)
    assert tube("o")["oldest-ready-age"] >= 1
    assert tube("e")["oldest-ready-age"] == 0
    # reserving the oldest: the next is young
    assert c.word("reserve-job %d" % old) == "RESERVED"
    wait_for(lambda: tube("o")["ready"] == 2)
    assert tube("o")["oldest-ready-age"] <= 1
    # released: it is the oldest again (its put time, not its release)
    assert c.word("release %d 9 0" % old) == "RELEASED"
    wait_for(lambda: tube("o")["ready"] == 3)
    assert tube("o")["oldest-ready-age"] >= 2
    # deleted, with the others: 0
    for j in (old, old + 902, old + 903):
        assert c.word("delete %d" % j) == "DELETED", j
    wait_for(lambda: tube("o")["ready"] == 0)
    assert tube("o")["oldest-ready-age"] == 0
    c.close()


# ---- GET tubes per identity ----

def test_tubes_per_identity(rockstalkd, tmp_path):
    hp = free_port()
    p = write_auth(tmp_path / "auth", auth_text())
    s = rockstalkd("--auth-file", p, "--http", "127.0.0.1:%d" % hp)
    c = Client(s, TOKENS["root"])
    for t in ("p.a", "p.b", "q.a"):
        put(c, t, 1)
    wait_for(lambda: ok(hp, "tubes", token=TOKENS["root"])["count"] == 4)
    names = [t["name"] for t in ok(hp, "tubes", token=TOKENS["root"])["tubes"]]
    assert names == ["default", "p.a", "p.b", "q.a"]
    for who in ("insp", "tadm"):
        b = ok(hp, "tubes", token=TOKENS[who])
        assert [t["name"] for t in b["tubes"]] == ["p.a", "p.b"], who
        assert (b["count"], b["listed"], b["truncated"]) == (2, 2, False)
        assert b["tubes"][0]["ready"] == 1
        assert set(b["tubes"][0]) == set(ok(hp, "tubes/p.a", token=TOKENS["root"]))
    # no inspect anywhere: an empty list, not the names
    for who in ("prod", "cons", "other"):
        b = ok(hp, "tubes", token=TOKENS[who])
        assert b["count"] == 0 and b["tubes"] == [], who
    assert call(hp, "tubes", token="wrong")[0] == 401
    c.close()


# ---- console sessions ----

def cookie_of(hd):
    v = hd["Set-Cookie"]
    assert v.startswith("rs_session="), v
    return v.split(";")[0].split("=", 1)[1]


def login(hp, token, form=True, **kw):
    if form:
        data = b"token=" + urllib.request.quote(token).encode()
        hd = {"Content-Type": "application/x-www-form-urlencoded"}
    else:
        data = json.dumps({"token": token}).encode()
        hd = {"Content-Type": "application/json"}
    return call(hp, "session", "POST", data=data, headers=hd, **kw)


@pytest.fixture
def authapi(rockstalkd, tmp_path):
    hp = free_port()
    p = write_auth(tmp_path / "auth", auth_text())
    s = rockstalkd("--auth-file", p, "--http", "127.0.0.1:%d" % hp)
    s.auth_path = p
    return s, hp


def test_session_login_and_use(authapi):
    s, hp = authapi
    c = Client(s, TOKENS["root"])
    put(c, "p.x", 2)
    put(c, "q.x", 1)
    st, hd, b = login(hp, TOKENS["tadm"])
    assert st == 200 and b["identity"] == "tadm", b
    sid, csrf = cookie_of(hd), b["csrf"]
    assert len(sid) == 64 and len(csrf) == 64 and sid != csrf
    assert hd["Set-Cookie"] == ("rs_session=%s; Path=/; HttpOnly; "
                                "SameSite=Strict" % sid)
    ck = {"Cookie": "rs_session=" + sid}
    assert ok(hp, "session", headers=ck) == \
        {"identity": "tadm", "csrf": csrf, "auth": True}
    # the cookie authenticates as tadm: reads and the per-tube rules
    assert ok(hp, "tubes/p.x/jobs", headers=ck)["jobs"][0]["id"] == 1
    assert call(hp, "tubes/q.x/jobs", headers=ck)[0] == 403
    assert [t["name"] for t in ok(hp, "tubes", headers=ck)["tubes"]] == \
        ["p.x"]
    # an action by cookie needs the session's X-CSRF-Token
    for extra in ({}, {"X-CSRF-Token": "0" * 64}, {"X-CSRF-Token": "bad"},
                  {"X-CSRF-Token": csrf.upper()}):
        st, _, e = call(hp, "jobs/1/priority?pri=3", "POST",
                        headers=dict(ck, **extra))
        assert (st, e) == (403, {"error": "csrf"}), extra
    assert yaml_map(c.cmd("stats-job 1")[1])["pri"] == "5"
    assert ok(hp, "jobs/1/priority?pri=3", "POST",
              headers=dict(ck, **{"X-CSRF-Token": csrf}))["pri"] == 3
    # a bearer token needs none (and wins over a cookie)
    assert ok(hp, "jobs/2/priority?pri=4", "POST", TOKENS["root"])["pri"] == 4
    # the form decoded: another field first, a percent-escape
    st, _, b3 = call(hp, "session", "POST", data=b"x=1&token=root%2dtoken")
    assert st == 200 and b3["identity"] == "root"
    # JSON login too
    st, hd2, b2 = login(hp, TOKENS["insp"], form=False)
    assert st == 200 and b2["identity"] == "insp"
    ck2 = {"Cookie": "rs_session=" + cookie_of(hd2)}
    assert call(hp, "jobs/1/kick", "POST",
                headers=dict(ck2, **{"X-CSRF-Token": b2["csrf"]}))[0] == 403
    # logout: CSRF needed, then the cookie is dead
    assert call(hp, "session", "DELETE", headers=ck)[0] == 403
    st, hd, _ = call(hp, "session", "DELETE",
                     headers=dict(ck, **{"X-CSRF-Token": csrf}))
    assert st == 200 and "Max-Age=0" in hd["Set-Cookie"]
    assert call(hp, "session", headers=ck)[0] == 401
    assert call(hp, "tubes/p.x/jobs", headers=ck)[0] == 401
    assert call(hp, "session", headers=ck2)[0] == 200
    # never logged: tokens, session ids, CSRF tokens
    log = open(s.log.name).read()
    assert "http: tadm opened a console session" in log
    for secret in list(TOKENS.values()) + [sid, csrf, b2["csrf"]]:
        assert secret not in log
    c.close()


def test_session_refusals(authapi):
    s, hp = authapi
    for data, hd in ((b"token=wrong", None), (b"", None), (b"tok=x", None),
                     (b"token=root%2-token", None), (b"token=", None),
                     (b"token=root%00-token", None),
                     (b'{"token":"wrong"}', None), (b'{"token":1}', None),
                     (b"token=" + TOKENS["root"].encode() + b"x", None)):
        st, _, e = call(hp, "session", "POST", data=data, headers=hd)
        assert (st, e) == (401, {"error": "unauthorized"}), data
    st, _, _ = call(hp, "session", "POST", data=b"token=" + b"x" * 2000)
    assert st == 413
    # the form is percent-decoded strictly: %HH (either case) only
    for data in (b"token=root%2Dtoken", b"a=1&token=%72oot%2dtoken&b"):
        assert call(hp, "session", "POST", data=data)[0] == 200, data
    for data in (b"token=root%2 Dtoken", b"token=root-token%",
                 b"token=root-token%2", b"token=root%zz-token",
                 b"token=root-token%00", b'{"token""root-token"}'):
        st, _, e = call(hp, "session", "POST", data=data)
        assert (st, e) == (401, {"error": "unauthorized"}), data
    # no cookie, a malformed one, an unknown one
    for ck in (None, "rs_session=abc", "rs_session=" + "a" * 64):
        st, _, e = call(hp, "session", headers={"Cookie": ck} if ck else {})
        assert st == 401, ck
        st, _, e = call(hp, "stats", headers={"Cookie": ck} if ck else {})
        assert st == 401, ck
    # a cross-site login is refused by its Origin
    req_hd = {"Origin": "http://evil.example",
              "Content-Type": "application/x-www-form-urlencoded"}
    st, hd, e = call(hp, "session", "POST",
                     data=b"token=" + TOKENS["root"].encode(), headers=req_hd)
    assert st == 403 and "Set-Cookie" not in hd
    assert call(hp, "session", "PUT")[0] == 405


def test_session_reload_and_cap(authapi):
    s, hp = authapi
    st, hd, b = login(hp, TOKENS["tadm"])
    ck_t = {"Cookie": "rs_session=" + cookie_of(hd)}
    st, hd, b = login(hp, TOKENS["root"])
    ck_r = {"Cookie": "rs_session=" + cookie_of(hd)}
    # a reload that changes tadm's token drops its session, not root's
    text = auth_text().replace(digest(TOKENS["tadm"]),
                               digest("tadm-new-token"))
    write_auth(pathlib.Path(s.auth_path), text)
    s.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: call(hp, "session", headers=ck_t)[0] == 401,
             what="the reload")
    assert call(hp, "session", headers=ck_r)[0] == 200
    # at most 256 live: the oldest goes
    cks = []
    for _ in range(256):
        st, hd, _ = login(hp, TOKENS["insp"])
        assert st == 200
        cks.append({"Cookie": "rs_session=" + cookie_of(hd)})
    assert call(hp, "session", headers=ck_r)[0] == 401  # the oldest
    assert call(hp, "session", headers=cks[0])[0] == 200
    assert call(hp, "session", headers=cks[-1])[0] == 200


def test_open_mode_origin_and_csrf(api):
    s, hp = api()
    c = Client(s)
    put(c, "a", 1)
    b = ok(hp, "session")
    assert b["identity"] is None and b["auth"] is False
    csrf = b["csrf"]
    assert len(csrf) == 64 and ok(hp, "session")["csrf"] == csrf
    here = "http://127.0.0.1:%d" % hp
    # curl sends no Origin: fine
    assert ok(hp, "jobs/1/priority?pri=1", "POST")["pri"] == 1
    for origin in ("http://evil.example", "https://127.0.0.1:%d" % hp,
                   "http://127.0.0.1:%d" % (hp + 1), "null", ""):
        st, _, e = call(hp, "jobs/1/priority?pri=2", "POST",
                        headers={"Origin": origin})
        assert st == 403, origin
    assert yaml_map(c.cmd("stats-job 1")[1])["pri"] == "1"
    assert ok(hp, "jobs/1/priority?pri=2", "POST",
              headers={"Origin": here})["pri"] == 2
    # a GET is not checked; an X-CSRF-Token, when sent, must match
    assert ok(hp, "jobs/1", headers={"Origin": "http://evil.example"})
    assert call(hp, "jobs/1/priority?pri=3", "POST",
                headers={"Origin": here, "X-CSRF-Token": "1" * 64})[0] == 403
    assert ok(hp, "jobs/1/priority?pri=3", "POST",
              headers={"Origin": here, "X-CSRF-Token": csrf})["pri"] == 3
    # no sessions in open mode: POST answers as GET, no cookie
    st, hd, b = login(hp, "anything")
    assert st == 200 and b["auth"] is False and "Set-Cookie" not in hd
    assert call(hp, "session", "DELETE")[0] == 200
    c.close()


# ---- security headers ----

def raw_get(port, path, method="GET"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers


def test_security_headers(api):
    s, hp = api()
    wait_for(lambda: raw_get(hp, "/api/v1/stats")[0] == 200)
    for path, method, want in (("/healthz", "GET", 200),
                               ("/readyz", "GET", 200),
                               ("/metrics", "GET", 200),
                               ("/api/v1/stats", "GET", 200),
                               ("/api/v1/tubes/default", "GET", 200),
                               ("/api/v1/jobs/9", "GET", 404),
                               ("/api/v1/connections", "GET", 200),
                               ("/nope", "GET", 404),
                               ("/api/v1/stats", "POST", 405),
                               ("/api/v1/jobs/x", "GET", 400)):
        st, hd = raw_get(hp, path, method)
        assert st == want, (path, st)
        assert hd["Content-Security-Policy"] == CSP, path
        assert hd["X-Content-Type-Options"] == "nosniff", path
        assert hd["Referrer-Policy"] == "no-referrer", path
        assert hd["X-Frame-Options"] == "DENY", path
        if path.startswith("/api/v1/"):
            assert hd["Cache-Control"] == "no-store", path


# ---- HTTPS ----

@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    from cluster import make_certs
    d = str(tmp_path_factory.mktemp("httpcerts"))
    make_certs(d, 1)
    return d


def tls_ctx(certs):
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.check_hostname = False  # node1's certificate names no host
    return ctx


def tls_flags(certs):
    return ["--tls-cert", os.path.join(certs, "node1.pem"),
            "--tls-key", os.path.join(certs, "node1.key")]


def test_https(rockstalkd, certs, tmp_path):
    hp = free_port()
    p = write_auth(tmp_path / "auth", auth_text())
    s = rockstalkd("--auth-file", p, "--http", "127.0.0.1:%d" % hp,
                   *tls_flags(certs))
    ctx = tls_ctx(certs)
    assert ok(hp, "stats", token=TOKENS["root"], scheme="https", ctx=ctx)
    # the console's cookie is Secure over HTTPS
    st, hd, b = login(hp, TOKENS["root"], scheme="https", ctx=ctx)
    assert st == 200 and hd["Set-Cookie"].endswith("; Secure")
    ck = {"Cookie": "rs_session=" + cookie_of(hd), "X-CSRF-Token": b["csrf"],
          "Origin": "https://127.0.0.1:%d" % hp}
    c = Client(s, TOKENS["root"])
    put(c, "p.x", 1)
    assert ok(hp, "jobs/1/priority?pri=1", "POST", headers=ck,
              scheme="https", ctx=ctx)["pri"] == 1
    # a plain-HTTP client gets no answer: never plain on the TLS port
    with pytest.raises((urllib.error.URLError, ConnectionError,
                        http_client().HTTPException)):
        urllib.request.urlopen("http://127.0.0.1:%d/healthz" % hp, timeout=5)
    raw = socket.create_connection(("127.0.0.1", hp), timeout=5)
    raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    try:
        while True:
            d = raw.recv(4096)
            if not d:
                break
            got += d
    except (ConnectionError, socket.timeout):
        pass
    assert b"HTTP/1.1 200" not in got and b'"ok"' not in got
    raw.close()
    c.close()


def http_client():
    import http.client
    return http.client


def test_http_plain_opt_out(rockstalkd, certs):
    hp = free_port()
    rockstalkd("--http", "127.0.0.1:%d" % hp, "--http-plain",
               *tls_flags(certs))
    assert ok(hp, "session")["auth"] is False  # plain HTTP
    # open mode over HTTPS: the Origin's scheme must be https
    hp = free_port()
    s = rockstalkd("--http", "127.0.0.1:%d" % hp, *tls_flags(certs))
    c = Client(s)
    put(c, "a", 1)
    ctx = tls_ctx(certs)
    for origin, want in (("http://127.0.0.1:%d" % hp, 403),
                         ("https://127.0.0.1:%d" % hp, 200)):
        st, _, _ = call(hp, "jobs/1/priority?pri=1", "POST", scheme="https",
                        ctx=ctx, headers={"Origin": origin})
        assert st == want, origin
    c.close()


def test_https_start_refusals(certs, tmp_path):
    exe = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), os.environ.get("ROCKSTALKD",
                                                    "rockstalkd"))
    http = ["--http", "127.0.0.1:%d" % free_port()]
    key = os.path.join(certs, "node1.key")
    pem = os.path.join(certs, "node1.pem")
    for flags in (["--tls-cert", pem, "--tls-key", str(tmp_path / "none")],
                  ["--tls-cert", key, "--tls-key", key]):
        p = subprocess.run([exe, "--memory", "-p", str(free_port())] + http +
                           flags, capture_output=True, timeout=20)
        assert p.returncode != 0, flags
        # (the tls:// credentials' check or the HTTP server's, first)
        assert any(w in p.stderr for w in (b"key", b"certificate",
                                           b"HTTPS")), p.stderr


# ---- who may ----

def test_new_endpoints_auth(authapi):
    s, hp = authapi
    c = Client(s, TOKENS["root"])
    j1 = put(c, "p.x", 1)[0]
    j2 = put(c, "q.x", 1)[0]
    for t in ("p.x", "q.x"):
        assert c.word("watch " + t) == "WATCHING"
    want = {  # token: (clear p.x, move p.x->p.y, move p.x->q.y,
        #          connections, history)
        "root": (200, 200, 200, 200, 200),
        "tadm": (200, 200, 403, 403, 200),
        "insp": (403, 403, 403, 403, 200),
        "prod": (403, 403, 403, 403, 403),
        "cons": (403, 403, 403, 403, 403),
        "other": (403, 403, 403, 403, 403),
    }
    for who, (cl, mv, mq, co, hi) in want.items():
        tok = TOKENS[who]
        # (a state= that is bad, so that an allowed clear changes nothing)
        assert call(hp, "tubes/p.x/clear?state=bogus", "POST",
                    tok)[0] == (400 if cl == 200 else cl), who
        if mq != 200:  # (root's move to q.y comes last)
            assert call(hp, "jobs/%d/move?tube=q.y" % j1, "POST",
                        tok)[0] == mq, who
        assert call(hp, "connections", token=tok)[0] == co, who
        assert call(hp, "history", token=tok)[0] == hi, who
        if mv == 200:  # moves j1 within p.*: a new id each time
            m = ok(hp, "jobs/%d/move?tube=p.y" % j1, "POST", tok)
            assert call(hp, "jobs/%d" % j1, token=TOKENS["root"])[0] == 404
            j1 = m["id"]
            assert c.cmd("peek %d" % j1)[0].startswith("FOUND")
        else:
            assert call(hp, "jobs/%d/move?tube=p.y" % j1, "POST",
                        tok)[0] == mv, who
    assert ok(hp, "jobs/%d/move?tube=q.y" % j1, "POST",
              TOKENS["root"])["tube"] == "q.y"
    # admin on the target but not on the job's tube: 403, nothing moved
    assert call(hp, "jobs/%d/move?tube=p.z" % j2, "POST",
                TOKENS["tadm"])[0] == 403
    assert c.cmd("peek %d" % j2)[0].startswith("FOUND")
    # no token: 401 everywhere
    for path, m in (("tubes/p.x/clear", "POST"), ("connections", "GET"),
                    ("history", "GET"), ("jobs/%d/move?tube=p.y" % j1,
                                         "POST")):
        assert call(hp, path, m)[0] == 401, path
    # connections shows identities
    cs = ok(hp, "connections", token=TOKENS["root"])["connections"]
    assert [x["identity"] for x in cs] == ["root"]
    c.close()
