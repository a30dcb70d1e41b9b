// webhooks: a city's backend subscribes endpoints to events (payments, balances, budgets,
// users, the city itself; the operator's endpoints to upstream circuits too) and receives them
// signed (Standard Webhooks), at least once, in order per user and event type. Events are
// written by the changes themselves (events.ts, the outbox); delivery runs on the job queue
// (deliver.ts). See docs/webhooks.md.
import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { badRequest, forbidden } from '../../kernel/errors.ts';
import { checkUrl, outboundRules, UnreadableUrl } from '../../kernel/outbound/policy.ts';
import { action, defineService } from '../../kernel/service.ts';
import { cityIdSchema, requireCity } from '../cities/index.ts';
import { deliverEndpoint } from './deliver.ts';
import { dispatchSoon, startPoller, stopPoller } from './dispatch.ts';
import { CITY_EVENTS, EVENT_TYPES, newEventId, OPERATOR } from './events.ts';
import { newSecret } from './sign.ts';
import { listEndpoints, sealSecret, type EndpointRow } from './store.ts';
import { endpointFor, scopedCity } from './scope.ts';
import { alertActions } from './alerts.ts';
import { deliveryActions } from './deliveries.ts';

export { eventStatement, balanceLowStatements, budgetReachedStatements } from './events.ts';
export { dispatchSoon } from './dispatch.ts';

const eventsSchema = z
  .array(z.enum([...EVENT_TYPES, '*']))
  .min(1)
  .max(EVENT_TYPES.length + 1)
  .describe("event types to receive; ['*']: all");
const urlSchema = z.string().trim().min(1).max(2000).describe('where events are POSTed (http or https)');
const endpointCitySchema = z.union([cityIdSchema, z.literal(OPERATOR)]).describe("the city; '*' for the operator's endpoint (admin only)");

