'use strict';
// Shared helpers for the Node.js client checks (jackd_check.js,
// fivebeans_check.js): host/port, the check runner and its output format,
// assertions, and the strict YAML check of stats bodies.
const fs = require('fs');
const path = require('path');
const util = require('util');
const yaml = require('js-yaml');

const HOST = process.argv[2] || process.env.BEANSTALK_HOST || '127.0.0.1';
const PORT = parseInt(process.argv[3] || process.env.BEANSTALK_PORT || '11300', 10);
// Set by tests/test_clients.py for its beanstalkd 1.12 reference run only.
const TOLERATE_1_12 = process.env.TOLERATE_BEANSTALKD_1_12_BUGS === '1';
const NOTE_1_12 = 'tolerated beanstalkd 1.12 bug (issues 262, 380): the job expired only once its idle holder sent a command';
const FAIL_1_12 = 'job with a 1 s ttr not ready again 4 s after it was reserved (its holder was idle)';
const STATS_KEYS = JSON.parse(fs.readFileSync(path.join(__dirname, 'stats_keys.json'), 'utf8'));

class CheckFailed extends Error {}

function show(v) {
  if (Buffer.isBuffer(v)) return v.length > 40 ? `<Buffer ${v.length} bytes>` : `<Buffer ${v.toString('hex')}>`;
  if (typeof v === 'string' && v.length > 80) return `<string ${v.length} chars>`;
  const s = util.inspect(v, { breakLength: Infinity, depth: 3, maxArrayLength: 60 });
  return s.length > 300 ? `${s.slice(0, 300)}...` : s;
}

function ok(cond, msg) {
  if (!cond) throw new CheckFailed(msg);
}

function eq(got, want, what) {
  const same = Buffer.isBuffer(want)
    ? Buffer.isBuffer(got) && got.equals(want)
    : util.isDeepStrictEqual(got, want);
  if (!same) throw new CheckFailed(`${what}: got ${show(got)}, want ${show(want)}`);
}

// Awaits p, which must reject with an error whose message (or the error
// itself, for callback-style string errors) starts with `word`.
async function rejects(p, word, what) {
  let r;
  try {
    r = await p;
  } catch (e) {
    const msg = typeof e === 'string' ? e : (e && e.message) || String(e);
    if (msg.startsWith(word)) return msg;
    throw new CheckFailed(`${what}: expected ${word}, got error ${show(msg)}`);
  }
  throw new CheckFailed(`${what}: expected ${word}, got ${show(r)}`);
}

