#!/usr/bin/env ruby
# Interop checks for the Ruby client beaneater (Debian's ruby-beaneater)
# against a beanstalkd-compatible server.
#
#   ruby tests/clients/beaneater_check.rb [HOST [PORT]]
#   (or BEANSTALK_HOST / BEANSTALK_PORT; default 127.0.0.1:11300)
#
# Prints "ok - NAME" or "not ok - NAME: reason" per check, then
# "N passed, M failed"; exits 1 if any check failed. Every check uses its
# own connection(s) and its own tube, so checks are independent.
require 'beaneater'
require 'json'
require 'psych'
require 'securerandom'
require 'timeout'

HOST = ARGV[0] || ENV['BEANSTALK_HOST'] || '127.0.0.1'
PORT = Integer(ARGV[1] || ENV['BEANSTALK_PORT'] || 11300)
ADDR = "#{HOST}:#{PORT}"
PREFIX = "rb#{Process.pid}"
STATS_KEYS = JSON.parse(File.read(File.join(__dir__, 'stats_keys.json')))
# Set by tests/test_clients.py for its beanstalkd 1.12 reference run only.
TOLERATE_1_12 = ENV['TOLERATE_BEANSTALKD_1_12_BUGS'] == '1'
$stdout.sync = true
$passed = 0
$failed = 0

class CheckFailed < StandardError; end

def assert(cond, msg)
  raise CheckFailed, msg unless cond
end

def show(v)
  return "#{v.bytesize} bytes" if v.is_a?(String) && v.bytesize > 80
  s = v.inspect
  s.size > 300 ? "#{s[0, 300]}..." : s
end

def eq(got, want, what)
  return if got == want
  raise CheckFailed, "#{what}: got #{show(got)}, want #{show(want)}"
end

def raises(klass, what)
  begin
    r = yield
  rescue klass => e
    return e
  end
  raise CheckFailed, "#{what}: expected #{klass}, got #{r.inspect}"
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Runs one check with a time limit. The block gets the check's tube name and
# a lambda that opens a new client (closed afterwards).
def check(name, limit = 20)
  clients = []
  tube = "#{PREFIX}-#{name}"
  connect = lambda do
    c = Beaneater.new(ADDR)
    clients << c
    c
  end
  $note = nil
  Timeout.timeout(limit) { yield tube, connect }
  puts "ok - #{name}#{$note ? " # #{$note}" : ''}"
  $passed += 1
rescue StandardError, Timeout::Error => e
  puts "not ok - #{name}: #{e.class}: #{e.message}".gsub(/[\r\n]+/, ' ')
  $failed += 1
ensure
  clients.each { |c| c.close rescue nil }
end

# A command that answers "OK <bytes>\r\n<yaml>\r\n", sent over beaneater's own
# socket; checks the framing and returns the raw YAML text.
def raw_ok(client, cmd)
  sock = client.connection.connection
  sock.write("#{cmd}\r\n")
  line = sock.readline
  m = /\AOK (\d+)\r\n\z/.match(line)
  assert m, "#{cmd}: reply line #{line.inspect}"
  body = sock.read(m[1].to_i)
  eq body.bytesize, m[1].to_i, "#{cmd}: body length"
  eq sock.read(2), "\r\n", "#{cmd}: body terminator"
  body
end

# Parses a stats body with Psych's safe_load (no aliases, no custom
# classes) and checks that 1.12's keys come first, in 1.12's order (extra
# keys may follow), and that numeric fields are numbers.
def strict_stats(client, cmd, kind)
  text = raw_ok(client, cmd)
  assert text.start_with?("---\n"), "#{cmd}: body does not start with ---: #{text[0, 20].inspect}"
  data = Psych.safe_load(text, permitted_classes: [], permitted_symbols: [], aliases: false)
  assert data.is_a?(Hash), "#{cmd}: YAML is #{data.class}, not a mapping"
  spec = STATS_KEYS[kind]
  want = spec['keys']
  missing = want - data.keys
  assert missing.empty?, "#{cmd}: missing keys #{missing.join(', ')}"
  i = want.each_index.find { |j| data.keys[j] != want[j] }
  assert i.nil?, "#{cmd}: key #{i} is #{data.keys[i]}, want #{want[i]} (1.12's order)" unless i.nil?
  data.each do |k, v|
    if want.include?(k)
      next if spec['strings'].include?(k)
      assert v.is_a?(Integer) || v.is_a?(Float), "#{cmd}: #{k} is #{v.inspect} (#{v.class}), not a number"
    else # extra keys, after 1.12's: any scalar
      assert [Integer, Float, String, TrueClass, FalseClass, NilClass].any? { |c| v.is_a?(c) }, "#{cmd}: #{k} is #{v.class}"
    end
  end
  data
