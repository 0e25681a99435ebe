// Sources (operator only, admin scope): the broker queues, streams and
// topics herald consumes events from (issue 23). The list with each
// source's state and counters, the create/edit form (the chosen type's
// fields only, a connection picker of that type, the JMESPath mapping),
// and a source's page with its live status over every node and the
// messages it rejected. The portal has no route to it (app.js).

import {
  h, replace, api, qs, link, navigate, errorBox, notice, table, field, badge, fmtNum, fmtTime, timeCell,
  tenantCell, markField, clearFieldMarks, APIError,
} from './lib.js';
import { TYPES, listConnections } from './connections.js';

// LIST_MS and DETAIL_MS are how often the list and a source's page re-read
// the status (nodes report every few seconds).
const LIST_MS = 5000;
const DETAIL_MS = 3000;

// STATUS_MAX bounds the sources whose status the list fetches (one GET
// each: GET /v1/sources carries no status); the others show a dash.
const STATUS_MAX = 100;

// WHERE are the fields that say where on the broker a source reads, per
// type, in the form's order (herald.CheckSource's table).
const WHERE = {
  amqp: ['queue'],
  nats: ['stream', 'durable', 'subject'],
  redis: ['stream', 'group'],
  mqtt: ['topic'],
};

// DOC_FIELD names the message document's field that carries the broker's
// own name for the message, per type (the default event type).
const DOC_FIELD = { amqp: 'routing_key', nats: 'subject', redis: 'stream', mqtt: 'topic' };
const DOC_LABEL = { amqp: 'the routing key', nats: 'the subject', redis: 'the stream\'s name', mqtt: 'the topic' };

// A source just created or saved: its re-rendered page says so
// ({name, text}).
let flash = null;

// whereText says where a source reads, in one line.
export function whereText(s) {
  switch (s.type) {
    case 'amqp': return 'queue ' + (s.queue || '?');
    case 'nats': return 'stream ' + (s.stream || '?') + (s.subject ? ' · ' + s.subject : '') + ' · durable ' + (s.durable || 'herald');
    case 'redis': return 'stream ' + (s.stream || '?') + ' · group ' + (s.group || 'herald');
    case 'mqtt': return 'topic ' + (s.topic || '?');
    default: return '';
  }
}

// listSources pages through every source.
async function listSources() {
  const all = [];
  let cursor = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('GET', '/v1/sources' + qs({ limit: 200, cursor }));
    all.push(...page.data);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return all;
}

// flags are a source's enabled and ordered settings as badges (one
// element: a stacked table cell is a two-column grid).
function flags(s) {
  return h('span', {},
    s.enabled ? badge('enabled') : badge('disabled'),
    s.ordered ? [' ', h('span', { class: 'badge info', title: 'One node at a time consumes, in broker order' }, 'ordered')] : null);
}

export async function renderList(main) {
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' });
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const errSlot = h('div');
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Sources'), link('sources/new', h('span', { class: 'button' }, 'New source'))),
    h('p', { class: 'muted' }, 'Broker queues, streams and topics that herald consumes events from (RabbitMQ, NATS JetStream, Redis Streams, MQTT). A message is acknowledged to the broker only after its event is stored; a message that cannot become an event is rejected and listed on its source\'s page.'),
    status, errSlot, body);

  let timer = null;
  let stopped = false;
  const tick = async () => {
    try {
      const rows = await listSources();
      // GET /v1/sources/{name} answers the status; a source deleted
      // meanwhile keeps its row without one.
      const withStatus = await Promise.all(rows.map((s, i) => (i < STATUS_MAX
        ? api('GET', '/v1/sources/' + encodeURIComponent(s.name)).catch(() => s) : s)));
      if (stopped) return;
      replace(errSlot);
      replace(body, table([
        { title: 'Name', class: 'word', cell: (s) => link('sources/' + encodeURIComponent(s.name), h('code', {}, s.name)) },
        { title: 'Type', class: 'word', cell: (s) => s.type },
        { title: 'Connection', cell: (s) => h('code', { class: 'clip' }, s.connection) },
        { title: 'Reads from', cell: (s) => h('span', { class: 'mono small wrap' }, whereText(s)) },
        { title: 'Tenant', cell: (s) => tenantCell(s.tenant) },
        { title: 'Settings', cell: flags },
        { title: 'State', cell: (s) => (s.status ? h('div', { 'data-state': s.status.state }, badge(s.status.state), s.status.last_error ? h('div', { class: 'muted small clip', title: s.status.last_error }, s.status.last_error) : null) : '—') },
        { title: 'Consumed', class: 'r', cell: (s) => (s.status ? fmtNum(s.status.consumed) : '—') },
        { title: 'Rejected', class: 'r', cell: (s) => (s.status ? h('span', { class: s.status.rejected ? 'status bad' : '' }, fmtNum(s.status.rejected)) : '—') },
      ], withStatus, [h('p', {}, 'No sources yet.'),
        h('p', { class: 'muted' }, 'A source reads a RabbitMQ queue, a NATS stream, a Redis stream or an MQTT topic through a connection and publishes each message as an event.'),
        link('sources/new', h('span', { class: 'button' }, 'Create the first source'))]));
      status.textContent = 'Updated ' + new Date().toLocaleTimeString() + ' · refreshes every ' + LIST_MS / 1000 + ' s';
    } catch (e) {
      if (stopped) return;
      replace(errSlot, errorBox(e));
      if (body.querySelector('p.muted')) replace(body);
    }
    if (!stopped) timer = setTimeout(tick, LIST_MS);
  };
  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}

