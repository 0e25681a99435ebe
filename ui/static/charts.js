// Small SVG line charts for the overview: no library, a fixed viewBox that
// scales with its container, one polyline per series, gaps where a value is
// null (an interval without a latency sample).

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// niceScale rounds a maximum up to 1, 2 or 5 × 10^n and picks a number of
// grid steps that gives round labels (0.2, 0.5, 1 × 10^n).
function niceScale(v) {
  if (!(v > 0)) return { max: 1, steps: 5 };
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const [m, steps] of [[1, 5], [2, 4], [5, 5], [10, 5]]) if (v <= m * p * (1 + 1e-9)) return { max: m * p, steps };
  return { max: 10 * p, steps: 5 };
}

function fmtTick(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k';
  if (v >= 10 || v === 0) return String(Math.round(v));
  return String(parseFloat(v.toFixed(v >= 1 ? 1 : 2)));
}

// lineChart draws series [{name, cls, values: [number|null]}] over times
// (Date[]) with a y axis in unit. It returns a <figure>.
export function lineChart({ title, unit, times, series }) {
  const W = 400, H = 170, L = 36, R = 6, T = 8, B = 20;
  const n = times.length;
  let max = 0;
  for (const se of series) for (const v of se.values) if (v !== null && v > max) max = v;
  const { max: ymax, steps } = niceScale(max);
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / ymax);

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, class: 'chart' });
  for (let k = 0; k <= steps; k++) {
    const v = (ymax * k) / steps;
    svg.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(s('text', { x: L - 6, y: y(v) + 3.5, class: 'tick', 'text-anchor': 'end' }, fmtTick(v)));
  }
  if (n > 1) {
    for (const frac of [0, 0.5, 1]) {
      const i = Math.round(frac * (n - 1));
      const t = times[i];
      const label = t.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
      svg.append(s('text', { x: x(i), y: H - 4, class: 'tick', 'text-anchor': frac === 0 ? 'start' : frac === 1 ? 'end' : 'middle' }, label));
    }
  }
  for (const se of series) {
    let d = '';
    let pen = false;
    se.values.forEach((v, i) => {
      if (v === null || v === undefined) { pen = false; return; }
      d += (pen ? 'L' : 'M') + x(i).toFixed(1) + ' ' + y(v).toFixed(1);
      pen = true;
    });
    if (d) svg.append(s('path', { d, class: 'line ' + se.cls, 'vector-effect': 'non-scaling-stroke' }));
  }

  const last = (se) => {
    for (let i = se.values.length - 1; i >= 0; i--) if (se.values[i] !== null) return se.values[i];
    return null;
  };
  const legend = document.createElement('div');
  legend.className = 'legend';
  for (const se of series) {
    const item = document.createElement('span');
    const sw = document.createElement('i');
    sw.className = 'swatch ' + se.cls;
    const v = last(se);
    item.append(sw, se.name + ': ' + (v === null ? '—' : fmtTick(v) + ' ' + unit));
    legend.append(item);
  }
  const fig = document.createElement('figure');
  fig.className = 'chart-card';
  const cap = document.createElement('figcaption');
  cap.textContent = title;
  fig.append(cap, svg, legend);
  return fig;
}
