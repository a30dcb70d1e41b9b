// Secrets never leave in text the gateway relays from elsewhere (an upstream's error message,
// in JSON answers and in streams). Two nets: every secret value the gateway holds, matched
// exactly (registered by whoever holds them: the env's secret keys, the admin key, the master
// key, upstream keys), and anything shaped like a credential (`sk-…`, `Bearer …`, JWTs such as
// user tokens, citygate's admin and bureau keys and users' API keys (`cg_key_…`), Stripe, Google, GitHub, AWS, Slack keys,
// `api_key=…`). Used on error paths, and for request logs after their call: nothing here runs
// on the path of a successful call.

export const REDACTED = '[redacted]';

/** Who holds secrets: each source lists its current values (a gateway registers its own). */
const sources = new Set<() => Iterable<string | null | undefined>>();

export function addSecretSource(f: () => Iterable<string | null | undefined>): () => void {
  sources.add(f);
  return () => sources.delete(f);
}

const SHAPES: [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi, `$1 ${REDACTED}`],
  [/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, REDACTED], // JWT (user tokens)
  [/\bcg_(admin|bureau|key)_[A-Za-z0-9_-]+/g, REDACTED], // citygate's admin, bureau and users' API keys
  [/\b(sk|pk|rk)-[A-Za-z0-9_-]{6,}/g, REDACTED], // OpenAI, Anthropic (sk-ant-…), most compatible APIs
  [/\b(sk|rk|pk)_(live|test)_[A-Za-z0-9]{6,}/g, REDACTED], // Stripe
  [/\bwhsec_[A-Za-z0-9+/=]{6,}/g, REDACTED],
  [/\bAIza[0-9A-Za-z_-]{20,}/g, REDACTED], // Google
  [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, REDACTED], // GitHub
  [/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, REDACTED], // Slack
  [/\b(AKIA|ASIA)[0-9A-Z]{16}\b/g, REDACTED], // AWS
  [/\b((?:x-)?api[_-]?key|apikey|access[_-]?token|secret|password|passwd)(["']?\s*[:=]\s*["']?)[^\s"',;&]{6,}/gi, `$1$2${REDACTED}`],
];

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `text` with every secret the gateway holds, `extra` (e.g. the caller's own token) and every key-shaped string replaced. */
export function redactSecrets(text: string, extra: readonly (string | null | undefined)[] = []): string {
  return text ? secretRedactor(extra)(text) : text;
}

/** redactSecrets for many texts: the held secrets are read and compiled once (request logs). */
export function secretRedactor(extra: readonly (string | null | undefined)[] = []): (text: string) => string {
  const exact: string[] = [];
  for (const f of sources) for (const v of f()) if (typeof v === 'string' && v.length >= 8) exact.push(v);
  for (const v of extra) if (typeof v === 'string' && v.length >= 8) exact.push(v);
  exact.sort((a, b) => b.length - a.length); // a longer secret first, not its prefix
  const held = exact.length ? new RegExp(exact.map(escape).join('|'), 'g') : null;
  return (text) => {
    if (!text) return text;
    let out = held ? text.replace(held, REDACTED) : text;
    for (const [re, to] of SHAPES) out = out.replace(re, to);
    return out;
  };
}

/** Env keys whose values are secrets (the same rule that seals and masks them). */
export const isSecretKeyName = (key: string) => /(_KEY|_SECRET|_TOKEN|_PASSWORD)$/.test(key) || key === 'CITYGATE_MASTER_KEY';
