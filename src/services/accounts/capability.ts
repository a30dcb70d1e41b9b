// What the accounts service offers other services, through gw.provide('accounts', …) in its
// init. Others look it up with gw.use<AccountsCapability>(ACCOUNTS) and must cope with its
// absence (a deployment without the accounts service).

export const ACCOUNTS = 'accounts';

/** How a user came to exist. */
export type UserOrigin = 'local' | 'github' | 'google' | 'token';

export interface UserCreated {
  city_id: string;
  user_id: string;
  via: UserOrigin;
  created_at: number;
}

export interface AccountsCapability {
  /**
   * Records that a user exists in a city (no-op when it already does), so that
   * `accounts/users` lists users that only ever received tokens from `cities/tokens/apply`.
   * Returns true when this call created the user.
   */
  registerUser(a: { city_id: string; user_id: string; via: UserOrigin }): Promise<boolean>;
  /**
   * Calls `listener` once for each user created from now on (any login method or
   * registerUser), after the user row is written and before the login answers. A listener
   * that throws is logged and does not fail the login. Delivery is at most once: a crash
   * between the write and the call loses the event, so work that must happen (say, initial
   * credits) should also be idempotent and lazily repairable.
   */
  onUserCreated(listener: (u: UserCreated) => Promise<void> | void): void;
}
