// The master key of secrets at rest on Node: CITYGATE_MASTER_KEY, else a key generated on
// first boot into `<database>.master-key` (mode 0600) next to the SQLite database. Processes
// booting at once race on an atomic link: one process's key lands, the others read it.
// On PostgreSQL (DATABASE_URL) there is no such file: replicas share one database but no
// disk, and a file a redeploy loses would take every sealed secret with it. There the key
// must be given, the same on every replica, or the process refuses to start.
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { generateMasterKey } from '../../kernel/secrets.ts';

export const MASTER_KEY_NEEDED =
  'DATABASE_URL is set but CITYGATE_MASTER_KEY is not. On PostgreSQL the master key that seals secrets at rest is not ' +
  'generated into a local file (replicas share no disk, and a redeploy would lose it with every sealed secret). ' +
  'Make one with `openssl rand -hex 32`, keep it in your secret store, and set the same CITYGATE_MASTER_KEY on every replica.';

export function nodeMasterKey(env: NodeJS.ProcessEnv, databasePath: string): { material: string; source: string } {
  if (env.CITYGATE_MASTER_KEY) return { material: env.CITYGATE_MASTER_KEY, source: 'CITYGATE_MASTER_KEY' };
  if (env.DATABASE_URL) throw new Error(MASTER_KEY_NEEDED);
  const file = `${databasePath}.master-key`;
  try {
    return { material: readFileSync(file, 'utf8').trim(), source: file };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  // Written whole to a private temporary file, then linked into place: link() fails if the
  // file exists, so exactly one process's key lands, and nobody ever reads a half-written file.
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  mkdirSync(dirname(file), { recursive: true }); // read before the database is opened (which makes the directory too)
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