export async function renderNew(main) {
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'New source'), link('sources', '← All sources')));
  main.append(sourceForm(null, async (body) => {
    const s = await api('POST', '/v1/sources', body);
    flash = { name: s.name, text: 'Source ' + s.name + ' created. Its status below follows what the nodes report.' };
    navigate('sources/' + encodeURIComponent(s.name));
  }));
}

export async function renderDetail(main, { args: [name] }) {
  const path = '/v1/sources/' + encodeURIComponent(name);
  let s;
  try {
    s = await api('GET', path);
  } catch (e) {
    main.append(h('h1', {}, 'Source'), errorBox(e), link('sources', '← All sources'));
    return;
  }
  const reload = () => navigate('sources/' + encodeURIComponent(name), { replace: true });
  const actionSlot = h('div');
  const act = (label, cls, fn) => h('button', {
    type: 'button', class: cls, onclick: async (e) => {
      e.target.disabled = true;
      replace(actionSlot);
      try { await fn(); } catch (err) { replace(actionSlot, errorBox(err)); } finally { e.target.disabled = false; }
    },
  }, label);
  const saved = flash && flash.name === s.name ? flash.text : null;
  flash = null;

  const statusNote = h('p', { class: 'muted small', 'aria-live': 'polite' });
  const statusBox = h('div', { 'data-source-status': '' });
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, h('code', {}, s.name)), link('sources', '← All sources')),
    h('p', { class: 'meta' }, flags(s), ' ', h('span', {}, s.type + ' · connection '), h('code', {}, s.connection),
      h('span', { class: 'mono small' }, ' · ' + whereText(s)),
      s.tenant ? [' · tenant ', tenantCell(s.tenant)] : null,
      h('span', { class: 'muted' }, ' · created ' + fmtTime(s.created_at) + ' · updated ' + fmtTime(s.updated_at))),
    h('div', {}, saved ? notice(saved) : null),
    h('div', { class: 'actions' },
      s.enabled
        ? act('Disable', 'secondary', async () => { await api('PATCH', path, { enabled: false }); reload(); })
        : act('Enable', 'secondary', async () => { await api('PATCH', path, { enabled: true }); reload(); }),
      act('Delete', 'danger', async () => {
        if (!confirm('Delete source ' + s.name + '? herald stops consuming; the messages left on the broker stay there.')) return;
        await api('DELETE', path);
        navigate('sources');
      })),
    actionSlot,
    h('div', { class: 'section-head' }, h('h2', {}, 'Status'), statusNote),
    statusBox,
    h('h2', {}, 'Settings'),
    sourceForm(s, async (body) => {
      await api('PATCH', path, body);
      flash = { name: s.name, text: 'Source ' + s.name + ' saved.' };
      reload();
    }));

  let timer = null;
  let stopped = false;
  const draw = (st) => replace(statusBox, statusView(st));
  draw(s.status);
  statusNote.textContent = 'Updated ' + new Date().toLocaleTimeString() + ' · refreshes every ' + DETAIL_MS / 1000 + ' s';
  const tick = async () => {
    try {
      const cur = await api('GET', path);
      if (stopped) return;
      draw(cur.status);
      statusNote.textContent = 'Updated ' + new Date().toLocaleTimeString() + ' · refreshes every ' + DETAIL_MS / 1000 + ' s';
    } catch (e) {
      if (stopped) return;
      statusNote.textContent = '';
      replace(statusBox, errorBox(e));
      // Deleted elsewhere: nothing left to follow.
      if (e instanceof APIError && e.status === 404) return;
    }
    if (!stopped) timer = setTimeout(tick, DETAIL_MS);
  };
  timer = setTimeout(tick, DETAIL_MS);
  return () => { stopped = true; clearTimeout(timer); };
}

