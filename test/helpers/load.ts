// Charged load on keep-alive connections, the way a load balancer sends it: each connection
// (an undici Client, one socket, re-opened after the server closes it) sends chat/completions
// one after another until stopped, whatever it gets back; and the books read after it, to
// hold the gateway to exact equalities (docs/money.md): every 200 has one ok usage record, and
// per user Σ ledger charges = Σ usage credits; no credit stays leased.
import assert from 'node:assert/strict';
import { Client } from 'undici';
import { sqlAll, type SqlTarget } from './sql.ts';
import { sleep } from './wait.ts';

export interface LoadCounts {
  /** 200 answers per token index. */
  ok: number[];
  /** Answers by status (200 included). */
  statuses: Map<number, number>;
  /** Requests that got no answer (connection refused or reset). */
  failed: number;
  /** Answers that carried `Connection: close` (the server ends the connection after them). */
  closing: number;
}

export interface Load {
  counts: LoadCounts;
  /** Stops sending; resolves once every connection is idle. */
  stop(): Promise<LoadCounts>;
}

/** `connections` keep-alive connections, spread over `urls` and `tokens`, each sending `body` to chat/completions in a loop. */
export function chargedLoad(urls: string[], tokens: string[], connections: number, body: object): Load {
  const counts: LoadCounts = { ok: tokens.map(() => 0), statuses: new Map(), failed: 0, closing: 0 };
  let stopped = false;
  const payload = JSON.stringify(body);
  const one = async (i: number) => {
    const url = urls[i % urls.length];
    const t = i % tokens.length;
    const c = new Client(url, { pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 30_000, bodyTimeout: 30_000 });
    try {
      while (!stopped) {
        try {
          const r = await c.request({ method: 'POST', path: '/v1/ai/chat/completions', headers: { authorization: `Bearer ${tokens[t]}`, 'content-type': 'application/json' }, body: payload });
          await r.body.text();
          counts.statuses.set(r.statusCode, (counts.statuses.get(r.statusCode) ?? 0) + 1);
          if (r.headers.connection === 'close') counts.closing++;
          if (r.statusCode === 200) counts.ok[t]++;
          else if (r.statusCode === 503) await sleep(20);
        } catch {
          counts.failed++; // refused or reset: the gateway stopped or restarts; try again shortly
          await sleep(20);
        }
      }
    } finally {
      await c.destroy().catch(() => {});
    }
  };
  const all = Promise.all(Array.from({ length: connections }, (_, i) => one(i)));
  return {
    counts,
    async stop() {
      stopped = true;
      await all;
      return counts;
    },
  };
}

/** Balance readers: GET /v1/balance/me in a loop on their own connections; counts statuses. */
export function balanceReaders(urls: string[], tokens: string[], n: number): { statuses: Map<number, number>; stop(): Promise<void> } {
  const statuses = new Map<number, number>();
  let stopped = false;
  const one = async (i: number) => {
    const c = new Client(urls[i % urls.length], { pipelining: 1 });
    try {
      while (!stopped) {
        try {
          const r = await c.request({ method: 'GET', path: '/v1/balance/me', headers: { authorization: `Bearer ${tokens[i % tokens.length]}` } });
          await r.body.text();
          statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1);
          await sleep(r.statusCode === 200 ? 5 : 20);
        } catch {
          await sleep(20);
        }
      }
    } finally {
      await c.destroy().catch(() => {});
    }
  };
  const all = Promise.all(Array.from({ length: n }, (_, i) => one(i)));
  return {
    statuses,
    async stop() {
      stopped = true;
      await all;
    },
  };
}

/**
 * The exact books after a load, read straight from the database: per user, ok usage records =
 * the 200 answers the clients got, Σ ledger charges = Σ usage credits; and nothing leased.
 */
export async function assertExactBooks(db: SqlTarget, cityId: string, users: string[], ok: number[]): Promise<{ records: number; credits: number }> {
  const recs = await sqlAll<{ user_id: string; n: number; c: number }>(db, `SELECT user_id, SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE city_id = ? GROUP BY user_id`, [cityId]);
  const charges = await sqlAll<{ user_id: string; c: number }>(db, `SELECT user_id, -COALESCE(SUM(credits), 0) AS c FROM ledger WHERE city_id = ? AND kind NOT IN ('grant', 'adjust', 'topup') GROUP BY user_id`, [cityId]);
  const by = <T extends { user_id: string }>(rows: T[]) => new Map(rows.map((r) => [r.user_id, r]));
  const r = by(recs);
  const g = by(charges);
  let records = 0;
  let credits = 0;
  users.forEach((u, i) => {
    const rec = r.get(u);
    assert.equal(Number(rec?.n ?? 0), ok[i], `${u}: ok usage records = the 200 answers the clients got`);
    assert.equal(Number(g.get(u)?.c ?? 0), Number(rec?.c ?? 0), `${u}: Σ ledger charges = Σ usage credits`);
    records += Number(rec?.n ?? 0);
    credits += Number(rec?.c ?? 0);
  });
  const leased = await sqlAll<{ l: number }>(db, `SELECT COALESCE(SUM(leased), 0) AS l FROM balances WHERE city_id = ?`, [cityId]);
  assert.equal(Number(leased[0].l), 0, 'no credit is left leased');
  const leases = await sqlAll<{ n: number }>(db, `SELECT COUNT(*) AS n FROM leases WHERE city_id = ?`, [cityId]);
  assert.equal(Number(leases[0].n), 0, 'no lease row is left');
  return { records, credits };
}
