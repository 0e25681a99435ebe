// Subscriptions: the list with 24 h success rates, the create/edit form
// (every field, with a "test this filter" box), and a subscription's
// actions: enable/disable, rotate secret, send a test event, replay past
// events (replay.js), delete.

import {
  h, replace, api, qs, link, navigate, errorBox, notice, table, field, badge, fmtRate, fmtNum, fmtTime,
  pretty, copyButton, tenantCell, markField, clearFieldMarks, PORTAL, APIError, can, readOnly, confined,
} from './lib.js';
import { attemptsView } from './deliveries.js';
import { listConnections } from './connections.js';
import { verifyPanel } from './verify.js';
import { openReplay } from './replay.js';
import { listEventTypes, catalogPicker } from './eventtypes.js';

// A secret shown once after create, carried to the detail page in memory only.
let flashSecret = null;
// The id of a subscription just saved: its re-rendered page says "Saved".
let flashSaved = null;

export async function renderList(main, { params }) {
  // Tenants are the operator's: the portal's session is confined to one.
  const tenantQ = PORTAL ? '' : (params.get('tenant') || '');
  const write = can('subscriptions:write');
  const head = h('div', { class: 'page-head' }, h('h1', {}, 'Subscriptions'),
    write ? link('subscriptions/new', h('span', { class: 'button' }, 'New subscription')) : readOnly('subscriptions:write'));
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  // append() prints null as text: leave the operator's tenant filter out instead.
  // A tenant token's list is its tenant's already (the banner says so).
  main.append(head, ...(confined() ? [] : [tenantFilter('subscriptions', tenantQ)]), body);
  try {
    const [subs, stats] = await Promise.all([listSubs(tenantQ), api('GET', '/v1/stats/subscriptions' + qs({ tenant: tenantQ }))]);
    const byID = new Map(stats.data.map((s) => [s.subscription_id, s]));
    replace(body, table([
      { title: 'Destination', cell: (s) => h('div', {}, link('subscriptions/' + encodeURIComponent(s.id), s.description || destText(s)), h('div', { class: 'muted small mono wrap' }, s.description ? destText(s) : s.id)) },
      PORTAL ? null : { title: 'Tenant', cell: (s) => tenantCell(s.tenant, s.all_tenants) },
      { title: 'Event types', cell: (s) => s.event_types && s.event_types.length ? s.event_types.map((t) => h('code', { class: 'chip' }, t)) : h('span', { class: 'muted' }, 'all') },
      { title: 'Filter', cell: (s) => s.filter ? h('code', { class: 'clip' }, filterText(s.filter)) : h('span', { class: 'muted' }, 'none') },
      { title: 'State', cell: (s) => [badge(s.state), s.disabled_reason ? h('div', { class: 'muted small' }, s.disabled_reason) : null] },
      { title: 'Success (24 h)', class: 'r', cell: (s) => { const st = byID.get(s.id); return st ? h('span', { title: `${st.delivered} delivered, ${st.dead} dead` }, fmtRate(st.success_rate)) : '—'; } },
      { title: 'Pending', class: 'r', cell: (s) => fmtNum(byID.get(s.id)?.pending ?? 0) },
      { title: 'Dead (24 h)', class: 'r', cell: (s) => { const d = byID.get(s.id)?.dead ?? 0; return d ? link('deliveries?state=dead&subscription_id=' + encodeURIComponent(s.id), fmtNum(d)) : '0'; } },
    ].filter(Boolean), subs, tenantQ ? [h('p', {}, 'No subscription for tenant ' + tenantQ + '.'), link('subscriptions', 'Show every subscription')] : [h('p', {}, 'No subscriptions yet.'), h('p', { class: 'muted' }, 'A subscription sends the events you publish to an HTTP endpoint, a browser (Web Push) or a broker (RabbitMQ, NATS, Redis, MQTT), signed with Standard Webhooks.'),
      write ? link('subscriptions/new', h('span', { class: 'button' }, 'Create the first subscription')) : null]));
  } catch (e) {
    replace(body, errorBox(e));
  }
}

// listSubs pages through the subscriptions, of one tenant when given.
async function listSubs(tenant) {
  const all = [];
  let cursor = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('GET', '/v1/subscriptions' + qs({ limit: 200, cursor, tenant }));
    all.push(...page.data);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return all;
}

// tenantFilter is the operator's tenant filter of a list page: its value
// goes to the API as ?tenant=.
export function tenantFilter(path, value, extra) {
  const input = h('input', { type: 'text', name: 'tenant', value, placeholder: 'acme (exact)', pattern: '[A-Za-z0-9._\\-]{1,64}' });
  return h('form', {
    class: 'filters', 'data-tenant-filter': '', onsubmit: (e) => {
      e.preventDefault();
      navigate(path + qs({ ...(extra ? extra() : {}), tenant: input.value.trim() }));
    },
  }, field('Tenant', input), h('div', { class: 'filter-actions' }, h('button', { type: 'submit' }, 'Filter'), link(path, 'Clear')));
}

