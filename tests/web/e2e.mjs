// End-to-end test of the browser app in real headless Chromium (Debian's), driven by
// playwright-core. Usage (scripts/web-e2e.sh sets it up):
//   node tests/web/e2e.mjs DIST MODEL ORGAN_BIN OUT_DIR [BIG_MODEL] [--pair A B]... [--check M]...
// (A or B may be the shards of a split model, comma-separated.)
// Checks: θ of every tensor equals `organ measure --json` to 1e-6°; the worker pool has
// more than one thread; no request carries model bytes (nor goes anywhere but the app's own
// files); the exported JSON and static HTML carry the same θ, and the HTML opens offline;
// a previously exported JSON opens again; with σ (§7) every tensor's σ_θ and θ and the
// σ of θ_mean equal `organ measure --sigma --json`'s exactly, on the page, in the exported
// JSON and on the static page, the heatmap's σ cells are the spread of the cell means
// over the CLI's draws and its θ view marks those above the threshold, and exact mode's θ
// equal `--exact`'s; sorting and filtering the tensor table move its
// rows rather than rebuild them; a non-GGUF file gets a plain error; without
// COOP/COEP the app falls back to one thread and says so (and compares the first pair
// on it too); a > 4 GiB file is measured. Sensitivity: the data-free prediction made in
// the page equals `organ sensitivity --predict --json`'s weight for weight, a measured
// report of another model is refused naming the row, and one of this model stands in the
// table with ρ against θ and against the prediction equal to this test's own ranking.
// Compare mode, per --pair A B: every pair's cos, rel_l2, max_abs, dθ and identical and
// the counts equal `organ diff A B --json` exactly; the exported JSON is what organ diff
// writes (but the generator); for the first pair the heatmap tells identical cells
// apart, the scatter has a point per pair, "changed only" and sorting by cos work, the
// static HTML (offline) carries the same figures, and both exports open again.
// Check mode, per --check M: the exported JSON is `organ check M --json`'s report field for
// field (findings and every tensor's scan; but the generator), and the page lists the
// same findings and counts.
// The clicks (issue 35, point 16): a heatmap cell shows its tensors and a well selects its
// tensor, θ by layer (σ bands with σ) and dθ by layer are drawn, the view lives in the URL
// fragment and comes back on a reload with the same file and on the static page, "Compare
// with…" makes the model A, the drop zone is a bar after a run, and "most changed" carries
// organ diff's cos and rel_l2.
// Per pair, the metadata keys that differ and the line saying how a cut model's layers were
// lined up are organ diff's (issue 50), in the page and, for a cut model, on its static page.
// Screenshots go to OUT_DIR. With ORGAN_WEB_BENCH=N it only times N runs and prints JSON.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, model, organ, outDir] = process.argv.slice(2, 6);
// ORGAN_WEB_E2E=compare: compare mode only (2b, per pair, and 3), no measure, check or static θ page.
const compareOnly = process.env.ORGAN_WEB_E2E === 'compare';
let bigModel;
const pairs = [];
const checks = [];
for (let i = 6; i < process.argv.length; i++) {
  if (process.argv[i] === '--check') checks.push(process.argv[++i]);
  else if (process.argv[i] === '--pair') {
    pairs.push([process.argv[i + 1].split(','), process.argv[i + 2].split(',')]);
    i += 2;
  } else bigModel = process.argv[i];
}
fs.mkdirSync(outDir, { recursive: true });
let failures = 0, passes = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++; else failures++;
}

