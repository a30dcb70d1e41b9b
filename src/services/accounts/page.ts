// The small HTML page the OAuth callback answers when it does not redirect. Everything shown
// is escaped; nothing secret (code, tokens, verifier, state) is ever put in it.

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** Headers for anything the callback answers: never cached, never framed, no referrer. */
export const PAGE_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

export function resultPage(a: { status: number; ok: boolean; title: string; message: string; code?: string }): Response {
  const body = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(a.title)}</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center;background:#f6f7f9;color:#1d2330}
main{background:#fff;border-radius:12px;padding:2rem 2.5rem;max-width:28rem;box-shadow:0 1px 4px rgba(0,0,0,.08)}
h1{font-size:1.25rem;margin:0 0 .5rem;color:${a.ok ? '#17663a' : '#9b1c1c'}}
code{background:#f0f1f4;padding:.1rem .3rem;border-radius:4px}
</style>
</head>
<body>
<main>
<h1>${escapeHtml(a.title)}</h1>
<p>${escapeHtml(a.message)}</p>
${a.code ? `<p>Reason: <code>${escapeHtml(a.code)}</code></p>` : ''}
</main>
</body>
</html>
`;
  return new Response(body, { status: a.status, headers: { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8' } });
}
