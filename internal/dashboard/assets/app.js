// The operator's page (issue 18). It shows what GET /v1/dashboard answers,
// polled every refresh_s, and what POST /v1/dashboard/inspect answers for a
// decision: the page adds no second source of truth, only drawings of the
// same numbers, each with its table. The token is kept in sessionStorage,
// for the tab only. No library: the server's Content-Security-Policy allows
// scripts and styles from its own files only, so nothing here writes a
// style attribute or an inline handler.
'use strict';

(function () {
  const KEY = 'waisteer.token';
  const $ = (id) => document.getElementById(id);
  let timer = null;
  let polling = false;
  let last = null; // the latest state, for the inspector's pathway names

  // h builds an element: h('td', {class: 'num'}, 'text', child, ...).
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v == null) continue;
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    append(e, kids);
    return e;
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
    for (const k of kids.flat(Infinity)) {
      if (k == null) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  // table makes a scrolling table: head is the column names, rows arrays of
  // cells (a cell is text, a Node, or {v, num, cls}).
  function table(caption, head, rows, empty) {
    if (!rows.length && empty) return h('p', { class: 'muted' }, empty);
    const cell = (tag, c) => {
      if (c && typeof c === 'object' && !(c instanceof Node) && 'v' in c) {
        return h(tag, { class: [c.num ? 'num' : '', c.cls || ''].join(' ').trim() || null, scope: c.scope || null }, c.v);
      }
      return h(tag, {}, c);
    };
    return h('div', { class: 'scroll' },
      h('table', {},
        caption ? h('caption', {}, caption) : null,
        h('thead', {}, h('tr', {}, head.map((c) => {
          const th = cell('th', c);
          th.setAttribute('scope', 'col');
          return th;
        }))),
        h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => {
          if (i === 0) {
            const th = cell('th', c);
            th.setAttribute('scope', 'row');
            return th;
          }
          return cell('td', c);
        }))))));
  }
  const num = (v) => ({ v: v == null ? '—' : fmtNum(v), num: true });
  function fmtNum(v) {
    if (typeof v === 'number') return Number.isInteger(v) ? v.toLocaleString('en') : v.toLocaleString('en', { maximumFractionDigits: 3 });
    return String(v);
  }
  const badge = (text, cls) => h('span', { class: 'badge ' + (cls || text).replace(/\s+/g, '') }, text);
  const short = (hex) => (hex && hex.length > 16 ? hex.slice(0, 12) + '…' : hex || '');
  const hexCode = (hex) => h('code', { title: hex }, short(hex));
  function clock(t) {
    const d = t instanceof Date ? t : new Date(t);
    return isNaN(d) ? '—' : d.toISOString().slice(11, 19) + ' UTC';
  }
  const roomTime = (us) => clock(new Date(Number(us) / 1000));

  // figure states J/D as the decision does (§5.3: J and D, never a
  // quotient), with the quotient beside it for the eye.
  function figureText(p) {
    if (p.status !== 'figure') return '—';
    const q = Number(p.joules) / Number(p.delivery);
    return p.joules + ' / ' + p.delivery + ' (≈ ' + q.toPrecision(4) + ')';
  }
  function limitsText(l) {
    const over = Object.keys(l || {}).filter((k) => !l[k]).sort();
    return over.length ? 'outside: ' + over.join(', ') : 'within all';
  }
  function healthText(hv) {
    if (!hv) return '—';
    return badge(hv.up ? 'up' : 'down');
  }

  // ---- signing in ------------------------------------------------------

  async function api(path, opts) {
    const token = sessionStorage.getItem(KEY) || '';
    const o = Object.assign({ headers: {} }, opts || {});
    o.headers = Object.assign({ Authorization: 'Bearer ' + token }, o.headers);
    const resp = await fetch(path, o);
    let body = null;
    const text = await resp.text();
    try { body = JSON.parse(text); } catch (e) { body = null; }
    if (!resp.ok) {
      const err = new Error(body && body.detail ? body.error + ': ' + body.detail : 'HTTP ' + resp.status + ' ' + text.slice(0, 200));
      err.status = resp.status;
      err.code = body && body.error;
      throw err;
    }
    if (body == null) throw new Error('the server answered something that is not JSON');
    return body;
  }

  function showSignedIn(on) {
    $('signin').hidden = on;
    $('board').hidden = !on;
    $('signout').hidden = !on;
    if (!on) {
      $('updated').textContent = '';
      $('poll-error').hidden = true;
    }
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    if (timer) clearTimeout(timer);
    timer = null;
    showSignedIn(false);
    for (const id of ['rooms', 'pools', 'front', 'inspect-out']) $(id).replaceChildren();
    $('inspect-msg').hidden = true;
    const msg = $('signin-msg');
    msg.hidden = !message;
    msg.textContent = message || '';
    $('token').focus();
  }

  async function signIn(token) {
    sessionStorage.setItem(KEY, token);
    try {
      const st = await api('/v1/dashboard');
      $('signin-msg').hidden = true;
      showSignedIn(true);
      render(st);
      schedule(st.refresh_s);
    } catch (e) {
      sessionStorage.removeItem(KEY);
      signOut('Signing in failed: ' + e.message);
    }
  }

  function schedule(refreshS) {
    if (timer) clearTimeout(timer);
    timer = setTimeout(poll, Math.max(1, refreshS || 3) * 1000);
  }

  async function poll() {
    if (polling || !sessionStorage.getItem(KEY)) return;
    polling = true;
    let refresh = 3;
    try {
      const st = await api('/v1/dashboard');
      refresh = st.refresh_s;
      $('poll-error').hidden = true;
      render(st);
    } catch (e) {
      if (e.status === 401) {
        polling = false;
        signOut('Signed out: ' + e.message);
        return;
      }
      const pe = $('poll-error');
      pe.textContent = 'The update at ' + clock(new Date()) + ' failed: ' + e.message + '. Showing the last data; trying again.';
      pe.hidden = false;
    }
    polling = false;
    schedule(refresh);
  }

  // ---- the state -------------------------------------------------------

  function render(st) {
    last = st;
    $('updated').textContent = 'Server ' + st.server + '; updated ' + clock(st.at) + ' (every ' + st.refresh_s + ' s)';
    $('updated').setAttribute('data-at', st.at);
    const rooms = $('rooms');
    rooms.replaceChildren(h('h2', {}, 'Rooms'),
      ...(st.rooms.length ? st.rooms.map(roomView) : [h('p', { class: 'muted' }, 'No energy room.')]));
    const pools = $('pools');
    pools.replaceChildren(h('h2', {}, 'Pools'),
      ...(st.pools.length ? st.pools.map(poolView) : [h('p', { class: 'muted' }, 'No pool.')]));
    const front = $('front');
    front.replaceChildren(h('h2', {}, 'Front'), st.front ? frontView(st.front) : h('p', { class: 'muted' }, 'No front.'));
  }

  function roomView(rd) {
    const st = rd.status;
    const ids = st.pathways.map((p) => p.id);
    const colour = (id) => 'c' + (ids.indexOf(id) % 6);
    const card = h('article', { class: 'card room', 'data-room': st.room, 'aria-label': 'Room ' + st.name });
    append(card, [
      h('h3', {}, 'Room ', h('q', {}, st.name), ' ', hexCode(st.room)),
      h('p', { class: 'order', 'data-order': st.order.join(',') }, 'A new session with no report gets: ',
        h('ol', {}, st.order.map((id) => h('li', {}, h('strong', {}, id))))),
      h('p', { class: 'muted' }, 'Window ', roomTime(st.window[0]), ' to ', roomTime(st.window[1]),
        ' (§5.1); policy ', hexCode(st.policy.digest), st.restoring_loads ? '; restoring loads' : ''),
      table('Pathways', ['pathway', 'health', 'evidence', 'class', 'figure J / D (µJ per unit)', 'rank', 'limits', 'load', 'first (decisions)', 'records'],
        st.pathways.map((p) => [p.id, healthText(p.health), badge(p.status, p.status === 'figure' ? 'figure' : p.status === 'stale' ? 'stale' : 'other'),
          num(p.class), { v: figureText(p), cls: 'mono' }, num(p.rank), limitsText(p.limits), num(p.load), num(p.first), num(p.records)])),
      h('div', { class: 'grid' },
        h('div', {}, table('Decisions by reason (total ' + st.decisions.total + ')', ['reason', 'decisions'],
          Object.entries(st.decisions.by_reason).sort().map(([k, v]) => [k, num(v)]))),
        h('div', {}, table('Records', ['records', 'count'], [
          ['accepted', num(st.records.accepted)], ['duplicate', num(st.records.duplicate)],
          ['off policy', num(st.records.off_policy)], ['from peers', num(st.records.from_peers)],
          ['in the index', num(st.records.in_index)]]),
        table('Records refused, by code', ['code', 'refused'],
          Object.entries(st.records.refused || {}).sort().map(([k, v]) => [k, num(v)]), 'No record refused.'))),
      st.qoe ? qoeView(st.qoe) : null,
      timeline(rd.hops, st.window, colour),
      sharesView(rd.history, ids, colour),
    ]);
    return card;
  }

  // timeline draws each hop's records over the window [a, b): a bar per
  // hop, a segment per record coloured by its class, gaps in red.
  function timeline(hops, w, colour) {
    const [a, b] = w.map(Number);
    const classes = [...new Set(hops.flatMap((hp) => hp.records.map((r) => r.class)))].sort();
    const cls = (c) => 'c' + ((classes.indexOf(c) + 3) % 6);
    const W = 720, L = 150, R = 10, row = 22, top = 8, H = top + hops.length * row + 22;
    const x = (t) => L + ((Number(t) - a) / Math.max(1, b - a)) * (W - L - R);
    const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Each hop\'s records over the window; the table below has the numbers' });
    hops.forEach((hp, i) => {
      const y = top + i * row;
      svg.append(s('text', { x: 4, y: y + 14 }, hp.pathway + ' ' + hp.hop.slice(0, 6)));
      for (const r of hp.records) {
        const x0 = x(Math.max(a, r.start)), x1 = x(Math.min(b, r.end));
        svg.append(s('rect', { x: x0, y: y + 2, width: Math.max(1, x1 - x0 - 1), height: row - 6, class: cls(r.class) },
          s('title', {}, `${r.class} ${roomTime(r.start)} to ${roomTime(r.end)}`)));
      }
      for (const g of hp.gaps) {
        const x0 = x(g[0]), x1 = x(g[1]);
        svg.append(s('rect', { x: x0, y: y + 2, width: Math.max(2, x1 - x0), height: row - 6, class: 'gap' },
          s('title', {}, `gap ${roomTime(g[0])} to ${roomTime(g[1])}`)));
      }
    });
    const yAxis = top + hops.length * row + 2;
    svg.append(s('line', { x1: L, x2: W - R, y1: yAxis, y2: yAxis, class: 'axis' }));
    svg.append(s('text', { x: L, y: yAxis + 14 }, roomTime(a)));
    svg.append(s('text', { x: W - R, y: yAxis + 14, 'text-anchor': 'end' }, roomTime(b)));
    const legend = h('ul', { class: 'legend' }, classes.map((c) => h('li', {}, h('span', { class: 'swatch ' + cls(c) }), c)),
      h('li', {}, h('span', { class: 'swatch cgap' }), 'gap (no record)'));
    const rows = hops.map((hp) => [hp.pathway, hexCode(hp.hop), num(hp.records.length),
      hp.records.map((r) => `${roomTime(r.start).slice(0, 8)}–${roomTime(r.end).slice(0, 8)} ${r.class}`).join('; ') || '—',
      hp.gaps.length ? hp.gaps.map((g) => `${roomTime(g[0]).slice(0, 8)}–${roomTime(g[1]).slice(0, 8)}`).join('; ') : 'none']);
    return h('figure', { class: 'timeline' }, h('figcaption', {}, 'Records per hop over the window'), svg, legend,
      h('details', {}, h('summary', {}, 'The timeline\'s numbers'),
        table('Records per hop', ['pathway', 'hop', 'records', 'periods (class)', 'gaps'], rows)));
  }

  // sharesView charts, between samples, the share of decisions that put
  // each pathway first (the history's counts only grow: their differences
  // are the decisions of each interval), and tabulates them with the live
  // load.
  function sharesView(hist, ids, colour) {
    const pts = [];
    for (let i = 1; i < hist.length; i++) {
      const d = {};
      let total = 0;
      for (const id of ids) {
        d[id] = Math.max(0, (hist[i].first[id] || 0) - (hist[i - 1].first[id] || 0));
        total += d[id];
      }
      pts.push({ at: hist[i].at, d, total, load: hist[i].load || {} });
    }
    const series = ids.map((id) => ({ id, cls: colour(id), ys: pts.map((p) => (p.total ? (100 * p.d[id]) / p.total : null)) }));
    const chart = lineChart(pts.map((p) => p.at), series, 100, '%',
      'First-pathway shares of the decisions between samples; the table below has the numbers');
    const rows = pts.slice().reverse().map((p) => [clock(p.at), num(p.total),
      ids.map((id) => ({ v: p.total ? `${p.d[id]} (${((100 * p.d[id]) / p.total).toFixed(0)} %)` : '0', num: true })),
      ids.map((id) => num(p.load[id] == null ? null : p.load[id]))]);
    return h('figure', { class: 'shares' }, h('figcaption', {}, 'First-pathway shares over time'),
      pts.length ? chart : h('p', { class: 'muted' }, 'Waiting for a second sample.'),
      legendOf(series),
      h('details', {}, h('summary', {}, 'The shares\' numbers, with the live load'),
        table('Decisions between samples, by first pathway, and live sessions', ['until', 'decisions', ids.map((id) => 'first ' + id), ids.map((id) => 'load ' + id)], rows, 'No interval yet.')));
  }

  function legendOf(series) {
    return h('ul', { class: 'legend' }, series.map((sr) => h('li', {}, h('span', { class: 'swatch ' + sr.cls }), sr.id)));
  }

  // lineChart draws series over sample times; a null is a break.
  function lineChart(times, series, yMax, unit, label) {
    const W = 720, H = 180, L = 70, R = 10, T = 10, B = 24;
    const max = yMax || Math.max(1e-9, ...series.flatMap((sr) => sr.ys.filter((y) => y != null)));
    const n = times.length;
    const x = (i) => L + (n <= 1 ? 0 : (i / (n - 1)) * (W - L - R));
    const y = (v) => T + (1 - v / max) * (H - T - B);
    const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    for (const f of [0, 0.5, 1]) {
      svg.append(s('line', { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), class: f ? 'grid-line' : 'axis' }));
      svg.append(s('text', { x: L - 4, y: y(max * f) + 4, 'text-anchor': 'end' }, fmtNum(+(max * f).toPrecision(3)) + unit));
    }
    if (n) {
      svg.append(s('text', { x: L, y: H - 6 }, clock(times[0])));
      svg.append(s('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, clock(times[n - 1])));
    }
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

  function qoeView(q) {
    return h('div', { class: 'qoe' },
      table('QoE cells (window ' + q.settings.window_s + ' s)', ['pathway', 'cohort', 'sessions', 'state', 'throughput p25/p50/p75 (bit/s)', 'buffer p25/p50/p75 (ms)', 'last move'],
        q.cells.map((c) => [c.pathway, c.cohort, num(c.sessions), c.state, { v: c.throughput_bps.join(' / '), num: true }, { v: c.buffer_ms.join(' / '), num: true }, c.last_move ? clock(c.last_move) : '—']), 'No QoE cell yet.'),
      table('QoE moves (latest first)', ['at', 'pathway', 'cohort', 'to', 'median (bit/s)', 'best (bit/s)', 'sessions', 'reason'],
        q.moves.slice().reverse().map((m) => [clock(m.at), m.pathway, m.cohort, m.to, num(m.median_bps), num(m.best_bps), num(m.sessions), m.reason]), 'No QoE move.'));
  }

  function poolView(pd) {
    const v = pd.view;
    const ids = v.edges.map((e) => e.pathway);
    const colour = (id) => 'c' + (ids.indexOf(id) % 6);
    const name = v.pool || '[steering]';
    const card = h('article', { class: 'card pool', 'data-pool': name, 'aria-label': 'Pool ' + name });
    const hist = pd.history;
    // The health strip: a cell per sample and edge.
    const W = 720, L = 70, R = 10, row = 20, T = 6;
    const Hh = T + ids.length * row + 20;
    const cw = (W - L - R) / Math.max(1, hist.length);
    const strip = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${Hh}`, role: 'img', 'aria-label': 'Each edge\'s health over time; the table below has the numbers' });
    ids.forEach((id, i) => {
      strip.append(s('text', { x: 4, y: T + i * row + 13 }, id));
      hist.forEach((sm, j) => {
        const e = sm.edges[id];
        if (!e) return;
        const st = e.drained ? 'drained' : e.up ? 'up' : 'down';
        strip.append(s('rect', { x: L + j * cw, y: T + i * row + 2, width: Math.max(1, cw - 0.5), height: row - 5, class: 'c' + st },
          s('title', {}, `${id} ${st} at ${clock(sm.at)}`)));
      });
    });
    if (hist.length) {
      strip.append(s('text', { x: L, y: Hh - 4 }, clock(hist[0].at)));
      strip.append(s('text', { x: W - R, y: Hh - 4, 'text-anchor': 'end' }, clock(hist[hist.length - 1].at)));
    }
    const lat = { times: hist.map((sm) => sm.at), series: ids.map((id) => ({ id, cls: colour(id), ys: hist.map((sm) => (sm.edges[id] ? sm.edges[id].check_ms : null)) })) };
    append(card, [
      h('h3', {}, 'Pool ', h('code', {}, name), ' at ', h('code', {}, v.path)),
      h('p', { class: 'muted' }, (v.enabled ? 'Enabled' : 'Disabled'), '; TTL ', v.ttl_s, ' s; assignment ', v.assign),
      table('Edges', ['edge', 'host', 'health', 'failures', 'last error', 'check (ms)', 'last check', 'weight', 'drained', 'first', 'sessions', 'headroom'],
        v.edges.map((e) => [e.pathway, e.host, e.checked ? healthText(e.health) : 'not checked', num(e.health.failures), e.health.last_error || '—',
          num(e.health.last_ms), e.health.last_check ? clock(e.health.last_check) : '—', num(e.weight), e.drained ? 'yes' : 'no', num(e.first), num(e.sessions), num(e.headroom)])),
      h('figure', { class: 'health' }, h('figcaption', {}, 'Health history'), strip,
        h('ul', { class: 'legend' }, ['up', 'down', 'drained'].map((k) => h('li', {}, h('span', { class: 'swatch c' + k }), k))),
        h('details', {}, h('summary', {}, 'The health history\'s numbers'),
          table('Edges by sample (latest first)', ['at', ids.map((id) => id + ' health'), ids.map((id) => id + ' check (ms)'), ids.map((id) => id + ' sessions')],
            hist.slice().reverse().map((sm) => [clock(sm.at),
              ids.map((id) => (sm.edges[id] ? (sm.edges[id].drained ? 'drained' : sm.edges[id].up ? 'up' : 'down') : '—')),
              ids.map((id) => num(sm.edges[id] ? sm.edges[id].check_ms : null)),
              ids.map((id) => num(sm.edges[id] ? sm.edges[id].sessions : null))])))),
      h('figure', { class: 'latency' }, h('figcaption', {}, 'Check latency (ms)'),
        lineChart(lat.times, lat.series, 0, ' ms', 'Each edge\'s health check latency; the health history\'s table has the numbers'), legendOf(lat.series)),
      table('Latest changes (latest first)', ['at', 'edge', 'what', 'detail'],
        v.changes.slice(-12).reverse().map((c) => [clock(c.at), c.pathway, c.what, c.detail || '']), 'No change yet.'),
      v.qoe ? qoeView(v.qoe) : null,
    ]);
    return card;
  }

  function frontView(f) {
    const families = [];
    for (const [cls, fams] of Object.entries(f.by_family || {})) {
      for (const [fam, n] of Object.entries(fams)) families.push([cls, fam, num(n)]);
    }
    return h('div', { class: 'card' },
      h('p', {}, 'Steering share ', ((f.steering_share || 0) * 100).toFixed(1), ' %; redirects ', f.redirects),
      h('div', { class: 'grid' },
        h('div', {}, table('Openings by class', ['class', 'openings'], Object.entries(f.by_class || {}).sort().map(([k, n]) => [k, num(n)]), 'No opening yet.')),
        h('div', {}, table('Openings by family', ['class', 'family', 'openings'], families.sort(), 'No opening yet.')),
        h('div', {}, table('Failures', ['what', 'count'], Object.entries(f.failures || {}).sort().map(([k, n]) => [k, num(n)]), 'No failure.'))),
      (f.pools || []).map((p) => table('Headroom of pool ' + (p.pool || '[steering]') + ' (' + p.eligible + ' eligible)', ['edge', 'headroom'],
        Object.entries(p.headroom || {}).sort().map(([k, n]) => [k, num(n)]))));
  }

  // ---- the inspector ---------------------------------------------------

  async function inspect(input) {
    const msg = $('inspect-msg');
    const out = $('inspect-out');
    msg.hidden = true;
    out.replaceChildren(h('p', { class: 'muted' }, 'Inspecting…'));
    try {
      const r = await api('/v1/dashboard/inspect', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ input }) });
      out.replaceChildren(inspection(r));
    } catch (e) {
      out.replaceChildren();
      msg.textContent = 'Not inspected: ' + e.message;
      msg.hidden = false;
      if (e.status === 401) signOut('Signed out: ' + e.message);
    }
  }

  function inspection(r) {
    const d = r.decision;
    const refused = r.steps.find((st) => st.outcome === 'refused');
    const parts = [
      h('p', { class: 'verdict ' + (r.verdict === 'accepted' ? 'ok' : 'alert'), 'data-verdict': r.verdict },
        'Verdict: ', badge(r.verdict), ' ', refused ? `at step ${refused.step} (${refused.code || 'refused'})` : 'every step passed',
        ' — decision ', h('code', {}, r.digest || '?')),
      table('§9.1, step by step', ['step', 'what', 'outcome', 'code', 'where', 'detail'],
        r.steps.map((st) => [{ v: String(st.step), num: true }, st.name, badge(st.outcome, st.outcome.replace(' ', '')), st.code || '', st.where || '', st.detail || ''])),
    ];
    if (d) {
      // The pathways' ids: the verifier's facts, or for a refused decision
      // the room's, when its policy is the active one (the status lists
      // the pathways in the policy's order).
      const rm = last && last.rooms.find((x) => x.status.policy.digest === d.policy);
      const ids = r.facts ? r.facts.pathways.map((p) => p.id)
        : rm && rm.status.pathways.length === d.pathways.length ? rm.status.pathways.map((p) => p.id)
          : d.pathways.map((_, i) => '#' + i);
      parts.push(h('h3', {}, 'The decision (§7.1)'),
        h('dl', { class: 'facts' },
          [['room', d.room], ['signer', d.signer], ['policy', d.policy], ['t', `${d.t} (${roomTime(d.t)})`], ['session', d.session],
            ['draw', d.draw], ['protocol', d.protocol], ['report', Object.entries(d.report).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'],
            ['TTL', d.ttl + ' s'], ['reason', d.reason], ['priority', d.priority.map((i) => ids[i] || i).join(' › ')]]
            .map(([k, v]) => [h('dt', {}, k), h('dd', { class: 'mono' }, String(v))])),
        table('Pathways in the decision', ['pathway', 'status', 'class', 'J', 'D', 'records', 'load', 'limits (bits)'],
          d.pathways.map((p, i) => [ids[i] || String(i), p.status, num(p.class), { v: p.joules, cls: 'mono' }, { v: p.delivery, cls: 'mono' }, num(p.records.length), num(p.load), num(p.limits)])));
    }
    function pathwayName(i) {
      const rm = d && last && last.rooms.find((x) => x.status.policy.digest === d.policy);
      if (r.facts) return r.facts.pathways[i].id;
      return rm && rm.status.pathways[i] ? rm.status.pathways[i].id : '#' + i;
    }
    parts.push(table('Records the decision names', ['digest', 'pathway', 'found', 'hop', 'start', 'end', 'class', 'joules (µJ)'],
      r.records.map((rc) => [hexCode(rc.digest), pathwayName(rc.pathway), rc.found ? 'yes' : 'no',
        rc.hop ? hexCode(rc.hop) : '—', rc.start ? roomTime(rc.start) : '—', rc.end ? roomTime(rc.end) : '—', rc.class || '—', num(rc.joules || null)]), 'It names no record.'));
    if (r.log) {
      parts.push(h('p', { class: 'log' }, 'In the room\'s log: entry ', h('strong', {}, r.log.index), ' of ', r.log.size,
        r.log.key_log_seq != null ? ', under key log entry ' + r.log.key_log_seq : ''));
    } else if (r.log_error) {
      parts.push(h('p', { class: 'log muted' }, 'Not placed in the log: ', r.log_error));
    }
    return h('div', {}, parts);
  }

  // ---- wiring ----------------------------------------------------------

  $('signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    $('token').value = '';
    if (t) signIn(t);
  });
  $('signout').addEventListener('click', () => signOut('Signed out.'));
  $('inspect-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    inspect($('inspect-input').value);
  });
  const saved = sessionStorage.getItem(KEY);
  if (saved) signIn(saved);
  else showSignedIn(false);
})();
