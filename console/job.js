// job.js - #/job/ID : one job (GET jobs/ID): its fields, its body as
// text, JSON or hex, and the actions (kick, delete, move, priority).
import {api, seg} from './api.js';
import {h, fill, field, setText, dur, num} from './dom.js';
import {act, confirmDialog, status} from './ui.js';
import {decode, prettyJson, hexdump} from './body.js';

const FIELDS = [
  ['Tube', 'tube'], ['State', 'state'], ['Priority', 'pri'],
  ['Age', 'age', dur], ['Delay', 'delay', dur], ['TTR', 'ttr', dur],
  ['Time left', 'time-left', dur], ['Body size (bytes)', 'body-size', num],
  ['Reserves', 'reserves'], ['Timeouts', 'timeouts'], ['Releases', 'releases'],
  ['Buries', 'buries'], ['Kicks', 'kicks'], ['File', 'file'],
];
const VIEWS = [['text', 'Text'], ['json', 'JSON'], ['hex', 'Hex']];

export function mount(main, [idText], ctx) {
  const id = Number(idText);
  let job = null;
  let view = 'text';
  let bodyKey = null; // the body shown (redrawn only when it changes)
  let gone = false; // deleted or moved from this page: a poll in flight
                    // then finds it missing, which is no news
  const crumbs = h('p', {class: 'crumbs'}, h('a', {href: '#/tubes'}, 'Tubes'), ' / ');
  const dds = FIELDS.map(() => h('dd'));
  const pre = h('pre', {class: 'body', tabindex: 0, 'aria-label': 'Job body'});
  const bodyNote = h('p', {class: 'note'});
  const viewBtns = VIEWS.map(([v, label]) => h('button', {type: 'button', class: 'small',
    'aria-pressed': String(v === view), onclick: () => { view = v; bodyKey = null; showBody(); }}, label));
  const kick = h('button', {type: 'button'}, 'Kick');
  const del = h('button', {type: 'button', class: 'danger'}, 'Delete…');
  const [ml, moveTo] = field('Move to tube', {type: 'text', name: 'move-tube', maxlength: 200,
                                              autocomplete: 'off', required: true});
  const moveBtn = h('button', {type: 'submit'}, 'Move');
  const [pl, pri] = field('Priority', {type: 'number', name: 'pri', min: 0, max: 4294967295,
                                       required: true, class: 'short'});
  const priBtn = h('button', {type: 'submit'}, 'Set priority');
  const after = () => refresh();

  kick.addEventListener('click', () => act(kick, () => api(`jobs/${id}/kick`, {method: 'POST'}),
                                           () => `Kicked job ${id}`, after));
  del.addEventListener('click', async () => {
    const ok = await confirmDialog({title: `Delete job ${id}?`, ok: 'Delete',
                                    text: 'The job and its body are deleted for good.'});
    del.focus();
    if (!ok) return;
    const tube = job && job.tube;
    const state = job && job.state;
    act(del, () => api(`jobs/${id}`, {method: 'DELETE'}), () => `Deleted job ${id}`,
        () => { gone = true; ctx.go(tube ? `#/tube/${seg(tube)}/${state}` : '#/tubes'); });
  });
  const moveForm = h('form', {class: 'toolbar', onsubmit: (e) => {
    e.preventDefault();
    const t = moveTo.value.trim();
    if (!t) return;
    act(moveBtn, () => api(`jobs/${id}/move`, {method: 'POST', query: {tube: t}}),
        (r) => `Moved job ${r.moved} to ${r.tube}: it is job ${r.id} now`,
        (r) => { gone = true; ctx.go(`#/job/${r.id}`); });
  }}, h('span', {class: 'pair'}, ml, moveTo), moveBtn);
  const priForm = h('form', {class: 'toolbar', onsubmit: (e) => {
    e.preventDefault();
    act(priBtn, () => api(`jobs/${id}/priority`, {method: 'POST', query: {pri: pri.value}}),
        (r) => `Job ${id} has priority ${r.pri}`, after);
  }}, h('span', {class: 'pair'}, pl, pri), priBtn);

  const title = h('h1', {}, `Job ${id}`);
  main.append(crumbs, title,
    h('dl', {class: 'facts'}, FIELDS.map(([label], i) => [h('dt', {}, label), dds[i]])),
    h('section', {'aria-labelledby': 'job-actions'},
      h('h2', {id: 'job-actions'}, 'Actions'),
      h('div', {class: 'toolbar'}, kick, del), moveForm, priForm),
    h('section', {'aria-labelledby': 'job-body'},
      h('h2', {id: 'job-body'}, 'Body'),
      h('div', {class: 'toolbar', role: 'group', 'aria-label': 'Show the body as'}, viewBtns),
      bodyNote, pre));

  function showBody() {
    viewBtns.forEach((b, i) => b.setAttribute('aria-pressed', String(VIEWS[i][0] === view)));
    if (!job) return;
    const key = `${view}:${job.body}`;
    if (key === bodyKey) return;
    bodyKey = key;
    if (job.body === null) {
      setText(bodyNote, job['body-omitted'] ? 'The body is over 1 MiB: not sent.'
        : `The body could not be read${job['body-error'] ? `: ${job['body-error']}` : ''}.`);
      setText(pre, '');
      return;
    }
    const b = decode(job.body);
    let text = b.text, note = b.utf8 ? '' : 'Not valid UTF-8: shown with replacement characters.';
    if (view === 'json') {
      const p = prettyJson(b.text);
      if (p === null) note = 'Not JSON: shown as text.';
      else text = p;
    } else if (view === 'hex') {
      text = hexdump(b.bytes);
      note = '';
    }
    setText(bodyNote, note);
    setText(pre, text);
  }

  async function refresh() {
    try {
      job = await api(`jobs/${id}`);
    } catch (e) {
      if (e.status === 404) {
        if (gone) return;
        setText(title, `Job ${id}: gone`);
        status(`Job ${id} does not exist (deleted, or never made).`, 'info');
        job = null;
        return;
      }
      throw e;
    }
    if (crumbs.childNodes.length < 3)
      crumbs.append(h('a', {href: `#/tube/${seg(job.tube)}/${job.state}`}, job.tube));
    FIELDS.forEach(([, key, f], i) => setText(dds[i], job[key] === undefined ? '–'
      : (f ? f(job[key]) : String(job[key]))));
    kick.disabled = !(job.state === 'buried' || job.state === 'delayed');
    del.disabled = job.state === 'reserved';
    if (document.activeElement !== pri && pri.value === '') pri.value = job.pri;
    showBody();
  }
  return {refresh};
}
