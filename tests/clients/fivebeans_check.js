'use strict';
// Interop checks for the Node.js client fivebeans 1.5.0 (npm) against a
// beanstalkd-compatible server.
//
//   node tests/clients/fivebeans_check.js [HOST [PORT]]
//   (or BEANSTALK_HOST / BEANSTALK_PORT; default 127.0.0.1:11300)
//
// Prints "ok - NAME" or "not ok - NAME: reason" per check, then
// "N passed, M failed"; exits 1 if any check failed.
//
// fivebeans writes every call at once and matches replies to calls in
// order, so concurrent calls are pipelined: several commands (with bodies)
// reach the server in one read. It parses OK bodies itself with js-yaml 3;
// we also capture the raw bytes off its socket and parse them strictly.
process.noDeprecation = true; // fivebeans uses new Buffer()
const crypto = require('crypto');
const fivebeans = require('fivebeans');
const {
  ok, eq, rejects, now, sleep, until, strictStats, strictList, makeRunner, TOLERATE_1_12, NOTE_1_12, FAIL_1_12,
  MAX_PRI, drainPriorities, drainOrder, binaryBodies,
} = require('./common');

// BEANSTALK_TLS_CA=FILE: every connection is TLS (a tls:// listener),
// the server's certificate checked against FILE and, with
// BEANSTALK_TLS_NAME, for that name: fivebeans builds its socket with
// net.createConnection, which hands it a TLS socket here instead.
const TLS_CA = process.env.BEANSTALK_TLS_CA;

function connectClient(c) {
  if (!TLS_CA) return c.connect();
  const net = require('net');
  const tls = require('tls');
  const fs = require('fs');
  const plain = net.createConnection;
  net.createConnection = (port, host) => tls.connect({
    port, host, ca: fs.readFileSync(TLS_CA),
    servername: process.env.BEANSTALK_TLS_NAME || host,
  });
  try {
    c.connect();
  } finally {
    net.createConnection = plain;
  }
  // fivebeans waits for 'connect'; a TLS socket is ready at 'secureConnect'
  c.stream.once('secureConnect', () => c.emit('connect'));
}

async function open(host, port) {
  const c = new fivebeans.client(host, port);
  await new Promise((resolve, reject) => {
    c.once('connect', resolve);
    c.once('error', reject);
    connectClient(c);
  });
  c.on('error', () => {}); // reported through the pending call
  c.tap = [];
  // Runs before fivebeans' own 'data' listener, which completes the calls.
  c.stream.prependListener('data', (chunk) => c.tap.push(chunk));
  return c;
}

const { check, run } = makeRunner('fb', open, (c) => c.stream.destroy());

// Promise wrapper: resolves with the callback's result arguments as an
// array, rejects with fivebeans' error (the reply's status word).
function call(c, method, ...args) {
  return new Promise((resolve, reject) => {
    c[method](...args, (err, ...res) => (err ? reject(err) : resolve(res)));
  });
}

// A YAML command alone on the wire: returns fivebeans' parsed value and
// the raw reply, whose framing must be exactly "OK <n>\r\n<n bytes>\r\n".
async function yamlCall(c, what, method, ...args) {
  c.tap = [];
  const [parsed] = await call(c, method, ...args);
  const raw = Buffer.concat(c.tap);
  const eol = raw.indexOf('\r\n');
  const m = /^OK (\d+)$/.exec(raw.slice(0, Math.max(eol, 0)).toString('latin1'));
  ok(eol > 0 && m, `${what}: reply line ${JSON.stringify(raw.slice(0, 40).toString('latin1'))}`);
  const n = Number(m[1]);
  eq(raw.length, eol + 2 + n + 2, `${what}: reply length`);
  eq(raw.slice(eol + 2 + n).toString('latin1'), '\r\n', `${what}: body terminator`);
  return { parsed, text: raw.slice(eol + 2, eol + 2 + n).toString('utf8') };
}

async function stats(c, what, method, kind, ...args) {
  const { parsed, text } = await yamlCall(c, what, method, ...args);
  const strict = strictStats(text, what, kind);
  // fivebeans' own (js-yaml 3) parse must give numbers too.
  for (const [k, v] of Object.entries(strict)) {
    if (typeof v === 'number') ok(parsed[k] === v, `fivebeans' ${what}: ${k} is ${parsed[k]}`);
  }
  return strict;
}

