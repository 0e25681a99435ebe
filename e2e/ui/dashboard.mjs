// herald's dashboard in headless Chromium, driven by playwright-core against
// a real `herald serve` (started by cmd/herald/ui_browser_test.go, which
// passes everything through the environment):
//
//   HERALD_URL      http://127.0.0.1:port of the node
//   HERALD_TOKEN    its admin token
//   HERALD_BIN      the herald binary (the flow publishes with
//                   `herald events publish`)
//   RECEIVER_URL    a receiver endpoint; RECEIVER_URL/control?fail=1|0 makes it fail
//   SHOTS           directory for screenshots
//   CHROMIUM        Chromium executable (default /usr/bin/chromium)
//   OVERVIEW_SHOT   optional: also save the 1280 px overview here
//
// Prints "OK <n> screenshots" on success; any failure exits non-zero with
// the step that failed.

import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { env, log, assert, begin, until, api, receiverSwitch, screenshots, launch, runFlow } from './lib.mjs';

const BASE = env('HERALD_URL');
const TOKEN = env('HERALD_TOKEN');
const BIN = env('HERALD_BIN');
const RECEIVER = env('RECEIVER_URL');
const SHOTS = env('SHOTS');

const apiCall = api(BASE, TOKEN);
const receiverFail = receiverSwitch(RECEIVER);
const { shot, shots } = screenshots(SHOTS);

// Events are published through the CLI, as a user would
// (`herald events publish … --json` prints the API's answer on one line).
async function publish(type, data, key) {
  const args = ['events', 'publish', '--server', BASE, '--token', TOKEN, '--type', type, '--data', JSON.stringify(data), '--json'];
  if (key) args.push('--key', key);
  const r = spawnSync(BIN, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`herald events publish exited ${r.status}: ${r.stderr}${r.stdout}`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert(typeof out.id === 'string' && typeof out.deliveries === 'number', 'herald events publish --json answered ' + r.stdout);
  return out;
}

const context = await launch('herald-ui-chromium-');
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);

// The page must make no request to another origin, log no error and throw
// nothing; each of these fails the run at the end.
const problems = [];
const origin = new URL(BASE).origin;
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(origin) && !u.startsWith('data:')) problems.push('third-party request: ' + u);
});
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
page.on('console', (m) => {
  // 401s and 404s the test provokes on purpose show up as resource errors.
  if (m.type() === 'error' && !/status of (400|401|404|409|422)/.test(m.text())) problems.push('console error: ' + m.text());
});
page.on('dialog', (d) => d.accept());
const nav = (name) => page.locator('header nav').getByRole('link', { name, exact: true });

// fits checks that the page, its header tabs and every table fit the window
// without sideways scrolling (a table's own scrollbar hides its last
// columns: the Created time at 1280 px).
async function fits(what) {
  const r = await page.evaluate(() => ({
    page: [document.documentElement.scrollWidth, window.innerWidth],
    nav: [...document.querySelectorAll('header nav')].map((n) => [n.scrollWidth, n.clientWidth]),
    tables: [...document.querySelectorAll('.table-wrap')].map((t) => [t.scrollWidth, t.clientWidth]),
  }));
  assert(r.page[0] <= r.page[1] + 1, `${what} is ${r.page[0]}px wide at ${r.page[1]}px`);
  for (const [sw, cw] of r.nav) assert(sw <= cw + 1, `${what}: the tabs are ${sw}px in ${cw}px`);
  for (const [sw, cw] of r.tables) assert(sw <= cw + 1, `${what}: a table is ${sw}px in ${cw}px (its last columns are hidden)`);
}

// SNIPPETS are a line of each language's verification snippet: the
// library's own API names, the secret read from HERALD_WEBHOOK_SECRET.
const SNIPPETS = {
  go: 'standardwebhooks.NewWebhook(secret)',
  node: 'new Webhook(process.env.HERALD_WEBHOOK_SECRET)',
  python: 'Webhook(os.environ["HERALD_WEBHOOK_SECRET"])',
  ruby: 'StandardWebhooks::Webhook.new(secret)',
  php: 'new \\StandardWebhooks\\Webhook($secret)',
};
const INSTALL = {
  go: 'go get github.com/standard-webhooks/standard-webhooks/libraries/go',
  node: 'npm install standardwebhooks',
  python: 'pip install standardwebhooks',
  ruby: 'gem install standardwebhooks',
  php: 'composer require standard-webhooks/standard-webhooks',
};
const LABELS = { go: 'Go', node: 'Node', python: 'Python', ruby: 'Ruby', php: 'PHP' };

// checkVerifyPanel clicks through the panel's languages: each shows its
// snippet and install command, never the secret.
async function checkVerifyPanel(type, secret) {
  const panel = page.locator(`[data-verify=${type}]`);
  await panel.getByRole('heading', { name: 'Verify signatures' }).waitFor();
  for (const [lang, line] of Object.entries(SNIPPETS)) {
    await panel.getByRole('tab', { name: LABELS[lang], exact: true }).click();
    await panel.locator(`[data-snippet][data-lang=${lang}]`).waitFor();
    const code = await panel.locator('[data-snippet]').textContent();
    assert(code.includes(line), `${lang} snippet lacks ${line}: ${code}`);
    assert(code.includes('HERALD_WEBHOOK_SECRET'), `${lang} snippet does not read HERALD_WEBHOOK_SECRET: ${code}`);
    assert(await panel.getByRole('tab', { name: LABELS[lang], exact: true }).getAttribute('aria-selected') === 'true', lang + ' tab selected');
    const install = await panel.locator('[data-install]').textContent();
    assert(install === INSTALL[lang], `${lang} install command: ${install}`);
  }
  assert(!(await panel.textContent()).includes(secret), 'the secret itself is in the verify panel');
  assert(!(await panel.textContent()).includes('whsec_'), 'a secret in the verify panel');
}

