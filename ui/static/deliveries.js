// Deliveries: a filtered list (subscription, state, time) and one delivery
// with every attempt — the headers it sent and received as stored
// (credentials masked when stored), status, duration, error class, response
// excerpt — why a pending one
// waits, and a retry button.

import {
  h, replace, api, qs, link, navigate, errorBox, notice, table, field, badge, timeCell, fmtTime, idCell,
  subscriptions as loadSubs, subLabel, toISO, toLocalInput, can, readOnly, confined,
} from './lib.js';

// LIVE_MS is how often a list or a running delivery is re-read.
export const LIVE_MS = 3000;

export const STATES = ['pending', 'in_flight', 'delivered', 'dead', 'skipped', 'superseded', 'cancelled'];

const WAITING = {
  key: 'an earlier delivery of the same key goes first (ordering), or the key interval runs',
  maturity: "its retry tier's delay has not passed yet",
  rate_limit: "the subscription's rate limit is used up",
  in_flight_cap: "the subscription's max in flight is reached",
  paused: 'the endpoint asked herald to pause (429/503 with Retry-After)',
};

export function deliveryTable(rows, empty) {
  return table([
    { title: 'Delivery', cell: (d) => idCell('deliveries/' + encodeURIComponent(d.id), d.id) },
    { title: 'State', cell: (d) => badge(d.state) },
    { title: 'Subscription', cell: (d) => subLabel(d.subscription_id) },
    { title: 'Event', cell: (d) => idCell('events/' + encodeURIComponent(d.event_id), d.event_id) },
    { title: 'Attempts', class: 'r', cell: (d) => String(d.attempt_count ?? 0) },
    { title: 'Last result', cell: (d) => d.last_status || d.last_error ? h('span', { title: d.last_error_message || '' }, [d.last_status ? String(d.last_status) : null, d.last_error ? h('code', {}, d.last_error) : null].filter(Boolean).flatMap((x, i) => i ? [' ', x] : [x])) : '—' },
    { title: 'Created', cell: (d) => timeCell(d.created_at) },
  ], rows, empty);
}

export async function renderList(main, { params }) {
  const subs = await loadSubs().catch(() => []);
  const sub = h('select', { name: 'subscription_id' }, h('option', { value: '' }, 'All subscriptions'),
    subs.map((s) => h('option', { value: s.id, selected: params.get('subscription_id') === s.id }, (s.description || s.url) + ' (' + s.id + ')')));
  const state = h('select', { name: 'state' }, h('option', { value: '' }, 'Any state'),
    STATES.map((s) => h('option', { value: s, selected: params.get('state') === s }, s.replace('_', ' '))));
  const since = h('input', { type: 'datetime-local', name: 'since', value: toLocalInput(params.get('since')) });
  const until = h('input', { type: 'datetime-local', name: 'until', value: toLocalInput(params.get('until')) });
  // The tenant filter (by the subscription's tenant) is the operator's.
  const tenant = confined() ? null : h('input', { type: 'text', name: 'tenant', value: params.get('tenant') || '', placeholder: 'acme (exact)' });
  const form = h('form', {
    class: 'filters', onsubmit: (e) => {
      e.preventDefault();
      navigate('deliveries' + qs({ subscription_id: sub.value, state: state.value, tenant: tenant ? tenant.value.trim() : '', since: toISO(since.value), until: toISO(until.value) }));
    },
  }, field('Subscription', sub), field('State', state), tenant ? field('Tenant', tenant) : null, field('Created from', since), field('Created before', until),
  h('div', { class: 'filter-actions' }, h('button', { type: 'submit' }, 'Filter'), link('deliveries', 'Clear')));
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Deliveries')), form, list);

  const query = { subscription_id: params.get('subscription_id'), state: params.get('state'), tenant: confined() ? null : params.get('tenant'), since: params.get('since'), until: params.get('until'), event_id: params.get('event_id'), limit: 50 };
  let rows = [];
  let paged = false;
  let lastJSON = '';
  const more = async (cursor) => {
    try {
      const page = await api('GET', '/v1/deliveries' + qs({ ...query, cursor }));
      if (cursor) paged = true;
      const json = JSON.stringify(page);
      if (!cursor) {
        // A refresh of the first page: redraw only when something changed.
        if (json === lastJSON) return;
        lastJSON = json;
        rows = [];
      }
      rows.push(...page.data);
      const filtered = Object.values(query).filter(Boolean).length > 1;
      replace(list, deliveryTable(rows, filtered
        ? [h('p', {}, 'No delivery matches these filters.'), link('deliveries', 'Show all deliveries')]
        : [h('p', {}, 'No deliveries yet.'), h('p', { class: 'muted' }, 'Publish an event that a subscription receives (POST /v1/events or herald events publish) and its deliveries show up here.')]),
      page.next_cursor ? h('button', { type: 'button', class: 'secondary more', onclick: () => more(page.next_cursor) }, 'Load more') : null);
    } catch (e) {
      replace(list, errorBox(e));
    }
  };
  await more('');
  // Live: the first page refreshes every few seconds until the user pages on.
  const timer = setInterval(() => { if (!paged) more(''); }, LIVE_MS);
  return () => clearInterval(timer);
}

