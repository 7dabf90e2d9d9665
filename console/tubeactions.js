// tubeactions.js - a tube's actions (pause/resume, kick, clear), shared by
// the tubes list and a tube's page.
import {api, seg} from './api.js';
import {h, field, num} from './dom.js';
import {act, confirmDialog} from './ui.js';

// The settings the buttons use: pause seconds, how many to kick.
export function toolbar() {
  const [pl, pause] = field('Pause for (s)', {type: 'number', min: 1,
                                               max: 4294967295, value: 3600,
                                               class: 'short', name: 'pause-seconds'});
  const [kl, kick] = field('Kick at most', {type: 'number', min: 1, max: 10000,
                                            value: 1000, class: 'short', name: 'kick-n'});
  return {
    el: h('div', {class: 'toolbar'}, h('span', {class: 'pair'}, pl, pause),
          h('span', {class: 'pair'}, kl, kick)),
    seconds: () => Math.max(1, Number(pause.value) || 3600),
    n: () => Math.min(10000, Math.max(1, Number(kick.value) || 1)),
  };
}

// Buttons acting on the tube named name; tube() gives its latest object
// (GET tubes), after() refreshes the page.
export function buttons(name, tube, bar, after) {
  const pause = h('button', {type: 'button', class: 'small'});
  const kick = h('button', {type: 'button', class: 'small'}, 'Kick');
  const clear = h('button', {type: 'button', class: 'small danger'}, 'Clear…');
  pause.addEventListener('click', () => {
    const resume = tube().paused;
    const seconds = resume ? 0 : bar.seconds();
    act(pause, () => api(`tubes/${seg(name)}/pause`, {method: 'POST', query: {seconds}}),
        () => (resume ? `Resumed ${name}` : `Paused ${name} for ${seconds} s`), after);
  });
  kick.addEventListener('click', () => {
    act(kick, () => api(`tubes/${seg(name)}/kick`, {method: 'POST', query: {n: bar.n()}}),
        (r) => `Kicked ${r.kicked} job(s) in ${name}`, after);
  });
  clear.addEventListener('click', async () => {
    const t = tube();
    const ans = await confirmDialog({
      title: `Clear tube ${name}?`,
      text: 'The chosen jobs are deleted for good. Reserved jobs are left to their workers.',
      ok: 'Delete jobs',
      choicesLabel: 'Delete the jobs that are',
      choices: [
        {name: 'ready', label: `ready (${num(t.ready)})`, checked: true},
        {name: 'delayed', label: `delayed (${num(t.delayed)})`, checked: true},
        {name: 'buried', label: `buried (${num(t.buried)})`, checked: true},
      ],
    });
    clear.focus();
    if (!ans) return;
    const states = Object.keys(ans.choices).filter((k) => ans.choices[k]);
    if (!states.length) return;
    act(clear, () => api(`tubes/${seg(name)}/clear`,
                         {method: 'POST', query: {state: states.join(',')}}),
        (r) => `Deleted ${r.deleted} job(s) from ${name}`, after);
  });
  function update() {
    const t = tube();
    const label = t.paused ? 'Resume' : 'Pause';
    if (pause.textContent !== label) pause.textContent = label;
    pause.setAttribute('aria-label', `${label} ${name}`);
    kick.setAttribute('aria-label', `Kick jobs of ${name}`);
    clear.setAttribute('aria-label', `Clear ${name}`);
  }
  update();
  return {el: h('span', {class: 'actions'}, pause, kick, clear), update};
}
