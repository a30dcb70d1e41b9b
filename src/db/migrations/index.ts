// Forward-only migrations, applied in this order at boot. Never edit one that has shipped:
// add a new file. Numbers are spaced by area so parallel work does not collide.
import kernel from './001_kernel.ts';
import ai from './010_ai.ts';
import accounts from './020_accounts.ts';
import money from './030_money.ts';
import moneyLeaks from './031_money_leaks.ts';
import usageOverhead from './036_usage_overhead.ts';
import security from './060_security.ts';

export interface Migration {
  name: string;
  statements: string[];
}

export const migrations: Migration[] = [
  { name: '001_kernel', statements: kernel },
  { name: '010_ai', statements: ai },
  { name: '020_accounts', statements: accounts },
  { name: '030_money', statements: money },
  { name: '031_money_leaks', statements: moneyLeaks },
  { name: '036_usage_overhead', statements: usageOverhead },
  { name: '060_security', statements: security },
];
