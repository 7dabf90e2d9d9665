<?php
// Interop checks for the PHP client pheanstalk 4 (Debian's php-pda-pheanstalk)
// against a beanstalkd-compatible server.
//
//   php tests/clients/pheanstalk_check.php [HOST [PORT]]
//   (or BEANSTALK_HOST / BEANSTALK_PORT; default 127.0.0.1:11300)
//
// Prints "ok - NAME" or "not ok - NAME: reason" per check, then
// "N passed, M failed"; exits 1 if any check failed. Every check uses its
// own connection(s) and its own tube, so checks are independent.

declare(strict_types=1);

require_once '/usr/share/php/Pheanstalk/autoload.php';

use Pheanstalk\Command\AbstractCommand;
use Pheanstalk\Connection;
use Pheanstalk\Contract\ResponseParserInterface;
use Pheanstalk\Exception;
use Pheanstalk\Job;
use Pheanstalk\JobId;
use Pheanstalk\Pheanstalk;
use Pheanstalk\Response\ArrayResponse;
use Pheanstalk\SocketFactory;

$HOST = $argv[1] ?? (getenv('BEANSTALK_HOST') ?: '127.0.0.1');
$PORT = (int)($argv[2] ?? (getenv('BEANSTALK_PORT') ?: 11300));
$PREFIX = 'php' . getmypid();
$STATS_KEYS = json_decode(file_get_contents(__DIR__ . '/stats_keys.json'), true);
// Set by tests/test_clients.py for its beanstalkd 1.12 reference run only.
$TOLERATE_1_12 = getenv('TOLERATE_BEANSTALKD_1_12_BUGS') === '1';
$passed = 0;
$failed = 0;
$current = '';
$note = null;

// Warnings (from yaml_parse, sockets, ...) fail the check instead of passing by.
set_error_handler(function (int $no, string $msg, string $file, int $line) {
    throw new ErrorException($msg, 0, $no, $file, $line);
});

// A check that hangs ends the whole run: the socket is in an unknown state.
pcntl_async_signals(true);
pcntl_signal(SIGALRM, function () {
    global $passed, $failed, $current;
    echo "not ok - $current: timed out\n";
    $failed++;
    echo "$passed passed, $failed failed\n";
    exit(1);
});

class CheckFailed extends RuntimeException
{
}

/** A raw command sent through pheanstalk's own Connection. */
class RawCommand extends AbstractCommand implements ResponseParserInterface
{
    private $line;

    public function __construct(string $line)
    {
        $this->line = $line;
    }

    public function getCommandLine(): string
    {
        return $this->line;
    }

    public function parseResponse(string $responseLine, ?string $responseData): ArrayResponse
    {
        return new ArrayResponse(explode(' ', $responseLine)[0], ['line' => $responseLine, 'data' => $responseData]);
    }
}

/** pheanstalk plus its Connection, for raw commands on the same socket. */
class Client
{
    public $p;
    public $conn;

    public function __construct(string $host, int $port)
    {
        $this->conn = new Connection(new SocketFactory($host, $port, 5));
        $this->p = new Pheanstalk($this->conn);
    }

    public function raw(string $line): ArrayResponse
    {
        return $this->conn->dispatchCommand(new RawCommand($line));
    }

    public function close(): void
    {
        $this->conn->disconnect();
    }
}

function show($v): string
{
    if (is_string($v) && strlen($v) > 80) {
        return strlen($v) . ' bytes';
    }
    $s = preg_replace('/\s+/', ' ', var_export($v, true));
    return strlen($s) > 300 ? substr($s, 0, 300) . '...' : $s;
}

function ok(bool $cond, string $msg): void
{
    if (!$cond) {
        throw new CheckFailed($msg);
    }
}

function eq($got, $want, string $what): void
{
    if ($got !== $want) {
        throw new CheckFailed("$what: got " . str_replace("\n", ' ', show($got)) . ', want ' . str_replace("\n", ' ', show($want)));
    }
}

