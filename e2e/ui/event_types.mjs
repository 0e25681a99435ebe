// The event type catalog on the dashboard (issue 24, item 16), in headless
// Chromium against a real `herald serve` started by
// cmd/herald/ui_browser_test.go (TestDashboardEventTypes; environment as
// for dashboard.mjs): an admin creates a type on the Event types page (a
// bad example is refused at its field), the subscription form offers it
// with its description, the filter tester offers its example as a sample
// event, the portal's subscription form offers it too, and a publish that
// does not conform is refused.
//
// Prints "OK <n> screenshots" on success.

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { env, log, assert, begin, until, api, screenshots, launch, runFlow, fitsOn } from './lib.mjs';

const BASE = env('HERALD_URL');
const TOKEN = env('HERALD_TOKEN');
const SHOTS = env('SHOTS');

const apiCall = api(BASE, TOKEN);
const { shot, shots } = screenshots(SHOTS);

const context = await launch('herald-ui-event-types-');
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);
const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
// The refused example and the refused publish are 422s on purpose.
page.on('console', (m) => { if (m.type() === 'error' && !m.text().includes('422')) problems.push('console error: ' + m.text()); });
const nav = (name) => page.locator('header nav').getByRole('link', { name, exact: true });

// unbroken checks that no type name or button wraps onto a second line: a
// squeezed column broke "order.placed" and "Delete" mid-word (td's
// overflow-wrap: anywhere).
async function unbroken() {
  for (const el of await page.locator('tbody code[data-event-type], tbody button').all()) {
    const bb = await el.boundingBox();
    assert(bb.height < 34, `"${await el.textContent()}" wraps onto two lines at 1280 px: ${bb.height}px high`);
  }
}

const SCHEMA = '{"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}}}';

