// cluster.js - #/cluster : this node's view of the Raft cluster (GET
// cluster): role, term, commit index, voters and their lag when given.
import {api} from './api.js';
import {h, fill, setText, num} from './dom.js';
import {sortableTable} from './ui.js';

const FACTS = [['Mode', 'mode'], ['This node', 'node-id'], ['Role', 'role'],
               ['Serving', 'serving', (v) => (v ? 'yes' : 'no')],
               ['Leader', 'leader', (v) => (v ? String(v) : 'none known')],
               ['Term', 'term', num], ['Commit index', 'commit-index', num],
               ['Applied index', 'applied-index', num],
               ['Security', 'security'], ['Refused peers', 'peer-refused', num]];

export function mount(main) {
  const facts = h('dl', {class: 'facts'});
  const note = h('p', {class: 'note'});
  const table = sortableTable([
    {key: 'id', label: 'Node', num: true, header: true},
    {key: 'raft', label: 'Raft address', cell: (v) => v.raft || v['raft-address'] || '–'},
    {key: 'role', label: 'Role', cell: (v) => v.role || '–'},
    {key: 'match-index', label: 'Match index', num: true, cell: (v) => num(v['match-index'])},
    {key: 'lag', label: 'Lag (entries)', num: true, cell: (v) => num(v.lag)},
  ], (v) => v.id, {caption: 'Voters'});
  const voters = h('section', {'aria-labelledby': 'cl-voters'},
    h('h2', {id: 'cl-voters'}, 'Voters'), h('div', {class: 'scroll'}, table.el));
  const transfer = h('section', {'aria-labelledby': 'cl-transfer'},
    h('h2', {id: 'cl-transfer'}, 'Leadership transfer'),
    h('p', {}, 'The HTTP API has no transfer action yet. From a shell: ',
      h('code', {}, 'rockstalk cluster transfer ID'),
      ' (the protocol command rockstalk-cluster-transfer, PROTOCOL.md 15.8).'));
  main.append(h('h1', {}, 'Cluster'), facts, note, voters, transfer);
  async function refresh() {
    const c = await api('cluster');
    const shown = FACTS.filter(([, k]) => c[k] !== undefined);
    fill(facts, shown.map(([label, k, f]) => [h('dt', {}, label),
                                             h('dd', {}, f ? f(c[k]) : String(c[k]))]));
    const standalone = c.mode !== 'cluster';
    voters.hidden = transfer.hidden = standalone;
    setText(note, standalone ? 'A standalone server: no cluster.' : '');
    if (!standalone) {
      const vs = (c.voters || []).map((v) => ({...v,
        role: v.role || (v.id === c.leader ? 'leader' : 'follower')}));
      table.set(vs);
    }
  }
  return {refresh, destroy: () => table.destroy()};
}
