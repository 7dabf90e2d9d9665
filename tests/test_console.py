"""The web console (issue 29): its files served from the binary (GET / and
/console/NAME: Content-Type, ETag and 304, the security headers, 404 and
405, public with --auth-file while the API is not) and the console itself
in real headless Chromium (Debian's /usr/bin/chromium driven by npm's
playwright-core, tests/console/run.mjs): each page loads without a script
error or CSP violation, and kick, pause, clear, delete, move, kick a job
and set a priority done through the UI are checked through the beanstalkd
protocol afterwards; with an --auth-file, the login form, an action under
the session (its CSRF token) and the refusals.

The browser runs once per server (a module-scoped run of run.mjs, one
JSON line per step) and each step is a test of its own. Screenshots go to
pytest's temporary folder, or to docs/ (console-*.png, as shown in the
README) with CONSOLE_SHOTS=docs. Skipped only when /usr/bin/chromium is
missing (scripts/deps.sh installs it); npm's node_modules missing is a
failure (scripts/deps.sh runs npm ci)."""
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from chaos.netns import host_network_lock
from cluster import Cluster
from conftest import ROCKSTALKD, ROOT, Server, free_port, wait_for
from test_auth import TOKENS, Client, auth_text, write_auth

pytestmark = pytest.mark.not_via_follower("the HTTP server of one process")

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CONSOLE = os.path.join(ROOT, "console")
UPLOT = os.path.join(ROOT, "node_modules", "uplot")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")
TYPES = {".html": "text/html; charset=utf-8",
         ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8",
         ".txt": "text/plain; charset=utf-8"}


def start(tmp_path_factory, *flags):
    """A rockstalkd with --http: (Server, http port)."""
    d = str(tmp_path_factory.mktemp("console"))
    port, hp = free_port(), free_port()
    log = open(d + ".log", "ab")
    s = Server([ROCKSTALKD, "-l", "127.0.0.1", "-p", str(port), "-b", d,
                "--http", "127.0.0.1:%d" % hp] + list(flags), d, port, log)
    return s, hp


def stop(s):
    s.stop()
    s.log.close()


