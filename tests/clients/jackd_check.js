'use strict';
// Interop checks for the Node.js client jackd 2.2.2 (npm) against a
// beanstalkd-compatible server.
//
//   node tests/clients/jackd_check.js [HOST [PORT]]
//   (or BEANSTALK_HOST / BEANSTALK_PORT; default 127.0.0.1:11300)
//
// Prints "ok - NAME" or "not ok - NAME: reason" per check, then
// "N passed, M failed"; exits 1 if any check failed.
//
// jackd hands stats/list bodies over as raw YAML text (we parse them with
// js-yaml) and job bodies as Buffers. Its framing takes everything up to the
// last two bytes received as the body, so a job reply must come as header,
// body and CRLF with nothing after it.
const crypto = require('crypto');
const Jackd = require('jackd');
const {
  ok, eq, rejects, now, sleep, until, strictStats, strictList, makeRunner, TOLERATE_1_12, NOTE_1_12, FAIL_1_12,
  MAX_PRI, drainPriorities, drainOrder,
} = require('./common');

async function open(host, port) {
  const c = new Jackd();
  c.socket.on('error', () => {}); // reported through the pending command
  await c.connect({ host, port });
  return c;
}

const { check, run } = makeRunner('js', open, (c) => c.socket.destroy());

// jackd 2.2.2's pauseTube() writes "pause-tube <tube> <delay>" without the
// CRLF; we send the CRLF ourselves, as a separate write (so the server sees
// the command line arrive in two pieces).
async function pauseTube(c, tube, delay) {
  const p = c.pauseTube(tube, { delay });
  await c.write(Buffer.from('\r\n'));
  return p;
}

async function put(c, tube, body, opts = {}) {
  eq(await c.use(tube), tube, 'use');
  const id = await c.put(body, opts);
  ok(/^\d+$/.test(id), `put id ${id}`);
  return id;
}

async function watchOnly(c, tube) {
  await c.watch(tube);
  for (const t of strictList(await c.listTubesWatched(), 'list-tubes-watched')) {
    if (t !== tube) await c.ignore(t);
  }
  eq(strictList(await c.listTubesWatched(), 'list-tubes-watched'), [tube], 'watched tubes');
}

async function jobStats(c, id) {
  return strictStats(await c.statsJob(id), `stats-job ${id}`, 'stats-job');
}

// ---------------------------------------------------------------------------

check('use-watch-ignore', async (t, connect) => {
  const c = await connect();
  eq(await c.listTubeUsed(), 'default', 'initial used tube');
  eq(strictList(await c.listTubesWatched(), 'list-tubes-watched'), ['default'], 'initial watch list');
  eq(await c.use(t), t, 'use reply');
  eq(await c.listTubeUsed(), t, 'used tube after use');
  eq(await c.watch(t), 2, 'watch reply');
  eq(await c.watch(t), 2, 'watching the same tube again');
  eq(strictList(await c.listTubesWatched(), 'list-tubes-watched').sort(), ['default', t].sort(), 'watch list');
  eq(await c.ignore('default'), 1, 'ignore reply');
  eq(strictList(await c.listTubesWatched(), 'list-tubes-watched'), [t], 'watch list after ignore');
  eq(await c.ignore(`${t}-never-watched`), 1, 'ignoring an unwatched tube');
  await rejects(c.ignore(t), 'NOT_IGNORED', 'ignoring the last watched tube');
  await rejects(c.use('-bad'), 'BAD_FORMAT', 'use of a bad tube name');
  await rejects(c.watch('a'.repeat(201)), 'BAD_FORMAT', 'watch of a 201-byte name');
  eq(await c.use('a'.repeat(200)), 'a'.repeat(200), '200-byte tube name');
});

check('put-pri-delay-ttr', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'job', { priority: 42, delay: 3, ttr: 7 });
  let s = await jobStats(c, id);
  eq([s.tube, s.state, s.pri, s.delay, s.ttr], [t, 'delayed', 42, 3, 7], 'stats-job of delayed put');
  ok(s['time-left'] >= 0 && s['time-left'] <= 3, `time-left ${s['time-left']}`);
  const id2 = await put(c, t, 'max', { priority: MAX_PRI, ttr: 1 });
  s = await jobStats(c, id2);
  eq([s.state, s.pri, s.ttr], ['ready', MAX_PRI, 1], 'pri 2^32-1');
  ok(Number(id2) > Number(id), `ids not increasing: ${id} then ${id2}`);
});

