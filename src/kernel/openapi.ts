// The OpenAPI 3.1 document, generated from the mounted services' action registry so it can
// never drift from what the server accepts: the same zod schemas validate requests.
import { z } from 'zod';
import type { IdentityKind } from './identity.ts';
import type { AnyAction, ServiceDef } from './service.ts';

type JsonSchema = Record<string, unknown>;

const ERROR_REF = { $ref: '#/components/schemas/Error' };
const errorResponse = (description: string) => ({ description, content: { 'application/json': { schema: ERROR_REF } } });

const SECURITY: Record<Exclude<IdentityKind, 'guest'>, string> = {
  user: 'userToken',
  admin: 'adminKey',
  bureau: 'bureauToken',
};

function toSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const s = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;
  delete s.$schema;
  return s;
}

const ERROR_TEXT: Record<number, string> = {
  400: 'Invalid input (`param` names the field)',
  401: 'No or bad credential',
  402: 'Insufficient credits',
  403: 'Identity not allowed, city mismatch or paused city',
  404: 'Unknown route or resource',
  405: 'Wrong method (see `Allow`)',
  409: 'Conflict',
  410: 'Gone (already handed out)',
  413: 'Body too large',
  429: 'Rate limited (upstream)',
  502: 'Upstream failure',
  504: 'Upstream timeout',
};

function successContent(action: AnyAction): Record<string, unknown> {
  const json = { schema: action.output ? toSchema(action.output, 'output') : { type: 'object' } };
  if (!action.produces?.length) return { 'application/json': json };
  const out: Record<string, unknown> = {};
  for (const type of action.produces) {
    out[type] =
      type === 'application/json'
        ? json
        : type === 'text/event-stream' || type.startsWith('text/')
          ? { schema: { type: 'string' } }
          : { schema: { type: 'string', contentMediaType: type } };
  }
  return out;
}

function operation(service: ServiceDef, id: string, action: AnyAction) {
  const auth = action.auth ?? ['user'];
  const input = action.input ?? z.object({});
  const schema = action.body === 'raw' ? null : toSchema(input, 'input');
  const statuses = new Set([400, 404, 405, ...(auth.length ? [401, 403] : []), ...(action.method === 'POST' ? [413] : []), ...(action.errors ?? [])]);
  const op: Record<string, unknown> = {
    operationId: `${service.id}.${id.replace(/\/\*$/, '').replace(/\//g, '.')}`,
    tags: [service.id],
    summary: action.summary ?? `${service.id}/${id}`,
    ...(action.description ? { description: action.description } : {}),
    'x-citygate-identities': auth.length ? auth : ['guest', 'user', 'bureau', 'admin'],
    security: auth.length
      ? auth.filter((k): k is Exclude<IdentityKind, 'guest'> => k !== 'guest').map((k) => ({ [SECURITY[k]]: [] }))
      : [{}],
    responses: {
      200: { description: 'Success', content: successContent(action) },
      ...Object.fromEntries([...statuses].sort().map((st) => [st, errorResponse(ERROR_TEXT[st] ?? 'Error')])),
    },
  };
  if (action.method === 'GET' && schema) {
    const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((schema.required as string[] | undefined) ?? []);
    op.parameters = Object.entries(props).map(([name, s]) => ({ name, in: 'query', required: required.has(name), schema: s }));
  } else if (action.method === 'POST') {
    if (schema) op.requestBody = { required: true, content: { 'application/json': { schema } } };
    else if (action.bodySchema) {
      op.requestBody = {
        required: true,
        content: {
          'application/json': { schema: toSchema(action.bodySchema, 'input') },
          'multipart/form-data': { schema: { type: 'object', properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } } } },
        },
      };
    } else op.requestBody = { required: true, content: { 'application/octet-stream': { schema: {} } } };
  }
  if (id.endsWith('/*')) op.parameters = [...((op.parameters as unknown[]) ?? []), { name: 'path', in: 'path', required: true, schema: { type: 'string' } }];
  return op;
}

export function openApiDocument(services: Iterable<ServiceDef>, info: { title: string; version: string }) {
  const paths: Record<string, Record<string, unknown>> = {
    '/health': {
      get: {
        operationId: 'health',
        summary: 'Health check: the mounted services',
        security: [{}],
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Health' } } } } },
      },
    },
    '/v1/services': {
      get: {
        operationId: 'services',
        summary: 'Mounted services and their env requirements (configured flags for the admin)',
        security: [{}, { adminKey: [] }],
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
    '/.well-known/jwks.json': {
      get: { operationId: 'jwks', summary: 'Public keys that sign user tokens', security: [{}], responses: { 200: { description: 'JWKS' } } },
    },
  };
  const tags: { name: string; description?: string }[] = [];
  for (const s of services) {
    tags.push({ name: s.id, description: s.description ?? s.name });
    for (const [id, action] of Object.entries(s.actions)) {
      const path = id === '' ? `/v1/${s.id}` : `/v1/${s.id}/${id.endsWith('/*') ? `${id.slice(0, -2)}/{path}` : id}`;
      const op = operation(s, id, action);
      // further methods (ActionDef.methods) first, the action's own last
      paths[path] = Object.fromEntries([...(action.methods ?? []).map((m) => [m.toLowerCase(), { ...op, operationId: `${op.operationId}_${m.toLowerCase()}` }]), [action.method.toLowerCase(), op]]);
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: info.title, version: info.version, description: 'citygate: one AI gateway for many products (cities).' },
    tags,
    paths,
    components: {
      securitySchemes: {
        userToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'A user token bound to one city, or a user API key (cg_key_…, accounts/keys/create), which acts as its user; either may also be sent as x-api-key or x-goog-api-key',
        },
        bureauToken: { type: 'http', scheme: 'bearer', description: 'A city’s trusted backend (cg_bureau_…)' },
        adminKey: { type: 'http', scheme: 'bearer', description: 'GATEWAY_ADMIN_SECRET_KEY (cg_admin_…)' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['type', 'code', 'message'],
              properties: { type: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' }, param: { type: 'string' } },
            },
          },
        },
        Health: {
          type: 'object',
          required: ['ok', 'services'],
          properties: { ok: { type: 'boolean' }, services: { type: 'array', items: { type: 'string' } } },
        },
      },
    },
  };
}
