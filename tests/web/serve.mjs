// A static server for the built app (dist/): sends COOP/COEP so the page is cross-origin
// isolated (threads), except under /plain/, which serves the same files without them (the
// single-thread fallback). Logs nothing; listens on 127.0.0.1, port 0 = any free port.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.json': 'application/json' };

export function serve(root, port = 0) {
  const server = http.createServer((req, res) => {
    let url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const isolated = !url.startsWith('/plain/');
    if (!isolated) url = url.slice('/plain'.length);
    if (url.endsWith('/')) url += 'index.html';
    const file = path.join(root, path.normalize(url));
    if (!file.startsWith(path.resolve(root)) || req.method !== 'GET' || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(req.method === 'GET' ? 404 : 405).end();
      return;
    }
    const headers = { 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store' };
    if (isolated) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    }
    res.writeHead(200, headers);
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = path.resolve(process.argv[2] || 'dist');
  const s = await serve(root, Number(process.argv[3] || 8936));
  console.log(`serving ${root} at http://127.0.0.1:${s.address().port}/ with COOP/COEP`);
}
