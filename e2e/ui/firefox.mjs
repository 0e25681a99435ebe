// herald's dashboard in headless Firefox ESR (Debian's firefox-esr), driven
// over WebDriver BiDi, which Firefox speaks natively (playwright-core
// needs a patched Firefox, so this uses a minimal BiDi client over `ws`).
// Started by cmd/herald/ui_browser_test.go (TestDashboardFirefox) with:
//
//   HERALD_URL, HERALD_TOKEN  the node and its admin token
//   FIREFOX                   the Firefox executable
//   SHOTS                     directory for screenshots
//   DELIVERY_ID, SUBSCRIPTION_ID  a delivery with attempts and its subscription
//
// It signs in, opens every page at 1280 px and one at 390 px, and fails on
// any JavaScript error or console error (CSP violations included). Prints
// "OK <n> pages" on success.

import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const BASE = env('HERALD_URL');
const TOKEN = env('HERALD_TOKEN');
const SHOTS = env('SHOTS');
const DELIVERY = env('DELIVERY_ID');
const SUB = env('SUBSCRIPTION_ID');
mkdirSync(SHOTS, { recursive: true });

const profile = mkdtempSync(join(tmpdir(), 'herald-ui-firefox-'));
writeFileSync(join(profile, 'user.js'), [
  ['browser.shell.checkDefaultBrowser', false], ['browser.startup.homepage_override.mstone', '"ignore"'],
  ['browser.aboutwelcome.enabled', false], ['datareporting.policy.dataSubmissionEnabled', false],
  ['datareporting.healthreport.uploadEnabled', false], ['toolkit.telemetry.enabled', false],
  ['app.update.auto', false], ['app.normandy.enabled', false], ['extensions.update.enabled', false],
  ['network.captive-portal-service.enabled', false], ['network.connectivity-service.enabled', false],
  ['browser.safebrowsing.malware.enabled', false], ['browser.safebrowsing.phishing.enabled', false],
  ['services.settings.server', '"http://127.0.0.1:1/"'], ['remote.prefs.recommended', true],
].map(([k, v]) => `user_pref("${k}", ${v});`).join('\n') + '\n');

const ff = spawn(env('FIREFOX'), ['--headless', '--no-remote', '--profile', profile, '--remote-debugging-port', '0', 'about:blank'],
  { env: { ...process.env, MOZ_HEADLESS: '1', HOME: profile }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
let ffLog = '';
const wsURL = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('Firefox did not start WebDriver BiDi:\n' + ffLog)), 60000);
  const onData = (b) => {
    ffLog += b;
    const m = ffLog.match(/WebDriver BiDi listening on (ws:\/\/[^\s]+)/);
    if (m) { clearTimeout(timer); resolve(m[1].replace(/\/$/, '') + '/session'); }
  };
  ff.stdout.on('data', onData);
  ff.stderr.on('data', onData);
  ff.on('exit', (code) => reject(new Error('Firefox exited ' + code + ':\n' + ffLog)));
});

const ws = new WebSocket(wsURL);
await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
let nextID = 1;
const pending = new Map();
const errors = [];
ws.on('message', (raw) => {
  const msg = JSON.parse(raw);
  if (msg.id && pending.has(msg.id)) {
    const { resolve, reject } = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.type === 'error' || msg.error) reject(new Error(msg.error + ': ' + msg.message));
    else resolve(msg.result);
  } else if (msg.method === 'log.entryAdded') {
    const e = msg.params;
    if (e.level === 'error') errors.push(`${e.type} error: ${e.text}`);
  }
});
const send = (method, params = {}) => new Promise((resolve, reject) => {
  const id = nextID++;
  pending.set(id, { resolve, reject });
  ws.send(JSON.stringify({ id, method, params }));
});

let step = 'start';
const done = (code) => {
  try { ws.close(); } catch { /* closing anyway */ }
  try { process.kill(-ff.pid, 'SIGTERM'); } catch { /* already gone */ }
  try { rmSync(profile, { recursive: true, force: true }); } catch { /* temp dir */ }
  process.exit(code);
};

