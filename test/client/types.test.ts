// The client's types are the server's: checked by the type checker (`npm run typecheck`), and
// this file also runs (trivially) under `npm test` so it is not forgotten.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Input, Output, TextMessage, Model, LoginResult, City, CityWithSettings, IssuedToken, Balance, OAuthStart } from '../../src/client/index.ts';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

type _checks = [
  Expect<Equal<TextMessage['role'], 'assistant'>>,
  Expect<Equal<TextMessage['parts'][number]['type'], 'text'>>,
  Expect<Equal<Model['id'], string>>,
  Expect<Equal<Input<'ai', 'text'>['model'], string>>,
  Expect<Equal<Input<'env', 'upsert'>, { key: string; value: string }>>,
  Expect<Equal<LoginResult['status'], 'pending' | 'done' | 'failed'>>,
  Expect<Equal<Extract<LoginResult, { status: 'done' }>['user_token'], string>>,
  Expect<Equal<OAuthStart['provider'], 'github' | 'google'>>,
  Expect<Equal<City['status'], 'active' | 'paused'>>,
  Expect<Equal<IssuedToken['user_token'], string>>,
  // The admin's and bureau's read of a city carries its settings, the same shape update answers;
  // a user's read (cities/current) does not.
  Expect<Equal<CityWithSettings['limits']['user_rpm'], number | null>>,
  Expect<Equal<CityWithSettings['user_budget'], { credits: number; period: 'day' | 'month' } | null>>,
  Expect<Equal<Output<'cities', 'list'>['items'][number], CityWithSettings>>,
  Expect<Equal<Output<'cities', 'update'>, CityWithSettings>>,
  Expect<Equal<'limits' extends keyof City ? true : false, false>>,
  Expect<Equal<Balance["credits"], number>>,
  Expect<Equal<Output<'accounts', 'login'>['user_token'], string>>,
  // limit has a default: optional on input
  Expect<Equal<undefined extends Input<'usage', 'me'>['limit'] ? true : false, true>>,
];

test('client types derive from the server (checked by tsc)', () => {
  const ok: _checks = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
  assert.equal(ok.length, 18);
});
