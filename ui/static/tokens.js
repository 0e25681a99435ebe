// Tokens (operator only, admin scope): the stored API tokens, creating one
// (shown once), revoking one, and a tenant's one-time portal link. The
// portal has no route or nav item to it (app.js adds both only outside
// PORTAL), and a portal session's token lacks the admin scope anyway.

import { h, replace, api, qs, errorBox, notice, table, field, fmtTime, copyButton, tenantCell, APIError } from './lib.js';

// SCOPES are the API's token scopes (docs/api.md, "Scopes"); admin cannot
// be combined with a tenant, which the API enforces (400).
export const SCOPES = [
  ['events:publish', 'publish events'],
  ['events:read', 'read events'],
  ['subscriptions:read', 'read subscriptions'],
  ['subscriptions:write', 'create, change and delete subscriptions'],
  ['deliveries:read', 'read deliveries, dead letters and their stats'],
  ['deliveries:write', 'retry and redrive deliveries'],
  ['admin', 'everything, tokens and queue-wide figures included'],
];

// TENANT is the API's tenant syntax: 1–64 of A-Z a-z 0-9 . _ -.
const TENANT = '[A-Za-z0-9._\\-]{1,64}';

// clearStale removes the errors of earlier actions on the page once a
// later one succeeds.
function clearStale(el) {
  const main = el.closest('main');
  if (main) main.querySelectorAll('.error').forEach((n) => n.remove());
}

// onceBox shows a credential that the API returns only once.
function onceBox(title, value, warning) {
  return h('div', { class: 'secret-box', role: 'status' },
    h('p', {}, title),
    h('div', { class: 'secret-row' }, h('code', { class: 'secret', 'data-secret': '' }, value), copyButton(value)),
    h('p', { class: 'muted small' }, warning));
}

export async function render(main) {
  const created = h('div');
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const listErr = h('div');
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Tokens')),
    h('p', { class: 'muted' }, 'API tokens for services and people. A token with a tenant sees only that tenant\'s subscriptions, events and deliveries. herald stores only a hash of each token.'),
    created,
    h('h2', {}, 'Stored tokens'), listErr, list,
    h('h2', {}, 'New token'), createForm(created, () => load()),
    h('h2', {}, 'Portal link'), portalForm());

  const load = async () => {
    try {
      const rows = [];
      let cursor = '';
      for (let i = 0; i < 20; i++) {
        const page = await api('GET', '/v1/tokens' + qs({ cursor }));
        rows.push(...page.data);
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
      replace(list, table([
        { title: 'Name', cell: (t) => h('div', {}, h('strong', {}, t.name || '—'), h('div', { class: 'muted small mono' }, t.id)) },
        { title: 'Scopes', cell: (t) => (t.scopes || []).map((s) => h('code', { class: 'chip' }, s)) },
        { title: 'Tenant', cell: (t) => tenantCell(t.tenant) },
        { title: 'Expires', cell: (t) => t.expires_at ? fmtTime(t.expires_at) : h('span', { class: 'muted' }, 'never') },
        { title: 'Created', cell: (t) => fmtTime(t.created_at) },
        { title: '', cell: (t) => revokeButton(t, listErr, load) },
      ], rows, [h('p', {}, 'No stored tokens.'), h('p', { class: 'muted' }, 'A token given with --api-token is not stored, so it is not listed. Create one below for each service that calls the API; give it only the scopes it needs.')]));
    } catch (e) {
      replace(list, errorBox(e));
    }
  };
  await load();
}

function revokeButton(t, errSlot, reload) {
  return h('button', {
    type: 'button', class: 'danger small', 'data-revoke': t.id, onclick: async (e) => {
      if (!confirm('Revoke the token "' + (t.name || t.id) + '"? Every request with it fails from now on. This cannot be undone.')) return;
      e.target.disabled = true;
      replace(errSlot);
      try {
        await api('DELETE', '/v1/tokens/' + encodeURIComponent(t.id));
        clearStale(e.target);
        replace(errSlot, notice('Token "' + (t.name || t.id) + '" revoked.'));
        await reload();
      } catch (err) {
        const msg = err instanceof APIError && err.status === 409
          ? new APIError(409, err.code, err.message + ' — you are signed in with this token. Create another admin token, sign in with it, then revoke this one.')
          : err;
        replace(errSlot, errorBox(msg));
        e.target.disabled = false;
      }
    },
  }, 'Revoke');
}

