// Admin calls over HTTP to a registered gateway (or --gateway URL), with the gateway's
// error body printed as one clean line.
import { findGateway, loadConfig, normalizeUrl, type RegisteredGateway } from './config.ts';
import { CliError } from './output.ts';

export interface Target {
  name: string | null;
  url: string;
  adminKey: string | null;
}

/** --gateway NAME|URL, else the current gateway; CITYGATE_ADMIN_KEY overrides the stored key. */
export function resolveTarget(gateway: string | undefined, env: NodeJS.ProcessEnv = process.env): Target {
  const config = loadConfig();
  let g: RegisteredGateway | null = null;
  if (gateway) {
    g = findGateway(config, gateway);
    if (!g) {
      if (!/^https?:\/\//i.test(gateway)) {
        throw new CliError(`no gateway named '${gateway}' is registered; see \`citygate gateways list\` or pass a URL`);
      }
      return { name: null, url: normalizeUrl(gateway), adminKey: env.CITYGATE_ADMIN_KEY || null };
    }
  } else {
    g = config.current ? (config.gateways[config.current] ?? null) : null;
    if (!g) {
      throw new CliError(
        'no current gateway: deploy one with `citygate deploy`, register one with `citygate gateways add URL --admin-key KEY`, or pass --gateway URL',
      );
    }
  }
  return { name: g.name, url: g.url, adminKey: env.CITYGATE_ADMIN_KEY || g.admin_key };
}

export interface CallOptions {
  query?: Record<string, string | undefined>;
  body?: unknown;
  /** Send the admin key (default true). */
  auth?: boolean;
  timeoutMs?: number;
}

export async function call<T = any>(t: Target, method: 'GET' | 'POST', path: string, opts: CallOptions = {}): Promise<T> {
  const url = new URL(t.url + path);
  for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.auth ?? true) {
    if (!t.adminKey) {
      throw new CliError(`no admin key for ${t.url}: set CITYGATE_ADMIN_KEY or run \`citygate gateways add ${t.url} --admin-key KEY\``);
    }
    headers.authorization = `Bearer ${t.adminKey}`;
  }
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new CliError(`cannot reach ${t.url} (${cause?.code ?? cause?.message ?? (e as Error).message}); check the URL and that the gateway is up`);
  }
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  if (!res.ok) {
    const err = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
    if (err?.code) {
      let hint = '';
      if (err.code === 'service_not_found') hint = ' (this gateway does not mount that service)';
      if (res.status === 401) hint = ' (the stored admin key is not valid for this gateway: re-register it with `citygate gateways add`)';
      throw new CliError(`${res.status} ${err.code}: ${err.message}${hint}`);
    }
    throw new CliError(`${method} ${path} failed with HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`);
  }
  if (parsed === null && text) throw new CliError(`${method} ${path} returned a non-JSON body: ${text.slice(0, 200)}`);
  return parsed as T;
}