end

def put(client, tube, body, pri: 65536, delay: 0, ttr: 120)
  r = client.tubes[tube].put(body, pri: pri, delay: delay, ttr: ttr)
  eq r[:status], 'INSERTED', 'put status'
  assert r[:id] =~ /\A\d+\z/, "put id #{r[:id].inspect}"
  r[:id].to_i
end

def only_watch(client, tube)
  client.tubes.watch!(tube)
  eq client.tubes.watched.map(&:name), [tube], 'watched tubes'
end

# --------------------------------------------------------------------------

check('use-watch-ignore') do |t, connect|
  c = connect.call
  eq c.tubes.used.name, 'default', 'initial used tube'
  eq c.tubes.watched.map(&:name), ['default'], 'initial watch list'
  c.tubes.use(t)
  eq c.tubes.used.name, t, 'used tube after use'
  r = c.connection.transmit("watch #{t}")
  eq [r[:status], r[:id]], ['WATCHING', '2'], 'watch reply'
  r = c.connection.transmit("watch #{t}")
  eq [r[:status], r[:id]], ['WATCHING', '2'], 'watching the same tube again'
  eq c.tubes.watched.map(&:name).sort, ['default', t].sort, 'watch list'
  c.tubes.ignore('default')
  eq c.tubes.watched.map(&:name), [t], 'watch list after ignore'
  r = c.connection.transmit("ignore #{t}-never-watched")
  eq [r[:status], r[:id]], ['WATCHING', '1'], 'ignoring an unwatched tube'
  raises(Beaneater::NotIgnoredError, 'ignoring the last watched tube') { c.tubes.ignore(t) }
  raises(Beaneater::InvalidTubeName, 'use of a bad tube name') { c.tubes.use('-bad') }
  raises(Beaneater::InvalidTubeName, 'watch of a 201-byte name') { c.tubes.watch('a' * 201) }
  c.tubes.use('a' * 200)
  eq c.tubes.used.name, 'a' * 200, '200-byte tube name'
end

check('put-pri-delay-ttr') do |t, connect|
  c = connect.call
  id = put(c, t, 'job', pri: 42, delay: 3, ttr: 7)
  s = c.jobs.find(id).stats
  eq [s.tube, s.state, s.pri, s.delay, s.ttr], [t, 'delayed', 42, 3, 7], 'stats-job of delayed put'
  assert s.time_left.between?(0, 3), "time-left #{s.time_left}"
  id2 = put(c, t, 'max', pri: 2**32 - 1, ttr: 0)
  s = c.jobs.find(id2).stats
  eq [s.state, s.pri, s.ttr], ['ready', 2**32 - 1, 1], 'pri 2^32-1 and ttr 0 (raised to 1)'
  assert id2 > id, "ids not increasing: #{id} then #{id2}"
end

check('reserve') do |t, connect|
  c = connect.call
  id = put(c, t, 'hello', ttr: 30)
  job = c.tubes[t].reserve
  eq [job.id.to_i, job.body], [id, 'hello'], 'reserved job'
  assert job.reserved?, 'job not marked reserved'
  s = job.stats
  eq [s.state, s.reserves, s.ttr], ['reserved', 1, 30], 'stats-job of reserved job'
  eq c.tubes[t].stats.current_jobs_reserved, 1, 'current-jobs-reserved'
end

check('reserve-wakeup') do |t, connect|
  worker = connect.call
  producer = connect.call
  only_watch(worker, t)
  th = Thread.new { worker.tubes.reserve }
  deadline = now + 10 # poll: the server has to read the reserve first
  sleep 0.02 until producer.tubes[t].stats.current_waiting == 1 || now > deadline
  assert th.alive?, 'reserve returned with no job'
  eq producer.tubes[t].stats.current_waiting, 1, 'current-waiting'
  id = put(producer, t, 'wake')
  job = th.value
  eq [job.id.to_i, job.body], [id, 'wake'], 'job handed to the waiting worker'