const jobStats = (c, id) => stats(c, `stats-job ${id}`, 'stats_job', 'stats-job', id);
const tubeStats = (c, t) => stats(c, `stats-tube ${t}`, 'stats_tube', 'stats-tube', t);

async function listCall(c, what, method) {
  const { parsed, text } = await yamlCall(c, what, method);
  const strict = strictList(text, what);
  eq(parsed, strict, `fivebeans' ${what}`);
  return strict;
}

async function put(c, tube, body, { pri = 1024, delay = 0, ttr = 60 } = {}) {
  eq(await call(c, 'use', tube), [tube], 'use');
  const [id] = await call(c, 'put', pri, delay, ttr, body);
  ok(/^\d+$/.test(id), `put id ${id}`);
  return id;
}

async function watchOnly(c, tube) {
  await call(c, 'watch', tube);
  for (const t of await listCall(c, 'list-tubes-watched', 'list_tubes_watched')) {
    if (t !== tube) await call(c, 'ignore', t);
  }
  eq(await listCall(c, 'list-tubes-watched', 'list_tubes_watched'), [tube], 'watched tubes');
}

async function reserve(c, timeout) {
  const [id, body] = await call(c, 'reserve_with_timeout', timeout);
  return { id, body };
}

// ---------------------------------------------------------------------------

check('use-watch-ignore', async (t, connect) => {
  const c = await connect();
  eq(await call(c, 'list_tube_used'), ['default'], 'initial used tube');
  eq(await listCall(c, 'list-tubes-watched', 'list_tubes_watched'), ['default'], 'initial watch list');
  eq(await call(c, 'use', t), [t], 'use reply');
  eq(await call(c, 'list_tube_used'), [t], 'used tube after use');
  eq(await call(c, 'watch', t), ['2'], 'watch reply');
  eq(await call(c, 'watch', t), ['2'], 'watching the same tube again');
  eq((await listCall(c, 'list-tubes-watched', 'list_tubes_watched')).sort(), ['default', t].sort(), 'watch list');
  eq(await call(c, 'ignore', 'default'), ['1'], 'ignore reply');
  eq(await call(c, 'ignore', `${t}-never-watched`), ['1'], 'ignoring an unwatched tube');
  await rejects(call(c, 'ignore', t), 'NOT_IGNORED', 'ignoring the last watched tube');
  await rejects(call(c, 'use', '-bad'), 'BAD_FORMAT', 'use of a bad tube name');
  await rejects(call(c, 'watch', 'a'.repeat(201)), 'BAD_FORMAT', 'watch of a 201-byte name');
  eq(await call(c, 'use', 'a'.repeat(200)), ['a'.repeat(200)], '200-byte tube name');
});

check('put-pri-delay-ttr', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'job', { pri: 42, delay: 3, ttr: 7 });
  let s = await jobStats(c, id);
  eq([s.tube, s.state, s.pri, s.delay, s.ttr], [t, 'delayed', 42, 3, 7], 'stats-job of delayed put');
  ok(s['time-left'] >= 0 && s['time-left'] <= 3, `time-left ${s['time-left']}`);
  const id2 = await put(c, t, 'max', { pri: MAX_PRI, ttr: 0 });
  s = await jobStats(c, id2);
  eq([s.state, s.pri, s.ttr], ['ready', MAX_PRI, 1], 'pri 2^32-1 and ttr 0 (raised to 1)');
  ok(Number(id2) > Number(id), `ids not increasing: ${id} then ${id2}`);
});

check('reserve', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'hello', { ttr: 30 });
  await watchOnly(c, t);
  const [rid, body] = await call(c, 'reserve');
  eq([rid, body.toString()], [id, 'hello'], 'reserved job');
  const s = await jobStats(c, id);
  eq([s.state, s.reserves, s.ttr], ['reserved', 1, 30], 'stats-job of reserved job');
  eq((await tubeStats(c, t))['current-jobs-reserved'], 1, 'current-jobs-reserved');
});

check('reserve-wakeup', async (t, connect) => {
  const worker = await connect();
  const producer = await connect();
  await watchOnly(worker, t);
  const pending = call(worker, 'reserve');
  await until(async () => (await tubeStats(producer, t))['current-waiting'] === 1,
    'current-waiting 1');
  const id = await put(producer, t, 'wake');
  const [rid, body] = await pending;
  eq([rid, body.toString()], [id, 'wake'], 'job handed to the waiting worker');
});

