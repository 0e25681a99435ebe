// herald.* alerts on the dashboard (issue 24, item 6), in headless Chromium
// against a real `herald serve` started by cmd/herald/ui_browser_test.go
// (TestDashboardSystemEvents; environment as for dashboard.mjs): a dead
// letter raises a herald.delivery.dead that an alert subscription receives,
// so it is stored; the Events page leaves it out until "herald.* alerts" is
// ticked, and the filter tester's recent events leave it out unless the
// form's event types name herald.
//
// Prints "OK <n> screenshots" on success.

import { env, assert, begin, until, api, receiverSwitch, screenshots, launch, runFlow, fitsOn } from './lib.mjs';

const BASE = env('HERALD_URL');
const TOKEN = env('HERALD_TOKEN');
const RECEIVER = env('RECEIVER_URL');
const SHOTS = env('SHOTS');

const apiCall = api(BASE, TOKEN);
const receiverFail = receiverSwitch(RECEIVER);
const { shot, shots } = screenshots(SHOTS);

const context = await launch('herald-ui-system-');
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);
const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
const nav = (name) => page.locator('header nav').getByRole('link', { name, exact: true });
const rowsText = async () => (await page.locator('tbody').allTextContents()).join('\n');

await runFlow({ context, page, shot, shots, problems, dir: SHOTS }, async () => {
  begin('a dead letter raises a stored herald.delivery.dead (an alert subscription receives it)');
  await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/hook', event_types: ['order.*'] });
  await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/alerts', event_types: ['herald.delivery.dead'] });
  await receiverFail(true);
  const ev = await apiCall('POST', '/v1/events', { type: 'order.created', data: { total: 7 } });
  await until('the herald.delivery.dead event', async () =>
    (await apiCall('GET', '/v1/events?type=herald.delivery.dead')).data.length === 1);
  await receiverFail(false);

  begin('sign in');
  await page.goto(BASE + '/ui/');
  await page.locator('#token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();

  begin('the Events page leaves herald.* out');
  await nav('Events').click();
  await page.getByRole('heading', { name: 'Events' }).waitFor();
  await page.getByText(ev.id).first().waitFor();
  assert(!(await rowsText()).includes('herald.delivery.dead'), 'herald.* listed by default:\n' + await rowsText());
  await shot(page, '01-events-without-alerts');

  begin('ticking "herald.* alerts" shows them');
  await page.getByLabel('herald.* alerts').check();
  await page.getByRole('button', { name: 'Search' }).click();
  await until('the alert row', async () => page.url().includes('system=1') && (await rowsText()).includes('herald.delivery.dead'));
  assert((await rowsText()).includes(ev.id), 'the order event still listed');
  assert(await page.getByLabel('herald.* alerts').isChecked(), 'the box stays ticked');
  await fitsOn(page, 'the Events page with alerts at 1280 px');
  await shot(page, '02-events-with-alerts');

  // Issue 24's done-when: item 6 at phone width too.
  begin('390×844: the Events page leaves herald.* out, the box shows them, and it fits');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(BASE + '/ui/events');
  await page.getByText(ev.id).first().waitFor();
  assert(!(await rowsText()).includes('herald.delivery.dead'), 'herald.* listed by default at 390 px:\n' + await rowsText());
  await page.getByLabel('herald.* alerts').check();
  await page.getByRole('button', { name: 'Search' }).click();
  await until('the alert row at 390 px', async () => (await rowsText()).includes('herald.delivery.dead'));
  await fitsOn(page, 'the Events page with alerts at 390 px');
  await shot(page, '02b-phone-events-with-alerts');
  await page.setViewportSize({ width: 1280, height: 900 });

  begin('searching a herald.* type shows them without the box');
  await page.goto(BASE + '/ui/events?type=herald.delivery.dead');
  await until('the alert row by type', async () => (await rowsText()).includes('herald.delivery.dead'));

  begin('the filter tester\'s recent events leave herald.* out');
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByRole('heading', { name: 'New subscription' }).waitFor();
  const recent = page.locator('select[name=recent_event]');
  await recent.focus();
  await until('recent events loaded', async () => (await recent.locator('option').allTextContents()).some((o) => o.includes(ev.id)));
  const options = (await recent.locator('option').allTextContents()).join('\n');
  assert(!options.includes('herald.delivery.dead'), 'herald.* among recent events:\n' + options);
  await shot(page, '03-filter-tester-recent');
});