end

check('reserve-with-timeout') do |t, connect|
  c = connect.call
  only_watch(c, t)
  t0 = now
  raises(Beaneater::TimedOutError, 'reserve-with-timeout 0 on empty tube') { c.tubes.reserve(0) }
  assert now - t0 < 0.5, "timeout 0 took #{now - t0}s"
  t0 = now
  raises(Beaneater::TimedOutError, 'reserve-with-timeout 1 on empty tube') { c.tubes.reserve(1) }
  assert (0.9..3.0).cover?(now - t0), "timeout 1 took #{now - t0}s"
  id = put(c, t, 'x')
  job = c.tubes.reserve(1)
  eq job.id.to_i, id, 'reserve-with-timeout with a ready job'
end

check('delete') do |t, connect|
  a = connect.call
  b = connect.call
  id = put(a, t, 'd')
  eq a.jobs.find(id).delete[:status], 'DELETED', 'delete reply'
  eq a.jobs.find(id), nil, 'peek after delete'
  raises(Beaneater::NotFoundError, 'second delete') { a.connection.transmit("delete #{id}") }
  id = put(a, t, 'held')
  only_watch(a, t)
  job = a.tubes.reserve(0)
  eq job.id.to_i, id, 'reserved'
  raises(Beaneater::NotFoundError, 'delete of a job reserved by another connection') do
    b.connection.transmit("delete #{id}")
  end
  job.delete
  id = put(a, t, 'later', delay: 100)
  eq b.connection.transmit("delete #{id}")[:status], 'DELETED', 'delete of a delayed job'
end

check('release-delay') do |t, connect|
  c = connect.call
  id = put(c, t, 'r', pri: 10)
  only_watch(c, t)
  job = c.tubes.reserve(0)
  eq job.release(pri: 7, delay: 1)[:status], 'RELEASED', 'release reply'
  s = job.stats
  eq [s.state, s.pri, s.delay, s.releases], ['delayed', 7, 1, 1], 'stats-job after release'
  eq c.tubes[t].peek(:delayed).id.to_i, id, 'peek-delayed'
  raises(Beaneater::TimedOutError, 'reserve while the job is delayed') { c.tubes.reserve(0) }
  t0 = now
  job = c.tubes.reserve(5)
  eq job.id.to_i, id, 'job after its delay'
  assert now - t0 > 0.3, "delayed job came back after only #{now - t0}s"
  eq job.stats.pri, 7, 'priority given at release'
  # beaneater's release with no arguments reads pri and delay back from
  # stats-job (the job's delay is still 1 from the first release).
  eq job.release[:status], 'RELEASED', 'release with defaults'
  s = job.stats
  eq [s.state, s.pri, s.delay, s.releases], ['delayed', 7, 1, 2], 'stats-job after default release'
end

check('bury-kick') do |t, connect|
  c = connect.call
  ids = [put(c, t, 'b1'), put(c, t, 'b2')]
  only_watch(c, t)
  2.times do
    job = c.tubes.reserve(0)
    eq job.bury(pri: 3)[:status], 'BURIED', 'bury reply'
    s = job.stats
    eq [s.state, s.pri, s.buries], ['buried', 3, 1], 'stats-job after bury'
  end
  eq c.tubes[t].peek(:buried).id.to_i, ids[0], 'peek-buried gives the oldest buried job'
  eq c.tubes[t].stats.current_jobs_buried, 2, 'current-jobs-buried'
  raises(Beaneater::TimedOutError, 'reserve with only buried jobs') { c.tubes.reserve(0) }
  r = c.tubes[t].kick(1)
  eq [r[:status], r[:id]], ['KICKED', '1'], 'kick 1'
  r = c.tubes[t].kick(10)
  eq [r[:status], r[:id]], ['KICKED', '1'], 'kick 10 with one buried job'
  r = c.tubes[t].kick(10)
  eq [r[:status], r[:id]], ['KICKED', '0'], 'kick with nothing to kick'
  s = c.jobs.find(ids[0]).stats
  eq [s.state, s.kicks], ['ready', 1], 'stats-job after kick'
  d = put(c, t, 'delayed', delay: 100)
  c.jobs.find(ids[0]).delete
  c.jobs.find(ids[1]).delete
  r = c.tubes[t].kick(5)
  eq [r[:status], r[:id]], ['KICKED', '1'], 'kick moves delayed jobs when none is buried'
  eq c.jobs.find(d).stats.state, 'ready', 'kicked delayed job state'
