// Overview: the queue per tier from GET /v1/stats and this node's last hour
// from GET /v1/stats/history, refreshed every few seconds.

import { h, replace, api, errorBox, fmtAge, fmtNum, fmtRate, link } from './lib.js';
import { lineChart } from './charts.js';

// REFRESH_MS is how often the overview polls (the history's interval is 10 s).
const REFRESH_MS = 5000;

// TENANTS is how many tenants the overview lists; GET /v1/stats/tenants
// sums the rest in "other".
const TENANTS = 10;

// WINDOWS are the chart windows offered, in minutes; the choice lasts for
// the tab's session.
const WINDOWS = [[5, '5 min'], [15, '15 min'], [60, '1 hour']];
let windowMin = 15;

export async function render(main) {
  const cards = h('div', { class: 'cards' });
  const tiers = h('div');
  const tenants = h('div');
  const charts = h('div', { class: 'charts' });
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' });
  const errSlot = h('div');
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Overview'), status),
    errSlot, cards,
    h('h2', {}, 'Queue by tier'), tiers, tenants,
    h('div', { class: 'section-head' }, h('h2', {}, 'This node, recent history'), windowPicker()), charts);

  // The window shown: herald keeps one hour in memory; shorter windows
  // make a young process's few minutes readable.
  function windowPicker() {
    const group = h('div', { class: 'segmented', role: 'group', 'aria-label': 'Chart window' });
    const draw = () => replace(group, WINDOWS.map(([min, label]) => h('button', {
      type: 'button', class: min === windowMin ? 'on' : '', 'aria-pressed': String(min === windowMin),
      onclick: () => { windowMin = min; draw(); if (last) drawCharts(last); },
    }, label)));
    draw();
    return group;
  }
  let last = null;

  let timer = null;
  let stopped = false;
  const tick = async () => {
    try {
      const [stats, hist, ten] = await Promise.all([api('GET', '/v1/stats'), api('GET', '/v1/stats/history'), api('GET', '/v1/stats/tenants?limit=' + TENANTS)]);
      if (stopped) return;
      replace(errSlot);
      draw(stats, hist);
      drawTenants(ten);
      status.textContent = 'Updated ' + new Date().toLocaleTimeString() + ' · refreshes every ' + REFRESH_MS / 1000 + ' s';
    } catch (e) {
      if (stopped) return;
      replace(errSlot, errorBox(e));
    }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  };

  function draw(stats, hist) {
    const pending = stats.tiers.reduce((a, t) => a + t.pending, 0);
    const inflight = stats.tiers.reduce((a, t) => a + t.in_flight, 0);
    const oldest = Math.max(0, ...stats.tiers.map((t) => t.oldest_pending_age_s || 0));
    const due = stats.tiers.reduce((a, t) => a + (t.due || 0), 0);
    // oldest_pending_age_s counts due deliveries only (how late the oldest
    // is): pending work that waits for its retry tier is not late, and
    // "oldest 0 s" beside 35 pending read as a stuck figure (issue 24).
    const pendingExtra = !pending ? 'none' : due ? 'oldest due ' + fmtAge(oldest) : 'none due: ' + (pending === 1 ? 'it waits' : 'they wait') + ' for a retry tier';
    const card = (label, value, extra, cls) => h('div', { class: 'card ' + (cls || '') }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), extra ? h('div', { class: 'card-extra' }, extra) : null);
    replace(cards,
      card('Pending', fmtNum(pending), pendingExtra),
      card('In flight', fmtNum(inflight)),
      card('Delivered', fmtNum(stats.delivered_total), 'in total'),
      card('Dead letters', fmtNum(stats.dead), stats.dead ? link('dead-letters', 'Review and redrive') : 'none', stats.dead ? 'bad' : ''),
      card('Throttled', fmtNum(stats.throttled ?? 0), 'due, held by a rate limit or cap', stats.throttled ? 'warn' : ''));

    replace(tiers, h('div', { class: 'table-wrap stack', 'data-tiers': '' }, h('table', { class: 'num' },
      h('thead', {}, h('tr', {}, ['Tier', 'Delay', 'Pending', 'Due', 'Held', 'In flight', 'Oldest due'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, stats.tiers.map((t) => h('tr', {},
        h('td', { 'data-label': 'Tier' }, String(t.tier), t.removed ? h('span', { class: 'badge muted' }, 'removed') : null),
        h('td', { 'data-label': 'Delay' }, t.delay ?? '—'),
        h('td', { 'data-label': 'Pending' }, fmtNum(t.pending)),
        h('td', { 'data-label': 'Due' }, fmtNum(t.due)),
        h('td', { 'data-label': 'Held' }, fmtNum(t.held)),
        h('td', { 'data-label': 'In flight' }, fmtNum(t.in_flight)),
        h('td', { 'data-label': 'Oldest due' }, t.due ? fmtAge(t.oldest_pending_age_s) : '—')))))));

    last = hist;
    drawCharts(hist);
  }

  // drawTenants shows the busiest tenants (most queued work, then most
  // dead), the rest summed on one line; nothing while no subscription has
  // a tenant.
  function drawTenants(ten) {
    const rows = (ten.data || []).filter((t) => t.tenant);
    if (!rows.length) { replace(tenants); return; }
    const untenanted = (ten.data || []).find((t) => !t.tenant);
    const line = (label, t) => h('tr', {},
      h('td', { 'data-label': 'Tenant' }, label),
      h('td', { 'data-label': 'Subscriptions' }, fmtNum(t.subscriptions)),
      h('td', { 'data-label': 'Pending' }, fmtNum(t.pending)),
      h('td', { 'data-label': 'In flight' }, fmtNum(t.in_flight)),
      h('td', { 'data-label': 'Delivered' }, fmtNum(t.delivered)),
      h('td', { 'data-label': 'Dead' }, fmtNum(t.dead)),
      h('td', { 'data-label': 'Success' }, fmtRate(t.success_rate)));
    replace(tenants, h('h2', {}, 'Tenants'),
      h('p', { class: 'muted small' }, 'Deliveries since ' + new Date(ten.since).toLocaleString() + '; the ' + TENANTS + ' tenants with the most queued work.'),
      h('div', { class: 'table-wrap stack', 'data-tenants': '' }, h('table', { class: 'num' },
        h('thead', {}, h('tr', {}, ['Tenant', 'Subscriptions', 'Pending', 'In flight', 'Delivered', 'Dead', 'Success'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {},
          (ten.data || []).filter((t) => t.tenant).map((t) => line(link('subscriptions?tenant=' + encodeURIComponent(t.tenant), h('code', {}, t.tenant)), t)),
          untenanted ? line(h('span', { class: 'muted' }, 'no tenant'), untenanted) : null,
          ten.other ? line(h('span', { class: 'muted' }, 'other tenants'), ten.other) : null))));
  }

  function drawCharts(hist) {
    const iv0 = hist.interval_s || 10;
    const pts = (hist.points || []).slice(-Math.ceil((windowMin * 60) / iv0));
    const iv = hist.interval_s || 10;
    const times = pts.map((p) => new Date(p.at));
    const rate = (k) => pts.map((p) => p[k] / iv);
    // Intervals that ended before this node started are unknown, not zero
    // (its history restarts empty with the process).
    const from = hist.started_at ? new Date(Date.parse(hist.started_at) - iv * 1000) : null;
    replace(charts,
      lineChart({ title: 'Publishes / s', unit: '/s', times, from, series: [{ name: 'published', cls: 's1', values: rate('published') }] }),
      lineChart({
        title: 'Deliveries / s by outcome', unit: '/s', times, from, series: [
          { name: 'delivered', cls: 'good', values: rate('delivered') },
          { name: 'failed, will retry', cls: 'warn', values: rate('failed') },
          { name: 'dead', cls: 'bad', values: rate('dead') },
        ],
      }),
      lineChart({
        title: 'Publish → delivery latency (redriven dead letters left out)', unit: 'ms', times, from, clamp: true, series: [
          { name: 'p50', cls: 's1', values: pts.map((p) => p.latency_p50_ms) },
          { name: 'p99', cls: 's2', values: pts.map((p) => p.latency_p99_ms) },
        ],
      }));
  }

  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}
