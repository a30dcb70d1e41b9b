// The servers the benchmark loads. Each target starts (if needed) in its own process and
// tells the harness where to POST chat completions and with which headers. All of them end
// at the same OpenAI stub (bench/stub.ts), so the difference between targets is the gateway.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { answersHttp, freePort, spawnServer, type ServerProcess } from "./processes.ts";
import type { StubProcess } from "./stub.ts";

export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));

export type TargetContext = {
  stub: StubProcess;
  /** Model name sent in every request. */
  model: string;
};

export type RunningTarget = {
  name: string;
  /** Full URL of this target's chat completions endpoint. */
  chatUrl: string;
  /** Headers sent with every request (besides content-type). */
  headers: Record<string, string>;
  /** The server process measured for memory (the stub itself for `direct`). */
  process: ServerProcess;
  /** Facts worth printing with the results (versions, workarounds). */
  notes: string[];
  /** A check after the target's cases (the charged target's money check): a line for the report, or throws. */
  check?: () => Promise<string>;
  stop(): Promise<void>;
};

export type Skipped = { skipped: string };

export type Target = {
  name: string;
  description: string;
  start(ctx: TargetContext): Promise<RunningTarget | Skipped>;
};

// ---- (a) direct: the stub itself, the ceiling -------------------------------------------

export const direct: Target = {
  name: "direct",
  description: "straight to the OpenAI stub (no gateway): the ceiling",
  async start({ stub }) {
    return {
      name: "direct",
      chatUrl: `${stub.url}/chat/completions`,
      headers: { authorization: `Bearer ${stub.apiKey}` },
      process: stub.process,
      notes: [],
      stop: async () => {},
    };
  },
};

// ---- (b) citygate, charged (the default) and free ---------------------------------------
//
// The real server with the stock services (auth, balance and usage on), a city and a user
// token made through the admin API, the load on /v1/ai/chat/completions.
//
// How it runs: `node src/cli/main.ts serve` in its own process with
//   HOST=127.0.0.1, PORT=<free port>, DATABASE_PATH=<temp dir>/citygate.sqlite,
//   GATEWAY_ADMIN_SECRET_KEY=<random>          (so the admin key need not be read from the DB),
//   TEXTPROVIDER_API_KEY=<stub key>, TEXTPROVIDER_BASE_URL=<stub /v1 URL>,
//   TEXTPROVIDER_MODELS=<model>                (the text model points at the stub);
// then, as admin: POST /v1/cities/create {name} → {city_id};
//                 POST /v1/cities/tokens/apply {city_id, user_id} → {user_token};
// and the load goes to POST /v1/ai/chat/completions with Authorization: Bearer <user_token>.
//
// `citygate` is what a product that charges its users runs: the model is priced
// (MODEL_PRICES) and the user funded (balance/adjust), so every call takes a credit hold and
// settles it. After its cases the harness checks the money: the balance must have dropped by
// exactly the sum of the usage records' credits. `citygate-free` is the same server with the
// model unpriced and the user unfunded: no hold, no settle.

/** citygate's entry: this checkout's, or BENCH_CITYGATE_ROOT's (another checkout, for A/B runs), read when a target starts. */
const citygateEntry = () => join(process.env.BENCH_CITYGATE_ROOT ?? REPO_ROOT, "src/cli/main.ts");
const CITYGATE_CHAT_PATH = "/v1/ai/chat/completions";
const CITYGATE_READY_PATH = "/health";
/** The charged target's price: gpt-4o-mini's list price in credits (1 USD = 1,000,000). */
export const BENCH_PRICE = { input_per_mtok: 150_000, output_per_mtok: 600_000 };
/** What the charged target's user is granted: far more than any run spends. */
export const BENCH_GRANT = 1_000_000_000_000;

export type CitygateSession = { cityId: string; userId: string; userToken: string; subscriber?: boolean };