end

check('kick-job') do |t, connect|
  c = connect.call
  id = put(c, t, 'k')
  only_watch(c, t)
  job = c.tubes.reserve(0)
  job.bury
  eq job.kick[:status], 'KICKED', 'kick-job of a buried job'
  eq job.stats.state, 'ready', 'state after kick-job'
  raises(Beaneater::NotFoundError, 'kick-job of a ready job') { job.kick }
  d = put(c, t, 'd', delay: 100)
  eq c.jobs.find(d).kick[:status], 'KICKED', 'kick-job of a delayed job'
  eq c.jobs.find(d).stats.state, 'ready', 'delayed job state after kick-job'
  raises(Beaneater::NotFoundError, 'kick-job of a missing job') { c.connection.transmit('kick-job 4294967295') }
  assert id < d, 'ids'
end

check('touch') do |t, connect|
  c = connect.call
  put(c, t, 'tt', ttr: 5)
  only_watch(c, t)
  job = c.tubes.reserve(0)
  sleep 1.1
  before = job.stats.time_left
  assert before <= 4, "time-left #{before} 1.1 s into a 5 s ttr"
  eq job.touch[:status], 'TOUCHED', 'touch reply'
  after = job.stats.time_left
  assert after >= 4 && after > before, "time-left after touch #{after} (before #{before})"
  job.release(pri: 0, delay: 0)
  raises(Beaneater::NotFoundError, 'touch of a job not reserved') { c.connection.transmit("touch #{job.id}") }
end

check('peek') do |t, connect|
  c = connect.call
  tube = c.tubes[t]
  eq [tube.peek(:ready), tube.peek(:delayed), tube.peek(:buried)], [nil, nil, nil], 'peeks on an empty tube'
  eq c.jobs.find(4_294_967_295), nil, 'peek of a missing id'
  r1 = put(c, t, 'ready-low', pri: 10)
  r2 = put(c, t, 'ready-high', pri: 1)
  d1 = put(c, t, 'delayed-long', delay: 200)
  d2 = put(c, t, 'delayed-short', delay: 100)
  b = put(c, t, 'to-bury', pri: 0)
  only_watch(c, t)
  job = c.tubes.reserve(0)
  eq job.id.to_i, b, 'reserve picks pri 0'
  job.bury
  p = tube.peek(:ready)
  eq [p.id.to_i, p.body], [r2, 'ready-high'], 'peek-ready gives the most urgent job'
  p = tube.peek(:delayed)
  eq [p.id.to_i, p.body], [d2, 'delayed-short'], 'peek-delayed gives the soonest job'
  p = tube.peek(:buried)
  eq [p.id.to_i, p.body], [b, 'to-bury'], 'peek-buried'
  p = c.jobs.find(r1)
  eq [p.id.to_i, p.body], [r1, 'ready-low'], 'peek <id>'
  eq c.jobs.find(d1).body, 'delayed-long', 'peek <id> of a delayed job'
  # peek-* act on the used tube only.
  c.tubes.use("#{t}-empty")
  raises(Beaneater::NotFoundError, 'peek-ready acts on the used tube') { c.connection.transmit('peek-ready') }
end

check('stats') do |t, connect|
  c = connect.call
  put(c, t, 's')
  s = strict_stats(c, 'stats', 'stats')
  assert s['version'].is_a?(String), "version is #{s['version'].inspect}, not a string"
  eq s['draining'], false, 'draining'
  assert s['current-connections'] >= 1, 'current-connections'
  assert s['total-jobs'] >= 1 && s['cmd-put'] >= 1, 'total-jobs / cmd-put'
  assert s['max-job-size'] >= 61_440, "max-job-size #{s['max-job-size']}"
  # beaneater's own view: '-' becomes '_', values typed by its YAML load.
  st = c.stats
  assert st.keys.include?('current_jobs_ready'), "beaneater stats keys: #{st.keys.first(3)}"
  assert st.current_connections.is_a?(Integer), "beaneater current_connections #{st.current_connections.inspect}"
  assert st.uptime.is_a?(Integer), 'beaneater uptime'
