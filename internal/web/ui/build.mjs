// Builds dist/app.js and dist/app.css from src/ (run: npm ci && npm run build).
// dist/ is committed so that `go build` needs no Node.
import * as esbuild from 'esbuild';
import { copyFileSync } from 'node:fs';

await esbuild.build({
  entryPoints: ['src/main.js'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  outfile: 'dist/app.js',
  legalComments: 'none',
});
copyFileSync('src/app.css', 'dist/app.css');