await runFlow({ context, page, shot, shots, problems, dir: SHOTS }, async () => {
  begin('sign in');
  await page.goto(BASE + '/ui/');
  await page.locator('#token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();

  begin('the Event types page starts empty');
  await nav('Event types').click();
  await page.getByRole('heading', { name: 'Event types', exact: true }).waitFor();
  await page.getByText('No event types yet.').waitFor();

  begin('an example that does not conform is refused at the example field');
  const form = page.locator('form[data-event-type-form=new]');
  await form.getByLabel('Name').fill('order.placed');
  await form.getByLabel('Description').fill('An order was placed.');
  await form.getByLabel('JSON Schema of the data').fill(SCHEMA);
  await form.getByLabel('Example data').fill('{"amount": "12.50", "currency": "EUR"}');
  await form.getByLabel('Validate publishes').check();
  await form.getByRole('button', { name: 'Create event type' }).click();
  const exErr = page.locator('#et-example-error');
  await exErr.waitFor();
  assert((await exErr.textContent()).includes('example.amount'), 'the error names example.amount: ' + await exErr.textContent());
  assert(await page.locator('#et-example').getAttribute('aria-invalid') === 'true', 'the example is marked invalid');
  await shot(page, '01-event-type-example-refused');

  begin('a conforming example creates the type');
  await form.getByLabel('Example data').fill('{"amount": 12.5, "currency": "EUR"}');
  await form.getByRole('button', { name: 'Create event type' }).click();
  await page.locator('code[data-event-type="order.placed"]').waitFor();
  await page.getByText('Event type order.placed created.').waitFor();
  await fitsOn(page, 'the Event types page at 1280 px');
  await unbroken();
  await shot(page, '02-event-types-list');

  begin('a publish that does not conform is refused');
  const res = await fetch(BASE + '/v1/events', {
    method: 'POST', headers: { Authorization: 'Bearer ' + TOKEN, 'Content-Type': 'application/json' },
    body: JSON.stringify({ type: 'order.placed', data: { amount: 'twelve' } }),
  });
  const body = await res.json();
  assert(res.status === 422 && body.error.code === 'schema_mismatch' && body.error.field === 'data.amount',
    'publish answered ' + res.status + ' ' + JSON.stringify(body));

  begin('the subscription form offers the type with its description');
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByRole('heading', { name: 'New subscription' }).waitFor();
  const pick = page.locator('select[name=catalog_type]');
  await until('the catalog picker', async () => (await pick.locator('option').allTextContents())
    .some((o) => o === 'order.placed — An order was placed.'));
  await pick.selectOption('order.placed');
  assert(await page.locator('input[name=event_types]').inputValue() === 'order.placed', 'the type was added to the input');
  await page.locator('[data-catalog-description]').getByText('An order was placed.').waitFor();

  begin('the filter tester offers the example as a sample event');
  const recent = page.locator('select[name=recent_event]');
  await recent.focus();
  await until('the catalog example', async () => (await recent.locator('option').allTextContents())
    .some((o) => o.startsWith('order.placed — ')));
  await recent.selectOption('example:order.placed');
  const sample = JSON.parse(await page.locator('textarea[name=test_event]').inputValue());
  assert(sample.type === 'order.placed' && sample.data.amount === 12.5, 'sample event: ' + JSON.stringify(sample));
  await page.locator('select[name=filter_kind]').selectOption('cel');
  await page.locator('textarea[name=filter]').fill('data.amount > 10.0');
  await page.getByRole('button', { name: 'Test filter' }).click();
  await page.locator('[data-matched=true]').waitFor();
  await fitsOn(page, 'the subscription form at 1280 px');
  await shot(page, '03-subscription-form-catalog');

  begin('a deprecated type is no longer offered');
  await apiCall('POST', '/v1/event-types', { name: 'order.legacy', description: 'Old.', deprecated: true });
  await page.reload();
  await page.getByRole('heading', { name: 'New subscription' }).waitFor();
  await until('the picker after reload', async () => (await pick.locator('option').count()) > 1);
  assert(!(await pick.locator('option').allTextContents()).some((o) => o.startsWith('order.legacy')), 'a deprecated type offered');

  begin('the portal\'s subscription form offers the type too');
  const link = await apiCall('POST', '/v1/tenants/acme/portal', {});
  const portal = await context.newPage();
  portal.on('pageerror', (e) => problems.push('portal page error: ' + e.message));
  await portal.goto(link.url);
  await portal.getByRole('heading', { name: 'Subscriptions' }).waitFor();
  await portal.goto(BASE + '/portal/subscriptions/new');
  await portal.getByRole('heading', { name: 'New subscription' }).waitFor();
  const ppick = portal.locator('select[name=catalog_type]');
  await until('the portal picker', async () => (await ppick.locator('option').allTextContents())
    .some((o) => o === 'order.placed — An order was placed.'));
  await shot(portal, '04-portal-subscription-form-catalog');
  await portal.close();

  begin('editing a type: a schema its example breaks is refused, a description saved');
  await nav('Event types').click();
  await page.getByRole('heading', { name: 'Event types', exact: true }).waitFor();
  await page.locator('button[data-edit="order.placed"]').click();
  const edit = page.locator('form[data-event-type-form=edit]');
  await edit.getByLabel('JSON Schema of the data').fill('{"type": "object", "properties": {"amount": {"type": "string"}}}');
  await edit.getByRole('button', { name: 'Save event type' }).click();
  await until('the example error', async () => ((await page.locator('#et-example-error').textContent().catch(() => '')) || '').includes('example.amount'));
  await edit.getByLabel('JSON Schema of the data').fill(SCHEMA);
  await edit.getByLabel('Description').fill('An order was placed and paid.');
  await edit.getByRole('button', { name: 'Save event type' }).click();
  await page.getByText('Event type order.placed saved.').waitFor();
  await until('the new description', async () => (await page.locator('tbody').textContent()).includes('An order was placed and paid.'));
  await fitsOn(page, 'the Event types page with its edit form at 1280 px');
  await unbroken();
  const saved = await apiCall('GET', '/v1/event-types/order.placed');
  assert(saved.description === 'An order was placed and paid.' && saved.validate === true, 'saved: ' + JSON.stringify(saved));
  await shot(page, '05-event-type-edited');
  if (process.env.EVENT_TYPES_SHOT) {
    // The README's picture of the catalog (1280 px window, not the full page).
    await page.goto(BASE + '/ui/event-types');
    await page.locator('code[data-event-type="order.placed"]').waitFor();
    mkdirSync(dirname(process.env.EVENT_TYPES_SHOT), { recursive: true });
    await page.setViewportSize({ width: 1280, height: 640 });
    await page.screenshot({ path: process.env.EVENT_TYPES_SHOT });
    log('event types screenshot for the README:', process.env.EVENT_TYPES_SHOT);
  }

  // Issue 24's done-when: items 1 and 16 at phone width too.
  begin('390×844: the Event types page and its edit form fit a phone');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(BASE + '/ui/event-types');
  await page.locator('code[data-event-type="order.placed"]').waitFor();
  await fitsOn(page, 'the Event types page at 390 px');
  await shot(page, '06-phone-event-types');
  await page.locator('button[data-edit="order.placed"]').click();
  await page.locator('form[data-event-type-form=edit]').waitFor();
  await fitsOn(page, 'the event type edit form at 390 px');

  begin('390×844: the subscription form\'s picker, and an expression without a language refused at its field');
  await page.goto(BASE + '/ui/subscriptions/new');
  await page.getByRole('heading', { name: 'New subscription' }).waitFor();
  await until('the catalog picker at 390 px', async () => (await pick.locator('option').allTextContents())
    .some((o) => o === 'order.placed — An order was placed and paid.'));
  await pick.selectOption('order.placed');
  await page.locator('[data-catalog-description]').getByText('An order was placed and paid.').waitFor();
  await page.getByLabel('Endpoint URL').fill('http://127.0.0.1:9/hook');
  await page.getByLabel('Expression').fill('data.amount > 10.0');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.field-error').getByText('choose the filter\'s language').waitFor();
  assert((await apiCall('GET', '/v1/subscriptions')).data.length === 0, 'created with a dropped filter at 390 px');
  await fitsOn(page, 'the subscription form with its picker at 390 px');
  await shot(page, '07-phone-subscription-form-catalog');

  begin('390×844: the portal\'s form picker, opened in a new tab (the session cookie)');
  const phonePortal = await context.newPage();
  phonePortal.on('pageerror', (e) => problems.push('portal page error: ' + e.message));
  await phonePortal.setViewportSize({ width: 390, height: 844 });
  await phonePortal.goto(BASE + '/portal/subscriptions/new');
  await phonePortal.getByRole('heading', { name: 'New subscription' }).waitFor();
  await until('the portal picker at 390 px', async () => (await phonePortal.locator('select[name=catalog_type]').locator('option').allTextContents())
    .some((o) => o === 'order.placed — An order was placed and paid.'));
  await fitsOn(phonePortal, 'the portal subscription form at 390 px');
  await shot(phonePortal, '08-phone-portal-subscription-form-catalog');
  await phonePortal.close();
});