def get(hp, path, method="GET", headers=None):
    """(status, headers, body) of one request."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (hp, path),
                                 method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def console_files():
    return sorted(f for f in os.listdir(CONSOLE)
                  if os.path.splitext(f)[1] in (".html", ".js", ".css"))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    s, hp = start(tmp_path_factory)
    yield s, hp
    stop(s)


# ---- the files ----

def check_headers(hd, etag=True):
    assert hd["Content-Security-Policy"] == CSP
    assert hd["X-Content-Type-Options"] == "nosniff"
    assert hd["X-Frame-Options"] == "DENY"
    if etag:
        assert re.fullmatch(r'"[0-9a-f]{16}"', hd["ETag"]), hd["ETag"]
        assert hd["Cache-Control"] == "no-cache"


def test_each_console_file_served(plain):
    _, hp = plain
    for name in console_files():
        if name == "index.html":  # as / only (test_unknown_file...)
            continue
        st, hd, body = get(hp, "/console/" + name)
        assert st == 200, name
        assert hd["Content-Type"] == TYPES[os.path.splitext(name)[1]], name
        with open(os.path.join(CONSOLE, name), "rb") as f:
            assert body == f.read(), name
        check_headers(hd)
    st, hd, body = get(hp, "/")
    assert st == 200 and hd["Content-Type"] == TYPES[".html"]
    with open(os.path.join(CONSOLE, "index.html"), "rb") as f:
        assert body == f.read()
    check_headers(hd)


def test_uplot_served_with_its_licence(plain):
    _, hp = plain
    with open(os.path.join(UPLOT, "LICENSE"), "rb") as f:
        lic = f.read().strip()
    for name, sub in (("uPlot.iife.min.js", ".js"), ("uPlot.min.css", ".css")):
        st, hd, body = get(hp, "/console/" + name)
        assert st == 200 and hd["Content-Type"] == TYPES[sub]
        with open(os.path.join(UPLOT, "dist", name), "rb") as f:
            dist = f.read()
        assert body.startswith(b"/*! uPlot, " + lic) and body.endswith(dist)
        check_headers(hd)
    st, hd, body = get(hp, "/console/uPlot.LICENSE.txt")
    assert st == 200 and hd["Content-Type"] == TYPES[".txt"]
    assert body.strip() == lic and b"MIT" in body


def test_every_reference_resolves(plain):
    """What index.html loads and every module a module imports is served."""
    _, hp = plain
    with open(os.path.join(CONSOLE, "index.html")) as f:
        html = f.read()
    refs = re.findall(r'(?:src|href)="(console/[^"]+)"', html)
    assert len(refs) >= 4
    for name in console_files():
        if name.endswith(".js"):
            with open(os.path.join(CONSOLE, name)) as f:
                refs += ["console/" + m for m in
                         re.findall(r"from '\./([^']+)'", f.read())]
    for r in set(refs):
        assert get(hp, "/" + r)[0] == 200, r


def test_etag_and_304(plain):
    _, hp = plain
    st, hd, body = get(hp, "/console/app.js")
    tag = hd["ETag"]
    for inm in (tag, "W/" + tag, '"x", ' + tag, "*"):
        st, hd2, body2 = get(hp, "/console/app.js",
                             headers={"If-None-Match": inm})
        assert (st, body2) == (304, b""), inm
        assert hd2["ETag"] == tag
        check_headers(hd2)
    st, _, body2 = get(hp, "/console/app.js",
                       headers={"If-None-Match": '"0000000000000000"'})
    assert st == 200 and body2 == body
    # another file has another tag; HEAD: the headers without the body
    assert get(hp, "/console/style.css")[1]["ETag"] != tag
    st, hd, body = get(hp, "/console/app.js", method="HEAD")
    assert st == 200 and body == b"" and hd["ETag"] == tag


def test_unknown_file_and_other_methods(plain):
    _, hp = plain
    for path in ("/console/nope.js", "/console/", "/console",
                 "/console/index.html",
                 "/console/../Makefile", "/index.html", "/console/app.js/"):
        st, hd, body = get(hp, path)
        assert st == 404, path
        assert json.loads(body) == {"error": "not found"}
    for m in ("POST", "PUT", "DELETE"):
        st, hd, body = get(hp, "/console/app.js", method=m)
        assert st == 405 and hd["Allow"] == "GET, HEAD", m
        assert json.loads(body) == {"error": "method not allowed"}
        check_headers(hd, etag=False)


def test_console_public_api_not_with_auth_file(tmp_path_factory, tmp_path):
    p = write_auth(tmp_path / "auth", auth_text())
    s, hp = start(tmp_path_factory, "--auth-file", p)
    try:
        for path in ("/", "/console/app.js", "/console/uPlot.iife.min.js"):
            st, hd, _ = get(hp, path)
            assert st == 200, path
            check_headers(hd)
        assert get(hp, "/api/v1/stats")[0] == 401
        assert get(hp, "/api/v1/tubes")[0] == 401
        st, _, _ = get(hp, "/api/v1/stats", headers={
            "Authorization": "Bearer " + TOKENS["root"]})
        assert st == 200
    finally:
        stop(s)


def test_no_inline_code_or_markup_from_data():
    """What the CSP would refuse, and HTML built from strings."""
    with open(os.path.join(CONSOLE, "index.html")) as f:
        html = f.read()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html)
    assert not re.search(r"\sstyle=|<style|\son[a-z]+=", html)
    for name in console_files():
        if name.endswith(".js"):
            with open(os.path.join(CONSOLE, name)) as f:
                js = f.read()
            for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML",
                        "eval(", "new Function", "document.write",
                        "setAttribute('style'"):
                assert bad not in js, (name, bad)


# ---- in the browser ----

def need_browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("no %s (scripts/deps.sh installs Debian's chromium)"
                    % CHROMIUM)
    if not os.path.isdir(os.path.join(ROOT, "node_modules",
                                      "playwright-core")):
        pytest.fail("node_modules/playwright-core missing: run "
                    "scripts/deps.sh")
    if shutil.which("node") is None:
        pytest.fail("node missing: run scripts/deps.sh")


def run_browser(tmp_path_factory, cfg):
    """Runs run.mjs with cfg; {step: (ok, error)}."""
    shots = os.environ.get("CONSOLE_SHOTS")
    cfg["docs"] = shots == "docs"
    cfg["shots"] = (os.path.join(ROOT, "docs") if cfg["docs"]
                    else str(tmp_path_factory.mktemp("shots")))
    os.makedirs(cfg["shots"], exist_ok=True)
    cfg["chromium"] = CHROMIUM
    path = str(tmp_path_factory.mktemp("cfg") / "cfg.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    argv = ["node", os.path.join(ROOT, "tests", "console", "run.mjs"), path]
    # no chaos test's namespaces come or go while the browser runs
    # (Chromium fails loads in flight with ERR_NETWORK_CHANGED then)
    with host_network_lock(shared=True):
        r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    steps = {}
    for ln in r.stdout.splitlines():
        if ln.startswith("{"):
            d = json.loads(ln)
            steps[d["step"]] = (d["ok"], d.get("error"))
    assert r.returncode == 0 and steps, (r.returncode, r.stdout, r.stderr)
    return steps


def yaml_of(c, line):
    ln, body = c.cmd(line)
    assert ln.startswith("OK "), (line, ln)
    return dict(x.split(": ", 1) for x in body.decode().splitlines()
                if ": " in x)


def put(c, tube, body, pri=0, delay=0):
    assert c.word("use " + tube) == "USING"
    ln, _ = c.cmd("put %d %d 60 %d" % (pri, delay, len(body)), body)
    assert ln.startswith("INSERTED "), ln
    return int(ln.split()[1])


def bury(c, tube, n):
    assert c.word("watch " + tube) == "WATCHING"
    ids = []
    for _ in range(n):
        jid = put(c, tube, b"to bury")
        ln, _ = c.cmd("reserve-job %d" % jid)
        assert ln.startswith("RESERVED"), ln
        assert c.word("bury %d 0" % jid) == "BURIED"
        ids.append(jid)
    return ids


def fill(s):
    """The jobs the open-mode run acts on: their ids."""
    c = Client(s)
    bury(c, "c-kick", 3)
    put(c, "c-pause", b"p")
    for i in range(3):
        put(c, "c-clear", b"c%d" % i)
    for i in range(2):
        put(c, "c-clear", b"d%d" % i, delay=3600)
    bury(c, "c-clear", 1)
    for i in range(60):
        put(c, "c-list", b"job needle-%d" % i)
    ids = {"json": put(c, "c-json", b'{"a":1,"nested":{"b":[1,2]}}'),
           "buried": bury(c, "c-job", 1)[0],
           "pri": put(c, "c-job", b"pri", pri=100),
           "del": put(c, "c-del", b"delete me"),
           "move": put(c, "c-move", b"move me", pri=42),
           "html": put(c, "c-json",
                       b'<img src=x onerror="alert(1)"><b>x</b>')}
    put(c, "c/odd(1)$;+", b"odd")
    c.s.close()
    return ids


OPEN_STEPS = ["assets-load", "overview", "overview-charts", "tubes",
              "tubes-oldest-ready", "kick", "pause", "clear", "jobs-paging",
              "jobs-search", "job-json", "escaping", "odd-tube-name",
              "job-kick", "job-priority", "job-delete", "job-move",
              "connections", "cluster", "keyboard", "phone", "no-page-errors"]


def load(s, stop_at):
    """Puts, reserves and deletes in tube c-load until stop_at (monotonic),
    a few per second: rates for the screenshots' charts."""
    c = Client(s)
    assert c.word("watch c-load") == "WATCHING"
    i = 0
    while time.monotonic() < stop_at:
        put(c, "c-load", b"load")
        i += 1
        if i % 4 == 0:  # reserved one put in four later: rates differ
            continue
        while True:
            ln, _ = c.cmd("reserve-with-timeout 0")
            if not ln.startswith("RESERVED"):
                break
            c.cmd("delete " + ln.split()[1])
        time.sleep(0.05 + 0.15 * (i % 7) / 7)
    c.s.close()


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    need_browser()
    s, hp = start(tmp_path_factory)
    loader = None
    try:
        if os.environ.get("CONSOLE_SHOTS") == "docs":
            # history samples every 10 s: charts need a few
            loader = threading.Thread(target=load, daemon=True,
                                      args=(s, time.monotonic() + 60))
            loader.start()
            time.sleep(32)
        ids = fill(s)
        watcher = Client(s)  # a worker the connections page lists
        assert watcher.word("watch c-watch") == "WATCHING"
        steps = run_browser(tmp_path_factory, {
            "base": "http://127.0.0.1:%d/" % hp, "mode": "open", "ids": ids})
        watcher.s.close()
        if loader:
            loader.join()
        yield s, ids, steps
    finally:
        stop(s)


