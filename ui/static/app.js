// The dashboard's entry module: layout, sign-in and the client-side router.
// Each page module exports render(main, ctx) and may return a cleanup
// function (the overview's refresh timer), called when the route changes.

import { h, replace, link, api, getToken, setToken, clearToken, getWho, setWho, can, getTheme, setTheme, navigate, setNavigateHandler, currentPath, errorBox, PREFIX, PORTAL, APIError } from './lib.js';
import * as overview from './overview.js';
import * as subs from './subscriptions.js';
import * as events from './events.js';
import * as deliveries from './deliveries.js';
import * as dead from './deadletters.js';
import * as apiref from './apiref.js';
import * as tokens from './tokens.js';
import * as connections from './connections.js';
import * as sources from './sources.js';
import * as eventTypes from './eventtypes.js';

// The portal (PORTAL) shows a tenant's own pages only: no overview (its
// figures span every tenant), no API reference, no sign-in with a token.
// Each entry names the scope its page's reads need (httpapi/server.go):
// the nav leaves out what the signed-in token cannot read (null: any).
const NAV = PORTAL ? [
  ['subscriptions', 'Subscriptions', 'subscriptions:read'],
  ['deliveries', 'Deliveries', 'deliveries:read'],
  ['dead-letters', 'Dead letters', 'deliveries:read'],
  ['events', 'Events', 'events:read'],
] : [
  // The overview's figures are queue-wide (GET /v1/stats): admin.
  ['', 'Overview', 'admin'],
  ['subscriptions', 'Subscriptions', 'subscriptions:read'],
  ['events', 'Events', 'events:read'],
  // The catalog is every token's to read (forms offer its types).
  ['event-types', 'Event types', null],
  ['deliveries', 'Deliveries', 'deliveries:read'],
  ['dead-letters', 'Dead letters', 'deliveries:read'],
  ['sources', 'Sources', 'admin'],
  ['connections', 'Connections', 'admin'],
  ['tokens', 'Tokens', 'admin'],
  ['api', 'API', null],
];

// allowed is the nav as the signed-in token may see it.
function allowed() {
  return NAV.filter(([, , scope]) => !scope || can(scope));
}

// routes: first match wins; params are the regexp's groups.
const ROUTES = PORTAL ? [
  [/^$/, subs.renderList],
  [/^subscriptions\/?$/, subs.renderList],
  [/^subscriptions\/new$/, subs.renderNew],
  [/^subscriptions\/([^/]+)$/, subs.renderDetail],
  [/^events\/?$/, events.renderList],
  [/^events\/([^/]+)$/, events.renderDetail],
  [/^deliveries\/?$/, deliveries.renderList],
  [/^deliveries\/([^/]+)$/, deliveries.renderDetail],
  [/^dead-letters\/?$/, dead.render],
] : [
  [/^$/, overview.render],
  [/^subscriptions\/?$/, subs.renderList],
  [/^subscriptions\/new$/, subs.renderNew],
  [/^subscriptions\/([^/]+)$/, subs.renderDetail],
  [/^events\/?$/, events.renderList],
  [/^events\/([^/]+)$/, events.renderDetail],
  [/^deliveries\/?$/, deliveries.renderList],
  [/^deliveries\/([^/]+)$/, deliveries.renderDetail],
  [/^dead-letters\/?$/, dead.render],
  [/^event-types\/?$/, eventTypes.render],
  [/^sources\/?$/, sources.renderList],
  [/^sources\/new$/, sources.renderNew],
  [/^sources\/([^/]+)$/, sources.renderDetail],
  [/^connections\/?$/, connections.render],
  [/^tokens\/?$/, tokens.render],
  [/^api\/?$/, apiref.render],
];

let cleanup = null;
const app = document.getElementById('app');

function layout(section) {
  const main = h('main', { id: 'main', tabindex: '-1' });
  const nav = h('nav', { 'aria-label': 'Sections' },
    allowed().map(([path, label]) => {
      const a = link(path, label);
      if (path === section) a.setAttribute('aria-current', 'page');
      return a;
    }));
  const header = h('header', { class: 'top' },
    brand(),
    nav,
    PORTAL
      ? h('button', { type: 'button', class: 'link signout', onclick: (ev) => endSession(ev.currentTarget) }, 'End session')
      : h('button', { type: 'button', class: 'link signout', onclick: () => { clearToken(); navigate('sign-in'); } }, 'Sign out'));
  // A token confined to a tenant sees that tenant's data only (the API
  // filters every list): say whose, once, above every page.
  const who = PORTAL ? null : getWho();
  const banner = who && who.tenant
    ? h('div', { class: 'tenant-banner', role: 'note', 'data-tenant-banner': who.tenant },
      'Tenant ', h('code', {}, who.tenant), ': this token sees this tenant\'s data only.')
    : null;
  replace(app, header, banner, main);
  // On a phone the nav scrolls sideways: keep the current section in view.
  const current = nav.querySelector('[aria-current]');
  if (current) nav.scrollLeft = Math.max(0, current.offsetLeft - nav.clientWidth / 2 + current.clientWidth / 2);
  return main;
}

