// app.js - the console's router (#/..., hash routing), the session check
// and the polling loop (every 2 s while the tab is visible).
import {loadSession, logout, currentSession} from './api.js';
import {status, clearStaleStatus, keepStatus} from './ui.js';
import * as overview from './overview.js';
import * as tubes from './tubes.js';
import * as jobs from './jobs.js';
import * as job from './job.js';
import * as connections from './connections.js';
import * as cluster from './cluster.js';
import * as loginPage from './login.js';

const POLL_MS = 2000;
const ROUTES = [
  [/^\/?$/, overview, 'Overview'],
  [/^\/tubes$/, tubes, 'Tubes'],
  [/^\/tube\/([^/]+)(?:\/([a-z]+))?$/, jobs, 'Tube'],
  [/^\/job\/(\d+)$/, job, 'Job'],
  [/^\/connections$/, connections, 'Connections'],
  [/^\/cluster$/, cluster, 'Cluster'],
];

const main = document.getElementById('main');
let page = null; // {refresh, destroy}
let needLogin = false;
let busy = false;
let pollFailed = false; // the status line shows a failed update

const ctx = {
  go(hash) { // after an action: its message stays
    keepStatus();
    if (location.hash === hash) route();
    else location.hash = hash;
  },
  loggedIn() {
    needLogin = false;
    showWho();
    route();
  },
};

function showWho() {
  const s = currentSession();
  document.getElementById('who').textContent = s.identity ? `as ${s.identity}` : '';
  document.getElementById('logout').hidden = !(s.auth && s.identity);
}

function mountPage(mod, params, name) {
  if (page && page.destroy) page.destroy();
  main.replaceChildren();
  page = mod.mount(main, params, ctx);
  document.title = `${name} · rockstalk`;
  for (const a of document.querySelectorAll('#nav a')) {
    const here = a.getAttribute('href') === `#/${location.hash.slice(2).split('/')[0]}` ||
      (a.getAttribute('href') === '#/tubes' && /^#\/(tube|job)\//.test(location.hash));
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function route() {
  document.getElementById('nav').hidden = needLogin; // nothing to see yet
  if (needLogin) {
    mountPage(loginPage, [], 'Log in');
    return;
  }
  const path = location.hash.replace(/^#/, '');
  for (const [re, mod, name] of ROUTES) {
    const m = re.exec(path);
    if (m) {
      const params = m.slice(1).map((p) => (p === undefined ? undefined : decodeURIComponent(p)));
      mountPage(mod, params, name);
      main.focus({preventScroll: true});
      poll();
      return;
    }
  }
  mountPage({mount: (el) => {
    el.append(Object.assign(document.createElement('h1'), {textContent: 'Not found'}));
    return {refresh: async () => {}};
  }}, [], 'Not found');
}

async function poll() {
  if (busy || !page || document.hidden) return;
  busy = true;
  const p = page;
  try {
    await p.refresh();
    document.getElementById('live').textContent = `Updated ${new Date().toLocaleTimeString()}`;
    if (pollFailed) status('Updated again: the server answers.', 'info');
    pollFailed = false;
  } catch (e) {
    if (e.status === 401 && !needLogin) {
      needLogin = true;
      status('Your session ended: log in again.', 'error');
      route();
    } else if (p === page) {
      status(`Could not update: ${e.message}${e.status ? ` (HTTP ${e.status})` : ''}`, 'error');
      pollFailed = true;
    }
  } finally {
    busy = false;
  }
}

window.addEventListener('hashchange', () => { clearStaleStatus(); route(); });
document.addEventListener('visibilitychange', () => {
  if (document.hidden) document.getElementById('live').textContent = 'Paused while hidden';
  else poll();
});
document.getElementById('logout').addEventListener('click', async () => {
  try { await logout(); } catch (e) { /* logged out either way */ }
  needLogin = true;
  showWho();
  route();
});
setInterval(poll, POLL_MS);

(async function start() {
  try {
    needLogin = (await loadSession()).needLogin;
  } catch (e) {
    status(`Could not reach the server: ${e.message}`, 'error');
  }
  showWho();
  route();
})();
