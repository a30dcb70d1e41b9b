// Whether an error means "the database cannot be reached now" (a restart, a failover, a
// network cut) rather than a bug or a bad statement: such calls answer 503 with Retry-After,
// and the pool reconnects by itself once the server is back.

/** Socket errors, PostgreSQL's connection and shutdown SQLSTATEs (class 08, 57P0x), too many connections. */
const CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006', '53300',
]);

/**
 * What `pg` and D1 say when the connection is gone (they carry no code). D1's are the messages
 * Cloudflare documents for a database that is briefly unavailable (a lost connection, a reset
 * storage object, an overload) and a locked database file (SQLITE_BUSY: another writer holds it),
 * and workerd's "internal error; reference = …" inside a D1_ERROR: a transient failure of D1's
 * infrastructure (seen when D1 could not read its session commit token from a locked file).
 */
const MESSAGES =
  /Connection terminated|connection error|Connection timeout|timeout exceeded when trying to connect|Client was closed and is not queryable|D1_ERROR: (Network connection lost|.*(storage operation|caused object to be reset|overloaded|SQLITE_BUSY|internal error))|Network connection lost/i;

/** node:sqlite's SQLITE_BUSY: another process held the file's write lock past the busy timeout. */
const SQLITE_BUSY = 5;

export function isDatabaseUnavailable(e: unknown): boolean {
  for (let x: any = e, i = 0; x && i < 4; x = x.cause, i++) {
    if (typeof x.code === 'string' && CODES.has(x.code)) return true;
    if (x.code === 'ERR_SQLITE_ERROR' && (x.errcode & 0xff) === SQLITE_BUSY) return true;
    if (typeof x.message === 'string' && MESSAGES.test(x.message)) return true;
  }
  return false;
}
