#!/usr/bin/env python3
"""Regenerates the fuzz seed corpus in tests/fuzz/corpus/ (checked in):

  proto/  command lines (CRLF removed) that the exchange files in
          protocol/exchanges/ send, up to 224 bytes, at most two per verb
          and 8 others (put bodies, unknown commands), plus a few hostile
          lines (NULs, huge numbers, a 200-byte tube name);
  meta/   JobMeta v1 values (store.c's on-disk job record): the three
          states, edge numbers, 1- and 200-byte tube names, and a few broken
          ones (bad version, bad state, wrong length).
  tls/    a client's first flight (net/tls.c's server): ClientHellos made by
          Python's ssl module (OpenSSL) for TLS 1.3 and for TLS 1.2 at most,
          cut short, and a few non-TLS inputs. ClientHellos hold fresh
          random bytes and key shares: each run makes new seeds.
  http/   the HTTP API's parsing (fuzz_http.c): a byte picking the parser,
          then what the console, curl or a hostile client sends: login
          bodies (form and JSON, good and bad escapes), Authorization
          values, session ids, Origin and Host pairs, query numbers,
          state lists, tubes/ and jobs/ paths.

    /usr/bin/python3 tests/fuzz/make_corpus.py
"""
import hashlib
import os
import ssl
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import replay  # noqa: E402


VERBS = set(b"put peek peek-ready peek-delayed peek-buried reserve "
            b"reserve-with-timeout reserve-job delete release bury kick "
            b"kick-job touch stats stats-job stats-tube use watch ignore "
            b"list-tubes list-tube-used list-tubes-watched pause-tube "
            b"quit".split())


def proto_seeds():
    seen, per_word = [], {}
    exdir = os.path.join(ROOT, "protocol", "exchanges")
    for name in sorted(os.listdir(exdir)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(exdir, name)) as f:
            steps = replay.parse_text(f.read(), name)
        for st in steps:
            if st.op not in ("send", "bytewise"):
                continue
            for line in st.data.split(b"\r\n"):
                # at most two lines per verb, and a few others (bodies,
                # unknown commands): a few dozen seeds
                word = line.split(b" ")[0]
                if word not in VERBS:
                    word = b"?"
                if 0 < len(line) <= 224 and line not in seen and \
                        per_word.get(word, 0) < (8 if word == b"?" else 2):
                    per_word[word] = per_word.get(word, 0) + 1
                    seen.append(line)
    seen += [b"put 0 0 10 18446744073709551616", b"put 0 0 10 -1",
             b"put 0 0 10 4294967295", b"use a\x00b", b"\x00",
             b"pause-tube " + b"t" * 200 + b" 4294967295",
             b"reserve-with-timeout -9223372036854775809",
             b"kick 18446744073709551615", b"release 1 2 3 4",
             b"watch " + b"-" * 10, b"stats-job 00000000000000000000001"]
    return seen


def meta(state=1, tube=b"default", flags=0, pri=0, ttr=1, delay=0,
         size=0, counts=(0, 0, 0, 0, 0), created=0, ready=0, version=1,
         tube_len=None):
    tl = len(tube) if tube_len is None else tube_len
    return (struct.pack("<BBBBIIII5Iqq", version, state, tl, flags, pri, ttr,
                        delay, size, *counts, created, ready) + tube)


def meta_seeds():
    big = 2**32 - 1
    return [
        meta(),
        meta(state=2, tube=b"t", delay=30, ready=1700000000 * 10**9),
        meta(state=3, tube=b"x" * 200, flags=1, pri=big, ttr=big,
             size=65535, counts=(big,) * 5, created=-1, ready=2**63 - 1),
        meta(state=1, tube=b"a-b_c(d)$e;f.g+h/i", pri=1024, ttr=120,
             size=1 << 30, counts=(1, 2, 3, 4, 5), created=10**18),
        meta(version=2),
        meta(state=0),
        meta(state=4),
        meta(tube=b"", tube_len=0),
        meta(tube=b"abc", tube_len=4),
        meta(tube=b"y" * 201),
        meta()[:55],
        b"",
    ]


def client_hello(max_version=None, sni=None):
    """The first bytes an OpenSSL client sends, taken from a memory BIO."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if max_version is not None:
        ctx.maximum_version = max_version
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(incoming, outgoing, server_hostname=sni)
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def tls_seeds():
    hello = client_hello(sni="rockstalk-node-1")
    return [
        hello,
        client_hello(),
        client_hello(max_version=ssl.TLSVersion.TLSv1_2),
        hello[:5],
        hello[:len(hello) // 2],
        hello + b"\x15\x03\x03\x00\x02\x02\x28",  # then an alert
        b"GET / HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\xff\xff",
        b"",
    ]


def http_seeds():
    sid = b"0123456789abcdef" * 4
    by_parser = [
        [b"token=s3cret%21+x%2Fy", b"a=1&token=root-token&b=2",
         b'{"token":"root-token"}', b'{"token" :\n "x", "other": 1}',
         b"token=%zz", b"token=%4 1", b"token=%00", b"token=" + b"x" * 300,
         b'{"token""x"}', b'{"token":"a\\"}', b"tok=x&token="],
        [b"Bearer root-token", b"bearer    t0k", b"Basic dXNlcjpwYXNz",
         b"Bearer " + b"t" * 257],
        [sid, sid.upper(), sid[:63], sid + b"0"],
        [b"http://127.0.0.1:8080\n127.0.0.1:8080",
         b"http://evil.example\n127.0.0.1:8080", b"null\n127.0.0.1",
         b"http://\n"],
        [b"0", b"10000", b"18446744073709551615", b"18446744073709551616",
         b"0004294967295", b"-1", b"1 ", b""],
        [b"ready,delayed,buried", b"reserved", b"ready,", b",ready",
         b"buried,buried", b"READY"],
        [b"a/b$(x)/jobs", b"p.x/kick", b"12", b"12/move",
         b"18446744073709551615/kick", b"0/kick", b"0" * 32 + b"1",
         b"/priority"],
    ]
    seeds = []
    for k, group in enumerate(by_parser):
        seeds += [bytes([k]) + s for s in group]
    seeds.append(bytes([128 + 3 - 128 % 7]) + b"https://h:1\nh:1")  # tls
    return seeds


def write(dirname, seeds):
    d = os.path.join(HERE, "corpus", dirname)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    for s in seeds:
        name = hashlib.sha1(s).hexdigest()[:16]
        with open(os.path.join(d, name), "wb") as f:
            f.write(s)
    print("%s: %d seeds" % (d, len(seeds)))


if __name__ == "__main__":
    write("proto", proto_seeds())
    write("meta", meta_seeds())
    write("tls", tls_seeds())
    write("http", http_seeds())
