// End-to-end test of the browser app's per-expert θ (issue 18) and models at URLs (issue 19)
// in headless Chromium, as tests/web/e2e.mjs drives it. Usage (scripts/web-e2e.sh sets it up):
//   node tests/web/e2e-experts-url.mjs DIST ORGAN_BIN OUT_DIR MOE MODEL NGINX_BIN [SHARD,SHARD...]
// Experts, on the test MoE (tests/web/make-moe.py): with no option chosen, every expert's θ,
// degenerate, outlier and duplicate_of on the page's layer × expert heatmaps equal
// `organ measure --experts --json`'s exactly, and the routers and shared experts are listed
// as such; in σ mode, each expert's σ_θ too; the exported JSON is the CLI's report field for
// field, and the exported static page carries the same experts.
// URLs, with Debian's nginx on a free loopback port serving MODEL and the MoE from two
// locations, one sending CORS headers and one not: the URL with CORS gives the local θ
// (as `organ measure --json` on the local file, exactly) and reads only ranges; the URL
// without gets the sentence that says the host does not allow reading from this page and
// what to do; a file changed on the host after its header was read (a new ETag) is an
// error, not a θ; a URL that is not a GGUF and one that is not there get plain errors
// naming it. The MoE at the URL with CORS gives the CLI's per-expert θ too, and a split
// model by the URL of its last shard (siblings by name) the θ of the local shards.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, organ, outDir, moe, model, nginxBin, split] = process.argv.slice(2, 9);
const shards = split ? split.split(',') : [];
fs.mkdirSync(outDir, { recursive: true });
let failures = 0, passes = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++; else failures++;
}

// `organ measure FILE --json` with `flags`: the whole report.
function cliReport(file, flags, tag) {
  const json = path.join(outDir, `cli-${tag}-${path.basename(file)}.json`);
  execFileSync(organ, ['measure', file, '--summary-only', '--force', '--no-cache', ...flags, '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

const waitThreads = (p) => p.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0, null, { timeout: 60_000 });

async function measureIn(page, file, mode = 'sampled') {
  await page.goto(`${origin}/`);
  await waitThreads(page);
  if (mode !== 'sampled') await page.selectOption('#measure-mode', mode);
  await page.setInputFiles('#file-input', file);
  await page.waitForSelector('#report[data-done], #error', { timeout: 300_000 });
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
}

// The experts as a page shows them: `NAME#e` → [θ, σ, degenerate, outlier, duplicate_of].
async function pageExperts(p, sel) {
  const cells = await p.$$eval(sel, (tds) => tds.map((td) => ({ ...td.dataset })));
  const num = (v) => (v === '' || v === undefined ? null : Number(v));
  return new Map(cells.map((d) => [`${d.name}#${d.expert}`,
    [num(d.theta), num(d.sigma), d.degenerate === 'true', d.outlier === 'true', num(d.duplicateOf)]]));
}

// The CLI's experts in the same form, and what the report holds besides.
function cliExperts(r) {
  const out = new Map();
  for (const t of r.models[0].tensors) {
    for (const x of t.experts ?? []) {
      out.set(`${t.name}#${x.expert}`, [x.theta, x.sigma ?? null, x.degenerate, x.outlier, x.duplicate_of ?? null]);
    }
  }
  return out;
}

function sameExperts(label, want, got) {
  let differ = 0, missing = 0;
  for (const [k, w] of want) {
    const g = got.get(k);
    if (!g) { missing++; continue; }
    if (JSON.stringify(g) !== JSON.stringify(w)) {
      if (++differ <= 3) console.log(`  ${k}: CLI ${JSON.stringify(w)}, page ${JSON.stringify(g)}`);
    }
  }
  const flags = [...want.values()];
  check(missing === 0 && differ === 0 && got.size === want.size,
    `${label}: ${got.size} experts (CLI ${want.size}, ${flags.filter((x) => x[3]).length} outliers, ` +
    `${flags.filter((x) => x[4] !== null).length} duplicates), ${differ} differ in θ, σ, degenerate, outlier or duplicate_of`);
}

const strip = (r) => JSON.stringify({ ...r, generator: '' });

async function exportJson(page, name) {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  const file = path.join(outDir, name);
  await d.saveAs(file);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

async function measureUrl(page, url) {
  await page.goto(`${origin}/`);
  await waitThreads(page);
  await page.fill('#url', url);
  await page.click('#url-open');
  await page.waitForSelector('#report[data-done], #error', { timeout: 300_000 });
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
}

async function urlError(page, url) {
  await page.goto(`${origin}/`);
  await waitThreads(page);
  await page.fill('#url', url);
  await page.click('#url-open');
  await page.waitForSelector('#report[data-done], #error', { timeout: 60_000 });
  return (await page.textContent('#error')) ?? '(no error shown)';
}

// Debian's nginx on a free loopback port, in the foreground with a config of its own, serving
// `files` (name → path to link, or null for a small text file) under /cors/ with CORS headers
// and under /plain/ without. `log()`: each request's status and method.
async function startNginx(files) {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
  const d = path.resolve(outDir, 'nginx');
  fs.rmSync(d, { recursive: true, force: true });
  fs.mkdirSync(path.join(d, 'www'), { recursive: true });
  fs.mkdirSync(path.join(d, 'tmp'));
  for (const [name, file] of Object.entries(files)) {
    if (file) fs.symlinkSync(path.resolve(file), path.join(d, 'www', name));
    else fs.writeFileSync(path.join(d, 'www', name), 'this is not a model, just text\n'.repeat(10));
  }
  const cors = ['add_header Access-Control-Allow-Origin "*" always;',
    'add_header Access-Control-Expose-Headers "Content-Range, ETag, Content-Length" always;',
    'add_header Access-Control-Allow-Headers "Range" always;',
    'add_header Access-Control-Allow-Methods "GET, HEAD, OPTIONS" always;',
    'if ($request_method = OPTIONS) { return 204; }'].join(' ');
  const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `${t}_temp_path ${d}/tmp;`).join(' ');
  fs.writeFileSync(path.join(d, 'nginx.conf'), `daemon off; master_process off; worker_processes 1;
pid ${d}/nginx.pid; error_log ${d}/error.log;
events { worker_connections 64; }
http {
  log_format organ '$status $request_method';
  access_log ${d}/access.log organ;
  ${temps}
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${port};
    location /cors/ { alias ${d}/www/; ${cors} }
    location /plain/ { alias ${d}/www/; }
  }
}
`);
  const child = spawn(nginxBin, ['-p', d, '-c', path.join(d, 'nginx.conf'), '-e', path.join(d, 'error.log')], { stdio: 'ignore' });
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.end(); resolve(true); }).on('error', () => resolve(false));
    });
    if (up) break;
    if (child.exitCode !== null || i > 400) throw new Error(`nginx did not start: ${fs.readFileSync(path.join(d, 'error.log'), 'utf8')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const logFile = path.join(d, 'access.log');
  let seen = 0;
  return {
    url: (rel) => `http://127.0.0.1:${port}/${rel}`,
    kill: () => child.kill(),
    dir: d,
    // The requests since the last call (`peek`: without moving past them).
    log: (peek = false) => {
      const lines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').trim().split('\n').filter(Boolean) : [];
      const out = lines.slice(seen).map((l) => { const [status, method] = l.split(' '); return { status: Number(status), method }; });
      if (!peek) seen = lines.length;
      return out;
    },
  };
}

