// End-to-end test of a LoRA adapter in the browser app (issue 31, point 5) in headless
// Chromium, as tests/web/e2e.mjs drives it. Usage (scripts/web-e2e.sh sets it up):
//   node tests/web/e2e-adapter.mjs DIST ORGAN_BIN OUT_DIR ADAPTER BASE BROKEN
// ADAPTER is a tests/oracle/make-lora.py adapter for BASE, BROKEN one with half a pair.
// Dropped alone, then with its base beside it: every row's θ, ‖ΔW‖_F and (with the base)
// the base weight's ‖W‖_F equal `organ measure ADAPTER [--base BASE] --json`'s exactly,
// the page says the adapter's facts as the CLI's text report does and shows the rank and
// ‖ΔW‖ columns (‖ΔW‖/‖W‖ only with the base), and the exported static page carries the
// facts and every ‖ΔW‖_F. The broken adapter is refused with the CLI's sentence; check
// mode lists the adapter's findings as `organ check ADAPTER --json` does.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, organ, outDir, adapter, base, broken] = process.argv.slice(2, 8);
fs.mkdirSync(outDir, { recursive: true });
let failures = 0, passes = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++; else failures++;
}

// `organ measure ADAPTER --json` (with `flags`): the report, and its text report's first line.
function cliReport(flags, tag) {
  const json = path.join(outDir, `cli-adapter-${tag}.json`);
  execFileSync(organ, ['measure', adapter, ...flags, '--force', '--no-cache', '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
  const text = execFileSync(organ, ['measure', adapter, ...flags, '--summary-only', '--no-cache']).toString();
  return [JSON.parse(fs.readFileSync(json, 'utf8')), text.split('\n')[0]];
}

const waitThreads = (p) => p.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0, null, { timeout: 60_000 });

async function dropIn(page, files, done = '#report[data-done]') {
  await page.goto(`${origin}/`);
  await waitThreads(page);
  await page.setInputFiles('#file-input', files);
  await page.waitForSelector(`${done}, #error`, { timeout: 60_000 });
}

// Each row as the page shows it: name → [θ, ‖ΔW‖_F, ‖W‖_F], and the header cells.
async function pageRows(page) {
  const rows = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => [r.dataset.name, r.dataset.theta, r.dataset.frobenius, r.dataset.baseFrobenius]));
  const num = (v) => (v === '' || v === undefined ? null : Number(v));
  const heads = await page.$$eval('#tensors thead th', (hs) => hs.map((h) => h.textContent.trim()));
  return [new Map(rows.map(([n, t, f, b]) => [n, [num(t), num(f), num(b)]])), heads];
}

function sameRows(label, cli, got) {
  let differ = 0;
  const want = cli.models[0].tensors;
  for (const t of want) {
    const w = [t.theta, t.update.frobenius, t.update.base_frobenius ?? null];
    const g = got.get(t.name);
    if (JSON.stringify(g) !== JSON.stringify(w)) {
      if (++differ <= 3) console.log(`  ${t.name}: CLI ${JSON.stringify(w)}, page ${JSON.stringify(g)}`);
    }
  }
  check(differ === 0 && got.size === want.length,
    `${label}: ${got.size} rows (CLI ${want.length}), θ, ‖ΔW‖_F and ‖W‖_F equal organ measure --json's exactly (${differ} differ)`);
}

const server = await serve(path.resolve(dist));
const origin = `http://127.0.0.1:${server.address().port}`;
const context = await launch({ acceptDownloads: true, viewport: { width: 1400, height: 1000 } });
const page = context.pages()[0] ?? await context.newPage();
page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
page.on('console', (m) => { if (m.type() === 'error') console.log(`console: ${m.text()}`); });