check('reserve-with-timeout', async (t, connect) => {
  const c = await connect();
  await watchOnly(c, t);
  let t0 = now();
  await rejects(reserve(c, 0), 'TIMED_OUT', 'reserve-with-timeout 0 on an empty tube');
  ok(now() - t0 < 0.5, `timeout 0 took ${now() - t0}s`);
  t0 = now();
  await rejects(reserve(c, 1), 'TIMED_OUT', 'reserve-with-timeout 1 on an empty tube');
  ok(now() - t0 >= 0.9 && now() - t0 < 3, `timeout 1 took ${now() - t0}s`);
  const id = await put(c, t, 'x');
  eq((await reserve(c, 1)).id, id, 'reserve-with-timeout with a ready job');
});

check('delete', async (t, connect) => {
  const a = await connect();
  const b = await connect();
  let id = await put(a, t, 'd');
  eq(await call(a, 'destroy', id), [], 'delete reply');
  await rejects(call(a, 'peek', id), 'NOT_FOUND', 'peek after delete');
  await rejects(call(a, 'destroy', id), 'NOT_FOUND', 'second delete');
  id = await put(a, t, 'held');
  await watchOnly(a, t);
  eq((await reserve(a, 0)).id, id, 'reserved');
  await rejects(call(b, 'destroy', id), 'NOT_FOUND', 'delete of a job reserved by another connection');
  await call(a, 'destroy', id);
  id = await put(a, t, 'later', { delay: 100 });
  await call(b, 'destroy', id);
  await rejects(call(a, 'peek', id), 'NOT_FOUND', 'delayed job deleted');
});

check('release-delay', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'r', { pri: 10 });
  await watchOnly(c, t);
  eq((await reserve(c, 0)).id, id, 'reserved');
  eq(await call(c, 'release', id, 7, 1), [], 'release reply');
  const s = await jobStats(c, id);
  eq([s.state, s.pri, s.delay, s.releases], ['delayed', 7, 1, 1], 'stats-job after release');
  await call(c, 'use', t);
  eq((await call(c, 'peek_delayed'))[0], id, 'peek-delayed');
  await rejects(reserve(c, 0), 'TIMED_OUT', 'reserve while the job is delayed');
  const t0 = now();
  eq((await reserve(c, 5)).id, id, 'job after its delay');
  ok(now() - t0 > 0.3, `delayed job came back after only ${now() - t0}s`);
  eq((await jobStats(c, id)).pri, 7, 'priority given at release');
});

check('bury-kick', async (t, connect) => {
  const c = await connect();
  const ids = [await put(c, t, 'b1'), await put(c, t, 'b2')];
  await watchOnly(c, t);
  for (let i = 0; i < 2; i++) {
    const job = await reserve(c, 0);
    eq(await call(c, 'bury', job.id, 3), [], 'bury reply');
    const s = await jobStats(c, job.id);
    eq([s.state, s.pri, s.buries], ['buried', 3, 1], 'stats-job after bury');
  }
  eq((await call(c, 'peek_buried'))[0], ids[0], 'peek-buried gives the oldest buried job');
  eq((await tubeStats(c, t))['current-jobs-buried'], 2, 'current-jobs-buried');
  await rejects(reserve(c, 0), 'TIMED_OUT', 'reserve with only buried jobs');
  eq(await call(c, 'kick', 1), ['1'], 'kick 1');
  eq(await call(c, 'kick', 10), ['1'], 'kick 10 with one buried job');
  eq(await call(c, 'kick', 10), ['0'], 'kick with nothing to kick');
  const s = await jobStats(c, ids[0]);
  eq([s.state, s.kicks], ['ready', 1], 'stats-job after kick');
  const d = await put(c, t, 'delayed', { delay: 100 });
  await call(c, 'destroy', ids[0]);
  await call(c, 'destroy', ids[1]);
  eq(await call(c, 'kick', 5), ['1'], 'kick moves delayed jobs when none is buried');
  eq((await jobStats(c, d)).state, 'ready', 'kicked delayed job state');
});

