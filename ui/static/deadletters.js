// Dead letters: groups by subscription and error class (GET
// /v1/dead-letters), and a bulk redrive that first asks the API how many
// would be sent (dry_run), then steps with limit until remaining is 0,
// showing progress.

import { h, replace, api, link, errorBox, notice, can, readOnly, table, field, timeCell, fmtNum, subscriptions as loadSubs, subLabel, toISO, qs } from './lib.js';

// STEP is how many dead letters one redrive call sends back (the API
// allows up to 10,000); small steps keep the progress bar moving.
const STEP = 100;

export async function render(main) {
  const groupsSlot = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const panel = h('div');
  // Element.append prints a null as "null": leave the note out instead.
  main.append(...[h('div', { class: 'page-head' }, h('h1', {}, 'Dead letters')),
    h('p', { class: 'muted' }, 'Deliveries that failed on every retry tier. Fix the endpoint, then send them again.'),
    can('deliveries:write') ? null : readOnly('deliveries:write'), panel, groupsSlot].filter(Boolean));
  let subs = [];
  const load = async () => {
    try {
      const [g, s] = await Promise.all([api('GET', '/v1/dead-letters'), loadSubs()]);
      subs = s;
      replace(groupsSlot, table([
        { title: 'Subscription', cell: (r) => subLabel(r.subscription_id) },
        { title: 'Error class', cell: (r) => h('code', {}, r.error || 'unknown') },
        { title: 'Count', class: 'r', cell: (r) => link('deliveries' + qs({ state: 'dead', subscription_id: r.subscription_id }), fmtNum(r.count)) },
        { title: 'Oldest', cell: (r) => timeCell(r.oldest_at) },
        { title: 'Newest', cell: (r) => timeCell(r.newest_at) },
        can('deliveries:write') ? { title: '', cell: (r) => h('button', { type: 'button', class: 'secondary small', onclick: () => openRedrive(r) }, 'Redrive…') } : null,
      ].filter(Boolean), g.groups, [h('p', {}, 'No dead letters.'), h('p', { class: 'muted' }, 'When a delivery fails on every tier it lands here, grouped by subscription and error class, ready to be redriven.')]));
    } catch (e) {
      replace(groupsSlot, errorBox(e));
    }
  };

  function openRedrive(group) {
    const sub = h('select', { name: 'subscription_id', required: true },
      subs.map((s) => h('option', { value: s.id, selected: s.id === group.subscription_id }, (s.description || s.url) + ' (' + s.id + ')')));
    if (!subs.some((s) => s.id === group.subscription_id)) sub.append(h('option', { value: group.subscription_id, selected: true }, group.subscription_id));
    const cls = h('select', { name: 'error' }, h('option', { value: '' }, 'Every error class'),
      h('option', { value: group.error, selected: true }, group.error));
    const since = h('input', { type: 'datetime-local', name: 'since' });
    const until = h('input', { type: 'datetime-local', name: 'until' });
    const out = h('div', { 'aria-live': 'polite' });
    const bodyOf = () => {
      const b = { subscription_id: sub.value };
      if (cls.value) b.error = cls.value;
      if (since.value) b.since = toISO(since.value);
      if (until.value) b.until = toISO(until.value);
      return b;
    };
    const check = async (e) => {
      e.preventDefault();
      replace(out);
      try {
        const dry = await api('POST', '/v1/dead-letters/redrive', { ...bodyOf(), dry_run: true });
        if (!dry.matched) { replace(out, notice('No dead letter matches: nothing to send.', 'warn')); return; }
        const go = h('button', { type: 'button', class: 'danger', onclick: () => run(dry.matched) }, `Redrive ${fmtNum(dry.matched)}`);
        replace(out, h('div', { class: 'confirm', role: 'alert' },
          h('p', {}, h('strong', { 'data-matched': String(dry.matched) }, fmtNum(dry.matched) + (dry.matched === 1 ? ' dead letter' : ' dead letters')),
            ' will be sent again to this subscription, starting with the oldest.'),
          h('div', { class: 'actions' }, go, h('button', { type: 'button', class: 'secondary', onclick: () => replace(out) }, 'Cancel'))));
      } catch (err) {
        replace(out, errorBox(err));
      }
    };
    const run = async (matched) => {
      const bar = h('progress', { max: matched, value: 0 });
      const label = h('span', {}, '0 of ' + fmtNum(matched));
      replace(out, h('div', { class: 'progress' }, bar, label));
      let sent = 0;
      try {
        for (;;) {
          const r = await api('POST', '/v1/dead-letters/redrive', { ...bodyOf(), limit: STEP });
          sent += r.redriven;
          bar.max = Math.max(matched, sent + r.remaining);
          bar.value = sent;
          label.textContent = fmtNum(sent) + ' of ' + fmtNum(bar.max);
          if (r.remaining === 0 || r.redriven === 0) break;
        }
        replace(out, notice(`Redriven ${fmtNum(sent)}. They are back in tier 0 and will be attempted shortly.`), link('deliveries' + qs({ subscription_id: sub.value }), 'Follow the deliveries →'));
        await load();
      } catch (err) {
        out.append(errorBox(err), h('p', { class: 'muted' }, fmtNum(sent) + ' were sent before the error; run the redrive again to continue.'));
      }
    };
    replace(panel, h('form', { class: 'panel form-grid', onsubmit: check },
      h('h2', { class: 'wide' }, 'Redrive dead letters'),
      field('Subscription', sub), field('Error class', cls),
      field('Died from', since, 'Optional'), field('Died before', until, 'Optional'),
      h('div', { class: 'wide actions' }, h('button', { type: 'submit' }, 'Check how many'), h('button', { type: 'button', class: 'secondary', onclick: () => replace(panel) }, 'Close')),
      h('div', { class: 'wide' }, out)));
    panel.scrollIntoView({ block: 'nearest' });
  }

  await load();
}
