// Event types: the catalog of the events producers publish (name,
// description, JSON Schema, example). Any token reads it — subscription
// forms and the portal offer its types, the filter tester its examples —
// and an admin changes it. With "validate" on, herald refuses publishes of
// the type whose data does not conform to the schema (422 schema_mismatch).

import { h, replace, api, qs, errorBox, notice, table, field, fmtTime, markField, clearFieldMarks, pretty, can, confined, readOnly, APIError } from './lib.js';

// catalog caches the current (not deprecated) types for the forms of one
// page view; reload() empties it after a change.
let catalog = null;

// listEventTypes pages through the catalog (deprecated types only with
// includeDeprecated). Forms call it with the default: they offer the
// current types.
export async function listEventTypes(includeDeprecated = false) {
  if (!includeDeprecated && catalog) return catalog;
  const all = [];
  let cursor = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('GET', '/v1/event-types' + qs({ cursor, include_deprecated: includeDeprecated ? 'true' : null }));
    all.push(...page.data);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  if (!includeDeprecated) catalog = all;
  return all;
}

function reload() { catalog = null; }

// writable: the catalog is the operator's (admin, not tenant-confined).
function writable() { return can('admin') && !confined(); }

export async function render(main) {
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const listErr = h('div');
  const formSlot = h('div');
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Event types')),
    h('p', { class: 'muted' }, 'The catalog of the events producers publish: what each type means, the JSON Schema of its data and an example. Subscription forms offer these types and the filter tester their examples. With validation on, a publish whose data does not conform is refused (422 schema_mismatch, naming the path).'),
    listErr, list, formSlot);

  const showForm = (et) => {
    replace(formSlot, h('h2', { id: 'event-type-form-title' }, et ? 'Edit ' + et.name : 'New event type'),
      eventTypeForm(et, async () => { reload(); showForm(null); await load(); }, () => showForm(null)));
    if (et) formSlot.querySelector('textarea, input')?.focus();
  };

  const load = async () => {
    try {
      const rows = await listEventTypes(true);
      replace(listErr);
      replace(list, table([
        { title: 'Name', class: 'name', cell: (t) => h('code', { 'data-event-type': t.name }, t.name) },
        { title: 'Description', cell: (t) => t.description || h('span', { class: 'muted' }, '—') },
        { title: 'Schema', class: 'word', cell: (t) => t.schema === null ? h('span', { class: 'muted' }, 'none') : (t.validate ? 'validated' : 'documented') },
        { title: 'Example', cell: (t) => t.example === null ? h('span', { class: 'muted' }, 'none') : h('code', { class: 'clip' }, JSON.stringify(t.example)) },
        { title: 'Status', class: 'word', cell: (t) => t.deprecated ? h('span', { class: 'badge warn' }, 'deprecated') : 'current' },
        { title: 'Updated', cell: (t) => fmtTime(t.updated_at) },
        writable() ? {
          title: '', cell: (t) => h('span', { class: 'row-actions' },
            h('button', { type: 'button', class: 'secondary small', 'data-edit': t.name, onclick: () => showForm(t) }, 'Edit'),
            h('button', {
              type: 'button', class: 'danger small', 'data-delete': t.name, onclick: async (e) => {
                if (!confirm('Delete event type ' + t.name + '? Its events are then accepted unvalidated.')) return;
                e.target.disabled = true;
                try {
                  await api('DELETE', '/v1/event-types/' + encodeURIComponent(t.name));
                  reload();
                  await load();
                } catch (err) {
                  replace(listErr, errorBox(err));
                  e.target.disabled = false;
                }
              },
            }, 'Delete')),
        } : null,
      ].filter(Boolean), rows, [h('p', {}, 'No event types yet.'), h('p', { class: 'muted' }, writable() ? 'Add one below: subscription forms then offer it.' : 'An admin adds them.')]));
    } catch (e) {
      replace(list);
      replace(listErr, errorBox(e));
    }
  };
  if (writable()) showForm(null); else replace(formSlot, readOnly('admin'));
  await load();
}

// jsonOf parses a textarea's JSON (empty: null) or throws an error the
// form shows at that control.
function jsonOf(area, name) {
  const v = area.value.trim();
  if (v === '') return null;
  try { return JSON.parse(v); } catch (e) { throw new APIError(0, 'invalid_json', name + ' is not valid JSON: ' + e.message, name); }
}

