// cluster.js - #/cluster : this node's view of the Raft cluster (GET
// cluster): role, term, indexes, each member's role and, on the leader,
// its match index, lag and contact age; on the serving leader a "Make
// leader" button per follower (POST cluster/transfer, with confirmation).
import {api} from './api.js';
import {h, fill, setText, num} from './dom.js';
import {act, confirmDialog, sortableTable} from './ui.js';

const FACTS = [['Mode', 'mode'], ['This node', 'node-id'], ['Role', 'role'],
               ['Serving', 'serving', (v) => (v ? 'yes' : 'no')],
               ['Leader', 'leader', (v) => (v ? String(v) : 'none known')],
               ['Term', 'term', num], ['Commit index', 'commit-index', num],
               ['Applied index', 'applied-index', num],
               ['Last index', 'last-index', num],
               ['Security', 'security'], ['Refused peers', 'peer-refused', num]];

const ms = (v) => (v === null || v === undefined ? '–' : `${num(v)} ms`);

// What the transfer section says on this node (c: GET cluster).
function transferText(c) {
  if (c.role === 'leader' && c.serving)
    return 'Make leader hands this node\'s leadership to that voter ' +
      '(as rockstalk-cluster-transfer). This node then restarts as a ' +
      'follower: every client connection to it is closed, and this page ' +
      'shows it as a follower once it is back.';
  if (c.leader)
    return `Transfers are made through the leader: node ${c.leader} leads. ` +
      'Open the console on its HTTP address to move the leadership.';
  return 'No leader is known now: a transfer needs one.';
}

export function mount(main) {
  let cur = null; // the latest GET cluster
  const facts = h('dl', {class: 'facts'});
  const note = h('p', {class: 'note'});
  const table = sortableTable([
    {key: 'id', label: 'Node', num: true, header: true},
    {key: 'raft', label: 'Raft address', cell: (v) => v.raft || '–'},
    {key: 'role', label: 'Role', cell: (v) => v.role || '–'},
    {key: 'match-index', label: 'Match index', num: true, cell: (v) => num(v['match-index'])},
    {key: 'lag', label: 'Lag (entries)', num: true, cell: (v) => num(v.lag)},
    {key: 'contact-ms', label: 'Last contact', num: true, minor: true,
     cell: (v) => ms(v['contact-ms'])},
    {key: 'actions', label: 'Actions', sortable: false, update: actionCell},
  ], (v) => v.id, {caption: 'Members'});
  const voters = h('section', {'aria-labelledby': 'cl-voters'},
    h('h2', {id: 'cl-voters'}, 'Members'), h('div', {class: 'scroll'}, table.el));
  const how = h('p');
  const transfer = h('section', {'aria-labelledby': 'cl-transfer'},
    h('h2', {id: 'cl-transfer'}, 'Leadership transfer'), how);
  main.append(h('h1', {}, 'Cluster'), facts, note, voters, transfer);

  // The "Make leader" button of a follower while this node leads and serves.
  function actionCell(td, v, st) {
    if (!st.btn) {
      st.btn = h('button', {type: 'button', class: 'small danger',
                            'aria-label': `Make node ${v.id} the leader`,
                            onclick: () => makeLeader(v.id, st.btn)}, 'Make leader…');
      td.append(st.btn);
    }
    st.btn.hidden = !(cur && cur.role === 'leader' && cur.serving &&
                      v.role === 'follower');
  }

  async function makeLeader(id, btn) {
    const ok = await confirmDialog({
      title: `Make node ${id} the leader?`, ok: 'Make leader',
      text: `Node ${cur['node-id']} hands its leadership to node ${id}, then ` +
        'restarts as a follower: its clients are disconnected and reconnect.'});
    btn.focus();
    if (!ok) return;
    act(btn, () => api('cluster/transfer', {method: 'POST', query: {to: id}}),
        (r) => `Asked node ${r.to} to lead: node ${cur['node-id']} restarts as a follower`);
  }

  async function refresh() {
    const c = await api('cluster');
    cur = c;
    const shown = FACTS.filter(([, k]) => c[k] !== undefined && c[k] !== null);
    fill(facts, shown.map(([label, k, f]) => [h('dt', {}, label),
                                             h('dd', {}, f ? f(c[k]) : String(c[k]))]));
    const standalone = c.mode !== 'cluster';
    voters.hidden = transfer.hidden = standalone;
    setText(note, standalone ? 'A standalone server: no cluster.'
      : c.role === 'leader' ? ''
        : 'Only the leader knows each member\'s progress: match index, lag ' +
          'and last contact show on the leader\'s console.');
    if (standalone) return;
    setText(how, transferText(c));
    table.set((c.voters || []).map((v) => ({...v,
      role: v.role || (v.id === c.leader ? 'leader' : 'follower')})));
  }
  return {refresh, destroy: () => table.destroy()};
}
