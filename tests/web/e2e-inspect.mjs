// End-to-end test of inspect mode (issue 32: the browser's metadata editor and memory
// view) in headless Chromium, as tests/web/e2e.mjs drives it. Usage (scripts/web-e2e.sh
// sets it up):
//   node tests/web/e2e-inspect.mjs DIST ORGAN_BIN OUT_DIR MODEL [--split SHARD,SHARD…] [--big BIG]
// 1. Memory: for three settings, every row of the page's estimate has the bytes of
//    `organ inspect MODEL --memory … --json`, and the settings line is the CLI's.
// 2. Editor: values edited in place (a string, an id, a float, an array), a key removed,
//    one renamed, two added (typed, inferred), the chat template replaced; the download's
//    bytes equal `organ meta`'s output for the same edits, and the page lists the CLI's
//    change lines.
// 2b. Tensor edits: a rename by regex, a removal, a conversion to Q8_0 (read and converted
//    in the page by the core's quantizer); the download equals `organ meta`'s output for
//    the same flags, and the page lists the CLI's change lines and what its check finds
//    broken. A pattern matching nothing is the CLI's message, nothing downloaded.
// 3. Bad edits (an unknown type name, a malformed JSON array, a refused key, a key too
//    long) show the CLI's message and download nothing; a file that is not a model is an
//    error.
// 4. A split model: memory as the CLI's; an edit downloads every shard, each organ meta's
//    (--out NAME-edited.gguf) byte for byte. A file cut short at 50 MB: what it lacks as `organ inspect` says it, memory as its.
// 5. BIG (tests/web/make-big.py, 4.5 GB, sparse): edited and written without reading its
//    tensor data: the download has the new header and the old data (its last bytes, past
//    4 GiB, equal the source's), the page's JS heap stays flat; the time is printed.
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, organ, outDir, model] = process.argv.slice(2, 6);
let split = null, big = null;
for (let i = 6; i < process.argv.length; i++) {
  if (process.argv[i] === '--split') split = process.argv[++i].split(',');
  else if (process.argv[i] === '--big') big = process.argv[++i];
}
fs.mkdirSync(outDir, { recursive: true });
let failures = 0, passes = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++; else failures++;
}

const sha = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

// The CLI's estimate: bytes per row key, and the settings as its text report says them.
function cliMemory(file, flags) {
  const json = JSON.parse(execFileSync(organ, ['inspect', file, '--memory', ...flags, '--json'], { maxBuffer: 1 << 28 }).toString());
  const m = json.memory;
  const rows = { weights_host: m.weights.host_mapped, kv: m.kv.k + m.kv.v, output: m.output, compute: m.compute, total: m.total };
  if (m.weights.device > 0) rows.weights_device = m.weights.device;
  if (m.kv_swa) rows.kv_swa = m.kv_swa.k + m.kv_swa.v;
  const text = execFileSync(organ, ['inspect', file, '--memory', ...flags]).toString();
  const line = text.split('\n').find((l) => l.includes('what llama.cpp allocates at'));
  return [rows, line.slice(line.indexOf(' at ') + 4)];
}

async function pageMemory(page) {
  const rows = await page.$$eval('#memory tr', (rs) => rs.map((r) => [r.dataset.part, Number(r.dataset.bytes)]));
  const settings = (await page.textContent('#memory-settings')).trim();
  return [Object.fromEntries(rows), settings.slice(settings.indexOf(' at ') + 4).replace(/:$/, '')];
}

async function setMemory(page, { ctx = '', kv = 'f16', ngl = '0' }) {
  await page.fill('#mem-ctx', ctx);
  await page.selectOption('#mem-kv', kv);
  await page.fill('#mem-ngl', ngl);
}

const server = await serve(path.resolve(dist));
const origin = `http://127.0.0.1:${server.address().port}`;
const context = await launch({ acceptDownloads: true, viewport: { width: 1400, height: 1000 } });
const page = context.pages()[0] ?? await context.newPage();
page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
page.on('console', (m) => { if (m.type() === 'error') console.log(`console: ${m.text()}`); });
let downloads = 0;
page.on('download', () => { downloads++; });

async function inspectIn(files) {
  // A fragment naming the mode opens the page in it (a reload, not a same-page jump).
  await page.goto('about:blank');
  await page.goto(`${origin}/#mode=inspect`);
  await page.waitForSelector('#mode-inspect.on');
  await page.setInputFiles('#file-input', files);
  await page.waitForSelector('#inspect[data-done], #error', { timeout: 60_000 });
}

