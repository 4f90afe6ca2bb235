// The wasm side of bench/wasm-vs-native.sh: best of RUNS of measure() on MODEL in Node.
import fs from 'fs';
const [wasmPath, model, runs] = process.argv.slice(2);
const file = fs.readFileSync(model);
const { instance } = await WebAssembly.instantiate(fs.readFileSync(wasmPath), {});
const e = instance.exports;
const ptr = e.buffer(file.length);
new Uint8Array(e.memory.buffer, ptr, file.length).set(file);
let best = Infinity, n = 0;
for (let r = 0; r < Number(runs); r++) {
  const t = performance.now();
  n = e.measure(ptr, file.length);
  best = Math.min(best, (performance.now() - t) / 1000);
}
if (n <= 0) throw new Error('the model did not measure');
console.log(JSON.stringify({ tensors: n, best_s: best }));