check('reserve', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'hello', { ttr: 30 });
  await watchOnly(c, t);
  const job = await c.reserve();
  eq([job.id, job.payload], [id, Buffer.from('hello')], 'reserved job');
  const s = await jobStats(c, id);
  eq([s.state, s.reserves, s.ttr], ['reserved', 1, 30], 'stats-job of reserved job');
  const ts = strictStats(await c.statsTube(t), 'stats-tube', 'stats-tube');
  eq(ts['current-jobs-reserved'], 1, 'current-jobs-reserved');
});

check('reserve-wakeup', async (t, connect) => {
  const worker = await connect();
  const producer = await connect();
  await watchOnly(worker, t);
  const pending = worker.reserve();
  const waiting = async () =>
    strictStats(await producer.statsTube(t), 'stats-tube', 'stats-tube')['current-waiting'];
  await until(async () => (await waiting()) === 1, 'current-waiting 1');
  const id = await put(producer, t, 'wake');
  const job = await pending;
  eq([job.id, job.payload.toString()], [id, 'wake'], 'job handed to the waiting worker');
});

check('reserve-job', async (t, connect) => {
  const c = await connect();
  const a = await put(c, t, 'first', { priority: 1 });
  const b = await put(c, t, 'second', { priority: 5 });
  const d = await put(c, t, 'delayed', { delay: 100 });
  // reserve-job takes a job by id whatever its tube, priority or state.
  let job = await c.reserveJob(b);
  eq([job.id, job.payload.toString()], [b, 'second'], 'reserve-job of a ready job');
  job = await c.reserveJob(d);
  eq(job.id, d, 'reserve-job of a delayed job');
  eq((await jobStats(c, d)).state, 'reserved', 'state after reserve-job');
  await rejects(c.reserveJob(b), 'NOT_FOUND', 'reserve-job of a reserved job');
  await rejects(c.reserveJob('4294967295'), 'NOT_FOUND', 'reserve-job of a missing job');
  eq((await jobStats(c, a)).state, 'ready', 'other job untouched');
});

check('reserve-with-timeout', async (t, connect) => {
  const c = await connect();
  await watchOnly(c, t);
  let t0 = now();
  await rejects(c.reserveWithTimeout(0), 'TIMED_OUT', 'reserve-with-timeout 0 on an empty tube');
  ok(now() - t0 < 0.5, `timeout 0 took ${now() - t0}s`);
  t0 = now();
  await rejects(c.reserveWithTimeout(1), 'TIMED_OUT', 'reserve-with-timeout 1 on an empty tube');
  ok(now() - t0 >= 0.9 && now() - t0 < 3, `timeout 1 took ${now() - t0}s`);
  const id = await put(c, t, 'x');
  eq((await c.reserveWithTimeout(1)).id, id, 'reserve-with-timeout with a ready job');
});

check('delete', async (t, connect) => {
  const a = await connect();
  const b = await connect();
  let id = await put(a, t, 'd');
  await a.delete(id);
  await rejects(a.peek(id), 'NOT_FOUND', 'peek after delete');
  await rejects(a.delete(id), 'NOT_FOUND', 'second delete');
  id = await put(a, t, 'held');
  await watchOnly(a, t);
  eq((await a.reserveWithTimeout(0)).id, id, 'reserved');
  await rejects(b.delete(id), 'NOT_FOUND', 'delete of a job reserved by another connection');
  await a.delete(id);
  id = await put(a, t, 'later', { delay: 100 });
  await b.delete(id);
  await rejects(a.peek(id), 'NOT_FOUND', 'delayed job deleted');
});

check('release-delay', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'r', { priority: 10 });
  await watchOnly(c, t);
  eq((await c.reserveWithTimeout(0)).id, id, 'reserved');
  await c.release(id, { priority: 7, delay: 1 });
  const s = await jobStats(c, id);
  eq([s.state, s.pri, s.delay, s.releases], ['delayed', 7, 1, 1], 'stats-job after release');
  eq((await c.peekDelayed()).id, id, 'peek-delayed');
  await rejects(c.reserveWithTimeout(0), 'TIMED_OUT', 'reserve while the job is delayed');
  const t0 = now();
  eq((await c.reserveWithTimeout(5)).id, id, 'job after its delay');
  ok(now() - t0 > 0.3, `delayed job came back after only ${now() - t0}s`);
  eq((await jobStats(c, id)).pri, 7, 'priority given at release');
  await c.release(id); // jackd's defaults: priority 0, delay 0
  const s2 = await jobStats(c, id);
  eq([s2.state, s2.pri, s2.releases], ['ready', 0, 2], 'release with jackd defaults');
});

