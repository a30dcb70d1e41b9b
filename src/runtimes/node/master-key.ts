// The master key of secrets at rest on Node: CITYGATE_MASTER_KEY, else a key generated on
// first boot into `<database>.master-key` (mode 0600) next to the database. Processes
// booting at once race on an exclusive create: one writes the file, the others read it.
import { readFileSync, writeFileSync } from 'node:fs';
import { generateMasterKey } from '../../kernel/secrets.ts';

export function nodeMasterKey(env: NodeJS.ProcessEnv, databasePath: string): { material: string; source: string } {
  if (env.CITYGATE_MASTER_KEY) return { material: env.CITYGATE_MASTER_KEY, source: 'CITYGATE_MASTER_KEY' };
  const file = `${databasePath}.master-key`;
  try {
    return { material: readFileSync(file, 'utf8').trim(), source: file };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  try {
    writeFileSync(file, `${generateMasterKey()}\n`, { flag: 'wx', mode: 0o600 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return { material: readFileSync(file, 'utf8').trim(), source: file };
}
