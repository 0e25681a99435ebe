// herald's consumer portal in headless Chromium, driven by playwright-core
// against a real `herald serve` (started by cmd/herald/ui_browser_test.go,
// TestPortalBrowser, which passes everything through the environment):
//
//   HERALD_URL         http://127.0.0.1:port of the node
//   HERALD_TOKEN       its admin token
//   HERALD_BIN         the herald binary (links are made with
//                      `herald portal create`, events published with
//                      `herald events publish`)
//   RECEIVER_URL       a receiver endpoint; RECEIVER_URL/control?fail=1|0 makes it fail
//   EMBED_ALLOWED_URL  a page on another port, listed in --portal-frame-ancestors;
//                      /?src=<url> embeds <url> in an iframe
//   EMBED_BLOCKED_URL  the same on a port that is not listed
//   SHOTS              directory for screenshots
//   CHROMIUM           Chromium executable (default /usr/bin/chromium)
//
// Tenant acme gets the portal; tenant globex's data must stay out of reach.
// Prints "OK <n> screenshots" on success; any failure exits non-zero with
// the step that failed.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { env, log, assert, begin, until, api, receiverSwitch, screenshots, launch, runFlow, fitsOn } from './lib.mjs';

const BASE = env('HERALD_URL');
const TOKEN = env('HERALD_TOKEN');
const BIN = env('HERALD_BIN');
const RECEIVER = env('RECEIVER_URL');
const EMBED_ALLOWED = env('EMBED_ALLOWED_URL');
const EMBED_BLOCKED = env('EMBED_BLOCKED_URL');
const SHOTS = env('SHOTS');

const apiCall = api(BASE, TOKEN);
const receiverFail = receiverSwitch(RECEIVER);
const { shot, shots } = screenshots(SHOTS);