// Opens a row's editor (`edit` or `rename`), fills it and keeps it.
async function editRow(key, what, text) {
  const row = `#metadata tr[data-key="${key}"]`;
  await page.click(`${row} button.${what}`);
  await page.fill(`${row} .edit-text`, text);
  await page.click(`${row} button.keep`);
}

async function addKey(key, value, type = '') {
  await page.fill('#meta-add-key', key);
  await page.fill('#meta-add-value', value);
  await page.fill('#meta-add-type', type);
  await page.click('#meta-add');
}

try {
  // 1. Memory, three settings.
  await inspectIn(model);
  const err = await page.$('#error');
  if (err) throw new Error(`the app reported an error: ${await err.textContent()}`);
  for (const s of [{}, { ctx: '8192', kv: 'q8_0' }, { ctx: '512', kv: 'q4_0', ngl: '10' }]) {
    const flags = [];
    if (s.ctx) flags.push('--ctx', s.ctx);
    if (s.kv) flags.push('--kv-type', s.kv);
    if (s.ngl) flags.push('--gpu-layers', s.ngl);
    await setMemory(page, s);
    const [want, wantLine] = cliMemory(model, flags);
    const [got, gotLine] = await pageMemory(page);
    check(JSON.stringify(Object.entries(got).sort()) === JSON.stringify(Object.entries(want).sort()) && gotLine === wantLine,
      `memory at ${JSON.stringify(s)}: every row's bytes and the settings line are organ inspect --memory's (total ${(got.total / 2 ** 20).toFixed(2)} MiB; ${gotLine})`);
  }
  await setMemory(page, { ctx: '0' });
  const memErr = (await page.textContent('#memory-error')) ?? '';
  const cliErr = spawnSync(organ, ['inspect', model, '--memory', '--ctx', '0']).stderr.toString();
  check(memErr.includes('--ctx 0 is out of range') && cliErr.includes(memErr),
    `a context of 0 is the CLI's error: "${memErr}"`);
  await page.screenshot({ path: path.join(outDir, 'inspect-memory.png'), fullPage: true });

  // 2. The editor, against organ meta.
  const template = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}<|assistant|>\n";
  const tfile = path.join(outDir, 'inspect-template.jinja');
  fs.writeFileSync(tfile, template);
  const edits = [
    ['general.name', 'edit', 'SmolLM2 edited in a browser'],
    ['tokenizer.ggml.bos_token_id', 'edit', '2'],
    ['llama.rope.freq_base', 'edit', '50000.5'],
    ['general.languages', 'edit', '["en", "fr"]'],
    ['general.finetune', 'rename', 'general.finetune_name'],
  ];
  for (const [key, what, text] of edits) await editRow(key, what, text);
  await page.click('#metadata tr[data-key="general.license"] button.rm');
  await addKey('organ.test.ids', '[1, 2, 3]', 'arr[i32]');
  await addKey('organ.test.flag', 'true');
  await editRow('tokenizer.chat_template', 'edit', template);
  const pending = await page.$$eval('#meta-pending li', (ls) => ls.length);
  const cliOut = path.join(outDir, 'inspect-cli-edited.gguf');
  fs.rmSync(cliOut, { force: true });
  const cliText = execFileSync(organ, ['meta', model, '--rm', 'general.license', '--rename', 'general.finetune=general.finetune_name',
    '--set', 'general.name=SmolLM2 edited in a browser', '--set', 'tokenizer.ggml.bos_token_id=2', '--set', 'llama.rope.freq_base=50000.5',
    '--set', 'general.languages=["en", "fr"]', '--set', 'organ.test.ids=[1, 2, 3]:arr[i32]', '--set', 'organ.test.flag=true',
    '--set-file', `tokenizer.chat_template=${tfile}`, '--out', cliOut]).toString();
  const t0 = Date.now();
  const [d] = await Promise.all([page.waitForEvent('download'), page.click('#meta-write')]);
  const got = path.join(outDir, 'inspect-page-edited.gguf');
  await d.saveAs(got);
  await page.waitForSelector('#meta-status[data-done]');
  const same = sha(got) === sha(cliOut);
  check(same && d.suggestedFilename() === 'SmolLM2-135M-Instruct.Q4_1-edited.gguf',
    `${pending} edits written in ${Date.now() - t0} ms: the download (${d.suggestedFilename()}, ${fs.statSync(got).size} bytes) is organ meta's output byte for byte`);
  const pageChanges = (await page.textContent('#meta-changes')).trim().split('\n');
  const cliChanges = cliText.trim().split('\n').filter((l) => !l.startsWith('wrote '));
  check(JSON.stringify(pageChanges) === JSON.stringify(cliChanges), `the page lists organ meta's ${cliChanges.length} change lines (${pageChanges[0]} …)`);
  await page.screenshot({ path: path.join(outDir, 'inspect-edited.png'), fullPage: true });

  // 2b. Tensor edits, against organ meta.
  await inspectIn(model);
  await page.fill('#tensor-rename-pattern', String.raw`blk\.(\d+)\.attn_q\.weight`);
  await page.fill('#tensor-rename-to', 'blk.$1.attn_query.weight');
  await page.click('#tensor-rename');
  await page.fill('#tensor-remove-pattern', 'blk.29.ffn_down.weight');
  await page.click('#tensor-remove');
  await page.fill('#tensor-retype-pattern', String.raw`blk\.0\.ffn_down\.weight`);
  await page.selectOption('#tensor-retype-type', 'Q8_0');
  await page.click('#tensor-retype');
  await editRow('general.name', 'edit', 'SmolLM2, tensors edited in a browser');
  const tcliOut = path.join(outDir, 'inspect-cli-tensors.gguf');
  fs.rmSync(tcliOut, { force: true });
  const tcliText = execFileSync(organ, ['meta', model, '--set', 'general.name=SmolLM2, tensors edited in a browser',
    '--rename-tensor', String.raw`blk\.(\d+)\.attn_q\.weight=blk.$1.attn_query.weight`, '--remove-tensor', 'blk.29.ffn_down.weight',
    '--retype-tensor', String.raw`blk\.0\.ffn_down\.weight=Q8_0`, '--out', tcliOut]).toString();
  const t2 = Date.now();
  const [td] = await Promise.all([page.waitForEvent('download'), page.click('#meta-write')]);
  const tgot = path.join(outDir, 'inspect-page-tensors.gguf');
  await td.saveAs(tgot);
  await page.waitForSelector('#meta-status[data-done]');
  check(sha(tgot) === sha(tcliOut),
    `tensors renamed by regex, removed and converted to Q8_0 in ${Date.now() - t2} ms: the download (${fs.statSync(tgot).size} bytes) is organ meta's output byte for byte`);
  const tLines = tcliText.trim().split('\n');
  const wroteAt = tLines.findIndex((l) => l.startsWith('wrote '));
  const tPageChanges = (await page.textContent('#meta-changes')).trim().split('\n');
  const tPageFindings = ((await page.textContent('#meta-findings')) ?? '').split('\n');
  const tCliFindings = tLines.slice(wroteAt + 1);
  check(JSON.stringify(tPageChanges) === JSON.stringify(tLines.slice(0, wroteAt)) &&
    tPageFindings[0].startsWith('the edited model has 61 problems the input had not') &&
    JSON.stringify(tPageFindings.slice(1)) === JSON.stringify(tCliFindings.slice(1)),
  `the page lists organ meta's ${wroteAt} change lines and its check's ${tCliFindings.length - 1} finding lines ("${tPageFindings[1]}" …)`);
  fs.rmSync(tgot, { force: true });
  await page.screenshot({ path: path.join(outDir, 'inspect-tensors.png'), fullPage: true });
  await inspectIn(model);
  await page.fill('#tensor-remove-pattern', 'blk.99.ffn_down.weight');
  await page.click('#tensor-remove');
  const tBefore = downloads;
  await page.click('#meta-write');
  await page.waitForSelector('#meta-error', { timeout: 10_000 });
  const tMsg = (await page.textContent('#meta-error')).trim();
  const tCli = spawnSync(organ, ['meta', model, '--remove-tensor', 'blk.99.ffn_down.weight', '--out', path.join(outDir, 'inspect-bad.gguf')]);
  const tCore = tMsg.slice(tMsg.indexOf('--remove-tensor'));
  check(tMsg.includes('no tensor has this name') && tCli.stderr.toString().includes(tCore) && downloads === tBefore,
    `a tensor pattern matching nothing: the CLI's message, nothing downloaded: "${tMsg.slice(0, 140)}"`);

  // 3. Bad edits: the CLI's message, nothing downloaded.
  const bad = [
    ['x.y', '1', 'flot', ['--set-typed', 'x.y=1:flot'], 'unknown type "flot"'],
    ['x.y', '[1,', 'arr[u32]', ['--set', 'x.y=[1,:arr[u32]'], 'is not a JSON array'],
    ['split.count', '2', '', ['--set', 'split.count=2'], 'organ does not change it'],
    ['k'.repeat(70000), '1', '', ['--set', `${'k'.repeat(70000)}=1`], 'GGUF keys are at most 65535 bytes'],
  ];
  for (const [key, value, type, flags, says] of bad) {
    await inspectIn(model);
    await addKey(key, value, type);
    const before = downloads;
    await page.click('#meta-write');
    await page.waitForSelector('#meta-error', { timeout: 10_000 });
    const msg = (await page.textContent('#meta-error')).trim();
    const cli = spawnSync(organ, ['meta', model, ...flags, '--out', path.join(outDir, 'inspect-bad.gguf')]);
    const cliMsg = cli.stderr.toString();
    // The part after the file name: the core's sentence, naming the key.
    const core = msg.slice(msg.indexOf('metadata key'));
    check(msg.includes(says) && cliMsg.includes(core.slice(0, 200)) && cli.status !== 0 && downloads === before &&
      !fs.existsSync(path.join(outDir, 'inspect-bad.gguf')),
    `bad edit (${says}): the CLI's message, nothing downloaded: "${msg.slice(0, 140)}"`);
  }
  const notModel = path.join(outDir, 'inspect-not-a-model.gguf');
  fs.writeFileSync(notModel, 'this is not a GGUF file\n');
  await inspectIn(notModel);
  const e = (await page.textContent('#error')) ?? '';
  check(e.includes('inspect-not-a-model.gguf'), `a file that is not a model: "${e.slice(0, 120)}"`);

  // A download cut short: the header shown, what is missing said as organ inspect says it.
  const cut = path.join(outDir, 'inspect-cut.gguf');
  fs.writeFileSync(cut, fs.readFileSync(model).subarray(0, 50_000_000));
  await inspectIn(cut);
  const cutLine = execFileSync(organ, ['inspect', cut]).toString().split('\n').find((l) => l.includes(': cut short: '));
  const shownCut = (await page.textContent('#inspect-cut li')) ?? '';
  const [wantCut] = cliMemory(cut, []);
  const [gotCut] = await pageMemory(page);
  const whyCut = (await page.textContent('#meta-not-editable')) ?? '';
  check(shownCut === cutLine && JSON.stringify(Object.entries(gotCut).sort()) === JSON.stringify(Object.entries(wantCut).sort()) &&
    whyCut.includes('Cut short') && !(await page.$('#meta-write')),
  `a file cut short at 50 MB: "${shownCut.slice(0, 100)}…" as organ inspect says it, memory as its, the editor read-only`);

  // 4. A split model: memory as the CLI's; an edit downloads every shard, the first with
  // the new header, as organ meta --out NAME-edited.gguf writes them.
  if (split) {
    await inspectIn(split);
    const [want, wantLine] = cliMemory(split[0], ['--ctx', '4096']);
    await setMemory(page, { ctx: '4096' });
    const [gotS, gotLine] = await pageMemory(page);
    check(JSON.stringify(Object.entries(gotS).sort()) === JSON.stringify(Object.entries(want).sort()) && gotLine === wantLine &&
      !(await page.$('#meta-not-editable')),
    `a split model of ${split.length} shards: memory as organ inspect --memory's, the editor open`);
    await editRow('general.name', 'edit', 'a split chimera, renamed');
    const shardDownloads = [];
    const collect = (d) => shardDownloads.push(d);
    page.on('download', collect);
    await page.click('#meta-write');
    await page.waitForSelector('#meta-status[data-done]');
    for (let i = 0; i < 100 && shardDownloads.length < split.length; i++) await page.waitForTimeout(50);
    page.off('download', collect);
    const stem = path.basename(split[0]).replace(/-00001-of-\d{5}\.gguf$/, '');
    const cliBase = path.join(outDir, `${stem}-cli-edited.gguf`);
    const cliShards = split.map((_, i) => path.join(outDir, `${stem}-cli-edited-${String(i + 1).padStart(5, '0')}-of-${String(split.length).padStart(5, '0')}.gguf`));
    for (const f of cliShards) fs.rmSync(f, { force: true });
    const said = execFileSync(organ, ['meta', split[0], '--set', 'general.name=a split chimera, renamed', '--out', cliBase]).toString();
    const wantNames = split.map((_, i) => `${stem}-edited-${String(i + 1).padStart(5, '0')}-of-${String(split.length).padStart(5, '0')}.gguf`);
    // Each download by its name: the browser starts them in order, but the events may
    // arrive in another (the first shard's blob is composed, the others are slices).
    const byName = new Map(shardDownloads.map((d) => [d.suggestedFilename(), d]));
    const same = [];
    for (const [i, name] of wantNames.entries()) {
      const d = byName.get(name);
      if (!d) { same.push(false); continue; }
      const got = path.join(outDir, `inspect-split-${i}.gguf`);
      await d.saveAs(got);
      same.push(sha(got) === sha(cliShards[i]));
      fs.rmSync(got, { force: true });
    }
    const status = (await page.textContent('#meta-status')) ?? '';
    check(shardDownloads.length === split.length && same.every(Boolean) &&
      said.includes(`and ${split.length - 1} more shards copied as they are`) && status.includes(`and ${split.length - 1} more shards copied as they are`),
    `the split model edited: ${shardDownloads.length} downloads (${wantNames.join(', ')}), each organ meta's shard byte for byte` +
      (same.every(Boolean) ? '' : ` (got ${shardDownloads.map((d) => d.suggestedFilename()).join(', ')}; same bytes: ${same.join(', ')})`) +
      (status.includes('more shards copied') ? '' : ` (the page said: ${status.slice(0, 300)})`));
    for (const f of cliShards) fs.rmSync(f, { force: true });
  }

  // 5. A 4.5 GB model, its tensor data never read.
  if (big) {
    await inspectIn(big);
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    const heap = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'JSHeapUsedSize').value;
    const h0 = await heap();
    await editRow('general.name', 'edit', 'big sparse test model, renamed');
    const t1 = Date.now();
    const [db] = await Promise.all([page.waitForEvent('download'), page.click('#meta-write')]);
    await page.waitForSelector('#meta-status[data-done]');
    const written = Date.now() - t1;
    const pageMs = Number(await page.getAttribute('#meta-status', 'data-ms'));
    const h1 = await heap();
    const file = await db.path();
    const saved = Date.now() - t1;
    const size = fs.statSync(file).size;
    const src = fs.statSync(big).size;
    const wantSize = Number(await page.getAttribute('#meta-status', 'data-bytes'));
    const tail = 2 * 1024 * 1024;
    const read = (f, len, at) => {
      const b = Buffer.alloc(len);
      const fd = fs.openSync(f, 'r');
      fs.readSync(fd, b, 0, len, at);
      fs.closeSync(fd);
      return b;
    };
    const sameTail = read(file, tail, size - tail).equals(read(big, tail, src - tail));
    const head = JSON.parse(execFileSync(organ, ['inspect', file, '--json'], { maxBuffer: 1 << 26 }).toString());
    const name = head.metadata.find((m) => m.key === 'general.name')?.value;
    check(size === wantSize && sameTail && name === 'big sparse test model, renamed' && h1 - h0 < 64 * 2 ** 20,
      `a ${(src / 2 ** 30).toFixed(2)} GiB model edited: composed in ${pageMs} ms (${written} ms to the page's report, ${saved} ms with the download saved), ` +
      `${size} bytes with its last 2 MiB (past 4 GiB) the source's, general.name set; JS heap ${((h1 - h0) / 2 ** 20).toFixed(1)} MiB more`);
    fs.rmSync(file, { force: true });
  }
} catch (e) {
  check(false, `the run stopped: ${e.stack || e}`);
  await page.screenshot({ path: path.join(outDir, 'inspect-failure.png'), fullPage: true }).catch(() => {});
} finally {
  await context.close();
  server.close();
}
// The same closing line as a cargo test binary, so scripts/test.sh counts these checks too.
console.log(`test result: ${failures === 0 ? 'ok' : 'FAILED'}. ${passes} passed; ${failures} failed (web e2e inspect)`);
process.exit(failures === 0 ? 0 : 1);