// destText says where a subscription delivers, in one line.
export function destText(s) {
  const d = s.destination || { type: 'webhook', url: s.url };
  switch (d.type) {
    case 'webhook': return d.url || s.url;
    case 'webpush': return 'Web Push → ' + (d.subscription ? hostOf(d.subscription.endpoint) : '?');
    case 'amqp': return 'amqp ' + d.connection + ' → ' + (d.exchange || '(default exchange)') + (d.routing_key ? ' / ' + d.routing_key : '');
    case 'nats': return 'nats ' + d.connection + ' → ' + (d.subject || '(subject from the event type)');
    case 'redis': return 'redis ' + d.connection + ' → ' + d.stream;
    case 'mqtt': return 'mqtt ' + d.connection + ' → ' + (d.topic || '(topic from the event type)');
    case 'listen': return 'herald listen (a developer\'s machine)';
    default: return d.type;
  }
}

function hostOf(u) {
  try { return new URL(u).host; } catch { return u; }
}

function filterText(f) {
  if (f.cel) return 'cel: ' + f.cel;
  if (f.jmespath) return 'jmespath: ' + f.jmespath;
  if (f.es_query) return 'es_query: ' + JSON.stringify(f.es_query);
  return '';
}

export async function renderNew(main) {
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'New subscription'), link('subscriptions', '← All subscriptions')));
  if (!can('subscriptions:write')) { main.append(readOnly('subscriptions:write')); return; }
  main.append(subscriptionForm(null, async (body) => {
    const s = await api('POST', '/v1/subscriptions', body);
    flashSecret = { id: s.id, secret: s.secret };
    navigate('subscriptions/' + encodeURIComponent(s.id));
  }));
}

export async function renderDetail(main, { args: [id] }) {
  let s;
  try {
    s = await api('GET', '/v1/subscriptions/' + encodeURIComponent(id));
  } catch (e) {
    main.append(h('h1', {}, 'Subscription'), errorBox(e), link('subscriptions', '← All subscriptions'));
    return;
  }
  const secretSlot = h('div');
  if (flashSecret && flashSecret.id === s.id) {
    replace(secretSlot, secretBox('Subscription created. Its signing secret is shown once:', flashSecret.secret));
    flashSecret = null;
  }
  const actionSlot = h('div');
  const portalSlot = h('div');
  const testSlot = h('div');
  const replaySlot = h('div');
  const act = (label, cls, fn) => h('button', {
    type: 'button', class: cls, onclick: async (e) => {
      e.target.disabled = true;
      replace(actionSlot);
      try { await fn(); } catch (err) { replace(actionSlot, errorBox(err)); } finally { e.target.disabled = false; }
    },
  }, label);

  // What the token lacks scope for is left out (the API would answer 403):
  // changes and secrets need subscriptions:write, replay deliveries:write.
  const write = can('subscriptions:write');
  const actions = h('div', { class: 'actions' },
    !write ? null : s.state === 'enabled'
      ? act('Disable', 'secondary', async () => { await api('PATCH', '/v1/subscriptions/' + encodeURIComponent(id), { state: 'disabled' }); navigate('subscriptions/' + encodeURIComponent(id), { replace: true }); })
      : act('Enable', 'secondary', async () => { await api('PATCH', '/v1/subscriptions/' + encodeURIComponent(id), { state: 'enabled' }); navigate('subscriptions/' + encodeURIComponent(id), { replace: true }); }),
    write ? act('Send test event', 'secondary', () => sendTest(id, testSlot)) : null,
    can('deliveries:write') ? act('Replay…', 'secondary', async () => openReplay(s, replaySlot)) : null,
    write ? act('Reveal secret', 'secondary', async () => {
      const r = await api('GET', '/v1/subscriptions/' + encodeURIComponent(id) + '/secret');
      replace(secretSlot, secretBox('Current signing secret:', r.secret, 'Store it where your receiver verifies signatures; "Reveal secret" shows it again.'));
    }) : null,
    write ? act('Rotate secret', 'secondary', async () => {
      if (!confirm('Rotate the signing secret? The old one keeps signing for the grace period (24 h by default) so receivers can switch.')) return;
      const r = await api('POST', '/v1/subscriptions/' + encodeURIComponent(id) + '/secret/rotate', {});
      replace(secretSlot, secretBox('New signing secret (shown once; the previous one still signs until it expires):', r.secret));
    }) : null,
    link('deliveries?subscription_id=' + encodeURIComponent(id), h('span', { class: 'button secondary' }, 'Deliveries')),
    // The operator hands a tenant its consumer portal (shown once).
    !PORTAL && s.tenant && can('admin') ? act('Portal link', 'secondary', async () => {
      const r = await api('POST', '/v1/tenants/' + encodeURIComponent(s.tenant) + '/portal', {});
      replace(portalSlot, h('div', { class: 'secret-box portal-link', role: 'status' },
        h('p', {}, 'Portal link for tenant ' + s.tenant + ' (works once, until ' + fmtTime(r.expires_at) + '):'),
        h('div', { class: 'secret-row' }, h('code', { class: 'secret', 'data-secret': '' }, r.url), copyButton(r.url)),
        h('p', { class: 'muted small' }, 'Send it to the tenant over a channel you trust: whoever opens it first manages this tenant\'s subscriptions.')));
    }) : null,
    write ? act('Delete', 'danger', async () => {
      if (!confirm('Delete this subscription? Its pending deliveries are cancelled. This cannot be undone.')) return;
      await api('DELETE', '/v1/subscriptions/' + encodeURIComponent(id));
      navigate('subscriptions');
    }) : readOnly('subscriptions:write'));

  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, s.description || 'Subscription'), link('subscriptions', '← All subscriptions')),
    h('p', { class: 'meta' }, badge(s.state), ' ', h('code', {}, s.id),
      !PORTAL && (s.tenant || s.all_tenants) ? [' · tenant ', tenantCell(s.tenant, s.all_tenants)] : null, s.disabled_reason ? h('span', { class: 'muted' }, ' · ' + s.disabled_reason) : null,
      h('span', { class: 'muted' }, ' · created ' + fmtTime(s.created_at) + ' · updated ' + fmtTime(s.updated_at))),
    secretSlot, actions, actionSlot, portalSlot, testSlot, replaySlot,
    healthPanel(s),
    verifyPanel(s),
    h('h2', {}, 'Settings'),
    write ? subscriptionForm(s, async (body) => {
      await api('PATCH', '/v1/subscriptions/' + encodeURIComponent(id), patchOf(s, body));
      flashSaved = id;
      navigate('subscriptions/' + encodeURIComponent(id), { replace: true });
    }) : settingsView(s));
}