function createForm(created, reload) {
  const name = h('input', { type: 'text', name: 'token_name', required: true, maxlength: 100, placeholder: 'billing-service' });
  const checks = SCOPES.map(([s, what]) => h('label', { class: 'check' },
    h('input', { type: 'checkbox', name: 'scope', value: s }), h('code', {}, s), h('span', { class: 'muted small' }, ' ' + what)));
  const tenant = h('input', { type: 'text', name: 'token_tenant', pattern: TENANT, placeholder: 'acme (empty: every tenant)' });
  const expires = h('input', { type: 'datetime-local', name: 'token_expires' });
  const errSlot = h('div');
  const form = h('form', {
    class: 'panel form-grid', onsubmit: async (e) => {
      e.preventDefault();
      replace(errSlot);
      const scopes = checks.map((l) => l.querySelector('input')).filter((c) => c.checked).map((c) => c.value);
      const body = { name: name.value.trim(), scopes };
      if (tenant.value.trim()) body.tenant = tenant.value.trim();
      if (expires.value) {
        const d = new Date(expires.value);
        if (!isNaN(d)) body.expires_at = d.toISOString();
      }
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        if (!scopes.length) throw new APIError(0, 'missing_field', 'tick at least one scope', 'scopes');
        const t = await api('POST', '/v1/tokens', body);
        clearStale(form);
        replace(created, onceBox('Token "' + t.name + '" created. Copy it now:', t.token,
          'This is the only time herald shows this token; it keeps only a hash. If it is lost, revoke it and create another.'));
        form.reset();
        await reload();
        // The box is above the list, near the top: scroll it into view.
        window.scrollTo(0, 0);
      } catch (err) {
        replace(errSlot, errorBox(err));
      } finally {
        btn.disabled = false;
      }
    },
  },
  field('Name', name, 'What or who uses it; shown in this list.'),
  h('fieldset', { class: 'wide checks' }, h('legend', {}, 'Scopes'), checks),
  field('Tenant', tenant, 'Optional: confine the token to one tenant. Not with the admin scope.'),
  field('Expires', expires, 'Optional, your local time; empty: never.'),
  h('div', { class: 'wide' }, errSlot, h('button', { type: 'submit' }, 'Create token')));
  return form;
}

// portalForm asks for a tenant's one-time consumer portal link
// (POST /v1/tenants/{tenant}/portal; default lifetime 1 h).
export function portalForm(initialTenant) {
  const tenant = h('input', { type: 'text', name: 'portal_tenant', required: true, pattern: TENANT, value: initialTenant || '', placeholder: 'acme' });
  const out = h('div');
  const form = h('form', {
    class: 'panel form-grid portal-link', onsubmit: async (e) => {
      e.preventDefault();
      replace(out);
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        const r = await api('POST', '/v1/tenants/' + encodeURIComponent(tenant.value.trim()) + '/portal', {});
        clearStale(form);
        replace(out, onceBox('Portal link for ' + tenant.value.trim() + ' (works once, until ' + fmtTime(r.expires_at) + '):', r.url,
          'Send it to the tenant over a channel you trust. Anyone who opens it first gets a session for this tenant\'s subscriptions and deliveries.'));
      } catch (err) {
        replace(out, errorBox(err));
      } finally {
        btn.disabled = false;
      }
    },
  },
  field('Tenant', tenant, 'A one-time link to the consumer portal, where the tenant manages its own subscriptions.'),
  h('div', { class: 'wide' }, h('button', { type: 'submit', class: 'secondary' }, 'Create portal link'), out));
  return form;
}