// endSession revokes the portal session's token on the server (so a copy
// left anywhere stops working), then forgets it here. The token is
// forgotten even when the call fails: a 401 means it was already dead;
// otherwise the page says it could not be revoked and will expire.
// A tab without a token of its own ends the session by its cookie; the
// answer clears the cookie, so the browser's other tabs end with it.
async function endSession(button) {
  button.disabled = true;
  let revoked = true;
  try {
    // token: null (no token of this tab's) still sends the cookie, and
    // keeps api() from redirecting on a 401.
    await api('DELETE', '/v1/portal/sessions/current', undefined, { token: getToken() });
  } catch (e) {
    revoked = e instanceof APIError && e.status === 401;
  }
  viaCookie = false;
  clearToken();
  navigate(revoked ? 'expired?ended=1' : 'expired?ended=unrevoked', { replace: true });
}

// brand is the header's home link: herald's, or the portal theme's logo
// and name.
function brand() {
  const t = PORTAL ? getTheme() : null;
  if (!PORTAL) {
    return h('a', { class: 'brand', href: PREFIX, 'data-link': '' }, h('img', { src: PREFIX + 'assets/favicon.svg', alt: '', width: 22, height: 22 }), 'herald');
  }
  const name = (t && t.name) || 'Webhooks';
  // The logo is a data: URL the API validated (an image type, base64); an
  // <img> never runs an SVG's scripts.
  const logo = t && t.logo && t.logo.startsWith('data:image/') ? h('img', { src: t.logo, alt: '', class: 'logo', height: 24 }) : null;
  return h('a', { class: 'brand', href: PREFIX, 'data-link': '', 'data-portal-name': '' }, logo, name);
}

// applyTheme sets the portal theme's accent colour (a CSS custom property
// set through the CSSOM, which the CSP allows; no inline style).
function applyTheme() {
  const t = getTheme();
  if (t && /^#[0-9a-fA-F]{6}$/.test(t.accent || '')) {
    document.documentElement.style.setProperty('--accent', t.accent);
    document.documentElement.style.setProperty('--accent-soft', t.accent + '22');
  }
}

// expiredPage is all a portal shows without a session: no token field.
// After "End session" (message set) it says the session ended rather than
// that a link expired.
function expiredPage(message) {
  const t = getTheme();
  const who = (t && t.name) || 'the service that sent it';
  document.title = message ? 'Session ended' : 'Link expired';
  replace(app, h('div', { class: 'signin' }, h('div', { class: 'signin-card', 'data-portal-expired': '' },
    h('h1', {}, message ? 'Session ended' : 'This link has expired or was already used'),
    h('p', {}, message || ('Portal links work once and for a limited time. Ask ' + who + ' for a new one.')))));
}

