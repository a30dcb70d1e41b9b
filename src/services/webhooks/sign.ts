// Standard Webhooks signatures (https://www.standardwebhooks.com), with WebCrypto so Node and
// Workers sign alike: HMAC-SHA256 over `${id}.${timestamp}.${body}` keyed by the secret's
// bytes (base64 after `whsec_`), sent as `webhook-signature: v1,<base64>`. A receiver verifies
// with the `standardwebhooks` package in one call (docs/webhooks.md).
const enc = new TextEncoder();

const toB64 = (b: Uint8Array): string => btoa(String.fromCharCode(...b));

function fromB64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** A fresh signing secret: `whsec_` and 32 random bytes in base64. */
export function newSecret(): string {
  return `whsec_${toB64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

const keys = new Map<string, Promise<CryptoKey>>();

function keyOf(secret: string): Promise<CryptoKey> {
  let k = keys.get(secret);
  if (!k) {
    if (keys.size > 1000) keys.clear();
    k = crypto.subtle.importKey('raw', fromB64(secret.replace(/^whsec_/, '')), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    keys.set(secret, k);
  }
  return k;
}

/** The three headers of one delivery attempt. */
export async function signatureHeaders(secret: string, id: string, body: string, at = Date.now()): Promise<Record<string, string>> {
  const timestamp = String(Math.floor(at / 1000));
  const mac = await crypto.subtle.sign('HMAC', await keyOf(secret), enc.encode(`${id}.${timestamp}.${body}`));
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${toB64(new Uint8Array(mac))}` };
}
