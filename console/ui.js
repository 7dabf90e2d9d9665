// ui.js - what every page shares: the status line, the confirmation
// dialog and running an action.
import {h, fill} from './dom.js';

const statusEl = () => document.getElementById('status');

// Shows msg in the status line (role=status: screen readers hear it).
// kind: 'ok', 'error' or 'info'.
export function status(msg, kind = 'info') {
  const el = statusEl();
  el.className = `status ${kind}`;
  el.textContent = msg;
}

// Clears the status line on a change of page, unless keepStatus() asked
// to keep it once (an action that moves to another page: its message).
let keep = false;
export function keepStatus() {
  keep = true;
}
export function clearStaleStatus() {
  if (!keep) status('');
  keep = false;
}

// Asks before something that cannot be undone. opts: {title, text, ok,
// choices: [{name, label, checked}]}. Resolves to null (cancelled) or
// {choices: {name: bool}}.
export function confirmDialog(opts) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = opts.title;
  document.getElementById('confirm-text').textContent = opts.text || '';
  document.getElementById('confirm-ok').textContent = opts.ok || 'Confirm';
  const extra = document.getElementById('confirm-extra');
  const boxes = (opts.choices || []).map((c) => {
    const id = `confirm-${c.name}`;
    const input = h('input', {type: 'checkbox', id, name: c.name,
                              checked: c.checked});
    return {c, input, el: h('div', {class: 'check'}, input,
                            h('label', {for: id}, c.label))};
  });
  fill(extra, boxes.length ? h('fieldset', {},
                               h('legend', {}, opts.choicesLabel || 'Which'),
                               boxes.map((b) => b.el)) : null);
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      if (dlg.returnValue !== 'ok') return resolve(null);
      const choices = {};
      for (const b of boxes) choices[b.c.name] = b.input.checked;
      resolve({choices});
    }, {once: true});
    dlg.returnValue = '';
    dlg.showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

// Runs fn (an API call) with button disabled meanwhile; reports what
// happened (done(result) -> message) and calls after() on success.
export async function act(button, fn, done, after) {
  if (button) button.disabled = true;
  let r;
  try {
    r = await fn();
  } catch (e) {
    status(`Failed: ${e.message}${e.status ? ` (HTTP ${e.status})` : ''}`,
           'error');
    return null;
  } finally {
    if (button) button.disabled = false;
  }
  status(done(r), 'ok');
  try {
    if (after) await after(r);
  } catch (e) {
    status(`${done(r)}; then: ${e.message}`, 'error');
  }
  return r;
}

// A sortable table: columns [{key, label, num, minor (hidden on phones),
// cell(row) -> text or update(td, row, state)}],
// rows keyed by key(row). Rows are updated in place on each set(), so
// buttons in them keep focus between refreshes.
export function sortableTable(columns, keyOf, {caption, initial} = {}) {
  let sortKey = initial || columns[0].key;
  let asc = true;
  let rows = [];
  const rowEls = new Map();
  const ths = columns.map((c) => {
    const cls = c.minor ? 'minor' : null;
    if (c.sortable === false) return h('th', {scope: 'col', class: cls}, c.label);
    const b = h('button', {type: 'button', class: 'sort',
                           onclick: () => sortBy(c.key)}, c.label);
    return h('th', {scope: 'col', class: cls, 'data-key': c.key}, b);
  });
  const tbody = h('tbody');
  const table = h('table', {class: 'grid'},
                  caption ? h('caption', {}, caption) : null,
                  h('thead', {}, h('tr', {}, ths)), tbody);

  function value(r, c) {
    return c.sortValue ? c.sortValue(r) : r[c.key];
  }
  function sortBy(key) {
    if (key === sortKey) asc = !asc;
    else { sortKey = key; asc = true; }
    render();
  }
  function render() {
    const col = columns.find((c) => c.key === sortKey);
    const sorted = !col ? [...rows] : [...rows].sort((a, b) => {
      const x = value(a, col), y = value(b, col);
      const c = typeof x === 'number' && typeof y === 'number'
        ? x - y : String(x).localeCompare(String(y));
      return asc ? c : -c;
    });
    ths.forEach((th, i) => {
      const c = columns[i];
      if (c.sortable === false) return;
      th.setAttribute('aria-sort', c.key === sortKey
        ? (asc ? 'ascending' : 'descending') : 'none');
    });
    const seen = new Set();
    const order = sorted.map((r) => {
      const k = keyOf(r);
      seen.add(k);
      let ent = rowEls.get(k);
      if (!ent) {
        const cells = columns.map((c) => h(c.header ? 'th' : 'td',
          {'data-label': c.label,
           class: [c.num && 'num', c.minor && 'minor'].filter(Boolean).join(' ') || null,
           scope: c.header ? 'row' : null}));
        ent = {tr: h('tr', {}, cells), cells, state: {}};
        rowEls.set(k, ent);
      }
      columns.forEach((c, i) => {
        if (c.update) c.update(ent.cells[i], r, ent.state);
        else {
          const v = c.cell ? c.cell(r) : r[c.key];
          const s = v === null || v === undefined ? '–' : String(v);
          if (ent.cells[i].textContent !== s) ent.cells[i].textContent = s;
        }
      });
      return ent.tr;
    });
    for (const [k, ent] of rowEls) {
      if (!seen.has(k)) {
        if (ent.state.destroy) ent.state.destroy();
        rowEls.delete(k);
      }
    }
    // reorder without detaching rows that are already in place
    order.forEach((tr, i) => {
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    while (tbody.children.length > order.length) tbody.lastChild.remove();
  }
  return {
    el: table,
    set(r) { rows = r; render(); },
    destroy() {
      for (const ent of rowEls.values()) if (ent.state.destroy) ent.state.destroy();
    },
  };
}