const server = await serve(path.resolve(dist));
const origin = `http://127.0.0.1:${server.address().port}`;
const context = await launch({ acceptDownloads: true, viewport: { width: 1400, height: 1000 } });
const page = context.pages()[0] ?? await context.newPage();
page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
let nginx;

try {
  // 1. Per-expert θ, on by default for a mixture of experts.
  {
    const cli = cliReport(moe, ['--experts'], 'experts');
    const want = cliExperts(cli);
    const flags = [...want.values()];
    check(flags.some((x) => x[3]) && flags.some((x) => x[4] !== null),
      `the test MoE has outliers and duplicates by organ measure --experts (${flags.length} experts)`);
    const t0 = Date.now();
    await measureIn(page, moe);
    sameExperts(`experts on the page (${Date.now() - t0} ms, no option chosen) vs organ measure --experts --json`,
      want, await pageExperts(page, '#experts td[data-expert]'));
    // A copy is never marked an outlier, whatever §6's figure says; the caption counts the marks.
    const marks = await page.$$eval('#experts td[data-expert]', (tds) => tds.map((td) => [td.dataset.duplicateOf, td.dataset.outlier, td.dataset.standing, td.style.outlineStyle]));
    const copies = marks.filter((m) => m[0] !== '');
    const outlined = marks.filter((m) => m[2] === 'outlier');
    const caption = await page.textContent('#experts-caption');
    check(copies.length > 0 && copies.every((m) => m[2] === 'copy' && m[3] === '') &&
      outlined.every((m) => m[0] === '' && m[1] === 'true' && m[3] === 'solid') &&
      caption.includes(`${outlined.length} of them;`) && caption.includes(`${copies.length} of them.`),
      `copies never outlined: ${copies.length} copies (${copies.filter((m) => m[1] === 'true').length} over 3 MAD), ` +
      `${outlined.length} outlined, ${marks.filter((m) => m[2] === 'noise_not_measured').length} dotted; caption "${caption.slice(0, 60)}…"`);
    const kinds = await page.$$eval('#experts table.experts', (ts) => ts.map((t) => t.dataset.kind));
    check(JSON.stringify(kinds) === JSON.stringify(['gate', 'up', 'down']), `one heatmap per FFN kind: ${kinds.join(', ')}`);
    const routers = await page.$$eval('#routers tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.dataset.kind, Number(r.dataset.theta)]));
    const wantRouters = cli.models[0].tensors.filter((t) => t.organ === 'router' || t.organ === 'shared_expert')
      .map((t) => [t.name, t.organ === 'router' ? 'router' : 'shared expert', t.theta]);
    check(routers.length > 0 && JSON.stringify(routers) === JSON.stringify(wantRouters),
      `routers and shared experts listed as such with the CLI's θ: ${routers.map((r) => `${r[0]} (${r[1]})`).join(', ')}`);
    // Every layer shows: no box around a heatmap scrolls it vertically; one fixed θ legend.
    const cut = await page.$$eval('#experts table.experts', (ts) => ts.filter((t) => {
      for (let e = t.parentElement; e && e.id !== 'experts'; e = e.parentElement) {
        if (e.clientHeight < t.offsetHeight && getComputedStyle(e).overflowY !== 'visible') return true;
      }
      return false;
    }).length);
    const legend = await page.textContent('#experts .legend-line');
    check(cut === 0 && legend.startsWith('0°') && legend.includes('90°'),
      `the expert heatmaps show every layer (${cut} cut by a scrolling box) on the fixed θ scale ("${legend.slice(0, 30)}…")`);
    await page.locator('#experts').screenshot({ path: path.join(outDir, 'experts.png') });
    const ex = await exportJson(page, 'export-experts.json');
    check(strip(ex) === strip(cli), `the exported JSON is organ measure --experts --json's report field for field (generator "${ex.generator}")`);
    const [dh] = await Promise.all([page.waitForEvent('download'), page.click('#export-html')]);
    const html = path.join(outDir, 'export-experts.html');
    await dh.saveAs(html);
    const st = await context.newPage();
    await st.goto('file://' + path.resolve(html));
    const cells = await st.$$eval('table.experts td[data-v]', (tds) => tds.map((t) => Number(t.dataset.v)));
    // The static page's order: kind by kind (gate, up, down), layer by layer, expert by expert.
    const kindOf = (n) => n.match(/ffn_(.*)_exps/)?.[1];
    const thetas = ['gate', 'up', 'down'].flatMap((k) => cli.models[0].tensors.filter((t) => t.experts && kindOf(t.name) === k)
      .sort((a, b) => a.layer - b.layer).flatMap((t) => t.experts.map((x) => x.theta)));
    check(cells.length === want.size && cells.every((c, i) => c === thetas[i]),
      `the exported static page's expert heatmaps hold the same ${cells.length} θ (CLI ${want.size})`);
    await st.close();

    const cliS = cliReport(moe, ['--experts', '--sigma'], 'experts-sigma');
    const wantS = cliExperts(cliS);
    await measureIn(page, moe, 'sigma');
    const gotS = await pageExperts(page, '#experts td[data-expert]');
    sameExperts('σ mode: experts on the page vs organ measure --experts --sigma --json', wantS, gotS);
    check([...gotS.values()].some((x) => x[1] > 0), 'σ mode: experts carry σ_θ');
    const exS = await exportJson(page, 'export-experts-sigma.json');
    check(strip(exS) === strip(cliS), 'σ mode: the exported JSON is organ measure --experts --sigma --json\'s report field for field');
  }

  // 2. Models at URLs: nginx serves the same files with CORS headers (/cors/) and without (/plain/).
  {
    const served = { 'model.gguf': model, 'moe.gguf': moe, 'not-a-model.gguf': null };
    for (const f of shards) served[path.basename(f)] = f;
    nginx = await startNginx(served);
    const local = cliReport(model, [], 'url-local');
    const want = new Map(local.models[0].tensors.map((t) => [t.name, t.theta]));
    const t0 = Date.now();
    await measureUrl(page, nginx.url('cors/model.gguf'));
    const got = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.dataset.theta === '' ? null : Number(r.dataset.theta)]));
    const differ = got.filter(([n, t]) => want.get(n) !== t).length;
    const read = Number(await page.getAttribute('#report', 'data-bytes-read'));
    const log = nginx.log();
    check(got.length === want.size && differ === 0,
      `a URL served with CORS (${Date.now() - t0} ms, ${log.length} requests, ${read} of ${fs.statSync(model).size} bytes read): ` +
      `${got.length} tensors (CLI on the local file ${want.size}), ${differ} θ differ from organ measure --json's`);
    const gets = log.filter((r) => r.method !== 'OPTIONS');
    check(gets.length > 1 && gets.every((r) => r.status === 206 && r.method === 'GET'),
      `every request was a range request answered 206 (${gets.filter((r) => r.status !== 206).length} other answers, ` +
      `${log.length - gets.length} CORS preflights)`);
    await page.screenshot({ path: path.join(outDir, 'url.png') });

    await measureUrl(page, nginx.url('cors/moe.gguf'));
    sameExperts('the MoE at a URL with CORS: experts vs organ measure --experts --json on the local file',
      cliExperts(cliReport(moe, ['--experts'], 'experts')), await pageExperts(page, '#experts td[data-expert]'));

    if (shards.length > 1) {
      const cliSplit = cliReport(shards[0], [], 'url-split');
      const wantSplit = new Map(cliSplit.models[0].tensors.map((t) => [t.name, t.theta]));
      const last = nginx.url(`cors/${path.basename(shards[shards.length - 1])}`);
      nginx.log();
      await measureUrl(page, last);
      const gotSplit = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.dataset.theta === '' ? null : Number(r.dataset.theta)]));
      const differSplit = gotSplit.filter(([n, t]) => wantSplit.get(n) !== t).length;
      check(gotSplit.length === wantSplit.size && differSplit === 0,
        `a split model by the URL of its last shard (${shards.length} shards, ${nginx.log().length} requests): ${gotSplit.length} tensors ` +
        `(CLI on the local shards ${wantSplit.size}), ${differSplit} θ differ`);
    }
    // Inspect mode at a URL: the headers only, the memory rows organ inspect --memory's.
    {
      const json = JSON.parse(execFileSync(organ, ['inspect', model, '--memory', '--ctx', '2048', '--json'], { maxBuffer: 1 << 28 }).toString());
      nginx.log();
      await page.goto(`${origin}/`);
      await page.click('#mode-inspect');
      await page.fill('#url', nginx.url('cors/model.gguf'));
      await page.click('#url-open');
      await page.waitForSelector('#inspect[data-done], #error', { timeout: 60_000 });
      await page.fill('#mem-ctx', '2048');
      const rows = Object.fromEntries(await page.$$eval('#memory tr', (rs) => rs.map((r) => [r.dataset.part, Number(r.dataset.bytes)])));
      const m = json.memory;
      const read = nginx.log().filter((r) => r.method === 'GET').length;
      const why = (await page.textContent('#meta-not-editable')) ?? '';
      check(rows.total === m.total && rows.kv === m.kv.k + m.kv.v && rows.weights_host === m.weights.host_mapped &&
        rows.compute === m.compute && why.includes('A model at a URL') && !(await page.$('#meta-write')),
      `inspect mode on a URL (${read} range requests): memory at ctx 2048 as organ inspect --memory's (${(rows.total / 2 ** 20).toFixed(2)} MiB), the editor read-only`);
    }
    const plain = nginx.url('plain/model.gguf');
    const msg = await urlError(page, plain);
    check(msg.startsWith(plain) && /does not allow reading/.test(msg) && /Download the file and drop it here/.test(msg) &&
      /Access-Control-Allow-Origin/.test(msg), `a URL without CORS gets the sentence: "${msg}"`);
    await page.screenshot({ path: path.join(outDir, 'url-no-cors.png') });
    // The file changed on the host (nginx's ETag is its mtime and size) after the page read
    // its header: an error, not a θ of two files.
    const swap = path.join(nginx.dir, 'www', 'swap.gguf');
    fs.copyFileSync(model, swap);
    nginx.log();
    await page.goto(`${origin}/`);
    await waitThreads(page);
    await page.fill('#url', nginx.url('cors/swap.gguf'));
    await page.click('#url-open');
    for (let i = 0; i < 2000 && nginx.log(true).length === 0; i++) await new Promise((r) => setTimeout(r, 2));
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(swap, later, later);
    await page.waitForSelector('#report[data-done], #error', { timeout: 300_000 });
    const mSwap = (await page.textContent('#error')) ?? '(no error shown)';
    check(/cors\/swap\.gguf: the file changed while it was read/.test(mSwap), `a file changed on the host mid-read: "${mSwap}"`);
    const missing = nginx.url('cors/missing.gguf');
    const m404 = await urlError(page, missing);
    check(m404.startsWith(missing) && /HTTP 404/.test(m404), `a URL that is not there: "${m404}"`);
    const junk = nginx.url('cors/not-a-model.gguf');
    const mJunk = await urlError(page, junk);
    check(mJunk.startsWith(junk) && /not a GGUF/.test(mJunk), `a URL that is not a GGUF: "${mJunk}"`);
  }
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
  await page.screenshot({ path: path.join(outDir, 'failure-experts-url.png'), fullPage: true }).catch(() => {});
} finally {
  await context.close();
  server.close();
  if (nginx) nginx.kill();
}
console.log(`test result: ${failures === 0 ? 'ok' : 'FAILED'}. ${passes} passed; ${failures} failed (web e2e: experts and URLs)`);
process.exit(failures === 0 ? 0 : 1);
