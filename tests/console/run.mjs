// The web console in real headless Chromium (Debian's /usr/bin/chromium,
// driven by npm's playwright-core): loads each page, acts through the UI
// and takes the screenshots. tests/test_console.py starts the server,
// fills it, runs this and checks the server's state through the protocol.
//
//   node tests/console/run.mjs CONFIG.json
//
// CONFIG: {base: "http://127.0.0.1:PORT/", mode: "open" | "auth" |
// "cluster", token, badToken, shots: folder or null, docs: true to wait
// for charts worth a screenshot, ids: {...}, to: the voter the cluster
// mode makes leader, chromium}. Prints
// one JSON line per step: {"step", "ok", "error"?}; exit 0 once all ran.
import {readFileSync} from 'node:fs';
import {chromium} from 'playwright-core';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const T = 5000; // ms a step waits for the page, at most

function report(step, ok, error) {
  process.stdout.write(JSON.stringify({step, ok, error}) + '\n');
}

const browser = await chromium.launch({
  executablePath: cfg.chromium || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--disable-dev-shm-usage'],
});
const context = await browser.newContext({viewport: {width: 1280, height: 860}});
const page = await context.newPage();
page.setDefaultTimeout(T);
const problems = []; // CSP violations, script errors, failed loads
// While a node restarts (a leadership transfer) its API does not answer
// or answers 503 for a moment: failed loads are expected then.
let restarting = false;
const RESTART_NOISE = /ERR_CONNECTION|ERR_EMPTY_RESPONSE|status of 503|requestfailed: .*\/api\/v1\//;
function problem(p) {
  if (!(restarting && RESTART_NOISE.test(p))) problems.push(p);
}
page.on('console', (m) => { if (m.type() === 'error') problem(`console: ${m.text()}`); });
page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
const dialogs = []; // alert() and friends: none expected
page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
page.on('requestfailed', (r) => problem(`requestfailed: ${r.url()}`));

async function step(name, fn) {
  try {
    await fn();
    report(name, true);
  } catch (e) {
    let seen = '';
    try { // what the page said, for the report
      seen = ` | at ${page.url()}, status line: ${await page.locator('#status').textContent({timeout: 500})}`;
    } catch (x) { /* no page */ }
    report(name, false, String(e.message || e).split('\n').slice(0, 4).join(' | ') + seen);
  }
}

async function open(hash) {
  await page.goto(cfg.base + hash);
  await page.locator('main h1').first().waitFor();
}

async function shot(name, full = true) {
  if (cfg.shots) await page.screenshot({path: `${cfg.shots}/console-${name}.png`, fullPage: full});
}

async function statusHas(text) {
  await page.locator('#status', {hasText: text}).waitFor();
}

const row = (name) => page.locator('table.grid tbody tr', {has: page.locator(`a:text-is("${name}")`)});