// STATE_TEXT explains each state in a few words.
const STATE_TEXT = {
  consuming: 'connected and receiving',
  connecting: 'dialling the broker or setting up the consumer',
  failed: 'the last attempt failed; retrying with backoff',
  store_unavailable: 'the store refused a commit: consuming paused, nothing acknowledged; it resumes by itself',
  standby: 'ordered: another node is the consumer',
  disabled: 'disabled: no node consumes',
  idle: 'no node has reported in the last 30 s',
};

// statusView is a source's status: the counters over every node, the last
// error, the per-node rows and the recent rejects.
function statusView(st) {
  if (!st) return h('p', { class: 'muted' }, 'No status reported.');
  const card = (label, value, extra, cls) => h('div', { class: 'card' + (cls ? ' ' + cls : '') },
    h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), extra ? h('div', { class: 'card-extra' }, extra) : null);
  return [
    h('div', { class: 'cards' },
      h('div', { class: 'card', 'data-state': st.state },
        h('div', { class: 'card-label' }, 'State'), h('div', { class: 'card-state' }, badge(st.state)),
        h('div', { class: 'card-extra' }, STATE_TEXT[st.state] || '')),
      card('Consumed', fmtNum(st.consumed), 'messages stored as events'),
      card('Duplicates', fmtNum(st.duplicates), 'already stored (redeliveries)'),
      card('Rejected', fmtNum(st.rejected), 'could not become events', st.rejected ? 'bad' : ''),
      card('Pending', st.pending === undefined || st.pending === null ? '—' : fmtNum(st.pending),
        st.pending === undefined || st.pending === null ? 'the broker does not report it' : 'waiting on the broker', st.pending ? 'warn' : '')),
    st.last_error ? h('div', { class: 'error', role: 'status', 'data-last-error': '' }, h('strong', {}, 'last error'), ': ', st.last_error) : null,
    h('h3', { class: 'sub-head' }, 'Nodes'),
    table([
      { title: 'Node', class: 'word', cell: (n) => h('code', {}, n.node) },
      { title: 'State', class: 'word', cell: (n) => badge(n.state) },
      { title: 'Consumed', class: 'r', cell: (n) => fmtNum(n.consumed) },
      { title: 'Duplicates', class: 'r', cell: (n) => fmtNum(n.duplicates) },
      { title: 'Rejected', class: 'r', cell: (n) => fmtNum(n.rejected) },
      { title: 'Pending', class: 'r', cell: (n) => (n.pending === undefined || n.pending === null ? '—' : fmtNum(n.pending)) },
      { title: 'Last error', cell: (n) => (n.last_error ? h('span', { class: 'small' }, n.last_error) : h('span', { class: 'muted' }, '—')) },
      { title: 'Reported', cell: (n) => timeCell(n.updated_at) },
    ], st.nodes || [], [h('p', {}, 'No node has reported on this source yet.'), h('p', { class: 'muted' }, 'Every node running herald serve reports here every few seconds once it consumes (or waits, for an ordered source).')]),
    h('h3', { class: 'sub-head' }, 'Recent rejects'),
    h('p', { class: 'muted small' }, 'The newest of the messages that could not become events (kept: the last 100). They were not requeued: RabbitMQ dead-letters them through the queue\'s own dead-letter exchange, JetStream terminates them, Redis copies them to <stream>:rejected.'),
    table([
      { title: 'At', cell: (r) => timeCell(r.at) },
      { title: 'Reason', class: 'word', cell: (r) => h('code', { 'data-reason': r.reason }, r.reason) },
      { title: 'Message', cell: (r) => h('div', {}, h('div', {}, r.message), r.message_id ? h('div', { class: 'muted small' }, 'message id ', h('code', {}, r.message_id)) : null, r.node ? h('div', { class: 'muted small' }, 'node ', r.node) : null) },
      { title: 'Excerpt', cell: (r) => (r.excerpt ? h('code', { class: 'excerpt' }, r.excerpt) : h('span', { class: 'muted' }, '—')) },
    ], st.recent_rejects || [], [h('p', {}, 'No message rejected.')]),
  ];
}

