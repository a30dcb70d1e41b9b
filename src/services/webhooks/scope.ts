// Who may manage which endpoints: the admin any city's (and the operator's, city '*'); a
// bureau its own city's only.
import type { GatewayContext } from '../../kernel/context.ts';
import { forbidden, notFound } from '../../kernel/errors.ts';
import { boundCity, type Identity } from '../../kernel/identity.ts';
import { getEndpoint, type EndpointRow } from './store.ts';

/** The city an admin or bureau acts on: a bureau only its own, never the operator's. */
export function scopedCity(identity: Identity, cityId: string | undefined): string | undefined {
  const bound = boundCity(identity);
  if (bound && cityId !== undefined && cityId !== bound) throw forbidden('city_mismatch', 'This credential is bound to another city.');
  return bound ?? cityId;
}

/** An endpoint the caller may manage, or 404 (a bureau does not learn of other cities' endpoints). */
export async function endpointFor(gw: GatewayContext, identity: Identity, endpointId: string): Promise<EndpointRow> {
  const ep = await getEndpoint(gw, endpointId);
  const bound = boundCity(identity);
  if (!ep || (bound && ep.city_id !== bound)) throw notFound('endpoint_not_found', `No webhook endpoint '${endpointId}'.`, 'endpoint_id');
  return ep;
}

