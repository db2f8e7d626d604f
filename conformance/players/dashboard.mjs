// The driver of dashboard_test.go: it connects to the Chromium the test
// started, opens one page, and does what the test asks on its stdin, one JSON
// command a line, answering each on stdout. It judges nothing: the test
// decides what the page must show.
//
//   node dashboard.mjs '{"cdp":"ws://127.0.0.1:PORT/devtools/browser/ID"}'
//
// Commands: {"id":N,"op":"goto","url":...}; {"id":N,"op":"viewport","w":W,"h":H};
// {"id":N,"op":"fill","sel":...,"value":...}; {"id":N,"op":"click","sel":...};
// {"id":N,"op":"wait","fn":JS,"timeoutMs":MS} (until the function, given as
// text, returns something truthy); {"id":N,"op":"eval","fn":JS};
// {"id":N,"op":"screenshot","path":...,"sel":... or "","full":BOOL};
// {"id":N,"op":"patch","fn":JS}: until {"op":"unpatch"}, the page's GET
// /v1/dashboard is answered with the server's answer as the function
// (given as text, run here) changes it, for a state the demo cannot make;
// {"id":N,"op":"states"}: the bodies of the page's latest answers of 200
// to GET /v1/dashboard (at most 20, oldest first), as the page received
// them, so that the test can hold the page's tables against the answer
// they were drawn from. With "tz" in its configuration the page runs in
// that time zone (an IANA name), so that local time differs from UTC.
// Answers: {"kind":"reply","id":N,"ok":BOOL,"value":...,"error":...}.
// Events, as they come: {"kind":"console",...} (errors and warnings, with
// the location's URL), {"kind":"pageerror",...}, {"kind":"requestfailed",...},
// {"kind":"response","status":S,"url":...,"method":...} for every answer of
// 400 or more, and {"kind":"navigated","url":...} for every load of the page.
import { chromium } from 'playwright-core';
import process from 'node:process';
import readline from 'node:readline';

const config = JSON.parse(process.argv[2] || '{}');
const emit = (obj) => process.stdout.write(JSON.stringify({ t: Date.now(), ...obj }) + '\n');

let browser;
let stopping = false;

async function main() {
  browser = await chromium.connectOverCDP(config.cdp);
  const context = config.tz ? await browser.newContext({ timezoneId: config.tz })
    : browser.contexts()[0] || (await browser.newContext());
  const page = await context.newPage();
  const states = [];
  page.on('console', (msg) => {
    const type = msg.type();
    if (type === 'error' || type === 'warning') {
      emit({ kind: 'console', type, text: msg.text().slice(0, 500), url: msg.location()?.url || '' });
    }
  });
  page.on('pageerror', (err) => emit({ kind: 'pageerror', text: String(err).slice(0, 500) }));
  page.on('requestfailed', (req) => emit({ kind: 'requestfailed', url: req.url(), failure: req.failure()?.errorText || '' }));
  page.on('response', (resp) => {
    if (resp.status() >= 400) emit({ kind: 'response', status: resp.status(), url: resp.url(), method: resp.request().method() });
    if (resp.status() === 200 && resp.request().method() === 'GET' && new URL(resp.url()).pathname === '/v1/dashboard') {
      resp.text().then((body) => {
        states.push(body);
        if (states.length > 20) states.shift();
      }, () => {});
    }
  });
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) emit({ kind: 'navigated', url: f.url() });
  });
  // A function, not a string, so that the page's Content-Security-Policy
  // (no 'unsafe-eval') still holds: playwright calls it over CDP.
  const fn = (body) => new Function('return ' + body)();
  const ops = {
    goto: (c) => page.goto(c.url, { waitUntil: 'load' }).then(() => null),
    viewport: (c) => page.setViewportSize({ width: c.w, height: c.h }).then(() => null),
    fill: (c) => page.fill(c.sel, c.value).then(() => null),
    click: (c) => page.click(c.sel).then(() => null),
    wait: (c) => page.waitForFunction(fn('function () { return !!(' + c.fn + ')() }'), null, { timeout: c.timeoutMs || 10000, polling: 100 }).then(() => null),
    eval: (c) => page.evaluate(fn(c.fn)),
    states: () => Promise.resolve(states.slice()),
    patch: (c) => {
      const change = fn(c.fn);
      return page.route((u) => u.pathname === '/v1/dashboard', async (route) => {
        if (route.request().method() !== 'GET') return route.continue();
        const resp = await route.fetch();
        if (resp.status() !== 200) return route.fulfill({ response: resp });
        return route.fulfill({ response: resp, body: JSON.stringify(change(JSON.parse(await resp.text()))) });
      }).then(() => null);
    },
    unpatch: () => page.unrouteAll().then(() => null),
    screenshot: (c) => (c.sel ? page.locator(c.sel).first().screenshot({ path: c.path }) : page.screenshot({ path: c.path, fullPage: !!c.full })).then(() => null),
  };
  const rl = readline.createInterface({ input: process.stdin });
  for await (const l of rl) {
    let c;
    try {
      c = JSON.parse(l);
      const value = await ops[c.op](c);
      emit({ kind: 'reply', id: c.id, ok: true, value: value === undefined ? null : value });
    } catch (e) {
      emit({ kind: 'reply', id: c ? c.id : -1, ok: false, error: String(e && e.message ? e.message : e).slice(0, 2000) });
    }
  }
  await stop(0);
}

// stop asks Chromium to close (see driver.mjs); the test kills what is left.
async function stop(code) {
  if (stopping) return;
  stopping = true;
  try {
    if (browser) {
      const cdp = await browser.newBrowserCDPSession();
      await cdp.send('Browser.close');
    }
  } catch {
    // The browser may be gone already.
  }
  process.exit(code);
}

main().catch((e) => {
  emit({ kind: 'fatal', text: String(e && e.stack ? e.stack : e) });
  stop(1);
});
