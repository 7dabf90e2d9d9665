"""A client of the HTTP API (protocol/PROTOCOL.md section 18) for the
tests: one request and its JSON answer (the `api` fixture, a server with
--http on a free port, is in conftest.py). Shared by test_http_api.py and
test_http_api2.py."""
import json
import urllib.error
import urllib.request



def call(port, path, method="GET", token=None, headers=None, data=None,
         scheme="http", ctx=None, timeout=5):
    """(status, headers, JSON body or None) of one request."""
    req = urllib.request.Request("%s://127.0.0.1:%d/api/v1/%s"
                                 % (scheme, port, path), method=method,
                                 data=data, headers=headers or {})
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            st, hd, body = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        st, hd, body = e.code, e.headers, e.read()
    assert hd["Content-Type"] == "application/json", (path, hd)
    return st, hd, json.loads(body) if body else None


def ok(port, path, method="GET", token=None, **kw):
    """The JSON body of a request that must answer 200."""
    st, _, body = call(port, path, method, token, **kw)
    assert st == 200, (path, st, body)
    return body


def yaml_map(body):
    """A protocol YAML reply (stats, stats-tube) as a dict of strings."""
    return dict(ln.split(": ", 1) for ln in body.decode().splitlines()
                if ": " in ln)

