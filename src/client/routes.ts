// The HTTP method of every stock action, so `call(service, action, input)` knows how to send
// it. The type makes a missing or unknown action a compile error; a test checks the methods
// against the server's /openapi.json.
import type { ActionId, ServiceId } from './types.ts';

export type Method = 'GET' | 'POST';

export const METHODS = {
  env: { list: 'GET', upsert: 'POST', remove: 'POST', import: 'POST' },
  cities: { list: 'GET', current: 'GET', get: 'GET', create: 'POST', pause: 'POST', activate: 'POST', remove: 'POST', 'tokens/apply': 'POST', update: 'POST', 'tokens/revoke': 'POST', 'keys/rotate': 'POST', page: 'GET' },
  bureaus: { create: 'POST', list: 'GET', revoke: 'POST' },
  accounts: { providers: 'GET', login: 'POST', 'oauth/start': 'POST', 'oauth/callback': 'GET', 'oauth/result': 'GET', logout: 'POST', me: 'GET', users: 'GET', 'keys/create': 'POST', 'keys/list': 'POST', 'keys/update': 'POST', 'keys/revoke': 'POST' },
  balance: { me: 'GET', history: 'GET', list: 'GET', get: 'GET', ledger: 'GET', adjust: 'POST' },
  payment: {
    methods: 'GET',
    checkout: 'POST',
    'redirect/success': 'GET',
    'redirect/cancel': 'GET',
    'webhook/a': 'POST',
    'webhook/b': 'POST',
    'payments/me': 'GET',
    payments: 'GET',
    'payments/sync': 'POST',
    refunds: 'GET',
  },
  plans: {
    create: 'POST',
    update: 'POST',
    archive: 'POST',
    list: 'GET',
    assign: 'POST',
    me: 'GET',
    subscription: 'GET',
    subscribe: 'POST',
    change: 'POST',
    cancel: 'POST',
    resume: 'POST',
    portal: 'POST',
    'redirect/success': 'GET',
    'redirect/cancel': 'GET',
    'webhook/creem': 'POST',
    'webhook/stripe': 'POST',
  },
  usage: { me: 'GET', 'me/daily': 'GET', list: 'GET', export: 'GET', summary: 'GET', stats: 'GET', 'request-log': 'GET' },
  ai: {
    models: 'GET',
    text: 'POST',
    stream: 'POST',
    'chat/completions': 'POST',
    embeddings: 'POST',
    responses: 'POST',
    'responses/compact': 'POST',
    messages: 'POST',
    'messages/count_tokens': 'POST',
    'v1/messages': 'POST',
    'v1/messages/count_tokens': 'POST',
    'v1/models': 'GET',
    'v1beta/models': 'GET',
    'v1beta/models/*': 'POST',
    'v1/models/*': 'POST',
    'image/create': 'POST',
    'image/result': 'POST',
    video: 'POST',
    tts: 'POST',
    asr: 'POST',
    'files/*': 'GET',
    'upstreams/list': 'GET',
    'upstreams/create': 'POST',
    'upstreams/update': 'POST',
    'upstreams/remove': 'POST',
    'models/list': 'GET',
    'models/create': 'POST',
    'models/update': 'POST',
    'models/remove': 'POST',
  },
  webhooks: { create: 'POST', list: 'GET', update: 'POST', remove: 'POST', test: 'POST', deliveries: 'GET', redeliver: 'POST', alerts: 'GET', 'alerts/update': 'POST' },
  mcp: { '': 'POST', 'servers/create': 'POST', 'servers/list': 'GET', 'servers/update': 'POST', 'servers/remove': 'POST', 'servers/test': 'POST' },
} as const satisfies { [S in ServiceId]: { [A in ActionId<S>]: Method } } & { [S in ServiceId]: Record<string, Method> };

/** The method of an action; actions of services the client does not know default to POST. */
export function methodOf(service: string, action: string): Method {
  const s = (METHODS as Record<string, Record<string, Method>>)[service];
  return s?.[action] ?? 'POST';
}