check('bury-kick', async (t, connect) => {
  const c = await connect();
  const ids = [await put(c, t, 'b1'), await put(c, t, 'b2')];
  await watchOnly(c, t);
  for (let i = 0; i < 2; i++) {
    const job = await c.reserveWithTimeout(0);
    await c.bury(job.id, 3);
    const s = await jobStats(c, job.id);
    eq([s.state, s.pri, s.buries], ['buried', 3, 1], 'stats-job after bury');
  }
  eq((await c.peekBuried()).id, ids[0], 'peek-buried gives the oldest buried job');
  eq(strictStats(await c.statsTube(t), 'stats-tube', 'stats-tube')['current-jobs-buried'], 2, 'current-jobs-buried');
  await rejects(c.reserveWithTimeout(0), 'TIMED_OUT', 'reserve with only buried jobs');
  eq(await c.kick(1), 1, 'kick 1');
  eq(await c.kick(10), 1, 'kick 10 with one buried job');
  eq(await c.kick(10), 0, 'kick with nothing to kick');
  const s = await jobStats(c, ids[0]);
  eq([s.state, s.kicks], ['ready', 1], 'stats-job after kick');
  const d = await put(c, t, 'delayed', { delay: 100 });
  await c.delete(ids[0]);
  await c.delete(ids[1]);
  eq(await c.kick(5), 1, 'kick moves delayed jobs when none is buried');
  eq((await jobStats(c, d)).state, 'ready', 'kicked delayed job state');
});

check('kick-job', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'k');
  await watchOnly(c, t);
  await c.reserveWithTimeout(0);
  await c.bury(id, 0);
  await c.kickJob(id);
  eq((await jobStats(c, id)).state, 'ready', 'state after kick-job');
  await rejects(c.kickJob(id), 'NOT_FOUND', 'kick-job of a ready job');
  const d = await put(c, t, 'd', { delay: 100 });
  await c.kickJob(d);
  eq((await jobStats(c, d)).state, 'ready', 'delayed job state after kick-job');
  await rejects(c.kickJob('4294967295'), 'NOT_FOUND', 'kick-job of a missing job');
});

check('touch', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'tt', { ttr: 5 });
  await watchOnly(c, t);
  await c.reserveWithTimeout(0);
  await sleep(1100);
  const before = (await jobStats(c, id))['time-left'];
  ok(before <= 4, `time-left ${before} 1.1 s into a 5 s ttr`);
  await c.touch(id);
  const after = (await jobStats(c, id))['time-left'];
  ok(after >= 4 && after > before, `time-left after touch ${after} (before ${before})`);
  await c.release(id);
  await rejects(c.touch(id), 'NOT_FOUND', 'touch of a job not reserved');
});

check('peek', async (t, connect) => {
  const c = await connect();
  await c.use(t);
  await rejects(c.peekReady(), 'NOT_FOUND', 'peek-ready on an empty tube');
  await rejects(c.peekDelayed(), 'NOT_FOUND', 'peek-delayed on an empty tube');
  await rejects(c.peekBuried(), 'NOT_FOUND', 'peek-buried on an empty tube');
  await rejects(c.peek('4294967295'), 'NOT_FOUND', 'peek of a missing id');
  const r1 = await put(c, t, 'ready-low', { priority: 10 });
  const r2 = await put(c, t, 'ready-high', { priority: 1 });
  const d1 = await put(c, t, 'delayed-long', { delay: 200 });
  const d2 = await put(c, t, 'delayed-short', { delay: 100 });
  const b = await put(c, t, 'to-bury', { priority: 0 });
  await watchOnly(c, t);
  eq((await c.reserveWithTimeout(0)).id, b, 'reserve picks pri 0');
  await c.bury(b, 0);
  let p = await c.peekReady();
  eq([p.id, p.payload.toString()], [r2, 'ready-high'], 'peek-ready gives the most urgent job');
  p = await c.peekDelayed();
  eq([p.id, p.payload.toString()], [d2, 'delayed-short'], 'peek-delayed gives the soonest job');
  p = await c.peekBuried();
  eq([p.id, p.payload.toString()], [b, 'to-bury'], 'peek-buried');
  p = await c.peek(r1);
  eq([p.id, p.payload.toString()], [r1, 'ready-low'], 'peek <id>');
  eq((await c.peek(d1)).payload.toString(), 'delayed-long', 'peek <id> of a delayed job');
  await c.use(`${t}-empty`);
  await rejects(c.peekReady(), 'NOT_FOUND', 'peek-ready acts on the used tube');
});