/** The admin calls that give the bench a city and a user token (and credits, when charged). */
export async function citygateSetup(origin: string, adminKey: string, charged: boolean): Promise<CitygateSession> {
  const city = await postJson<{ city_id: string }>(`${origin}/v1/cities/create`, adminKey, { name: "bench" });
  const userId = "bench-user";
  const token = await postJson<{ user_token: string }>(`${origin}/v1/cities/tokens/apply`, adminKey, { city_id: city.city_id, user_id: userId });
  if (charged) {
    await postJson(`${origin}/v1/balance/adjust`, adminKey, {
      city_id: city.city_id,
      user_id: userId,
      credits: BENCH_GRANT,
      reason: "bench grant",
      idempotency_key: "bench-grant",
    });
  }
  // BENCH_PLAN=subscriber: the user also holds a plan (plans/assign) whose period and 5-hour
  // window cover the whole run, so every call is paid from the plan's windows and the prepaid
  // credits stay untouched, e.g. PAIR=citygate,citygate PAIR_B_ENV="BENCH_PLAN=subscriber".
  let subscriber = false;
  if (charged && process.env.BENCH_PLAN === "subscriber") {
    const made = await postJson<{ plan: { id: string } }>(`${origin}/v1/plans/create`, adminKey, {
      city_id: city.city_id,
      name: "bench plan",
      interval: "month",
      price: { amount: 0, currency: "usd" },
      credits: BENCH_GRANT,
      windows: [{ window: "5h", limit: BENCH_GRANT }],
    });
    await postJson(`${origin}/v1/plans/assign`, adminKey, { city_id: city.city_id, user_id: userId, plan_id: made.plan.id });
    subscriber = true;
  }
  // BENCH_AUTH=key: the load authenticates with a user API key (accounts/keys) instead of the
  // user token, e.g. PAIR=citygate,citygate PAIR_B_ENV="BENCH_AUTH=key" (a key call vs a JWT call).
  if (process.env.BENCH_AUTH === "key") {
    const made = await postJson<{ secret: string }>(`${origin}/v1/accounts/keys/create`, adminKey, { city_id: city.city_id, user_id: userId, name: "bench" });
    return { cityId: city.city_id, userId, userToken: made.secret, subscriber };
  }
  return { cityId: city.city_id, userId, userToken: token.user_token, subscriber };
}

/**
 * The money check of a charged run: balance drop = Σ usage credits, and at least one credit
 * was charged. Waits for in-flight settles and the usage buffer's flush (a few hundred ms).
 */
