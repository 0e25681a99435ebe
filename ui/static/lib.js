// Shared helpers: DOM building, the /v1 client, navigation and formatting.
// Untrusted text (anything from the API) only ever reaches the page through
// text nodes and attribute setters, never parsed as HTML.

export const PREFIX = document.documentElement.dataset.prefix || '/ui/';
// PORTAL is the consumer portal's mode (served at /portal/, ADR 0015): the
// same pages, confined by the session's token to one tenant, without the
// operator's overview, API reference or sign-in form.
export const PORTAL = document.documentElement.dataset.mode === 'portal';
// The portal keeps its session apart from an operator's sign-in in the
// same tab (both pages share the origin, hence sessionStorage).
const TOKEN_KEY = PORTAL ? 'herald.portal.token' : 'herald.token';
const THEME_KEY = 'herald.portal.theme';

// h builds an element: h('a', {href: '…', class: 'x', onclick: fn}, 'text', child, [more]).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'disabled' || k === 'selected') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// replace swaps el's children for the given ones.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// link is an in-app link: a click routes without a page load.
export function link(path, ...children) {
  return h('a', { href: PREFIX + path.replace(/^\//, ''), 'data-link': '' }, ...children);
}

export function getToken() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); sessionStorage.removeItem(WHO_KEY); }

// The signed-in token as GET /v1/whoami described it ({scopes, tenant,
// admin}), kept beside the token so a reload keeps what the pages show.
// The portal does not ask: its session always carries the tenant scopes
// (every scope but admin), and it never offers admin pages anyway.
const WHO_KEY = 'herald.who';
export function getWho() {
  try { return JSON.parse(sessionStorage.getItem(WHO_KEY) || 'null'); } catch { return null; }
}
export function setWho(w) { sessionStorage.setItem(WHO_KEY, JSON.stringify(w || null)); }

// can reports whether the signed-in token carries scope (admin carries
// every scope). It only decides what the pages offer: the API checks
// every call anyway. Without a description (a session signed in before
// whoami existed) it offers everything, as the dashboard used to.
export function can(scope) {
  if (PORTAL) return scope !== 'admin';
  const w = getWho();
  if (!w) return true;
  return !!w.admin || (w.scopes || []).includes(scope);
}

// confined reports whether the signed-in token sees one tenant's data
// only (the portal, or a tenant token): pages then leave out their tenant
// filters and columns, which could only repeat that tenant.
export function confined() {
  return PORTAL || !!(getWho() || {}).tenant;
}

// readOnly is the short note a page shows where it leaves out write
// buttons or forms the token lacks scope for.
export function readOnly(scope) {
  return h('p', { class: 'muted small read-only', 'data-read-only': scope },
    'Read-only token: changing this needs the ', h('code', {}, scope), ' scope.');
}

// The portal's theme ({name, accent, logo} or null), kept with its session.
export function getTheme() {
  try { return JSON.parse(sessionStorage.getItem(THEME_KEY) || 'null'); } catch { return null; }
}
export function setTheme(t) { sessionStorage.setItem(THEME_KEY, JSON.stringify(t || null)); }

// APIError is a non-2xx answer: the API's error code, message and field.
export class APIError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

// api calls the /v1 API with the session's token. A 401 signs out and
// returns to the sign-in page (the portal: to its "link expired" page).
// auth: false sends no Authorization header (the portal's link exchange).
// The portal always sends X-Herald-Portal: 1, the header without which
// herald ignores its session cookie (ADR 0025): a tab without a token of
// its own (opened by hand, or by a middle click) uses the browser's
// session through that HttpOnly cookie, which no script here can read.
export async function api(method, path, body, { token, auth = true } = {}) {
  const headers = {};
  const bearer = auth ? (token ?? getToken()) : null;
  if (bearer) headers.Authorization = 'Bearer ' + bearer;
  if (PORTAL) headers['X-Herald-Portal'] = '1';
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, 'network', 'herald did not answer (' + e.message + ')');
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const err = data && data.error ? data.error : {};
    const e = new APIError(res.status, err.code || 'http_' + res.status, err.message || (res.status + ' ' + res.statusText), err.field);
    if (res.status === 401 && token === undefined && auth) {
      clearToken();
      if (PORTAL) { navigate('expired', { replace: true }); throw e; }
      // Several calls of one page can fail together: the first sends the
      // user to sign-in, remembering the page; the others leave it be.
      if (!currentPath().startsWith('sign-in')) navigate('sign-in?next=' + encodeURIComponent(currentPath()));
    }
    throw e;
  }
  return data;
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, v);
  const s = u.toString();
  return s ? '?' + s : '';
}