check('kick-job', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'k');
  await watchOnly(c, t);
  await reserve(c, 0);
  await call(c, 'bury', id, 0);
  eq(await call(c, 'kick_job', id), [], 'kick-job reply (bare KICKED)');
  eq((await jobStats(c, id)).state, 'ready', 'state after kick-job');
  await rejects(call(c, 'kick_job', id), 'NOT_FOUND', 'kick-job of a ready job');
  const d = await put(c, t, 'd', { delay: 100 });
  await call(c, 'kick_job', d);
  eq((await jobStats(c, d)).state, 'ready', 'delayed job state after kick-job');
  await rejects(call(c, 'kick_job', 4294967295), 'NOT_FOUND', 'kick-job of a missing job');
});

check('touch', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'tt', { ttr: 5 });
  await watchOnly(c, t);
  await reserve(c, 0);
  await sleep(1100);
  const before = (await jobStats(c, id))['time-left'];
  ok(before <= 4, `time-left ${before} 1.1 s into a 5 s ttr`);
  eq(await call(c, 'touch', id), [], 'touch reply');
  const after = (await jobStats(c, id))['time-left'];
  ok(after >= 4 && after > before, `time-left after touch ${after} (before ${before})`);
  await call(c, 'release', id, 0, 0);
  await rejects(call(c, 'touch', id), 'NOT_FOUND', 'touch of a job not reserved');
});

check('peek', async (t, connect) => {
  const c = await connect();
  await call(c, 'use', t);
  await rejects(call(c, 'peek_ready'), 'NOT_FOUND', 'peek-ready on an empty tube');
  await rejects(call(c, 'peek_delayed'), 'NOT_FOUND', 'peek-delayed on an empty tube');
  await rejects(call(c, 'peek_buried'), 'NOT_FOUND', 'peek-buried on an empty tube');
  await rejects(call(c, 'peek', 4294967295), 'NOT_FOUND', 'peek of a missing id');
  const r1 = await put(c, t, 'ready-low', { pri: 10 });
  const r2 = await put(c, t, 'ready-high', { pri: 1 });
  const d1 = await put(c, t, 'delayed-long', { delay: 200 });
  const d2 = await put(c, t, 'delayed-short', { delay: 100 });
  const b = await put(c, t, 'to-bury', { pri: 0 });
  await watchOnly(c, t);
  eq((await reserve(c, 0)).id, b, 'reserve picks pri 0');
  await call(c, 'bury', b, 0);
  const str = ([id, body]) => [id, body.toString()];
  eq(str(await call(c, 'peek_ready')), [r2, 'ready-high'], 'peek-ready gives the most urgent job');
  eq(str(await call(c, 'peek_delayed')), [d2, 'delayed-short'], 'peek-delayed gives the soonest job');
  eq(str(await call(c, 'peek_buried')), [b, 'to-bury'], 'peek-buried');
  eq(str(await call(c, 'peek', r1)), [r1, 'ready-low'], 'peek <id>');
  eq(str(await call(c, 'peek', d1))[1], 'delayed-long', 'peek <id> of a delayed job');
  await call(c, 'use', `${t}-empty`);
  await rejects(call(c, 'peek_ready'), 'NOT_FOUND', 'peek-ready acts on the used tube');
});

check('stats', async (t, connect) => {
  const c = await connect();
  await put(c, t, 's');
  const s = await stats(c, 'stats', 'stats', 'stats');
  ok(typeof s.version === 'string', `version is ${s.version}, not a string`);
  eq(s.draining, false, 'draining');
  ok(s['current-connections'] >= 1, 'current-connections');
  ok(s['total-jobs'] >= 1 && s['cmd-put'] >= 1, 'total-jobs / cmd-put');
  ok(s['max-job-size'] >= 61440, `max-job-size ${s['max-job-size']}`);
});

check('stats-tube', async (t, connect) => {
  const c = await connect();
  await put(c, t, 'u1', { pri: 5 });
  await put(c, t, 'u2', { pri: 2000 });
  await put(c, t, 'd', { delay: 100 });
  const s = await tubeStats(c, t);
  eq(s.name, t, 'name');
  eq(
    ['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-delayed', 'current-jobs-buried',
      'current-jobs-reserved', 'total-jobs', 'current-using', 'pause'].map((k) => s[k]),
    [1, 2, 1, 0, 0, 3, 1, 0], 'urgent/ready/delayed/buried/reserved/total/using/pause');
  await rejects(call(c, 'stats_tube', `${t}-none`), 'NOT_FOUND', 'stats-tube of a missing tube');
});

