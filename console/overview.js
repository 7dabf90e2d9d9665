// overview.js - #/ : the server (GET stats) and its rates over the last
// hour (GET history), live.
import {api} from './api.js';
import {h, setText, dur, num} from './dom.js';
import {rateChart} from './charts.js';

const FACTS = [
  ['Version', (s) => s.version],
  ['Server id', (s) => s.id],
  ['Host', (s) => s.hostname],
  ['Durability', (s) => s['rockstalk-durability']],
  ['Cluster role', (s) => s['rockstalk-cluster-role']],
  ['Access control', (s) => s['rockstalk-auth']],
  ['Uptime', (s) => dur(s.uptime)],
  ['Draining', (s) => (s.draining ? 'yes: puts refused' : 'no')],
];
const TOTALS = [
  ['Ready', 'current-jobs-ready'], ['Urgent', 'current-jobs-urgent'],
  ['Reserved', 'current-jobs-reserved'], ['Delayed', 'current-jobs-delayed'],
  ['Buried', 'current-jobs-buried'], ['Tubes', 'current-tubes'],
  ['Connections', 'current-connections'], ['Producers', 'current-producers'],
  ['Workers', 'current-workers'], ['Waiting', 'current-waiting'],
  ['Jobs put (total)', 'total-jobs'], ['Timeouts (total)', 'job-timeouts'],
];
const SERIES = [['puts', 'Puts/s'], ['reserves', 'Reserves/s'],
                ['deletes', 'Deletes/s'], ['timeouts', 'Timeouts/s']];

export function mount(main) {
  const factEls = FACTS.map(([label]) => [label, h('dd')]);
  const totalEls = TOTALS.map(([label, key]) => [label, key, h('dd')]);
  const chartEls = SERIES.map(([key, label]) => [key, label, h('div', {class: 'chart'})]);
  const histNote = h('p', {class: 'note'});
  main.append(
    h('h1', {}, 'Overview'),
    h('section', {'aria-labelledby': 'ov-server'},
      h('h2', {id: 'ov-server'}, 'Server'),
      h('dl', {class: 'facts'}, factEls.map(([l, dd]) => [h('dt', {}, l), dd]))),
    h('section', {'aria-labelledby': 'ov-jobs'},
      h('h2', {id: 'ov-jobs'}, 'Totals'),
      h('dl', {class: 'facts totals'},
        totalEls.map(([l, , dd]) => h('div', {class: 'tile'}, h('dt', {}, l), dd)))),
    h('section', {'aria-labelledby': 'ov-rates'},
      h('h2', {id: 'ov-rates'}, 'Rates over the last hour (per second)'),
      histNote,
      h('div', {class: 'charts'}, chartEls.map(([key, label, el]) =>
        h('figure', {class: 'chartbox', 'data-series': key},
          h('figcaption', {}, label), el)))));
  let charts = null;

  async function refresh() {
    const [stats, hist] = await Promise.allSettled([api('stats'), api('history')]);
    if (stats.status === 'rejected') throw stats.reason;
    const s = stats.value;
    FACTS.forEach(([, f], i) => setText(factEls[i][1], f(s) ?? '–'));
    totalEls.forEach(([, key, dd]) => setText(dd, num(s[key])));
    if (hist.status === 'rejected') {
      setText(histNote, `No history from this server (GET /api/v1/history: ${hist.reason.message}).`);
      return;
    }
    const hv = hist.value;
    setText(histNote, `One point every ${hv.interval} s, oldest first; ${hv.t.length} points.`);
    if (!charts) charts = chartEls.map(([key, label, el]) => [key, rateChart(el, label, key)]);
    for (const [key, c] of charts) c.set(hv.t, hv[key] || []);
  }
  return {
    refresh,
    destroy() { if (charts) charts.forEach(([, c]) => c.destroy()); },
  };
}
