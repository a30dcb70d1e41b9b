// citygate/client: a typed client for products (a user token, or none for a guest) and for
// trusted backends (a bureau token or the admin key). Web APIs only: it runs in browsers,
// Node and Workers. Types come from the server's own action schemas (./types.ts).
import { CitygateError } from './error.ts';
import type { Method } from './routes.ts';
import { parseJsonEvents, Transport, type FetchLike, type RequestOptions } from './transport.ts';
import type { ActionId, AsrInput, Input, LoginResult, Output, ServiceId, UIMessageChunk } from './types.ts';

export { CitygateError, isCitygateError } from './error.ts';
export { METHODS, methodOf, type Method } from './routes.ts';
export { parseJsonEvents, type FetchLike, type RequestOptions } from './transport.ts';
export type * from './types.ts';

export interface ClientOptions {
  /** The gateway's base URL, e.g. `https://gateway.example.com`. */
  baseURL: string;
  /** A user token (or a function answering the current one); omit to call as a guest. */
  token?: string | (() => string | undefined | Promise<string | undefined>);
  /** A fetch implementation (default: the global fetch). */
  fetch?: FetchLike;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

export interface OAuthLoginOptions {
  /** Called with the provider's sign-in URL: open it (a popup, a new tab, a redirect, a QR code). */
  open?: (url: string) => void | Promise<void>;
  /** Poll interval, ms (default 1500). */
  intervalMs?: number;
  /** Give up after this long, ms (default 10 minutes, the gateway's state lifetime). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Make the new token the client's credential once signed in (default true). */
  useToken?: boolean;
}

type Opt<T> = {} extends T ? [input?: T, opts?: RequestOptions] : [input: T, opts?: RequestOptions];
type Done = Extract<LoginResult, { status: 'done' }>;

/** A generic, typed call of any stock action (and an untyped one of any other). */
export interface Call {
  <S extends ServiceId, A extends ActionId<S>>(service: S, action: A, ...args: Opt<Input<S, A>>): Promise<Output<S, A>>;
  <T = unknown>(service: string, action: string, input?: unknown, opts?: RequestOptions & { method?: Method }): Promise<T>;
}

function makeCall(t: Transport): Call {
  return ((service: string, action: string, input?: unknown, opts?: RequestOptions) => t.json(service, action, input, opts)) as Call;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

function toBlobPart(a: Blob | Uint8Array | ArrayBuffer): Blob {
  return a instanceof Blob ? a : new Blob([a as BlobPart]);
}

/** The client for a product: the user-side actions, with the user's token (or as a guest). */
export function createClient(opts: ClientOptions) {
  const t = new Transport(opts);
  const j = <S extends ServiceId, A extends ActionId<S>>(service: S, action: A) =>
    (...[input, o]: Opt<Input<S, A>>): Promise<Output<S, A>> => t.json(service, action, input, o);

  const accounts = {
    /** The login methods enabled now, and the OAuth callback URL to register. */
    providers: j('accounts', 'providers'),
    /** Credential-free local login (development gateways only). */
    login: j('accounts', 'login'),
    /** Starts an OAuth login: `{ state, url }`; send the user to `url`, then poll `oauthResult`. */
    oauthStart: j('accounts', 'oauth/start'),
    /** One poll of a login: pending, done (the token, handed out once) or failed. */
    oauthResult: (state: string, o?: RequestOptions) => t.json<LoginResult>('accounts', 'oauth/result', { state }, o),
    /**
     * The whole OAuth login: starts it, hands the provider URL to `open`, polls until the user
     * has signed in and answers the token (and, by default, makes it the client's credential).
     * A refused or failed login throws CitygateError (`code`: the reason, e.g. `access_denied`).
     */
    async oauthLogin(input: Input<'accounts', 'oauth/start'>, o: OAuthLoginOptions = {}): Promise<Done> {
      const started = await t.json<Output<'accounts', 'oauth/start'>>('accounts', 'oauth/start', input, { signal: o.signal });
      await o.open?.(started.url);
      const deadline = Date.now() + (o.timeoutMs ?? 10 * 60_000);
      for (;;) {
        await sleep(o.intervalMs ?? 1500, o.signal);
        const r = await t.json<LoginResult>('accounts', 'oauth/result', { state: started.state }, { signal: o.signal });
        if (r.status === 'done') {
          if (o.useToken !== false) t.setToken(r.user_token);
          return r;
        }
        if (r.status === 'failed') throw new CitygateError(401, { type: 'authentication_error', code: r.error, message: r.message });
        if (Date.now() > deadline) throw new CitygateError(408, { type: 'authentication_error', code: 'login_timeout', message: 'The sign-in was not completed in time.' });
      }
    },
    /** The signed-in user's profile. */
    me: j('accounts', 'me'),
    /**
     * The user's own API keys (needs a login token: a key cannot manage keys). `create` answers
     * `{ key, secret }`: the secret (`cg_key_…`) is shown this once.
     */
    keys: {
      create: j('accounts', 'keys/create'),
      list: j('accounts', 'keys/list'),
      update: j('accounts', 'keys/update'),
      revoke: j('accounts', 'keys/revoke'),
    },
  };

  const ai = {
    /** The models this user may call now. */
    models: j('ai', 'models'),
    /** One assistant message (`{ id, role, parts, metadata }`). */
    text: j('ai', 'text'),
    /**
     * A streamed assistant message: the AI SDK's UI message chunks, ready for
     * `readUIMessageStream({ stream })`. (`useChat` users: DefaultChatTransport, see the README.)
     */
    async stream(input: Input<'ai', 'stream'>, o?: RequestOptions): Promise<ReadableStream<UIMessageChunk>> {
      const res = await t.send('ai', 'stream', input, { ...o, headers: { accept: 'text/event-stream', ...o?.headers } });
      return parseJsonEvents<UIMessageChunk>(res.body!);
    },
    /** Starts an image job: `{ job_id, status }`. */
    imageCreate: j('ai', 'image/create'),
    /** Polls an image job: `{ status, images?: [{ url, media_type }], error? }`. */
    imageResult: j('ai', 'image/result'),
    /** Starts a video job (`{ model, prompt }`) or polls one (`{ job_id }`). */
    video: j('ai', 'video'),
    /** Text to speech: the audio as a Blob (its `type` is the audio media type). */
    async tts(input: Input<'ai', 'tts'>, o?: RequestOptions): Promise<Blob> {
      const res = await t.send('ai', 'tts', input, { ...o, headers: { accept: 'audio/*', ...o?.headers } });
      return res.blob();
    },
    /** Speech recognition: audio bytes (sent as multipart), a base64 string, or an https `url`. */
    async asr(input: AsrInput, o?: RequestOptions): Promise<Output<'ai', 'asr'>> {
      const { audio, ...rest } = input;
      if (audio === undefined || typeof audio === 'string') return t.json('ai', 'asr', input, o);
      const form = new FormData();
      for (const [k, v] of Object.entries(rest)) if (v !== undefined) form.append(k, String(v));
      form.append('file', toBlobPart(audio), 'audio');
      return t.json('ai', 'asr', form, o);
    },
    /** Options for the `openai` package (or any OpenAI client): `new OpenAI(client.ai.openaiOptions())`. */
    async openaiOptions(): Promise<{ baseURL: string; apiKey: string }> {
      return { baseURL: `${t.baseURL}/v1/ai`, apiKey: (await t.token()) ?? '' };
    },
  };

  return {
    baseURL: t.baseURL,
    /** Replaces the credential (e.g. after a login). */
    setToken: (token: ClientOptions['token']) => t.setToken(token),
    /** `GET /health`: `{ ok, services }`. */
    health: () => t.get<{ ok: boolean; services: string[] }>('/health'),
    /** `GET /v1/services`: the mounted services and their env requirements. */
    services: () => t.get<{ items: { id: string; name: string; env: { key: string; description: string; required: boolean }[] }[] }>('/v1/services'),
    ai,
    accounts,
    balance: {
      /** The user's balance: `{ credits, usd }`. */
      me: j('balance', 'me'),
      /** The user's ledger, newest first. */
      history: j('balance', 'history'),
    },
    payment: {
      /** Payment methods and whether they are enabled. */
      methods: j('payment', 'methods'),
      /** Starts a top-up: `{ payment_id, checkout_url, … }`; send the user to `checkout_url`. */
      checkout: j('payment', 'checkout'),
      /** The user's payments, newest first. */
      payments: j('payment', 'payments/me'),
    },
    plans: {
      /** The plans of the user's city, in their order. */
      list: j('plans', 'list'),
      /** The user's plan: status, period, and each window's used, limit and reset (`subscription: null` without one). */
      me: j('plans', 'me'),
      /** Starts a subscription: `{ subscription_id, checkout_url }`; send the user to `checkout_url`. */
      subscribe: j('plans', 'subscribe'),
      /** Moves to another plan (Stripe prorates). */
      change: j('plans', 'change'),
      /** Cancels at the period's end; `resume` undoes it. */
      cancel: j('plans', 'cancel'),
      resume: j('plans', 'resume'),
      /** `{ url }` of Stripe's customer portal. */
      portal: j('plans', 'portal'),
    },
    usage: {
      /** The user's usage records, newest first. */
      me: j('usage', 'me'),
    },
    cities: {
      /** The city the token is bound to. */
      current: j('cities', 'current'),
    },
    /** Any action: `call('ai', 'text', { model, prompt })`. */
    call: makeCall(t),
  };
}

export type CitygateClient = ReturnType<typeof createClient>;

export type AdminClientOptions = Omit<ClientOptions, 'token'> & ({ adminKey: string; bureauToken?: never } | { bureauToken: string; adminKey?: never });

/**
 * The client for a trusted backend: the admin key (everything) or a city's bureau token (its
 * own city: list it, issue user tokens, users, balances, payments, usage).
 */
export function createAdminClient(opts: AdminClientOptions) {
  const token = 'adminKey' in opts && opts.adminKey ? opts.adminKey : (opts as { bureauToken: string }).bureauToken;
  if (!token) throw new TypeError('citygate admin client: adminKey or bureauToken is required');
  const t = new Transport({ ...opts, token });
  const j = <S extends ServiceId, A extends ActionId<S>>(service: S, action: A) =>
    (...[input, o]: Opt<Input<S, A>>): Promise<Output<S, A>> => t.json(service, action, input, o);
  return {
    baseURL: t.baseURL,
    health: () => t.get<{ ok: boolean; services: string[] }>('/health'),
    cities: {
      list: j('cities', 'list'),
      get: j('cities', 'get'),
      create: j('cities', 'create'),
      pause: j('cities', 'pause'),
      activate: j('cities', 'activate'),
      remove: j('cities', 'remove'),
    },
    tokens: {
      /** Issues a user token bound to one city and one user. */
      apply: j('cities', 'tokens/apply'),
    },
    env: {
      list: j('env', 'list'),
      upsert: j('env', 'upsert'),
      remove: j('env', 'remove'),
      /** Imports a `.env` file's content, all or nothing. */
      import: j('env', 'import'),
    },
    bureaus: {
      create: j('bureaus', 'create'),
      list: j('bureaus', 'list'),
      revoke: j('bureaus', 'revoke'),
    },
    accounts: {
      users: j('accounts', 'users'),
      /** Users' API keys: a bureau names `user_id`, the admin `city_id` and `user_id`. */
      keys: {
        create: j('accounts', 'keys/create'),
        list: j('accounts', 'keys/list'),
        update: j('accounts', 'keys/update'),
        revoke: j('accounts', 'keys/revoke'),
      },
    },
    balance: {
      list: j('balance', 'list'),
      get: j('balance', 'get'),
      ledger: j('balance', 'ledger'),
      adjust: j('balance', 'adjust'),
    },
    payments: {
      list: j('payment', 'payments'),
      sync: j('payment', 'payments/sync'),
    },
    plans: {
      create: j('plans', 'create'),
      update: j('plans', 'update'),
      archive: j('plans', 'archive'),
      list: j('plans', 'list'),
      /** Gives a user a plan without payment (one period). */
      assign: j('plans', 'assign'),
      /** A user's plan and windows. */
      subscription: j('plans', 'subscription'),
    },
    usage: {
      list: j('usage', 'list'),
      /** Usage records as a stream of NDJSON or CSV bytes (oldest first), read as they arrive. */
      async export(input: Input<'usage', 'export'>, o?: RequestOptions): Promise<ReadableStream<Uint8Array>> {
        const res = await t.send('usage', 'export', input, o);
        return res.body!;
      },
      summary: j('usage', 'summary'),
      stats: j('usage', 'stats'),
      /** One call's request log (REQUEST_LOG), by request_id or usage_id; secrets redacted. */
      requestLog: j('usage', 'request-log'),
    },
    ai: {
      /** The admin catalog: every registered model, with env requirements, prices and availability. */
      models: j('ai', 'models'),
    },
    /** A city's upstream MCP servers, whose tools its users get at /v1/mcp (docs/mcp.md). */
    mcp: {
      servers: {
        create: j('mcp', 'servers/create'),
        list: j('mcp', 'servers/list'),
        update: j('mcp', 'servers/update'),
        remove: j('mcp', 'servers/remove'),
        /** Connects, lists the server's tools and reports which are offered, at what price. */
        test: j('mcp', 'servers/test'),
      },
    },
    call: makeCall(t),
  };
}

export type CitygateAdminClient = ReturnType<typeof createAdminClient>;