function raises(string $class, string $what, callable $fn): Throwable
{
    try {
        $r = $fn();
    } catch (Throwable $e) {
        if ($e instanceof $class) {
            return $e;
        }
        throw new CheckFailed("$what: expected $class, got " . get_class($e) . ': ' . $e->getMessage());
    }
    throw new CheckFailed("$what: expected $class, got " . show($r));
}

function check(string $name, callable $fn, int $limit = 20): void
{
    global $HOST, $PORT, $PREFIX, $passed, $failed, $current, $note;
    $current = $name;
    $note = null;
    $clients = [];
    $connect = function () use (&$clients, $HOST, $PORT): Client {
        $c = new Client($HOST, $PORT);
        $clients[] = $c;
        return $c;
    };
    pcntl_alarm($limit);
    try {
        $fn("$PREFIX-$name", $connect);
        echo "ok - $name" . ($note === null ? '' : " # $note") . "\n";
        $passed++;
    } catch (Throwable $e) {
        $msg = preg_replace('/\s+/', ' ', get_class($e) . ': ' . $e->getMessage());
        echo "not ok - $name: $msg\n";
        $failed++;
    } finally {
        pcntl_alarm(0);
        foreach ($clients as $c) {
            try {
                $c->close();
            } catch (Throwable $e) {
            }
        }
    }
}

function put(Client $c, string $tube, string $body, int $pri = 1024, int $delay = 0, int $ttr = 60): int
{
    $c->p->useTube($tube);
    $job = $c->p->put($body, $pri, $delay, $ttr);
    ok($job->getId() > 0, 'put id ' . $job->getId());
    return $job->getId();
}

function watchOnly(Client $c, string $tube): void
{
    $c->p->watchOnly($tube);
    eq($c->p->listTubesWatched(true), [$tube], 'watched tubes');
}

function jobStats(Client $c, int $id): ArrayResponse
{
    return $c->p->statsJob(new JobId($id));
}

/** Raw "OK <bytes>" reply with framing checked; returns the YAML text. */
function rawOk(Client $c, string $cmd): string
{
    $r = $c->raw($cmd);
    ok((bool)preg_match('/^OK (\d+)$/', $r['line'], $m), "$cmd: reply line " . show($r['line']));
    eq(strlen($r['data']), (int)$m[1], "$cmd: body length");
    return $r['data'];
}

/** 1.12's keys first, in 1.12's order; extra keys may follow. */
function checkKeys(array $got, array $want, string $what): void
{
    $missing = array_diff($want, $got);
    ok(!$missing, "$what: missing keys " . implode(', ', $missing));
    foreach ($want as $i => $k) {
        ok($got[$i] === $k, "$what: key $i is {$got[$i]}, want $k (1.12's order)");
    }
}

/**
 * Loads a stats body with the yaml extension (warnings are errors) and checks
 * key names/order (extra keys may follow 1.12's) and that numeric fields are
 * numbers. Also checks
 * pheanstalk's own line parser agrees (its values are raw strings).
 */
function strictStats(Client $c, string $cmd, string $kind, ArrayResponse $lib): array
{
    global $STATS_KEYS;
    $text = rawOk($c, $cmd);
    ok(strncmp($text, "---\n", 4) === 0, "$cmd: body does not start with ---");
    $data = yaml_parse($text);
    ok(is_array($data), "$cmd: YAML is not a mapping");
    $spec = $STATS_KEYS[$kind];
    checkKeys(array_keys($data), $spec['keys'], $cmd);
    checkKeys(array_keys($lib->getArrayCopy()), $spec['keys'], "pheanstalk's $cmd");
    foreach ($data as $k => $v) {
        if (!in_array($k, $spec['keys'], true)) {
            ok(is_scalar($v) || $v === null, "$cmd: $k is " . show($v)); // extra keys, after 1.12's
            continue;
        }
        if (in_array($k, $spec['strings'], true)) {
            continue;
        }
        ok(is_int($v) || is_float($v), "$cmd: $k is " . show($v) . ', not a number');
        ok(isset($lib[$k]) && is_numeric($lib[$k]), "pheanstalk's $cmd: $k is " . show($lib[$k] ?? null));
    }
    return $data;
}

function now(): float
{
    return hrtime(true) / 1e9;
}

// --------------------------------------------------------------------------

