// API: GET /openapi.json rendered as a readable reference (operations by
// path, parameters, request and response bodies), with no third-party
// renderer. The document is public, so this page fetches it without the token.

import { h, replace, errorBox, pretty } from './lib.js';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

export async function render(main) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'API reference'), h('a', { href: '/openapi.json' }, 'openapi.json')), body);
  let doc;
  try {
    const res = await fetch('/openapi.json', { cache: 'no-store' });
    if (res.status === 404) {
      replace(body, h('div', { class: 'empty' }, h('p', {}, 'The OpenAPI document is not available on this server.'),
        h('p', { class: 'muted' }, 'GET /openapi.json answered 404: this herald build does not serve it. The API is described in docs/api.md.')));
      return;
    }
    if (!res.ok) throw new Error('GET /openapi.json answered ' + res.status);
    doc = await res.json();
  } catch (e) {
    replace(body, errorBox(e));
    return;
  }
  const resolve = (o) => {
    let seen = 0;
    while (o && o.$ref && seen++ < 20) {
      const parts = o.$ref.replace(/^#\//, '').split('/');
      o = parts.reduce((a, k) => (a ? a[k.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined), doc);
    }
    return o || {};
  };
  const refName = (o) => (o && o.$ref ? o.$ref.split('/').pop() : null);
  const schemaView = (schema) => {
    const name = refName(schema);
    const s = resolve(schema);
    return h('details', { class: 'schema' }, h('summary', {}, name ? h('code', {}, name) : (s.type || 'schema')),
      h('pre', {}, pretty(s)));
  };
  const nav = h('nav', { class: 'toc', 'aria-label': 'Operations' });
  const ops = h('div', { class: 'ops' });
  const tags = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      const id = 'op-' + (op.operationId || (m + path)).replace(/[^A-Za-z0-9_-]/g, '-');
      const tag = (op.tags && op.tags[0]) || 'other';
      if (!tags.has(tag)) tags.set(tag, []);
      const params = [...(item.parameters || []), ...(op.parameters || [])].map(resolve);
      const el = h('section', { class: 'op', id },
        h('h3', {}, h('span', { class: 'method ' + m }, m.toUpperCase()), ' ', h('code', {}, path)),
        op.summary ? h('p', {}, op.summary) : null,
        op.description ? h('p', { class: 'muted' }, op.description) : null,
        params.length ? h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Parameter', 'In', 'Required', 'Description'].map((t) => h('th', {}, t)))),
          h('tbody', {}, params.map((p) => h('tr', {}, h('td', {}, h('code', {}, p.name)), h('td', {}, p.in), h('td', {}, p.required ? 'yes' : ''), h('td', {}, p.description || '')))))) : null,
        op.requestBody ? h('div', {}, h('h4', {}, 'Request body'),
          Object.entries(resolve(op.requestBody).content || {}).map(([ct, c]) => h('div', {}, h('span', { class: 'muted small' }, ct + ' '), c.schema ? schemaView(c.schema) : null))) : null,
        h('h4', {}, 'Responses'),
        h('ul', { class: 'responses' }, Object.entries(op.responses || {}).map(([code, r0]) => {
          const r = resolve(r0);
          const content = Object.entries(r.content || {});
          return h('li', {}, h('code', { class: 'code-' + code[0] }, code), ' ', r.description || '',
            content.map(([, c]) => (c.schema ? schemaView(c.schema) : null)));
        })));
      tags.get(tag).push([m, path, id]);
      ops.append(el);
    }
  }
  for (const [tag, list] of tags) {
    nav.append(h('h4', {}, tag), h('ul', {}, list.map(([m, path, id]) => h('li', {}, h('a', { href: '#' + id }, h('span', { class: 'method ' + m }, m.toUpperCase()), ' ', path)))));
  }
  const info = doc.info || {};
  replace(body,
    h('p', {}, h('strong', {}, info.title || 'API'), info.version ? ' ' + info.version : '', doc.openapi ? h('span', { class: 'muted' }, ' · OpenAPI ' + doc.openapi) : null),
    info.description ? h('p', { class: 'muted' }, info.description) : null,
    h('div', { class: 'api-layout' }, nav, ops));
}
