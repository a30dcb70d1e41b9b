// Keyset page cursors that carry a row's sort key: the key as JSON, base64url (UTF-8), opaque
// to callers. A list validates the decoded key's shape itself and says so in its own words.
import { base64url } from './crypto.ts';

export function encodeKeyCursor(key: readonly unknown[]): string {
  return base64url(new TextEncoder().encode(JSON.stringify(key)));
}

/** The key a cursor carries, or null when it is not one of ours (not base64url, not JSON, not an array). */
export function decodeKeyCursor(cursor: string): unknown[] | null {
  try {
    const bin = atob(cursor.replace(/-/g, '+').replace(/_/g, '/'));
    const key = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (ch) => ch.charCodeAt(0)))) as unknown;
    return Array.isArray(key) ? key : null;
  } catch {
    return null;
  }
}
