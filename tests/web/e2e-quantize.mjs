// End-to-end test of quantize mode (issue 48: `organ quantize` in the page) in headless
// Chromium. Usage (scripts/web-e2e.sh sets it up):
//   node tests/web/e2e-quantize.mjs DIST ORGAN_BIN OUT_DIR F16_MODEL
// 1. The plan the page previews for a type is `organ quantize --dry-run`'s sizes; a type
//    that needs an importance matrix is refused with the CLI's sentence, nothing to click.
// 2. F16 → Q4_K_M through the File System Access API: the page's `showSaveFilePicker` is
//    given a file of the origin's private file system (OPFS, the browser's own storage;
//    headless Chromium has no dialog to click), which the page writes as it quantizes.
//    Its bytes equal `organ quantize`'s (SHA-256 in the page); the time and the page's
//    memory (JS heap, wasm memory) are printed.
// 3. Where the browser has no `showSaveFilePicker` (removed before the page loads), the
//    file is an ordered Blob of parts offered as a download: Q8_0 here, equal to the CLI's.
// 4. The report's JSON export is `organ quantize --json`'s, but the input's and outputs'
//    names (the page knows file names, the CLI paths).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, organ, outDir, model] = process.argv.slice(2, 6);
fs.mkdirSync(outDir, { recursive: true });
let failures = 0, passes = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++; else failures++;
}
const sha = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;

// The CLI's file and report for TYPE.
function cli(type) {
  const out = path.join(outDir, `quantize-cli-${type}.gguf`);
  const json = path.join(outDir, `quantize-cli-${type}.json`);
  const t0 = Date.now();
  const text = execFileSync(organ, ['quantize', model, out, type, '--json', json, '--force']).toString();
  return { out, text, ms: Date.now() - t0, report: JSON.parse(fs.readFileSync(json, 'utf8')) };
}

// The sizes' lines of a text report.
const sizes = (text) => text.split('\n').filter((l) => /^(model|quant) size|fell back/.test(l)).join('\n');

const server = await serve(path.resolve(dist));
const origin = `http://127.0.0.1:${server.address().port}`;

async function openIn(context) {
  const page = context.pages()[0] ?? await context.newPage();
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') console.log(`console: ${m.text()}`); });
  await page.goto(`${origin}/#mode=quantize`);
  await page.waitForSelector('#mode-quantize.on');
  await page.setInputFiles('#file-input', model);
  await page.waitForSelector('#quant-plan, #quant-refused, #error', { timeout: 60_000 });
  return page;
}

async function quantizeIn(page, type) {
  await page.selectOption('#quant-type', type);
  await page.waitForFunction((t) => document.querySelector('#quant-type').value === t, type);
  const t0 = Date.now();
  await page.click('#quant-go');
  await page.waitForSelector('#quant-done, #error', { timeout: 600_000 });
  const err = await page.$('#error');
  if (err) throw new Error(`the page says: ${await err.textContent()}`);
  const d = await page.$eval('#quant-done', (e) => ({ ...e.dataset }));
  return { ...d, wall: Date.now() - t0 };
}

// A picker that hands the page a file of the origin's private file system.
const OPFS_PICKER = `window.showSaveFilePicker = async (o) =>
  (await navigator.storage.getDirectory()).getFileHandle(o.suggestedName, { create: true });`;

let context = await launch({ viewport: { width: 1400, height: 1000 } });
try {
  await context.addInitScript(OPFS_PICKER);
  const page = await openIn(context);
  // 1. The preview, and a refusal.
  const q4 = cli('Q4_K_M');
  const plan = await page.textContent('#quant-plan');
  check(sizes(plan) === sizes(q4.text) && sizes(plan) !== '',
    `the Q4_K_M plan previewed is organ quantize's: ${sizes(plan).replace(/\n/g, '; ')}`);
  await page.selectOption('#quant-type', 'IQ2_XXS');
  await page.waitForSelector('#quant-refused');
  const refused = await page.textContent('#quant-refused');
  let cliRefused = '';
  try { execFileSync(organ, ['quantize', model, path.join(outDir, 'x.gguf'), 'IQ2_XXS', '--dry-run'], { stdio: 'pipe' }); }
  catch (e) { cliRefused = e.stderr.toString(); }
  const disabled = await page.$eval('#quant-go', (b) => b.disabled);
  check(disabled && refused.length > 0 && cliRefused.includes(refused.slice(refused.indexOf(': ') + 2, refused.indexOf(': ') + 60)),
    `IQ2_XXS without an importance matrix refused as the CLI refuses it, nothing to click: "${refused.slice(0, 120)}"`);

  // 2. Q4_K_M through the File System Access API.
  const run = await quantizeIn(page, 'Q4_K_M');
  const got = await page.evaluate(async (name) => {
    const f = await (await (await navigator.storage.getDirectory()).getFileHandle(name)).getFile();
    const h = await crypto.subtle.digest('SHA-256', await f.arrayBuffer());
    return { size: f.size, sha: [...new Uint8Array(h)].map((b) => b.toString(16).padStart(2, '0')).join('') };
  }, run.file);
  check(got.sha === sha(q4.out) && got.size === fs.statSync(q4.out).size,
    `F16 → Q4_K_M written through the File System Access API (${run.file}, ${got.size} bytes) is organ quantize's byte for byte`);
  console.log(`     quantize Q4_K_M in the page: ${(run.elapsedMs / 1000).toFixed(2)} s on ${run.threads} threads ` +
    `(the CLI ${(q4.ms / 1000).toFixed(2)} s); the page's memory at the end: JS heap ${mib(Number(run.jsHeap))}, ` +
    `wasm memory ${mib(Number(run.wasmMemory))}, for a ${mib(fs.statSync(model).size)} input`);

  // 4. The report's export.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export-quantize-json')]);
  const exported = JSON.parse(fs.readFileSync(await dl.path(), 'utf8'));
  const names = (r) => ({ ...r, input: '', outputs: [] });
  check(JSON.stringify(names(exported)) === JSON.stringify(names(q4.report)) &&
      exported.outputs[0] === run.file && exported.input === path.basename(model),
    `the report's JSON export is organ quantize --json's (${exported.tensors.length} tensors), the files named as the page knows them`);
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
} finally {
  await context.close();
}

// 3. No File System Access API: a download.
context = await launch({ acceptDownloads: true, viewport: { width: 1400, height: 1000 } });
try {
  await context.addInitScript('delete window.showSaveFilePicker; delete Window.prototype.showSaveFilePicker;');
  const page = await openIn(context);
  const q8 = cli('Q8_0');
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 600_000 }), quantizeIn(page, 'Q8_0')]);
  const file = path.join(outDir, 'quantize-page-Q8_0.gguf');
  await dl.saveAs(file);
  check(sha(file) === sha(q8.out), `without the File System Access API, F16 → Q8_0 is a download (${dl.suggestedFilename()}), organ quantize's byte for byte`);
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
} finally {
  await context.close();
  server.close();
}
console.log(`test result: ${failures === 0 ? 'ok' : 'FAILED'}. ${passes} passed; ${failures} failed (web e2e quantize)`);
process.exit(failures === 0 ? 0 : 1);