// herald runs a client command as the admin and returns its last JSON line.
function herald(...args) {
  const r = spawnSync(BIN, [...args, '--server', BASE, '--token', TOKEN, '--json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`herald ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const work = mkdtempSync(join(tmpdir(), 'herald-portal-'));
const logoFile = join(work, 'logo.svg');
writeFileSync(logoFile, '<svg xmlns="http://www.w3.org/2000/svg" width="112" height="24" viewBox="0 0 112 24"><rect width="24" height="24" rx="6" fill="#b3261e"/><text x="30" y="18" font-size="16" font-family="sans-serif">Example</text></svg>');
const ACCENT = '#b3261e';
const portalLink = (...extra) => herald('portal', 'create', '--tenant', 'acme', '--name', 'Example Corp', '--accent', ACCENT, '--logo', logoFile, ...extra);

// deadDelivery publishes an acme event while the receiver fails and waits
// until its delivery is dead.
async function deadDelivery(subID) {
  await receiverFail(true);
  const ev = herald('events', 'publish', '--type', 'order.created', '--tenant', 'acme', '--data', '{"total":1}');
  let id;
  await until('a dead delivery', async () => {
    const list = await apiCall('GET', '/v1/deliveries?event_id=' + ev.id + '&subscription_id=' + subID);
    id = list.data.length && list.data[0].state === 'dead' ? list.data[0].id : undefined;
    return !!id;
  });
  await receiverFail(false);
  return { ev, id };
}

const context = await launch('herald-portal-chromium-');

// Pages must make no request to an origin of neither herald nor the
// embedding pages, log no unexpected error and throw nothing.
const problems = [];
const origins = [BASE, EMBED_ALLOWED, EMBED_BLOCKED].map((u) => new URL(u).origin);
function watch(page) {
  page.setDefaultTimeout(30000);
  page.on('request', (r) => {
    const u = r.url();
    if (!origins.some((o) => u.startsWith(o)) && !u.startsWith('data:')) problems.push('third-party request: ' + u);
  });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => {
    // Refusals the test provokes on purpose: 401 (used or expired link),
    // 403/404 (another tenant's data, admin routes) and the blocked frame.
    if (m.type() === 'error' && !/status of (401|403|404|409)|frame-ancestors|Refused to frame/.test(m.text())) problems.push('console error: ' + m.text());
  });
  page.on('dialog', (d) => d.accept());
  return page;
}
const page = watch(context.pages()[0] || await context.newPage());
const nav = (p, name) => p.locator('header nav').getByRole('link', { name, exact: true });

await runFlow({ context, page, shot, shots, problems, dir: SHOTS }, async () => {
  begin('tenant globex has data; tenant acme a subscription (as the admin)');
  const globex = await apiCall('POST', '/v1/tokens', { name: 'globex', tenant: 'globex', scopes: ['subscriptions:write', 'events:publish', 'deliveries:read'] });
  const subB = await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/hook', description: 'Globex secret endpoint' }, globex.token);
  assert(subB.tenant === 'globex', 'globex subscription: ' + JSON.stringify(subB));
  const evB = await apiCall('POST', '/v1/events', { type: 'invoice.paid', data: { total: 7 } }, globex.token);
  let dB;
  await until('globex delivery', async () => {
    const l = await apiCall('GET', '/v1/deliveries?event_id=' + evB.id);
    dB = l.data.length ? l.data[0].id : undefined;
    return !!dB;
  });
  const subA = await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/hook', description: 'Acme orders', tenant: 'acme' });

  begin('open a portal link made with `herald portal create`');
  const link = portalLink('--ttl', '1h');
  assert(link.url.startsWith(BASE + '/portal/#link='), 'portal url: ' + link.url);
  const resp = await page.goto(link.url);
  const csp = (await resp.allHeaders())['content-security-policy'];
  assert(csp.includes('frame-ancestors ' + new URL(EMBED_ALLOWED).origin), 'portal CSP frame-ancestors: ' + csp);
  await page.getByRole('heading', { name: 'Subscriptions' }).waitFor();
  assert(!page.url().includes('#') && !page.url().includes('link='), 'the link left the address bar: ' + page.url());
  assert((await page.evaluate(() => history.length)) >= 1, 'history');
  const session = await page.evaluate(() => sessionStorage.getItem('herald.portal.token'));
  assert(session && session.startsWith('hrld_'), 'session token in sessionStorage');
  assert(await page.evaluate(() => localStorage.length) === 0, 'nothing in localStorage');
  assert(await page.evaluate(() => sessionStorage.getItem('herald.token')) === null, 'no operator token');

  begin('theme: name, logo, accent colour');
  assert((await page.locator('header .brand').textContent()).includes('Example Corp'), 'name in the header');
  assert((await page.locator('header .brand img.logo').getAttribute('src')).startsWith('data:image/svg+xml;base64,'), 'logo');
  const accent = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--accent').trim());
  assert(accent.toLowerCase() === ACCENT, 'accent ' + accent);
  const buttonBg = await page.locator('.page-head .button').first().evaluate((el) => getComputedStyle(el).backgroundColor);
  assert(buttonBg === 'rgb(179, 38, 30)', 'buttons take the accent: ' + buttonBg);

  begin('only tenant pages: no overview, API, tokens or sign-in');
  const navText = (await page.locator('header nav a').allTextContents()).join('|');
  assert(navText === 'Subscriptions|Deliveries|Dead letters|Events', 'portal navigation: ' + navText);
  assert(await page.locator('#token').count() === 0, 'no token field');
  const listText = await page.locator('main').textContent();
  assert(listText.includes('Acme orders') && !listText.includes('Globex'), 'only acme subscriptions: ' + listText);
  // A left-out element must leave nothing behind: Element.append(null) prints "null".
  assert(!listText.includes('null'), 'a literal "null" on the subscriptions page: ' + listText);
  // The operator's tenant column, filter and form fields stay out of the portal.
  const headers = await page.locator('main th').allTextContents();
  assert(!headers.includes('Tenant') && await page.locator('[data-tenant-filter], [data-tenant]').count() === 0, 'tenant column or filter in the portal: ' + headers.join('|'));
  // The home's title is the brand once, not "Example Corp · Example Corp".
  assert(await page.title() === 'Example Corp', 'portal home title: ' + await page.title());
  await shot(page, '01-portal-subscriptions');

  // Issue 24 item 9: the exchange also set an HttpOnly cookie, so a portal
  // page opened in another tab (which has none of this tab's
  // sessionStorage) continues the session instead of "link expired".
  begin('the session cookie: HttpOnly, SameSite=Strict, /v1/, for the browser session');
  const cookies = (await context.cookies(BASE + '/v1/')).filter((c) => c.name === 'herald_portal');
  assert(cookies.length === 1, 'portal cookie: ' + JSON.stringify(await context.cookies()));
  const [ck] = cookies;
  assert(ck.value === session && ck.httpOnly && ck.sameSite === 'Strict' && ck.path === '/v1/' && ck.expires === -1 && !ck.secure,
    'portal cookie attributes: ' + JSON.stringify({ ...ck, value: '…' }));
  assert(await page.evaluate(() => document.cookie) === '', 'the cookie is readable by the page');

  begin('a portal page opened in a new tab continues the session');
  const tab2 = watch(await context.newPage());
  await tab2.goto(BASE + '/portal/subscriptions');
  await tab2.getByRole('heading', { name: 'Subscriptions' }).waitFor();
  await tab2.getByText('Acme orders').waitFor();
  assert(!(await tab2.locator('main').textContent()).includes('Globex'), 'globex in the new tab');
  assert(await tab2.evaluate(() => sessionStorage.getItem('herald.portal.token')) === null, 'the new tab holds a token');
  assert(await tab2.evaluate(() => localStorage.length) === 0, 'nothing in localStorage (new tab)');
  assert(!tab2.url().includes('hrld_') && !tab2.url().includes('#'), 'a token in the new tab\'s address: ' + tab2.url());
  // The same theme (GET /v1/portal/sessions/current), not herald's default.
  assert((await tab2.locator('header .brand').textContent()).includes('Example Corp'), 'name in the new tab\'s header');
  assert((await tab2.locator('header .brand img.logo').getAttribute('src')).startsWith('data:image/svg+xml;base64,'), 'logo in the new tab');
  const accent2 = await tab2.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--accent').trim());
  assert(accent2.toLowerCase() === ACCENT, 'new tab accent ' + accent2);
  assert(await tab2.title() === 'Subscriptions · Example Corp', 'new tab title: ' + await tab2.title());
  await shot(tab2, '01a-portal-new-tab');
  // Issue 24's done-when: the new tab at phone width too.
  await tab2.setViewportSize({ width: 390, height: 844 });
  await tab2.reload();
  await tab2.getByText('Acme orders').waitFor();
  assert(!(await tab2.locator('main').textContent()).includes('null'), 'a literal "null" in the new tab at 390 px');
  await fitsOn(tab2, 'the portal in a new tab at 390 px');
  await shot(tab2, '01c-phone-portal-new-tab');
  // A middle click on a link inside the portal opens a working tab too.
  const [tab3] = await Promise.all([context.waitForEvent('page'), nav(page, 'Deliveries').click({ button: 'middle' })]);
  watch(tab3);
  await tab3.getByRole('heading', { name: 'Deliveries' }).waitFor();
  assert(await tab3.locator('[data-portal-expired]').count() === 0, 'the middle-clicked tab shows the expired page');
  await tab3.close();

  begin('create a subscription; its secret is shown once, then revealed');
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByLabel('Endpoint URL').fill(RECEIVER + '/hook');
  assert(await page.locator('input[name=tenant], input[name=all_tenants]').count() === 0, 'tenant fields in the portal form');
  // Customers see no server flags or herald's reserved-header rules.
  const formText = await page.locator('main form').textContent();
  assert(!/--dev|--allow-private|herald-\*/.test(formText), 'operator text in the portal form: ' + formText);
  await page.getByLabel('Description').fill('Acme billing');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const firstSecret = await page.locator('.secret-box [data-secret]').textContent();
  const subID = decodeURIComponent(page.url().split('/').pop());
  const created = await apiCall('GET', '/v1/subscriptions/' + subID);
  assert(created.tenant === 'acme' && created.description === 'Acme billing', 'created for acme: ' + JSON.stringify(created));
  await page.reload();
  await page.getByRole('button', { name: 'Reveal secret' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  assert(await page.locator('.secret-box [data-secret]').textContent() === firstSecret, 'revealed secret');

  begin('the customer sees how to verify signatures, in five languages, without the secret');
  const verify = page.locator('[data-verify=webhook]');
  await verify.getByRole('heading', { name: 'Verify signatures' }).waitFor();
  for (const [label, line] of [['Go', 'os.Getenv("HERALD_WEBHOOK_SECRET")'], ['Node', 'new Webhook(process.env.HERALD_WEBHOOK_SECRET)'],
    ['Python', 'from standardwebhooks.webhooks import Webhook'], ['Ruby', 'StandardWebhooks::Webhook.new(secret)'], ['PHP', 'new \\StandardWebhooks\\Webhook($secret)']]) {
    await verify.getByRole('tab', { name: label, exact: true }).click();
    await until(label + ' snippet', async () => (await verify.locator('[data-snippet]').textContent()).includes(line), 5000, 100);
  }
  assert(!(await verify.textContent()).includes(firstSecret), 'the secret is in the verify panel');
  await verify.getByRole('button', { name: 'Copy' }).waitFor();
  await verify.scrollIntoViewIfNeeded();
  await shot(page, '01b-portal-verify');

  begin('rotate the secret, send a test event');
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  await until('a new secret', async () => (await page.locator('.secret-box [data-secret]').textContent()) !== firstSecret, 10000);
  const rotated = await page.locator('.secret-box [data-secret]').textContent();
  assert((await apiCall('GET', '/v1/subscriptions/' + subID + '/secret')).secret === rotated, 'rotated secret shown');
  await page.getByRole('button', { name: 'Send test event' }).click();
  await page.locator('.test-result .attempt').getByText('HTTP 200').waitFor({ timeout: 25000 });
  await shot(page, '02-portal-subscription');

  begin('edit, disable and enable');
  await page.getByLabel('Description').fill('Acme billing v2');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await until('the edit to be saved', async () => (await apiCall('GET', '/v1/subscriptions/' + subID)).description === 'Acme billing v2', 10000);
  await page.getByRole('button', { name: 'Disable' }).click();
  await page.getByRole('button', { name: 'Enable' }).waitFor();
  assert((await apiCall('GET', '/v1/subscriptions/' + subID)).state === 'disabled', 'disabled');
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByRole('button', { name: 'Disable' }).waitFor();

  begin('deliveries with attempts; retry one');
  const dead1 = await deadDelivery(subA.id);
  await nav(page, 'Deliveries').click();
  await page.getByRole('heading', { name: 'Deliveries' }).waitFor();
  await page.locator(`a[href$="/deliveries/${dead1.id}"]`).first().click();
  await page.getByRole('heading', { name: /^Attempts/ }).waitFor();
  assert(await page.locator('.attempt').count() === 3, 'three attempts');
  await shot(page, '03-portal-delivery');
  await page.getByRole('button', { name: 'Retry now' }).click();
  await page.getByText('Sent back to tier 0').waitFor();
  // The delivery page reloads itself 1.5 s after a retry; leaving it
  // first must cancel that (a regression pulled users back to it). This
  // waits past the reload on purpose: it proves something does not happen.
  await Promise.all([page.waitForURL(/\/portal\/subscriptions$/), nav(page, 'Subscriptions').click()]);
  await page.waitForTimeout(2500);
  assert(/\/portal\/subscriptions$/.test(page.url()), 'a retried delivery\'s page pulled the user back: ' + page.url());
  await until('the retry to deliver', async () => (await apiCall('GET', '/v1/deliveries/' + dead1.id)).state === 'delivered');

  begin('dead letters: redrive');
  const dead2 = await deadDelivery(subA.id);
  await nav(page, 'Dead letters').click();
  // Acme billing (no event-type filter either) has dead letters too: redrive Acme orders'.
  await page.getByRole('row', { name: /Acme orders/ }).getByRole('button', { name: 'Redrive…' }).click();
  await page.getByRole('button', { name: 'Check how many' }).click();
  await page.locator('.confirm [data-matched="1"]').waitFor();
  await page.getByRole('button', { name: 'Redrive 1' }).click();
  await page.getByText('Redriven 1.').waitFor();
  await until('the redriven delivery to be delivered', async () => (await apiCall('GET', '/v1/deliveries/' + dead2.id)).state === 'delivered');
  await shot(page, '04-portal-dead-letters');

  begin('events: acme only');
  await Promise.all([page.waitForURL(/\/portal\/events$/), nav(page, 'Events').click()]);
  await page.getByText(dead2.ev.id).first().waitFor();
  assert(!(await page.locator('main').textContent()).includes(evB.id), 'globex event not listed');
  await shot(page, '05-portal-events');

  begin('the portal\'s lists fit 1280 px and a phone (390 px)');
  const fits = async (what) => {
    const r = await page.evaluate(() => ({
      page: [document.documentElement.scrollWidth, window.innerWidth],
      boxes: [...document.querySelectorAll('header nav, .table-wrap')].map((t) => [t.className || t.tagName, t.scrollWidth, t.clientWidth]),
    }));
    assert(r.page[0] <= r.page[1] + 1, `${what} is ${r.page[0]}px wide at ${r.page[1]}px`);
    for (const [n, sw, cw] of r.boxes) assert(sw <= cw + 1, `${what}: ${n} is ${sw}px in ${cw}px`);
  };
  for (const path of ['subscriptions', 'deliveries', 'events', 'dead-letters']) {
    await page.goto(BASE + '/portal/' + path);
    await page.locator('tbody tr').first().waitFor();
    await fits('/portal/' + path + ' at 1280 px');
    // Element.append(null) prints "null" (issue 24 item 2, then Dead letters).
    assert(!(await page.locator('main').textContent()).includes('null'), 'a literal "null" on /portal/' + path);
  }
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [path, name] of [['subscriptions', '10-phone-portal-subscriptions'], ['deliveries', '11-phone-portal-deliveries'], ['events', '12-phone-portal-events'], ['subscriptions/' + subID, '13-phone-portal-subscription'],
    ['dead-letters', '14-phone-portal-dead-letters'], ['deliveries/' + dead1.id, '15-phone-portal-delivery'], ['subscriptions/new', '16-phone-portal-subscription-new']]) {
    await page.goto(BASE + '/portal/' + path);
    await page.locator('tbody tr, form, .attempt').first().waitFor();
    await fits('/portal/' + path + ' at 390 px');
    if (!path.includes('/')) assert(!(await page.locator('main').textContent()).includes('null'), 'a literal "null" on /portal/' + path + ' at 390 px');
    await shot(page, name);
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  begin('another tenant\'s pages are not found');
  for (const path of ['subscriptions/' + subB.id, 'deliveries/' + dB, 'events/' + evB.id]) {
    await page.goto(BASE + '/portal/' + path);
    await page.locator('main .error').getByText('not_found').waitFor();
    assert(!(await page.locator('main').textContent()).includes('Globex secret endpoint'), path + ' leaked');
  }
  await shot(page, '06-portal-other-tenant');
  for (const path of ['api', 'tokens', 'sign-in', '']) {
    await page.goto(BASE + '/portal/' + path);
    await page.locator('main h1').first().waitFor();
    assert(await page.locator('#token').count() === 0 && await page.locator('svg.chart').count() === 0, '/portal/' + path + ' shows admin content');
    const t = (await page.locator('header nav a').allTextContents()).join('|');
    assert(t === 'Subscriptions|Deliveries|Dead letters|Events', '/portal/' + path + ' navigation: ' + t);
  }
  await page.goto(BASE + '/portal/tokens');
  await page.getByRole('heading', { name: 'Not found' }).waitFor();
  assert(await page.locator('[data-revoke], input[name=scope]').count() === 0, 'the portal shows the Tokens page');

  begin('the session, used from the page: another tenant 404, admin 403');
  const answers = await page.evaluate(async ([subB, dB, evB]) => {
    const token = sessionStorage.getItem('herald.portal.token');
    const call = async (method, path, body) => (await fetch(path, {
      method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    })).status;
    return {
      sub: await call('GET', '/v1/subscriptions/' + subB),
      patch: await call('PATCH', '/v1/subscriptions/' + subB, { state: 'disabled' }),
      secret: await call('GET', '/v1/subscriptions/' + subB + '/secret'),
      delivery: await call('GET', '/v1/deliveries/' + dB),
      retry: await call('POST', '/v1/deliveries/' + dB + '/retry'),
      event: await call('GET', '/v1/events/' + evB),
      tokens: await call('GET', '/v1/tokens'),
      stats: await call('GET', '/v1/stats'),
      portal: await call('POST', '/v1/tenants/globex/portal', {}),
      publish: await call('POST', '/v1/events', { type: 'x' }),
      otherList: await call('GET', '/v1/subscriptions?tenant=globex'),
    };
  }, [subB.id, dB, evB.id]);
  const want = { sub: 404, patch: 404, secret: 404, delivery: 404, retry: 404, event: 404, tokens: 403, stats: 403, portal: 403, publish: 403, otherList: 403 };
  assert(JSON.stringify(answers) === JSON.stringify(want), 'session answers ' + JSON.stringify(answers));
  assert((await apiCall('GET', '/v1/subscriptions/' + subB.id)).state === 'enabled', 'globex subscription unchanged');

  // Scoped sign-in (issue 24): the operator dashboard takes any valid
  // token and shows what it allows; a portal session is a tenant token, so
  // it gets its tenant's banner and no admin page, nothing more.
  begin('the operator dashboard shows the portal session as a tenant token');
  await page.goto(BASE + '/ui/');
  await page.locator('#token').fill(session);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('[data-tenant-banner="acme"]').waitFor();
  const opNav = (await page.locator('header nav a').allTextContents()).map((x) => x.trim());
  for (const gone of ['Overview', 'Tokens', 'Connections', 'Sources']) assert(!opNav.includes(gone), gone + ' offered to a portal session: ' + opNav);
  await page.goto(BASE + '/ui/tokens');
  await page.locator('[data-forbidden]').waitFor();
  await page.evaluate(() => sessionStorage.removeItem('herald.token'));

  begin('End session revokes the session on the server');
  await page.goto(BASE + '/portal/');
  await page.getByRole('heading', { name: 'Subscriptions' }).waitFor();
  await page.getByRole('button', { name: 'End session' }).click();
  await page.locator('[data-portal-expired]').getByRole('heading', { name: 'Session ended' }).waitFor();
  await page.locator('[data-portal-expired]').getByText('no longer works anywhere').waitFor();
  assert(await page.evaluate(() => sessionStorage.getItem('herald.portal.token')) === null, 'the session is still in sessionStorage');
  for (const path of ['/v1/subscriptions', '/v1/subscriptions/' + subA.id, '/v1/deliveries', '/v1/events']) {
    const r = await fetch(BASE + path, { headers: { Authorization: 'Bearer ' + session } });
    assert(r.status === 401, 'the ended session still works on ' + path + ': ' + r.status);
  }
  await shot(page, '06b-portal-session-ended');
  // The other tab used the same session by its cookie, which End session
  // cleared: reloaded, it is not signed in.
  assert((await context.cookies()).every((c) => c.name !== 'herald_portal'), 'the portal cookie survived End session');
  await tab2.reload();
  await tab2.locator('[data-portal-expired]').waitFor();
  assert(await tab2.locator('header nav').count() === 0, 'the other tab still shows the portal');
  await shot(tab2, '06c-portal-other-tab-after-end');
  await tab2.close();

  begin('the same link again is refused (new tab)');
  const replay = watch(await context.newPage());
  await replay.goto(link.url);
  await replay.locator('[data-portal-expired]').getByText('expired or was already used').waitFor();
  assert(await replay.locator('#token').count() === 0, 'no token field on the expired page');
  assert(await replay.evaluate(() => sessionStorage.getItem('herald.portal.token')) === null, 'no session');
  await shot(replay, '07-portal-replayed');
  await replay.close();

  begin('an expired link is refused');
  const short = portalLink('--ttl', '1s');
  await until('the link to expire', async () => Date.now() > Date.parse(short.expires_at) + 50, 5000, 50);
  const late = watch(await context.newPage());
  await late.goto(short.url);
  await late.locator('[data-portal-expired]').waitFor();
  await late.close();

  begin('embedded in an iframe by an allowed origin');
  const embedded = portalLink();
  const host = watch(await context.newPage());
  await host.goto(EMBED_ALLOWED + '/?src=' + encodeURIComponent(embedded.url));
  const frame = host.frameLocator('iframe');
  await frame.getByRole('heading', { name: 'Subscriptions' }).waitFor();
  await frame.getByText('Acme billing v2').waitFor();
  await shot(host, '08-portal-iframe-allowed');

  begin('an origin that is not listed cannot embed it');
  const blockedLink = portalLink();
  await host.goto(EMBED_BLOCKED + '/?src=' + encodeURIComponent(blockedLink.url));
  await until('the iframe to be refused', async () => {
    const child = host.frames().find((f) => f !== host.mainFrame());
    return child && !child.url().startsWith(BASE);
  }, 10000, 100);
  assert(await host.frameLocator('iframe').locator('header nav').count() === 0, 'the blocked frame rendered the portal');
  await shot(host, '09-portal-iframe-blocked');
  // The refused frame never ran the page, so its link is still unused.
  const still = await fetch(BASE + '/v1/portal/sessions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ link: blockedLink.url.split('#link=')[1] }) });
  assert(still.status === 200, 'a blocked frame consumed its link: ' + still.status);
  await host.close();
});
