// The operator's page (issue 18, issue 29). It shows what GET /v1/dashboard
// answers, polled every refresh_s, and what POST /v1/dashboard/inspect
// answers for a decision: the page adds no second source of truth, only
// drawings of the same numbers, each chart with a table of its numbers. A
// poll brings the page to the new state in place (WD.morph). The token is
// kept in sessionStorage, for the tab only. The helpers are lib.js's.
'use strict';

(function () {
  const KEY = 'waisteer.token';
  const $ = (id) => document.getElementById(id);
  const { h, s, append, group, fmtNum, clock, utc, span, roomTime, time, digest, term, table, num, col } = window.WD;
  let timer = null;
  let polling = false;
  let last = null; // the latest state, for the inspector's pathway names and a resize

  const badge = (text, cls) => h('span', { class: 'badge ' + (cls || text).replace(/\s+/g, '') }, text);
  const CLASSES = { 2: 'ModelBased', 3: 'Estimator', 4: 'OnChipCounter', 5: 'CalibratedInstrument' };

  // figureText states J/D as the decision does (§5.3: J and D, never a
  // quotient), with the quotient beside it for the eye.
  function figureText(p) {
    if (p.status !== 'figure') return 'no figure';
    const q = Number(p.joules) / Number(p.delivery);
    return group(p.joules) + ' / ' + group(p.delivery) + ' (≈ ' + q.toPrecision(4) + ')';
  }
  function limitsText(l) {
    const over = Object.keys(l || {}).filter((k) => !l[k]).sort();
    return over.length ? 'outside: ' + over.join(', ') : 'within all';
  }
  function healthText(hv) {
    if (!hv) return 'no check';
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

  // render brings the three sections to st in place; the charts are drawn
  // at the width they are shown at.
  function render(st) {
    last = st;
    const board = $('board');
    WD.setChartWidth((board.clientWidth || 750) - 30);
    const at = new Date(st.at);
    $('updated').textContent = 'Server ' + st.server + '; updated ' + clock(at) + ' (every ' + st.refresh_s + ' s)';
    $('updated').setAttribute('data-at', st.at);
    const sample = st.sample_s || 5;
    WD.morph($('rooms'), h('section', { id: 'rooms', 'aria-label': 'Rooms' }, h('h2', {}, 'Rooms'),
      st.rooms.length ? st.rooms.map((rd) => roomView(rd, sample))
        : h('p', { class: 'muted empty' }, 'No energy room: a room appears here once the server steers one (a [[room]] in its configuration).')));
    WD.morph($('pools'), h('section', { id: 'pools', 'aria-label': 'Pools' }, h('h2', {}, 'Pools'),
      st.pools.length ? st.pools.map((pd) => poolView(pd, sample))
        : h('p', { class: 'muted empty' }, 'No pool: a pool appears here once the configuration has a [steering] or [[pool]] section.')));
    WD.morph($('front'), h('section', { id: 'front', 'aria-label': 'Front' }, h('h2', {}, 'Front'),
      st.front ? frontView(st.front)
        : h('p', { class: 'muted empty' }, 'No front: with a [front] section the players\' openings of playlists are counted here.')));
    WD.scrollHints(board);
  }

  function roomView(rd, sample) {
    const st = rd.status;
    const ids = st.pathways.map((p) => p.id);
    const colour = (id) => 'c' + (ids.indexOf(id) % 6);
    const card = h('article', { class: 'card room', 'data-key': st.room, 'data-room': st.room, 'aria-label': 'Room ' + st.name });
    append(card, [
      h('h3', {}, 'Room ', h('q', {}, st.name)),
      h('p', { class: 'muted' }, 'Room digest ', digest(st.room, 'room digest')),
      h('p', { class: 'order', 'data-order': st.order.join(',') }, 'A new session with no report gets (§6.2\'s order): ',
        h('ol', {}, st.order.map((id) => h('li', {}, h('strong', {}, id))))),
      h('p', { class: 'muted' }, 'Window (§5.1, the span the evidence is read over) ', span(st.window[0], st.window[1]),
        st.restoring_loads ? '; restoring loads (the loads count fewer until the log is read again)' : ''),
      h('p', { class: 'muted' }, 'Policy ', digest(st.policy.digest, 'policy digest')),
      table('pathways', 'Pathways', [col('pathway'), col('health', 'health'), col('evidence', 'evidence'), col('class', 'class', true),
        col('figure J / D (' + (rd.unit || 'µJ per unit') + ')', 'figure', true), col('rank', 'rank', true), col('limits', 'limits'),
        col('load (sessions)', 'load', true), col('first (decisions)', 'first', true), col('records', 'records', true)],
      st.pathways.map((p) => [p.id, healthText(p.health), badge(p.status, p.status === 'figure' ? 'figure' : p.status === 'stale' ? 'stale' : 'other'),
        num(p.class ? p.class + ' ' + (CLASSES[p.class] || '') : null, 'none'), { v: figureText(p), cls: 'mono', num: true }, num(p.rank), limitsText(p.limits),
        num(p.load, 'unknown'), num(p.first), num(p.records)])),
      h('div', { class: 'grid' },
        h('div', {}, table('reasons', 'Decisions by reason (total ' + fmtNum(st.decisions.total) + ')', ['reason', col('decisions', null, true)],
          Object.entries(st.decisions.by_reason).sort().map(([k, v]) => [k, num(v)]), 'No decision yet: each steering request under this policy makes one, counted here by its reason.')),
        h('div', {}, table('records', 'Records since the server started', ['records', col('count', null, true)], [
          ['accepted', num(st.records.accepted)], ['duplicate', num(st.records.duplicate)],
          ['off policy', num(st.records.off_policy)], ['from peers', num(st.records.from_peers)],
          ['in the index', num(st.records.in_index)]]),
        table('refused', 'Records refused, by code', ['code', col('refused', null, true)],
          Object.entries(st.records.refused || {}).sort().map(([k, v]) => [k, num(v)]), 'No record refused: a refused record would be counted here by its code.'))),
      st.qoe ? qoeView(st.qoe) : null,
      timeline(rd.hops, st.window, st.policy),
      sharesView('room-shares', 'First-pathway shares of the decisions', 'decisions', rd.history,
        ids, colour, (sm, id) => (sm.first || {})[id], (sm, id) => (sm.load || {})[id], sample),
    ]);
    return card;
  }

  // timeline draws each hop's records over the window [a, b): a bar per
  // hop, a segment per record coloured by its class, gaps in red.
  function timeline(hops, w) {
    const [a, b] = w.map(Number);
    const classes = [...new Set(hops.flatMap((hp) => hp.records.map((r) => r.class)))].sort();
    const cls = (c) => 'c' + ((classes.indexOf(c) + 3) % 6);
    const W = WD.chartWidth(), L = Math.min(160, Math.round(W * 0.4)), R = 8, row = 24, top = 8, H = top + hops.length * row + 24;
    const x = (t) => L + ((Number(t) - a) / Math.max(1, b - a)) * (W - L - R);
    const svg = s('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Each hop\'s records over the window; the table below has the numbers' });
    hops.forEach((hp, i) => {
      const y = top + i * row;
      svg.append(s('text', { x: 4, y: y + 15 }, hp.pathway + ' ' + hp.hop.slice(0, 4) + '…'));
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
    svg.append(s('text', { x: L, y: yAxis + 16 }, utc(WD.roomDate(a))));
    svg.append(s('text', { x: W - R, y: yAxis + 16, 'text-anchor': 'end' }, utc(WD.roomDate(b))));
    const legend = h('ul', { class: 'legend' }, classes.map((c) => h('li', {}, h('span', { class: 'swatch ' + cls(c) }), c)),
      h('li', {}, h('span', { class: 'swatch cgap' }), 'gap (no record)'));
    const rows = hops.map((hp) => [hp.pathway, digest(hp.hop, 'hop key'), num(hp.records.length),
      { v: hp.records.map((r) => `${span(r.start, r.end)} ${r.class}`).join('; ') || 'none', cls: 'long' },
      { v: hp.gaps.length ? hp.gaps.map((g) => span(g[0], g[1])).join('; ') : 'none', cls: 'long' }]);
    return h('figure', { class: 'timeline', 'data-key': 'timeline' }, h('figcaption', {}, 'Records per hop over the window (§5.2: each hop\'s records must tile it)'),
      hops.length ? [svg, legend] : h('p', { class: 'muted empty' }, 'No hop in the policy.'),
      h('details', { 'data-key': 'timeline' }, h('summary', {}, 'The timeline\'s numbers'),
        table('timeline', 'Records per hop', ['pathway', 'hop', col('records', 'records', true), 'periods (class)', col('gaps', 'gap')], rows, 'No hop.')));
  }

  // sharesView charts, between samples, the share of decisions (a room)
  // or manifests (a pool) that put each pathway first: the history's
  // counts only grow, their differences are each interval's. The table
  // holds every interval's numbers, with the live load at its end.
  function sharesView(kind, title, what, hist, ids, colour, firstOf, loadOf, sample) {
    const pts = [];
    for (let i = 1; i < hist.length; i++) {
      const d = {};
      let total = 0;
      for (const id of ids) {
        d[id] = Math.max(0, (firstOf(hist[i], id) || 0) - (firstOf(hist[i - 1], id) || 0));
        total += d[id];
      }
      pts.push({ from: hist[i - 1].at, at: hist[i].at, d, total, load: Object.fromEntries(ids.map((id) => [id, loadOf(hist[i], id)])) });
    }
    const series = ids.map((id) => ({ id, cls: colour(id) }));
    const share = (p, id) => (p.total ? `${fmtNum(p.d[id])} (${((100 * p.d[id]) / p.total).toFixed(1)} %)` : '0');
    const rows = pts.slice().reverse().map((p) => [time(p.at), num(p.total),
      ids.map((id) => ({ v: share(p, id), num: true })), ids.map((id) => num(p.load[id], 'unknown'))]);
    const wait = `The first interval appears one sample after the server started (it samples every ${sample} s); each later one ${sample} s after the last.`;
    return h('figure', { class: 'shares', 'data-key': 'figure ' + kind }, h('figcaption', {}, title + ' between samples, stacked to 100 %'),
      pts.length ? WD.bandChart(pts, series, title + ' between samples; the table below has the numbers') : h('p', { class: 'muted empty' }, wait),
      h('ul', { class: 'legend' }, series.map((sr) => h('li', {}, h('span', { class: 'swatch ' + sr.cls }), sr.id)),
        h('li', {}, h('span', { class: 'swatch cempty' }), 'no ' + what + ' in the interval')),
      h('details', { 'data-key': kind }, h('summary', {}, 'The shares\' numbers, with the live load'),
        table(kind, `${what[0].toUpperCase() + what.slice(1)} between samples, by first, and live sessions (latest first)`,
          [col('until'), col(what, null, true), ids.map((id) => col('first ' + id + ' (share)', 'share', true)), ids.map((id) => col('load ' + id, 'load', true))], rows, wait)));
  }

  const q3 = (with_, xs) => (with_ ? xs.map(fmtNum).join(' / ') + ` (${fmtNum(with_)} reported)` : 'no report');
  function qoeView(q) {
    return h('div', { class: 'qoe', 'data-key': 'qoe' },
      table('qoe-cells', 'QoE cells (window ' + q.settings.window_s + ' s): quantiles over the sessions that reported',
        ['pathway', 'cohort', col('sessions', null, true), 'state', col('throughput p10 / p50 / p90 (bit/s)', 'p10', true), col('buffer p10 / p50 / p90 (ms)', 'p10', true), 'last move'],
        q.cells.map((c) => [c.pathway, c.cohort, num(c.sessions), c.state, { v: q3(c.with_throughput, c.throughput_bps), num: true },
          { v: q3(c.with_buffer, c.buffer_ms), num: true }, c.last_move ? time(c.last_move) : 'none']),
        `No QoE cell yet: a cell appears when a player reports its throughput or buffer, and lasts ${q.settings.window_s} s after its last report.`),
      table('qoe-moves', 'QoE moves (latest first)', ['at', 'pathway', 'cohort', 'to', col('median (bit/s)', null, true), col('best (bit/s)', null, true), col('sessions', null, true), 'reason'],
        q.moves.slice().reverse().map((m) => [time(m.at), m.pathway, m.cohort, m.to, num(m.median_bps), num(m.best_bps), num(m.sessions), m.reason]),
        'No QoE move: a pathway whose median throughput falls behind its cohort\'s best is moved, and listed here.'));
  }

  function poolView(pd, sample) {
    const v = pd.view;
    const ids = v.edges.map((e) => e.pathway);
    const colour = (id) => 'c' + (ids.indexOf(id) % 6);
    const name = v.pool || '[steering]';
    const card = h('article', { class: 'card pool', 'data-key': 'pool ' + name, 'data-pool': name, 'aria-label': 'Pool ' + name });
    const hist = pd.history;
    const health = (e) => (e ? (e.drained ? 'drained' : e.up ? 'up' : 'down') : 'no sample');
    // The health strip: a cell per sample and edge.
    const W = WD.chartWidth(), L = 70, R = 8, row = 22, T = 6;
    const Hh = T + ids.length * row + 22;
    const cw = (W - L - R) / Math.max(1, hist.length);
    const strip = s('svg', { class: 'chart', width: W, height: Hh, viewBox: `0 0 ${W} ${Hh}`, role: 'img', 'aria-label': 'Each edge\'s health over time; the table below has the numbers' });
    ids.forEach((id, i) => {
      strip.append(s('text', { x: 4, y: T + i * row + 15 }, id));
      hist.forEach((sm, j) => {
        const e = sm.edges[id];
        if (!e) return;
        strip.append(s('rect', { x: L + j * cw, y: T + i * row + 2, width: Math.max(1, cw - 0.5), height: row - 5, class: 'c' + health(e) },
          s('title', {}, `${id} ${health(e)} at ${utc(new Date(sm.at))}`)));
      });
    });
    if (hist.length) {
      strip.append(s('text', { x: L, y: Hh - 4 }, utc(new Date(hist[0].at))));
      strip.append(s('text', { x: W - R, y: Hh - 4, 'text-anchor': 'end' }, utc(new Date(hist[hist.length - 1].at))));
    }
    const lat = { times: hist.map((sm) => sm.at), series: ids.map((id) => ({ id, cls: colour(id), ys: hist.map((sm) => (sm.edges[id] ? sm.edges[id].check_ms : null)) })) };
    append(card, [
      h('h3', {}, 'Pool ', h('code', {}, name), ' at ', h('code', {}, v.path)),
      h('p', { class: 'muted' }, (v.enabled ? 'Enabled' : 'Disabled'), '; TTL ', v.ttl_s, ' s; assignment ', v.assign),
      table('edges', 'Edges', ['edge', 'host', col('health', 'health'), col('failures', null, true), 'last error', col('check (ms)', 'check', true), 'last check',
        col('weight', 'weight', true), col('drained', 'drained'), col('first (manifests)', 'first', true), col('sessions', 'load', true), col('headroom (sessions)', 'headroom', true)],
      v.edges.map((e) => [e.pathway, e.host, e.checked ? healthText(e.health) : 'not checked', num(e.health.failures), e.health.last_error || 'none',
        num(e.health.last_check ? e.health.last_ms : null, 'no check yet'), e.health.last_check ? time(e.health.last_check) : 'no check yet', num(e.weight), e.drained ? 'yes' : 'no', num(e.first), num(e.sessions), num(e.headroom)])),
      h('figure', { class: 'health', 'data-key': 'health' }, h('figcaption', {}, 'Health history (a sample every ' + sample + ' s)'), strip,
        h('ul', { class: 'legend' }, ['up', 'down', 'drained'].map((k) => h('li', {}, h('span', { class: 'swatch c' + k }), k))),
        h('details', { 'data-key': 'health' }, h('summary', {}, 'The health history\'s numbers, with the check latencies'),
          table('health', 'Edges by sample (latest first)', [col('at'), ids.map((id) => [col(id + ' health', 'health'), col(id + ' check (ms)', 'check', true), col(id + ' sessions', 'load', true)])],
            hist.slice().reverse().map((sm) => [time(sm.at),
              ids.map((id) => [health(sm.edges[id]), num(sm.edges[id] ? sm.edges[id].check_ms : null), num(sm.edges[id] ? sm.edges[id].sessions : null)])]),
            `No sample yet: the server samples every ${sample} s.`))),
      h('figure', { class: 'latency', 'data-key': 'latency' }, h('figcaption', {}, 'Check latency (ms)'),
        WD.lineChart(lat.times, lat.series, ' ms', 'Each edge\'s health check latency; the health history\'s table has the numbers'),
        h('ul', { class: 'legend' }, lat.series.map((sr) => h('li', {}, h('span', { class: 'swatch ' + sr.cls }), sr.id)))),
      sharesView('pool-shares', 'First-edge shares of the manifests', 'manifests', hist, ids, colour,
        (sm, id) => (sm.edges[id] ? sm.edges[id].first : 0), (sm, id) => (sm.edges[id] ? sm.edges[id].sessions : null), sample),
      table('changes', 'Latest changes (latest first)', ['at', 'edge', 'what', 'detail'],
        v.changes.slice(-12).reverse().map((c) => [time(c.at), c.pathway, c.what, c.detail || '']), 'No change yet: an edge going down or up, drained or reweighted is listed here.'),
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
      h('p', {}, 'Steering share ', ((f.steering_share || 0) * 100).toFixed(1), ' % (of the openings, those by players that steer); redirects ', fmtNum(f.redirects)),
      h('div', { class: 'grid' },
        h('div', {}, table('front-classes', 'Openings by class', ['class', col('openings', null, true)], Object.entries(f.by_class || {}).sort().map(([k, n]) => [k, num(n)]), 'No opening yet: each player\'s opening of a playlist is counted here.')),
        h('div', {}, table('front-families', 'Openings by family', ['class', 'family', col('openings', null, true)], families.sort(), 'No opening yet.')),
        h('div', {}, table('front-failures', 'Failures', ['what', col('count', null, true)], Object.entries(f.failures || {}).sort().map(([k, n]) => [k, num(n)]), 'No failure.'))),
      (f.pools || []).map((p) => table('front-headroom', 'Headroom of pool ' + (p.pool || '[steering]') + ' (' + p.eligible + ' eligible)', ['edge', col('headroom (sessions)', 'headroom', true)],
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
        ' — decision ', digest(r.digest, 'decision digest')),
      table('steps', '§9.1 (the verification of a decision), step by step', ['step', 'what', 'outcome', 'code', 'where', 'detail'],
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
          [['room', d.room], ['signer', d.signer], ['policy', d.policy], ['t', `${fmtNum(d.t)} µs (${roomTime(d.t)})`], ['session', d.session],
            ['draw', `${fmtNum(d.draw)} (§6.3: the session's fixed number in [0, 1,000,000))`], ['protocol', d.protocol], ['report', Object.entries(d.report).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'],
            ['TTL', d.ttl + ' s'], ['reason', d.reason], ['priority', d.priority.map((i) => ids[i] || i).join(' › ')]]
            .map(([k, v]) => [h('dt', {}, k), h('dd', { class: 'mono' }, String(v))])),
        table('decision-pathways', 'Pathways in the decision', ['pathway', 'status', 'class', 'J', 'D', 'records', 'load', 'limits (bits)'],
          d.pathways.map((p, i) => [ids[i] || String(i), p.status, num(p.class), { v: group(p.joules), cls: 'mono', num: true }, { v: group(p.delivery), cls: 'mono', num: true }, num(p.records.length), num(p.load), num(p.limits)])));
    }
    function pathwayName(i) {
      const rm = d && last && last.rooms.find((x) => x.status.policy.digest === d.policy);
      if (r.facts) return r.facts.pathways[i].id;
      return rm && rm.status.pathways[i] ? rm.status.pathways[i].id : '#' + i;
    }
    parts.push(table('decision-records', 'Records the decision names', ['digest', 'pathway', 'found', 'hop', 'start', 'end', 'class', 'joules (µJ)'],
      r.records.map((rc) => [digest(rc.digest, 'record digest'), pathwayName(rc.pathway), rc.found ? 'yes' : 'no',
        rc.hop ? digest(rc.hop, 'hop key') : '—', rc.start ? roomTime(rc.start) : '—', rc.end ? roomTime(rc.end) : '—', rc.class || '—', num(rc.joules || null)]), 'It names no record.'));
    if (r.log) {
      parts.push(h('p', { class: 'log' }, 'In the room\'s log: entry ', h('strong', {}, fmtNum(r.log.index)), ' of ', fmtNum(r.log.size),
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
  // A digest's buttons (WD.digest): copy it whole, or put it in the
  // inspector. One listener for the page, so that a poll's morph, which
  // keeps the buttons, needs to wire nothing.
  document.addEventListener('click', (ev) => {
    const b = ev.target instanceof Element ? ev.target.closest('button[data-copy], button[data-inspect]') : null;
    if (!b) return;
    const hex = b.getAttribute('data-copy') || b.getAttribute('data-inspect');
    if (b.hasAttribute('data-inspect')) {
      $('inspect-input').value = hex;
      $('inspect-input').focus();
      $('inspect-input').scrollIntoView({ block: 'center' });
      return;
    }
    const done = (ok) => {
      b.textContent = ok ? 'copied' : 'selected: press Ctrl+C';
      setTimeout(() => { b.textContent = 'copy'; }, 2000);
    };
    const select = () => {
      const r = document.createRange();
      r.selectNodeContents(b.parentElement.querySelector('code'));
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(r);
      done(false);
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(hex).then(() => done(true), select);
    else select();
  });
  // A new width draws the charts again, at it.
  let resizing = null;
  window.addEventListener('resize', () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (last && !$('board').hidden) render(last); }, 150);
  });
  const saved = sessionStorage.getItem(KEY);
  if (saved) signIn(saved);
  else showSignedIn(false);
})();
