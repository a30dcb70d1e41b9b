// GET /health until it answers ok (a new workers.dev route can take a few seconds).
export interface HealthOk {
  ok: true;
  services: string[];
}

export async function waitForHealth(url: string, timeoutMs: number): Promise<{ ok: true; health: HealthOk } | { ok: false; error: string }> {
  const deadline = Date.now() + timeoutMs;
  let error = 'no answer';
  let wait = 250;
  for (;;) {
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(Math.max(1000, Math.min(15_000, deadline - Date.now()))) });
      const text = await res.text();
      let body: { ok?: unknown; services?: unknown } | null = null;
      try {
        body = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      if (res.ok && body?.ok === true && Array.isArray(body.services)) return { ok: true, health: body as HealthOk };
      error = `HTTP ${res.status}: ${text.slice(0, 300)}`;
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause;
      error = cause?.code ?? (e as Error).message;
    }
    if (Date.now() + wait > deadline) return { ok: false, error };
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 3000);
  }
}

export const HEALTH_FIX =
  'if /health times out, the service is not publicly reachable: check that the workers.dev route is enabled (or a domain is bound to the Worker) and that nothing blocks it; then run `citygate deploy --verify-only`';