// currentPath is the route: the path under the prefix, with its query.
export function currentPath() {
  let p = location.pathname.startsWith(PREFIX) ? location.pathname.slice(PREFIX.length) : '';
  return p + location.search;
}

let onNavigate = () => {};
export function setNavigateHandler(fn) { onNavigate = fn; }

// navigate routes to path (relative to the prefix).
export function navigate(path, { replace: rep = false } = {}) {
  const url = PREFIX + path.replace(/^\//, '');
  if (rep) history.replaceState(null, '', url); else history.pushState(null, '', url);
  onNavigate();
}

// errorBox renders an API error where it happened.
export function errorBox(e) {
  if (!e) return null;
  // A 403 is the token's limits, not a broken page: say so plainly.
  if (e instanceof APIError && e.status === 403) {
    return h('div', { class: 'error', role: 'alert', 'data-forbidden': '' },
      h('strong', {}, 'Not allowed with this token'), ': ', e.message.replace(/\.$/, ''),
      '. Sign in with a token that may, or ask the operator for one.');
  }
  const msg = e instanceof APIError
    ? [h('strong', {}, e.code), ': ', e.message, e.field ? h('span', { class: 'muted' }, ' (field ', h('code', {}, e.field), ')') : null]
    : [String(e.message || e)];
  return h('div', { class: 'error', role: 'alert' }, ...msg);
}

// markField shows an error beside the form control it names (the API's
// "field": "filter.cel" is the control named filter, "rate_limit.max" the
// one named rate_limit_max) and marks that control aria-invalid. It
// returns false when no control matches, so the caller shows it elsewhere.
export function markField(form, e) {
  clearFieldMarks(form);
  if (!(e instanceof APIError) || !e.field) return false;
  const f = e.field.replace(/\[\d+\]/g, '');
  const ctl = form.elements.namedItem(f.replace(/\./g, '_')) || form.elements.namedItem(f.split('.')[0]);
  // namedItem gives a list for a name shared by several controls.
  if (!(ctl instanceof Element)) return false;
  const id = (ctl.id || ctl.name) + '-error';
  ctl.setAttribute('aria-invalid', 'true');
  ctl.setAttribute('aria-describedby', id);
  const msg = h('small', { class: 'field-error', id }, e.message);
  const box = ctl.closest('.field');
  if (box) box.append(msg); else ctl.after(msg);
  ctl.focus();
  return true;
}

export function clearFieldMarks(form) {
  form.querySelectorAll('.field-error').forEach((n) => n.remove());
  form.querySelectorAll('[aria-invalid]').forEach((n) => { n.removeAttribute('aria-invalid'); n.removeAttribute('aria-describedby'); });
}

export function notice(text, kind = 'ok') {
  return h('div', { class: 'notice ' + kind, role: 'status' }, text);
}

// Formatting.
export function fmtTime(s) {
  if (!s) return '—';
  const d = new Date(s);
  if (isNaN(d)) return s;
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function timeCell(s) {
  return h('time', { datetime: s || '', title: s || '' }, fmtTime(s));
}

export function fmtAge(seconds) {
  if (seconds === null || seconds === undefined) return '—';
  if (seconds < 1) return seconds > 0 ? Math.round(seconds * 1000) + ' ms' : '0 s';
  if (seconds < 120) return seconds.toFixed(seconds < 10 ? 1 : 0) + ' s';
  if (seconds < 7200) return Math.round(seconds / 60) + ' min';
  if (seconds < 172800) return (seconds / 3600).toFixed(1) + ' h';
  return (seconds / 86400).toFixed(1) + ' d';
}

export function fmtNum(n) {
  if (n === null || n === undefined) return '—';
  return Number(n).toLocaleString();
}

export function fmtRate(r) {
  if (r === null || r === undefined) return '—';
  return (r * 100).toFixed(r === 1 || r === 0 ? 0 : 1) + ' %';
}

const STATE_CLASS = {
  delivered: 'good', enabled: 'good', pending: 'info', in_flight: 'info',
  dead: 'bad', disabled: 'warn', skipped: 'muted', superseded: 'muted', cancelled: 'muted',
  // Sources' states (GET /v1/sources/{name}).
  consuming: 'good', connecting: 'info', failed: 'bad', store_unavailable: 'bad', standby: 'muted', idle: 'muted',
};

export function badge(state) {
  return h('span', { class: 'badge ' + (STATE_CLASS[state] || 'muted') }, String(state).replace('_', ' '));
}

export function pretty(v) {
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}

// toISO turns a datetime-local value (local time) into RFC 3339 UTC.
export function toISO(local) {
  if (!local) return '';
  const d = new Date(local);
  return isNaN(d) ? '' : d.toISOString();
}

// toLocalInput turns RFC 3339 into a datetime-local value.
export function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// table renders rows, or the empty state when there are none. Each column is
// {title, cell: row => node|string, class?}.
export function table(columns, rows, empty) {
  if (!rows.length) return h('div', { class: 'empty' }, empty);
  // "stack": below 700 px each row becomes a labelled card (app.css).
  return h('div', { class: 'table-wrap stack' },
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.class, scope: 'col' }, c.title)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, columns.map((c) => h('td', { class: c.class, 'data-label': c.title }, c.cell(r))))))));
}

