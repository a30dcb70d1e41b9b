// Runtime settings of the accounts service (read at each use, so env/upsert applies at once)
// and its user-created hook.
import type { GatewayContext } from '../../kernel/context.ts';
import { DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS } from '../cities/tokens.ts';
import type { UserCreated } from './capability.ts';

const OFF = /^(false|0|no|off)$/i;

/**
 * Local login is on unless LOCAL_LOGIN is false: the env table first, then the process
 * environment, then the runtime's configuration (the container sets it false).
 */
export function localLoginEnabled(gw: GatewayContext): boolean {
  const v = gw.env.get('LOCAL_LOGIN');
  if (v !== undefined) return !OFF.test(v.trim());
  return gw.config.localLogin;
}

/** Lifetime of user tokens issued by login: ACCOUNTS_TOKEN_TTL_SECONDS (60 s … 30 days), default 7 days. */
export function tokenTtlSeconds(gw: GatewayContext): number {
  const v = Number(gw.env.get('ACCOUNTS_TOKEN_TTL_SECONDS'));
  return Number.isInteger(v) && v >= 60 && v <= MAX_TTL_SECONDS ? v : DEFAULT_TTL_SECONDS;
}

export interface Hooks {
  userCreated(u: UserCreated): Promise<void>;
}

export function createHooks(gw: () => GatewayContext | null): Hooks & { listeners: ((u: UserCreated) => Promise<void> | void)[] } {
  const listeners: ((u: UserCreated) => Promise<void> | void)[] = [];
  return {
    listeners,
    async userCreated(u) {
      for (const l of listeners) {
        try {
          await l(u);
        } catch (e) {
          gw()?.log('error', 'user-created listener failed', { city: u.city_id, user: u.user_id, error: String(e) });
        }
      }
    },
  };
}