function cliThetas(file) {
  const json = path.join(outDir, `cli-${path.basename(file)}.json`);
  execFileSync(organ, ['measure', file, '--summary-only', '--force', '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
  const r = JSON.parse(fs.readFileSync(json, 'utf8'));
  return new Map(r.models[0].tensors.map((t) => [t.name, t.theta]));
}

function compare(label, cli, got) {
  let worst = 0, missing = 0;
  for (const [name, theta] of cli) {
    if (!got.has(name)) { missing++; continue; }
    const g = got.get(name);
    const d = theta === null ? (g === null ? 0 : Infinity) : Math.abs(Number(g) - theta);
    worst = Math.max(worst, isNaN(d) ? Infinity : d);
  }
  check(missing === 0 && got.size === cli.size && worst <= 1e-6,
    `${label}: ${got.size} tensors (CLI ${cli.size}), largest |Δθ| ${worst.toExponential(2)}° (limit 1e-6°)`);
}

// `organ measure --json` with `flags` (--sigma, --exact): the whole report.
function cliReport(file, flags, tag) {
  const json = path.join(outDir, `cli-${tag}-${path.basename(file)}.json`);
  execFileSync(organ, ['measure', file, '--summary-only', '--force', '--no-cache', ...flags, '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

// Each tensor's θ and σ_θ (as [θ, σ]) and the σ of θ_mean equal the CLI's bit for bit.
function sameSigma(label, cli, got, meanSigma) {
  const want = cli.models[0].tensors;
  let differ = 0, missing = 0, withSigma = 0;
  for (const t of want) {
    const g = got.get(t.name);
    if (!g) { missing++; continue; }
    if (t.sigma !== undefined && t.sigma !== null) withSigma++;
    if (g[0] !== t.theta || g[1] !== (t.sigma ?? null)) {
      if (++differ <= 3) console.log(`  ${t.name}: CLI θ ${t.theta} σ ${t.sigma}, got θ ${g[0]} σ ${g[1]}`);
    }
  }
  const wantMean = cli.models[0].summary.theta_mean_sigma;
  check(missing === 0 && got.size === want.length && differ === 0 && withSigma > 0 && meanSigma === wantMean,
    `${label}: ${got.size} tensors (CLI ${want.length}), ${withSigma} with σ_θ, ${differ} θ or σ_θ differ; ` +
    `σ of θ_mean ${meanSigma} (CLI ${wantMean})`);
}

const num = (v) => (v === '' || v === undefined || v === null ? null : Number(v));
// Spearman's ρ with ties at their mean rank: this test's own, to hold the page's to.
function ranks(x) {
  const ix = x.map((v, i) => [v, i]).sort((a, b) => a[0] - b[0]);
  const r = new Array(x.length);
  for (let i = 0; i < ix.length;) {
    let j = i;
    while (j + 1 < ix.length && ix[j + 1][0] === ix[i][0]) j++;
    for (let k = i; k <= j; k++) r[ix[k][1]] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return r;
}
function spearman(a, b) {
  const [ra, rb] = [ranks(a), ranks(b)];
  const mean = (v) => v.reduce((s, x) => s + x, 0) / v.length;
  const [ma, mb] = [mean(ra), mean(rb)];
  let [sab, saa, sbb] = [0, 0, 0];
  for (let i = 0; i < ra.length; i++) {
    sab += (ra[i] - ma) * (rb[i] - mb); saa += (ra[i] - ma) ** 2; sbb += (rb[i] - mb) ** 2;
  }
  return sab / Math.sqrt(saa * sbb);
}
async function domSigmas(p, sel) {
  const rows = await p.$$eval(sel, (rs) => rs.map((r) => [r.dataset.name, r.dataset.theta, r.dataset.sigma]));
  return new Map(rows.map(([n, t, s]) => [n, [num(t), num(s)]]));
}

async function measureMode(page, mode, file) {
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
  await page.selectOption('#measure-mode', mode);
  const t0 = Date.now();
  await measureIn(page, file);
  return Date.now() - t0;
}

async function domThetas(page) {
  const rows = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.dataset.theta]));
  return new Map(rows.map(([n, t]) => [n, t === '' ? null : Number(t)]));
}

// `organ diff A B --json`'s report (a split model named by its first shard).
function cliDiff(a, b) {
  const json = path.join(outDir, `cli-diff-${path.basename(a[0])}-${path.basename(b[0])}.json`);
  fs.rmSync(json, { force: true });
  execFileSync(organ, ['diff', a[0], b[0], '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

const FIGS = ['identical', 'cos', 'rel_l2', 'max_abs', 'd_theta'];
const COUNTS = ['comparable', 'identical', 'changed', 'only_in_a', 'only_in_b', 'shape_mismatch'];
const pairMap = (r) => new Map(r.pairs.map((p) => [p.name, p]));

// Pairs as the page or the static HTML shows them, from each row's data-* attributes.
function rowsToPairs(rows) {
  const num = (v) => (v === '' || v === undefined ? null : Number(v));
  return new Map(rows.map((d) => [d.name, { identical: d.identical === 'true', cos: num(d.cos), rel_l2: num(d.relL2),
    max_abs: num(d.maxAbs), d_theta: num(d.dTheta) }]));
}
const domPairs = async (p, sel) => rowsToPairs(await p.$$eval(sel, (rs) => rs.map((r) => ({ ...r.dataset }))));
async function domCounts(p) {
  const cards = await p.$$eval('[data-count]', (cs) => cs.map((c) => [c.dataset.count, Number(c.querySelector('b').textContent)]));
  return Object.fromEntries(cards);
}

// Every pair's figures exactly equal (the same core, the same bits), and the counts.
function diffFigures(label, cli, got, counts) {
  const want = pairMap(cli);
  let differ = 0, missing = 0, worst = 0;
  for (const [name, p] of want) {
    const g = got.get(name);
    if (!g) { missing++; continue; }
    for (const k of FIGS) {
      if (g[k] !== p[k]) {
        differ++;
        if (typeof p[k] === 'number' && typeof g[k] === 'number') worst = Math.max(worst, Math.abs(g[k] - p[k]) / Math.max(Math.abs(p[k]), 1e-300));
        else worst = Infinity;
        if (differ <= 3) console.log(`  ${name}.${k}: CLI ${p[k]}, got ${g[k]}`);
      }
    }
  }
  const countsOk = counts === undefined || COUNTS.every((k) => counts[k] === cli.counts[k]);
  check(missing === 0 && got.size === want.size && differ === 0 && countsOk,
    `${label}: ${got.size} pairs (CLI ${want.size}), ${differ} figures differ (largest relative ${worst.toExponential(2)}), ` +
    `counts ${counts === undefined ? 'not shown' : COUNTS.map((k) => counts[k]).join('/')} (CLI ${COUNTS.map((k) => cli.counts[k]).join('/')})`);
}

// The exported report is organ diff's, field for field, but for who generated it.
function sameReport(label, cli, got) {
  const strip = (r) => JSON.stringify({ ...r, generator: '' });
  const same = strip(cli) === strip(got);
  if (!same) {
    for (const k of Object.keys(cli)) if (JSON.stringify(cli[k]) !== JSON.stringify(got[k])) console.log(`  ${label}: "${k}" differs`);
  }
  check(same, `${label}: the exported JSON is organ diff --json's report field for field (generator "${got.generator}")`);
}

async function compareIn(page, a, b, timeout = 300_000, base = '/') {
  await page.goto(`${origin}${base}`);
  await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0, null, { timeout: 60_000 });
  await page.click('#mode-compare');
  await page.setInputFiles('#file-a', a);
  await page.setInputFiles('#file-b', b);
  await page.waitForSelector('#compare[data-done], #error', { timeout });
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
}

// `organ check M --json`'s report (it exits 1 when it finds an error).
function cliCheck(file) {
  const json = path.join(outDir, `cli-check-${path.basename(file)}.json`);
  fs.rmSync(json, { force: true });
  const r = spawnSync(organ, ['check', file, '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0 && r.status !== 1) throw new Error(`organ check ${file} exited with ${r.status}`);
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

async function checkIn(page, file, timeout = 300_000) {
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0, null, { timeout: 60_000 });
  await page.click('#mode-check');
  await page.setInputFiles('#file-input', file);
  await page.waitForSelector('#check[data-done], #error', { timeout });
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
}

async function measureIn(page, file, timeout = 300_000) {
  await page.setInputFiles('#file-input', file);
  await page.waitForSelector('#report[data-done], #error', { timeout });
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
}

const server = await serve(path.resolve(dist));
const origin = `http://127.0.0.1:${server.address().port}`;
const context = await launch({
  acceptDownloads: true,
  viewport: { width: 1400, height: 1000 },
});
const requests = [];
context.on('request', (r) => requests.push({ url: r.url(), method: r.method(), body: r.postDataBuffer()?.length ?? 0 }));
const page = context.pages()[0] ?? await context.newPage();
page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
page.on('console', (m) => { if (m.text().startsWith('organ:')) console.log(m.text()); });

try {
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0, null, { timeout: 60_000 });

  if (process.env.ORGAN_WEB_BENCH) {
    const times = [];
    for (let i = 0; i < Number(process.env.ORGAN_WEB_BENCH); i++) {
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
      const t0 = Date.now();
      await measureIn(page, model);
      times.push({ wall_ms: Date.now() - t0, in_page_ms: Number(await page.getAttribute('#report', 'data-elapsed-ms')) });
    }
    console.log(JSON.stringify({ threads: Number(await page.getAttribute('#report', 'data-threads')), runs: times }));
    process.exit(0);
  }

  let cli, jsonPath, htmlPath;
  if (!compareOnly) {
  // 1. SmolLM2, threaded.
  cli = cliThetas(model);
  await measureIn(page, model);
  const threads = Number(await page.getAttribute('#report', 'data-threads'));
  check(threads > 1, `the worker pool measured with ${threads} threads (> 1)`);
  compare('page vs organ measure --json', cli, await domThetas(page));
  await page.screenshot({ path: path.join(outDir, 'report.png'), fullPage: true });
  // The look (issue 35, points 15, 2, 17): a fixed θ scale with its legend, nothing
  // uppercased, the embedding's row, the noise caption, the metadata filter.
  {
    const legend = await page.textContent('#heatmap-legend');
    const gradient = await page.$eval('#heatmap-legend .legend', (e) => getComputedStyle(e).backgroundImage);
    check(/^0°\s.*\s90°$/.test(legend.trim()) && gradient.includes('rgb(68, 1, 84)') && gradient.includes('rgb(253, 231, 37)'),
      `the heatmap's legend is the fixed viridis scale from 0° to 90° ("${legend.trim()}")`);
    const upper = await page.evaluate(() => [...document.querySelectorAll('h1, h2, h3, h4, th, td, code')]
      .filter((e) => getComputedStyle(e).textTransform !== 'none').map((e) => e.textContent));
    const h3 = await page.$$eval('h3', (hs) => hs.map((h) => h.textContent));
    check(upper.length === 0 && h3.includes('θ by layer and group'),
      `no heading or name is uppercased (${upper.length} transformed; headings read "${h3.slice(0, 3).join('", "')}")`);
    const outside = await page.$$eval('#heatmap tbody tr.outside td', (tds) => tds.map((t) => [t.textContent, t.dataset.v]));
    const embd = cli.get('token_embd.weight');
    check(outside[0]?.[0] === 'no layer' && outside.some((c) => Number(c[1]) === embd),
      `the heatmap has a row for the tensors outside the layers, with token_embd's θ ${embd} (${outside.map((c) => c[0]).join(' | ')})`);
    const caption = await page.textContent('#noise-caption');
    check(caption.includes('may be sampling noise') && caption.includes('--sigma'), `without σ the caption says: "${caption}"`);
    // Text on every coloured cell contrasts 4.5:1 at least with its background (WCAG 2).
    const worst = await page.$$eval('#heatmap tbody td[data-v]', (tds) => {
      const lum = (c) => { const [r, g, b] = c.match(/\d+/g).slice(0, 3).map((x) => { const v = Number(x) / 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
      return Math.min(...tds.map((td) => { const s = getComputedStyle(td); const [a, b] = [lum(s.color), lum(s.backgroundColor)]; return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); }));
    });
    check(worst >= 4.5, `every heatmap cell's text contrasts at least 4.5:1 with its colour (lowest ${worst.toFixed(2)})`);
    await page.click('details.meta summary');
    const allKeys = await page.$$eval('#metadata tbody tr', (rs) => rs.length);
    await page.fill('#meta-filter', 'chat_template');
    const shownKeys = await page.$$eval('#metadata tbody tr:not([hidden])', (rs) => rs.map((r) => r.dataset.key));
    check(shownKeys.length >= 1 && shownKeys.length < allKeys && shownKeys.every((k) => k.includes('chat_template')),
      `the metadata filter "chat_template" leaves ${shownKeys.length} of ${allKeys} keys (${shownKeys.join(', ')})`);
    const summary = await page.textContent('#metadata tr[data-key="tokenizer.chat_template"] details.whole summary');
    await page.click('#metadata tr[data-key="tokenizer.chat_template"] details.whole summary');
    const whole = await page.textContent('#metadata tr[data-key="tokenizer.chat_template"] details.whole pre');
    const bytes = Number(summary.match(/\((\d+) bytes\)/)?.[1]);
    const shownWhole = await page.isVisible('#metadata tr[data-key="tokenizer.chat_template"] details.whole pre');
    const inspected = JSON.parse(execFileSync(organ, ['inspect', model, '--json'], { maxBuffer: 1 << 28 }).toString())
      .metadata.find((kv) => kv.key === 'tokenizer.chat_template')?.value;
    check(shownWhole && Buffer.byteLength(whole, 'utf8') === bytes && whole === inspected,
      `the chat template, cut to a line, expands whole on demand, as organ inspect --json gives it (${Buffer.byteLength(whole, 'utf8')} bytes, the line said ${bytes})`);
    await page.locator('details.meta').screenshot({ path: path.join(outDir, 'metadata.png') });
    await page.fill('#meta-filter', '');
    await page.click('details.meta summary');
  }
  await page.click('#tensors tbody tr:nth-child(3)');
  await page.waitForSelector('#histogram svg rect');
  const bars = await page.$$eval('#histogram svg rect', (r) => r.length);
  check(bars > 10, `a clicked tensor shows the histogram of its sampled values (${bars} bins)`);
  await page.locator('#histogram').screenshot({ path: path.join(outDir, 'histogram.png') });
  // The rows are a keyed list: a sort or a filter moves, removes or adds whole <tr>s and
  // changes nothing inside a row (an unkeyed list keeps its <tr>s by position and rewrites
  // their attributes and text to the new order instead).
  await page.evaluate(() => {
    const body = document.querySelector('#tensors tbody');
    window.organRows = new Set(body.querySelectorAll('tr'));
    window.organEdits = 0;
    new MutationObserver((ms) => { window.organEdits += ms.filter((m) => m.target !== body).length; })
      .observe(body, { subtree: true, childList: true, attributes: true, characterData: true });
  });
  const sameRows = () => page.evaluate(async () => {
    await new Promise((r) => setTimeout(r)); // mutation records are delivered
    const rs = [...document.querySelectorAll('#tensors tbody tr')];
    return [rs.filter((r) => window.organRows.has(r)).length, rs.length, window.organEdits];
  });
  await page.click('#tensors thead th:nth-child(6)');
  const firstTwo = await page.$$eval('#tensors tbody tr', (rs) => rs.slice(0, 2).map((r) => Number(r.dataset.theta)));
  check(firstTwo[0] <= firstTwo[1], `sorting by θ puts ${firstTwo[0].toFixed(3)}° before ${firstTwo[1].toFixed(3)}°`);
  const sorted = await sameRows();
  await page.fill('#filter', 'ffn_down');
  const filtered = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => r.dataset.name));
  check(filtered.length === 30 && filtered.every((n) => n.includes('ffn_down')), `filtering "ffn_down" leaves ${filtered.length} rows`);
  const kept = await sameRows();
  check(sorted[0] === sorted[1] && kept[0] === kept[1] && kept[1] > 0 && kept[2] === 0,
    `sorting and filtering move rows, not rewrite them: the same <tr>s for ${sorted[0]} of ${sorted[1]} rows after ` +
    `the sort and ${kept[0]} of ${kept[1]} after the filter, ${kept[2]} changes inside rows (${sorted[2]} after the sort)`);
  await page.fill('#filter', '');

  // 1a. The clicks people expect (issue 35, point 16): a heatmap cell shows its tensors, a
  // well selects its tensor, θ by layer is drawn, the view lives in the URL fragment and a
  // reload with the same file restores it, "Compare with…" makes this model A, and the
  // drop zone is a bar after the run.
  {
    const cliR = JSON.parse(fs.readFileSync(path.join(outDir, `cli-${path.basename(model)}.json`), 'utf8')).models[0];
    const drop = await page.$eval('#drop', (d) => [d.classList.contains('slim'), d.getBoundingClientRect().height]);
    check(drop[0] && drop[1] < 50, `after a run the drop zone is a bar (${drop[1].toFixed(0)} px high)`);
    const kinds = await page.$$eval('#theta-by-layer svg g.series', (g) => g.map((x) => x.dataset.kind));
    const points = await page.$$eval('#theta-by-layer svg circle', (c) => c.length);
    const layered = cliR.tensors.filter((t) => t.layer !== null && t.layer !== undefined && t.theta !== null);
    check(kinds.includes('attn_q.weight') && kinds.includes('ffn_down.weight') && points === layered.length,
      `θ by layer draws ${kinds.length} kinds, a point per layered tensor (${points} of ${layered.length})`);
    // A cell: the table shows its layer and group, the first of them selected, with its histogram.
    const cell = await page.$eval('#heatmap tbody tr:nth-child(4) td[data-group]', (td) => [td.dataset.layer, td.dataset.group]);
    await page.click(`#heatmap td[data-layer="${cell[0]}"][data-group="${cell[1]}"]`);
    await page.waitForSelector('#histogram svg rect');
    const want = cliR.tensors.filter((t) => String(t.layer) === cell[0] && t.group === cell[1]).map((t) => t.name);
    const shown = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.classList.contains('sel')]));
    const histTitle = await page.textContent('#histogram h3');
    const selected = shown.filter((r) => r[1]).map((r) => r[0]);
    check(shown.length === want.length && shown.every(([n]) => want.includes(n)) && selected.join() === want[0] &&
      histTitle.startsWith(want[0]) && await page.isVisible('#layer-filter') && await page.inputValue('#group-filter') === cell[1],
      `clicking the heatmap cell of layer ${cell[0]}, ${cell[1]} shows its ${shown.length} tensors (${want.length} in the CLI's report), the first selected, its histogram ("${histTitle}")`);
    await page.screenshot({ path: path.join(outDir, 'clicks-cell.png') });
    // A well: its tensor selected, every filter cleared.
    const well = await page.getAttribute('#wells li:first-child', 'data-name');
    await page.click('#wells li:first-child');
    await page.waitForFunction((n) => document.querySelector('#histogram h3')?.textContent.startsWith(n), well);
    const sel = await page.$$eval('#tensors tbody tr.sel', (rs) => rs.map((r) => r.dataset.name));
    const all = await page.$$eval('#tensors tbody tr', (rs) => rs.length);
    check(sel.length === 1 && sel[0] === well && all === cliR.tensors.length && !(await page.isVisible('#layer-filter')),
      `clicking the well ${well} selects it in the table (${sel.join(', ')}), all ${all} rows shown`);
    // The fragment follows the sort, the filter and the selection.
    await page.click('#tensors thead th:nth-child(1)');
    await page.click('#tensors thead th:nth-child(6)');
    await page.click('#tensors thead th:nth-child(6)');
    await page.fill('#filter', 'attn_q');
    const pick = await page.getAttribute('#tensors tbody tr:nth-child(2)', 'data-name');
    await page.click('#tensors tbody tr:nth-child(2)');
    const hash = decodeURIComponent(new URL(page.url()).hash);
    check(hash.includes('mode=measure') && hash.includes('sort=-theta') && hash.includes('q=attn_q') && hash.includes(`tensor=${pick}`),
      `the URL fragment follows the view: "${hash}"`);
    const order = () => page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => r.dataset.name));
    const before = await order();
    // A reload with that fragment and the same file: the same view.
    await page.reload();
    await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0, null, { timeout: 60_000 });
    await measureIn(page, model);
    await page.waitForSelector('#histogram svg rect');
    const after = await order();
    const restored = [await page.inputValue('#filter'), await page.$eval('#tensors tbody tr.sel', (r) => r.dataset.name),
      await page.textContent('#tensors thead th:nth-child(6)')];
    check(JSON.stringify(after) === JSON.stringify(before) && restored[0] === 'attn_q' && restored[1] === pick && restored[2].includes('▼'),
      `reloading with the fragment and the same file restores the view: filter "${restored[0]}", ${after.length} rows in the same order, ${restored[1]} selected, header "${restored[2]}"`);
    await page.screenshot({ path: path.join(outDir, 'clicks-restored.png') });
    // "Compare with…": compare mode, this model as A, B asked for.
    await page.click('#compare-with');
    await page.waitForSelector('#drop-a');
    const a = await page.textContent('#drop-a b');
    const b = await page.textContent('#drop-b b');
    const pressed = await page.getAttribute('#mode-compare', 'aria-pressed');
    check(pressed === 'true' && a.includes(path.basename(model)) && b.includes('drop'),
      `"Compare with…" opens compare mode with A filled ("${a}") and B to choose ("${b}")`);
    await page.screenshot({ path: path.join(outDir, 'clicks-compare-with.png') });
    await page.click('#mode-measure');
    await page.fill('#filter', '');
    await page.click('#tensors thead th:nth-child(1)');
  }

  // 1b. Sensitivity beside θ: the data-free prediction made in the page is organ
  // sensitivity --predict's, weight for weight; a measured report opened puts its figures
  // in the table, with ρ against θ and against the prediction as the core ranks them.
  {
    const pjson = path.join(outDir, 'predict-q4_0.json');
    execFileSync(organ, ['sensitivity', model, '--predict', '--to', 'q4_0', '--force', '--json', pjson], { stdio: ['ignore', 'ignore', 'inherit'] });
    const want = JSON.parse(fs.readFileSync(pjson, 'utf8'));
    await page.selectOption('#predict-type', 'Q4_0');
    const t0 = Date.now();
    await page.click('#predict');
    await page.waitForSelector('#predicted, #error', { timeout: 300_000 });
    const err = await page.$('#error');
    if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
    const ms = Date.now() - t0;
    const rowFigs = (key) => page.$$eval('#tensors tbody tr', (rs, k) => rs.filter((r) => r.dataset[k] !== '').map((r) => [r.dataset.name, Number(r.dataset[k])]), key);
    const predicted = new Map(await rowFigs('predicted'));
    const differ = want.tensors.filter((t) => predicted.get(t.name) !== t.predicted_kld).length;
    const n = Number(await page.getAttribute('#predicted', 'data-n'));
    check(predicted.size === want.tensors.length && n === want.tensors.length && differ === 0 && want.tensors.length > 200,
      `the data-free prediction in the page (${ms} ms) is organ sensitivity --predict --json's: ${predicted.size} weights, ${differ} differ`);
    const said = await page.textContent('#predicted');
    check(/ρ \+0\.42/.test(said), `the prediction says what it was measured to be worth: "${said.slice(0, 120)}…"`);

    // The F16 model's measured Q4_0 report is of another model: refused, naming the row.
    const truthPath = fileURLToPath(new URL('../data/sensitivity/smollm2-f16-q4_0.json', import.meta.url));
    await page.setInputFiles('#open-sensitivity', truthPath);
    await page.waitForSelector('#error', { timeout: 30_000 });
    const refused = await page.textContent('#error');
    check(/tensors\[0\]\.type \(token_embd\.weight\)/.test(refused), `a report of another model is refused, naming the row: "${refused}"`);

    // The same figures as a report of this model (its types; the check is by name, type and
    // shape): the table gets them, and ρ is the core's.
    const types = new Map(await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.children[4].textContent])));
    const truth = JSON.parse(fs.readFileSync(truthPath, 'utf8'));
    for (const t of truth.tensors) t.type = types.get(t.name);
    const mine = path.join(outDir, 'measured-q4_0.json');
    fs.writeFileSync(mine, JSON.stringify(truth));
    await page.setInputFiles('#open-sensitivity', mine);
    await page.waitForSelector('#measured', { timeout: 30_000 });
    const measured = new Map(await rowFigs('measured'));
    const mdiffer = truth.tensors.filter((t) => measured.get(t.name) !== t.kld.value).length;
    check(measured.size === truth.tensors.length && mdiffer === 0, `an opened report's ${measured.size} KLDs stand in the table (${mdiffer} differ)`);
    const thetas = await domThetas(page);
    const pairs = truth.tensors.filter((t) => Number.isFinite(thetas.get(t.name)));
    const rhoTheta = spearman(pairs.map((t) => thetas.get(t.name)), pairs.map((t) => t.kld.value));
    const gotTheta = Number(await page.getAttribute('#measured', 'data-rho-theta'));
    check(Math.abs(gotTheta - rhoTheta) < 1e-9, `ρ(θ, measured KLD) in the page ${gotTheta.toFixed(4)}, by this test's own ranking ${rhoTheta.toFixed(4)}`);
    const both = want.tensors.filter((t) => measured.has(t.name));
    const rho = spearman(both.map((t) => t.predicted_kld), both.map((t) => measured.get(t.name)));
    const gotRho = Number(await page.getAttribute('#predicted-vs-measured', 'data-rho'));
    check(Math.abs(gotRho - rho) < 1e-9, `ρ(predicted, measured) in the page ${gotRho.toFixed(4)}, by this test's own ranking ${rho.toFixed(4)} over ${both.length} weights`);
    await page.click('#tensors thead th:has-text("KLD measured")');
    await page.click('#tensors thead th:has-text("KLD measured")');
    const top = await page.$$eval('#tensors tbody tr', (rs) => Number(rs[0].dataset.measured));
    check(top === Math.max(...truth.tensors.map((t) => t.kld.value)), `sorting by measured KLD, descending, puts the largest first (${top})`);
    await page.locator('#sensitivity').screenshot({ path: path.join(outDir, 'sensitivity.png') });
  }

  // 2. Exports.
  const [dj] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  jsonPath = path.join(outDir, 'export.json');
  await dj.saveAs(jsonPath);
  const exported = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
  compare('exported JSON vs CLI', cli, new Map(exported.models[0].tensors.map((t) => [t.name, t.theta])));
  const [dh] = await Promise.all([page.waitForEvent('download'), page.click('#export-html')]);
  htmlPath = path.join(outDir, 'export.html');
  await dh.saveAs(htmlPath);

  // 2a. σ and exact (§7), against organ measure --sigma and --exact.
  {
    const cliS = cliReport(model, ['--sigma'], 'sigma');
    const ms = await measureMode(page, 'sigma', model);
    const meanSigma = num(await page.getAttribute('#theta-mean-sigma', 'data-v'));
    sameSigma(`σ in the page (${ms} ms) vs organ measure --sigma --json`, cliS, await domSigmas(page, '#tensors tbody tr'), meanSigma);
    await page.screenshot({ path: path.join(outDir, 'report-sigma.png'), fullPage: true });
    const bands = await page.$$eval('#theta-by-layer svg polygon.band', (b) => b.length);
    const kindsS = await page.$$eval('#theta-by-layer svg g.series', (g) => g.length);
    // Norm vectors are measured whole: no σ, no band.
    const sigmaKinds = new Set(cliS.models[0].tensors.filter((t) => t.layer !== null && t.layer !== undefined && t.sigma > 0)
      .map((t) => t.name.replace(/^blk\.\d+\./, '')));
    check(bands > 0 && bands === sigmaKinds.size,
      `with σ, θ by layer has a σ band per kind with σ (${bands}; ${sigmaKinds.size} kinds of ${kindsS} have σ in the CLI's report)`);
    await page.locator('#theta-by-layer').screenshot({ path: path.join(outDir, 'theta-by-layer-sigma.png') });
    // The heatmap's σ view: each cell's σ is the spread over the 8 draws of its mean θ,
    // worked out here from the CLI's draws; the θ view marks the cells above the threshold.
    const cellDraws = new Map();
    for (const t of cliS.models[0].tensors) {
      if (t.layer === null || t.layer === undefined || t.theta === null) continue;
      const key = `${t.layer}|${t.group}`;
      if (!cellDraws.has(key)) cellDraws.set(key, []);
      cellDraws.get(key).push(t.draws ?? Array(8).fill(t.theta));
    }
    const popStd = (x) => { const m = x.reduce((a, b) => a + b, 0) / x.length; return Math.sqrt(x.reduce((a, b) => a + (b - m) ** 2, 0) / x.length); };
    const wantCell = new Map([...cellDraws].map(([k, ds]) => [k, popStd([...Array(8).keys()].map((d) => ds.reduce((a, x) => a + x[d], 0) / ds.length))]));
    const heatCells = () => page.evaluate(() => {
      const groups = [...document.querySelectorAll('#heatmap thead th')].slice(1).map((th) => th.textContent);
      return [...document.querySelectorAll('#heatmap tbody tr:not(.outside)')].flatMap((r) => [...r.cells].slice(1)
        .map((td, i) => [`${r.cells[0].textContent}|${groups[i]}`, td.dataset.v, td.dataset.noisy !== undefined]))
        .filter((c) => c[1] !== undefined);
    });
    await page.selectOption('#heatmap-view', 'sigma');
    const sigmaCells = await heatCells();
    const rel = ([k, v]) => Math.abs(Number(v) - wantCell.get(k)) / Math.max(wantCell.get(k), 1);
    const worstCell = Math.max(...sigmaCells.map(rel));
    for (const c of sigmaCells.filter((c) => !(rel(c) <= 1e-9)).slice(0, 3)) console.log(`  cell ${c[0]}: page ${c[1]}, from the CLI's draws ${wantCell.get(c[0])}`);
    check(sigmaCells.length === wantCell.size && worstCell <= 1e-9,
      `the heatmap's σ view: ${sigmaCells.length} cells (${wantCell.size} from the CLI's draws), largest difference ${worstCell.toExponential(2)} (limit 1e-9, relative above 1°)`);
    await page.locator('#heatmap').screenshot({ path: path.join(outDir, 'heatmap-sigma.png') });
    await page.selectOption('#heatmap-view', 'theta');
    const marked = async (t) => {
      await page.fill('#sigma-mark', String(t));
      const cs = await heatCells();
      return [cs.filter((c) => c[2]).length, [...wantCell.values()].filter((s) => s > t).length];
    };
    const [m1, m05] = [await marked(1), await marked(0.5)];
    check(m1[0] === m1[1] && m05[0] === m05[1] && m05[0] >= m1[0] && m05[0] > 0,
      `the θ heatmap marks the cells whose σ exceeds the threshold: ${m1[0]} above 1° (${m1[1]} expected), ${m05[0]} above 0.5° (${m05[1]})`);
    await page.locator('#heatmap').screenshot({ path: path.join(outDir, 'heatmap-marked.png') });
    await page.fill('#sigma-mark', '1');
    // The default view says how many cells are within the noise of their neighbours and
    // hatches them (the CLI's static page is held to the draws in tests/it/ux_look.rs).
    const noise = await page.textContent('#noise-caption');
    const hatched = await page.$$eval('#heatmap tbody td[data-within-noise]', (tds) => tds.filter((t) => getComputedStyle(t).backgroundImage.includes('repeating-linear-gradient')).length);
    const [within, of] = (noise.match(/^(\d+) of (\d+) cells within the sampling noise of their neighbours/) ?? []).slice(1).map(Number);
    check(within > 0 && within === hatched && of >= within,
      `with σ the θ heatmap hatches ${hatched} cells and says "${noise}"`);
    const wells = await page.$$eval('#wells li', (ls) => ls.map((l) => l.textContent));
    check(wells.length > 0 && wells.every((w) => w.includes('±')), `the wells show σ_θ beside θ ("${wells[0]}")`);
    // By default the weight matrices; the checkbox adds norm vectors and routers (SmolLM2's
    // lowest θ are all norm vectors).
    await page.check('#all-wells');
    const allWells = await page.$$eval('#wells li', (ls) => ls.map((l) => l.textContent));
    await page.uncheck('#all-wells');
    check(wells.every((w) => !/norm/.test(w)) && allWells.some((w) => /norm/.test(w)) && allWells.length === wells.length,
      `the wells are weight matrices unless asked ("${wells[0]}"); with all tensors: "${allWells[0]}"`);
    const [dsj] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
    const sjson = path.join(outDir, 'export-sigma.json');
    await dsj.saveAs(sjson);
    const ex = JSON.parse(fs.readFileSync(sjson, 'utf8'));
    const strip = (r) => JSON.stringify({ ...r, generator: '' });
    check(strip(ex) === strip(cliS), `the exported σ JSON is organ measure --sigma --json's report field for field (draws included; generator "${ex.generator}")`);
    const [dsh] = await Promise.all([page.waitForEvent('download'), page.click('#export-html')]);
    const shtml = path.join(outDir, 'export-sigma.html');
    await dsh.saveAs(shtml);
    const st = await context.newPage();
    await st.goto('file://' + path.resolve(shtml));
    sameSigma('σ in the exported static page vs organ measure --sigma --json', cliS, await domSigmas(st, 'table.tensors tbody tr'),
      num(await st.getAttribute('.theta-mean', 'data-sigma')));
    await st.close();

    const cliE = cliReport(model, ['--exact'], 'exact');
    const msE = await measureMode(page, 'exact', model);
    const label = await page.getAttribute('#report', 'data-measure');
    const exact = await domSigmas(page, '#tensors tbody tr');
    sameSigma(`exact mode in the page (${msE} ms, measure "${label}") vs organ measure --exact --json`, cliE, exact,
      num(await page.getAttribute('#theta-mean-sigma', 'data-v')));
    check(label === 'z1-exact' && label === cliE.measure, `exact mode is labelled "${label}" (CLI "${cliE.measure}")`);
  }

  }

  // 2b. Compare mode, pair by pair.
  for (const [k, [a, b]] of pairs.entries()) {
    const cliR = cliDiff(a, b);
    const name = (f) => path.basename(f[0]) + (f.length > 1 ? ` (+${f.length - 1} shard${f.length > 2 ? 's' : ''})` : '');
    const tag = `${name(a)} vs ${name(b)}`;
    const t0 = Date.now();
    await compareIn(page, a, b);
    const ms = Date.now() - t0;
    const threadsC = Number(await page.getAttribute('#compare', 'data-threads'));
    diffFigures(`compare ${tag} (${threadsC} threads, ${ms} ms) vs organ diff --json`, cliR, await domPairs(page, '#pairs tbody tr'), await domCounts(page));
    const lists = await page.evaluate(() => ['#only-in-a', '#only-in-b', '#shape-mismatch']
      .map((s) => [...document.querySelectorAll(`${s} li code`)].map((c) => c.textContent)));
    const wantLists = [cliR.only_in_a, cliR.only_in_b, cliR.shape_mismatch.map((m) => m.name)];
    check(JSON.stringify(lists) === JSON.stringify(wantLists),
      `${tag}: the unmatched names are listed (only in A ${lists[0].length}, only in B ${lists[1].length}, shape mismatch ${lists[2].length})`);
    // The metadata keys that differ, and how the layers were lined up (issue 50): organ diff's.
    const m = cliR.metadata;
    const wantKeys = [...m.only_in_a.map((x) => `removed ${x.key}`), ...m.only_in_b.map((x) => `added ${x.key}`),
      ...m.changed.map((x) => `changed ${x.key}`)];
    const differ = m.counts.changed + m.counts.only_in_a + m.counts.only_in_b;
    const shownMeta = async (p) => p.evaluate(() => [document.querySelector('#metadata-line')?.dataset.differ,
      [...document.querySelectorAll('#metadata-diff tbody tr')].map((r) => `${r.dataset.change} ${r.dataset.key}`),
      document.querySelector('#metadata-line')?.textContent ?? '', document.querySelector('#layers-line')?.textContent ?? null]);
    const sameMeta = (got) => Number(got[0]) === differ && JSON.stringify(got[1]) === JSON.stringify(wantKeys) &&
      got[2].startsWith('metadata: ') && (got[3] !== null) === Boolean(cliR.layers) && (!cliR.layers || got[3].includes('organ.layers.dropped'));
    const meta = await shownMeta(page);
    check(sameMeta(meta), `${tag}: "${meta[2]}", the ${meta[1].length} keys that differ listed as organ diff's (${wantKeys.slice(0, 3).join(', ')}${wantKeys.length > 3 ? ', …' : ''}); layers: "${meta[3] ?? 'not lined up'}"`);
    const moved = cliR.pairs.find((p) => p.name_b);
    if (moved) {
      const cell = await page.textContent(`#pairs tbody tr[data-name="${moved.name}"]`);
      check(cell.includes(moved.name_b), `${tag}: ${moved.name}'s row names B's ${moved.name_b}`);
    }
    await page.screenshot({ path: path.join(outDir, `compare-${k}.png`), fullPage: true });
    const [dj] = await Promise.all([page.waitForEvent('download'), page.click('#export-compare-json')]);
    const cjson = path.join(outDir, `compare-${k}.organ-diff.json`);
    await dj.saveAs(cjson);
    sameReport(tag, cliR, JSON.parse(fs.readFileSync(cjson, 'utf8')));
    if (cliR.layers) {
      // The static page lists the same keys and says how the layers were lined up.
      const [dm] = await Promise.all([page.waitForEvent('download'), page.click('#export-compare-html')]);
      const mhtml = path.join(outDir, `compare-${k}.organ-diff.html`);
      await dm.saveAs(mhtml);
      const st = await context.newPage();
      await st.goto('file://' + path.resolve(mhtml));
      const got = await shownMeta(st);
      check(sameMeta(got), `${tag}: the static page says "${got[2]}" and "${got[3]}", and lists the ${got[1].length} keys`);
      await st.close();
    }
    // An expert tensor's row shows its experts, each with the CLI's cos.
    const moe = cliR.pairs.find((p) => p.experts);
    if (moe) {
      await page.click(`#pairs tbody tr[data-name="${moe.name}"]`);
      const ex = await page.$$eval('#expert-table tbody tr', (rs) => rs.map((r) => r.dataset.cos === '' ? null : Number(r.dataset.cos)));
      check(ex.length === moe.experts.length && ex.every((c, e) => c === moe.experts[e].cos),
        `${tag}: clicking ${moe.name} lists its ${ex.length} experts with organ diff's cos (CLI ${moe.experts.length})`);
    }
    if (k > 0 || compareOnly) continue;

    // The first pair: the views, the static page, and both exports opened again.
    const heat = await page.$$eval('#diff-heatmap tbody td[style]', (tds) => tds.map((t) => [t.classList.contains('same'), getComputedStyle(t).backgroundColor]));
    const sameBg = new Set(heat.filter((h) => h[0]).map((h) => h[1]));
    const changedBg = new Set(heat.filter((h) => !h[0]).map((h) => h[1]));
    check(sameBg.size === 1 && changedBg.size >= 1 && ![...changedBg].some((c) => sameBg.has(c)),
      `${tag}: the 1 − cos heatmap shows ${heat.filter((h) => h[0]).length} all-identical cells in their own colour and ` +
      `${heat.filter((h) => !h[0]).length} changed cells in ${changedBg.size} colours of the log scale`);
    const note = await page.textContent('#same-positions');
    check(/same sampled positions/.test(note) && /dθ/.test(note), `${tag}: the compare view says the shared positions cancel dθ's noise: "${note}"`);
    const dots = await page.$$eval('#scatter svg circle', (c) => c.length);
    const withTheta = cliR.pairs.filter((p) => p.theta_a !== null && p.theta_b !== null).length;
    check(dots === withTheta, `${tag}: the θ(A)/θ(B) scatter has a point per measured pair (${dots} of ${withTheta})`);
    const most = await page.$$eval('#most-changed li', (ls) => ls.map((l) => [l.dataset.name, l.dataset.cos, l.dataset.relL2, l.textContent]));
    const byName = pairMap(cliR);
    const mostOk = most.length === cliR.most_changed.length && most.every(([n, c, r, text], i) => n === cliR.most_changed[i] &&
      num(c) === byName.get(n).cos && num(r) === byName.get(n).rel_l2 && text.includes('cos') && text.includes('rel_l2'));
    check(mostOk, `${tag}: "most changed" lists ${most.length} pairs with organ diff's cos and rel_l2 ("${most[0]?.[3]}")`);
    const dpts = await page.$$eval('#d-theta-by-layer svg circle', (c) => c.length);
    const withD = cliR.pairs.filter((p) => p.layer !== null && p.layer !== undefined && p.d_theta !== null).length;
    check(dpts === withD && dpts > 0, `${tag}: dθ by layer has a point per layered pair with a dθ (${dpts} of ${withD})`);
    await page.locator('#d-theta-by-layer').screenshot({ path: path.join(outDir, 'd-theta-by-layer.png') });
    await page.check('#changed-only');
    const changed = await page.$$eval('#pairs tbody tr', (rs) => rs.map((r) => r.dataset.identical));
    check(changed.length === cliR.counts.changed && changed.every((x) => x === 'false'), `${tag}: "changed only" leaves the ${changed.length} changed pairs`);
    await page.click('#pairs thead th:nth-child(7)');
    const first = await page.$eval('#pairs tbody tr', (r) => r.dataset.name);
    check(first === cliR.most_changed[0], `${tag}: sorting by cos puts the most changed pair first (${first})`);
    await page.uncheck('#changed-only');
    const [dh] = await Promise.all([page.waitForEvent('download'), page.click('#export-compare-html')]);
    const chtml = path.join(outDir, `compare-${k}.organ-diff.html`);
    await dh.saveAs(chtml);

    await context.setOffline(true);
    const offline = await context.newPage();
    const loads = [];
    offline.on('request', (r) => loads.push(r.url()));
    await offline.goto('file://' + path.resolve(chtml));
    diffFigures(`${tag}: static HTML (offline) vs organ diff --json`, cliR, await domPairs(offline, 'table.pairs tbody tr'), await domCounts(offline));
    const staticParts = await offline.evaluate(() => [document.querySelectorAll('#diff-heatmap tbody tr').length,
      document.querySelectorAll('svg.scatter circle').length]);
    check(staticParts[0] > 0 && staticParts[1] === withTheta && loads.every((u) => u.startsWith('file://')),
      `${tag}: the static page shows the heatmap (${staticParts[0]} layers) and the scatter (${staticParts[1]} points), fetching nothing (${loads.length} loads, all file://)`);
    await offline.screenshot({ path: path.join(outDir, 'compare-static-page.png'), fullPage: false });
    await offline.close();
    await context.setOffline(false);

    for (const file of [cjson, chtml]) {
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
      await page.setInputFiles('#file-input', file);
      await page.waitForSelector('#compare[data-done], #error');
      diffFigures(`re-opened ${path.extname(file)} compare export vs organ diff --json`, cliR, await domPairs(page, '#pairs tbody tr'), await domCounts(page));
    }
  }

  // 2c. Check mode, file by file.
  for (const [k, file] of checks.entries()) {
    const cliC = cliCheck(file);
    const t0 = Date.now();
    await checkIn(page, file);
    const ms = Date.now() - t0;
    const tc = Number(await page.getAttribute('#check', 'data-threads'));
    const shown = await page.$$eval('#findings tbody tr', (rs) => rs.map((r) => [r.dataset.severity, r.dataset.kind, r.dataset.subject]));
    const want = cliC.findings.map((f) => [f.severity, f.kind, f.subject]);
    const counts = await domCounts(page);
    const c = cliC.counts;
    check(JSON.stringify(shown) === JSON.stringify(want) && counts.error === c.error && counts.warning === c.warning && counts.info === c.info,
      `check ${path.basename(file)} (${tc} threads, ${ms} ms): the page lists ${shown.length} findings (CLI ${want.length}: ` +
      `${want.map((f) => `${f[0]} ${f[1]} ${f[2]}`).join('; ') || 'none'}), counts ${counts.error}/${counts.warning}/${counts.info} (CLI ${c.error}/${c.warning}/${c.info})`);
    await page.screenshot({ path: path.join(outDir, `check-${k}.png`), fullPage: true });
    const [dc] = await Promise.all([page.waitForEvent('download'), page.click('#export-check-json')]);
    const cjson = path.join(outDir, `check-${k}.organ-check.json`);
    await dc.saveAs(cjson);
    const got = JSON.parse(fs.readFileSync(cjson, 'utf8'));
    const strip = (r) => JSON.stringify({ ...r, generator: '' });
    if (strip(got) !== strip(cliC)) {
      for (const key of Object.keys(cliC)) if (JSON.stringify(cliC[key]) !== JSON.stringify(got[key])) console.log(`  "${key}" differs`);
    }
    check(strip(got) === strip(cliC),
      `check ${path.basename(file)}: the exported JSON is organ check --json's report field for field (${got.findings.length} findings, ` +
      `${got.scans.length} tensor scans, ${got.bytes_scanned} bytes scanned; generator "${got.generator}")`);
  }

  // 3. Privacy: every request went to the app's own files; none had a body or named a model.
  const modelNames = [model, ...pairs.flat(2), ...checks].map((f) => path.basename(f));
  // (file:// loads are the exported static pages this test opens itself, from OUT_DIR.)
  const ownExport = (u) => u.startsWith('file://') && decodeURIComponent(new URL(u).pathname).startsWith(path.resolve(outDir) + '/');
  const foreign = requests.filter((r) => !(r.url.startsWith(origin + '/') || r.url.startsWith('blob:') || r.url.startsWith('data:') || ownExport(r.url)));
  const bodies = requests.filter((r) => r.body > 0 || r.method !== 'GET');
  const named = requests.filter((r) => modelNames.some((n) => r.url.includes(n)) && !r.url.startsWith('blob:'));
  const distFiles = new Set(fs.readdirSync(dist, { recursive: true }).map((f) => '/' + f.split(path.sep).join('/')));
  const unknown = requests.filter((r) => r.url.startsWith(origin + '/'))
    .map((r) => new URL(r.url).pathname).filter((p) => p !== '/' && !distFiles.has(p));
  check(foreign.length === 0 && bodies.length === 0 && named.length === 0 && unknown.length === 0,
    `no request carried model bytes (measure and ${pairs.length} comparisons): ${requests.length} requests, all GETs of the app's own files ` +
    `(foreign ${foreign.length}, with a body ${bodies.length}, naming the model ${named.length}, not in dist ${unknown.length})`);

  if (!compareOnly) {
  // 4. The static HTML, offline, in a fresh page.
  await context.setOffline(true);
  const offline = await context.newPage();
  const offlineRequests = [];
  offline.on('request', (r) => offlineRequests.push(r.url()));
  await offline.goto('file://' + path.resolve(htmlPath));
  const htmlRows = await offline.$$eval('table.tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.dataset.theta]));
  compare('static HTML (offline) vs CLI', cli, new Map(htmlRows.map(([n, t]) => [n, t === '' ? null : Number(t)])));
  const heat = await offline.$$eval('table.heat tbody tr:not(.outside)', (r) => r.length);
  const staticLook = await offline.evaluate(() => [document.querySelectorAll('table.heat tbody tr.outside').length,
    getComputedStyle(document.querySelector('h3')).textTransform, document.querySelector('.legend-line')?.textContent ?? '']);
  check(staticLook[0] === 1 && staticLook[1] === 'none' && staticLook[2].startsWith('0°') && staticLook[2].includes('90°'),
    `the static page has the embedding's row, headings as written (${staticLook[1]}) and the fixed legend ("${staticLook[2].slice(0, 40)}…")`);
  const groups = await offline.$$eval('table.groups tbody tr', (r) => r.length);
  check(heat === 30 && groups >= 3, `the static page shows the heatmap (${heat} layers) and the group summary (${groups} groups)`);
  check(offlineRequests.every((u) => u.startsWith('file://')), `the static page made no network request (${offlineRequests.length} loads, all file://)`);
  await offline.screenshot({ path: path.join(outDir, 'static-page.png'), fullPage: false });
  {
    // The app's fragment reopens the same view on the static page; θ by layer is there.
    const pick = 'blk.3.attn_q.weight';
    await offline.goto('about:blank');
    await offline.goto('file://' + path.resolve(htmlPath) + `#mode=measure&sort=-theta&q=attn_q&tensor=${pick}`);
    const view = await offline.evaluate(() => {
      const rows = [...document.querySelectorAll('table.tensors tbody tr')].filter((r) => !r.hidden);
      return [document.querySelector('input.filter').value, rows.map((r) => Number(r.dataset.theta)), rows.every((r) => r.dataset.name.includes('attn_q')),
        rows.filter((r) => r.style.outline !== '').map((r) => r.dataset.name), document.querySelectorAll('svg.theta-by-layer g.series').length];
    });
    const desc = view[1].every((t, i) => i === 0 || view[1][i - 1] >= t);
    check(view[0] === 'attn_q' && view[1].length === 30 && view[2] && desc && view[3].join() === pick && view[4] > 0,
      `the static page reopens the app's fragment: filter "${view[0]}", ${view[1].length} rows by θ descending (${desc}), ${view[3].join()} selected; θ by layer with ${view[4]} kinds`);
    await offline.click('table.tensors thead th[data-key="name"]');
    const h = decodeURIComponent(new URL(offline.url()).hash);
    check(h.includes('sort=name') && h.includes('q=attn_q') && h.includes(`tensor=${pick}`), `the static page keeps its view in the fragment too: "${h}"`);
    await offline.screenshot({ path: path.join(outDir, 'static-page-fragment.png'), fullPage: false });
  }
  await offline.close();
  await context.setOffline(false);

  // 5. Re-open the exported JSON.
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
  await measureIn(page, jsonPath);
  compare('re-opened JSON export vs CLI', cli, await domThetas(page));

  // 6. A file that is not a GGUF.
  const junk = path.join(outDir, 'not-a-model.gguf');
  fs.writeFileSync(junk, 'this is not a model, just text\n'.repeat(10));
  await page.setInputFiles('#file-input', junk);
  await page.waitForSelector('#error');
  const msg = await page.textContent('#error');
  check(/not-a-model\.gguf.*not a GGUF file/.test(msg), `a non-GGUF file gets a plain sentence: "${msg}"`);
  await page.screenshot({ path: path.join(outDir, 'error.png') });

  // 7. Without cross-origin isolation: one thread, said in the UI, same numbers.
  await page.goto(`${origin}/plain/`);
  await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
  const badge = await page.textContent('#threads');
  await measureIn(page, model);
  const t1 = Number(await page.getAttribute('#report', 'data-threads'));
  check(t1 === 1 && /not cross-origin isolated/.test(badge), `without COOP/COEP: ${t1} thread, the UI says "${badge}"`);
  compare('single-thread fallback vs CLI', cli, await domThetas(page));
  if (pairs.length > 0) {
    const [a, b] = pairs[0];
    await compareIn(page, a, b, 300_000, '/plain/');
    const tc = Number(await page.getAttribute('#compare', 'data-threads'));
    diffFigures(`single-thread compare (${tc} thread) of ${path.basename(a[0])} and ${path.basename(b[0])} vs organ diff --json`,
      cliDiff(a, b), await domPairs(page, '#pairs tbody tr'), await domCounts(page));
  }

  // 8. A file over 4 GiB (sparse), whose second tensor lies past the 4 GiB mark.
  if (bigModel) {
    const cliBig = cliThetas(bigModel);
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
    await measureIn(page, bigModel);
    const read = Number(await page.getAttribute('#report', 'data-bytes-read'));
    compare(`${(fs.statSync(bigModel).size / 2 ** 30).toFixed(2)} GiB file vs CLI (read ${(read / 2 ** 20).toFixed(1)} MiB)`, cliBig, await domThetas(page));
  }
  }
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
  await page.screenshot({ path: path.join(outDir, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await context.close();
  server.close();
}
// The same closing line as a cargo test binary, so scripts/test.sh counts these checks too.
console.log(`test result: ${failures === 0 ? 'ok' : 'FAILED'}. ${passes} passed; ${failures} failed (web e2e)`);
process.exit(failures === 0 ? 0 : 1);