check('stats', async (t, connect) => {
  const c = await connect();
  await put(c, t, 's');
  const s = strictStats(await c.stats(), 'stats', 'stats');
  ok(typeof s.version === 'string', `version is ${s.version}, not a string`);
  eq(s.draining, false, 'draining');
  ok(s['current-connections'] >= 1, 'current-connections');
  ok(s['total-jobs'] >= 1 && s['cmd-put'] >= 1, 'total-jobs / cmd-put');
  ok(s['max-job-size'] >= 61440, `max-job-size ${s['max-job-size']}`);
});

check('stats-tube', async (t, connect) => {
  const c = await connect();
  await put(c, t, 'u1', { priority: 5 });
  await put(c, t, 'u2', { priority: 2000 });
  await put(c, t, 'd', { delay: 100 });
  const s = strictStats(await c.statsTube(t), `stats-tube ${t}`, 'stats-tube');
  eq(s.name, t, 'name');
  eq(
    ['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-delayed', 'current-jobs-buried',
      'current-jobs-reserved', 'total-jobs', 'current-using', 'pause'].map((k) => s[k]),
    [1, 2, 1, 0, 0, 3, 1, 0], 'urgent/ready/delayed/buried/reserved/total/using/pause');
  await rejects(c.statsTube(`${t}-none`), 'Unexpected response: NOT_FOUND', 'stats-tube of a missing tube');
});

check('stats-job', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'j', { priority: 99, ttr: 9 });
  let s = await jobStats(c, id);
  eq(['id', 'tube', 'state', 'pri', 'delay', 'ttr', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'].map((k) => s[k]),
    [Number(id), t, 'ready', 99, 0, 9, 0, 0, 0, 0, 0], 'stats-job values');
  await watchOnly(c, t);
  await c.reserveWithTimeout(0);
  s = await jobStats(c, id);
  eq([s.state, s.reserves], ['reserved', 1], 'stats-job of the reserved job');
  ok(s['time-left'] >= 7 && s['time-left'] <= 9, `time-left ${s['time-left']}`);
  await rejects(c.statsJob('4294967295'), 'Unexpected response: NOT_FOUND', 'stats-job of a missing job');
});

check('list-tubes', async (t, connect) => {
  const c = await connect();
  await c.use(`${t}-used`);
  await c.watch(`${t}-watched`);
  const all = strictList(await c.listTubes(), 'list-tubes');
  for (const n of ['default', `${t}-used`, `${t}-watched`]) ok(all.includes(n), `list-tubes lacks ${n}`);
  eq(strictList(await c.listTubesWatched(), 'list-tubes-watched').sort(), ['default', `${t}-watched`].sort(), 'list-tubes-watched');
  eq(await c.listTubeUsed(), `${t}-used`, 'list-tube-used');
});

check('pause-tube', async (t, connect) => {
  const c = await connect();
  let id = await put(c, t, 'p');
  await watchOnly(c, t);
  await pauseTube(c, t, 60);
  const s = strictStats(await c.statsTube(t), 'stats-tube', 'stats-tube');
  eq(s.pause, 60, 'pause');
  ok(s['pause-time-left'] >= 58 && s['pause-time-left'] <= 60, `pause-time-left ${s['pause-time-left']}`);
  await rejects(c.reserveWithTimeout(0), 'TIMED_OUT', 'reserve from a paused tube');
  await pauseTube(c, t, 0);
  eq((await c.reserveWithTimeout(0)).id, id, 'reserve after pause-tube 0');
  await c.delete(id);
  id = await put(c, t, 'p2');
  await pauseTube(c, t, 1);
  const t0 = now();
  eq((await c.reserveWithTimeout(5)).id, id, 'job after the pause ends');
  ok(now() - t0 > 0.3, `pause ended after only ${now() - t0}s`);
  await rejects(pauseTube(c, `${t}-none`, 1), 'NOT_FOUND', 'pause-tube of a missing tube');
});