// headersView is one attempt's headers, folded: those it stored (bounded,
// credentials shown as *** by the API) or an older attempt's rebuilt
// request, which says so in note.
function headersView(cls, title, headers, note) {
  const rows = Object.entries(headers || {}).sort(([x], [y]) => x.localeCompare(y));
  return h('details', { class: cls },
    h('summary', {}, title + ' (' + rows.length + ')'),
    note ? h('p', { class: 'muted note' }, note) : null,
    rows.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'headers' }, h('tbody', {},
      rows.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', { class: 'mono' }, v))))))
      : h('p', { class: 'muted' }, 'None.'));
}

export function attemptsView(attempts) {
  if (!attempts.length) return h('div', { class: 'empty' }, 'No attempt yet.');
  return h('ol', { class: 'attempts' }, attempts.map((a) => h('li', { class: 'attempt ' + (a.error ? 'failed' : 'ok') },
    h('div', { class: 'attempt-head' },
      h('strong', {}, 'Attempt ' + a.n),
      h('span', { class: 'status ' + (a.error ? 'bad' : 'good') }, a.status ? 'HTTP ' + a.status : 'no response'),
      a.error ? h('code', { class: 'error-class' }, a.error) : null,
      h('span', { class: 'muted' }, a.duration_ms + ' ms · tier ' + a.tier + ' · ' + fmtTime(a.at))),
    a.error_message ? h('p', { class: 'error-message' }, a.error_message) : null,
    a.request_headers ? headersView('request-headers', 'Request headers (as sent)', a.request_headers)
      : a.request ? headersView('request rebuilt', 'Request: ' + a.request.method + ' ' + a.request.url + ' — rebuilt',
        a.request.headers,
        'Rebuilt from the subscription as it is now: this attempt was recorded before herald stored the headers it sent.') : null,
    a.response_headers ? headersView('response-headers', 'Response headers', a.response_headers) : null,
    h('details', { class: 'response', open: !!a.response_excerpt },
      h('summary', {}, 'Response excerpt'),
      a.response_excerpt ? h('pre', {}, a.response_excerpt) : h('p', { class: 'muted' }, 'Empty.')))));
}

export async function renderDetail(main, { args: [id] }) {
  const d = await api('GET', '/v1/deliveries/' + encodeURIComponent(id)).catch((e) => e);
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Delivery'), link('deliveries', '← All deliveries')));
  if (d instanceof Error) { main.append(errorBox(d)); return; }
  await loadSubs().catch(() => []);
  // timers reload this page (after a retry, or while it runs); the
  // cleanup returned below stops them when the user leaves, so a reload
  // never pulls them back here from another page.
  const timers = [];
  const reloadIn = (ms) => timers.push(setTimeout(() => navigate('deliveries/' + encodeURIComponent(id), { replace: true }), ms));
  const actionSlot = h('div');
  const retry = h('button', {
    type: 'button', onclick: async () => {
      retry.disabled = true;
      try {
        await api('POST', '/v1/deliveries/' + encodeURIComponent(id) + '/retry', {});
        replace(actionSlot, notice('Sent back to tier 0; it will be attempted again shortly.'));
        reloadIn(1500);
      } catch (e) {
        replace(actionSlot, errorBox(e));
        retry.disabled = false;
      }
    },
  }, 'Retry now');
  const finished = !['pending', 'in_flight'].includes(d.state);
  const dl = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
  main.append(
    h('dl', { class: 'facts' },
      dl('Id', h('code', {}, d.id)),
      dl('State', badge(d.state)),
      dl('Subscription', subLabel(d.subscription_id)),
      dl('Event', link('events/' + encodeURIComponent(d.event_id), h('code', {}, d.event_id))),
      d.event_key ? dl('Key', h('code', {}, d.event_key)) : null,
      d.event_version !== undefined ? dl('Version', String(d.event_version)) : null,
      dl('Tier', String(d.tier)),
      dl('Next attempt', d.next_attempt_at ? timeCell(d.next_attempt_at) : '—'),
      dl('Waiting for', d.waiting_for ? h('span', {}, h('code', {}, d.waiting_for), ' — ' + (WAITING[d.waiting_for] || '')) : (finished ? '— (finished)' : 'nothing: it is due')),
      dl('Created', timeCell(d.created_at)),
      dl('Updated', timeCell(d.updated_at))),
    h('div', { class: 'actions' }, !can('deliveries:write') ? readOnly('deliveries:write') : finished ? retry : h('span', { class: 'muted' }, 'Retry is available once the delivery has finished.')),
    actionSlot,
    h('h2', {}, 'Attempts (' + (d.attempts || []).length + ')'),
    attemptsView(d.attempts || []));
  // Follow a delivery that is still running.
  if (!finished) reloadIn(LIVE_MS);
  return () => timers.forEach(clearTimeout);
}
