// The admin console's build: Preact + uPlot + Pico CSS, bundled by Vite into dist/console/
// (served by the gateway at /console/; on Workers dist/ is the static-assets directory).
// Two entries share the components and assets: the console (index.html) and each city's
// users' page (users.html, served by the gateway at /u/<city_id>/).
import { join } from 'node:path';
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
    rollupOptions: { input: { console: join(import.meta.dirname, 'index.html'), users: join(import.meta.dirname, 'users.html') } },
  },
  logLevel: 'warn',
});
