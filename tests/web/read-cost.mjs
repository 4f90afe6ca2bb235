// What reading a model through the File API costs Chromium, with no measuring: the file is
// read in reads of SIZE MB, two in flight (as the app reads), and the machine's CPU time
// during the reads is taken from /proc/stat (the machine is otherwise idle). For
// bench/web-read-cost.sh. Usage: node tests/web/read-cost.mjs DIST MODEL RUNS SIZE_MB...
import fs from 'node:fs';
import path from 'node:path';
import { serve } from './serve.mjs';
import { launch } from './chromium.mjs';

const [dist, model, runs, ...sizes] = process.argv.slice(2);

/** CPU time of the whole machine so far, in ms (user + nice + system + irq + softirq). */
function cpuMs() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6]) * 1000 / 100;
}

const server = await serve(path.resolve(dist));
const context = await launch();
try {
  const page = context.pages()[0] ?? await context.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.evaluate(() => document.body.insertAdjacentHTML('beforeend', '<input type="file" id="read-cost">'));
  await page.setInputFiles('#read-cost', model);
  const rows = [];
  for (const mb of sizes) {
    const wall = [], cpu = [];
    for (let r = 0; r < Number(runs); r++) {
      const c0 = cpuMs();
      const ms = await page.evaluate(async (size) => {
        const f = document.getElementById('read-cost').files[0];
        const t0 = performance.now();
        let off = 0, bytes = 0;
        const inFlight = [];
        while (off < f.size || inFlight.length) {
          while (off < f.size && inFlight.length < 2) {
            const s = off, e = Math.min(off + size, f.size);
            off = e;
            inFlight.push(f.slice(s, e).arrayBuffer().then((b) => { bytes += b.byteLength; }));
          }
          await inFlight.shift();
        }
        if (bytes !== f.size) throw new Error(`read ${bytes} of ${f.size} bytes`);
        return performance.now() - t0;
      }, Math.round(Number(mb) * 1048576));
      wall.push(ms);
      cpu.push(cpuMs() - c0);
    }
    const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    rows.push({ read_mb: Number(mb), wall_ms: median(wall), cpu_ms: median(cpu) });
  }
  console.log(JSON.stringify({ bytes: fs.statSync(model).size, rows }));
} finally {
  await context.close();
  server.close();
}