const now = () => Number(process.hrtime.bigint()) / 1e9;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls the async pred every 20 ms until it returns true; throws CheckFailed
// naming what once ms milliseconds have passed. For a state the check can
// only observe (another connection's blocked reserve, say), where a fixed
// sleep could end too soon on a loaded machine.
async function until(pred, what, ms = 10000) {
  const end = now() + ms / 1000;
  while (!(await pred())) {
    if (now() > end) throw new CheckFailed(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// Loads a stats body with js-yaml's core schema (YAML 1.2: plain ints,
// floats, booleans, null, strings; duplicate keys and syntax errors throw)
// and checks that 1.12's keys come first, in 1.12's order (extra keys may
// follow), and that every numeric field is a number.
function strictStats(text, what, kind) {
  ok(typeof text === 'string', `${what}: body is ${typeof text}`);
  ok(text.startsWith('---\n'), `${what}: body does not start with ---: ${show(text.slice(0, 20))}`);
  const data = yaml.load(text, { schema: yaml.CORE_SCHEMA, json: false });
  ok(data && typeof data === 'object' && !Array.isArray(data), `${what}: YAML is not a mapping`);
  const spec = STATS_KEYS[kind];
  const keys = Object.keys(data);
  const missing = spec.keys.filter((k) => !keys.includes(k));
  ok(missing.length === 0, `${what}: missing keys ${missing.join(', ')}`);
  const i = spec.keys.findIndex((k, j) => keys[j] !== k);
  ok(i < 0, `${what}: key ${i} is ${keys[i]}, want ${spec.keys[i]} (1.12's order)`);
  for (const [k, v] of Object.entries(data)) {
    if (!spec.keys.includes(k)) {
      // extra keys, after 1.12's: any scalar
      ok(v === null || ['number', 'string', 'boolean'].includes(typeof v), `${what}: ${k} is ${show(v)}`);
    } else if (!spec.strings.includes(k)) {
      ok(typeof v === 'number' && Number.isFinite(v), `${what}: ${k} is ${show(v)}, not a number`);
    }
  }
  return data;
}

function strictList(text, what) {
  ok(typeof text === 'string' && text.startsWith('---\n'), `${what}: body ${show(text)}`);
  const list = yaml.load(text, { schema: yaml.CORE_SCHEMA, json: false });
  ok(Array.isArray(list) && list.every((x) => typeof x === 'string'), `${what}: YAML ${show(list)} is not a list of strings`);
  return list;
}

// Runs checks one after another. Each check gets its own tube name and a
// connect() that opens a client; the clients are closed afterwards. A check
// may return a string, printed after its "ok" line as a "# note".
function makeRunner(prefix, openClient, closeClient) {
  const checks = [];
  function check(name, fn, limitSeconds = 20) {
    checks.push({ name, fn, limitSeconds });
  }
  async function run() {
    let passed = 0;
    let failed = 0;
    for (const { name, fn, limitSeconds } of checks) {
      const clients = [];
      const connect = async () => {
        const c = await openClient(HOST, PORT);
        clients.push(c);
        return c;
      };
      let timer;
      const limit = new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new CheckFailed(`timed out after ${limitSeconds}s`)), limitSeconds * 1000);
      });
      try {
        const note = await Promise.race([fn(`${prefix}${process.pid}-${name}`, connect), limit]);
        console.log(`ok - ${name}${typeof note === 'string' ? ` # ${note}` : ''}`);
        passed++;
      } catch (e) {
        const msg = typeof e === 'string' ? e : `${e && e.constructor ? e.constructor.name : 'Error'}: ${e && e.message}`;
        console.log(`not ok - ${name}: ${msg.replace(/[\r\n]+/g, ' ')}`);
        failed++;
      } finally {
        clearTimeout(timer);
        for (const c of clients) {
          try {
            closeClient(c);
          } catch (e) {
            // already closed
          }
        }
      }
    }
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed === 0 ? 0 : 1);
  }
  return { check, run };
}

// Two-to-the-32 minus one, the largest priority.
const MAX_PRI = 4294967295;

// Priorities for the 1,000-job drain: one at each extreme, the rest
// in 100 classes with many ties (which must come out FIFO by id).
function drainPriorities() {
  let seed = 1234;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed;
  };
  const pris = [];
  for (let i = 0; i < 1000; i++) pris.push(i === 0 ? MAX_PRI : i === 1 ? 0 : (rand() % 100) * 1000);
  return pris;
}

// Expected reserve order of [pri, id] pairs: priority, then id (FIFO).
function drainOrder(jobs) {
  return jobs
    .slice()
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map((j) => j[1]);
}

function binaryBodies() {
  const all = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) all[i] = i;
  return [
    Buffer.concat([all, Buffer.from('\r\n\0\r\n\r\n', 'binary')]),
    Buffer.from('\r\n'),
    Buffer.from([0]),
    Buffer.alloc(0),
    Buffer.from('line1\r\nput 0 0 1 1\r\nx\r\n'),
  ];
}

module.exports = {
  HOST, PORT, TOLERATE_1_12, NOTE_1_12, FAIL_1_12, CheckFailed, ok, eq, rejects, now, sleep, until, show,
  strictStats, strictList, makeRunner, MAX_PRI, drainPriorities, drainOrder, binaryBodies,
};
