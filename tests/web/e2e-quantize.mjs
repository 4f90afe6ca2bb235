// End-to-end test of quantize mode (issue 48: `organ quantize` in the page) in headless
// Chromium. Usage (scripts/web-e2e.sh sets it up):
//   node tests/web/e2e-quantize.mjs DIST ORGAN_BIN OUT_DIR F16_MODEL [IMATRIX]
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
// 5. A data-free recipe for 5.5 bpw chosen in the page (types Q4_0, Q5_0, Q8_0) is
//    `organ recipe --data-free`'s, and the model it writes is `--apply`'s byte for byte.
// 6. With llama-imatrix's matrix dropped beside the model, the recipe is predicted from it
//    (`organ recipe --imatrix`'s totals) and the model is quantized under it: `--apply`'s
//    bytes, `quantize.imatrix.file` included (the CLI given the file's name, as the page
//    knows it).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, organBin, outDir, model, imatrix] = process.argv.slice(2, 7).map((a) => (a === '--big' ? undefined : a));
// Absolute: step 6 runs the CLI from the matrix's folder.
const organ = path.resolve(organBin);
const big = process.argv.includes('--big');
fs.mkdirSync(outDir, { recursive: true });
let failures = 0, passes = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++; else failures++;
}
// A file's SHA-256 in pieces of 64 MiB (the page hashes the file it wrote the same way, a
// piece at a time, so a large file is never whole in its heap).
const PIECE = 64 << 20;
function sha(file) {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.alloc(PIECE);
  const out = [];
  for (let n; (n = fs.readSync(fd, buf, 0, PIECE, null)) > 0;) {
    out.push(crypto.createHash('sha256').update(buf.subarray(0, n)).digest('hex'));
  }
  fs.closeSync(fd);
  return out.join(',');
}
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
  // The JS heap's peak while it runs, sampled every 50 ms (the wasm memory never shrinks:
  // its size at the end is its peak).
  await page.evaluate(() => {
    window.organPeak = 0;
    window.organSampler = setInterval(() => {
      window.organPeak = Math.max(window.organPeak, performance.memory.usedJSHeapSize);
    }, 50);
  });
  const t0 = Date.now();
  await page.click('#quant-go');
  await page.waitForSelector('#quant-done, #error', { timeout: 3_600_000 });
  const err = await page.$('#error');
  if (err) throw new Error(`the page says: ${await err.textContent()}`);
  const d = await page.$eval('#quant-done', (e) => ({ ...e.dataset }));
  const peak = await page.evaluate(() => { clearInterval(window.organSampler); return window.organPeak; });
  return { ...d, peak, wall: Date.now() - t0 };
}

// The size and SHA-256 of a file of the origin's private file system, computed in the page.
const opfsFile = (page, name) => page.evaluate(async ([name, piece]) => {
  const f = await (await (await navigator.storage.getDirectory()).getFileHandle(name)).getFile();
  const out = [];
  for (let at = 0; at < f.size; at += piece) {
    const h = await crypto.subtle.digest('SHA-256', await f.slice(at, at + piece).arrayBuffer());
    out.push([...new Uint8Array(h)].map((b) => b.toString(16).padStart(2, '0')).join(''));
  }
  return { size: f.size, sha: out.join(',') };
}, [name, PIECE]);

// The recipe's candidate types.
const RECIPE_TYPES = 'Q4_0,Q5_0,Q8_0';

// `organ recipe MODEL SOURCE… --types RECIPE_TYPES --target-bpw 5.5 --apply OUT` (run in
// `cwd`): what it prints, its `total:` line and its time.
function cliRecipe(modelArg, source, out, cwd) {
  const t0 = Date.now();
  const text = execFileSync(organ, ['recipe', modelArg, ...source, '--types', RECIPE_TYPES, '--target-bpw', '5.5',
    '--apply', path.resolve(out), '--force'], { cwd }).toString();
  return { text, total: text.split('\n').find((l) => l.startsWith('total:')), ms: Date.now() - t0 };
}

// Chooses the recipe in the page (its target and types already filled): its summary and
// the time it took.
async function chooseRecipe(page) {
  const t0 = Date.now();
  await page.click('#quant-recipe-go');
  await page.waitForSelector('#quant-recipe-summary, #error', { timeout: 600_000 });
  return { summary: await page.textContent('#quant-recipe-summary'), ms: Date.now() - t0 };
}

// A picker that hands the page a file of the origin's private file system.
const OPFS_PICKER = `window.showSaveFilePicker = async (o) =>
  (await navigator.storage.getDirectory()).getFileHandle(o.suggestedName, { create: true });`;

// Precise memory figures (else Chromium rounds and rarely updates them).
const FLAGS = ['--enable-precise-memory-info'];

