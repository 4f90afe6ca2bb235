// Headless Chromium (Debian's, or $CHROMIUM) through playwright-core from $ORGAN_NODE_DIR,
// with a fresh profile and the flags every web test and bench uses: no sandbox (root in
// CI), no GPU, no background traffic. `options` adds to or overrides the launch options;
// its `extraArgs` are added to the flags.
// `close()` also removes the profile, once Chromium has exited (not on the 'close' event:
// Chromium may still be writing to it then).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export async function launch(options = {}) {
  const require = createRequire(path.join(process.env.ORGAN_NODE_DIR, 'x.js'));
  const { chromium } = require('playwright-core');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'organ-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', ...(options.extraArgs ?? [])],
    ...Object.fromEntries(Object.entries(options).filter(([k]) => k !== 'extraArgs')),
  });
  const close = context.close.bind(context);
  context.close = async (...args) => {
    await close(...args);
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 3 });
  };
  return context;
}
