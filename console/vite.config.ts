// The admin console's build: Preact + uPlot + Pico CSS, bundled by Vite into dist/console/
// (served by the gateway at /console/; on Workers dist/ is the static-assets directory).
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  plugins: [preact()],
  build: {
    outDir: 'dist/console',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 400,
  },
  logLevel: 'warn',
});
