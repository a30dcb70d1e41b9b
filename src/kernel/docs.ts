// GET /docs: the interactive API reference (Scalar), rendered in the browser from /openapi.json.
// The runtime supplies Scalar's standalone script so the page needs no external network;
// without one (e.g. a Worker bundle that leaves it out) the page loads it from the CDN.

export const SCALAR_CDN = 'https://cdn.jsdelivr.net/npm/@scalar/api-reference@1.72.1/dist/browser/standalone.js';

export function docsPage(title: string, scriptSrc: string): string {
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>${esc(title)} API reference</title>
</head>
<body>
  <div id="app"></div>
  <script src="${esc(scriptSrc)}"></script>
  <script>
    Scalar.createApiReference('#app', {
      url: '/openapi.json',
      withDefaultFonts: false,
      telemetry: false,
      hideClientButton: false,
      defaultOpenAllTags: false,
    })
  </script>
</body>
</html>`;
}