check('use-watch-ignore', function (string $t, callable $connect) {
    $c = $connect();
    eq($c->p->listTubeUsed(true), 'default', 'initial used tube');
    eq($c->p->listTubesWatched(true), ['default'], 'initial watch list');
    $c->p->useTube($t);
    eq($c->p->listTubeUsed(true), $t, 'used tube after use');
    $c->p->watch($t);
    eq($c->raw("watch $t")['line'], 'WATCHING 2', 'watching the same tube again');
    $w = $c->p->listTubesWatched(true);
    sort($w);
    $want = ['default', $t];
    sort($want);
    eq($w, $want, 'watch list');
    $c->p->ignore('default');
    eq($c->p->listTubesWatched(true), [$t], 'watch list after ignore');
    eq($c->raw("ignore $t-never-watched")['line'], 'WATCHING 1', 'ignoring an unwatched tube');
    raises(Exception\ServerException::class, 'ignoring the last watched tube', function () use ($c, $t) {
        $c->p->ignore($t);
    });
    raises(Exception\ServerBadFormatException::class, 'use of a bad tube name', function () use ($c) {
        $c->p->useTube('-bad');
    });
    raises(Exception\ServerBadFormatException::class, 'watch of a 201-byte name', function () use ($c) {
        $c->p->watch(str_repeat('a', 201));
    });
    $c->p->useTube(str_repeat('a', 200));
    eq($c->p->listTubeUsed(true), str_repeat('a', 200), '200-byte tube name');
});

check('put-pri-delay-ttr', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'job', 42, 3, 7);
    $s = jobStats($c, $id);
    eq([$s['tube'], $s['state'], $s['pri'], $s['delay'], $s['ttr']], [$t, 'delayed', '42', '3', '7'], 'stats-job of delayed put');
    ok((int)$s['time-left'] >= 0 && (int)$s['time-left'] <= 3, 'time-left ' . $s['time-left']);
    $id2 = put($c, $t, 'max', 4294967295, 0, 0);
    $s = jobStats($c, $id2);
    eq([$s['state'], $s['pri'], $s['ttr']], ['ready', '4294967295', '1'], 'pri 2^32-1 and ttr 0 (raised to 1)');
    ok($id2 > $id, "ids not increasing: $id then $id2");
});

check('reserve', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'hello', 1024, 0, 30);
    watchOnly($c, $t);
    $job = $c->p->reserve();
    eq([$job->getId(), $job->getData()], [$id, 'hello'], 'reserved job');
    $s = jobStats($c, $id);
    eq([$s['state'], $s['reserves'], $s['ttr']], ['reserved', '1', '30'], 'stats-job of reserved job');
    eq($c->p->statsTube($t)['current-jobs-reserved'], '1', 'current-jobs-reserved');
});

check('reserve-with-timeout', function (string $t, callable $connect) {
    $c = $connect();
    watchOnly($c, $t);
    $t0 = now();
    eq($c->p->reserveWithTimeout(0), null, 'reserve-with-timeout 0 on an empty tube');
    ok(now() - $t0 < 0.5, 'timeout 0 took ' . (now() - $t0));
    $t0 = now();
    eq($c->p->reserveWithTimeout(1), null, 'reserve-with-timeout 1 on an empty tube');
    ok(now() - $t0 >= 0.9 && now() - $t0 < 3.0, 'timeout 1 took ' . (now() - $t0));
    $id = put($c, $t, 'x');
    $job = $c->p->reserveWithTimeout(1);
    eq($job ? $job->getId() : null, $id, 'reserve-with-timeout with a ready job');
});

check('delete', function (string $t, callable $connect) {
    $a = $connect();
    $b = $connect();
    $id = put($a, $t, 'd');
    $a->p->delete(new JobId($id));
    raises(Exception\JobNotFoundException::class, 'peek after delete', function () use ($a, $id) {
        $a->p->peek(new JobId($id));
    });
    raises(Exception\JobNotFoundException::class, 'second delete', function () use ($a, $id) {
        $a->p->delete(new JobId($id));
    });
    $id = put($a, $t, 'held');
    watchOnly($a, $t);
    $job = $a->p->reserveWithTimeout(0);
    eq($job->getId(), $id, 'reserved');
    raises(Exception\JobNotFoundException::class, 'delete of a job reserved by another connection', function () use ($b, $id) {
        $b->p->delete(new JobId($id));
    });
    $a->p->delete($job);
    $id = put($a, $t, 'later', 1024, 100);
    $b->p->delete(new JobId($id));
    raises(Exception\JobNotFoundException::class, 'delayed job deleted', function () use ($a, $id) {
        $a->p->peek(new JobId($id));
    });
});