function intOr(input, name) {
  const v = input.value.trim();
  if (v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new APIError(0, 'invalid_field', name + ' must be a whole number', name);
  return n;
}

// sourceForm creates a source (s null) or edits one; submit gets the body
// (for an edit, every field of its type, so a cleared field is cleared).
function sourceForm(s, submit) {
  const f = s || { enabled: true };
  const m = f.mapping || {};
  const name = h('input', { type: 'text', name: 'name', required: true, value: f.name || '', placeholder: 'orders-queue', pattern: '[A-Za-z0-9._\\-]{1,64}', disabled: !!s });
  const type = h('select', { name: 'type', disabled: !!s }, TYPES.map(([v, l]) => h('option', { value: v, selected: f.type === v }, l)));
  // An edit keeps its connection while the list loads.
  const conn = h('select', { name: 'connection' }, s ? h('option', { value: s.connection, selected: true }, s.connection) : null);
  const connHint = h('small', { class: 'hint' }, 'Loading connections…');
  const input = (n, placeholder) => h('input', { type: 'text', name: n, value: f[n] || '', placeholder, class: 'mono' });
  const where = {
    queue: input('queue', 'orders'),
    stream: input('stream', 'ORDERS'),
    durable: input('durable', 'herald'),
    subject: input('subject', 'orders.> (empty: every subject)'),
    group: input('group', 'herald'),
    topic: input('topic', 'orders/#'),
  };
  // Each field's label and hint; stream's depends on the type.
  const whereHint = {
    queue: () => 'An existing queue: herald declares it passively and reports a missing one in the status.',
    stream: (t) => (t === 'nats' ? 'The JetStream stream to read.' : 'The stream to read; created (with the group) when missing.'),
    durable: () => 'The durable pull consumer; default herald, created when missing.',
    subject: () => 'Optional filter on the stream\'s subjects (wildcards allowed).',
    group: () => 'The consumer group; default herald, created when missing.',
    topic: () => 'A topic filter (+ and # allowed), read as the shared subscription $share/herald/<topic> so nodes compete.',
  };
  const whereLabel = { queue: 'Queue', stream: 'Stream', durable: 'Durable', subject: 'Subject filter', group: 'Group', topic: 'Topic' };
  const whereBoxes = Object.fromEntries(Object.entries(where).map(([k, ctl]) => [k, field(whereLabel[k], ctl, ' ')]));

  const mapInput = (k, placeholder) => h('input', { type: 'text', name: 'mapping_' + k, value: m[k] || '', class: 'mono', placeholder, spellcheck: 'false' });
  const mapping = {
    id: mapInput('id', 'message_id'),
    type: mapInput('type', ''),
    key: mapInput('key', 'body.order_id'),
    version: mapInput('version', 'body.revision'),
    tenant: mapInput('tenant', 'headers."x-tenant"'),
    data: mapInput('data', 'body.payload'),
  };
  const mapHint = {
    id: () => 'Default: the broker\'s message id, else the SHA-256 of the body (a redelivery stays a duplicate).',
    type: (t) => 'Default: ' + DOC_LABEL[t] + ' (' + DOC_FIELD[t] + ').',
    key: () => 'Default: none. Ordering and debouncing group events by key.',
    version: () => 'Default: none. An integer; ordering: latest keeps the highest.',
    tenant: () => 'Default: the source\'s tenant (none when unset).',
    data: () => 'Default: the whole body.',
  };
  const mapLabel = { id: 'Event id', type: 'Event type', key: 'Event key', version: 'Event version', tenant: 'Event tenant', data: 'Event data' };
  const mapBoxes = Object.fromEntries(Object.entries(mapping).map(([k, ctl]) => [k, field(mapLabel[k], ctl, ' ')]));
  const docLine = h('p', { class: 'hint mapping-doc' });

  const tenant = h('input', { type: 'text', name: 'tenant', value: f.tenant || '', placeholder: 'acme (empty: none)', pattern: '[A-Za-z0-9._\\-]{1,64}' });
  const prefetch = h('input', { type: 'number', min: 0, max: 10000, name: 'prefetch', value: f.prefetch || '', placeholder: '256 (default)' });
  const ordered = h('input', { type: 'checkbox', name: 'ordered', checked: !!f.ordered });
  const enabled = h('input', { type: 'checkbox', name: 'enabled', checked: !!f.enabled });

  let connsLoaded = null;
  const loadConns = async (t) => {
    try {
      connsLoaded = connsLoaded || listConnections();
      const all = await connsLoaded;
      if (type.value !== t) return;
      const mine = all.filter((c) => c.type === t);
      replace(conn, ...mine.map((c) => h('option', { value: c.name, selected: c.name === f.connection }, c.name + ' · ' + c.url)));
      // A source whose connection was deleted meanwhile still shows it.
      if (s && s.connection && !mine.some((c) => c.name === s.connection)) conn.prepend(h('option', { value: s.connection, selected: true }, s.connection + ' (missing)'));
      if (!conn.options.length) replace(conn, h('option', { value: '' }, 'No ' + t + ' connection yet'));
      const an = t === 'amqp' || t === 'mqtt' ? 'an ' : 'a ';
      replace(connHint, mine.length ? 'Only ' + t + ' connections (Connections page); with a tenant, one granted to it.' : ['Create ' + an + t + ' connection on the ', link('connections', 'Connections'), ' page first.']);
    } catch (e) {
      replace(connHint, errorBox(e));
    }
  };
  const show = () => {
    const t = type.value;
    for (const [k, box] of Object.entries(whereBoxes)) {
      const on = WHERE[t].includes(k);
      box.hidden = !on;
      // Only the shown type's required fields hold the form back.
      where[k].required = on && (k === 'queue' || k === 'stream' || k === 'topic');
      box.querySelector('.hint').textContent = whereHint[k](t);
    }
    for (const [k, box] of Object.entries(mapBoxes)) box.querySelector('.hint').textContent = mapHint[k](t);
    mapping.type.placeholder = DOC_FIELD[t];
    replace(docLine, 'Optional JMESPath expressions, each evaluated over the message as ',
      h('code', {}, '{body, headers, ' + DOC_FIELD[t] + ', message_id, timestamp}'),
      ' (body: the parsed JSON; a body that is not JSON is rejected). Leave one empty for its default.');
    loadConns(t);
  };
  type.addEventListener('change', show);

  const bodyOf = () => {
    const t = type.value;
    const b = { connection: conn.value };
    for (const k of WHERE[t]) {
      const v = where[k].value.trim();
      if (v || s) b[k] = v;
    }
    const mp = {};
    for (const [k, ctl] of Object.entries(mapping)) if (ctl.value.trim()) mp[k] = ctl.value.trim();
    if (Object.keys(mp).length) b.mapping = mp; else if (s) b.mapping = null;
    const tv = tenant.value.trim();
    if (tv || s) b.tenant = tv;
    const pf = intOr(prefetch, 'prefetch');
    if (pf !== undefined) b.prefetch = pf; else if (s) b.prefetch = 0;
    b.ordered = ordered.checked;
    b.enabled = enabled.checked;
    if (!s) { b.name = name.value.trim(); b.type = t; }
    return b;
  };

  const errSlot = h('div');
  const form = h('form', {
    class: 'panel form-grid source-form', onsubmit: async (e) => {
      e.preventDefault();
      replace(errSlot);
      clearFieldMarks(form);
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        await submit(bodyOf());
      } catch (err) {
        replace(errSlot, markField(form, err)
          ? h('div', { class: 'error', role: 'alert' }, (s ? 'Not saved: ' : 'Not created: '), err.message, h('span', { class: 'muted' }, ' (see the marked field)'))
          : errorBox(err));
      } finally { btn.disabled = false; }
    },
  },
  field('Name', name, s ? 'It cannot change.' : 'Letters, digits, . _ -; the API and CLI refer to it by this name.'),
  field('Type', type, s ? 'It cannot change.' : null),
  h('fieldset', { class: 'wide' }, h('legend', {}, 'Broker'),
    h('div', { class: 'form-grid' },
      h('div', { class: 'field' }, h('label', { for: 'f-src-conn' }, 'Connection'), Object.assign(conn, { id: 'f-src-conn' }), connHint),
      ...Object.values(whereBoxes))),
  h('fieldset', { class: 'wide' }, h('legend', {}, 'Mapping'), docLine,
    h('div', { class: 'form-grid' }, ...Object.values(mapBoxes))),
  field('Tenant', tenant, 'Pins every event to this tenant; a mapped tenant must equal it. The connection must be granted to it.'),
  field('Prefetch', prefetch, 'Messages held unacknowledged per consumer, 1–10000; empty: 256.'),
  h('div', { class: 'field' }, h('label', { class: 'check' }, ordered, 'Ordered'),
    h('small', { class: 'hint' }, 'One node at a time consumes, so broker order is publish order. Otherwise every node consumes.')),
  h('div', { class: 'field' }, h('label', { class: 'check' }, enabled, 'Enabled'),
    h('small', { class: 'hint' }, 'Disabled: no node consumes; messages wait on the broker.')),
  h('div', { class: 'wide' }, errSlot, h('button', { type: 'submit' }, s ? 'Save changes' : 'Create source')));
  show();
  return form;
}