try {
  await send('session.new', { capabilities: {} });
  await send('session.subscribe', { events: ['log.entryAdded'] });
  const tree = await send('browsingContext.getTree', {});
  const context = tree.contexts[0].context;
  await send('browsingContext.setViewport', { context, viewport: { width: 1280, height: 900 } });
  const evaluate = async (expression) => {
    const r = await send('script.evaluate', { expression, target: { context }, awaitPromise: true, resultOwnership: 'none' });
    if (r.type === 'exception') throw new Error('script exception: ' + JSON.stringify(r.exceptionDetails.text || r.exceptionDetails));
    return r.result.value;
  };
  const until = async (what, expression, ms = 20000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      if (await evaluate(expression)) return;
      if (Date.now() > deadline) throw new Error('timed out waiting for ' + what + ' (page: ' + await evaluate('document.body.innerText.slice(0, 500)') + ')');
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const shot = async (name) => {
    const r = await send('browsingContext.captureScreenshot', { context, origin: 'document' });
    writeFileSync(join(SHOTS, name + '.png'), Buffer.from(r.data, 'base64'));
  };

  step = 'sign in';
  await send('browsingContext.navigate', { context, url: BASE + '/', wait: 'complete' });
  await until('the sign-in form', "!!document.querySelector('#token')");
  await evaluate(`(() => { const i = document.querySelector('#token'); i.value = ${JSON.stringify(TOKEN)}; i.form.requestSubmit(); return true; })()`);
  await until('the overview', "document.querySelectorAll('svg.chart').length === 3 && document.querySelectorAll('.card').length === 5");
  await shot('ff-01-overview');

  const pages = [
    ['subscriptions', 'ff-02-subscriptions', "document.querySelectorAll('tbody tr').length > 0"],
    ['subscriptions/' + SUB, 'ff-03-subscription', "!!document.querySelector('form textarea[name=test_event]')"],
    ['events', 'ff-04-events', "document.querySelectorAll('tbody tr').length > 0"],
    ['deliveries', 'ff-05-deliveries', "document.querySelectorAll('tbody tr').length > 0"],
    ['deliveries/' + DELIVERY, 'ff-06-delivery', "document.querySelectorAll('.attempt').length > 0"],
    ['dead-letters', 'ff-07-dead-letters', "!!document.querySelector('main table, main .empty')"],
    ['api', 'ff-08-api', "!!document.querySelector('main .op, main .empty')"],
    ['sources', 'ff-10-sources', "!!document.querySelector('main table, main .empty')"],
    ['sources/new', 'ff-11-source-new', "!!document.querySelector('main form select[name=connection]')"],
  ];
  for (const [path, name, ready] of pages) {
    step = 'page /ui/' + path;
    await send('browsingContext.navigate', { context, url: BASE + '/ui/' + path, wait: 'complete' });
    await until(path, ready);
    const err = await evaluate("(() => { const e = document.querySelector('main .error'); return e ? e.textContent : ''; })()");
    if (err) throw new Error('error shown on /ui/' + path + ': ' + err);
    await shot(name);
  }

  step = 'filter tester';
  await send('browsingContext.navigate', { context, url: BASE + '/ui/subscriptions/' + SUB, wait: 'complete' });
  await until('the form', "!!document.querySelector('textarea[name=test_event]')");
  await evaluate(`(() => { document.querySelector('textarea[name=test_event]').value = '{"type": "order.created", "data": {"total": 120}}';
    [...document.querySelectorAll('button')].find((b) => b.textContent === 'Test filter').click(); return true; })()`);
  await until('the filter verdict', "!!document.querySelector('[data-matched]')");

  step = 'phone width';
  await send('browsingContext.setViewport', { context, viewport: { width: 390, height: 844 } });
  await send('browsingContext.navigate', { context, url: BASE + '/ui/deliveries', wait: 'complete' });
  await until('deliveries', "document.querySelectorAll('tbody tr').length > 0");
  const [sw, iw] = await evaluate('[document.documentElement.scrollWidth, window.innerWidth]');
  if (sw > iw + 1) throw new Error(`deliveries is ${sw}px wide at ${iw}px`);
  await shot('ff-09-phone-deliveries');

  if (errors.length) throw new Error('browser errors:\n' + errors.join('\n'));
  console.log('OK ' + (pages.length + 2) + ' pages in Firefox; screenshots: ' + SHOTS);
  done(0);
} catch (e) {
  console.error('FAILED at step "' + step + '": ' + (e.stack || e));
  if (errors.length) console.error('browser errors:\n' + errors.join('\n'));
  done(1);
}