check('release-delay', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'r', 10);
    watchOnly($c, $t);
    $job = $c->p->reserveWithTimeout(0);
    $c->p->release($job, 7, 1);
    $s = jobStats($c, $id);
    eq([$s['state'], $s['pri'], $s['delay'], $s['releases']], ['delayed', '7', '1', '1'], 'stats-job after release');
    $c->p->useTube($t);
    eq($c->p->peekDelayed()->getId(), $id, 'peek-delayed');
    eq($c->p->reserveWithTimeout(0), null, 'reserve while the job is delayed');
    $t0 = now();
    $job = $c->p->reserveWithTimeout(5);
    eq($job ? $job->getId() : null, $id, 'job after its delay');
    ok(now() - $t0 > 0.3, 'delayed job came back after only ' . (now() - $t0) . 's');
    eq(jobStats($c, $id)['pri'], '7', 'priority given at release');
    $c->p->release($job);
    $s = jobStats($c, $id);
    eq([$s['state'], $s['pri'], $s['releases']], ['ready', '1024', '2'], 'release with pheanstalk defaults');
});

check('bury-kick', function (string $t, callable $connect) {
    $c = $connect();
    $ids = [put($c, $t, 'b1'), put($c, $t, 'b2')];
    watchOnly($c, $t);
    for ($i = 0; $i < 2; $i++) {
        $job = $c->p->reserveWithTimeout(0);
        $c->p->bury($job, 3);
        $s = jobStats($c, $job->getId());
        eq([$s['state'], $s['pri'], $s['buries']], ['buried', '3', '1'], 'stats-job after bury');
    }
    $c->p->useTube($t);
    eq($c->p->peekBuried()->getId(), $ids[0], 'peek-buried gives the oldest buried job');
    eq($c->p->statsTube($t)['current-jobs-buried'], '2', 'current-jobs-buried');
    eq($c->p->reserveWithTimeout(0), null, 'reserve with only buried jobs');
    eq($c->p->kick(1), 1, 'kick 1');
    eq($c->p->kick(10), 1, 'kick 10 with one buried job');
    eq($c->p->kick(10), 0, 'kick with nothing to kick');
    $s = jobStats($c, $ids[0]);
    eq([$s['state'], $s['kicks']], ['ready', '1'], 'stats-job after kick');
    $d = put($c, $t, 'delayed', 1024, 100);
    $c->p->delete(new JobId($ids[0]));
    $c->p->delete(new JobId($ids[1]));
    eq($c->p->kick(5), 1, 'kick moves delayed jobs when none is buried');
    eq(jobStats($c, $d)['state'], 'ready', 'kicked delayed job state');
});

check('kick-job', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'k');
    watchOnly($c, $t);
    $job = $c->p->reserveWithTimeout(0);
    $c->p->bury($job);
    $c->p->kickJob($job);
    eq(jobStats($c, $id)['state'], 'ready', 'state after kick-job');
    raises(Exception\JobNotFoundException::class, 'kick-job of a ready job', function () use ($c, $job) {
        $c->p->kickJob($job);
    });
    $d = put($c, $t, 'd', 1024, 100);
    $c->p->kickJob(new JobId($d));
    eq(jobStats($c, $d)['state'], 'ready', 'delayed job state after kick-job');
    raises(Exception\JobNotFoundException::class, 'kick-job of a missing job', function () use ($c) {
        $c->p->kickJob(new JobId(4294967295));
    });
});