// settingsView shows a subscription's settings to a token that may not
// change them, as the API answered them (health has its own panel).
function settingsView(s) {
  const { health, ...rest } = s;
  return h('pre', { class: 'payload', 'data-settings-view': '' }, pretty(rest));
}

// healthPanel shows how the endpoint has been answering (GET
// /v1/subscriptions/{id} health): the failure streak, the 24 h success
// rate and the auto-disable rule; a subscription auto-disabled for failing
// says so and how to resume.
function healthPanel(s) {
  const hl = s.health;
  if (!hl) return null;
  const rule = hl.auto_disable;
  const streak = hl.consecutive_failures || 0;
  const failing = s.state === 'disabled' && s.disabled_reason === 'failing';
  const card = (label, value, extra, cls) => h('div', { class: 'card ' + (cls || '') },
    h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), extra ? h('div', { class: 'card-extra' }, extra) : null);
  const rate = hl.success_rate_24h;
  return h('section', { class: 'health', 'aria-label': 'Endpoint health' },
    h('h2', {}, 'Endpoint health'),
    failing ? h('div', { class: 'notice warn', role: 'status' },
      h('strong', {}, 'Disabled because the endpoint kept failing'),
      ': ' + fmtNum(streak) + ' failed attempts in a row' + (hl.failing_since ? ' since ' + fmtTime(hl.failing_since) : '') + '. ',
      'Its pending deliveries wait. Fix the endpoint, then press Enable: sending resumes with a fresh streak.') : null,
    h('div', { class: 'cards' },
      card('Failed in a row', fmtNum(streak),
        streak ? 'since ' + fmtTime(hl.failing_since) : 'none since the last success',
        streak ? (failing ? 'bad' : 'warn') : ''),
      card('Success rate (24 h)', fmtRate(rate),
        hl.attempts_24h ? fmtNum(hl.attempts_24h) + (hl.attempts_24h === 1 ? ' attempt' : ' attempts') : 'no attempts',
        rate === null || rate === undefined ? '' : rate < 0.5 ? 'bad' : rate < 0.95 ? 'warn' : ''),
      card('Auto-disable', rule ? fmtNum(rule.consecutive_failures) + ' failures' : 'never',
        rule ? 'in a row' + (rule.min_duration_s ? ', over at least ' + fmtDuration(rule.min_duration_s) : '') + ('auto_disable' in s ? '' : ' (server default)')
          : ('auto_disable' in s ? 'turned off for this subscription' : 'turned off on this server'))));
}

// fmtDuration writes seconds as the largest whole unit that fits.
function fmtDuration(sec) {
  if (!sec) return '0 s';
  if (sec % 86400 === 0) return sec / 86400 + (sec === 86400 ? ' day' : ' days');
  if (sec % 3600 === 0) return sec / 3600 + ' h';
  if (sec % 60 === 0) return sec / 60 + ' min';
  return sec + ' s';
}

