// Helpers shared by the dashboard's browser tests (dashboard.mjs,
// portal.mjs): environment, step logging, polling, the admin API, the
// test receiver's switch, screenshots and a Chromium with a fresh profile.

import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// env returns a required environment variable.
export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};

export const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 23)}]`, ...a);
export const assert = (cond, msg) => { if (!cond) throw new Error('assertion failed: ' + msg); };

// step names what the run is doing, for the failure message and screenshot.
export let step = 'start';
export const begin = (s) => { step = s; log('step:', s); };

// until polls cond (which may reload the page) for up to ms.
export async function until(what, cond, ms = 30000, every = 300) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, every));
  }
}

// api returns apiCall(method, path, body, token) against base, with token
// defaulting to defaultToken; a non-2xx answer throws.
export function api(base, defaultToken) {
  return async function apiCall(method, path, body, token = defaultToken) {
    const res = await fetch(base + path, {
      method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

// receiverSwitch returns receiverFail(on): the test receiver answers 503
// while on.
export function receiverSwitch(receiver) {
  return async function receiverFail(on) {
    const res = await fetch(receiver + '/control?fail=' + (on ? '1' : '0'), { method: 'POST' });
    assert(res.ok, 'receiver control answered ' + res.status);
  };
}

// screenshots returns shot(page, name), saving full-page PNGs under dir,
// and the list of files saved.
export function screenshots(dir) {
  mkdirSync(dir, { recursive: true });
  const shots = [];
  async function shot(page, name) {
    const p = join(dir, name + '.png');
    await page.screenshot({ path: p, fullPage: true });
    shots.push(p);
    return p;
  }
  return { shot, shots };
}

// launch starts Debian's Chromium headless with a fresh profile and the
// flags this machine's closed network needs.
export function launch(profilePrefix) {
  const profile = mkdtempSync(join(tmpdir(), profilePrefix));
  return chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
      '--no-first-run', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
}

// runFlow runs flow and reports the way the Go tests read it: "OK <n>
// screenshots" when it passes and the page saw no problems (third-party
// requests, errors); otherwise the step that failed, a screenshot of page
// and exit status 1. The browser context is closed either way.
export async function runFlow({ context, page, shot, shots, problems, dir }, flow) {
  try {
    await flow();
    assert(problems.length === 0, 'browser problems:\n' + problems.join('\n'));
    console.log('screenshots:', dir);
    console.log('OK ' + shots.length + ' screenshots');
  } catch (e) {
    try { await shot(page, 'failure-' + step.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)); } catch { /* best effort */ }
    console.error('FAILED at step "' + step + '": ' + (e.stack || e));
    if (problems.length) console.error('browser problems:\n' + problems.join('\n'));
    await context.close();
    process.exit(1);
  }
  await context.close();
}

// fitsOn checks that page, its header tabs and every table fit the window
// without sideways scrolling (as dashboard.mjs's fits: a table's own
// scrollbar hides its last columns).
export async function fitsOn(page, what) {
  const r = await page.evaluate(() => ({
    page: [document.documentElement.scrollWidth, window.innerWidth],
    boxes: [...document.querySelectorAll('header nav, .table-wrap')].map((t) => [t.className || t.tagName, t.scrollWidth, t.clientWidth]),
  }));
  assert(r.page[0] <= r.page[1] + 1, `${what} is ${r.page[0]}px wide at ${r.page[1]}px`);
  for (const [n, sw, cw] of r.boxes) assert(sw <= cw + 1, `${what}: ${n} is ${sw}px in ${cw}px`);
}
