// The secret values a gateway holds in its configuration (for redact.ts): the env table's and the
// process environment's secret keys (upstream keys, the admin key, webhook and OAuth secrets …)
// and the master key. Read on error paths only.
import { isSecretKeyName } from './redact.ts';
import type { RuntimeEnv } from './runtime-env.ts';

export function* heldSecrets(env: RuntimeEnv, masterKey: string | undefined): Iterable<string | undefined> {
  yield masterKey;
  for (const e of env.entries()) if (isSecretKeyName(e.key)) yield e.value;
  for (const k in env.processEnv) if (isSecretKeyName(k)) yield env.processEnv[k];
}