try {
  // 1. The adapter alone.
  const [cli, cliLine] = cliReport([], 'alone');
  const t0 = Date.now();
  await dropIn(page, adapter);
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
  const [rows, heads] = await pageRows(page);
  sameRows(`the adapter alone (${Date.now() - t0} ms)`, cli, rows);
  const facts = (await page.textContent('#adapter-facts')).trim();
  check(cliLine.includes(facts.split(';')[0]) && facts.startsWith('LoRA adapter: ') && !facts.includes('against'),
    `the page says the adapter's facts as the CLI's text report does: "${facts}"`);
  check(heads.includes('rank') && heads.includes('‖ΔW‖_F') && !heads.includes('‖ΔW‖/‖W‖'),
    `the table has the rank and ‖ΔW‖_F columns, no ‖ΔW‖/‖W‖ without a base (${heads.slice(-3).join(', ')})`);
  const cells = await page.$$eval('#heatmap tbody td[data-v]', (tds) => tds.length);
  check(cells > 0, `the heatmap shows the updates by layer (${cells} cells)`);
  await page.screenshot({ path: path.join(outDir, 'adapter.png'), fullPage: true });

  // 2. With its base dropped beside it.
  const [cliB, cliBLine] = cliReport(['--base', base], 'base');
  const t1 = Date.now();
  await dropIn(page, [adapter, base]);
  const errB = await page.$('#error');
  if (errB) throw new Error(`the app reported an error: ${await errB.textContent()}`);
  const [rowsB, headsB] = await pageRows(page);
  sameRows(`the adapter with its base (${Date.now() - t1} ms)`, cliB, rowsB);
  const factsB = (await page.textContent('#adapter-facts')).trim();
  check(cliBLine.includes(factsB.split(';')[0]) && factsB.includes(`against the base ${path.basename(base)}`),
    `with the base, the facts name it: "${factsB}"`);
  const rel = await page.$$eval('#tensors tbody tr', (rs) => rs.map((r) => r.lastElementChild.textContent));
  const wantRel = cliB.models[0].tensors.map((t) => (t.update.frobenius / t.update.base_frobenius).toFixed(5));
  check(headsB.at(-1) === '‖ΔW‖/‖W‖' && JSON.stringify(rel) === JSON.stringify(wantRel),
    `‖ΔW‖/‖W‖ per row is the CLI's ‖ΔW‖_F / ‖W‖_F (${rel.slice(0, 3).join(', ')}, …)`);
  await page.screenshot({ path: path.join(outDir, 'adapter-base.png'), fullPage: true });

  // 3. The exported static page.
  const [dh] = await Promise.all([page.waitForEvent('download'), page.click('#export-html')]);
  const html = path.join(outDir, 'adapter-export.html');
  await dh.saveAs(html);
  const text = fs.readFileSync(html, 'utf8');
  const want = cliB.models[0].tensors.map((t) => `data-v="${t.update.frobenius}">${t.update.frobenius.toFixed(4)}</td>`);
  check(text.includes(`<p class="adapter-facts">${factsB.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}</p>`) &&
    want.every((w) => text.includes(w)) && text.includes('<th data-num>‖ΔW‖/‖W‖</th>'),
  `the exported static page says the facts and carries every ‖ΔW‖_F (${want.length}) and ‖ΔW‖/‖W‖`);

  // 4. A broken adapter: the CLI's sentence.
  const cliErr = spawnSync(organ, ['measure', broken]).stderr.toString();
  await dropIn(page, broken);
  const msg = (await page.textContent('#error')) ?? '';
  check(msg.includes('half a pair') && cliErr.includes(msg.slice(msg.indexOf(path.basename(broken)))),
    `a broken adapter gets the CLI's sentence: "${msg}"`);

  // 5. Check mode: the adapter's findings, as organ check --json lists them.
  const cjson = path.join(outDir, 'cli-check-adapter.json');
  fs.rmSync(cjson, { force: true });
  spawnSync(organ, ['check', adapter, '--json', cjson], { stdio: ['ignore', 'ignore', 'inherit'] });
  const cliC = JSON.parse(fs.readFileSync(cjson, 'utf8'));
  await page.goto(`${origin}/`);
  await waitThreads(page);
  await page.click('#mode-check');
  await page.setInputFiles('#file-input', adapter);
  await page.waitForSelector('#check[data-done], #error', { timeout: 60_000 });
  const shown = await page.$$eval('#findings tbody tr', (rs) => rs.map((r) => [r.dataset.severity, r.dataset.kind, r.dataset.subject]));
  const wantF = cliC.findings.map((f) => [f.severity, f.kind, f.subject]);
  const verdict = await page.getAttribute('#verdict', 'data-verdict');
  check(JSON.stringify(shown) === JSON.stringify(wantF) && verdict !== null,
    `check mode on the adapter lists organ check's ${wantF.length} findings (verdict ${verdict}: ${wantF.map((f) => f.join(' ')).join('; ') || 'none'})`);
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
  await page.screenshot({ path: path.join(outDir, 'adapter-failure.png'), fullPage: true }).catch(() => {});
} finally {
  await context.close();
  server.close();
}
console.log(`test result: ${failures === 0 ? 'ok' : 'FAILED'}. ${passes} passed; ${failures} failed (web e2e, adapter)`);
process.exit(failures === 0 ? 0 : 1);
