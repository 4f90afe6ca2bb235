// CPU time per Chromium thread while the app measures a model: the workers, the page's
// thread, the browser process's file reading. Read from /proc/<pid>/task/<tid>/stat (10 ms
// ticks) just before the file is chosen and when the report is drawn, so drawing the
// report counts too. For bench/web-thread-cpu.sh.
// Usage: node tests/web/thread-cpu.mjs DIST MODEL RUNS
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, model, runs] = process.argv.slice(2);

/** CPU ms so far of every thread of every Chromium process, keyed by pid/tid. */
function threads() {
  const out = new Map();
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('chromium')) continue;
      const type = (cmd.match(/--type=([a-z-]+)/) || [null, 'browser'])[1];
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
        const st = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
        out.set(`${pid}/${tid}`, { name: `${type} ${name}`, ms: (Number(f[11]) + Number(f[12])) * 10 });
      }
    } catch { /* the process or thread ended meanwhile */ }
  }
  return out;
}

const server = await serve(path.resolve(dist));
const context = await launch();
try {
  const page = context.pages()[0] ?? await context.newPage();
  const out = [];
  for (let r = 0; r < Number(runs); r++) {
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForFunction(() => Number(document.querySelector('#threads')?.dataset.threads) > 0);
    const before = threads();
    await page.setInputFiles('#file-input', model);
    await page.waitForSelector('#report[data-done], #error', { timeout: 120_000 });
    const after = threads();
    const by = {};
    for (const [k, v] of after) {
      const d = v.ms - (before.get(k)?.ms ?? 0);
      if (d > 0) by[v.name] = (by[v.name] ?? 0) + d;
    }
    out.push({ in_page_ms: Number(await page.getAttribute('#report', 'data-elapsed-ms')), cpu_ms: by });
  }
  console.log(JSON.stringify(out));
} finally {
  await context.close();
  server.close();
}