// jackd 2.2.2's put() JSON-encodes any object, Buffers included, so bodies
// go out as strings (UTF-8); what comes back is a raw Buffer. Every byte
// 0-127 (NUL and CRLF too) and multi-byte UTF-8 make the round trip; an
// empty body cannot be sent (put asserts a truthy payload).
check('binary-body', async (t, connect) => {
  const c = await connect();
  await watchOnly(c, t);
  let ascii = '';
  for (let i = 0; i < 128; i++) ascii += String.fromCharCode(i);
  const bodies = [`${ascii}\r\n\0\r\n\r\n`, '\r\n', '\0', 'line1\r\nput 0 0 1 1\r\nx\r\n', 'caf\u00e9 \u20ac \u{1F600}\r\n'];
  for (let i = 0; i < bodies.length; i++) {
    const want = Buffer.from(bodies[i], 'utf8');
    const id = await put(c, t, bodies[i]);
    eq((await c.peek(id)).payload, want, `peek of body ${i}`);
    const job = await c.reserveWithTimeout(0);
    eq(job.id, id, `reserve of body ${i}: id`);
    eq(job.payload, want, `reserve of body ${i}`);
    eq(strictStats(await c.statsJob(id), 'stats-job', 'stats-job').state, 'reserved', `state of body ${i}`);
    await c.delete(id);
  }
});

check('big-body', async (t, connect) => {
  const c = await connect();
  await watchOnly(c, t);
  const body = crypto.randomBytes(45 * 1024).toString('base64'); // 61,440 chars
  eq(body.length, 60 * 1024, 'body size');
  let id = await put(c, t, body);
  eq((await c.peek(id)).payload, Buffer.from(body), 'peek of the 60 KiB body');
  eq((await c.reserveWithTimeout(0)).payload, Buffer.from(body), 'reserve of the 60 KiB body');
  const max = strictStats(await c.stats(), 'stats', 'stats')['max-job-size'];
  await rejects(c.put('z'.repeat(max + 1)), 'JOB_TOO_BIG', `put of max-job-size+1 (${max + 1}) bytes`);
  eq(await c.listTubeUsed(), t, 'list-tube-used after JOB_TOO_BIG');
  id = await put(c, t, 'y'.repeat(max));
  eq((await c.peek(id)).payload.length, max, 'put of exactly max-job-size bytes');
});

check('priority-drain-1000', async (t, connect) => {
  const c = await connect();
  const jobs = [];
  for (const pri of drainPriorities()) jobs.push([pri, Number(await put(c, t, `job-${jobs.length}`, { priority: pri }))]);
  await watchOnly(c, t);
  const order = [];
  for (let i = 0; i < 1000; i++) {
    const job = await c.reserveWithTimeout(0);
    order.push(Number(job.id));
    await c.delete(job.id);
  }
  const want = drainOrder(jobs);
  const bad = order.findIndex((id, i) => id !== want[i]);
  ok(bad < 0, `position ${bad}: got job ${order[bad]}, want ${want[bad]} (pri order, then FIFO)`);
  await rejects(c.reserveWithTimeout(0), 'TIMED_OUT', 'tube empty after the drain');
  const s = strictStats(await c.statsTube(t), 'stats-tube', 'stats-tube');
  eq([s['total-jobs'], s['cmd-delete'], s['current-jobs-ready']], [1000, 1000, 0], 'stats-tube after the drain');
}, 40);

check('deadline-soon', async (t, connect) => {
  const c = await connect();
  const id = await put(c, t, 'ds', { ttr: 2 });
  await watchOnly(c, t);
  eq((await c.reserveWithTimeout(0)).id, id, 'reserved');
  const t0 = now();
  await rejects(c.reserveWithTimeout(10), 'DEADLINE_SOON', 'reserve-with-timeout while a 2 s ttr job runs out');
  ok(now() - t0 < 1.9, `DEADLINE_SOON after ${now() - t0}s`);
});

check('ttr-expiry', async (t, connect) => {
  const holder = await connect();
  const other = await connect();
  const id = await put(holder, t, 'ttr', { ttr: 1 });
  await watchOnly(holder, t);
  eq((await holder.reserveWithTimeout(0)).id, id, 'reserved');
  await watchOnly(other, t);
  await rejects(other.reserveWithTimeout(0), 'TIMED_OUT', 'job still reserved within its ttr');
  await sleep(2000); // the holder stays idle
  let note;
  let job = await other.reserveWithTimeout(2).catch((e) => e);
  if (job instanceof Error && job.message === 'TIMED_OUT') {
    ok(TOLERATE_1_12, FAIL_1_12);
    await holder.listTubeUsed(); // any command from the holder makes 1.12 see the expiry
    job = await other.reserveWithTimeout(2);
    note = NOTE_1_12;
  }
  if (job instanceof Error) throw job;
  eq([job.id, job.payload.toString()], [id, 'ttr'], 'job ready again after its ttr');
  const s = await jobStats(other, id);
  eq([s.reserves, s.timeouts], [2, 1], 'reserves/timeouts after the expiry');
  ok(strictStats(await other.stats(), 'stats', 'stats')['job-timeouts'] >= 1, 'stats job-timeouts');
  return note;
});

run();
