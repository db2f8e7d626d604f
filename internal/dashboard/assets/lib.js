// The page's small library (issue 18, issue 29): building elements, tables
// whose cells hold their numbers, numbers and times as the operator reads
// them, digests shown whole, the charts, and morph, which brings the page
// to a new state in place, so that a poll keeps what the operator opened,
// focused and scrolled. No library: the server's Content-Security-Policy
// allows scripts and styles from its own files only, so nothing here writes
// a style attribute or an inline handler (buttons are handled by delegation
// in app.js, through their data-copy and data-inspect attributes).
'use strict';

window.WD = (function () {
  // h builds an element: h('td', {class: 'num'}, 'text', child, ...).
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v == null) continue;
      e.setAttribute(k, v === true ? '' : String(v));
    }
    return append(e, kids);
  }
  function append(e, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k == null || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const SVG = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...kids) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v != null) e.setAttribute(k, String(v));
    }
    return append(e, kids);
  }

  // ---- numbers, times, digests -------------------------------------------

  // group puts thousands separators in a decimal integer's digits (the
  // server writes numbers that can pass 2^53 as strings).
  const group = (digits) => String(digits).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  function fmtNum(v) {
    if (typeof v === 'number') return Number.isInteger(v) ? group(v) : v.toLocaleString('en', { maximumFractionDigits: 3 });
    if (/^\d+$/.test(String(v))) return group(v);
    return String(v);
  }
  const pad = (n) => String(n).padStart(2, '0');
  // clock is a time as UTC and, beside it, the browser's local time.
  function clock(t) {
    const d = t instanceof Date ? t : new Date(t);
    if (isNaN(d)) return '—';
    return `${utc(d)} (local ${local(d)})`;
  }
  const utc = (d) => d.toISOString().slice(11, 19) + ' UTC';
  const local = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  // span is [a, b) on the room clock (µs), UTC and local.
  function span(a, b) {
    const x = roomDate(a), y = roomDate(b);
    return `${x.toISOString().slice(11, 19)}–${utc(y)} (local ${local(x)}–${local(y)})`;
  }
  const roomDate = (us) => new Date(Number(us) / 1000);
  const roomTime = (us) => clock(roomDate(us));
  function time(t) {
    const d = t instanceof Date ? t : new Date(t);
    return isNaN(d) ? '—' : h('time', { datetime: d.toISOString() }, clock(d));
  }

  // digest shows a digest or key whole, with a button that copies it and
  // one that puts it in the decision inspector.
  function digest(hex, what) {
    if (!hex) return '—';
    return h('span', { class: 'digest' }, h('code', { class: 'hex' }, hex), ' ',
      h('button', { type: 'button', class: 'mini', 'data-copy': hex, 'aria-label': 'Copy the ' + (what || 'digest') + ' ' + hex, title: 'Copy it whole' }, 'copy'), ' ',
      h('button', { type: 'button', class: 'mini', 'data-inspect': hex, 'aria-label': 'Put the ' + (what || 'digest') + ' ' + hex + ' in the decision inspector', title: 'Put it in the decision inspector' }, 'to inspector'));
  }

  // ---- the terms -----------------------------------------------------------

  // TERMS is one line on each term the page uses; the glossary (index.html)
  // says the same at more length, and a column's header carries its line.
  const TERMS = {
    window: 'The span of room clock the evidence is read over (§5.1): each hop\'s records must tile it.',
    health: 'The latest result of the server\'s check of the pathway\'s or edge\'s health URL.',
    evidence: 'What the records give for the pathway (§5.3): figure, or stale (a hop not covered), unmetered, mixed or empty — none of them a figure.',
    class: 'How the energy was measured: 5 CalibratedInstrument, 4 OnChipCounter, 2 ModelBased, 3 Estimator (§6.2 ranks them in that order).',
    figure: 'J / D: J the records\' joules in µJ, D their delivery (§5.3); never divided by the server, compared by products (§6.2).',
    rank: 'The pathway\'s place in §6.2\'s order: 0 is first.',
    limits: 'The operator\'s latency, quality and capacity limits (§6.1), for a client not on the pathway.',
    load: 'Live sessions that have the pathway first now; unknown while the table of loads cannot say.',
    first: 'Decisions (or manifests) since the server started that put it first.',
    records: 'The records its evidence names over the window.',
    share: 'The share of the interval\'s decisions that put the pathway first; a minimum share (§6.3) shows as a band of at least its height.',
    draw: 'A session\'s fixed number in [0, 1 000 000) (§6.3); a draw in a pathway\'s band puts that pathway first.',
    headroom: 'The load an edge must carry should another fail: its sessions × (1 + 1/(N − 1)), N the edges that can take the failed one\'s viewers.',
    check: 'How long the latest health check took, ms.',
    weight: 'The edge\'s weight in the rendezvous hash: an edge of weight 2 is first for twice the sessions of one of weight 1.',
    drained: 'Drained by the operator: no new session gets it first.',
    p10: 'Quantiles over the sessions that reported: p10 (1 in 10 below), p50 (the median), p90 (9 in 10 below).',
    gap: 'A part of the window no record of the hop covers: the pathway\'s evidence is stale (§5.2).',
  };
  const term = (key) => TERMS[key] || null;

  // ---- tables ----------------------------------------------------------------

  // table makes a table in a box that scrolls sideways (and says so when it
  // must): kind names it for the tests and the morph, head is its columns
  // (text, or {v, tip, num}), rows arrays of cells (text, a Node, or
  // {v, num, cls}); arrays within are flattened, one cell each.
  function table(kind, caption, head, rows, empty) {
    if (!rows.length && empty) return h('p', { class: 'muted empty', 'data-empty': kind, 'data-key': 'empty ' + kind }, empty);
    const cell = (tag, c) => {
      if (c && typeof c === 'object' && !(c instanceof Node) && 'v' in c) {
        return h(tag, { class: [c.num ? 'num' : '', c.cls || ''].join(' ').trim() || null, title: c.tip || null }, c.v);
      }
      return h(tag, {}, c);
    };
    const heads = head.flat(Infinity).map((c) => {
      const th = cell('th', c);
      th.setAttribute('scope', 'col');
      return th;
    });
    return h('div', { class: 'tablebox', 'data-key': 'table ' + kind },
      h('p', { class: 'scroll-hint muted', hidden: true }, 'Wider than the screen: scroll the table sideways →'),
      h('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': caption + ' (scrolls sideways)' },
        h('table', { 'data-table': kind },
          h('caption', {}, caption),
          h('thead', {}, h('tr', {}, heads)),
          h('tbody', {}, rows.map((r) => h('tr', {}, r.flat(Infinity).map((c, i) => {
            const e = cell(i === 0 ? 'th' : 'td', c);
            if (i === 0) e.setAttribute('scope', 'row');
            return e;
          })))))));
  }
  const num = (v, none) => ({ v: v == null ? (none || '—') : fmtNum(v), num: true });
  const col = (v, key, isNum) => ({ v, tip: term(key), num: !!isNum });

  // scrollHints shows each table's hint while the table is wider than its box.
  function scrollHints(root) {
    for (const box of root.querySelectorAll('.tablebox')) {
      const sc = box.querySelector('.scroll');
      box.querySelector('.scroll-hint').hidden = sc.scrollWidth <= sc.clientWidth + 1;
    }
  }

  // ---- in place --------------------------------------------------------------

  // morph makes old look like nu, keeping every node of old it can: an
  // element of the same name (and data-key) is kept and its attributes and
  // children brought to nu's, so that focus, a table's scroll and an open
  // <details> (whose open attribute is the operator's) survive a poll.
  function morph(old, nu) {
    for (const a of [...old.attributes]) {
      if (!nu.hasAttribute(a.name) && !(a.name === 'open' && old.localName === 'details')) old.removeAttribute(a.name);
    }
    for (const a of nu.attributes) {
      if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
    }
    const kids = [...nu.childNodes];
    kids.forEach((n, i) => {
      let o = old.childNodes[i];
      // A keyed element is found among its old siblings wherever it is,
      // so that a block appearing before it (a QoE view) does not cost it
      // its state.
      const k = n.nodeType === 1 ? n.getAttribute('data-key') : null;
      if (k != null && !(o && o.nodeType === 1 && o.getAttribute('data-key') === k)) {
        const found = [...old.children].find((c) => c.getAttribute('data-key') === k);
        if (!found) { // a new block: o is kept for the next of nu's
          old.insertBefore(n, o || null);
          return;
        }
        old.insertBefore(found, o || null);
        o = found;
      }
      if (!o) {
        old.append(n);
      } else if (o.nodeType !== n.nodeType || o.nodeName !== n.nodeName ||
        (n.nodeType === 1 && o.getAttribute('data-key') !== n.getAttribute('data-key'))) {
        old.replaceChild(n, o);
      } else if (n.nodeType === 1) {
        morph(o, n);
      } else if (o.nodeValue !== n.nodeValue) {
        o.nodeValue = n.nodeValue;
      }
    });
    while (old.childNodes.length > kids.length) old.lastChild.remove();
  }

  // ---- charts ----------------------------------------------------------------

  // A chart is drawn at the width it is shown at (chartWidth), one unit of
  // its viewBox a CSS pixel, so that its 12 px text is 12 px on a phone too.
  let width = 720;
  const setChartWidth = (w) => { width = Math.max(240, Math.min(1000, Math.floor(w))); };
  const chartWidth = () => width;

  function ends(svg, t0, t1, y, W, L, R) {
    svg.append(s('text', { x: L, y }, utc(new Date(t0))));
    svg.append(s('text', { x: W - R, y, 'text-anchor': 'end' }, utc(new Date(t1))));
  }

  // bandChart stacks, for each interval, the shares of its decisions that
  // put each series first, in bands from 0 to 100 %; an interval with no
  // decision is a grey column, and the bands go on after it.
  function bandChart(pts, series, label) {
    const W = chartWidth(), H = 170, L = 46, R = 8, T = 8, B = 22;
    const n = pts.length;
    const cw = (W - L - R) / Math.max(1, n);
    const y = (v) => T + (1 - v / 100) * (H - T - B);
    const svg = s('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    pts.forEach((p, i) => {
      const x = L + i * cw, wd = Math.max(1, cw - (cw > 4 ? 1 : 0));
      if (!p.total) {
        svg.append(s('rect', { x, y: y(100), width: wd, height: y(0) - y(100), class: 'empty' }, s('title', {}, `no decisions until ${utc(new Date(p.at))}`)));
        return;
      }
      let cum = 0;
      for (const sr of series) {
        const v = (100 * (p.d[sr.id] || 0)) / p.total;
        if (v > 0) {
          svg.append(s('rect', { x, y: y(cum + v), width: wd, height: y(cum) - y(cum + v), class: sr.cls },
            s('title', {}, `${sr.id}: ${p.d[sr.id]} of ${p.total} (${v.toFixed(1)} %) until ${utc(new Date(p.at))}`)));
        }
        cum += v;
      }
    });
    for (const f of [0, 50, 100]) {
      svg.append(s('line', { x1: L, x2: W - R, y1: y(f), y2: y(f), class: f ? 'grid-line' : 'axis' }));
      svg.append(s('text', { x: L - 4, y: y(f) + 4, 'text-anchor': 'end' }, f + ' %'));
    }
    if (n) ends(svg, pts[0].from, pts[n - 1].at, H - 6, W, L, R);
    return svg;
  }

  // lineChart draws series over sample times; a null is a break, and a
  // point alone is a dot.
  function lineChart(times, series, unit, label) {
    const W = chartWidth(), H = 170, L = 62, R = 8, T = 10, B = 22;
    const max = Math.max(1e-9, ...series.flatMap((sr) => sr.ys.filter((v) => v != null)));
    const n = times.length;
    const x = (i) => L + (n <= 1 ? 0 : (i / (n - 1)) * (W - L - R));
    const y = (v) => T + (1 - v / max) * (H - T - B);
    const svg = s('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    for (const f of [0, 0.5, 1]) {
      svg.append(s('line', { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), class: f ? 'grid-line' : 'axis' }));
      svg.append(s('text', { x: L - 4, y: y(max * f) + 4, 'text-anchor': 'end' }, fmtNum(+(max * f).toPrecision(3)) + unit));
    }
    if (n) ends(svg, times[0], times[n - 1], H - 6, W, L, R);
    for (const sr of series) {
      let run = [];
      const flush = () => {
        if (run.length === 1) svg.append(s('circle', { cx: run[0][0], cy: run[0][1], r: 3, class: sr.cls }));
        else if (run.length) svg.append(s('polyline', { points: run.map((p) => p.join(',')).join(' '), class: 'line ' + sr.cls }));
        run = [];
      };
      sr.ys.forEach((v, i) => (v == null ? flush() : run.push([x(i).toFixed(1), y(v).toFixed(1)])));
      flush();
    }
    return svg;
  }

  return { h, s, append, group, fmtNum, clock, utc, span, roomDate, roomTime, time, digest, term, table, num, col, scrollHints, morph, setChartWidth, chartWidth, bandChart, lineChart };
})();
