// Admin commands against the current gateway (or --gateway NAME|URL): gateways, cities,
// tokens, env, models, usage. Tables by default, --json for scripts, exit code 1 on error.
import { readFileSync } from 'node:fs';
import { parse, need } from './args.ts';
import { call, resolveTarget } from './client.ts';
import { findGateway, loadConfig, maskKey, normalizeUrl, registerGateway, saveConfig } from './config.ts';
import { CliError, out, print, table } from './output.ts';

type Command = (args: string[]) => Promise<number>;

function sub(name: string, subs: Record<string, Command>, usage: string): Command {
  return async (args) => {
    const [s, ...rest] = args;
    if (!s || s === '--help' || s === '-h' || s === 'help') {
      process.stdout.write(`usage: ${usage}\n`);
      return s ? 0 : 1;
    }
    const run = subs[s];
    if (!run) throw new CliError(`unknown subcommand '${name} ${s}'\n\nusage: ${usage}`);
    return run(rest);
  };
}

// ---- gateways -------------------------------------------------------------------------

const GW_USAGE = 'citygate gateways list|use NAME|add URL [--name NAME] [--admin-key KEY]|remove NAME [--json]';

export const gatewaysCommand = sub(
  'gateways',
  {
    async list(args) {
      const { values } = parse(args, {}, GW_USAGE);
      const config = loadConfig();
      const rows = Object.values(config.gateways).map((g) => ({
        current: g.name === config.current ? '*' : '',
        name: g.name,
        url: g.url,
        admin_key: maskKey(g.admin_key),
        target: g.target ?? '',
      }));
      const o = out(!!values.json);
      if (o.json) {
        o.line(JSON.stringify({ current: config.current, items: Object.values(config.gateways).map(({ admin_key, ...g }) => ({ ...g, has_admin_key: !!admin_key })) }, null, 2));
      } else o.write(table(rows, [['current', ''], 'name', 'url', ['admin_key', 'ADMIN KEY'], 'target']));
      return 0;
    },
    async use(args) {
      const { positionals } = parse(args, {}, GW_USAGE);
      const which = need(positionals[0], 'NAME', GW_USAGE);
      const config = loadConfig();
      const g = findGateway(config, which);
      if (!g) throw new CliError(`no gateway '${which}' is registered; see \`citygate gateways list\``);
      config.current = g.name;
      saveConfig(config);
      process.stdout.write(`current gateway: ${g.name} (${g.url})\n`);
      return 0;
    },
    async add(args) {
      const { values, positionals } = parse(args, { name: { type: 'string' }, 'admin-key': { type: 'string' }, 'no-use': { type: 'boolean' } }, GW_USAGE);
      const url = normalizeUrl(need(positionals[0], 'URL', GW_USAGE));
      const name = (values.name as string | undefined) ?? new URL(url).hostname.split('.')[0];
      const key = (values['admin-key'] as string | undefined) ?? process.env.CITYGATE_ADMIN_KEY ?? null;
      const g = registerGateway({ name, url, admin_key: key }, { makeCurrent: !values['no-use'] });
      process.stdout.write(`registered ${g.name} → ${g.url}${values['no-use'] ? '' : ' (current)'}${key ? '' : '; no admin key: admin commands need CITYGATE_ADMIN_KEY'}\n`);
      return 0;
    },
    async remove(args) {
      const { positionals } = parse(args, {}, GW_USAGE);
      const which = need(positionals[0], 'NAME', GW_USAGE);
      const config = loadConfig();
      const g = findGateway(config, which);
      if (!g) throw new CliError(`no gateway '${which}' is registered; see \`citygate gateways list\``);
      delete config.gateways[g.name];
      if (config.current === g.name) config.current = null;
      saveConfig(config);
      process.stdout.write(`removed ${g.name} (its data on the gateway is untouched)\n`);
      return 0;
    },
  },
  GW_USAGE,
);

// ---- cities ---------------------------------------------------------------------------

const CITIES_USAGE = 'citygate cities list|create NAME [--id CITY_ID]|pause ID|activate ID|remove ID [--gateway G] [--json]';
const CITY_COLUMNS: (string | [string, string])[] = ['city_id', 'name', 'status', 'created_at'];

function cityAction(action: 'pause' | 'activate' | 'remove'): Command {
  return async (args) => {
    const { values, positionals } = parse(args, {}, CITIES_USAGE);
    const id = need(positionals[0], 'CITY_ID', CITIES_USAGE);
    const r = await call(resolveTarget(values.gateway as string | undefined), 'POST', `/v1/cities/${action}`, { body: { city_id: id } });
    print(out(!!values.json), r, CITY_COLUMNS);
    return 0;
  };
}