// field is a labelled form control with an optional hint.
export function field(label, control, hint) {
  const id = control.id || ('f-' + Math.random().toString(36).slice(2, 9));
  control.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('small', { class: 'hint' }, hint) : null);
}

// idCell keeps an id narrow in a table: app.css (code.id) shows its end —
// the part that differs between ids made in the same second — after an
// ellipsis, while the title and the text (copy, search) hold it whole.
export function idCell(path, id) {
  return link(path, h('code', { class: 'id', title: id }, id));
}

// Cache of subscriptions by id, for showing URLs next to ids.
const subCache = new Map();
export async function subscriptions() {
  const all = [];
  let cursor = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('GET', '/v1/subscriptions' + qs({ limit: 200, cursor }));
    all.push(...page.data);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  subCache.clear();
  for (const s of all) subCache.set(s.id, s);
  return all;
}

export function subLabel(id) {
  const s = subCache.get(id);
  return link('subscriptions/' + encodeURIComponent(id),
    h('span', { class: 'sub-label', title: s ? [s.description, s.url, id].filter(Boolean).join(' · ') : id }, s ? (s.description || s.url || destLabel(s) || id) : id));
}

// destLabel names a non-webhook subscription's destination in a few words.
function destLabel(s) {
  const d = s.destination;
  if (!d || !d.type) return '';
  if (d.type === 'webpush') return 'Web Push';
  return d.type + (d.connection ? ' ' + d.connection : '') + ' → ' + (d.stream || d.exchange || d.subject || d.topic || d.routing_key || 'default');
}

export function copyButton(text) {
  return h('button', {
    type: 'button', class: 'secondary small',
    onclick: async (e) => {
      try { await navigator.clipboard.writeText(text); e.target.textContent = 'Copied'; } catch { e.target.textContent = 'Select and copy'; }
    },
  }, 'Copy');
}

// tenantCell shows a subscription's or token's tenant: its name, the "all
// tenants" badge (an untenanted subscription receiving every tenant's
// events), or a dash for untenanted.
export function tenantCell(tenant, allTenants) {
  if (tenant) return h('code', { 'data-tenant': tenant }, tenant);
  if (allTenants) return h('span', { class: 'badge info' }, 'all tenants');
  return h('span', { class: 'muted' }, '—');
}