export const endpointSchema = z.object({
  endpoint_id: z.string(),
  city_id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string(),
  enabled: z.boolean(),
  disabled_reason: z.string().nullable(),
  failing_since: z.iso.datetime().nullable(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

export function toEndpoint(r: EndpointRow) {
  return {
    endpoint_id: r.endpoint_id,
    city_id: r.city_id,
    url: r.url,
    events: JSON.parse(r.events) as string[],
    description: r.description,
    enabled: r.enabled === 1,
    disabled_reason: r.disabled_reason,
    failing_since: r.failing_since === null ? null : new Date(Number(r.failing_since)).toISOString(),
    created_at: new Date(Number(r.created_at)).toISOString(),
    updated_at: new Date(Number(r.updated_at)).toISOString(),
  };
}

/** The URL as the outbound policy judges it before any connection; a 400 otherwise. */
function checkEndpointUrl(gw: GatewayContext, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('invalid_url', 'url is not a URL.', 'url');
  }
  try {
    checkUrl(url, outboundRules(gw.env));
  } catch (e) {
    if (e instanceof UnreadableUrl) throw badRequest('url_refused', `url is refused: ${e.message} (an operator can allow private addresses with AI_FETCH_ALLOW_PRIVATE).`, 'url');
    throw e;
  }
  if (url.username || url.password) throw badRequest('invalid_url', 'url must not carry credentials.', 'url');
  return url.href;
}

function checkEvents(city: string, events: string[]): string[] {
  if (city !== OPERATOR) {
    const bad = events.filter((e) => e !== '*' && e !== 'webhook.test' && !(CITY_EVENTS as readonly string[]).includes(e));
    if (bad.length) throw badRequest('invalid_events', `A city's endpoint cannot receive ${bad.join(', ')} (events for the operator's endpoints, city_id '*').`, 'events');
  }
  return [...new Set(events)];
}

export const webhooksService = defineService({
  id: 'webhooks',
  name: 'Webhooks',
  description: "Signed events (Standard Webhooks) to a city's backend: payments, balance and budget alerts, users, city status; upstream circuits to the operator.",
  env: [
    { key: 'WEBHOOK_RETRY_BASE_MS', description: 'First retry delay; doubles per attempt, at most 1 h apart (default 5000).', required: false },
    { key: 'WEBHOOK_RETRY_FOR_MS', description: 'How long a message is retried before it is given up (default 259200000: 3 days).', required: false },
    { key: 'WEBHOOK_TIMEOUT_MS', description: 'Time limit of one delivery attempt (default 15000).', required: false },
    { key: 'WEBHOOK_POLL_MS', description: 'Node: how often a process looks for due messages (default 1000).', required: false },
    { key: 'WEBHOOK_RETENTION_DAYS', description: 'Delivered and given-up messages and their attempts are kept this long (default 30).', required: false },
  ],
  init(gw) {
    if (gw.config.gracefulStop) startPoller(gw);
    else gw.waitUntil(dispatchSoon(gw));
  },
  stop(gw) {
    stopPoller(gw);
  },
  jobs: {
    deliver: (msg, gw) => deliverEndpoint(gw, msg.id),
    dispatch: async (_msg, gw) => {
      const { dispatchDue } = await import('./dispatch.ts');
      await dispatchDue(gw);
    },
  },
  actions: {
    create: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Register an endpoint; the answer shows its signing secret, once',
      input: z.object({ city_id: endpointCitySchema.optional(), url: urlSchema, events: eventsSchema, description: z.string().max(500).default('') }),
      output: endpointSchema.extend({ secret: z.string().describe('whsec_…: shown only now; verify signatures with it') }),
      handler: async ({ gateway, identity, input }) => {
        const city = scopedCity(identity, input.city_id);
        if (!city) throw badRequest('missing_city', 'city_id is required (a city, or * for the operator).', 'city_id');
        if (city === OPERATOR && identity.kind !== 'admin') throw forbidden('admin_only', "Only the admin registers the operator's endpoints.");
        if (city !== OPERATOR) await requireCity(gateway, city, identity);
        const url = checkEndpointUrl(gateway, input.url);
        const events = checkEvents(city, input.events);
        const id = newId('we', 12);
        const secret = newSecret();
        const at = Date.now();
        const row: EndpointRow = {
          endpoint_id: id,
          city_id: city,
          url,
          events: JSON.stringify(events),
          description: input.description,
          secret: await sealSecret(gateway, id, secret),
          enabled: 1,
          disabled_reason: null,
          failing_since: null,
          created_at: at,
          updated_at: at,
        };
        await gateway.db.kysely.insertInto('webhook_endpoints').values(row).execute();
        return { ...toEndpoint(row), secret };
      },
    }),
    list: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: "A city's endpoints (a bureau sees only its own city's; no secrets)",
      input: z.object({ city_id: endpointCitySchema.optional() }),
      output: z.object({ items: z.array(endpointSchema) }),
      handler: async ({ gateway, identity, input }) => ({ items: (await listEndpoints(gateway, scopedCity(identity, input.city_id))).map(toEndpoint) }),
    }),
    update: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Change an endpoint: url, events, description; enable it again; rotate its secret',
      input: z.object({
        endpoint_id: z.string().min(1).max(100),
        url: urlSchema.optional(),
        events: eventsSchema.optional(),
        description: z.string().max(500).optional(),
        enabled: z.boolean().optional(),
        rotate_secret: z.boolean().optional().describe('a new secret, shown in this answer only'),
      }),
      output: endpointSchema.extend({ secret: z.string().optional() }),
      handler: async ({ gateway, identity, input }) => {
        const ep = await endpointFor(gateway, identity, input.endpoint_id);
        const at = Date.now();
        const set: Partial<EndpointRow> = { updated_at: at };
        if (input.url !== undefined) set.url = checkEndpointUrl(gateway, input.url);
        if (input.events !== undefined) set.events = JSON.stringify(checkEvents(ep.city_id, input.events));
        if (input.description !== undefined) set.description = input.description;
        if (input.enabled !== undefined) {
          set.enabled = input.enabled ? 1 : 0;
          if (input.enabled) Object.assign(set, { disabled_reason: null, failing_since: null });
          else set.disabled_reason = 'disabled by the API';
        }
        let secret: string | undefined;
        if (input.rotate_secret) {
          secret = newSecret();
          set.secret = await sealSecret(gateway, ep.endpoint_id, secret);
        }
        await gateway.db.kysely.updateTable('webhook_endpoints').set(set).where('endpoint_id', '=', ep.endpoint_id).execute();
        if (input.enabled) gateway.waitUntil(dispatchSoon(gateway));
        return { ...toEndpoint({ ...ep, ...set }), ...(secret ? { secret } : {}) };
      },
    }),
    remove: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Remove an endpoint and its undelivered messages',
      input: z.object({ endpoint_id: z.string().min(1).max(100) }),
      handler: async ({ gateway, identity, input }) => {
        const ep = await endpointFor(gateway, identity, input.endpoint_id);
        const db = gateway.db;
        await db.batch([
          db.kysely.deleteFrom('webhook_endpoints').where('endpoint_id', '=', ep.endpoint_id),
          db.kysely.deleteFrom('webhook_messages').where('endpoint_id', '=', ep.endpoint_id).where('status', '=', 'pending'),
        ]);
        return { endpoint_id: ep.endpoint_id, removed: true };
      },
    }),
    test: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Send a webhook.test event to one endpoint (delivered like any other)',
      input: z.object({ endpoint_id: z.string().min(1).max(100) }),
      output: z.object({ event_id: z.string() }),
      handler: async ({ gateway, identity, input }) => {
        const ep = await endpointFor(gateway, identity, input.endpoint_id);
        const at = Date.now();
        const eventId = newEventId();
        await gateway.db.kysely
          .insertInto('webhook_messages')
          .values({
            event_id: eventId,
            endpoint_id: ep.endpoint_id,
            city_id: ep.city_id === OPERATOR ? null : ep.city_id,
            user_id: null,
            type: 'webhook.test',
            data: JSON.stringify({ endpoint_id: ep.endpoint_id, message: 'A test event from citygate.' }),
            status: 'pending',
            attempts: 0,
            next_at: at,
            locked_until: null,
            last_status: null,
            delivered_at: null,
            created_at: at,
          })
          .execute();
        await gateway.jobs.enqueue({ service: 'webhooks', type: 'deliver', id: ep.endpoint_id });
        return { event_id: eventId };
      },
    }),
    ...deliveryActions,
    ...alertActions,
  },
});