export const citiesCommand = sub(
  'cities',
  {
    async list(args) {
      const { values } = parse(args, {}, CITIES_USAGE);
      print(out(!!values.json), await call(resolveTarget(values.gateway as string | undefined), 'GET', '/v1/cities/list'), CITY_COLUMNS);
      return 0;
    },
    async create(args) {
      const { values, positionals } = parse(args, { id: { type: 'string' } }, CITIES_USAGE);
      const name = need(positionals[0], 'NAME', CITIES_USAGE);
      const r = await call(resolveTarget(values.gateway as string | undefined), 'POST', '/v1/cities/create', {
        body: { name, ...(values.id ? { city_id: values.id } : {}) },
      });
      print(out(!!values.json), r, CITY_COLUMNS);
      return 0;
    },
    pause: cityAction('pause'),
    activate: cityAction('activate'),
    remove: cityAction('remove'),
  },
  CITIES_USAGE,
);

// ---- tokens ---------------------------------------------------------------------------

const TOKENS_USAGE = 'citygate tokens apply --city CITY_ID --user USER_ID [--ttl SECONDS] [--gateway G] [--json]';

export const tokensCommand = sub(
  'tokens',
  {
    async apply(args) {
      const { values } = parse(args, { city: { type: 'string' }, user: { type: 'string' }, ttl: { type: 'string' } }, TOKENS_USAGE);
      const body: Record<string, unknown> = {
        city_id: need(values.city as string | undefined, '--city', TOKENS_USAGE),
        user_id: need(values.user as string | undefined, '--user', TOKENS_USAGE),
      };
      if (values.ttl !== undefined) {
        const ttl = Number(values.ttl);
        if (!Number.isInteger(ttl) || ttl <= 0) throw new CliError('--ttl must be a whole number of seconds');
        body.ttl = ttl;
      }
      const r = await call(resolveTarget(values.gateway as string | undefined), 'POST', '/v1/cities/tokens/apply', { body });
      print(out(!!values.json), r);
      return 0;
    },
  },
  TOKENS_USAGE,
);

// ---- env ------------------------------------------------------------------------------

const ENV_USAGE = 'citygate env list [--reveal]|set KEY VALUE|rm KEY|import FILE [--gateway G] [--json]';