// eventTypeForm creates (et null) or edits an event type; errors are
// shown at the field the API names (example.amount: at the example).
function eventTypeForm(et, done, cancel) {
  const name = h('input', { type: 'text', name: 'name', required: true, class: 'mono', placeholder: 'order.placed', maxlength: 256, value: et ? et.name : '' });
  if (et) name.disabled = true;
  const description = h('textarea', { name: 'description', rows: 2, maxlength: 1024, placeholder: 'An order was placed. Sent once per order.' });
  description.value = et ? et.description : '';
  const schema = h('textarea', { name: 'schema', rows: 8, class: 'mono', placeholder: '{"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}' });
  schema.value = et && et.schema !== null ? pretty(et.schema) : '';
  const example = h('textarea', { name: 'example', rows: 5, class: 'mono', placeholder: '{"amount": 12.5, "currency": "EUR"}' });
  example.value = et && et.example !== null ? pretty(et.example) : '';
  const validate = h('input', { type: 'checkbox', name: 'validate', checked: !!(et && et.validate) });
  const deprecated = h('input', { type: 'checkbox', name: 'deprecated', checked: !!(et && et.deprecated) });
  const out = h('div');
  const form = h('form', {
    class: 'panel form-grid', 'data-event-type-form': et ? 'edit' : 'new', onsubmit: async (e) => {
      e.preventDefault();
      replace(out);
      clearFieldMarks(form);
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      try {
        const body = {
          description: description.value, schema: jsonOf(schema, 'schema'), example: jsonOf(example, 'example'),
          validate: validate.checked, deprecated: deprecated.checked,
        };
        let saved;
        if (et) {
          saved = await api('PATCH', '/v1/event-types/' + encodeURIComponent(et.name), body);
        } else {
          body.name = name.value.trim();
          saved = await api('POST', '/v1/event-types', body);
        }
        await done();
        // done() rebuilt the form: say so above the list instead.
        document.querySelector('[data-event-type-form]')?.before(notice('Event type ' + saved.name + (et ? ' saved.' : ' created.')));
      } catch (err) {
        replace(out, markField(form, err)
          ? h('div', { class: 'error', role: 'alert' }, et ? 'Not saved: ' : 'Not created: ', err.message)
          : errorBox(err));
      } finally { btn.disabled = false; }
    },
  },
  field('Name', name, et ? 'The name cannot change: create another type and deprecate this one.' : 'The exact event type producers publish (no * or ?; herald.* is reserved).'),
  h('div', { class: 'field wide' }, h('label', { for: 'et-description' }, 'Description'), Object.assign(description, { id: 'et-description' }),
    h('small', { class: 'hint' }, 'Shown beside the type wherever it is offered (at most 1 KiB).')),
  h('div', { class: 'field wide' }, h('label', { for: 'et-schema' }, 'JSON Schema of the data'), Object.assign(schema, { id: 'et-schema' }),
    h('small', { class: 'hint' }, 'Optional; draft 2020-12 unless $schema says otherwise. Self-contained: $ref only to #/$defs/…. At most 64 KiB.')),
  h('div', { class: 'field wide' }, h('label', { for: 'et-example' }, 'Example data'), Object.assign(example, { id: 'et-example' }),
    h('small', { class: 'hint' }, 'Optional; must conform to the schema. The filter tester offers it as a sample event.')),
  h('div', { class: 'field' }, h('label', { class: 'check' }, validate, 'Validate publishes'),
    h('small', { class: 'hint' }, 'Refuse events of this type whose data does not conform (needs a schema).')),
  h('div', { class: 'field' }, h('label', { class: 'check' }, deprecated, 'Deprecated'),
    h('small', { class: 'hint' }, 'Forms stop offering it; publishing it is still accepted.')),
  h('div', { class: 'wide' }, out, h('button', { type: 'submit' }, et ? 'Save event type' : 'Create event type'),
    et ? h('button', { type: 'button', class: 'link', onclick: cancel }, 'Cancel') : null));
  return form;
}

// catalogPicker is the subscription form's "add a type from the catalog"
// control: it appends the chosen type to the comma-separated input and
// says what the type means. Without a catalog (or when it cannot be
// read) it stays empty and out of the way.
export function catalogPicker(input) {
  const pick = h('select', { name: 'catalog_type', 'aria-label': 'Add an event type from the catalog', hidden: true },
    h('option', { value: '' }, 'Add a type from the catalog…'));
  const about = h('small', { class: 'hint', 'data-catalog-description': '' });
  const types = new Map();
  listEventTypes().then((all) => {
    for (const t of all) {
      types.set(t.name, t);
      pick.append(h('option', { value: t.name, title: t.description }, t.description ? t.name + ' — ' + t.description : t.name));
    }
    pick.hidden = !all.length;
  }).catch(() => { /* the catalog is a convenience: the text input still works */ });
  pick.addEventListener('change', () => {
    const t = types.get(pick.value);
    if (!t) return;
    const cur = input.value.split(/[,\s]+/).map((s) => s.trim()).filter(Boolean);
    if (!cur.includes(t.name)) cur.push(t.name);
    input.value = cur.join(', ');
    input.dispatchEvent(new Event('input', { bubbles: true }));
    replace(about, h('code', {}, t.name), ': ', t.description || 'no description',
      t.example !== null ? [' Example: ', h('code', { class: 'clip' }, JSON.stringify(t.example))] : null);
    pick.value = '';
  });
  return h('div', { class: 'catalog-picker' }, pick, about);
}