function secretBox(title, secret, note = 'Store it where your receiver verifies signatures. It is available later only through GET /v1/subscriptions/{id}/secret.') {
  return h('div', { class: 'secret-box', role: 'status' },
    h('p', {}, title), h('div', { class: 'secret-row' }, h('code', { class: 'secret', 'data-secret': '' }, secret), copyButton(secret)),
    h('p', { class: 'muted small' }, note));
}

// sendTest posts a herald.test event to the subscription and follows its
// delivery until it finishes (or 20 s pass), showing the attempts.
async function sendTest(id, slot) {
  replace(slot, notice('Sending a herald.test event…', 'info'));
  const r = await api('POST', '/v1/subscriptions/' + encodeURIComponent(id) + '/test', {});
  const deadline = Date.now() + 20000;
  let d;
  for (;;) {
    d = await api('GET', '/v1/deliveries/' + encodeURIComponent(r.delivery_id));
    if ((d.attempts && d.attempts.length) || Date.now() > deadline || !['pending', 'in_flight'].includes(d.state)) break;
    await new Promise((res) => setTimeout(res, 500));
  }
  replace(slot, h('section', { class: 'panel test-result' },
    h('h3', {}, 'Test delivery ', link('deliveries/' + encodeURIComponent(d.id), h('code', {}, d.id)), ' ', badge(d.state)),
    d.attempts && d.attempts.length ? attemptsView(d.attempts)
      : h('p', { class: 'muted' }, 'No attempt yet' + (d.waiting_for ? ' (waiting for ' + d.waiting_for + ')' : '') + '. Open the delivery to follow it.')));
}

// patchOf turns the form's full body into a JSON merge patch against the
// current subscription: removed headers become null (merge patch merges
// maps), a removed filter or rate limit is null.
function patchOf(old, body) {
  const p = { ...body };
  const headers = {};
  for (const k of Object.keys(old.headers || {})) if (!(k in body.headers)) headers[k] = null;
  Object.assign(headers, body.headers);
  p.headers = headers;
  if (!body.filter) p.filter = null;
  if (!body.rate_limit) p.rate_limit = null;
  return p;
}

function parseHeaders(text) {
  const out = {};
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    const c = line.indexOf(':');
    if (c <= 0) throw new APIError(0, 'invalid_field', `headers, line ${i + 1}: write one "name: value" per line`, 'headers');
    out[line.slice(0, c).trim().toLowerCase()] = line.slice(c + 1).trim();
  });
  return out;
}

