// Resend and replay: new deliveries of stored events. "Resend to…" on an
// event's page sends it to one chosen subscription (POST
// /v1/events/{id}/resend); "Replay…" on a subscription's page counts the
// past events it would receive in a window (dry_run, every page), asks,
// then sends them, following next_cursor with a progress bar. Both send
// again even what was delivered, so the count comes first.

import { h, replace, api, link, errorBox, notice, can, readOnly, field, fmtNum, toISO, toLocalInput, markField, clearFieldMarks, subscriptions as loadSubs } from './lib.js';

// receives mirrors the API's tenant rule (herald.Subscription.Receives):
// only the subscriptions a resend may name are offered.
function receives(s, tenant) {
  return tenant ? s.tenant === tenant || (!s.tenant && s.all_tenants) : !s.tenant;
}

// resendControl is the event page's "Resend to…" form; onSent runs after
// a delivery was made (the page reloads its deliveries).
export async function resendControl(ev, onSent) {
  if (!can('deliveries:write')) return readOnly('deliveries:write');
  const out = h('div', { 'aria-live': 'polite' });
  let subs = [];
  try {
    subs = (await loadSubs()).filter((s) => receives(s, ev.tenant || ''));
  } catch (e) {
    return h('div', { class: 'resend' }, errorBox(e));
  }
  if (!subs.length) return h('p', { class: 'muted small resend' }, 'No subscription receives this event\'s tenant, so there is nothing to resend it to.');
  const sub = h('select', { name: 'subscription_id', required: true },
    h('option', { value: '' }, 'Choose a subscription…'),
    subs.map((s) => h('option', { value: s.id, disabled: s.state !== 'enabled' },
      (s.description || s.url || s.id) + ' (' + s.id + ')' + (s.state !== 'enabled' ? ' — disabled' : ''))));
  const form = h('form', {
    class: 'resend filters', onsubmit: async (e) => {
      e.preventDefault();
      clearFieldMarks(form);
      replace(out);
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        const r = await api('POST', '/v1/events/' + encodeURIComponent(ev.id) + '/resend?tenant=' + encodeURIComponent(ev.tenant || ''), { subscription_id: sub.value });
        replace(out, h('div', { class: 'notice ok', role: 'status' }, 'Resent as a new delivery ',
          link('deliveries/' + encodeURIComponent(r.delivery_id), h('code', {}, r.delivery_id)), '.'));
        await onSent();
      } catch (err) {
        if (!markField(form, err)) replace(out, errorBox(err));
      } finally {
        btn.disabled = false;
      }
    },
  }, field('Resend to…', sub, 'A new delivery, even if this subscription already received the event; its types and filter are not applied.'),
  h('div', { class: 'filter-actions' }, h('button', { type: 'submit', class: 'secondary' }, 'Resend')));
  return h('div', {}, form, out);
}

// openReplay shows the subscription page's replay form in slot.
export function openReplay(s, slot) {
  const now = Date.now();
  // Minutes are the form's precision: until is rounded up so events of
  // the current minute are in the window.
  const since = h('input', { type: 'datetime-local', name: 'since', required: true, value: toLocalInput(new Date(now - 24 * 3600e3).toISOString()) });
  const until = h('input', { type: 'datetime-local', name: 'until', required: true, value: toLocalInput(new Date(now + 60e3).toISOString()) });
  const types = h('input', { type: 'text', name: 'event_types', placeholder: (s.event_types || []).join(', ') || 'every type it receives' });
  const out = h('div', { 'aria-live': 'polite' });
  const path = '/v1/subscriptions/' + encodeURIComponent(s.id) + '/replay';
  const bodyOf = () => {
    const b = { since: toISO(since.value), until: toISO(until.value) };
    const t = types.value.split(',').map((x) => x.trim()).filter(Boolean);
    if (t.length) b.event_types = t;
    return b;
  };
  // pages calls the replay until it is no longer truncated, adding up.
  const pages = async (body, onPage) => {
    let cursor = null;
    const total = { matched: 0, replayed: 0 };
    for (;;) {
      const r = await api('POST', path, cursor ? { ...body, cursor } : body);
      total.matched += r.matched;
      total.replayed += r.replayed;
      if (onPage) onPage(total);
      if (!r.truncated || !r.next_cursor) return total;
      cursor = r.next_cursor;
    }
  };
  const form = h('form', {
    class: 'panel form-grid replay', onsubmit: async (e) => {
      e.preventDefault();
      clearFieldMarks(form);
      replace(out, h('p', { class: 'muted' }, 'Counting…'));
      const body = bodyOf();
      try {
        const dry = await pages({ ...body, dry_run: true });
        if (!dry.matched) { replace(out, notice('No event in this window matches: nothing to send.', 'warn')); return; }
        const go = h('button', { type: 'button', class: 'danger', onclick: () => run(body, dry.matched) }, `Replay ${fmtNum(dry.matched)}`);
        replace(out, h('div', { class: 'confirm', role: 'alert' },
          h('p', {}, h('strong', { 'data-matched': String(dry.matched) }, fmtNum(dry.matched) + (dry.matched === 1 ? ' event' : ' events')),
            ' will be sent to this subscription again as new deliveries, oldest first — even those it already received. Replaying twice sends twice.'),
          h('div', { class: 'actions' }, go, h('button', { type: 'button', class: 'secondary', onclick: () => replace(out) }, 'Cancel'))));
      } catch (err) {
        if (markField(form, err)) replace(out); else replace(out, errorBox(err));
      }
    },
  });
  const run = async (body, matched) => {
    const bar = h('progress', { max: matched, value: 0 });
    const label = h('span', {}, '0 of ' + fmtNum(matched));
    replace(out, h('div', { class: 'progress' }, bar, label));
    let sent = 0;
    try {
      await pages(body, (t) => {
        sent = t.replayed;
        bar.max = Math.max(matched, t.matched);
        bar.value = sent;
        label.textContent = fmtNum(sent) + ' of ' + fmtNum(bar.max);
      });
      replace(out, notice(`Replayed ${fmtNum(sent)} event${sent === 1 ? '' : 's'} as new deliveries.`), ' ',
        link('deliveries?subscription_id=' + encodeURIComponent(s.id), 'Follow the deliveries →'));
    } catch (err) {
      out.append(errorBox(err), h('p', { class: 'muted' }, fmtNum(sent) + ' were sent before the error.'));
    }
  };
  form.append(
    h('h2', { class: 'wide' }, 'Replay past events'),
    h('p', { class: 'wide muted small' }, 'Events published in the window that this subscription receives now (its event types, tenant and filter); never events older than the subscription. At most 31 days per replay.'),
    field('From', since), field('Before', until),
    field('Event types', types, 'Optional, comma-separated: narrows the subscription\'s own types.'),
    h('div', { class: 'wide actions' }, h('button', { type: 'submit' }, 'Check how many'), h('button', { type: 'button', class: 'secondary', onclick: () => replace(slot) }, 'Close')),
    h('div', { class: 'wide' }, out));
  replace(slot, form);
  form.scrollIntoView({ block: 'nearest' });
}