async function moneyCheck(origin: string, adminKey: string, s: CitygateSession): Promise<string> {
  const deadline = Date.now() + 15_000;
  let last = "";
  for (;;) {
    const bal = await getJson<{ items: { credits: number }[] }>(`${origin}/v1/balance/list?city_id=${encodeURIComponent(s.cityId)}`, adminKey);
    const sum = await getJson<{ totals: { calls: number; credits: number } }>(`${origin}/v1/usage/summary?city_id=${encodeURIComponent(s.cityId)}`, adminKey);
    let drop = BENCH_GRANT - (bal.items[0]?.credits ?? 0);
    let paid = `balance dropped by ${drop} credits`;
    if (s.subscriber) {
      // a subscriber's calls are paid from the plan's period window (and the balance past it)
      const sub = await getJson<{ subscription: { windows: { name: string; used: number }[] } }>(
        `${origin}/v1/plans/subscription?city_id=${encodeURIComponent(s.cityId)}&user_id=${encodeURIComponent(s.userId)}`,
        adminKey,
      );
      const period = sub.subscription.windows.find((w) => w.name === "period");
      paid = `plan period used ${period?.used ?? 0} credits, balance dropped by ${drop}`;
      drop += period?.used ?? 0;
    }
    last = `${paid}; usage records: ${sum.totals.calls} calls, ${sum.totals.credits} credits`;
    if (drop === sum.totals.credits && drop > 0) return `money check ok: ${last}`;
    if (Date.now() > deadline) throw new Error(`money check FAILED: ${last}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The admin key as citygate stores it, for when GATEWAY_ADMIN_SECRET_KEY in the env is not honoured. */
export async function readAdminKeyFromDb(databasePath: string): Promise<string | undefined> {
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(databasePath, { readOnly: true });
  try {
    const row = db.prepare("SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'").get() as { value?: string } | undefined;
    return row?.value;
  } finally {
    db.close();
  }
}

/** A new database on the server of `url`, for one bench run. */
async function freshPostgres(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const { default: pg } = await import("pg");
  const name = `citygate_bench_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
  const admin = async (text: string) => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const u = new URL(url);
  u.pathname = `/${name}`;
  return { url: u.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

/** Rate limits of the *-limited targets: BENCH_LIMITS (KEY=VALUE,…), by default limits far above the load, so each call pays for the counting but none is refused. */
function benchLimits(): Record<string, string> {
  const raw = process.env.BENCH_LIMITS ?? "RATE_LIMIT_USER_RPM=1000000000,RATE_LIMIT_CITY_RPM=1000000000,RATE_LIMIT_USER_TPM=1000000000000";
  return Object.fromEntries(raw.split(",").filter(Boolean).map((kv) => kv.split("=").map((x) => x.trim()) as [string, string]));
}

function citygateTarget(name: string, charged: boolean, limited = false, upstreams = 1): Target {
  return {
    name,
    description:
      (charged ? "citygate → stub, priced model, funded user (billing on)" : "citygate → stub, unpriced model (no billing)") +
      (limited ? `, rate limits on (${Object.keys(benchLimits()).join(", ")})` : "") +
      (upstreams > 1 ? `, ${upstreams} upstreams for the model (routing picks by weight)` : ""),
    async start({ stub, model }) {
      if (!existsSync(citygateEntry())) {
        return { skipped: "src/cli/main.ts does not exist yet; the citygate target is a hook in bench/targets.ts" };
      }
      const dir = mkdtempSync(join(tmpdir(), "citygate-bench-"));
      const databasePath = join(dir, "citygate.sqlite");
      // BENCH_DATABASE_URL=postgres://…/any: citygate on a fresh PostgreSQL database on that server
      // (dropped afterwards); BENCH_GATEWAY_WORKERS=N: that many worker processes.
      const pg = process.env.BENCH_DATABASE_URL ? await freshPostgres(process.env.BENCH_DATABASE_URL) : null;
      const port = await freePort();
      const origin = `http://127.0.0.1:${port}`;
      let adminKey = `bench-admin-${crypto.randomUUID()}`;
      const proc = await spawnServer({
        name,
        gateway: true,
        args: [citygateEntry(), "serve"],
        // BENCH_CITYGATE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/p": node flags for the citygate process only
        nodeArgs: process.env.BENCH_CITYGATE_NODE_ARGS?.split(" ").filter(Boolean),
        cwd: dir,
        env: {
          NODE_ENV: "production",
          HOST: "127.0.0.1",
          PORT: String(port),
          DATABASE_PATH: databasePath,
          GATEWAY_ADMIN_SECRET_KEY: adminKey,
          TEXTPROVIDER_API_KEY: stub.apiKey,
          TEXTPROVIDER_BASE_URL: stub.url,
          TEXTPROVIDER_MODELS: model,
          // Free: priced null, since the bundled price catalog knows most model ids (gpt-4o-mini too).
          MODEL_PRICES: JSON.stringify({ [model]: charged ? BENCH_PRICE : null }),
          ...(pg ? { DATABASE_URL: pg.url } : {}),
          ...(process.env.BENCH_GATEWAY_WORKERS ? { GATEWAY_WORKERS: process.env.BENCH_GATEWAY_WORKERS } : {}),
          ...(limited ? benchLimits() : {}),
        },
        ready: () => answersHttp(origin + CITYGATE_READY_PATH),
      });
      const stop = async () => {
        await proc.stop();
        await pg?.drop();
        rmSync(dir, { recursive: true, force: true });
      };
      try {
        let session: CitygateSession;
        try {
          session = await citygateSetup(origin, adminKey, charged);
        } catch (err) {
          // the env key may not be honoured: try the one citygate generated into its database
          const fromDb = existsSync(databasePath) ? await readAdminKeyFromDb(databasePath).catch(() => undefined) : undefined;
          if (!fromDb || fromDb === adminKey) throw err;
          adminKey = fromDb;
          session = await citygateSetup(origin, adminKey, charged);
        }
        // More upstreams for the same model (the env slot is the first): the same stub, no failures.
        for (let i = 1; i < upstreams; i++) {
          await postJson(`${origin}/v1/ai/upstreams/create`, adminKey, { name: `bench-${i}`, kind: "openai-compatible", base_url: stub.url, api_key: stub.apiKey, models: [model] });
        }
        return {
          name,
          chatUrl: origin + CITYGATE_CHAT_PATH,
          headers: { authorization: `Bearer ${session.userToken}` },
          process: proc,
          notes: [charged ? `city ${session.cityId}, model priced ${JSON.stringify(BENCH_PRICE)}, user funded` : `city ${session.cityId}, model unpriced`],
          check: charged ? () => moneyCheck(origin, adminKey, session) : undefined,
          stop,
        };
      } catch (err) {
        const tail = proc.logTail();
        await stop();
        throw new Error(`citygate setup failed: ${(err as Error).message}${tail ? `\n--- citygate output ---\n${tail}` : ""}`);
      }
    },
  };
}

export const citygate = citygateTarget("citygate", true);
export const citygateFree = citygateTarget("citygate-free", false);
export const citygateLimited = citygateTarget("citygate-limited", true, true);
export const citygateFreeLimited = citygateTarget("citygate-free-limited", false, true);
/** citygate with three upstreams for the model: what routing costs when nothing fails. */
export const citygate3 = citygateTarget("citygate-3up", true, false, 3);

// ---- (c) Portkey's open-source gateway ---------------------------------------------------
//
// Started as `node [--import bench/portkey-preload.ts] node_modules/@portkey-ai/gateway/build/start-server.js
// --port=<p> --headless` (the port comes only from --port=, default 8787; --headless skips the
// web UI and its request-log stream). Routed per request by headers:
//   x-portkey-provider: openai
//   x-portkey-custom-host: <stub /v1 URL>     (127.0.0.1 is on Portkey's default trusted-host list)
//   Authorization: Bearer <stub key>          (forwarded to the upstream as the OpenAI key)
// Portkey then POSTs <custom-host>/chat/completions with global fetch.

// ---- (d) bare: Hono + undici relay, nothing else — the floor of a Node gateway ------------

/** BENCH_FLOOR_NODE_ARGS: node flags for the bare and relay processes (bench/profile.ts sets it). */
const floorNodeArgs = () => process.env.BENCH_FLOOR_NODE_ARGS?.split(" ").filter(Boolean);

const BARE_ENTRY = fileURLToPath(new URL("./bare-server.ts", import.meta.url));

export const bare: Target = {
  name: "bare",
  description: "Hono + @hono/node-server + undici relay to the stub, nothing else (bench/bare-server.ts): the floor of a Node gateway",
  async start({ stub }) {
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const proc = await spawnServer({
      name: "bare",
      gateway: true,
      args: [BARE_ENTRY],
      nodeArgs: floorNodeArgs(),
      cwd: REPO_ROOT,
      env: { NODE_ENV: "production", PORT: String(port), UPSTREAM: stub.url, UPSTREAM_KEY: stub.apiKey },
      ready: () => answersHttp(origin + "/"),
    });
    return { name: "bare", chatUrl: `${origin}/v1/chat/completions`, headers: {}, process: proc, notes: [], stop: () => proc.stop() };
  },
};

// ---- (e) relay: node:http + undici, nothing parsed — what any Node gateway spends at the least

const RELAY_ENTRY = fileURLToPath(new URL("./relay-server.ts", import.meta.url));

export const relay: Target = {
  name: "relay",
  description: "node:http + undici, method, headers and body piped through, nothing parsed (bench/relay-server.ts): the framework-free floor",
  async start({ stub }) {
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const proc = await spawnServer({
      name: "relay",
      gateway: true,
      args: [RELAY_ENTRY],
      nodeArgs: floorNodeArgs(),
      cwd: REPO_ROOT,
      env: { NODE_ENV: "production", PORT: String(port), UPSTREAM: stub.url, UPSTREAM_KEY: stub.apiKey },
      ready: () => answersHttp(origin + "/"),
    });
    return { name: "relay", chatUrl: `${origin}/v1/chat/completions`, headers: {}, process: proc, notes: [], stop: () => proc.stop() };
  },
};

const PORTKEY_ENTRY = join(REPO_ROOT, "node_modules/@portkey-ai/gateway/build/start-server.js");
const PORTKEY_PRELOAD = fileURLToPath(new URL("./portkey-preload.ts", import.meta.url));

export const portkey: Target = {
  name: "portkey",
  description: "Portkey OSS gateway (@portkey-ai/gateway) → stub",
  async start({ stub }) {
    if (!existsSync(PORTKEY_ENTRY)) return { skipped: "node_modules/@portkey-ai/gateway is not installed" };
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const usePreload = process.env.BENCH_PORTKEY_PRELOAD !== "0";
    const proc = await spawnServer({
      name: "portkey",
      gateway: true,
      args: [PORTKEY_ENTRY, `--port=${port}`, "--headless"],
      nodeArgs: usePreload ? ["--import", PORTKEY_PRELOAD] : [],
      cwd: REPO_ROOT,
      env: { NODE_ENV: "production" },
      ready: () => answersHttp(origin + "/"),
    });
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "node_modules/@portkey-ai/gateway/package.json"), "utf8")) as { version: string };
    return {
      name: "portkey",
      chatUrl: `${origin}/v1/chat/completions`,
      headers: {
        authorization: `Bearer ${stub.apiKey}`,
        "x-portkey-provider": "openai",
        "x-portkey-custom-host": stub.url,
      },
      process: proc,
      notes: [
        `@portkey-ai/gateway ${version}`,
        usePreload ? "streaming needs bench/portkey-preload.ts (Portkey bug: immutable upstream headers); JSON path untouched" : "run without the streaming workaround (BENCH_PORTKEY_PRELOAD=0)",
      ],
      stop: () => proc.stop(),
    };
  },
};

/**
 * Starts `t` with `env` set in this process's environment (a target's settings are read from it
 * as it starts, e.g. BENCH_CITYGATE_ROOT: another checkout), then puts the environment back,
 * also when the start fails. A skipped target throws its reason.
 */
export async function startWithEnv(t: Target, ctx: TargetContext, env: Record<string, string>): Promise<RunningTarget> {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const r = await t.start(ctx);
    if ("skipped" in r) throw new Error(r.skipped);
    return r;
  } finally {
    process.env = saved;
  }
}

export const TARGETS: Target[] = [direct, relay, bare, citygate, citygateFree, citygateLimited, citygateFreeLimited, citygate3, portkey];

/**
 * A citygate target by name, for the tools that measure one server process (cpu.ts, pair.ts,
 * profile.ts); `bare` too where the tool allows it. Throws, naming the setting, otherwise.
 */
export function measuredTarget(name: string, setting: string, opts: { bare?: boolean } = {}): Target {
  const t = TARGETS.find((x) => x.name === name && (x.name.startsWith("citygate") || (opts.bare && (x.name === "bare" || x.name === "relay"))));
  if (!t) throw new Error(`${setting} must name a citygate target of bench/targets.ts${opts.bare ? ", or bare or relay" : ""} (got '${name}')`);
  return t;
}

async function getJson<T>(url: string, bearer: string): Promise<T> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${bearer}` } });
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${new URL(url).pathname} → ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

async function postJson<T>(url: string, bearer: string, body: unknown): Promise<T> {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${new URL(url).pathname} → ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}
