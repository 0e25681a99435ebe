// The dashboard's entry module: layout, sign-in and the client-side router.
// Each page module exports render(main, ctx) and may return a cleanup
// function (the overview's refresh timer), called when the route changes.

import { h, replace, link, api, getToken, setToken, clearToken, navigate, setNavigateHandler, currentPath, errorBox, PREFIX, APIError } from './lib.js';
import * as overview from './overview.js';
import * as subs from './subscriptions.js';
import * as events from './events.js';
import * as deliveries from './deliveries.js';
import * as dead from './deadletters.js';
import * as apiref from './apiref.js';

const NAV = [
  ['', 'Overview'],
  ['subscriptions', 'Subscriptions'],
  ['events', 'Events'],
  ['deliveries', 'Deliveries'],
  ['dead-letters', 'Dead letters'],
  ['api', 'API'],
];

// routes: first match wins; params are the regexp's groups.
const ROUTES = [
  [/^$/, overview.render],
  [/^subscriptions\/?$/, subs.renderList],
  [/^subscriptions\/new$/, subs.renderNew],
  [/^subscriptions\/([^/]+)$/, subs.renderDetail],
  [/^events\/?$/, events.renderList],
  [/^events\/([^/]+)$/, events.renderDetail],
  [/^deliveries\/?$/, deliveries.renderList],
  [/^deliveries\/([^/]+)$/, deliveries.renderDetail],
  [/^dead-letters\/?$/, dead.render],
  [/^api\/?$/, apiref.render],
];

let cleanup = null;
const app = document.getElementById('app');

function layout(section) {
  const main = h('main', { id: 'main', tabindex: '-1' });
  const nav = h('nav', { 'aria-label': 'Sections' },
    NAV.map(([path, label]) => {
      const a = link(path, label);
      if (path === section) a.setAttribute('aria-current', 'page');
      return a;
    }));
  const header = h('header', { class: 'top' },
    h('a', { class: 'brand', href: PREFIX, 'data-link': '' }, h('img', { src: PREFIX + 'assets/favicon.svg', alt: '', width: 22, height: 22 }), 'herald'),
    nav,
    h('button', { type: 'button', class: 'link signout', onclick: () => { clearToken(); navigate('sign-in'); } }, 'Sign out'));
  replace(app, header, main);
  // On a phone the nav scrolls sideways: keep the current section in view.
  const current = nav.querySelector('[aria-current]');
  if (current) nav.scrollLeft = Math.max(0, current.offsetLeft - nav.clientWidth / 2 + current.clientWidth / 2);
  return main;
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
        await api('GET', '/v1/stats', undefined, { token });
        setToken(token);
        navigate(next && !next.startsWith('sign-in') ? next : '', { replace: true });
      } catch (e2) {
        err = e2;
        replace(errSlot, errorBox(e2 instanceof APIError && e2.status === 401
          ? new APIError(401, 'unauthorized', 'herald refused this token. Use the admin token (herald-data/admin.token or --api-token).')
          : e2));
      }
    },
  },
  h('h1', {}, h('img', { src: PREFIX + 'assets/favicon.svg', alt: '', width: 28, height: 28 }), 'herald'),
  h('p', { class: 'muted' }, 'Sign in with an API token. The first start of herald serve writes the admin token to ',
    h('code', {}, 'herald-data/admin.token'), '. The token stays in this browser tab (sessionStorage) until you sign out or close it.'),
  h('label', { for: 'token' }, 'API token'), input, errSlot,
  h('button', { type: 'submit' }, 'Sign in'));
  replace(app, h('div', { class: 'signin' }, form));
  input.focus();
  return err;
}

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* the old page is gone anyway */ } cleanup = null; }
  const full = currentPath();
  const [path, query] = full.split('?');
  const params = new URLSearchParams(query || '');
  if (path === 'sign-in' || !getToken()) {
    signIn(path === 'sign-in' ? params.get('next') : full);
    return;
  }
  const section = path.split('/')[0];
  const main = layout(NAV.some(([p]) => p === section) ? section : '');
  for (const [re, render] of ROUTES) {
    const m = path.match(re);
    if (!m) continue;
    const label = NAV.find(([p]) => p === section);
    document.title = (label ? label[1] : 'herald') + ' · herald';
    try {
      const c = await render(main, { params, args: m.slice(1).map(decodeURIComponent) });
      if (typeof c === 'function') cleanup = c;
    } catch (e) {
      main.append(errorBox(e));
    }
    return;
  }
  main.append(h('h1', {}, 'Not found'), h('p', {}, 'No dashboard page at this address. ', link('', 'Go to the overview'), '.'));
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
