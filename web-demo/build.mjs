// Builds the demo into dist/: the bundled app (esbuild) and the static files. The gateway embeds
// dist/ at compile time, so `agui-gateway serve` alone serves the demo; `tests/web_demo.rs`
// rebuilds into a temporary folder and fails when the committed dist/ is stale.
//
// Usage: node build.mjs [outdir]   (default: dist)
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const outdir = process.argv[2] || 'dist';
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: ['src/main.ts'],
  bundle: true,
  format: 'esm',
  target: 'es2020',
  minify: true,
  legalComments: 'none',
  outfile: join(outdir, 'app.js'),
  logLevel: 'warning',
});
for (const f of readdirSync('static')) copyFileSync(join('static', f), join(outdir, f));
