// The CLI's own config file: registered gateways (URL + admin key) and the current one.
// It holds admin keys, so it is written with mode 0600 in a 0700 directory, atomically.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export interface RegisteredGateway {
  name: string;
  url: string;
  admin_key: string | null;
  target?: string;
  project_dir?: string;
  updated_at: string;
}

export interface CliConfig {
  current: string | null;
  gateways: Record<string, RegisteredGateway>;
}

/** CITYGATE_CONFIG, else the user config directory (XDG on Linux, the platform's elsewhere). */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CITYGATE_CONFIG) return env.CITYGATE_CONFIG;
  let base: string;
  if (env.XDG_CONFIG_HOME) base = env.XDG_CONFIG_HOME;
  else if (process.platform === 'win32') base = env.APPDATA || join(homedir(), 'AppData', 'Roaming');
  else if (process.platform === 'darwin') base = join(homedir(), 'Library', 'Application Support');
  else base = join(homedir(), '.config');
  return join(base, 'citygate', 'config.json');
}

export function loadConfig(path = configPath()): CliConfig {
  if (!existsSync(path)) return { current: null, gateways: {} };
  let raw: Partial<CliConfig>;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(`${path} is not valid JSON (${(e as Error).message}); fix or delete it`);
  }
  return { current: raw.current ?? null, gateways: raw.gateways ?? {} };
}

export function saveConfig(config: CliConfig, path = configPath()): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function normalizeUrl(url: string): string {
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`not an http(s) URL: ${url}`);
  return u.origin + u.pathname.replace(/\/+$/, '');
}

/** Adds or replaces a gateway; makes it current unless told not to. */
export function registerGateway(g: Omit<RegisteredGateway, 'updated_at'>, opts: { makeCurrent?: boolean; path?: string } = {}): RegisteredGateway {
  const config = loadConfig(opts.path);
  const entry: RegisteredGateway = { ...g, url: normalizeUrl(g.url), updated_at: new Date().toISOString() };
  config.gateways[g.name] = entry;
  if (opts.makeCurrent ?? true) config.current = g.name;
  saveConfig(config, opts.path);
  return entry;
}

/** A gateway by name or URL (a URL that is not registered comes back without a key). */
export function findGateway(config: CliConfig, nameOrUrl: string): RegisteredGateway | null {
  if (config.gateways[nameOrUrl]) return config.gateways[nameOrUrl];
  if (/^https?:\/\//i.test(nameOrUrl)) {
    const url = normalizeUrl(nameOrUrl);
    return Object.values(config.gateways).find((g) => g.url === url) ?? null;
  }
  return null;
}

export function maskKey(key: string | null): string {
  if (!key) return '(none)';
  return key.length <= 12 ? '••••••••' : `${key.slice(0, 9)}••••${key.slice(-4)}`;
}
