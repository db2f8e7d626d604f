// The driver of players_test.go: it connects to the Chromium the test
// started, opens one page per player, and writes what the pages report to
// stdout as JSON lines until its stdin closes. It decides nothing: the test
// stops pathways, changes the evidence and judges the requests its servers
// logged.
//
//   node driver.mjs '{"cdp":"ws://127.0.0.1:PORT/devtools/browser/ID",
//                     "pages":[{"name":"hlsjs","url":"http://127.0.0.1:PORT/pages/hlsjs.html?src=..."}],
//                     "sampleMs":500}'
//
// Lines written: {"kind":"ready","page":NAME} once a page has loaded;
// {"kind":"sample","page":NAME,...} with the page's wai.sample() (see
// pages/common.js); {"kind":"requestfailed","page":NAME,"url":...,
// "failure":...,"t":MS} for a request the browser could not complete (a
// stopped pathway refuses connections, which its server cannot log);
// {"kind":"console","page":NAME,"type":...,"text":...} for the console's
// errors and warnings; {"kind":"fatal","text":...} when the driver fails.
import { chromium } from 'playwright-core';
import process from 'node:process';

const config = JSON.parse(process.argv[2] || '{}');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

let stopping = false;
let browser;

async function main() {
  browser = await chromium.connectOverCDP(config.cdp);
  const context = browser.contexts()[0] || (await browser.newContext());
  const pages = [];
  for (const p of config.pages) {
    const page = await context.newPage();
    page.on('requestfailed', (req) => {
      emit({ kind: 'requestfailed', page: p.name, url: req.url(), failure: req.failure()?.errorText || '', t: Date.now() });
    });
    page.on('console', (msg) => {
      const type = msg.type();
      if (type === 'error' || type === 'warning') {
        emit({ kind: 'console', page: p.name, type, text: msg.text().slice(0, 500), t: Date.now() });
      }
    });
    page.on('pageerror', (err) => {
      emit({ kind: 'console', page: p.name, type: 'pageerror', text: String(err).slice(0, 500), t: Date.now() });
    });
    await page.goto(p.url, { waitUntil: 'load' });
    emit({ kind: 'ready', page: p.name, t: Date.now() });
    pages.push({ name: p.name, page });
  }
  while (!stopping) {
    for (const { name, page } of pages) {
      try {
        const s = await page.evaluate(() => window.wai.sample());
        emit({ kind: 'sample', page: name, ...s });
      } catch (e) {
        if (!stopping) {
          emit({ kind: 'console', page: name, type: 'driver', text: String(e).slice(0, 500), t: Date.now() });
        }
      }
    }
    await new Promise((r) => setTimeout(r, config.sampleMs || 500));
  }
}

// stop asks Chromium to close (a browser connected to over CDP is not
// closed by browser.close(), which only disconnects), so that it ends its
// own processes; the test kills whatever is left.
async function stop(code) {
  if (stopping) {
    return;
  }
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

process.stdin.on('end', () => stop(0));
process.stdin.on('close', () => stop(0));
process.stdin.resume();
main().catch((e) => {
  emit({ kind: 'fatal', text: String(e && e.stack ? e.stack : e) });
  stop(1);
});