let context = await launch({ viewport: { width: 1400, height: 1000 }, extraArgs: FLAGS });
if (big) {
  try {
    await context.addInitScript(OPFS_PICKER);
    const page = await openIn(context);
    const q = cli('Q4_K_M');
    const run = await quantizeIn(page, 'Q4_K_M');
    const got = await opfsFile(page, run.file);
    const wasm = Number(run.wasmMemory);
    check(got.sha === sha(q.out), `a ${mib(fs.statSync(model).size)} F16 → Q4_K_M in the page (${mib(got.size)}) is organ quantize's byte for byte`);
    check(run.peak + wasm < 512 * 2 ** 20, `the page's memory stays under 512 MiB: JS heap peak ${mib(run.peak)} + wasm memory ${mib(wasm)}`);
    console.log(`     the page ${(run.elapsedMs / 1000).toFixed(1)} s on ${run.threads} threads, the CLI ${(q.ms / 1000).toFixed(1)} s`);
  } catch (e) {
    check(false, `the run stopped: ${e.stack || e}`);
  } finally {
    await context.close();
    server.close();
  }
  console.log(`test result: ${failures === 0 ? 'ok' : 'FAILED'}. ${passes} passed; ${failures} failed (web quantize, big model)`);
  process.exit(failures === 0 ? 0 : 1);
}
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
  // Not --dry-run: a dry run plans without the matrix, as llama-quantize's does.
  try { execFileSync(organ, ['quantize', model, path.join(outDir, 'x.gguf'), 'IQ2_XXS'], { stdio: 'pipe' }); }
  catch (e) { cliRefused = e.stderr.toString(); }
  const disabled = await page.$eval('#quant-go', (b) => b.disabled);
  check(disabled && refused.length > 0 && cliRefused.includes(refused.slice(refused.indexOf(': ') + 2, refused.indexOf(': ') + 60)),
    `IQ2_XXS without an importance matrix refused as the CLI refuses it, nothing to click: "${refused.slice(0, 120)}"`);

  // 2. Q4_K_M through the File System Access API.
  const run = await quantizeIn(page, 'Q4_K_M');
  const got = await opfsFile(page, run.file);
  check(got.sha === sha(q4.out) && got.size === fs.statSync(q4.out).size,
    `F16 → Q4_K_M written through the File System Access API (${run.file}, ${got.size} bytes) is organ quantize's byte for byte`);
  console.log(`     quantize Q4_K_M in the page: ${(run.elapsedMs / 1000).toFixed(2)} s on ${run.threads} threads ` +
    `(the CLI ${(q4.ms / 1000).toFixed(2)} s); the page's memory: JS heap ${mib(Number(run.jsHeap))} at the end, ` +
    `${mib(run.peak)} at its peak, wasm memory ${mib(Number(run.wasmMemory))}, for a ${mib(fs.statSync(model).size)} input`);

  // 4. The report's export.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export-quantize-json')]);
  const exported = JSON.parse(fs.readFileSync(await dl.path(), 'utf8'));
  const names = (r) => ({ ...r, input: '', outputs: [] });
  check(JSON.stringify(names(exported)) === JSON.stringify(names(q4.report)) &&
      exported.outputs[0] === run.file && exported.input === path.basename(model),
    `the report's JSON export is organ quantize --json's (${exported.tensors.length} tensors), the files named as the page knows them`);

  // 5. A data-free recipe chosen in the page and written through the same API, against
  //    `organ recipe --data-free --apply` (types without Q4_1: this F16 is a dequantized
  //    Q4_1, which Q4_1 would hold losslessly).
  const recipeOut = path.join(outDir, 'quantize-cli-recipe.gguf');
  const cliFree = cliRecipe(model, ['--data-free'], recipeOut);
  await page.selectOption('#quant-type', 'recipe');
  await page.fill('#quant-target', '5.5bpw');
  await page.fill('#quant-types', RECIPE_TYPES);
  const free = await chooseRecipe(page);
  check(free.summary.includes(cliFree.total), `the recipe chosen in the page (${(free.ms / 1000).toFixed(1)} s; the CLI's with --apply ${(cliFree.ms / 1000).toFixed(1)} s) is organ recipe's: "${cliFree.total}"`);
  const rrun = await quantizeIn(page, 'recipe');
  const rgot = await opfsFile(page, rrun.file);
  check(rgot.sha === sha(recipeOut), `the recipe's model written in the page (${rrun.file}) is organ recipe --apply's byte for byte`);

  // 6. The same recipe from an importance matrix dropped beside the model.
  if (imatrix) {
    const imOut = path.join(outDir, 'quantize-cli-recipe-imatrix.gguf');
    // The CLI given the matrix's file name, as the page knows it.
    const dir = path.dirname(imatrix);
    const cliIm = cliRecipe(path.relative(dir, model), ['--imatrix', path.basename(imatrix)], imOut, dir);
    await page.setInputFiles('#imatrix-input', imatrix);
    await page.waitForSelector('#quant-no-imatrix');
    // The data-free recipe is let go of: it was predicted without the matrix.
    await page.waitForSelector('#quant-recipe-summary', { state: 'detached' });
    const im = await chooseRecipe(page);
    // The page's table, line by line, is the CLI's (its first line names the matrix).
    const table = (await page.textContent('#quant-recipe')).trim().split('\n');
    const cliLines = new Set(cliIm.text.split('\n'));
    const missing = table.filter((l) => !cliLines.has(l));
    check(im.summary.includes(cliIm.total) && table[0].includes(`importance matrix ${path.basename(imatrix)}`) && missing.length === 0,
      `with ${path.basename(imatrix)} dropped, the recipe chosen in the page (${(im.ms / 1000).toFixed(1)} s; the CLI's with --apply ${(cliIm.ms / 1000).toFixed(1)} s) is organ recipe --imatrix's, ${table.length} lines (${missing.length} not the CLI's${missing.length ? `: "${missing[0]}"` : ''}): "${cliIm.total}"`);
    const irun = await quantizeIn(page, 'recipe');
    const igot = await opfsFile(page, irun.file);
    check(igot.sha === sha(imOut), `the model of the importance-matrix recipe written in the page (${irun.file}) is organ recipe --imatrix --apply's byte for byte`);
  }
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
} finally {
  await context.close();
}

// 3. No File System Access API: a download.
context = await launch({ acceptDownloads: true, viewport: { width: 1400, height: 1000 }, extraArgs: FLAGS });
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