function intOr(input, name) {
  const v = input.value.trim();
  if (v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new APIError(0, 'invalid_field', name + ' must be a whole number', name);
  return n;
}

// subscriptionForm edits every field; submit gets the full body.
function subscriptionForm(s, submit) {
  const f = s || {};
  const dest = f.destination || { type: 'webhook', url: f.url, method: f.method };
  const dtype = h('select', { name: 'destination_type' }, DEST_TYPES.map(([v, l]) => h('option', { value: v, selected: dest.type === v }, l)));
  const url = h('input', { type: 'url', value: f.url || '', placeholder: 'https://example.com/webhooks', name: 'url' });
  const method = h('select', { name: 'method' }, ['POST', 'PUT'].map((m) => h('option', { value: m, selected: (f.method || 'POST') === m }, m)));
  const description = h('input', { type: 'text', value: f.description || '', name: 'description', placeholder: 'What this endpoint is for' });
  const types = h('input', { type: 'text', value: (f.event_types || []).join(', '), name: 'event_types', placeholder: 'order.*, invoice.paid (empty: every type)' });
  const fkind = h('select', { name: 'filter_kind' },
    [['', 'No filter'], ['cel', 'CEL'], ['jmespath', 'JMESPath'], ['es_query', 'ES query (JSON)']].map(([v, l]) =>
      h('option', { value: v, selected: (f.filter ? Object.keys(f.filter).find((k) => f.filter[k]) || '' : '') === v }, l)));
  const ftext = h('textarea', { name: 'filter', rows: 3, class: 'mono', placeholder: 'data.total > 100 && data.currency == "EUR"' });
  if (f.filter) ftext.value = f.filter.cel || f.filter.jmespath || (f.filter.es_query ? pretty(f.filter.es_query) : '');
  const ordering = h('select', { name: 'ordering' }, [['none', 'none — send as soon as possible'], ['fifo', 'fifo — one at a time per key, in order'], ['latest', 'latest — only the newest version per key']]
    .map(([v, l]) => h('option', { value: v, selected: (f.ordering || 'none') === v }, l)));
  const keyInterval = h('input', { type: 'number', min: 0, name: 'key_interval_ms', value: f.key_interval_ms || '' , placeholder: '0' });
  const rlMax = h('input', { type: 'number', min: 1, name: 'rate_limit_max', value: f.rate_limit ? f.rate_limit.max : '', placeholder: 'no limit' });
  const rlPer = h('input', { type: 'number', min: 1, name: 'rate_limit_per_seconds', value: f.rate_limit ? f.rate_limit.per_seconds : '', placeholder: '1' });
  const maxInFlight = h('input', { type: 'number', min: 0, name: 'max_in_flight', value: f.max_in_flight || '', placeholder: '0 (no cap)' });
  const timeout = h('input', { type: 'number', min: 1, max: 300000, name: 'timeout_ms', value: f.timeout_ms || '', placeholder: '10000' });
  const headers = h('textarea', { name: 'headers', rows: 3, class: 'mono', placeholder: 'x-tenant: acme' });
  headers.value = Object.entries(f.headers || {}).map(([k, v]) => k + ': ' + v).join('\n');
  // tenant and all_tenants are fixed at creation (the API refuses a patch).
  const tenant = h('input', { type: 'text', name: 'tenant', value: f.tenant || '', readonly: !!s, pattern: '[A-Za-z0-9._\\-]{1,64}', placeholder: s ? 'none' : 'acme (empty: no tenant)' });
  const allTenants = h('input', { type: 'checkbox', name: 'all_tenants', checked: !!f.all_tenants, disabled: !!s });
  const state = h('select', { name: 'state' }, ['enabled', 'disabled'].map((v) => h('option', { value: v, selected: (f.state || 'enabled') === v }, v)));
  // auto_disable: absent = the server's rule, null = never, else its own.
  const adMode = !('auto_disable' in f) ? 'default' : f.auto_disable === null ? 'never' : 'custom';
  const adKind = h('select', { name: 'auto_disable' }, [['default', 'Server default'], ['never', 'Never'], ['custom', 'After a streak of failures']]
    .map(([v, l]) => h('option', { value: v, selected: adMode === v }, l)));
  const adFailures = h('input', { type: 'number', min: 1, name: 'auto_disable_consecutive_failures', value: f.auto_disable ? f.auto_disable.consecutive_failures : '', placeholder: '20' });
  const adHours = h('input', { type: 'number', min: 0, step: 'any', name: 'auto_disable_min_duration_s', value: f.auto_disable ? f.auto_disable.min_duration_s / 3600 : '', placeholder: '120' });
  const showAD = () => { for (const el of [adFailures, adHours]) el.closest('.field').hidden = adKind.value !== 'custom'; };
  adKind.addEventListener('change', showAD);
  // Web Push: the browser's PushSubscription, pasted as JSON.
  const pushSub = h('textarea', { name: 'destination_subscription', rows: 4, class: 'mono', placeholder: '{"endpoint": "…", "keys": {"p256dh": "…", "auth": "…"}}' });
  if (dest.subscription) pushSub.value = pretty(dest.subscription);
  const urgency = h('select', { name: 'destination_urgency' }, ['very-low', 'low', 'normal', 'high'].map((v) => h('option', { value: v, selected: (dest.urgency || 'normal') === v }, v)));
  const ttl = h('input', { type: 'number', min: 0, max: 2419200, name: 'destination_ttl_s', value: dest.ttl_s ?? '', placeholder: '86400' });
  // Brokers: a connection the operator made, and where on it.
  const conn = h('select', { name: 'destination_connection' });
  const connHint = h('small', { class: 'hint' }, 'Connections are made by an admin (Connections page).');
  const exchange = h('input', { type: 'text', name: 'destination_exchange', value: dest.exchange || '', placeholder: 'events (empty: the default exchange)' });
  const routingKey = h('input', { type: 'text', name: 'destination_routing_key', value: dest.routing_key || '', placeholder: 'empty: the event type' });
  const subject = h('input', { type: 'text', name: 'destination_subject', value: dest.subject || '', placeholder: 'empty: derived from the event type' });
  const stream = h('input', { type: 'text', name: 'destination_stream', value: dest.stream || '', placeholder: 'herald-events' });
  const maxlen = h('input', { type: 'number', min: 0, name: 'destination_maxlen', value: dest.maxlen || '', placeholder: '0 (no trimming)' });
  const topic = h('input', { type: 'text', name: 'destination_topic', value: dest.topic || '', placeholder: 'empty: derived from the event type' });
  const retain = h('input', { type: 'checkbox', name: 'destination_retain', checked: !!dest.retain });
  // One group of fields per type; only the chosen type's group shows.
  const groups = {
    webhook: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'webhook' },
      // The portal's users are the operator's customers: no server flags.
      field('Endpoint URL', url, PORTAL ? 'The https URL of your endpoint; herald signs every request.' : 'http or https; loopback and private addresses need --dev / --allow-private.'),
      field('Method', method)),
    webpush: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'webpush' },
      h('div', { class: 'field wide' }, h('label', { for: 'f-push-sub' }, 'PushSubscription (JSON)'), Object.assign(pushSub, { id: 'f-push-sub' }),
        h('small', { class: 'hint' }, 'Paste JSON.stringify(subscription) from the page that called pushManager.subscribe with herald\'s key (GET /v1/webpush/vapid-public-key).')),
      field('Urgency', urgency), field('TTL (s)', ttl, 'How long the push service keeps an undelivered message; default 86400.'),
      field('Topic', topic, 'Empty: derived from the event key, so a newer message replaces an undelivered one.')),
    broker: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'broker' },
      h('div', { class: 'field' }, h('label', { for: 'f-dest-conn' }, 'Connection'), Object.assign(conn, { id: 'f-dest-conn' }), connHint)),
    amqp: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'amqp' }, field('Exchange', exchange), field('Routing key', routingKey)),
    nats: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'nats' }, field('Subject', subject, 'A JetStream stream must hold it.')),
    redis: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'redis' }, field('Stream', stream), field('Max length', maxlen, 'Approximate trimming (XADD MAXLEN ~).')),
    mqtt: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'mqtt' },
      h('div', { class: 'field' }, h('label', { class: 'check' }, retain, 'Retain'), h('small', { class: 'hint' }, 'QoS 1; the broker keeps the last message per topic.'))),
    listen: h('div', { class: 'dest-group wide form-grid', 'data-dest': 'listen' },
      h('small', { class: 'hint wide' }, 'Deliveries go to `herald listen --subscription ' + (s ? s.id : 'sub_…') + ' --forward http://localhost:3000/hook` on your machine; while none is connected, attempts fail and retry through the tiers.')),
  };
  let connsLoaded = null;
  const loadConns = async (type) => {
    try {
      connsLoaded = connsLoaded || listConnections();
      const all = await connsLoaded;
      const mine = all.filter((c) => c.type === type);
      replace(conn, ...mine.map((c) => h('option', { value: c.name, selected: c.name === dest.connection }, c.name + ' · ' + c.url)));
      if (!mine.length) replace(conn, h('option', { value: '' }, 'No ' + type + ' connection yet'));
      replace(connHint, mine.length ? 'Connections are made by an admin (Connections page).' : 'Create a ' + type + ' connection on the Connections page first.');
    } catch (e) {
      // A tenant's token cannot list connections: the name is typed in.
      if (conn.isConnected) {
        conn.replaceWith(h('input', { type: 'text', name: 'destination_connection', id: 'f-dest-conn', value: dest.connection || '', placeholder: 'the connection name your operator gave you' }));
      }
      replace(connHint, 'Ask your operator for the connection name.');
    }
  };
  const connValue = () => (groups.broker.querySelector('[name=destination_connection]') || conn).value.trim();
  const showDest = () => {
    const t = dtype.value;
    const broker = ['amqp', 'nats', 'redis', 'mqtt'].includes(t);
    for (const [k, g] of Object.entries(groups)) g.hidden = !(k === t || (k === 'broker' && broker));
    url.required = t === 'webhook';
    // The topic field serves webpush and mqtt: it moves to the shown group.
    const topicBox = topic.closest('.field');
    const topicHint = topicBox && topicBox.querySelector('.hint');
    if (t === 'webpush') {
      groups.webpush.append(topicBox);
      topic.placeholder = 'empty: derived from the event key';
      if (topicHint) topicHint.textContent = 'Empty: derived from the event key, so a newer message replaces an undelivered one.';
    }
    if (t === 'mqtt') {
      groups.mqtt.prepend(topicBox);
      topic.placeholder = 'empty: derived from the event type';
      if (topicHint) topicHint.textContent = 'Empty: the event type with "." as "/" (order.created → order/created).';
    }
    stream.required = t === 'redis';
    if (broker) loadConns(t);
  };
  dtype.addEventListener('change', showDest);
  const destOf = () => {
    const t = dtype.value;
    if (t === 'webhook') return null;
    if (t === 'listen') return { type: t };
    if (t === 'webpush') {
      let sub;
      try { sub = JSON.parse(pushSub.value); } catch (e) { throw new APIError(0, 'invalid_field', 'the PushSubscription is not valid JSON: ' + e.message, 'destination.subscription'); }
      const d = { type: t, subscription: { endpoint: sub.endpoint, keys: sub.keys }, urgency: urgency.value };
      const tv = intOr(ttl, 'destination.ttl_s'); if (tv !== undefined) d.ttl_s = tv;
      if (topic.value.trim()) d.topic = topic.value.trim();
      return d;
    }
    const d = { type: t, connection: connValue() };
    if (t === 'amqp') { d.exchange = exchange.value.trim(); if (routingKey.value.trim()) d.routing_key = routingKey.value.trim(); }
    if (t === 'nats' && subject.value.trim()) d.subject = subject.value.trim();
    if (t === 'redis') { d.stream = stream.value.trim(); const m = intOr(maxlen, 'destination.maxlen'); if (m) d.maxlen = m; }
    if (t === 'mqtt') { if (topic.value.trim()) d.topic = topic.value.trim(); d.retain = retain.checked; }
    return d;
  };

  const errSlot = h('div');
  if (s && flashSaved === s.id) {
    flashSaved = null;
    replace(errSlot, notice('Saved.'));
  }

  const filterOf = () => {
    const kind = fkind.value;
    const text = ftext.value.trim();
    if (!text) return null;
    // An expression without a language would be dropped silently and the
    // subscription would receive every event (issue 24).
    if (!kind) throw new APIError(0, 'invalid_field', 'choose the filter\'s language, or clear the expression', 'filter_kind');
    if (kind === 'es_query') {
      try { return { es_query: JSON.parse(text) }; } catch (e) { throw new APIError(0, 'invalid_filter', 'the ES query is not valid JSON: ' + e.message, 'filter.es_query'); }
    }
    return { [kind]: text };
  };
  const typesOf = () => types.value.split(/[,\s]+/).map((t) => t.trim()).filter(Boolean);

  const bodyOf = () => {
    const b = {
      description: description.value, event_types: typesOf(),
      filter: filterOf(), ordering: ordering.value, headers: parseHeaders(headers.value), state: state.value,
    };
    // A webhook is sent as url + method (what every herald version takes);
    // any other type as its destination object.
    const d = destOf();
    if (d) b.destination = d; else { b.url = url.value.trim(); b.method = method.value; }
    const ki = intOr(keyInterval, 'key_interval_ms'); b.key_interval_ms = ki ?? 0;
    const mif = intOr(maxInFlight, 'max_in_flight'); b.max_in_flight = mif ?? 0;
    const to = intOr(timeout, 'timeout_ms'); if (to !== undefined) b.timeout_ms = to;
    const rm = intOr(rlMax, 'rate_limit.max');
    const rp = intOr(rlPer, 'rate_limit.per_seconds');
    b.rate_limit = rm ? { max: rm, per_seconds: rp || 1 } : null;
    if (adKind.value === 'never') b.auto_disable = null;
    else if (adKind.value === 'custom') {
      const n = intOr(adFailures, 'auto_disable.consecutive_failures');
      if (!n) throw new APIError(0, 'invalid_field', 'give the number of failed attempts in a row', 'auto_disable.consecutive_failures');
      const hours = Number(adHours.value.trim() || '0');
      if (!(hours >= 0)) throw new APIError(0, 'invalid_field', 'the duration must be a number of hours', 'auto_disable.min_duration_s');
      b.auto_disable = { consecutive_failures: n, min_duration_s: Math.round(hours * 3600) };
    } else if (s) b.auto_disable = 'default';
    if (!s) {
      if (!PORTAL && tenant.value.trim()) b.tenant = tenant.value.trim();
      if (!PORTAL && allTenants.checked) b.all_tenants = true;
      if (!b.filter) delete b.filter;
      if (!b.rate_limit) delete b.rate_limit;
    }
    return b;
  };

  const form = h('form', {
    class: 'panel form-grid', onsubmit: async (e) => {
      e.preventDefault();
      replace(errSlot);
      clearFieldMarks(form);
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        await submit(bodyOf());
      } catch (err) {
        replace(errSlot, markField(form, err)
          ? h('div', { class: 'error', role: 'alert' }, 'Not saved: ', err.message, h('span', { class: 'muted' }, ' (see the marked field)'))
          : errorBox(err));
      } finally { btn.disabled = false; }
    },
  },
  h('fieldset', { class: 'wide' }, h('legend', {}, 'Destination'),
    field('Type', dtype), ...Object.values(groups)),
  field('Description', description),
  PORTAL ? null : field('Tenant', tenant, s ? 'Set at creation; it cannot change.' : 'Optional: the tenant whose events this subscription receives.'),
  PORTAL ? null : h('div', { class: 'field' }, h('label', { class: 'check' }, allTenants, 'All tenants'),
    h('small', { class: 'hint' }, s ? 'Set at creation; it cannot change.' : 'Untenanted only: also receive every tenant\'s events.')),
  h('div', { class: 'field' }, h('label', { for: 'sub-event-types' }, 'Event types'), Object.assign(types, { id: 'sub-event-types' }),
    catalogPicker(types), h('small', { class: 'hint' }, 'Glob patterns, comma-separated. Empty: every event type except herald.*.')),
  h('fieldset', { class: 'wide' }, h('legend', {}, 'Filter'),
    field('Language', fkind), field('Expression', ftext, 'Evaluated against the event: type, key, version, data.'),
    filterTester(() => ({ filter: filterOf(), event_types: typesOf() }))),
  field('Ordering', ordering),
  field('Key interval (ms)', keyInterval, 'fifo/latest: least time between sends of one key.'),
  h('fieldset', { class: 'wide inline' }, h('legend', {}, 'Rate limit'),
    field('Requests', rlMax), field('per seconds', rlPer), h('small', { class: 'hint' }, 'Empty: no rate limit.')),
  field('Max in flight', maxInFlight, '0: no cap on concurrent requests.'),
  field('Timeout (ms)', timeout, '1–300000; default 10000. For a broker: how long to wait for its acknowledgement.'),
  field('Extra headers', headers, PORTAL ? 'Webhooks only. One "name: value" per line, sent with every request.' : 'Webhooks only. One "name: value" per line; webhook-*, herald-* and hop-by-hop headers are reserved.'),
  field('State', state),
  h('fieldset', { class: 'wide inline auto-disable' }, h('legend', {}, 'Auto-disable'),
    field('When', adKind), field('Failed attempts in a row', adFailures), field('lasting at least (hours)', adHours),
    h('small', { class: 'hint' }, 'A subscription whose endpoint keeps failing is disabled (reason "failing") and herald.subscription.disabled is published; a success resets the streak.')),
  h('div', { class: 'wide' }, errSlot, h('button', { type: 'submit' }, s ? 'Save changes' : 'Create subscription')));
  showDest();
  showAD();
  return form;
}

