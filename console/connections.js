// connections.js - #/connections : the clients connected now (GET
// connections): producers and workers, tubes used and watched,
// reservations held, waiting.
import {api} from './api.js';
import {h, setText, dur, num} from './dom.js';
import {sortableTable} from './ui.js';

export function mount(main) {
  const note = h('p', {class: 'note'});
  const role = (c) => [c.producer && 'producer', c.worker && 'worker'].filter(Boolean).join(', ') || '–';
  const table = sortableTable([
    {key: 'id', label: 'Id', num: true, header: true},
    {key: 'transport', label: 'Transport'},
    {key: 'addr', label: 'Address', cell: (c) => c.addr || '–'},
    {key: 'identity', label: 'Identity', cell: (c) => c.identity || '–'},
    {key: 'role', label: 'Role', sortValue: role, cell: role},
    {key: 'using', label: 'Uses'},
    {key: 'watching', label: 'Watches', sortValue: (c) => (c.watching || []).join(' '),
     cell: (c) => (c.watching || []).join(', ')},
    {key: 'reserved', label: 'Reserved', num: true, cell: (c) => num(c.reserved)},
    {key: 'waiting', label: 'Waiting', cell: (c) => (c.waiting ? 'yes' : 'no'),
     sortValue: (c) => (c.waiting ? 1 : 0)},
    {key: 'age', label: 'Age', num: true, cell: (c) => dur(c.age)},
    {key: 'idle', label: 'Idle', num: true, cell: (c) => dur(c.idle)},
  ], (c) => c.id, {caption: 'Connections'});
  main.append(h('h1', {}, 'Connections'), h('div', {class: 'scroll'}, table.el), note);
  async function refresh() {
    let doc;
    try {
      doc = await api('connections');
    } catch (e) {
      if (e.status === 404) {
        table.set([]);
        setText(note, 'This server does not list its connections (GET /api/v1/connections: not found).');
        return;
      }
      throw e;
    }
    table.set(doc.connections);
    setText(note, doc.truncated ? `Showing ${doc.listed} of ${doc.count} connections.`
      : `${doc.count} connection(s).`);
  }
  return {refresh, destroy: () => table.destroy()};
}
