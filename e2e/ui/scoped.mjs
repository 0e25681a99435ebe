// Scoped sign-in (issue 24, item 15), in headless Chromium against a real
// `herald serve` started by cmd/herald/ui_browser_test.go
// (TestDashboardScopedSignIn; environment as for dashboard.mjs): a
// read-only token signs in and sees no write button, no admin page in the
// nav, and a clear "not allowed" message on an admin page it opens by
// address; a tenant token sees a "tenant X" banner and its tenant's
// subscriptions only; the admin token still lands on the overview. At
// 1280×800 and 390×844.
//
// Prints "OK <n> screenshots" on success.

import { env, assert, begin, api, screenshots, launch, runFlow, fitsOn } from './lib.mjs';

const BASE = env('HERALD_URL');
const TOKEN = env('HERALD_TOKEN');
const RECEIVER = env('RECEIVER_URL');
const SHOTS = env('SHOTS');

const apiCall = api(BASE, TOKEN);
const { shot, shots } = screenshots(SHOTS);

const context = await launch('herald-ui-scoped-');
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);
const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
// A 403 the page shows on purpose is logged by Chromium as a failed
// resource: only other console errors count.
page.on('console', (m) => { if (m.type() === 'error' && !/status of 403/.test(m.text())) problems.push('console error: ' + m.text()); });
const navLinks = async () => (await page.locator('header nav a').allTextContents()).map((s) => s.trim());
const rowsText = async () => (await page.locator('tbody').allTextContents()).join('\n');

async function signIn(token, heading) {
  await page.goto(BASE + '/ui/sign-in');
  await page.evaluate(() => sessionStorage.clear());
  await page.goto(BASE + '/ui/');
  await page.locator('#token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: heading, exact: true }).waitFor();
}

await runFlow({ context, page, shot, shots, problems, dir: SHOTS }, async () => {
  begin('three subscriptions (acme, globex, untenanted) and two scoped tokens');
  const acme = await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/acme', description: 'acme hook', tenant: 'acme' });
  await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/globex', description: 'globex hook', tenant: 'globex' });
  await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/plain', description: 'plain hook' });
  const reader = await apiCall('POST', '/v1/tokens', { name: 'reader', scopes: ['subscriptions:read', 'events:read', 'deliveries:read'] });
  const tenant = await apiCall('POST', '/v1/tokens', {
    name: 'acme', tenant: 'acme', scopes: ['subscriptions:read', 'subscriptions:write', 'events:read', 'deliveries:read'],
  });

  for (const [w, hgt] of [[1280, 800], [390, 844]]) {
    const size = `${w}x${hgt}`;
    await page.setViewportSize({ width: w, height: hgt });

    begin(`${size}: a read-only token signs in and lands on Subscriptions`);
    await signIn(reader.token, 'Subscriptions');
    await page.getByText('acme hook').waitFor();
    const nav = await navLinks();
    for (const gone of ['Overview', 'Tokens', 'Connections', 'Sources']) assert(!nav.includes(gone), `${gone} in the nav of a read-only token: ${nav}`);
    for (const here of ['Subscriptions', 'Events', 'Deliveries', 'Dead letters']) assert(nav.includes(here), `${here} missing from the nav: ${nav}`);
    assert(await page.getByRole('link', { name: 'New subscription' }).count() === 0, 'New subscription offered to a read-only token');
    await page.locator('[data-read-only="subscriptions:write"]').first().waitFor();
    assert(await page.locator('[data-tenant-banner]').count() === 0, 'a tenant banner for an unconfined token');
    await fitsOn(page, `01-readonly-list at ${size}`);
    await shot(page, `${size}-01-readonly-list`);

    begin(`${size}: a read-only token's subscription page has no write button`);
    await page.getByRole('link', { name: 'acme hook' }).click();
    await page.getByRole('heading', { name: 'acme hook' }).waitFor();
    for (const b of ['Disable', 'Delete', 'Rotate secret', 'Reveal secret', 'Send test event', 'Replay…', 'Portal link', 'Save']) {
      assert(await page.getByRole('button', { name: b, exact: true }).count() === 0, `"${b}" offered to a read-only token`);
    }
    await page.locator('[data-settings-view]').waitFor();
    await page.locator('[data-read-only]').first().waitFor();
    await fitsOn(page, `02-readonly-detail at ${size}`);
    await shot(page, `${size}-02-readonly-detail`);

    begin(`${size}: the Tokens page by address says the token is not allowed`);
    await page.goto(BASE + '/ui/tokens');
    await page.locator('[data-forbidden]').waitFor();
    assert((await page.locator('[data-forbidden]').textContent()).includes('Not allowed with this token'), 'the 403 message');
    await fitsOn(page, `03-readonly-tokens at ${size}`);
    await shot(page, `${size}-03-readonly-tokens`);

    begin(`${size}: the new-subscription page by address offers no form`);
    await page.goto(BASE + '/ui/subscriptions/new');
    await page.locator('[data-read-only="subscriptions:write"]').waitFor();
    assert(await page.getByRole('button', { name: 'Create subscription' }).count() === 0, 'the create form for a read-only token');

    begin(`${size}: a tenant token sees its tenant's banner and subscriptions only`);
    await signIn(tenant.token, 'Subscriptions');
    await page.locator('[data-tenant-banner="acme"]').waitFor();
    await page.getByText('acme hook').waitFor();
    const rows = await rowsText();
    assert(!rows.includes('globex hook') && !rows.includes('plain hook'), 'another tenant\'s subscription listed:\n' + rows);
    assert(!(await navLinks()).includes('Tokens'), 'Tokens in a tenant token\'s nav');
    await page.getByRole('link', { name: 'New subscription' }).waitFor();
    assert(await page.locator('input[name=tenant]').count() === 0, 'a tenant filter for a tenant token');
    await fitsOn(page, `04-tenant-list at ${size}`);
    await shot(page, `${size}-04-tenant-list`);

    begin(`${size}: a 403 from the API (another tenant's list) is a clear message, not a broken page`);
    await page.goto(BASE + '/ui/subscriptions?tenant=globex');
    await page.locator('[data-forbidden]').waitFor();
    assert((await page.locator('[data-forbidden]').textContent()).includes('Not allowed with this token'), 'the 403 message');
    await page.locator('header nav').waitFor();
    await fitsOn(page, `04b-tenant-forbidden at ${size}`);
    await shot(page, `${size}-04b-tenant-forbidden`);

    begin(`${size}: the tenant token may change its subscription, not make portal links`);
    await page.goto(BASE + '/ui/subscriptions/' + acme.id);
    await page.getByRole('button', { name: 'Delete', exact: true }).waitFor();
    assert(await page.getByRole('button', { name: 'Portal link' }).count() === 0, 'Portal link offered to a tenant token');
    assert(await page.getByRole('button', { name: 'Replay…' }).count() === 0, 'Replay offered without deliveries:write');
    await fitsOn(page, `05-tenant-detail at ${size}`);
    await shot(page, `${size}-05-tenant-detail`);
  }

  begin('the admin token still lands on the overview with every page');
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(TOKEN, 'Overview');
  const nav = await navLinks();
  for (const here of ['Overview', 'Tokens', 'Connections', 'Sources']) assert(nav.includes(here), `${here} missing from the admin nav: ${nav}`);
  assert(await page.locator('[data-tenant-banner]').count() === 0, 'a tenant banner for the admin token');
});
