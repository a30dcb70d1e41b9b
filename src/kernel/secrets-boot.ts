// Boot step of secrets at rest: check the master key against the database, then seal what
// is still stored in clear (the forward migration). A wrong key stops the boot here, before
// anything is written.
import type { Db } from '../db/database.ts';
import type { Logger } from './log.ts';
import type { RuntimeEnv } from './runtime-env.ts';
import { SecretBox, checkMasterKey, checkNoSealedSecrets, sealStoredEnv, sealStoredUpstreamKeys } from './secrets.ts';

export async function secretsAtRest(db: Db, env: RuntimeEnv, master: { material: string; source: string } | null, log: Logger): Promise<SecretBox | null> {
  if (!master) {
    await checkNoSealedSecrets(db);
    log('warn', 'no master key (CITYGATE_MASTER_KEY): secrets in the env table and upstream API keys are stored in clear', {});
    env.useSecrets(null);
    return null;
  }
  const box = await SecretBox.fromMaterial(master.material);
  await checkMasterKey(db, box, master.source);
  env.useSecrets(box);
  // Upstream keys too: their table is part of every database's schema (migration 040), so the
  // kernel seals them whether or not the ai service is mounted in this process.
  const sealed = (await sealStoredEnv(db, box)) + (await sealStoredUpstreamKeys(db, box));
  if (sealed > 0) log('info', 'sealed secrets stored in clear', { count: sealed });
  return box;
}