export const envCommand = sub(
  'env',
  {
    async list(args) {
      const { values } = parse(args, { reveal: { type: 'boolean' } }, ENV_USAGE);
      const r = await call(resolveTarget(values.gateway as string | undefined), 'GET', '/v1/env/list', {
        query: { reveal: values.reveal ? 'true' : undefined },
      });
      print(out(!!values.json), r, ['key', 'value', 'secret']);
      return 0;
    },
    async set(args) {
      const { values, positionals } = parse(args, {}, ENV_USAGE);
      let [key, value] = positionals;
      if (key?.includes('=') && value === undefined) [key, value] = [key.slice(0, key.indexOf('=')), key.slice(key.indexOf('=') + 1)];
      need(key, 'KEY', ENV_USAGE);
      if (value === undefined) throw new CliError(`missing VALUE for ${key}\n\nusage: ${ENV_USAGE}`);
      const r = await call(resolveTarget(values.gateway as string | undefined), 'POST', '/v1/env/upsert', { body: { key, value } });
      print(out(!!values.json), r);
      return 0;
    },
    async rm(args) {
      const { values, positionals } = parse(args, {}, ENV_USAGE);
      const key = need(positionals[0], 'KEY', ENV_USAGE);
      const r = await call(resolveTarget(values.gateway as string | undefined), 'POST', '/v1/env/remove', { body: { key } });
      print(out(!!values.json), r);
      return 0;
    },
    async import(args) {
      const { values, positionals } = parse(args, {}, ENV_USAGE);
      const file = need(positionals[0], 'FILE', ENV_USAGE);
      let content: string;
      try {
        content = readFileSync(file, 'utf8');
      } catch (e) {
        throw new CliError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
      const r = await call(resolveTarget(values.gateway as string | undefined), 'POST', '/v1/env/import', { body: { content } });
      print(out(!!values.json), r);
      return 0;
    },
  },
  ENV_USAGE,
);

// ---- models, usage --------------------------------------------------------------------

const MODELS_USAGE = 'citygate models [--gateway G] [--json]';

export async function modelsCommand(args: string[]): Promise<number> {
  const { values } = parse(args, {}, MODELS_USAGE);
  const r = await call<{ items: Record<string, unknown>[] }>(resolveTarget(values.gateway as string | undefined), 'GET', '/v1/ai/models');
  const o = out(!!values.json);
  if (o.json) return o.line(JSON.stringify(r, null, 2)), 0;
  const rows = (r.items ?? []).map((m) => ({
    ...m,
    env: ((m.env_requirements as { key: string; required: boolean }[] | undefined) ?? []).filter((e) => e.required).map((e) => e.key),
  }));
  o.write(table(rows, ['id', 'name', 'modalities', ['env', 'REQUIRES']]));
  return 0;
}

const USAGE_USAGE =
  'citygate usage [summary|list] [--city ID] [--user ID] [--model M] [--status ok|error|aborted] [--from DATE] [--to DATE] [--limit N] [--cursor C] [--gateway G] [--json]\n' +
  '  summary (default): totals per UTC day × city × model, --from/--to are days (YYYY-MM-DD, both included; default the last 30)\n' +
  '  list: records, newest first; --from/--to are dates, date-times or epoch ms (--to excluded)';

interface SummaryRow {
  day: string;
  city_id: string | null;
  model: string;
  calls: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  credits: number;
  usd: number;
}

const usd = (n: number) => `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 6 : 2)}`;
const count = (n: number) => n.toLocaleString('en-US');

/** `/v1/usage/summary` (default) or `/v1/usage/list`, as a table (or JSON with --json). */
export async function usageCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(
    args,
    {
      city: { type: 'string' },
      user: { type: 'string' },
      model: { type: 'string' },
      status: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
    },
    USAGE_USAGE,
  );
  const report = positionals[0] ?? 'summary';
  if (report !== 'summary' && report !== 'list') throw new CliError(`unknown usage report '${report}'\n\nusage: ${USAGE_USAGE}`);
  if (positionals.length > 1) throw new CliError(`one report at most\n\nusage: ${USAGE_USAGE}`);
  const v = values as Record<string, string | undefined>;
  if (report === 'summary') {
    const listOnly = ['user', 'status'].filter((k) => v[k] !== undefined);
    if (listOnly.length) throw new CliError(`--${listOnly[0]} filters records: use \`citygate usage list\`\n\nusage: ${USAGE_USAGE}`);
  }
  const target = resolveTarget(v.gateway);
  const query =
    report === 'summary'
      ? { city_id: v.city, model: v.model, from: v.from, to: v.to, limit: v.limit, cursor: v.cursor }
      : { city_id: v.city, user_id: v.user, model: v.model, status: v.status, from: v.from, to: v.to, limit: v.limit, cursor: v.cursor };
  const r = await call<Record<string, unknown>>(target, 'GET', `/v1/usage/${report}`, { query });
  const o = out(!!values.json);
  if (o.json) return o.line(JSON.stringify(r, null, 2)), 0;
  if (report === 'summary') {
    const rows = (r.items as SummaryRow[]).map((x) => ({
      ...x,
      city_id: x.city_id ?? '(admin)',
      calls: count(x.calls),
      errors: count(x.errors),
      input_tokens: count(x.input_tokens),
      output_tokens: count(x.output_tokens),
      credits: count(x.credits),
      usd: usd(x.usd),
    }));
    o.line(`usage from ${r.from} to ${r.to} (UTC days)${v.city ? `, city ${v.city}` : ''}${v.model ? `, model ${v.model}` : ''}`);
    o.write(table(rows, ['day', ['city_id', 'CITY'], 'model', 'calls', 'errors', ['input_tokens', 'INPUT'], ['output_tokens', 'OUTPUT'], 'credits', ['usd', 'USD']]));
    const t = r.totals as Omit<SummaryRow, 'day' | 'city_id' | 'model'>;
    o.line(`total: ${count(t.calls)} calls, ${count(t.errors)} errors, ${count(t.input_tokens)} input and ${count(t.output_tokens)} output tokens, ${count(t.credits)} credits (${usd(t.usd)})`);
    if (r.next_cursor) o.line(`more: citygate usage summary … --cursor ${r.next_cursor}`);
    return 0;
  }
  const items = r.items as Record<string, unknown>[];
  o.write(
    table(
      items.map((x) => ({ ...x, created_at: String(x.created_at).replace('T', ' ').replace(/\.\d+Z$/, 'Z'), status: x.error_code ? `${x.status} (${x.error_code})` : x.status, credits: `${x.estimated ? '~' : ''}${count(x.credits as number)}` })),
      [['created_at', 'TIME'], ['city_id', 'CITY'], ['user_id', 'USER'], 'model', 'mode', 'status', ['input_tokens', 'INPUT'], ['output_tokens', 'OUTPUT'], 'credits', ['duration_ms', 'MS']],
    ),
  );
  if (items.some((x) => x.estimated)) o.line('~ estimated: the upstream reported no usage (docs/money.md, Estimates)');
  if (r.next_cursor) o.line(`more: citygate usage list … --cursor ${r.next_cursor}`);
  return 0;
}
