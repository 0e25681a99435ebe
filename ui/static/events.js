// Events: search by id, type, key and time range (GET /v1/events; herald.*
// alerts only when asked for), and one event with its payload and every
// delivery it fanned out to, with "Resend to…" (replay.js).

import { h, replace, api, qs, link, navigate, errorBox, table, field, timeCell, idCell, pretty, toISO, toLocalInput, subscriptions as loadSubs, PORTAL, confined } from './lib.js';
import { deliveryTable, LIVE_MS } from './deliveries.js';
import { resendControl } from './replay.js';

export async function renderList(main, { params }) {
  const id = h('input', { type: 'search', name: 'id', placeholder: 'evt_… or your id' });
  const type = h('input', { type: 'text', name: 'type', value: params.get('type') || '', placeholder: 'order.* or exact' });
  const key = h('input', { type: 'text', name: 'key', value: params.get('key') || '', placeholder: 'exact key' });
  const since = h('input', { type: 'datetime-local', name: 'since', value: toLocalInput(params.get('since')) });
  const until = h('input', { type: 'datetime-local', name: 'until', value: toLocalInput(params.get('until')) });
  // The tenant filter is the operator's; a portal session sees one tenant.
  const tenant = confined() ? null : h('input', { type: 'text', name: 'tenant', value: params.get('tenant') || '', placeholder: 'acme (exact)' });
  // herald's own alerts (herald.delivery.dead…) are left out unless asked
  // for, or the type searched for is one of them: after a run of dead
  // letters they would fill the page.
  const system = h('input', { type: 'checkbox', name: 'system', checked: params.get('system') === '1' });
  const form = h('form', {
    class: 'filters', onsubmit: (e) => {
      e.preventDefault();
      if (id.value.trim()) { navigate('events/' + encodeURIComponent(id.value.trim())); return; }
      navigate('events' + qs({ type: type.value.trim(), key: key.value.trim(), tenant: tenant ? tenant.value.trim() : '', since: toISO(since.value), until: toISO(until.value), system: system.checked ? '1' : '' }));
    },
  }, field('Event id', id), field('Type', type), field('Key', key), tenant ? field('Tenant', tenant) : null, field('From', since), field('Before', until),
  h('div', { class: 'field' }, h('label', { class: 'check' }, system, 'herald.* alerts')),
  h('div', { class: 'filter-actions' }, h('button', { type: 'submit' }, 'Search'), link('events', 'Clear')));
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Events')), form, list);

  const withSystem = params.get('system') === '1' || (params.get('type') || '').startsWith('herald.');
  const query = { type: params.get('type'), key: params.get('key'), tenant: confined() ? null : params.get('tenant'), since: params.get('since'), until: params.get('until'), limit: 50, exclude_system: withSystem ? null : 'true' };
  const filtered = query.type || query.key || query.tenant || query.since || query.until;
  const rows = [];
  const more = async (cursor) => {
    try {
      const page = await api('GET', '/v1/events' + qs({ ...query, cursor }));
      rows.push(...page.data);
      replace(list, table([
        { title: 'Event', cell: (e) => idCell('events/' + encodeURIComponent(e.id), e.id) },
        { title: 'Type', cell: (e) => h('code', {}, e.type) },
        { title: 'Key', cell: (e) => e.key ? h('code', {}, e.key) : '—' },
        confined() ? null : { title: 'Tenant', cell: (e) => e.tenant ? h('code', { 'data-tenant': e.tenant }, e.tenant) : '—' },
        { title: 'Version', class: 'r', cell: (e) => e.version ?? '—' },
        { title: 'Published', cell: (e) => timeCell(e.timestamp) },
        { title: 'Data', cell: (e) => h('code', { class: 'clip' }, JSON.stringify(e.data)) },
      ].filter(Boolean), rows, filtered
        ? [h('p', {}, 'No event matches this search.'), link('events', 'Show all events')]
        : [h('p', {}, 'No events yet.'), h('p', { class: 'muted' }, 'Publish one with herald events publish --type order.created --data \'{"total": 120}\' or POST /v1/events.')]),
      page.next_cursor ? h('button', { type: 'button', class: 'secondary more', onclick: () => more(page.next_cursor) }, 'Load more') : null);
    } catch (e) {
      replace(list, errorBox(e));
    }
  };
  await more('');
}

export async function renderDetail(main, { args: [id] }) {
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Event'), link('events', '← All events')));
  let ev;
  try {
    ev = await api('GET', '/v1/events/' + encodeURIComponent(id));
  } catch (e) {
    main.append(errorBox(e));
    return;
  }
  await loadSubs().catch(() => []);
  const dl = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
  const deliveries = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const resendSlot = h('div');
  main.append(
    h('dl', { class: 'facts' },
      dl('Id', h('code', {}, ev.id)), dl('Type', h('code', {}, ev.type)),
      ev.key ? dl('Key', h('code', {}, ev.key)) : null,
      !PORTAL ? dl('Tenant', ev.tenant ? h('code', { 'data-tenant': ev.tenant }, ev.tenant) : h('span', { class: 'muted' }, 'none')) : null,
      ev.version !== undefined ? dl('Version', String(ev.version)) : null,
      dl('Published', timeCell(ev.timestamp))),
    h('h2', {}, 'Payload'), h('pre', { class: 'payload' }, pretty(ev.data)),
    h('h2', {}, 'Deliveries'), resendSlot, deliveries);
  let timer = null;
  let stopped = false;
  const load = async () => {
    let running = false;
    try {
      const rows = [];
      let cursor = '';
      for (let i = 0; i < 10; i++) {
        const page = await api('GET', '/v1/deliveries' + qs({ event_id: ev.id, limit: 200, cursor }));
        rows.push(...page.data);
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
      if (stopped) return;
      running = rows.some((d) => d.state === 'pending' || d.state === 'in_flight');
      replace(deliveries, deliveryTable(rows, [h('p', {}, 'This event went to no subscription.'), h('p', { class: 'muted' }, 'No subscription\'s event types and filter matched it when it was published.')]),
        running ? h('p', { class: 'muted small' }, 'Following the deliveries still running…') : null);
    } catch (e) {
      replace(deliveries, errorBox(e));
    }
    // Follow the deliveries until every one has finished.
    if (running && !stopped) timer = setTimeout(load, LIVE_MS);
  };
  await load();
  replace(resendSlot, await resendControl(ev, async () => { clearTimeout(timer); await load(); }));
  return () => { stopped = true; clearTimeout(timer); };
}