await runFlow({ context, page, shot, shots, problems, dir: SHOTS }, async () => {
  begin('root redirects to the dashboard; sign-in refuses a bad token');
  const resp = await page.goto(BASE + '/');
  assert(page.url() === BASE + '/ui/', 'landed on ' + page.url());
  const csp = (await resp.allHeaders())['content-security-policy'];
  assert(csp && csp.includes("frame-ancestors 'none'"), 'CSP header on the dashboard: ' + csp);
  await page.locator('#token').fill('not-the-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('.error').getByText('refused this token').waitFor();
  await shot(page, '01-sign-in');

  begin('sign in');
  await page.locator('#token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.locator('.card').first().waitFor();
  assert(await page.evaluate(() => sessionStorage.getItem('herald.token')) === TOKEN, 'token kept in sessionStorage');
  assert(await page.evaluate(() => localStorage.length) === 0, 'nothing in localStorage');

  begin('subscriptions: empty state, then create one with a filter and test the filter');
  await nav('Subscriptions').click();
  await page.getByText('No subscriptions yet.').waitFor();
  await shot(page, '02-subscriptions-empty');
  await page.getByRole('link', { name: 'Create the first subscription' }).click();
  await page.getByRole('heading', { name: 'New subscription' }).waitFor();
  await page.getByLabel('Endpoint URL').fill(RECEIVER + '/hook');
  await page.getByLabel('Description').fill('Order webhooks');
  await page.getByLabel('Event types').fill('order.*');
  // An expression with Language "No filter" is refused at the field, not
  // dropped (the subscription would receive every event).
  await page.getByLabel('Expression').fill('data.total > 100');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.field-error').getByText('choose the filter\'s language').waitFor();
  assert(await page.getByLabel('Language').getAttribute('aria-invalid') === 'true', 'Language marked invalid');
  assert((await apiCall('GET', '/v1/subscriptions')).data.length === 0, 'nothing created for an expression without a language');
  await shot(page, '03b-subscription-no-language');
  await page.getByLabel('Language').selectOption('cel');
  // The API's error shows beside the field it names.
  await page.getByLabel('Endpoint URL').fill('ftp://example.com/hook');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('input[name=url][aria-invalid=true] ~ .field-error').waitFor();
  assert(await page.locator('.field-error').count() === 1 && await page.getByLabel('Language').getAttribute('aria-invalid') === null, 'only the named field is marked');
  assert((await apiCall('GET', '/v1/subscriptions')).data.length === 0, 'nothing created for a refused URL');
  await shot(page, '03a-subscription-field-error');
  await page.getByLabel('Endpoint URL').fill(RECEIVER + '/hook');
  // An invalid event type pattern (API field event_types[0]) shows right
  // under its own field, which is marked (issue 24), not far below the form.
  const typesInput = page.locator('input[name=event_types]');
  const typesBefore = await typesInput.inputValue();
  await typesInput.fill('order.[ab]');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const typesError = page.locator('input[name=event_types][aria-invalid=true] ~ .field-error');
  await typesError.getByText('character classes').waitFor();
  const [tb, eb] = [await typesInput.boundingBox(), await typesError.boundingBox()];
  assert(eb.y >= tb.y && eb.y - (tb.y + tb.height) < 60, 'the pattern error is not beside its field: ' + JSON.stringify([tb, eb]));
  assert(await page.locator('.field-error').count() === 1, 'only the event types field is marked');
  await typesInput.fill(typesBefore);
  await page.getByLabel('Timeout (ms)').fill('5000');
  await page.getByLabel('Extra headers').fill('x-tenant: acme');
  const testEvent = page.locator('textarea[name=test_event]');
  // A tester error belongs to the event it was run on: a new event clears it (issue 24).
  await testEvent.fill('{"data": {}}');
  await page.getByRole('button', { name: 'Test filter' }).click();
  await page.locator('.filter-result .error').getByText('missing_field').waitFor();
  await testEvent.fill('{"type": "order.created", "data": {"total": 120}}');
  await page.locator('.filter-result .error').waitFor({ state: 'detached' });
  await page.getByRole('button', { name: 'Test filter' }).click();
  await page.locator('[data-matched=true]').waitFor();
  await testEvent.fill('{"type": "order.created", "data": {"total": 5}}');
  await page.getByRole('button', { name: 'Test filter' }).click();
  await page.locator('[data-matched=false]').getByText('filter does not match').waitFor();
  await page.getByLabel('Expression').fill('data.total >');
  await page.getByRole('button', { name: 'Test filter' }).click();
  await page.locator('.filter-result .error').getByText('invalid_filter').waitFor();
  // CEL syntax errors say where and what in words, not the parser's tokens (issue 24).
  await page.locator('.filter-result .error').getByText('line 1, column 13: syntax error: the expression ends too early').waitFor();
  assert(!(await page.locator('.filter-result').textContent()).includes('mismatched input'), 'raw parser text in the tester');
  await page.getByLabel('Expression').fill('data.total > 100');
  await shot(page, '03-subscription-new');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const firstSecret = await page.locator('.secret-box [data-secret]').textContent();
  assert(firstSecret.startsWith('whsec_'), 'secret shown once after create: ' + firstSecret);
  const subID = decodeURIComponent(page.url().split('/').pop());
  const sub = await apiCall('GET', '/v1/subscriptions/' + subID);
  assert(sub.filter && sub.filter.cel === 'data.total > 100' && sub.headers['x-tenant'] === 'acme' && sub.timeout_ms === 5000, 'created as filled in: ' + JSON.stringify(sub));
  await shot(page, '04-subscription-created');

  begin('the subscription page shows how to verify signatures, per language, with a copy button');
  await checkVerifyPanel('webhook', firstSecret);
  const verify = page.locator('[data-verify=webhook]');
  await verify.getByRole('tab', { name: 'Python', exact: true }).click();
  assert((await verify.textContent()).includes('Verify the raw body'), 'webhook wording');
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  await verify.getByRole('button', { name: 'Copy' }).click();
  await verify.getByRole('button', { name: 'Copied' }).waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert(copied === await verify.locator('[data-snippet]').textContent() && copied.includes(SNIPPETS.python), 'the copy button copies the snippet: ' + copied);
  await verify.scrollIntoViewIfNeeded();
  await shot(page, '04b-subscription-verify');

  begin('publish an event and watch its delivery appear');
  const ok = await publish('order.created', { total: 150, currency: 'EUR' }, 'cust-1');
  assert(ok.deliveries === 1, 'one delivery: ' + JSON.stringify(ok));
  await nav('Events').click();
  await page.getByRole('heading', { name: 'Events' }).waitFor();
  await page.getByText(ok.id).first().waitFor();
  await fits('the events list at 1280 px');
  await shot(page, '05-events');
  await page.getByRole('link', { name: ok.id }).first().click();
  await page.getByRole('heading', { name: 'Payload' }).waitFor();
  // The page follows running deliveries by itself: no reload.
  await page.locator('table .badge', { hasText: 'delivered' }).waitFor();
  await fits('the event page at 1280 px');
  // Ids are cut short in a table but whole in their title and text.
  const idCode = page.locator('tbody code.id').first();
  assert((await idCode.getAttribute('title')) === (await idCode.textContent()), 'an id cell keeps the whole id');
  assert(await idCode.evaluate((el) => el.scrollWidth > el.clientWidth), 'a long id is cut short in the table');
  await shot(page, '06-event-detail');

  begin('events search by type and key');
  await publish('order.cancelled', { total: 999 }, 'cust-2');
  await nav('Events').click();
  await page.getByLabel('Type').fill('order.cancelled');
  await page.getByRole('button', { name: 'Search' }).click();
  await until('the search to show one event', async () => (await page.locator('tbody tr').count()) === 1 && page.url().includes('type=order.cancelled'));
  await page.getByLabel('Key').fill('nobody');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.getByText('No event matches this search.').waitFor();

  begin('a failing receiver: the delivery dies; read its attempts');
  await receiverFail(true);
  const bad = await publish('order.created', { total: 500 }, 'cust-3');
  await nav('Deliveries').click();
  await page.getByLabel('State').selectOption('dead');
  await page.getByRole('button', { name: 'Filter' }).click();
  // The list refreshes by itself.
  await until('a dead delivery to be listed', async () => (await page.locator('tbody tr').count()) === 1 && page.url().includes('state=dead'));
  await fits('the deliveries list at 1280 px');
  const created = await page.locator('thead th', { hasText: 'Created' }).boundingBox();
  assert(created && created.x + created.width <= 1280, 'the Created column is in the window: ' + JSON.stringify(created));
  assert((await page.locator('tbody tr').first().textContent()).includes('Order webhooks'), 'the list names the subscription by its description');
  await shot(page, '07-deliveries-dead');
  await page.locator('tbody tr a[href*="/deliveries/"]').first().click();
  await page.getByRole('heading', { name: /^Attempts/ }).waitFor();
  const attempts = page.locator('.attempt');
  assert(await attempts.count() === 3, 'three attempts, one per tier: ' + await attempts.count());
  assert((await attempts.first().textContent()).includes('HTTP 503'), 'status shown');
  assert((await attempts.first().textContent()).includes('http_status'), 'error class shown');
  assert((await attempts.first().locator('.response pre').textContent()).includes('down for maintenance'), 'response excerpt shown');
  const deadURL = page.url();
  const deadID = decodeURIComponent(deadURL.split('/').pop());
  const deadDelivery = await apiCall('GET', '/v1/deliveries/' + deadID);
  assert(deadDelivery.event_id === bad.id, 'the dead delivery is the failing event\'s');

  begin('an attempt shows the headers it stored, sent and received, at 1280×800 and 390×844');
  // Stored per attempt (issue 24 item 17), not rebuilt from the
  // subscription: each attempt has its own herald-attempt, and no
  // "rebuilt" request is shown.
  assert(deadDelivery.attempts.every((a, i) => a.request_headers && a.request_headers['herald-attempt'] === String(i + 1) && !a.request),
    'stored request headers per attempt: ' + JSON.stringify(deadDelivery.attempts));
  for (const [width, height, name] of [[1280, 800, '08-delivery-attempts'], [390, 844, '08a-delivery-attempts-phone']]) {
    await page.setViewportSize({ width, height });
    const second = attempts.nth(1);
    for (const cls of ['request-headers', 'response-headers']) {
      const d = second.locator('details.' + cls);
      if (await d.getAttribute('open') === null) await d.locator('summary').click();
    }
    const sent = await second.locator('details.request-headers table.headers').textContent();
    assert(sent.includes('v1,***') && sent.includes('x-tenant') && sent.includes('herald-attempt2'), 'request headers as sent, signature masked: ' + sent);
    assert(!sent.includes('rebuilt') && await page.locator('details.rebuilt').count() === 0, 'no rebuilt request for stored attempts');
    const got = await second.locator('details.response-headers table.headers').textContent();
    assert(got.includes('date') && got.includes('content-type'), 'response headers as received: ' + got);
    // Full-page shots: from the top, so the sticky header stays on top.
    await page.evaluate(() => window.scrollTo(0, 0));
    await fits(`the delivery page at ${width} px`);
    await shot(page, name);
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  begin('redrive the dead letter with confirmation and progress; it is delivered');
  await receiverFail(false);
  await nav('Dead letters').click();
  await page.getByRole('button', { name: 'Redrive…' }).waitFor();
  await shot(page, '09-dead-letters');
  await page.getByRole('button', { name: 'Redrive…' }).click();
  await page.getByRole('button', { name: 'Check how many' }).click();
  await page.locator('.confirm [data-matched="1"]').waitFor();
  await shot(page, '10-redrive-confirm');
  await page.getByRole('button', { name: 'Redrive 1' }).click();
  await page.getByText('Redriven 1.').waitFor();
  await page.getByText('No dead letters.').waitFor();
  await page.goto(deadURL);
  await until('the redriven delivery to be delivered', async () => {
    await page.reload();
    await page.getByRole('heading', { name: /^Attempts/ }).waitFor();
    return (await page.locator('.facts .badge', { hasText: 'delivered' }).count()) === 1;
  });
  assert(await page.locator('.attempt').count() === 4, 'a fourth, successful attempt');
  await shot(page, '11-delivery-redriven');

  begin('retry a finished delivery from its page');
  await page.getByRole('button', { name: 'Retry now' }).click();
  await page.getByText('Sent back to tier 0').waitFor();
  await until('a fifth attempt', async () => (await apiCall('GET', '/v1/deliveries/' + deadID)).attempts.length === 5);
  await page.locator('.attempt').nth(4).waitFor();

  begin('resend an event to a subscription from its page');
  await page.goto(BASE + '/ui/events/' + encodeURIComponent(ok.id));
  await page.getByRole('heading', { name: 'Payload' }).waitFor();
  await page.getByLabel('Resend to…').selectOption(subID);
  await fits('the event page with its resend control at 1280 px');
  await page.getByRole('button', { name: 'Resend', exact: true }).click();
  await page.locator('.notice').getByText('Resent as a new delivery').waitFor();
  // The page reloads its deliveries and follows the new one.
  await until('the resent delivery to be delivered', async () =>
    (await page.locator('tbody tr').count()) === 2 && (await page.locator('table .badge', { hasText: 'delivered' }).count()) === 2);
  await shot(page, '11a-event-resent');

  begin('replay the subscription\'s past events: a dry-run count, then confirm');
  await page.goto(BASE + '/ui/subscriptions/' + encodeURIComponent(subID));
  await page.getByRole('button', { name: 'Replay…' }).click();
  await page.getByRole('heading', { name: 'Replay past events' }).waitFor();
  await page.getByRole('button', { name: 'Check how many' }).click();
  const matchedEl = page.locator('.confirm [data-matched]');
  await matchedEl.waitFor();
  const matched = Number(await matchedEl.getAttribute('data-matched'));
  const win = await page.evaluate(() => ({
    since: new Date(document.querySelector('input[name=since]').value).toISOString(),
    until: new Date(document.querySelector('input[name=until]').value).toISOString(),
  }));
  const dry = await apiCall('POST', '/v1/subscriptions/' + subID + '/replay', { ...win, dry_run: true });
  assert(matched === dry.matched && matched >= 2, `the form counted ${matched}, the API ${dry.matched}`);
  const before = (await apiCall('GET', '/v1/deliveries?subscription_id=' + subID + '&limit=1000')).data.length;
  assert(before > 0, 'deliveries before the replay');
  await fits('the replay confirmation at 1280 px');
  await shot(page, '12c-replay-confirm');
  await page.getByRole('button', { name: 'Replay ' + matched }).click();
  await page.locator('.notice').getByText(`Replayed ${matched} event`).waitFor();
  const after = (await apiCall('GET', '/v1/deliveries?subscription_id=' + subID + '&limit=1000')).data.length;
  assert(after === before + matched, `one new delivery per matched event: ${before} + ${matched} != ${after}`);
  await shot(page, '12d-replayed');
  // A window wider than 31 days shows the API's error beside its field.
  await page.locator('input[name=since]').fill('2020-01-01T00:00');
  await page.getByRole('button', { name: 'Check how many' }).click();
  await page.locator('input[name=until][aria-invalid=true] ~ .field-error').getByText('31 days').waitFor();
  await page.getByRole('button', { name: 'Close' }).click();

  begin('rotate the secret (shown once) and send a test event');
  await page.goto(BASE + '/ui/subscriptions/' + encodeURIComponent(subID));
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const newSecret = await page.locator('.secret-box [data-secret]').textContent();
  const secrets = await apiCall('GET', '/v1/subscriptions/' + subID + '/secret');
  assert(newSecret !== firstSecret && secrets.secret === newSecret, 'rotated secret shown: ' + newSecret);
  await page.getByRole('button', { name: 'Reveal secret' }).click();
  await page.locator('.secret-box').getByText('shows it again').waitFor();
  assert(!(await page.locator('.secret-box').textContent()).includes('available later only'), 'a revealed secret does not say it is available only later');
  await shot(page, '12b-subscription-revealed');
  await page.getByRole('button', { name: 'Send test event' }).click();
  await page.locator('.test-result .attempt').getByText('HTTP 200').waitFor({ timeout: 25000 });
  await shot(page, '12-subscription-rotated-tested');

  begin('edit the subscription: drop the header, add a rate limit, disable and enable');
  await page.getByLabel('Extra headers').fill('');
  await page.getByLabel('Requests').fill('10');
  await page.getByLabel('per seconds').fill('1');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('form .notice').getByText('Saved.').waitFor();
  await shot(page, '12a-subscription-saved');
  await until('the edit to be saved', async () => {
    const s = await apiCall('GET', '/v1/subscriptions/' + subID);
    return !s.headers['x-tenant'] && s.rate_limit && s.rate_limit.max === 10;
  }, 10000);
  await page.getByRole('button', { name: 'Disable' }).click();
  await page.getByRole('button', { name: 'Enable' }).waitFor();
  assert((await apiCall('GET', '/v1/subscriptions/' + subID)).state === 'disabled', 'disabled');
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByRole('button', { name: 'Disable' }).waitFor();

  begin('subscriptions list shows state and success rate');
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'Order webhooks' }).waitFor();
  const rowText = await page.locator('tbody tr').first().textContent();
  assert(rowText.includes('enabled') && rowText.includes('%'), 'state and success rate: ' + rowText);
  await shot(page, '13-subscriptions');

  begin('endpoint health: a failing endpoint is auto-disabled (reason failing), its page says so; Enable resumes');
  // Its own rule: 3 failed attempts in a row, however short the streak
  // (the node's tiers are 0s,200ms,400ms: one event's three attempts).
  const sick = await apiCall('POST', '/v1/subscriptions', {
    url: RECEIVER + '/hook-partner', description: 'Partner endpoint', event_types: ['partner.*'],
    auto_disable: { consecutive_failures: 3, min_duration_s: 0 },
  });
  await receiverFail(true);
  await publish('partner.updated', { n: 1 });
  await until('the subscription to be auto-disabled', async () => (await apiCall('GET', '/v1/subscriptions/' + sick.id)).disabled_reason === 'failing');
  await receiverFail(false);
  await page.goto(BASE + '/ui/subscriptions/' + encodeURIComponent(sick.id));
  const health = page.locator('section.health');
  await health.getByText('Disabled because the endpoint kept failing').waitFor();
  const healthText = await health.textContent();
  assert(/Failed in a row\s*3\s*since/.test(healthText), 'the streak and its start: ' + healthText);
  assert(/Success rate \(24 h\)\s*0 %\s*3 attempts/.test(healthText), 'the 24 h success rate: ' + healthText);
  assert(/Auto-disable\s*3 failures/.test(healthText), 'the rule in force: ' + healthText);
  assert((await page.locator('.meta').textContent()).includes('failing'), 'the disabled reason beside the state');
  assert(await page.locator('select[name=auto_disable]').inputValue() === 'custom', 'the form shows the subscription\'s own rule');
  assert(await page.locator('input[name=auto_disable_consecutive_failures]').inputValue() === '3', 'its count');
  await page.locator('select[name=auto_disable]').selectOption('default');
  assert(!(await page.locator('input[name=auto_disable_consecutive_failures]').isVisible()), 'the count hides for the server default');
  await page.locator('select[name=auto_disable]').selectOption('custom');
  await page.locator('input[name=auto_disable_consecutive_failures]').waitFor();
  await page.setViewportSize({ width: 1280, height: 800 });
  await fits('an auto-disabled subscription at 1280 px');
  await shot(page, '13c-subscription-failing');
  await page.setViewportSize({ width: 390, height: 844 });
  await fits('an auto-disabled subscription at 390 px');
  await health.screenshot({ path: SHOTS + '/13d-phone-subscription-failing.png' });
  shots.push(SHOTS + '/13d-phone-subscription-failing.png');
  await page.setViewportSize({ width: 1280, height: 900 }); // the flow's size (lib.mjs)
  // Enable: a fresh streak, and deliveries resume.
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByRole('button', { name: 'Disable' }).waitFor();
  await health.getByText('none since the last success').waitFor();
  assert(!(await health.textContent()).includes('kept failing'), 'no failing notice once enabled');
  await publish('partner.updated', { n: 2 });
  await until('the next event to be delivered', async () => (await apiCall('GET', '/v1/subscriptions/' + sick.id)).health.success_rate_24h > 0);
  await page.reload();
  await health.getByText('25.0 %').waitFor();
  await shot(page, '13e-subscription-resumed');
  await apiCall('DELETE', '/v1/subscriptions/' + sick.id);

  if (process.env.OVERVIEW_SHOT) {
    // For the README's screenshot: a minute of traffic to a second,
    // flaky endpoint (RECEIVER_URL/flaky fails one request in four), so
    // the charts have something to show.
    begin('traffic for the overview screenshot');
    await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/flaky', description: 'Billing service', event_types: ['order.*', 'invoice.*'] });
    const end = Date.now() + 65000;
    let n = 0;
    while (Date.now() < end) {
      const phase = (Date.now() % 30000) / 30000;
      const burst = 2 + Math.round(4 * (1 + Math.sin(phase * 2 * Math.PI)));
      await Promise.all(Array.from({ length: burst }, () => {
        n++;
        return apiCall('POST', '/v1/events', { type: n % 3 ? 'order.created' : 'invoice.paid', key: 'cust-' + (n % 17), data: { total: (n * 37) % 400 } });
      }));
      await new Promise((r) => setTimeout(r, 400));
    }
    log('published', n, 'events of traffic');
  }

  begin('tokens: an empty name is refused where it happens; admin with a tenant too');
  await nav('Tokens').click();
  await page.getByRole('heading', { name: 'Tokens', exact: true }).waitFor();
  await page.locator('input[name=token_name]').fill('bad');
  await page.locator('input[name=scope][value=admin]').check();
  await page.locator('input[name=token_tenant]').fill('acme');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.locator('form .error').getByText('admin cannot be confined to a tenant').waitFor();
  assert(await page.locator('.secret-box').count() === 0, 'no token shown for a refused create');

  begin('tokens: create a tenant token, shown once, listed without the token');
  await page.locator('input[name=scope][value=admin]').uncheck();
  await page.locator('input[name=token_name]').fill('acme-reader');
  for (const sc of ['events:read', 'subscriptions:read']) await page.locator(`input[name=scope][value="${sc}"]`).check();
  await page.locator('input[name=token_tenant]').fill('acme');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const tenantToken = await page.locator('.secret-box [data-secret]').textContent();
  assert(tenantToken.startsWith('hrld_'), 'token shown once: ' + tenantToken);
  const row = page.locator('tbody tr', { hasText: 'acme-reader' });
  await row.waitFor();
  const tokRow = await row.textContent();
  assert(tokRow.includes('acme') && tokRow.includes('events:read') && tokRow.includes('subscriptions:read') && !tokRow.includes(tenantToken), 'token row: ' + tokRow);
  assert(!(await page.locator('main table').textContent()).includes(tenantToken), 'the token is not in the list');
  const confined = await apiCall('GET', '/v1/subscriptions', undefined, tenantToken);
  assert(Array.isArray(confined.data) && confined.data.every((x) => x.tenant === 'acme'), 'the new token works, confined: ' + JSON.stringify(confined));
  await shot(page, '21-tokens');
  await page.reload();
  await row.waitFor();
  assert(await page.locator('.secret-box').count() === 0, 'the token is not shown again after a reload');

  begin('tokens: revoke with confirmation; the token then answers 401');
  await row.getByRole('button', { name: 'Revoke' }).click();
  await page.getByText('Token "acme-reader" revoked.').waitFor();
  await until('the revoked token to leave the list', async () => (await page.locator('tbody tr', { hasText: 'acme-reader' }).count()) === 0, 10000);
  const revoked = await fetch(BASE + '/v1/subscriptions', { headers: { Authorization: 'Bearer ' + tenantToken } });
  assert(revoked.status === 401, 'revoked token answered ' + revoked.status);

  begin('tokens: revoking the token you are signed in with answers 409, shown in place');
  const ops = await apiCall('POST', '/v1/tokens', { name: 'ops-admin', scopes: ['admin'] });
  await page.evaluate((t) => sessionStorage.setItem('herald.token', t), ops.token);
  await page.reload();
  await page.locator('tbody tr', { hasText: 'ops-admin' }).getByRole('button', { name: 'Revoke' }).click();
  await page.locator('main .error').getByText('signed in with this token').waitFor();
  // A later success clears the error.
  await page.locator('input[name=token_name]').fill('ci-bot');
  await page.locator('input[name=scope][value="events:read"]').check();
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  assert(await page.locator('main .error').count() === 0, 'the revoke error is gone after a later success');
  await page.evaluate((t) => sessionStorage.setItem('herald.token', t), TOKEN);
  await apiCall('DELETE', '/v1/tokens/' + ops.id);

  begin('tokens: a portal link for a tenant, shown once');
  await page.reload();
  await page.locator('input[name=portal_tenant]').fill('acme');
  await page.getByRole('button', { name: 'Create portal link' }).click();
  await page.locator('.portal-link [data-secret]').waitFor();
  const portalURL = await page.locator('.portal-link [data-secret]').textContent();
  assert(portalURL.includes('/portal/#link=hrlp_'), 'portal link: ' + portalURL);

  begin('a tenanted subscription: created with its tenant, listed, filtered');
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByLabel('Endpoint URL').fill(RECEIVER + '/hook');
  await page.getByLabel('Description').fill('Acme hook');
  await page.getByLabel('Tenant', { exact: true }).fill('acme');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const acmeID = decodeURIComponent(page.url().split('/').pop());
  assert((await apiCall('GET', '/v1/subscriptions/' + acmeID)).tenant === 'acme', 'created for acme');
  assert(await page.getByLabel('Tenant', { exact: true }).getAttribute('readonly') !== null, 'tenant read-only on edit');
  assert(await page.getByLabel('All tenants').isDisabled(), 'all_tenants fixed on edit');
  await page.getByRole('button', { name: 'Portal link' }).click();
  await page.locator('.portal-link [data-secret]').waitFor();
  assert((await page.locator('.portal-link [data-secret]').textContent()).includes('/portal/#link=hrlp_'), 'portal link from the subscription');
  await apiCall('POST', '/v1/subscriptions', { url: RECEIVER + '/hook', description: 'Every tenant', all_tenants: true });
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'Every tenant' }).waitFor();
  assert((await page.locator('tbody tr', { hasText: 'Acme hook' }).locator('[data-tenant]').textContent()) === 'acme', 'tenant column');
  assert((await page.locator('tbody tr', { hasText: 'Every tenant' }).textContent()).includes('all tenants'), 'all tenants badge');
  await page.locator('[data-tenant-filter] input[name=tenant]').fill('acme');
  await page.locator('[data-tenant-filter]').getByRole('button', { name: 'Filter' }).click();
  await until('the tenant filter to show one subscription', async () => page.url().includes('tenant=acme') && (await page.locator('tbody tr').count()) === 1);
  assert((await page.locator('tbody tr').textContent()).includes('Acme hook'), 'filtered to acme');
  await shot(page, '22-subscriptions-tenant');
  await page.goto(BASE + '/ui/subscriptions?tenant=nobody');
  await page.getByText('No subscription for tenant nobody.').waitFor();

  begin('events and deliveries: tenant filter and the event\'s tenant');
  const acmeEv = await apiCall('POST', '/v1/events', { type: 'order.created', tenant: 'acme', data: { total: 1 } });
  await nav('Events').click();
  await page.getByLabel('Tenant', { exact: true }).fill('acme');
  await page.getByRole('button', { name: 'Search' }).click();
  await until('the tenant search to show one event', async () => page.url().includes('tenant=acme') && (await page.locator('tbody tr').count()) === 1);
  await page.getByRole('link', { name: acmeEv.id }).click();
  await page.getByRole('heading', { name: 'Payload' }).waitFor();
  assert((await page.locator('.facts [data-tenant]').textContent()) === 'acme', 'tenant on the event detail');
  await nav('Deliveries').click();
  await page.getByLabel('Tenant', { exact: true }).fill('acme');
  await page.getByRole('button', { name: 'Filter' }).click();
  await until('the tenant filter to show acme\'s deliveries', async () => page.url().includes('tenant=acme') && (await page.locator('tbody tr').count()) >= 1);
  for (const r of await page.locator('tbody tr').allTextContents()) assert(r.includes('Acme hook') || r.includes('Every tenant'), 'delivery of another tenant: ' + r);

  begin('connections: create a Redis connection (password never shown), deliver to it from a subscription made in the form');
  const redisURL = process.env.HERALD_TEST_REDIS_URL || 'redis://127.0.0.1:6379/0';
  const withPass = redisURL.replace('redis://', 'redis://:s3cret-pw@');
  await nav('Connections').click();
  await page.getByRole('heading', { name: 'Connections', exact: true }).waitFor();
  await page.getByText('No connections yet.').waitFor();
  await page.locator('input[name=name]').fill('redis-local');
  await page.locator('select[name=type]').selectOption('redis');
  // A URL of another type's scheme is refused beside the field.
  await page.locator('input[name=url]').fill('amqp://guest:guest@127.0.0.1:5672/');
  await page.getByRole('button', { name: 'Create connection' }).click();
  await page.locator('input[name=url][aria-invalid=true]').waitFor();
  // The machine's Redis has no password (it would refuse AUTH), so the
  // sealed password is checked on the listing, then dropped by a PATCH
  // before delivering through the connection.
  await page.locator('input[name=url]').fill(withPass);
  await page.locator('input[name=tenants]').fill('acme');
  await page.getByRole('button', { name: 'Create connection' }).click();
  await page.getByText('Connection redis-local created.').waitFor();
  await page.locator('tbody tr', { hasText: 'redis-local' }).waitFor();
  assert(!(await page.locator('main').textContent()).includes('s3cret-pw'), 'the password is not on the page');
  assert(!JSON.stringify(await apiCall('GET', '/v1/connections')).includes('s3cret-pw'), 'the password is not in the API answer');
  await apiCall('PATCH', '/v1/connections/redis-local', { url: redisURL });
  await shot(page, '25-connections');
  const stream = 'herald-ui-' + Date.now();
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByLabel('Type', { exact: true }).selectOption('redis');
  await page.locator('select[name=destination_connection] option[value=redis-local]').waitFor({ state: 'attached' });
  await page.getByLabel('Stream').fill(stream);
  await page.getByLabel('Description').fill('Redis stream');
  await page.getByLabel('Event types').fill('stock.*');
  await shot(page, '26-subscription-redis');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const redisSubID = decodeURIComponent(page.url().split('/').pop());
  const redisSub = await apiCall('GET', '/v1/subscriptions/' + redisSubID);
  assert(redisSub.destination.type === 'redis' && redisSub.destination.connection === 'redis-local' && redisSub.destination.stream === stream, 'created as a redis destination: ' + JSON.stringify(redisSub));
  // A broker's message carries the signature headers as its fields.
  await checkVerifyPanel('redis', await page.locator('.secret-box [data-secret]').textContent());
  assert((await page.locator('[data-verify=redis]').textContent()).includes('the stream entry\'s fields'), 'redis: where the headers are');
  await page.locator('[data-verify=redis]').getByRole('tab', { name: 'Go', exact: true }).click();
  assert((await page.locator('[data-verify=redis] [data-snippet]').textContent()).includes('headers.Set("webhook-signature", sig)'), 'a broker snippet builds the headers from the message');
  const stockEv = await publish('stock.changed', { sku: 'A-1', qty: 3 }, 'A-1');
  // Two deliveries: the stream's, and the "Every tenant" webhook's (all types).
  assert(stockEv.deliveries === 2, 'a delivery to the stream and one to the all-types webhook: ' + JSON.stringify(stockEv));
  await until('the stream delivery to be delivered', async () => {
    const ds = await apiCall('GET', '/v1/deliveries?subscription_id=' + encodeURIComponent(redisSubID));
    return ds.data.length === 1 && ds.data[0].state === 'delivered';
  }, 20000);
  const xr = spawnSync('redis-cli', ['-u', redisURL, 'XRANGE', stream, '-', '+'], { encoding: 'utf8' });
  assert(xr.status === 0 && xr.stdout.includes(stockEv.id) && xr.stdout.includes('webhook-signature'), 'the entry is on the stream: ' + xr.stdout + xr.stderr);
  spawnSync('redis-cli', ['-u', redisURL, 'DEL', stream]);
  await page.goto(BASE + '/ui/subscriptions');
  assert((await page.locator('tbody tr', { hasText: 'Redis stream' }).textContent()).includes('redis redis-local → ' + stream), 'the list says where it delivers');

  begin('connections: deleting one in use answers 409, shown in place');
  await nav('Connections').click();
  await page.locator('tbody tr', { hasText: 'redis-local' }).getByRole('button', { name: 'Delete' }).click();
  await page.locator('main .error').getByText(/in use|used by/).waitFor();
  assert((await apiCall('GET', '/v1/connections')).data.length === 1, 'still there');

  begin('sources: the form shows the chosen type\'s fields, refuses a bad mapping and an ungranted tenant beside the field');
  // The Sources screenshots are taken at 1280×800.
  await page.setViewportSize({ width: 1280, height: 800 });
  const srcStream = 'herald-ui-src-' + Date.now();
  await nav('Sources').click();
  await page.getByText('No sources yet.').waitFor();
  await shot(page, '32-sources-empty');
  await page.getByRole('link', { name: 'Create the first source' }).click();
  await page.getByRole('heading', { name: 'New source' }).waitFor();
  await page.locator('input[name=name]').fill('parcels');
  const visible = async (n) => page.locator(`input[name=${n}]`).isVisible();
  await page.locator('select[name=type]').selectOption('amqp');
  assert(await visible('queue') && !(await visible('stream')) && !(await visible('topic')), 'amqp: the queue only');
  await until('the amqp connection picker', async () => (await page.locator('select[name=connection]').textContent()).includes('No amqp connection yet'), 10000, 100);
  await page.locator('select[name=type]').selectOption('redis');
  assert(await visible('stream') && await visible('group'), 'redis: stream and group');
  for (const n of ['queue', 'durable', 'subject', 'topic']) assert(!(await visible(n)), n + ' is hidden for redis');
  await page.locator('select[name=connection] option[value=redis-local]').waitFor({ state: 'attached' });
  assert((await page.locator('.mapping-doc').textContent()).includes('{body, headers, stream, message_id, timestamp}'), 'the mapping names the message document of a redis source');
  await page.locator('input[name=stream]').fill(srcStream);
  await page.locator('input[name=mapping_type]').fill('body.kind');
  await page.locator('input[name=mapping_key]').fill('body.[');
  await page.getByRole('button', { name: 'Create source' }).click();
  await page.locator('input[name=mapping_key][aria-invalid=true] ~ .field-error').getByText('mapping.key').waitFor();
  assert((await apiCall('GET', '/v1/sources')).data.length === 0, 'nothing created for a bad mapping');
  await fits('the source form at 1280 px');
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, '33-source-field-error');
  await page.locator('input[name=mapping_key]').fill('body.parcel_id');
  // redis-local is granted to acme only.
  await page.locator('input[name=tenant]').fill('globex');
  await page.getByRole('button', { name: 'Create source' }).click();
  await page.locator('input[name=tenant][aria-invalid=true] ~ .field-error').getByText('not granted').waitFor();
  assert(await page.locator('.field-error').count() === 1, 'only the tenant is marked');
  assert((await apiCall('GET', '/v1/sources')).data.length === 0, 'nothing created for an ungranted tenant');
  await page.locator('input[name=tenant]').fill('acme');
  await shot(page, '34-source-new');
  await page.getByRole('button', { name: 'Create source' }).click();

  begin('sources: the source\'s page shows its live status');
  await page.getByRole('heading', { name: 'parcels' }).waitFor();
  await page.locator('[data-source-status] [data-state]').waitFor();
  const made = await apiCall('GET', '/v1/sources/parcels');
  assert(made.type === 'redis' && made.connection === 'redis-local' && made.stream === srcStream && made.group === 'herald' && made.tenant === 'acme'
    && made.mapping.key === 'body.parcel_id' && made.mapping.type === 'body.kind' && made.enabled && !made.ordered, 'created as filled in: ' + JSON.stringify(made));
  // A node reports "connecting" first, then "consuming" or "failed".
  await until('a node to report on the source', async () => {
    const st = (await apiCall('GET', '/v1/sources/parcels')).status;
    return st.nodes.length > 0 && (st.state === 'consuming' || st.last_error);
  }, 20000);
  // The page follows the status by itself: the node's row appears.
  await page.locator('[data-source-status] tbody tr').first().waitFor();
  const reported = (await apiCall('GET', '/v1/sources/parcels')).status;
  assert(reported.state === 'consuming', 'the source consumes: ' + JSON.stringify(reported));
  for (const body of ['{"kind": "parcel.received", "parcel_id": "P-1"}', 'not json']) {
    const xa = spawnSync('redis-cli', ['-u', redisURL, 'XADD', srcStream, '*', 'body', body], { encoding: 'utf8' });
    assert(xa.status === 0, 'XADD: ' + xa.stdout + xa.stderr);
  }
  // The page follows the status by itself: the reject and the counters.
  await page.locator('[data-source-status] [data-reason=not_json]').waitFor();
  await until('the page to count the consumed message', async () => (await page.locator('[data-source-status] .card', { hasText: 'Consumed' }).locator('.card-value').textContent()) === '1', 15000);
  await page.locator('[data-source-status] .card', { hasText: 'Rejected' }).locator('.card-value').getByText('1', { exact: true }).waitFor();
  await page.locator('[data-source-status] [data-state=consuming]').waitFor();
  const evs = await apiCall('GET', '/v1/events?type=parcel.received');
  assert(evs.data.length === 1 && evs.data[0].key === 'P-1' && evs.data[0].tenant === 'acme', 'the message became an event of acme: ' + JSON.stringify(evs.data));
  assert((await page.locator('[data-source-status] [data-reason=not_json]').locator('xpath=ancestor::tr').textContent()).includes('not json'), 'the reject shows its excerpt');
  await fits('the source page at 1280 px');
  await shot(page, '35-source-detail');

  begin('sources: listed with type, connection, stream, tenant and state');
  await nav('Sources').click();
  const srcRow = page.locator('tbody tr', { hasText: 'parcels' });
  await srcRow.locator('[data-state]').waitFor();
  const srcText = await srcRow.textContent();
  for (const want of ['redis', 'redis-local', srcStream, 'acme', 'enabled', 'consuming']) assert(srcText.includes(want), `the row shows ${want}: ${srcText}`);
  assert(await srcRow.locator('td[data-label=Consumed]').textContent() === '1' && await srcRow.locator('td[data-label=Rejected]').textContent() === '1', 'the row counts: ' + srcText);
  await fits('sources at 1280 px');
  await shot(page, '36-sources');

  begin('sources: disable and enable, edit, delete');
  await srcRow.getByRole('link', { name: 'parcels' }).click();
  await page.getByRole('button', { name: 'Disable' }).click();
  await page.getByRole('button', { name: 'Enable' }).waitFor();
  assert((await apiCall('GET', '/v1/sources/parcels')).enabled === false, 'disabled');
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByRole('button', { name: 'Disable' }).waitFor();
  await page.locator('input[name=prefetch]').fill('10');
  await page.locator('input[name=ordered]').check();
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Source parcels saved.').waitFor();
  const edited = await apiCall('GET', '/v1/sources/parcels');
  assert(edited.enabled && edited.ordered && edited.prefetch === 10 && edited.mapping.key === 'body.parcel_id' && edited.stream === srcStream, 'saved as edited: ' + JSON.stringify(edited));
  await apiCall('POST', '/v1/sources', { name: 'doomed', type: 'redis', connection: 'redis-local', stream: srcStream + '-doomed', enabled: false });
  await page.goto(BASE + '/ui/sources/doomed');
  await page.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('heading', { name: 'Sources', exact: true }).waitFor();
  await srcRow.waitFor();
  assert(await page.locator('tbody tr', { hasText: 'doomed' }).count() === 0, 'the deleted source is not listed');
  assert(!(await apiCall('GET', '/v1/sources')).data.some((x) => x.name === 'doomed'), 'deleted');
  await page.setViewportSize({ width: 1280, height: 900 });

  begin('a Web Push subscription from a pasted PushSubscription');
  const { generateKeyPairSync, randomBytes } = await import('node:crypto');
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const p256dh = publicKey.export({ format: 'der', type: 'spki' }).subarray(-65).toString('base64url');
  const pushSubJSON = JSON.stringify({ endpoint: 'https://push.example.net/wpush/abc', keys: { p256dh, auth: randomBytes(16).toString('base64url') } });
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByLabel('Type', { exact: true }).selectOption('webpush');
  await page.getByLabel('PushSubscription (JSON)').fill('{not json');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('textarea[name=destination_subscription][aria-invalid=true]').waitFor();
  await page.getByLabel('PushSubscription (JSON)').fill(pushSubJSON);
  await page.getByLabel('Urgency').selectOption('high');
  await page.getByLabel('Description').fill('Browser push');
  await shot(page, '27-subscription-webpush');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const pushSub = await apiCall('GET', '/v1/subscriptions/' + decodeURIComponent(page.url().split('/').pop()));
  assert(pushSub.destination.type === 'webpush' && pushSub.destination.urgency === 'high' && pushSub.destination.subscription.keys.p256dh === p256dh, 'created as webpush: ' + JSON.stringify(pushSub));
  await page.getByRole('heading', { name: 'Settings' }).waitFor();
  assert(await page.locator('[data-verify]').count() === 0, 'a Web Push subscription has no signature to verify');
  await apiCall('DELETE', '/v1/subscriptions/' + pushSub.id);

  begin('a listen subscription (herald listen) from the form');
  await nav('Subscriptions').click();
  await page.getByRole('link', { name: 'New subscription' }).click();
  await page.getByLabel('Type', { exact: true }).selectOption('listen');
  await page.locator('[data-dest=listen]').getByText('herald listen --subscription').waitFor();
  assert(!(await page.locator('[data-dest=webhook]').isVisible()), 'no endpoint URL for a listen destination');
  await page.getByLabel('Description').fill('My laptop');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  const listenSub = await apiCall('GET', '/v1/subscriptions/' + decodeURIComponent(page.url().split('/').pop()));
  assert(listenSub.destination.type === 'listen' && !listenSub.url, 'created as listen: ' + JSON.stringify(listenSub));
  await page.locator('[data-verify=listen]').getByText('Verify the raw body before parsing it').waitFor();
  await apiCall('DELETE', '/v1/subscriptions/' + listenSub.id);

  begin('overview with charts');
  await nav('Overview').click();
  await page.locator('svg.chart').nth(2).waitFor();
  assert(await page.locator('svg.chart').count() === 3, 'three charts');
  // The Pending card names how late the oldest *due* delivery is, and
  // says so when nothing is due (work waiting for a retry tier is not late).
  // (The page refreshes itself; the figures may move between two reads.)
  await until('the Pending card to describe the queue', async () => {
    const st = await apiCall('GET', '/v1/stats');
    const pending = st.tiers.reduce((a, t) => a + t.pending, 0);
    const due = st.tiers.reduce((a, t) => a + t.due, 0);
    const extra = await page.locator('.card', { hasText: 'Pending' }).locator('.card-extra').textContent();
    log(`Pending card: ${extra} (pending ${pending}, due ${due})`);
    return pending === 0 ? extra === 'none' : due > 0 ? extra.startsWith('oldest due ') : extra.startsWith('none due');
  }, 15000);
  await page.locator('[data-tenants]').getByText('acme').waitFor();
  await until('the charts to draw lines', async () => (await page.locator('svg.chart path.line').count()) >= 2, 30000, 1000);
  // This node started minutes ago: the hour before is "no data", not 0.
  await page.getByRole('button', { name: '1 hour', exact: true }).click();
  await page.locator('svg.chart [data-nodata]').first().waitFor();
  assert(await page.locator('svg.chart [data-nodata]').count() === 3, 'every chart shades the time before the node started');
  await page.getByRole('button', { name: '5 min', exact: true }).click();
  await page.getByRole('button', { name: '5 min', exact: true, pressed: true }).waitFor();
  const overview = await shot(page, '14-overview');
  if (process.env.OVERVIEW_SHOT) {
    mkdirSync(dirname(process.env.OVERVIEW_SHOT), { recursive: true });
    await page.screenshot({ path: process.env.OVERVIEW_SHOT });
    log('overview screenshot for the README:', process.env.OVERVIEW_SHOT);
  }
  void overview;

  begin('latency chart: lone samples show as dots, an outlier does not flatten the rest');
  const chart = await page.evaluate(async (prefix) => {
    const { lineChart } = await import(prefix + 'assets/charts.js');
    const at = Date.parse('2026-11-24T10:00:00Z');
    const times = Array.from({ length: 30 }, (_, i) => new Date(at + i * 10000));
    // Unknown before the 6th interval; a lone 40 ms; a run near 50 ms; one 5 s outlier.
    const p50 = times.map((_, i) => (i === 8 ? 40 : i >= 12 && i <= 25 ? 45 + (i % 4) : i === 27 ? 5000 : null));
    const fig = lineChart({ title: 'test latency', unit: 'ms', times, from: times[5], clamp: true, series: [{ name: 'p50', cls: 's1', values: p50 }] });
    fig.dataset.testChart = '';
    document.querySelector('main').append(fig);
    const svg = fig.querySelector('svg');
    const ticks = [...svg.querySelectorAll('text.tick')].map((t) => t.textContent);
    const lone = svg.querySelectorAll('[data-lone]');
    return {
      lone: lone.length, outliers: svg.querySelectorAll('[data-outlier]').length, nodata: svg.querySelectorAll('[data-nodata]').length,
      ticks, legend: fig.querySelector('.legend').textContent,
      loneY: lone.length ? Number(lone[0].getAttribute('cy')) : null,
    };
  }, '/ui/');
  assert(chart.lone === 1, 'one lone sample drawn as a dot: ' + JSON.stringify(chart));
  assert(chart.outliers === 1, 'the outlier is marked on the top edge: ' + JSON.stringify(chart));
  assert(chart.nodata === 1 && chart.ticks.includes('no data'), 'no data before the start: ' + JSON.stringify(chart));
  assert(!chart.ticks.some((t) => t.startsWith('5k')) && chart.ticks.includes('50+'), 'the axis ends near the usual values, not the outlier: ' + JSON.stringify(chart));
  assert(chart.loneY > 8 && chart.loneY < 100, 'the lone 40 ms sits high on a 50 ms axis: ' + chart.loneY);
  assert(chart.legend.includes('above 50 ms'), 'the legend says values are above the scale: ' + chart.legend);
  await page.locator('[data-test-chart]').scrollIntoViewIfNeeded();
  await page.locator('[data-test-chart]').screenshot({ path: SHOTS + '/14b-chart-outlier.png' });
  shots.push(SHOTS + '/14b-chart-outlier.png');

  begin('API page');
  await nav('API').click();
  await page.getByRole('heading', { name: 'API reference' }).waitFor();
  await page.locator('.op, .empty').first().waitFor();
  await shot(page, '15-api');
  // The renderer on a small document with $refs, whatever this build
  // serves at /openapi.json.
  await page.route('**/openapi.json', (route) => route.fulfill({
    contentType: 'application/json',
    body: JSON.stringify({
      openapi: '3.1.0', info: { title: 'herald API', version: 'test' },
      paths: {
        '/v1/deliveries/{id}': {
          parameters: [{ $ref: '#/components/parameters/ID' }],
          get: { operationId: 'getDelivery', tags: ['deliveries'], summary: 'One delivery with its attempts', responses: { 200: { description: 'The delivery', content: { 'application/json': { schema: { $ref: '#/components/schemas/Delivery' } } } }, 404: { $ref: '#/components/responses/NotFound' } } },
        },
      },
      components: {
        parameters: { ID: { name: 'id', in: 'path', required: true, description: 'delivery id', schema: { type: 'string' } } },
        schemas: { Delivery: { type: 'object', properties: { id: { type: 'string' } } } },
        responses: { NotFound: { description: 'No such delivery' } },
      },
    }),
  }));
  await page.reload();
  await page.locator('#op-getDelivery').getByText('One delivery with its attempts').waitFor();
  const opText = await page.locator('#op-getDelivery').textContent();
  assert(opText.includes('delivery id') && opText.includes('No such delivery') && opText.includes('Delivery'), 'refs resolved: ' + opText);
  await page.unroute('**/openapi.json');

  begin('a 401 returns to sign-in');
  await page.evaluate(() => sessionStorage.setItem('herald.token', 'revoked'));
  await nav('Deliveries').click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  assert(page.url().includes('/ui/sign-in?next='), 'sign-in with next: ' + page.url());
  await page.locator('#token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Deliveries' }).waitFor();

  begin('phone width (390 px): pages fit without sideways scrolling');
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [path, name, ready] of [
    ['', '16-phone-overview', '[data-tiers] tbody tr'],
    ['subscriptions', '17-phone-subscriptions', 'tbody tr'],
    ['deliveries', '18-phone-deliveries', 'tbody tr'],
    ['events', '29-phone-events', 'tbody tr'],
    ['events/' + encodeURIComponent(ok.id), '30-phone-event', 'tbody tr'],
    ['deliveries/' + encodeURIComponent(deadID), '19-phone-delivery', '.attempt'],
    ['subscriptions/' + encodeURIComponent(subID), '20-phone-subscription', 'form'],
    ['tokens', '23-phone-tokens', 'form'],
    ['connections', '28-phone-connections', 'form'],
    ['sources', '37-phone-sources', 'tbody tr [data-state]'],
    ['sources/parcels', '38-phone-source', '[data-source-status] tbody tr'],
    ['sources/new', '39-phone-source-new', 'form'],
  ]) {
    await page.goto(BASE + '/ui/' + path);
    await page.locator(ready).first().waitFor();
    await fits((path || 'overview') + ' at 390 px');
    await shot(page, name);
  }
  // Resend and replay at phone width.
  await page.goto(BASE + '/ui/events/' + encodeURIComponent(ok.id));
  await page.getByLabel('Resend to…').selectOption(subID);
  await fits('the resend control at 390 px');
  await shot(page, '41-phone-event-resend');
  await page.goto(BASE + '/ui/subscriptions/' + encodeURIComponent(subID));
  await page.getByRole('button', { name: 'Replay…' }).click();
  await page.getByRole('button', { name: 'Check how many' }).click();
  await page.locator('.confirm [data-matched]').waitFor();
  await fits('the replay confirmation at 390 px');
  await page.locator('.replay').scrollIntoViewIfNeeded();
  await page.locator('.replay').screenshot({ path: SHOTS + '/42-phone-replay-confirm.png' });
  shots.push(SHOTS + '/42-phone-replay-confirm.png');
  await page.getByRole('button', { name: 'Cancel' }).click();
  // A field error at phone width stays on the screen; nothing is saved.
  await page.goto(BASE + '/ui/subscriptions/' + encodeURIComponent(subID));
  await page.getByLabel('Endpoint URL').fill('ftp://example.com/hook');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('input[name=url][aria-invalid=true] ~ .field-error').waitFor();
  const [sw, iw] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert(sw <= iw + 1, `the field error is ${sw}px wide at ${iw}px`);
  assert((await apiCall('GET', '/v1/subscriptions/' + subID)).url.startsWith(RECEIVER), 'a refused URL is not saved');
  await shot(page, '24-phone-field-error');
  // Every tab of the header is on the screen (they wrap, not scroll).
  for (const a of await page.locator('header nav a').all()) {
    const b = await a.boundingBox();
    assert(b && b.x >= 0 && b.x + b.width <= 391, 'a header tab is off the screen: ' + JSON.stringify(b));
  }
  await page.locator('[data-verify=webhook]').scrollIntoViewIfNeeded();
  await fits('the verify panel at 390 px');
  await page.locator('[data-verify=webhook]').screenshot({ path: SHOTS + '/31-phone-verify.png' });
  shots.push(SHOTS + '/31-phone-verify.png');

  // The source form's errors at phone width.
  await page.goto(BASE + '/ui/sources/new');
  await page.locator('input[name=name]').fill('phone-src');
  await page.locator('select[name=type]').selectOption('mqtt');
  await page.locator('select[name=connection]').getByText('No mqtt connection yet').waitFor({ state: 'attached' });
  await page.locator('input[name=topic]').fill('parcels/#');
  await page.getByRole('button', { name: 'Create source' }).click();
  await page.locator('select[name=connection][aria-invalid=true] ~ .field-error').waitFor();
  await fits('a source field error at 390 px');
  assert(!(await apiCall('GET', '/v1/sources')).data.some((x) => x.name === 'phone-src'), 'nothing created without a connection');
  await shot(page, '40-phone-source-field-error');

  // Issue 24's done-when: items 3, 5 and 8 at phone width too.
  begin('390×844: a CEL error in words, a save confirmed, a revealed secret, no-data on the overview');
  await page.goto(BASE + '/ui/subscriptions/new');
  await page.getByLabel('Language').selectOption('cel');
  await page.getByLabel('Expression').fill('data.total >');
  await page.locator('textarea[name=test_event]').fill('{"type": "order.created", "data": {"total": 120}}');
  await page.getByRole('button', { name: 'Test filter' }).click();
  await page.locator('.filter-result .error').getByText('line 1, column 13: syntax error: the expression ends too early').waitFor();
  await fits('a CEL error at 390 px');
  await page.locator('.filter-result').scrollIntoViewIfNeeded();
  await shot(page, '43-phone-cel-error');
  await page.goto(BASE + '/ui/subscriptions/' + encodeURIComponent(subID));
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('form .notice').getByText('Saved.').waitFor();
  await page.getByRole('button', { name: 'Reveal secret' }).click();
  await page.locator('.secret-box').getByText('shows it again').waitFor();
  assert(!(await page.locator('.secret-box').textContent()).includes('available later only'), 'a revealed secret says it is available only later (390 px)');
  await fits('a saved subscription with its secret at 390 px');
  await shot(page, '44-phone-subscription-saved-revealed');
  await page.goto(BASE + '/ui/');
  await page.getByRole('button', { name: '1 hour', exact: true }).click();
  await page.locator('svg.chart [data-nodata]').first().waitFor();
  await fits('the overview\'s 1 hour charts at 390 px');
  await shot(page, '45-phone-overview-1h');
  const pendingExtra = await page.locator('.card', { hasText: 'Pending' }).locator('.card-extra').textContent();
  assert(pendingExtra === 'none' || pendingExtra.startsWith('oldest due ') || pendingExtra.startsWith('none due'), 'the Pending card at 390 px: ' + pendingExtra);
  await page.goto(BASE + '/ui/tokens');
  await page.locator('input[name=token_name]').fill('phone-bad');
  await page.locator('input[name=scope][value=admin]').check();
  await page.locator('input[name=token_tenant]').fill('acme');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.locator('form .error').getByText('admin cannot be confined to a tenant').waitFor();
  await fits('a Tokens error at 390 px');
  await page.locator('input[name=scope][value=admin]').uncheck();
  await page.locator('input[name=token_tenant]').fill('');
  await page.locator('input[name=token_name]').fill('phone-ok');
  await page.locator('input[name=scope][value="events:read"]').check();
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.locator('.secret-box [data-secret]').waitFor();
  assert(await page.locator('main .error').count() === 0, 'the Tokens error stays after a later success at 390 px');
  await fits('a new token at 390 px');
  await shot(page, '46-phone-token-created');

  begin('sources: clean up the test\'s streams');
  await apiCall('DELETE', '/v1/sources/parcels');
  spawnSync('redis-cli', ['-u', redisURL, 'DEL', srcStream, srcStream + ':rejected', srcStream + '-doomed']);
});
