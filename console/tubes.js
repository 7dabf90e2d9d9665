// tubes.js - #/tubes : every tube (GET tubes), sortable, with rate
// sparklines (the samples this page took), oldest ready job, actions.
import {api, seg} from './api.js';
import {h, setText, dur, num} from './dom.js';
import {sortableTable} from './ui.js';
import {sparkline} from './charts.js';
import * as tubeActions from './tubeactions.js';

const SAMPLES = 60; // sparkline points: 2 minutes at one poll per 2 s

export function mount(main) {
  const bar = tubeActions.toolbar();
  const latest = new Map(); // name -> tube object
  const history = new Map(); // name -> [puts/s samples]
  const note = h('p', {class: 'note'});
  const countCell = (key) => ({key, label: key[0].toUpperCase() + key.slice(1),
                               num: true, cell: (t) => num(t[key])});
  const table = sortableTable([
    {key: 'name', label: 'Tube', header: true, update(td, t, st) {
      if (!st.a) {
        st.a = h('a', {href: `#/tube/${seg(t.name)}/ready`}, t.name);
        td.append(st.a);
      }
    }},
    countCell('ready'), {...countCell('urgent'), minor: true}, countCell('reserved'),
    countCell('delayed'), countCell('buried'),
    {key: 'total-jobs', label: 'Total', num: true, minor: true, cell: (t) => num(t['total-jobs'])},
    {key: 'oldest', label: 'Oldest ready', num: true,
     sortValue: (t) => (t.ready ? t['oldest-ready-age'] ?? -1 : -1),
     cell: (t) => (!t.ready || t['oldest-ready-age'] === undefined ? '–' : dur(t['oldest-ready-age']))},
    {key: 'puts', label: 'Puts/s', num: true, sortValue: (t) => t.rates.puts,
     cell: (t) => t.rates.puts.toFixed(2)},
    {key: 'reserves', label: 'Reserves/s', num: true, minor: true, sortValue: (t) => t.rates.reserves,
     cell: (t) => t.rates.reserves.toFixed(2)},
    {key: 'trend', label: 'Puts, 2 min', sortable: false, minor: true, update(td, t, st) {
      if (!st.spark) {
        const box = h('span', {class: 'spark', role: 'img',
                               'aria-label': `puts per second of ${t.name}`});
        td.append(box);
        st.spark = sparkline(box, 'puts');
        st.destroy = () => st.spark.destroy();
      }
      st.spark.set(history.get(t.name) || [0]);
    }},
    {key: 'paused', label: 'Paused', sortValue: (t) => (t.paused ? t['pause-time-left'] : -1),
     cell: (t) => (t.paused ? `${dur(t['pause-time-left'])} left` : 'no')},
    {key: 'actions', label: 'Actions', sortable: false, update(td, t, st) {
      if (!st.btns) {
        st.btns = tubeActions.buttons(t.name, () => latest.get(t.name), bar, refresh);
        td.append(st.btns.el);
      }
      st.btns.update();
    }},
  ], (t) => t.name, {caption: 'Tubes'});
  main.append(h('h1', {}, 'Tubes'), bar.el, h('div', {class: 'scroll'}, table.el), note);

  async function refresh() {
    const doc = await api('tubes');
    for (const t of doc.tubes) {
      latest.set(t.name, t);
      const hs = history.get(t.name) || [];
      hs.push(t.rates.puts);
      if (hs.length > SAMPLES) hs.shift();
      history.set(t.name, hs);
    }
    table.set(doc.tubes);
    setText(note, doc.truncated
      ? `Showing the first ${doc.listed} of ${doc.count} tubes (by name).`
      : `${doc.count} tube(s). Rates over the last ${doc['rate-window-s']} s; sparklines since this page opened.`);
  }
  return {refresh, destroy: () => table.destroy()};
}