check('touch', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'tt', 1024, 0, 5);
    watchOnly($c, $t);
    $job = $c->p->reserveWithTimeout(0);
    usleep(1100000);
    $before = (int)jobStats($c, $id)['time-left'];
    ok($before <= 4, "time-left $before 1.1 s into a 5 s ttr");
    $c->p->touch($job);
    $after = (int)jobStats($c, $id)['time-left'];
    ok($after >= 4 && $after > $before, "time-left after touch $after (before $before)");
    $c->p->release($job);
    raises(Exception\JobNotFoundException::class, 'touch of a job not reserved', function () use ($c, $job) {
        $c->p->touch($job);
    });
});

check('peek', function (string $t, callable $connect) {
    $c = $connect();
    $c->p->useTube($t);
    eq([$c->p->peekReady(), $c->p->peekDelayed(), $c->p->peekBuried()], [null, null, null], 'peeks on an empty tube');
    raises(Exception\JobNotFoundException::class, 'peek of a missing id', function () use ($c) {
        $c->p->peek(new JobId(4294967295));
    });
    $r1 = put($c, $t, 'ready-low', 10);
    $r2 = put($c, $t, 'ready-high', 1);
    $d1 = put($c, $t, 'delayed-long', 1024, 200);
    $d2 = put($c, $t, 'delayed-short', 1024, 100);
    $b = put($c, $t, 'to-bury', 0);
    watchOnly($c, $t);
    $job = $c->p->reserveWithTimeout(0);
    eq($job->getId(), $b, 'reserve picks pri 0');
    $c->p->bury($job);
    $p = $c->p->peekReady();
    eq([$p->getId(), $p->getData()], [$r2, 'ready-high'], 'peek-ready gives the most urgent job');
    $p = $c->p->peekDelayed();
    eq([$p->getId(), $p->getData()], [$d2, 'delayed-short'], 'peek-delayed gives the soonest job');
    $p = $c->p->peekBuried();
    eq([$p->getId(), $p->getData()], [$b, 'to-bury'], 'peek-buried');
    $p = $c->p->peek(new JobId($r1));
    eq([$p->getId(), $p->getData()], [$r1, 'ready-low'], 'peek <id>');
    eq($c->p->peek(new JobId($d1))->getData(), 'delayed-long', 'peek <id> of a delayed job');
    $c->p->useTube("$t-empty");
    eq($c->p->peekReady(), null, 'peek-ready acts on the used tube');
});

check('stats', function (string $t, callable $connect) {
    $c = $connect();
    put($c, $t, 's');
    $s = strictStats($c, 'stats', 'stats', $c->p->stats());
    ok(is_string($s['version']), 'version is ' . show($s['version']) . ', not a string');
    eq($s['draining'], false, 'draining');
    ok($s['current-connections'] >= 1, 'current-connections');
    ok($s['total-jobs'] >= 1 && $s['cmd-put'] >= 1, 'total-jobs / cmd-put');
    ok($s['max-job-size'] >= 61440, 'max-job-size ' . $s['max-job-size']);
    $lib = $c->p->stats();
    eq($lib->getResponseName(), 'OK', 'stats response name');
    ok(is_numeric($lib->current_jobs_ready), "pheanstalk's property access current_jobs_ready");
});

check('stats-tube', function (string $t, callable $connect) {
    $c = $connect();
    put($c, $t, 'u1', 5);
    put($c, $t, 'u2', 2000);
    put($c, $t, 'd', 1024, 100);
    $lib = $c->p->statsTube($t);
    $s = strictStats($c, "stats-tube $t", 'stats-tube', $lib);
    eq($s['name'], $t, 'name');
    eq($lib['name'], $t, "pheanstalk's name (raw, so it must not be quoted)");
    $got = [];
    foreach (['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-delayed', 'current-jobs-buried',
                 'current-jobs-reserved', 'total-jobs', 'current-using', 'pause'] as $k) {
        $got[] = $s[$k];
    }
    eq($got, [1, 2, 1, 0, 0, 3, 1, 0], 'urgent/ready/delayed/buried/reserved/total/using/pause');
    raises(Exception\ServerException::class, 'stats-tube of a missing tube', function () use ($c, $t) {
        $c->p->statsTube("$t-none");
    });
});