@pytest.mark.parametrize("step", OPEN_STEPS)
def test_browser(opened, step):
    _, _, steps = opened
    assert step in steps, "run.mjs did not report " + step
    ok, err = steps[step]
    assert ok, err


def test_actions_seen_through_the_protocol(opened):
    s, ids, steps = opened
    c = Client(s)
    t = yaml_of(c, "stats-tube c-kick")
    assert (t["current-jobs-buried"], t["current-jobs-ready"]) == ("0", "3")
    assert yaml_of(c, "stats-tube c-pause")["pause"] == "3600"
    j = yaml_of(c, "stats-job %d" % ids["buried"])
    assert (j["state"], j["kicks"]) == ("ready", "1")
    assert yaml_of(c, "stats-job %d" % ids["pri"])["pri"] == "7"
    assert c.cmd("peek %d" % ids["del"])[0] == "NOT_FOUND"
    assert yaml_of(c, "stats-tube c-list")["current-jobs-ready"] == "60"


def test_clear_seen_through_the_protocol(opened):
    s, ids, steps = opened
    assert steps.get("clear", (False,))[0], steps.get("clear")
    c = Client(s)
    t = yaml_of(c, "stats-tube c-clear")
    assert (t["current-jobs-ready"], t["current-jobs-buried"],
            t["current-jobs-delayed"]) == ("0", "0", "2")


