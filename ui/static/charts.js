// Small SVG line charts for the overview: no library, a fixed viewBox that
// scales with its container, one polyline per series, gaps where a value is
// null (an interval without a latency sample), a dot for a sample with no
// neighbour.

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

// scaleTop is the top of the y axis for values: their maximum, unless it
// is an outlier — more than twice the 95th percentile (nearest rank; below
// 20 samples the second largest) — which would flatten every other sample.
// Values above the top are drawn on the top edge and marked (outlier).
export function scaleTop(values) {
  const v = values.filter((x) => x !== null && x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return 0;
  const max = v[v.length - 1];
  if (v.length < 3) return max;
  const cap = v[Math.min(v.length - 2, Math.ceil(0.95 * v.length) - 1)];
  return cap > 0 && max > 2 * cap ? cap : max;
}

// lineChart draws series [{name, cls, values: [number|null]}] over times
// (Date[]) with a y axis in unit. A sample with no neighbour gets a dot
// (a line needs two). clamp: the axis ends at scaleTop, outliers sit on the
// top edge as triangles. from: times before it are "no data" (the node had
// not started; its history restarts empty), shaded and labelled. It
// returns a <figure>.
export function lineChart({ title, unit, times, series, clamp = false, from = null }) {
  const W = 400, H = 170, L = 36, R = 6, T = 8, B = 20;
  const n = times.length;
  // Samples before from are not zeros but unknown.
  const startIdx = from ? times.findIndex((t) => t >= from) : 0;
  const known = startIdx < 0 ? n : startIdx;
  series = series.map((se) => ({ ...se, values: se.values.map((v, i) => (i < known ? null : v)) }));
  const all = series.flatMap((se) => se.values);
  let max = 0;
  for (const v of all) if (v !== null && v !== undefined && v > max) max = v;
  const top = clamp ? scaleTop(all) : max;
  const { max: ymax, steps } = niceScale(top);
  const clamped = max > ymax;
  const x = (i) => L + (n <= 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - Math.min(v, ymax) / ymax);

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, class: 'chart' });
  for (let k = 0; k <= steps; k++) {
    const v = (ymax * k) / steps;
    svg.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(s('text', { x: L - 6, y: y(v) + 3.5, class: 'tick', 'text-anchor': 'end' }, fmtTick(v) + (clamped && k === steps ? '+' : '')));
  }
  if (known > 0 && n > 1) {
    // The stretch before the node started: no data, not zero.
    const x1 = known >= n ? W - R : x(known);
    svg.append(s('rect', { x: L, y: T, width: Math.max(0, x1 - L), height: H - T - B, class: 'nodata', 'data-nodata': '' }));
    svg.append(s('text', { x: (L + x1) / 2, y: T + (H - T - B) / 2 + 4, class: 'tick nodata-label', 'text-anchor': 'middle' }, 'no data'));
  } else if (n === 0) {
    svg.append(s('text', { x: (L + W - R) / 2, y: T + (H - T - B) / 2 + 4, class: 'tick nodata-label', 'text-anchor': 'middle' }, 'no data'));
  }
  if (n > 1) {
    for (const frac of [0, 0.5, 1]) {
      const i = Math.round(frac * (n - 1));
      const t = times[i];
      const label = t.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
      svg.append(s('text', { x: x(i), y: H - 4, class: 'tick', 'text-anchor': frac === 0 ? 'start' : frac === 1 ? 'end' : 'middle' }, label));
    }
  }
  const has = (v) => v !== null && v !== undefined;
  for (const se of series) {
    let d = '';
    let pen = false;
    const vs = se.values;
    vs.forEach((v, i) => {
      if (!has(v)) { pen = false; return; }
      d += (pen ? 'L' : 'M') + x(i).toFixed(1) + ' ' + y(v).toFixed(1);
      pen = true;
    });
    if (d) svg.append(s('path', { d, class: 'line ' + se.cls, 'vector-effect': 'non-scaling-stroke' }));
    vs.forEach((v, i) => {
      if (!has(v)) return;
      const label = se.name + ' ' + fmtTick(v) + ' ' + unit + ' at ' + times[i].toLocaleTimeString();
      if (v > ymax) {
        // An outlier above the axis: a triangle on the top edge.
        const cx = x(i);
        svg.append(s('path', { d: `M${(cx - 4).toFixed(1)} ${T + 6} L${(cx + 4).toFixed(1)} ${T + 6} L${cx.toFixed(1)} ${T - 1} Z`, class: 'outlier ' + se.cls, 'data-outlier': '' },
          s('title', {}, label + ' (above the scale)')));
      } else if (!has(vs[i - 1]) && !has(vs[i + 1])) {
        // A lone sample: no line reaches it.
        svg.append(s('circle', { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 2.5, class: 'dot ' + se.cls, 'data-lone': '' }, s('title', {}, label)));
      }
    });
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
  if (clamped) {
    const item = document.createElement('span');
    item.className = 'outlier-note';
    item.textContent = '▲ above ' + fmtTick(ymax) + ' ' + unit + ' (peak ' + fmtTick(max) + ' ' + unit + ')';
    legend.append(item);
  }
  const fig = document.createElement('figure');
  fig.className = 'chart-card';
  const cap = document.createElement('figcaption');
  cap.textContent = title;
  fig.append(cap, svg, legend);
  return fig;
}