check('stats-job', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'j', 99, 0, 9);
    $s = strictStats($c, "stats-job $id", 'stats-job', jobStats($c, $id));
    $got = [];
    foreach (['id', 'tube', 'state', 'pri', 'delay', 'ttr', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'] as $k) {
        $got[] = $s[$k];
    }
    eq($got, [$id, $t, 'ready', 99, 0, 9, 0, 0, 0, 0, 0], 'stats-job values');
    eq(jobStats($c, $id)['tube'], $t, "pheanstalk's tube (raw, so it must not be quoted)");
    watchOnly($c, $t);
    $c->p->reserveWithTimeout(0);
    $s = strictStats($c, "stats-job $id", 'stats-job', jobStats($c, $id));
    eq([$s['state'], $s['reserves']], ['reserved', 1], 'stats-job of the reserved job');
    ok($s['time-left'] >= 7 && $s['time-left'] <= 9, 'time-left ' . $s['time-left']);
    raises(Exception\ServerException::class, 'stats-job of a missing job', function () use ($c) {
        jobStats($c, 4294967295);
    });
});

check('list-tubes', function (string $t, callable $connect) {
    $c = $connect();
    $c->p->useTube("$t-used");
    $c->p->watch("$t-watched");
    $all = $c->p->listTubes();
    foreach (['default', "$t-used", "$t-watched"] as $n) {
        ok(in_array($n, $all, true), "list-tubes lacks $n");
    }
    $w = $c->p->listTubesWatched(true);
    sort($w);
    eq($w, ['default', "$t-watched"], 'list-tubes-watched');
    eq($c->p->listTubeUsed(true), "$t-used", 'list-tube-used');
    $list = yaml_parse(rawOk($c, 'list-tubes'));
    ok(is_array($list) && array_is_list($list), 'list-tubes YAML is not a sequence');
    foreach (['default', "$t-used", "$t-watched"] as $n) {
        ok(in_array($n, $list, true), "raw list-tubes lacks $n");
    }
    $list = yaml_parse(rawOk($c, 'list-tubes-watched'));
    sort($list);
    eq($list, ['default', "$t-watched"], 'raw list-tubes-watched');
});

check('pause-tube', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'p');
    watchOnly($c, $t);
    $c->p->pauseTube($t, 60);
    $s = $c->p->statsTube($t);
    eq($s['pause'], '60', 'pause');
    ok((int)$s['pause-time-left'] >= 58 && (int)$s['pause-time-left'] <= 60, 'pause-time-left ' . $s['pause-time-left']);
    eq($c->p->reserveWithTimeout(0), null, 'reserve from a paused tube');
    $c->p->resumeTube($t);
    $job = $c->p->reserveWithTimeout(0);
    eq($job ? $job->getId() : null, $id, 'reserve after resumeTube (pause-tube 0)');
    $c->p->delete($job);
    $id = put($c, $t, 'p2');
    $c->p->pauseTube($t, 1);
    $t0 = now();
    $job = $c->p->reserveWithTimeout(5);
    eq($job ? $job->getId() : null, $id, 'job after the pause ends');
    ok(now() - $t0 > 0.3, 'pause ended after only ' . (now() - $t0) . 's');
    raises(Exception\ServerException::class, 'pause-tube of a missing tube', function () use ($c, $t) {
        $c->p->pauseTube("$t-none", 1);
    });
});

check('binary-body', function (string $t, callable $connect) {
    $c = $connect();
    watchOnly($c, $t);
    $all = '';
    for ($i = 0; $i < 256; $i++) {
        $all .= chr($i);
    }
    $bodies = [$all . "\r\n\0\r\n\r\n", "\r\n", "\0", '', "line1\r\nput 0 0 1 1\r\nx\r\n"];
    foreach ($bodies as $i => $body) {
        $id = put($c, $t, $body);
        eq($c->p->peek(new JobId($id))->getData(), $body, "peek of body $i");
        $job = $c->p->reserveWithTimeout(0);
        eq([$job->getId(), $job->getData()], [$id, $body], "reserve of body $i");
        $c->p->delete($job);
    }
});

