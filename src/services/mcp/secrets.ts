// Upstream credentials this process holds in clear (static header values, OAuth client secrets
// and the access tokens obtained with them): registered with the kernel's redaction, so no
// upstream error, log line or request log that passes through redactSecrets can carry them.
import { addSecretSource, redactSecrets } from '../../kernel/redact.ts';

const held = new Set<string>();
let registered = false;

export function heldSecret(value: string | undefined | null): void {
  if (!value || value.length < 8) return;
  if (held.size > 10_000) held.clear();
  held.add(value);
  if (!registered) {
    registered = true;
    addSecretSource(() => held);
  }
}

/** Text from an upstream (an error message) with every held secret and key-shaped string removed. */
export function scrub(text: string): string {
  return redactSecrets(text);
}