check('stats-job', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'j', { pri: 99, ttr: 9 });
  let s = await jobStats(c, id);
  eq(['id', 'tube', 'state', 'pri', 'delay', 'ttr', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'].map((k) => s[k]),
    [Number(id), t, 'ready', 99, 0, 9, 0, 0, 0, 0, 0], 'stats-job values');
  await watchOnly(c, t);
  await reserve(c, 0);
  s = await jobStats(c, id);
  eq([s.state, s.reserves], ['reserved', 1], 'stats-job of the reserved job');
  ok(s['time-left'] >= 7 && s['time-left'] <= 9, `time-left ${s['time-left']}`);
  await rejects(call(c, 'stats_job', 4294967295), 'NOT_FOUND', 'stats-job of a missing job');
});

check('list-tubes', async (t, connect) => {
  const c = await connect();
  await call(c, 'use', `${t}-used`);
  await call(c, 'watch', `${t}-watched`);
  const all = await listCall(c, 'list-tubes', 'list_tubes');
  for (const n of ['default', `${t}-used`, `${t}-watched`]) ok(all.includes(n), `list-tubes lacks ${n}`);
  eq((await listCall(c, 'list-tubes-watched', 'list_tubes_watched')).sort(), ['default', `${t}-watched`].sort(), 'list-tubes-watched');
  eq(await call(c, 'list_tube_used'), [`${t}-used`], 'list-tube-used');
});

check('pause-tube', async (t, connect) => {
  const c = await connect();
  let id = await put(c, t, 'p');
  await watchOnly(c, t);
  eq(await call(c, 'pause_tube', t, 60), [], 'pause-tube reply');
  const s = await tubeStats(c, t);
  eq(s.pause, 60, 'pause');
  ok(s['pause-time-left'] >= 58 && s['pause-time-left'] <= 60, `pause-time-left ${s['pause-time-left']}`);
  await rejects(reserve(c, 0), 'TIMED_OUT', 'reserve from a paused tube');
  await call(c, 'pause_tube', t, 0);
  eq((await reserve(c, 0)).id, id, 'reserve after pause-tube 0');
  await call(c, 'destroy', id);
  id = await put(c, t, 'p2');
  await call(c, 'pause_tube', t, 1);
  const t0 = now();
  eq((await reserve(c, 5)).id, id, 'job after the pause ends');
  ok(now() - t0 > 0.3, `pause ended after only ${now() - t0}s`);
  await rejects(call(c, 'pause_tube', `${t}-none`, 1), 'NOT_FOUND', 'pause-tube of a missing tube');
});

check('binary-body', async (t, connect) => {
  const c = await connect();
  await watchOnly(c, t);
  const bodies = binaryBodies();
  for (let i = 0; i < bodies.length; i++) {
    const id = await put(c, t, bodies[i]);
    eq((await call(c, 'peek', id))[1], bodies[i], `peek of body ${i}`);
    const job = await reserve(c, 0);
    eq(job.id, id, `reserve of body ${i}: id`);
    eq(job.body, bodies[i], `reserve of body ${i}`);
    await call(c, 'destroy', id);
  }
});

check('big-body', async (t, connect) => {
  const c = await connect();
  await watchOnly(c, t);
  const body = crypto.randomBytes(60 * 1024);
  let id = await put(c, t, body);
  eq((await call(c, 'peek', id))[1], body, 'peek of the 60 KiB body');
  eq((await reserve(c, 0)).body, body, 'reserve of the 60 KiB body');
  const max = (await stats(c, 'stats', 'stats', 'stats'))['max-job-size'];
  await rejects(call(c, 'put', 0, 0, 60, Buffer.alloc(max + 1, 'z')), 'JOB_TOO_BIG', `put of max-job-size+1 (${max + 1}) bytes`);
  eq(await call(c, 'list_tube_used'), [t], 'list-tube-used after JOB_TOO_BIG');
  id = await put(c, t, Buffer.alloc(max, 'y'));
  eq((await call(c, 'peek', id))[1].length, max, 'put of exactly max-job-size bytes');
});