// exchangeLink trades the one-time link in the URL's fragment for a
// session. The fragment is removed from the address first, so neither the
// history nor a reload can replay it.
async function exchangeLink() {
  const m = /(?:^#|&)link=([^&]+)/.exec(location.hash);
  if (!m) return false;
  history.replaceState(null, '', location.pathname + location.search);
  clearToken();
  try {
    const s = await api('POST', '/v1/portal/sessions', { link: decodeURIComponent(m[1]) }, { auth: false });
    viaCookie = false;
    setToken(s.token);
    setTheme(s.theme);
  } catch (e) {
    expiredPage(e instanceof APIError && e.status === 401 ? null : 'The portal could not open: ' + e.message);
    return true;
  }
  return false;
}

// viaCookie is true once this page found the browser's portal session
// through its cookie (cookieSession): the tab has no token of its own.
let viaCookie = false;

// cookieSession asks the server whether the browser has a portal session
// (its HttpOnly cookie, which only the server sees) and how its portal
// looks: a portal page opened in a new tab continues it, themed, instead
// of showing "link expired". It returns null when there is one, else what
// the expired page should say.
async function cookieSession() {
  try {
    const s = await api('GET', '/v1/portal/sessions/current', undefined, { auth: false });
    setTheme(s.theme);
    viaCookie = true;
    return null;
  } catch (e) {
    return e instanceof APIError && e.status === 401 ? '' : 'The portal could not open: ' + e.message;
  }
}

function signIn(next) {
  document.title = 'Sign in · herald';
  let err = null;
  const input = h('input', { type: 'password', name: 'token', id: 'token', autocomplete: 'current-password', required: true, placeholder: 'API token', spellcheck: 'false' });
  const errSlot = h('div');
  const form = h('form', {
    class: 'signin-card', onsubmit: async (e) => {
      e.preventDefault();
      const token = input.value.trim();
      replace(errSlot);
      try {
        // Any valid token signs in; the pages then show what it allows.
        const who = await api('GET', '/v1/whoami', undefined, { token });
        setToken(token);
        setWho(who);
        navigate(next && !next.startsWith('sign-in') ? next : '', { replace: true });
      } catch (e2) {
        err = e2;
        replace(errSlot, errorBox(e2 instanceof APIError && e2.status === 401
          ? new APIError(401, 'unauthorized', 'herald refused this token: it is unknown, expired or revoked. The admin token is in herald-data/admin.token (or --api-token).')
          : e2));
      }
    },
  },
  h('h1', {}, h('img', { src: PREFIX + 'assets/favicon.svg', alt: '', width: 28, height: 28 }), 'herald'),
  h('p', { class: 'muted' }, 'Sign in with an API token: the dashboard shows what its scopes allow. The first start of herald serve writes the admin token to ',
    h('code', {}, 'herald-data/admin.token'), '. The token stays in this browser tab (sessionStorage) until you sign out or close it.'),
  h('label', { for: 'token' }, 'API token'), input, errSlot,
  h('button', { type: 'submit' }, 'Sign in'));
  replace(app, h('div', { class: 'signin' }, form));
  input.focus();
  return err;
}

// routeSeq numbers route() calls: a page whose render finishes after the
// user has moved on is cleaned up at once instead of keeping its timers.
let routeSeq = 0;

function runCleanup(c) {
  try { c(); } catch { /* the old page is gone anyway */ }
}

async function route() {
  const seq = ++routeSeq;
  if (cleanup) { runCleanup(cleanup); cleanup = null; }
  if (PORTAL && await exchangeLink()) return;
  const full = currentPath();
  const [path, query] = full.split('?');
  const params = new URLSearchParams(query || '');
  if (PORTAL) {
    if (path !== 'expired' && !getToken() && !viaCookie) {
      const why = await cookieSession();
      if (seq !== routeSeq) return;
      if (why) { expiredPage(why); return; }
    }
    applyTheme();
    if (path === 'expired' || (!getToken() && !viaCookie)) {
      const ended = params.get('ended');
      expiredPage(ended === 'unrevoked'
        ? 'Session ended in this browser, but the server could not be reached to revoke it; it stops working when it expires. Open a new portal link to come back.'
        : ended ? 'You are signed out here and the session no longer works anywhere. Open a new portal link to come back.' : null);
      return;
    }
  } else if (path === 'sign-in' || !getToken()) {
    signIn(path === 'sign-in' ? params.get('next') : full);
    return;
  }
  let section = path.split('/')[0];
  let target = path;
  const nav = allowed();
  // Home is the overview, which needs admin: any other token starts on
  // the first page it may read.
  if (!PORTAL && target === '' && !can('admin') && nav.length) {
    target = section = nav[0][0];
  }
  const main = layout(nav.some(([p]) => p === section) ? section : '');
  const entry = NAV.find(([p]) => p === section);
  if (entry && entry[2] && !can(entry[2])) {
    document.title = entry[1] + ' · herald';
    main.append(h('h1', {}, entry[1]), errorBox(new APIError(403, 'forbidden', 'this page needs the ' + entry[2] + ' scope, which this token lacks')));
    return;
  }
  for (const [re, render] of ROUTES) {
    const m = target.match(re);
    if (!m) continue;
    const label = NAV.find(([p]) => p === section);
    const site = PORTAL ? ((getTheme() || {}).name || 'Webhooks') : 'herald';
    // The portal's home (its subscriptions) has no nav label of its own:
    // the brand alone, not "Example Corp · Example Corp" (issue 24).
    document.title = label ? label[1] + ' · ' + site : site;
    try {
      const c = await render(main, { params, args: m.slice(1).map(decodeURIComponent) });
      if (typeof c === 'function') {
        if (seq === routeSeq) cleanup = c; else runCleanup(c);
      }
    } catch (e) {
      main.append(errorBox(e));
    }
    return;
  }
  main.append(h('h1', {}, 'Not found'), h('p', {}, 'No dashboard page at this address. ', link('', PORTAL ? 'Go to your subscriptions' : 'Go to the overview'), '.'));
}

let lastRoute = null;
setNavigateHandler(() => { lastRoute = currentPath(); route(); });
// A fragment link (the API page's table of contents) also fires popstate:
// only a change of path or query re-renders.
window.addEventListener('popstate', () => {
  if (currentPath() === lastRoute) return;
  lastRoute = currentPath();
  route();
});
lastRoute = currentPath();
// A portal link opened in a tab already showing the portal changes only
// the fragment: exchange it too.
if (PORTAL) window.addEventListener('hashchange', () => { if (/link=/.test(location.hash)) route(); });
document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[data-link]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = a.getAttribute('href');
  if (!href.startsWith(PREFIX) && href + '/' !== PREFIX) return;
  e.preventDefault();
  navigate(href.slice(PREFIX.length));
  window.scrollTo(0, 0);
});
route();