check('big-body', function (string $t, callable $connect) {
    $c = $connect();
    watchOnly($c, $t);
    $body = random_bytes(60 * 1024);
    $id = put($c, $t, $body);
    eq($c->p->peek(new JobId($id))->getData(), $body, 'peek of the 60 KiB body');
    eq($c->p->reserveWithTimeout(0)->getData(), $body, 'reserve of the 60 KiB body');
    $max = (int)$c->p->stats()['max-job-size'];
    raises(Exception\JobTooBigException::class, 'put of max-job-size+1 (' . ($max + 1) . ') bytes', function () use ($c, $t, $max) {
        put($c, $t, str_repeat('z', $max + 1));
    });
    eq($c->p->listTubeUsed(true), $t, 'list-tube-used after JOB_TOO_BIG');
    $id = put($c, $t, str_repeat('y', $max));
    eq(strlen($c->p->peek(new JobId($id))->getData()), $max, 'put of exactly max-job-size bytes');
});

check('priority-drain-1000', function (string $t, callable $connect) {
    $c = $connect();
    mt_srand(1234);
    $jobs = [];
    for ($i = 0; $i < 1000; $i++) {
        $pri = $i === 0 ? 4294967295 : ($i === 1 ? 0 : mt_rand(0, 99) * 1000);
        $jobs[] = [$pri, put($c, $t, "job-$i", $pri)];
    }
    watchOnly($c, $t);
    $order = [];
    for ($i = 0; $i < 1000; $i++) {
        $job = $c->p->reserveWithTimeout(0);
        ok($job !== null, "reserve $i timed out");
        $order[] = $job->getId();
        $c->p->delete($job);
    }
    sort($jobs);
    $want = array_column($jobs, 1);
    foreach ($order as $i => $id) {
        ok($id === $want[$i], "position $i: got job $id, want {$want[$i]} (pri order, then FIFO)");
    }
    eq($c->p->reserveWithTimeout(0), null, 'tube empty after the drain');
    $s = $c->p->statsTube($t);
    eq([$s['total-jobs'], $s['cmd-delete'], $s['current-jobs-ready']], ['1000', '1000', '0'], 'stats-tube after the drain');
}, 40);

check('deadline-soon', function (string $t, callable $connect) {
    $c = $connect();
    $id = put($c, $t, 'ds', 1024, 0, 2);
    watchOnly($c, $t);
    eq($c->p->reserveWithTimeout(0)->getId(), $id, 'reserved');
    $t0 = now();
    raises(Exception\DeadlineSoonException::class, 'reserve-with-timeout while a 2 s ttr job runs out', function () use ($c) {
        $c->p->reserveWithTimeout(10);
    });
    ok(now() - $t0 < 1.9, 'DEADLINE_SOON after ' . (now() - $t0) . 's');
});

check('ttr-expiry', function (string $t, callable $connect) {
    $holder = $connect();
    $other = $connect();
    $id = put($holder, $t, 'ttr', 1024, 0, 1);
    watchOnly($holder, $t);
    eq($holder->p->reserveWithTimeout(0)->getId(), $id, 'reserved');
    watchOnly($other, $t);
    eq($other->p->reserveWithTimeout(0), null, 'job still reserved within its ttr');
    usleep(2000000); // the holder stays idle
    $job = $other->p->reserveWithTimeout(2);
    if ($job === null) {
        global $TOLERATE_1_12, $note;
        ok($TOLERATE_1_12, 'job with a 1 s ttr not ready again 4 s after it was reserved (its holder was idle)');
        $holder->p->listTubeUsed(true); // any command from the holder makes 1.12 see the expiry
        $job = $other->p->reserveWithTimeout(2);
        $note = 'tolerated beanstalkd 1.12 bug (issues 262, 380): the job expired only once its idle holder sent a command';
    }
    eq($job ? [$job->getId(), $job->getData()] : null, [$id, 'ttr'], 'job ready again after its ttr');
    $s = jobStats($other, $id);
    eq([$s['reserves'], $s['timeouts']], ['2', '1'], 'reserves/timeouts after the expiry');
    ok((int)$other->p->stats()['job-timeouts'] >= 1, 'stats job-timeouts');
});

echo "$passed passed, $failed failed\n";
exit($failed === 0 ? 0 : 1);
