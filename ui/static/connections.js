// Connections (operator only, admin scope): the named broker connections
// that amqp, nats, redis and mqtt subscriptions deliver through. Brokers sit
// on private networks, so only an admin creates them and grants them to
// tenants; the API never returns a connection's password (shown as ***).

import { h, replace, api, qs, errorBox, notice, table, field, fmtTime, tenantCell, markField, clearFieldMarks, APIError } from './lib.js';

// TYPES are the broker types and an example URL of each.
export const TYPES = [
  ['amqp', 'RabbitMQ (AMQP 0-9-1)', 'amqp://guest:guest@127.0.0.1:5672/'],
  ['nats', 'NATS JetStream', 'nats://127.0.0.1:4222'],
  ['redis', 'Redis Streams', 'redis://127.0.0.1:6379/0'],
  ['mqtt', 'MQTT 5', 'mqtt://127.0.0.1:1883'],
];

// listConnections pages through every connection.
export async function listConnections() {
  const all = [];
  let cursor = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('GET', '/v1/connections' + qs({ cursor }));
    all.push(...page.data);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return all;
}

function tenantsText(c) {
  if (c.all_tenants) return h('span', {}, 'all tenants');
  if (!c.tenants || !c.tenants.length) return h('span', { class: 'muted' }, 'admin subscriptions only');
  return c.tenants.map((t) => tenantCell(t));
}

export async function render(main) {
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const listErr = h('div');
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Connections')),
    h('p', { class: 'muted' }, 'Broker connections that subscriptions deliver to (RabbitMQ, NATS JetStream, Redis Streams, MQTT). Only an admin creates them; a tenant\'s subscription may use a connection granted to its tenant. Passwords are stored sealed and never shown.'),
    listErr, list,
    h('h2', {}, 'New connection'), createForm(() => load()));

  const load = async () => {
    try {
      const rows = await listConnections();
      replace(listErr);
      replace(list, table([
        { title: 'Name', cell: (c) => h('code', {}, c.name) },
        { title: 'Type', cell: (c) => c.type },
        { title: 'URL', cell: (c) => h('code', { class: 'clip' }, c.url) },
        { title: 'Tenants', cell: tenantsText },
        { title: 'Created', cell: (c) => fmtTime(c.created_at) },
        {
          title: '', cell: (c) => h('button', {
            type: 'button', class: 'danger small', 'data-delete': c.name, onclick: async (e) => {
              if (!confirm('Delete connection ' + c.name + '?')) return;
              e.target.disabled = true;
              try {
                await api('DELETE', '/v1/connections/' + encodeURIComponent(c.name));
                await load();
              } catch (err) {
                replace(listErr, errorBox(err));
                e.target.disabled = false;
              }
            },
          }, 'Delete'),
        },
      ], rows, [h('p', {}, 'No connections yet.'), h('p', { class: 'muted' }, 'Create one below, then choose it as the destination of a subscription.')]));
    } catch (e) {
      replace(list);
      replace(listErr, errorBox(e));
    }
  };
  await load();
}

function createForm(done) {
  const name = h('input', { type: 'text', name: 'name', required: true, placeholder: 'rabbit-main', pattern: '[A-Za-z0-9._\\-]{1,64}' });
  const type = h('select', { name: 'type' }, TYPES.map(([v, l]) => h('option', { value: v }, l)));
  const url = h('input', { type: 'text', name: 'url', required: true, class: 'mono', placeholder: TYPES[0][2] });
  type.addEventListener('change', () => { url.placeholder = TYPES.find(([v]) => v === type.value)[2]; });
  const tenants = h('input', { type: 'text', name: 'tenants', placeholder: 'acme, globex  (empty: admin subscriptions only)' });
  const all = h('input', { type: 'checkbox', name: 'all_tenants' });
  const out = h('div');
  const form = h('form', {
    class: 'panel form-grid', onsubmit: async (e) => {
      e.preventDefault();
      replace(out);
      clearFieldMarks(form);
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        const list = tenants.value.split(/[,\s]+/).map((t) => t.trim()).filter(Boolean);
        if (all.checked && list.length) throw new APIError(0, 'invalid_field', 'choose either all tenants or a list', 'tenants');
        const body = { name: name.value.trim(), type: type.value, url: url.value.trim(), tenants: all.checked ? 'all' : list };
        const c = await api('POST', '/v1/connections', body);
        form.reset();
        url.placeholder = TYPES[0][2];
        replace(out, notice('Connection ' + c.name + ' created.'));
        await done();
      } catch (err) {
        replace(out, markField(form, err)
          ? h('div', { class: 'error', role: 'alert' }, 'Not created: ', err.message)
          : errorBox(err));
      } finally { btn.disabled = false; }
    },
  },
  field('Name', name, 'Subscriptions refer to it by this name.'),
  field('Type', type),
  h('div', { class: 'field wide' }, h('label', { for: 'conn-url' }, 'URL'), Object.assign(url, { id: 'conn-url' }),
    h('small', { class: 'hint' }, 'With credentials if the broker needs them; the password is sealed at rest and shown as ***.')),
  field('Tenants', tenants, 'Tenants whose subscriptions may use it.'),
  h('div', { class: 'field' }, h('label', { class: 'check' }, all, 'All tenants'), h('small', { class: 'hint' }, 'Open it to every tenant.')),
  h('div', { class: 'wide' }, out, h('button', { type: 'submit' }, 'Create connection')));
  return form;
}
