// The answer to an error no action turned into a GatewayError: a lost database is a 503 with
// Retry-After (logged once per outage, database-outage.ts); anything else is a bug, a 500
// logged with its stack.
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { unavailable, type DatabaseOutage } from '../database-outage.ts';
import { GatewayError, isGatewayError } from '../errors.ts';
import type { Logger } from '../log.ts';

/** The answer to what was thrown, when it is a known kind: a GatewayError as is, the database gone as 503; else null (a 500). */
export function knownAnswer(err: unknown): GatewayError | null {
  if (isGatewayError(err)) return err;
  return isDatabaseUnavailable(err) ? unavailable() : null;
}

/** knownAnswer, a lost database also noted in the outage's log and count: for the answer a caller gets. */
export function knownError(err: unknown, outage: DatabaseOutage): GatewayError | null {
  if (!isGatewayError(err) && isDatabaseUnavailable(err)) return outage.refuse(err);
  return knownAnswer(err);
}

export function errorResponse(err: unknown, url: string, log: Logger, outage: DatabaseOutage): Response {
  const known = knownError(err, outage);
  if (known) return known.toResponse();
  log('error', 'unhandled error', { route: new URL(url).pathname, error: String(err), stack: (err as Error).stack });
  return new GatewayError(500, 'internal_error', 'An internal error occurred.').toResponse();
}