def test_move_seen_through_the_protocol(opened):
    s, ids, steps = opened
    assert steps.get("job-move", (False,))[0], steps.get("job-move")
    c = Client(s)
    assert c.cmd("peek %d" % ids["move"])[0] == "NOT_FOUND"
    assert c.word("use c-moved") == "USING"
    ln, body = c.cmd("peek-ready")
    assert ln.startswith("FOUND ") and body == b"move me", (ln, body)
    j = yaml_of(c, "stats-job %s" % ln.split()[1])
    assert (j["tube"], j["pri"]) == ("c-moved", "42")


AUTH_STEPS = ["login-form", "login-refused", "login", "auth-kick",
              "csrf-refused", "logout", "no-page-errors"]


@pytest.fixture(scope="module")
def authed(tmp_path_factory):
    need_browser()
    p = write_auth(tmp_path_factory.mktemp("auth") / "auth", auth_text())
    s, hp = start(tmp_path_factory, "--auth-file", p)
    try:
        c = Client(s, TOKENS["root"])
        bury(c, "c-kick", 3)
        c.s.close()
        steps = run_browser(tmp_path_factory, {
            "base": "http://127.0.0.1:%d/" % hp, "mode": "auth",
            "token": TOKENS["root"], "badToken": "no-such-token"})
        yield s, steps
    finally:
        stop(s)


@pytest.mark.parametrize("step", AUTH_STEPS)
def test_browser_auth(authed, step):
    _, steps = authed
    assert step in steps, "run.mjs did not report " + step
    ok, err = steps[step]
    assert ok, err


def test_auth_action_seen_through_the_protocol(authed):
    s, steps = authed
    assert steps.get("auth-kick", (False,))[0], steps.get("auth-kick")
    c = Client(s, TOKENS["root"])
    t = yaml_of(c, "stats-tube c-kick")
    assert (t["current-jobs-buried"], t["current-jobs-ready"]) == ("0", "3")


def test_browser_cluster(tmp_path_factory):
    """The cluster page of a 3-node cluster's leader: its role, term, the
    three members with their progress and a "Make leader" button on each
    follower; a transfer cancelled, then one confirmed, after which the
    page shows this node as a follower and says transfers go through the
    leader; the leadership moved, seen through the protocol (stats on the
    new leader, rockstalk-cluster-status)."""
    need_browser()
    c = Cluster(tmp_path_factory.mktemp("cluster"), tls=False)
    try:
        lead = c.wait_leader()
        hp = c.node(lead).metrics_port
        to = next(nd.id for nd in c.nodes if nd.id != lead)

        def ready():  # the leader serves, and its view says so
            st, _, body = get(hp, "/api/v1/cluster")
            return (st == 200 and json.loads(body)["leader"] == lead and
                    json.loads(body)["serving"] and
                    get(hp, "/readyz")[0] == 200 and
                    get(hp, "/api/v1/session")[0] == 200)
        wait_for(ready, timeout=15, what="the leader serving its API")
        steps = run_browser(tmp_path_factory, {
            "base": "http://127.0.0.1:%d/" % hp, "mode": "cluster",
            "to": to})
        for step in ("cluster-page", "cluster-transfer-cancel",
                     "cluster-transfer", "cluster-follower",
                     "no-page-errors"):
            assert step in steps, "run.mjs did not report " + step
            assert steps[step][0], (step, steps[step][1])
        # through the protocol: the new leader's own stats and status
        wait_for(lambda: c.leader() == to, timeout=15,
                 what="node %d leading" % to)
        cl = Client(c.node(to))
        assert yaml_of(cl, "stats")["rockstalk-cluster-role"] == "leader"
        st = yaml_of(cl, "rockstalk-cluster-status")
        assert (st["node-id"], st["leader"]) == (str(to), str(to))
        cl.s.close()
        with open(c.node(lead).dir + ".log", "rb") as f:
            assert b"http: (open API) asked node %d to lead" % to in f.read()
    finally:
        c.stop()