end

check('stats-tube') do |t, connect|
  c = connect.call
  put(c, t, 'u1', pri: 5)
  put(c, t, 'u2', pri: 2000)
  put(c, t, 'd', delay: 100)
  s = strict_stats(c, "stats-tube #{t}", 'stats-tube')
  eq s['name'], t, 'name'
  got = s.values_at('current-jobs-urgent', 'current-jobs-ready', 'current-jobs-delayed',
                    'current-jobs-buried', 'current-jobs-reserved', 'total-jobs', 'current-using',
                    'pause')
  eq got, [1, 2, 1, 0, 0, 3, 1, 0], 'urgent/ready/delayed/buried/reserved/total/using/pause'
  ts = c.tubes[t].stats
  eq [ts.name, ts.current_jobs_ready, ts.total_jobs], [t, 2, 3], "beaneater's stats-tube"
  raises(Beaneater::NotFoundError, 'stats-tube of a missing tube') { c.connection.transmit("stats-tube #{t}-none") }
end

check('stats-job') do |t, connect|
  c = connect.call
  id = put(c, t, 'j', pri: 99, ttr: 9)
  s = strict_stats(c, "stats-job #{id}", 'stats-job')
  eq s.values_at('id', 'tube', 'state', 'pri', 'delay', 'ttr', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'),
     [id, t, 'ready', 99, 0, 9, 0, 0, 0, 0, 0], 'stats-job values'
  only_watch(c, t)
  c.tubes.reserve(0)
  s = strict_stats(c, "stats-job #{id}", 'stats-job')
  eq [s['state'], s['reserves']], ['reserved', 1], 'stats-job of the reserved job'
  assert s['time-left'].between?(7, 9), "time-left #{s['time-left']}"
  raises(Beaneater::NotFoundError, 'stats-job of a missing job') { c.connection.transmit('stats-job 4294967295') }
end

check('list-tubes') do |t, connect|
  c = connect.call
  c.tubes.use("#{t}-used")
  c.tubes.watch("#{t}-watched")
  all = c.tubes.all.map(&:name)
  ['default', "#{t}-used", "#{t}-watched"].each { |n| assert all.include?(n), "list-tubes lacks #{n}: #{all}" }
  eq c.tubes.watched.map(&:name).sort, ['default', "#{t}-watched"].sort, 'list-tubes-watched'
  eq c.tubes.used.name, "#{t}-used", 'list-tube-used'
  text = raw_ok(c, 'list-tubes')
  list = Psych.safe_load(text, aliases: false)
  assert list.is_a?(Array) && list.all? { |x| x.is_a?(String) }, "list-tubes YAML #{list.inspect}"
  ['default', "#{t}-used", "#{t}-watched"].each { |n| assert list.include?(n), "raw list-tubes lacks #{n}" }
  list = Psych.safe_load(raw_ok(c, 'list-tubes-watched'), aliases: false)
  eq list.sort, ['default', "#{t}-watched"].sort, 'raw list-tubes-watched'
end

check('pause-tube') do |t, connect|
  c = connect.call
  id = put(c, t, 'p')
  only_watch(c, t)
  eq c.tubes[t].pause(60)[:status], 'PAUSED', 'pause-tube reply'
  s = c.tubes[t].stats
  eq s.pause, 60, 'pause'
  assert s.pause_time_left.between?(58, 60), "pause-time-left #{s.pause_time_left}"
  raises(Beaneater::TimedOutError, 'reserve from a paused tube') { c.tubes.reserve(0) }
  c.tubes[t].pause(0)
  job = c.tubes.reserve(0)
  eq job.id.to_i, id, 'reserve after pause-tube 0'
  job.delete
  id = put(c, t, 'p2')
  c.tubes[t].pause(1)
  t0 = now
  job = c.tubes.reserve(5)
  eq job.id.to_i, id, 'job after the pause ends'
  assert now - t0 > 0.3, "pause ended after only #{now - t0}s"
  raises(Beaneater::NotFoundError, 'pause-tube of a missing tube') { c.tubes["#{t}-none"].pause(1) }
end

check('binary-body') do |t, connect|
  c = connect.call
  only_watch(c, t)
  bodies = [
    (0..255).map(&:chr).join.b + "\r\n\0\r\n\r\n".b,
    "\r\n".b,
    "\0".b,
    ''.b,
    "line1\r\nput 0 0 1 1\r\nx\r\n".b
  ]
  bodies.each_with_index do |body, i|
    id = put(c, t, body)
    eq c.jobs.find(id).body.b, body, "peek of body #{i}"
    job = c.tubes.reserve(0)
    eq [job.id.to_i, job.body.b], [id, body], "reserve of body #{i}"
    job.delete
  end
end

check('big-body') do |t, connect|
  c = connect.call
  only_watch(c, t)
  body = SecureRandom.random_bytes(60 * 1024)
  id = put(c, t, body)
  eq c.jobs.find(id).body.b, body, 'peek of the 60 KiB body'
  job = c.tubes.reserve(0)
  eq job.body.b, body, 'reserve of the 60 KiB body'
  max = c.stats.max_job_size
  raises(Beaneater::JobTooBigError, "put of max-job-size+1 (#{max + 1}) bytes") { c.tubes[t].put('z' * (max + 1)) }
  # The connection stays usable after JOB_TOO_BIG.
  eq c.tubes.used.name, t, 'list-tube-used after JOB_TOO_BIG'
  id = put(c, t, 'y' * max)
  eq c.jobs.find(id).body.bytesize, max, 'put of exactly max-job-size bytes'
end

check('priority-drain-1000', 40) do |t, connect|
  c = connect.call
  rng = Random.new(1234)
  jobs = Array.new(1000) do |i|
    pri = case i
          when 0 then 2**32 - 1
          when 1 then 0
          else rng.rand(100) * 1000
          end
    [pri, put(c, t, "job-#{i}", pri: pri)]
  end
  only_watch(c, t)
  order = []
  1000.times do
    job = c.tubes.reserve(0)
    order << job.id.to_i
    job.delete
  end
  want = jobs.sort.map(&:last)
  eq order.size, 1000, 'jobs drained'
  bad = order.each_index.find { |i| order[i] != want[i] }
  assert bad.nil?, "position #{bad}: got job #{order[bad]}, want #{want[bad]} (pri order, then FIFO)" unless bad.nil?
  raises(Beaneater::TimedOutError, 'tube empty after the drain') { c.tubes.reserve(0) }
  s = c.tubes[t].stats
  eq [s.total_jobs, s.cmd_delete, s.current_jobs_ready], [1000, 1000, 0], 'stats-tube after the drain'
end

check('deadline-soon') do |t, connect|
  c = connect.call
  id = put(c, t, 'ds', ttr: 2)
  only_watch(c, t)
  job = c.tubes.reserve(0)
  eq job.id.to_i, id, 'reserved'
  t0 = now
  raises(Beaneater::DeadlineSoonError, 'reserve-with-timeout while a 2 s ttr job runs out') { c.tubes.reserve(10) }
  assert now - t0 < 1.9, "DEADLINE_SOON after #{now - t0}s"
end

check('ttr-expiry') do |t, connect|
  holder = connect.call
  other = connect.call
  id = put(holder, t, 'ttr', ttr: 1)
  only_watch(holder, t)
  job = holder.tubes.reserve(0)
  eq job.id.to_i, id, 'reserved'
  only_watch(other, t)
  raises(Beaneater::TimedOutError, 'job still reserved within its ttr') { other.tubes.reserve(0) }
  sleep 2.0 # the holder stays idle
  begin
    job = other.tubes.reserve(2)
  rescue Beaneater::TimedOutError
    raise CheckFailed, 'job with a 1 s ttr not ready again 4 s after it was reserved (its holder was idle)' unless TOLERATE_1_12
    holder.tubes.used # any command from the holder makes 1.12 see the expiry
    job = other.tubes.reserve(2)
    $note = 'tolerated beanstalkd 1.12 bug (issues 262, 380): the job expired only once its idle holder sent a command'
  end
  eq [job.id.to_i, job.body], [id, 'ttr'], 'job ready again after its ttr'
  s = job.stats
  eq [s.reserves, s.timeouts], [2, 1], 'reserves/timeouts after the expiry'
  assert other.stats.job_timeouts >= 1, 'stats job-timeouts'
end

puts "#{$passed} passed, #{$failed} failed"
exit($failed.zero? ? 0 : 1)
