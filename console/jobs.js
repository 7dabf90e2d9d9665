// jobs.js - #/tube/NAME/STATE : a tube's jobs in one state (GET
// tubes/NAME/jobs), page by page (after/next: any depth), with the
// tube's actions and a bounded search of the listed jobs' bodies.
import {api, seg} from './api.js';
import {h, fill, field, setText, dur, num} from './dom.js';
import {sortableTable, status} from './ui.js';
import {decode} from './body.js';
import * as tubeActions from './tubeactions.js';

export const STATES = ['ready', 'delayed', 'buried', 'reserved'];
const SEARCH_MAX = 200; // bodies fetched by one search, at most
const PAR = 6; // of them at once

export function mount(main, [name, state = 'ready']) {
  if (!STATES.includes(state)) state = 'ready';
  let limit = 100;
  const afters = [null]; // the 'after' of each page so far: back = pop
  let page = null; // the latest answer
  let tube = {name, paused: false, ready: 0, delayed: 0, buried: 0};
  let matches = null; // ids whose body matched the search, or null
  const bar = tubeActions.toolbar();
  const btns = tubeActions.buttons(name, () => tube, bar, () => refresh());
  const counts = h('p', {class: 'counts'});
  const tabs = h('ul', {class: 'tabs'}, STATES.map((s) =>
    h('li', {}, h('a', {href: `#/tube/${seg(name)}/${s}`,
                        'aria-current': s === state ? 'page' : null}, s))));
  const table = sortableTable([
    {key: 'id', label: 'Id', num: true, header: true, update(td, j, st) {
      if (!st.a) { st.a = h('a', {href: `#/job/${j.id}`}, String(j.id)); td.append(st.a); }
    }},
    {key: 'pri', label: 'Priority', num: true},
    {key: 'age', label: 'Age', num: true, cell: (j) => dur(j.age)},
    {key: 'delay', label: 'Delay', num: true, cell: (j) => dur(j.delay)},
    {key: 'ttr', label: 'TTR', num: true, cell: (j) => dur(j.ttr)},
    {key: 'time-left', label: 'Time left', num: true, cell: (j) => dur(j['time-left'])},
    {key: 'body-size', label: 'Body (bytes)', num: true, cell: (j) => num(j['body-size'])},
  ], (j) => j.id, {caption: `${state} jobs of ${name}`, initial: 'order'});
  const pageNote = h('p', {class: 'note'});
  const first = h('button', {type: 'button', onclick: () => go(0)}, 'First page');
  const prev = h('button', {type: 'button', onclick: () => go(afters.length - 2)}, 'Previous');
  const next = h('button', {type: 'button', onclick: nextPage}, 'Next page');
  const [sizeLabel, size] = [h('label', {for: 'page-size'}, 'Per page'),
    h('select', {id: 'page-size', onchange: () => { limit = Number(size.value); go(0); }},
      [50, 100, 500, 1000].map((n) => h('option', {value: n, selected: n === limit}, String(n))))];
  const [ql, q] = field('Search bodies for', {type: 'search', name: 'q', class: 'wide'});
  const searchBtn = h('button', {type: 'submit'}, 'Search');
  const clearBtn = h('button', {type: 'button', onclick: clearSearch}, 'Show all');
  const searchNote = h('p', {class: 'note', role: 'status'});
  const form = h('form', {class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); search(); }},
    h('span', {class: 'pair'}, ql, q), searchBtn, clearBtn);
  const empty = h('p', {class: 'note'});

  main.append(
    h('p', {class: 'crumbs'}, h('a', {href: '#/tubes'}, 'Tubes'), ' / '),
    h('h1', {}, 'Tube ', h('span', {class: 'mono'}, name)),
    counts, h('div', {class: 'toolbar'}, bar.el, btns.el),
    h('nav', {'aria-label': 'Job states'}, tabs),
    form, searchNote,
    h('div', {class: 'scroll'}, table.el), empty,
    h('div', {class: 'pager'}, first, prev, next, sizeLabel, size, pageNote));

  function go(i) {
    afters.length = Math.max(1, i + 1);
    matches = null;
    setText(searchNote, '');
    return refresh();
  }
  function nextPage() {
    if (!page || page.next === null) return;
    afters.push(page.next);
    matches = null;
    setText(searchNote, '');
    return refresh();
  }
  function clearSearch() {
    matches = null;
    q.value = '';
    setText(searchNote, '');
    show();
  }
  function show() {
    const jobs = page ? page.jobs : [];
    const shown = matches ? jobs.filter((j) => matches.has(j.id)) : jobs;
    // the server's order (the order it acts on them) unless sorted
    table.set(shown.map((j, i) => ({...j, order: i})));
    setText(empty, shown.length ? '' : (matches ? 'No body on this page matched.' : `No ${state} jobs.`));
    const pageNo = afters.length;
    setText(pageNote, `Page ${pageNo}, ${jobs.length} job(s)${page && page.next !== null ? ', more follow' : ''}.`);
    first.disabled = prev.disabled = pageNo === 1;
    next.disabled = !page || page.next === null;
  }
  async function search() {
    const needle = q.value;
    if (!needle || !page) return clearSearch();
    const ids = page.jobs.slice(0, SEARCH_MAX).map((j) => j.id);
    const found = new Set();
    let done = 0, failed = 0;
    searchBtn.disabled = true;
    setText(searchNote, `Searching ${ids.length} bod${ids.length === 1 ? 'y' : 'ies'}…`);
    const queue = [...ids];
    async function worker() {
      while (queue.length) {
        const id = queue.shift();
        try {
          const j = await api(`jobs/${id}`);
          const text = j.body === null ? (j.preview || '') : decode(j.body).text;
          if (text.includes(needle)) found.add(id);
        } catch (e) {
          failed++;
        }
        done++;
      }
    }
    await Promise.all(Array.from({length: PAR}, worker));
    searchBtn.disabled = false;
    matches = found;
    const bound = page.jobs.length > SEARCH_MAX
      ? ` (only the first ${SEARCH_MAX} of this page's ${page.jobs.length} are searched)` : '';
    setText(searchNote, `${found.size} of ${done} bodies on this page contain “${needle}”${bound}; at most ${SEARCH_MAX} bodies are fetched per search${failed ? `; ${failed} could not be read` : ''}.`);
    show();
  }

  async function refresh() {
    const after = afters[afters.length - 1];
    const [t, p] = await Promise.allSettled([
      api(`tubes/${seg(name)}`),
      api(`tubes/${seg(name)}/jobs`, {query: {state, limit, after}}),
    ]);
    if (t.status === 'fulfilled') {
      tube = t.value;
      btns.update();
      fill(counts, STATES.map((s) => h('span', {class: 'count'}, `${s} `, h('strong', {}, num(tube[s])))),
           tube.paused ? h('span', {class: 'badge'}, `paused, ${dur(tube['pause-time-left'])} left`) : null);
    }
    if (p.status === 'rejected') {
      if (p.reason.status === 410) {
        status('The page started after a job that left this list: back to the first page.', 'info');
        afters.length = 1;
        return refresh();
      }
      if (p.reason.status === 404) {
        page = {jobs: [], next: null};
        show();
        setText(empty, `No tube ${name} (it is made by its first job, and goes when empty and unused).`);
        return;
      }
      throw p.reason;
    }
    page = p.value;
    show();
  }
  return {refresh, destroy: () => table.destroy()};
}
