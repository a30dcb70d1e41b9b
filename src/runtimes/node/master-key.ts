// The master key of secrets at rest on Node: CITYGATE_MASTER_KEY, else a key generated on
// first boot into `<database>.master-key` (mode 0600) next to the database. Processes
// booting at once race on an atomic link: one process's key lands, the others read it.
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { generateMasterKey } from '../../kernel/secrets.ts';

export function nodeMasterKey(env: NodeJS.ProcessEnv, databasePath: string): { material: string; source: string } {
  if (env.CITYGATE_MASTER_KEY) return { material: env.CITYGATE_MASTER_KEY, source: 'CITYGATE_MASTER_KEY' };
  const file = `${databasePath}.master-key`;
  try {
    return { material: readFileSync(file, 'utf8').trim(), source: file };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  // Written whole to a private temporary file, then linked into place: link() fails if the
  // file exists, so exactly one process's key lands, and nobody ever reads a half-written file.
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, `${generateMasterKey()}\n`, { flag: 'wx', mode: 0o600 });
  try {
    linkSync(tmp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
  return { material: readFileSync(file, 'utf8').trim(), source: file };
}