async function openMode() {
  const ids = cfg.ids;
  await step('assets-load', async () => {
    await open('');
    await page.waitForFunction(() => Boolean(window.uPlot));
    const css = await page.evaluate(() => getComputedStyle(document.querySelector('header.top')).display);
    if (css !== 'flex') throw new Error(`style.css not applied (display ${css})`);
  });
  await step('overview', async () => {
    await open('#/');
    await page.locator('dd', {hasText: /^\d+\.\d+/}).first().waitFor(); // the version
    await page.locator('dt:text-is("Durability") + dd', {hasText: /\S/}).waitFor();
    await page.locator('.tile dt:text-is("Buried") + dd').waitFor();
  });
  await step('overview-charts', async () => {
    await page.locator('.chart .uplot').first().waitFor();
    const n = await page.locator('.chart .uplot canvas').count();
    if (n < 4) throw new Error(`${n} charts`);
    await page.waitForTimeout(300);
  });
  await shot('overview');
  await step('tubes', async () => {
    await open('#/tubes');
    await row('c-kick').waitFor();
    await row('c-kick').locator('td[data-label="Buried"]', {hasText: '3'}).waitFor();
    const spark = await row('c-kick').locator('.spark canvas').count();
    if (spark !== 1) throw new Error('no sparkline');
    // sorting by a column puts the largest ready count first when descending
    await page.getByRole('button', {name: /^Ready( [▲▼])?$/}).click();
    await page.getByRole('button', {name: /^Ready( [▲▼])?$/}).click();
    const first = await page.locator('table.grid tbody tr').first().locator('th').textContent();
    if (first !== 'c-list') throw new Error(`sorted by ready desc, first is ${first}`);
  });
  await step('tubes-oldest-ready', async () => {
    await row('c-list').locator('td[data-label="Oldest ready"]', {hasText: /\d+s|\dm/}).waitFor();
    await row('c-kick').locator('td[data-label="Oldest ready"]', {hasText: '–'}).waitFor();
  });
  if (cfg.docs) await page.waitForTimeout(8000); // a few samples for the sparklines
  await shot('tubes');
  await step('kick', async () => {
    await page.getByLabel('Kick jobs of c-kick').click();
    await statusHas('Kicked 3 job(s) in c-kick');
  });
  await step('pause', async () => {
    await page.getByLabel('Pause c-pause').click();
    await statusHas('Paused c-pause for 3600 s');
    await row('c-pause').locator('td[data-label="Paused"]', {hasText: 'left'}).waitFor();
  });
  await step('clear', async () => {
    await page.getByLabel('Clear c-clear').click();
    await page.locator('dialog[open]').waitFor();
    await page.getByLabel(/^delayed/).uncheck(); // keep the delayed ones
    await page.locator('#confirm-ok').click();
    await statusHas('Deleted 4 job(s) from c-clear');
  });
  await step('jobs-paging', async () => {
    await open('#/tube/c-list/ready');
    await page.getByLabel('Per page').selectOption('50');
    await page.locator('.pager .note', {hasText: 'Page 1, 50 job(s), more follow'}).waitFor();
    await page.getByRole('button', {name: 'Next page'}).click();
    await page.locator('.pager .note', {hasText: 'Page 2, 10 job(s).'}).waitFor();
    const rows = await page.locator('table.grid tbody tr').count();
    if (rows !== 10) throw new Error(`${rows} rows on page 2`);
    await page.getByRole('button', {name: 'First page'}).click();
    await page.locator('.pager .note', {hasText: 'Page 1, 50 job(s)'}).waitFor();
  });
  await step('jobs-search', async () => {
    await page.getByLabel('Search bodies for').fill('needle-17');
    await page.getByRole('button', {name: 'Search', exact: true}).click();
    await page.locator('.note', {hasText: '1 of 50 bodies on this page contain'}).waitFor();
    await page.locator('.note', {hasText: 'at most 200 bodies'}).waitFor();
    const rows = await page.locator('table.grid tbody tr').count();
    if (rows !== 1) throw new Error(`${rows} rows after the search`);
  });
  await shot('jobs');
  await step('job-json', async () => {
    await open(`#/job/${ids.json}`);
    await page.locator('dt:text-is("State") + dd', {hasText: 'ready'}).waitFor();
    await page.getByRole('button', {name: 'JSON'}).click();
    await page.locator('pre.body', {hasText: '"nested": {'}).waitFor();
    await page.getByRole('button', {name: 'Hex'}).click();
    await page.locator('pre.body', {hasText: '00000000  7b'}).waitFor();
    await page.getByRole('button', {name: 'JSON'}).click();
  });
  await shot('job');
  await step('escaping', async () => {
    // a body of markup is shown as text, never parsed
    await open(`#/job/${ids.html}`);
    await page.locator('pre.body', {hasText: '<img src=x onerror='}).waitFor();
    const imgs = await page.locator('main img').count();
    if (imgs || dialogs.length) throw new Error(`${imgs} img, dialogs ${dialogs}`);
  });
  await step('odd-tube-name', async () => {
    // '/', '(', '$', ';' and '+' are legal in a tube's name
    await open('#/tubes');
    await row('c/odd(1)$;+').locator('a').click();
    await page.locator('main h1', {hasText: 'c/odd(1)$;+'}).waitFor();
    await page.locator('table.grid tbody tr').first().waitFor();
    const rows = await page.locator('table.grid tbody tr').count();
    if (rows !== 1) throw new Error(`${rows} jobs listed`);
  });
  await step('job-kick', async () => {
    await open(`#/job/${ids.buried}`);
    await page.locator('dt:text-is("State") + dd', {hasText: 'buried'}).waitFor();
    await page.getByRole('button', {name: 'Kick', exact: true}).click();
    await statusHas(`Kicked job ${ids.buried}`);
    await page.locator('dt:text-is("State") + dd', {hasText: 'ready'}).waitFor();
  });
  await step('job-priority', async () => {
    await open(`#/job/${ids.pri}`);
    await page.locator('dt:text-is("State") + dd', {hasText: 'ready'}).waitFor();
    await page.getByLabel('Priority').fill('7');
    await page.getByRole('button', {name: 'Set priority'}).click();
    await statusHas(`Job ${ids.pri} has priority 7`);
  });
  await step('job-delete', async () => {
    await open(`#/job/${ids.del}`);
    await page.locator('dt:text-is("State") + dd', {hasText: 'ready'}).waitFor();
    await page.getByRole('button', {name: 'Delete…'}).click();
    await page.locator('#confirm-ok').click();
    await statusHas(`Deleted job ${ids.del}`);
    await page.waitForURL(/#\/tube\/c-del\/ready$/);
  });
  await step('job-move', async () => {
    await open(`#/job/${ids.move}`);
    await page.locator('dt:text-is("State") + dd', {hasText: 'ready'}).waitFor();
    await page.getByLabel('Move to tube').fill('c-moved');
    await page.getByRole('button', {name: 'Move', exact: true}).click();
    await statusHas(`Moved job ${ids.move} to c-moved`);
    await page.locator('dt:text-is("Tube") + dd', {hasText: 'c-moved'}).waitFor();
  });
  await step('connections', async () => {
    await open('#/connections');
    await page.locator('table.grid tbody tr td[data-label="Watches"]', {hasText: 'c-watch'}).waitFor();
  });
  await shot('connections');
  await step('cluster', async () => {
    await open('#/cluster');
    await page.locator('.note', {hasText: 'A standalone server'}).waitFor();
    if (await page.locator('table.grid').isVisible()) throw new Error('voters shown standalone');
  });
  await step('keyboard', async () => {
    await open('#/tubes');
    await row('c-list').waitFor();
    // the page's content has focus after a route: Tab goes to its first control
    await page.keyboard.press('Tab');
    const first = await page.evaluate(() => document.activeElement.id &&
      document.querySelector(`label[for="${document.activeElement.id}"]`).textContent);
    if (first !== 'Pause for (s)') throw new Error(`first Tab: ${first}`);
    // a visible focus ring on buttons
    await page.getByLabel('Kick jobs of c-list').focus();
    const ring = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    if (ring !== 'solid') throw new Error(`focus outline ${ring}`);
    // a tube's link follows on Enter
    await row('c-list').locator('a').focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(/#\/tube\/c-list\/ready$/);
  });
  await step('phone', async () => {
    await page.setViewportSize({width: 390, height: 844});
    await open('#/tubes');
    await row('c-list').waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (overflow > 2) throw new Error(`the page is ${overflow} px wider than the phone`);
    await page.evaluate(() => document.activeElement.blur());
    await shot('phone', false);
  });
}

async function authMode() {
  await step('login-form', async () => {
    await page.goto(cfg.base);
    await page.getByLabel('Token').waitFor();
    // the API refuses without a session
    const st = await page.evaluate(async () => (await fetch('api/v1/tubes')).status);
    if (st !== 401) throw new Error(`GET tubes without a session: ${st}`);
  });
  await step('login-refused', async () => {
    await page.getByLabel('Token').fill(cfg.badToken);
    await page.getByRole('button', {name: 'Log in'}).click();
    await page.locator('.error', {hasText: 'not known'}).waitFor();
  });
  await shot('login', false);
  await step('login', async () => {
    await page.getByLabel('Token').fill(cfg.token);
    await page.getByRole('button', {name: 'Log in'}).click();
    await page.locator('main h1', {hasText: 'Overview'}).waitFor();
    await page.locator('#who', {hasText: 'as '}).waitFor();
  });
  await step('auth-kick', async () => {
    await open('#/tubes');
    await page.getByLabel('Kick jobs of c-kick').click();
    await statusHas('Kicked 3 job(s) in c-kick');
  });
  await step('csrf-refused', async () => {
    // the session cookie alone does not make an action
    const st = await page.evaluate(async () =>
      (await fetch('api/v1/tubes/c-kick/kick?n=1', {method: 'POST'})).status);
    if (st !== 403) throw new Error(`POST without X-CSRF-Token: ${st}`);
  });
  await step('logout', async () => {
    await page.getByRole('button', {name: 'Log out'}).click();
    await page.getByLabel('Token').waitFor();
    const st = await page.evaluate(async () => (await fetch('api/v1/tubes')).status);
    if (st !== 401) throw new Error(`GET tubes after logout: ${st}`);
  });
}

async function clusterMode() {
  await step('cluster-page', async () => {
    await open('#/cluster');
    await page.locator('dt:text-is("Role") + dd', {hasText: 'leader'}).waitFor();
    await page.locator('dt:text-is("Term") + dd', {hasText: /^[1-9]/}).waitFor();
    const rows = page.locator('table.grid tbody tr');
    await rows.nth(2).waitFor();
    if (await rows.count() !== 3) throw new Error(`${await rows.count()} voters`);
    await rows.locator('td[data-label="Role"]', {hasText: 'leader'}).first().waitFor();
    await page.locator('#cl-transfer').waitFor();
    // the leader knows every member's progress: last contact in ms
    for (let i = 0; i < 3; i++)
      await rows.nth(i).locator('td[data-label="Last contact"]', {hasText: /\d ms$/}).waitFor();
    await rows.nth(0).locator('td[data-label="Match index"]', {hasText: /^\d/}).waitFor();
    // "Make leader" on the two followers, not on the leader itself
    const n = await page.getByRole('button', {name: /^Make node \d+ the leader$/}).count();
    if (n !== 2) throw new Error(`${n} Make leader buttons`);
  });
  await shot('cluster');
  await step('cluster-transfer-cancel', async () => {
    await page.getByRole('button', {name: `Make node ${cfg.to} the leader`, exact: true}).click();
    await page.locator('dialog[open]', {hasText: `Make node ${cfg.to} the leader?`}).waitFor();
    await page.locator('#confirm-cancel').click();
    await page.locator('dialog[open]').waitFor({state: 'detached'});
    await page.waitForTimeout(300);
    await page.locator('dt:text-is("Role") + dd', {hasText: 'leader'}).waitFor();
  });
  await step('cluster-transfer', async () => {
    restarting = true;
    await page.getByRole('button', {name: `Make node ${cfg.to} the leader`, exact: true}).click();
    await page.locator('#confirm-ok').click();
    await statusHas(`Asked node ${cfg.to} to lead`);
    // this node restarts as a follower; the page follows it there
    await page.locator('dt:text-is("Role") + dd', {hasText: 'follower'}).waitFor({timeout: 20000});
    await page.locator('dt:text-is("Leader") + dd', {hasText: new RegExp(`^${cfg.to}$`)}).waitFor({timeout: 20000});
    restarting = false;
  });
  await step('cluster-follower', async () => {
    await page.locator('section', {hasText: `Transfers are made through the leader: node ${cfg.to} leads`}).waitFor();
    await page.locator('.note', {hasText: 'Only the leader knows'}).waitFor();
    const shown = await page.getByRole('button', {name: /^Make node \d+ the leader$/}).count();
    if (shown !== 0) throw new Error(`${shown} Make leader buttons on a follower`);
    const contact = await page.locator('td[data-label="Last contact"]', {hasText: 'ms'}).count();
    if (contact !== 0) throw new Error('a follower shows contact ages');
  });
}

if (cfg.mode === 'auth') await authMode();
else if (cfg.mode === 'cluster') await clusterMode();
else await openMode();
const csp = problems.filter((p) => !/status of 4\d\d|ERR_ABORTED/.test(p));
report('no-page-errors', csp.length === 0, csp.slice(0, 5).join(' | ') || undefined);
await browser.close();