// Everything pipelined: 1,000 puts written before any reply is read, then
// 1,000 reserves, then 1,000 deletes.
check('priority-drain-1000', async (t, connect) => {
  const c = await connect();
  await call(c, 'use', t);
  const pris = drainPriorities();
  const ids = await Promise.all(pris.map((pri, i) => call(c, 'put', pri, 0, 60, `job-${i}`).then(([id]) => Number(id))));
  const jobs = pris.map((pri, i) => [pri, ids[i]]);
  for (let i = 1; i < ids.length; i++) ok(ids[i] > ids[i - 1], `pipelined puts out of order at ${i}`);
  await watchOnly(c, t);
  const got = await Promise.all(pris.map(() => reserve(c, 0)));
  const order = got.map((j) => Number(j.id));
  const want = drainOrder(jobs);
  const bad = order.findIndex((id, i) => id !== want[i]);
  ok(bad < 0, `position ${bad}: got job ${order[bad]}, want ${want[bad]} (pri order, then FIFO)`);
  for (const j of got) ok(j.body.toString() === `job-${ids.indexOf(Number(j.id))}`, `body of job ${j.id}`);
  await Promise.all(order.map((id) => call(c, 'destroy', id)));
  await rejects(reserve(c, 0), 'TIMED_OUT', 'tube empty after the drain');
  const s = await tubeStats(c, t);
  eq([s['total-jobs'], s['cmd-delete'], s['current-jobs-ready']], [1000, 1000, 0], 'stats-tube after the drain');
}, 40);

// Mixed commands with bodies, all written in one go.
check('pipelined-mixed', async (t, connect) => {
  const c = await connect();
  const body = Buffer.from('a\r\nb\0c\r\n');
  const p = [
    call(c, 'use', t),
    call(c, 'put', 5, 0, 60, body),
    call(c, 'put', 1, 0, 60, 'second'),
    call(c, 'watch', t),
    call(c, 'ignore', 'default'),
    call(c, 'peek_ready'),
    call(c, 'reserve_with_timeout', 0),
    call(c, 'list_tube_used'),
    call(c, 'reserve_with_timeout', 0),
    call(c, 'reserve_with_timeout', 0).catch((e) => ['error', e]),
    call(c, 'stats_tube', t),
  ];
  const r = await Promise.all(p);
  eq(r[0], [t], 'use');
  const [a] = r[1];
  const [b] = r[2];
  eq([r[3], r[4]], [['2'], ['1']], 'watch/ignore');
  eq([r[5][0], r[5][1].toString()], [b, 'second'], 'peek-ready');
  eq([r[6][0], r[6][1].toString()], [b, 'second'], 'first reserve');
  eq(r[7], [t], 'list-tube-used');
  eq(r[8], [a, body], 'second reserve (binary body)');
  eq(r[9], ['error', 'TIMED_OUT'], 'third reserve');
  eq([r[10][0].name, r[10][0]['current-jobs-reserved']], [t, 2], 'stats-tube');
  await Promise.all([call(c, 'destroy', a), call(c, 'destroy', b)]);
});

check('deadline-soon', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'ds', { ttr: 2 });
  await watchOnly(c, t);
  eq((await reserve(c, 0)).id, id, 'reserved');
  const t0 = now();
  await rejects(reserve(c, 10), 'DEADLINE_SOON', 'reserve-with-timeout while a 2 s ttr job runs out');
  ok(now() - t0 < 1.9, `DEADLINE_SOON after ${now() - t0}s`);
});

check('ttr-expiry', async (t, connect) => {
  const holder = await connect();
  const other = await connect();
  const id = await put(holder, t, 'ttr', { ttr: 1 });
  await watchOnly(holder, t);
  eq((await reserve(holder, 0)).id, id, 'reserved');
  await watchOnly(other, t);
  await rejects(reserve(other, 0), 'TIMED_OUT', 'job still reserved within its ttr');
  await sleep(2000); // the holder stays idle
  let note;
  let job = await reserve(other, 2).catch((e) => e);
  if (job === 'TIMED_OUT') {
    ok(TOLERATE_1_12, FAIL_1_12);
    await call(holder, 'list_tube_used'); // any command from the holder makes 1.12 see the expiry
    job = await reserve(other, 2);
    note = NOTE_1_12;
  }
  if (typeof job === 'string' || job instanceof Error) throw job;
  eq([job.id, job.body.toString()], [id, 'ttr'], 'job ready again after its ttr');
  const s = await jobStats(other, id);
  eq([s.reserves, s.timeouts], [2, 1], 'reserves/timeouts after the expiry');
  ok((await stats(other, 'stats', 'stats', 'stats'))['job-timeouts'] >= 1, 'stats job-timeouts');
  return note;
});

run();