// DEST_TYPES are the destination types the form offers.
const DEST_TYPES = [
  ['webhook', 'Webhook (HTTP)'],
  ['webpush', 'Web Push (a browser)'],
  ['amqp', 'RabbitMQ (AMQP)'],
  ['nats', 'NATS JetStream'],
  ['redis', 'Redis Streams'],
  ['mqtt', 'MQTT 5'],
  ['listen', 'herald listen (local development)'],
];

// filterTester asks POST /v1/filters/test whether the form's event types and
// filter would receive a pasted event or a recent one.
function filterTester(current) {
  const eventText = h('textarea', { rows: 5, class: 'mono', name: 'test_event', placeholder: '{"type": "order.created", "data": {"total": 120}}' });
  const recent = h('select', { name: 'recent_event' }, h('option', { value: '' }, 'Load a recent event or an example…'));
  const out = h('div', { class: 'filter-result', 'aria-live': 'polite' });
  let loaded = false;
  const recentEvents = new Map();
  recent.addEventListener('focus', async () => {
    if (loaded) return;
    loaded = true;
    try {
      // herald.* alerts only for a subscription that asks for them: they
      // would crowd out the application's events.
      const wantsSystem = (current().event_types || []).some((p) => p.startsWith('herald.'));
      // The catalog's examples first (any token reads the catalog), then
      // recent events where the token may read events.
      const examples = (await listEventTypes().catch(() => [])).filter((t) => t.example !== null);
      if (examples.length) {
        recent.append(h('optgroup', { label: 'Catalog examples' }, examples.map((t) => {
          recentEvents.set('example:' + t.name, { type: t.name, data: t.example });
          return h('option', { value: 'example:' + t.name, title: t.description }, t.name + (t.description ? ' — ' + t.description : ''));
        })));
      }
      if (!can('events:read')) return;
      const page = await api('GET', '/v1/events' + qs({ limit: 25, exclude_system: wantsSystem ? null : 'true' }));
      const group = h('optgroup', { label: 'Recent events' });
      for (const ev of page.data) {
        recentEvents.set(ev.id, ev);
        group.append(h('option', { value: ev.id }, ev.type + ' · ' + ev.id + ' · ' + fmtTime(ev.timestamp)));
      }
      if (!page.data.length) group.append(h('option', { value: '', disabled: true }, 'No events published yet'));
      recent.append(group);
    } catch (e) {
      replace(out, errorBox(e));
    }
  });
  // A result or error belongs to the event it was run on: a new event
  // (typed or loaded) clears it rather than leave, say, a missing_field
  // error under an event that now has a type (issue 24).
  eventText.addEventListener('input', () => replace(out));
  recent.addEventListener('change', () => {
    const ev = recentEvents.get(recent.value);
    if (!ev) return;
    const { type, key, version, data } = ev;
    eventText.value = pretty({ type, key, version, data });
    replace(out);
  });
  const run = async () => {
    replace(out);
    try {
      let event;
      try { event = JSON.parse(eventText.value || 'null'); } catch (e) { throw new APIError(0, 'invalid_json', 'the test event is not valid JSON: ' + e.message, 'event'); }
      if (!event || typeof event !== 'object' || !event.type) throw new APIError(0, 'missing_field', 'paste an event with at least a "type", or load a recent one', 'event.type');
      const { filter, event_types } = current();
      const body = { filter, event: { type: event.type, key: event.key, version: event.version, data: event.data } };
      if (event_types.length) body.event_types = event_types;
      const r = await api('POST', '/v1/filters/test', body);
      replace(out, h('div', { class: 'notice ' + (r.matched ? 'ok' : 'warn'), 'data-matched': String(r.matched) },
        h('strong', {}, r.matched ? 'Match: this subscription would receive the event.' : 'No match: this subscription would not receive the event.'),
        h('span', {}, ' Event types ' + (r.type_matched ? 'match' : 'do not match') + '; filter ' + (r.filter_matched ? 'matches' : 'does not match') + '.')));
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  return h('div', { class: 'tester' },
    h('div', { class: 'tester-head' }, h('strong', {}, 'Test this filter'), recent),
    eventText,
    h('button', { type: 'button', class: 'secondary', onclick: run }, 'Test filter'),
    out);
}
