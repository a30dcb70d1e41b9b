// A city's rate limits, per-user budget and request logs (admin), read with cities/get and edited with
// cities/update. Each limit overrides its RATE_LIMIT_* env key for this city: empty (null) =
// the env key applies, 0 = off for this city. The API judges every value; its message is
// shown next to the field.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, post } from '../api.ts';
import { href } from '../router.ts';
import { ErrorBox, Loading, num, useAction, when } from '../ui.tsx';

const LIMITS = [
  { key: 'user_rpm', label: 'Requests / minute per user', env: 'RATE_LIMIT_USER_RPM' },
  { key: 'user_tpm', label: 'Tokens / minute per user', env: 'RATE_LIMIT_USER_TPM' },
  { key: 'city_rpm', label: 'Requests / minute, whole city', env: 'RATE_LIMIT_CITY_RPM' },
  { key: 'city_tpm', label: 'Tokens / minute, whole city', env: 'RATE_LIMIT_CITY_TPM' },
  { key: 'user_concurrency', label: 'Calls in flight per user', env: 'RATE_LIMIT_USER_CONCURRENCY' },
] as const;
type LimitKey = (typeof LIMITS)[number]['key'];

export interface CitySettings {
  limits: Record<LimitKey, number | null>;
  user_budget: { credits: number; period: 'day' | 'month' } | null;
  request_log: 'off' | 'metadata' | 'full' | null;
  updated_at: string;
}

interface Form {
  limits: Record<LimitKey, string>;
  budgetOn: boolean;
  credits: string;
  period: 'day' | 'month';
  /** '' = REQUEST_LOG applies. */
  requestLog: '' | 'off' | 'metadata' | 'full';
}

const toForm = (s: CitySettings): Form => ({
  limits: Object.fromEntries(LIMITS.map(({ key }) => [key, s.limits[key] == null ? '' : String(s.limits[key])])) as Record<LimitKey, string>,
  budgetOn: s.user_budget !== null,
  credits: s.user_budget ? String(s.user_budget.credits) : '',
  period: s.user_budget?.period ?? 'day',
  requestLog: s.request_log ?? '',
});

/** Empty → null (the env key); a number → that number; anything else goes as typed, for the API to refuse in its words. */
const value = (s: string): number | string | null => (s.trim() === '' ? null : /^-?\d+(\.\d+)?$/.test(s.trim()) ? Number(s) : s);

/** A plain read (cities/get answers the same shape as cities/update): it changes nothing. */
const readSettings = (city: string) => get<CitySettings>('cities/get', { city_id: city });

function describeLimit(v: number | null | undefined, env?: string): string {
  if (v == null) return env === undefined ? 'env default' : `env default (${env})`;
  return v === 0 ? 'off' : num(v);
}

export function CityLimits({ city }: { city: string }) {
  const [saved, setSaved] = useState<CitySettings | null>(null);
  const [form, setForm] = useState<Form | null>(null);
  const [envValues, setEnvValues] = useState<Record<string, string>>({});
  const [done, setDone] = useState<string | null>(null);
  const load = useAction();
  const save = useAction();

  useEffect(() => {
    load.run(async () => {
      const s = await readSettings(city);
      setSaved(s);
      setForm(toForm(s));
    });
    // The RATE_LIMIT_* keys set on the Env page (keys only in the process env are not listed).
    get<{ items: { key: string; value: string }[] }>('env/list').then(
      (r) => setEnvValues(Object.fromEntries(r.items.filter((e) => e.key.startsWith('RATE_LIMIT_') || e.key === 'REQUEST_LOG').map((e) => [e.key, e.value]))),
      () => {},
    );
  }, [city]);

  if (load.error) return <ErrorBox error={load.error} />;
  if (!form || !saved) return <Loading what="Reading the city's limits" />;

  const err = save.error instanceof ApiError ? save.error : null;
  const fieldError = (param: string) => (err?.param === param ? err.message : null);
  const id = (k: string) => `${city}-${k}`;

  return (
    <form
      class="limits"
      aria-label={`Limits of ${city}`}
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(null);
        const body = {
          city_id: city,
          limits: Object.fromEntries(LIMITS.map(({ key }) => [key, value(form.limits[key])])),
          user_budget: form.budgetOn ? { credits: value(form.credits), period: form.period } : null,
          request_log: form.requestLog || null,
        };
        const s = await save.run(() => post<CitySettings>('cities/update', body));
        if (s) {
          setSaved(s);
          setForm(toForm(s));
          setDone(`Saved at ${when(s.updated_at)}: they apply to the next call.`);
        }
      }}
    >
      <h3>Rate limits</h3>
      <p>
        <small>
          A value here overrides the env key for this city. <strong>Empty</strong> = use the env default (the <code>RATE_LIMIT_*</code> key;
          none set means no limit). <strong>0</strong> = off for this city, whatever the env says. Over a limit, calls get{' '}
          <code>429 rate_limited</code>. Set env defaults on the <a href={href('env')}>Env</a> page.
        </small>
      </p>
      <div class="form-grid">
        {LIMITS.map(({ key, label, env }) => {
          const msg = fieldError(`limits.${key}`);
          return (
            <div key={key}>
              <label for={id(key)}>{label}</label>
              <input
                id={id(key)}
                inputMode="numeric"
                autocomplete="off"
                placeholder="env default"
                value={form.limits[key]}
                aria-invalid={msg ? true : undefined}
                aria-describedby={`${id(key)}-help`}
                onInput={(e) => setForm({ ...form, limits: { ...form.limits, [key]: e.currentTarget.value } })}
              />
              <small id={`${id(key)}-help`} class={msg ? 'bad' : undefined}>
                {msg ?? (
                  <>
                    Now: <strong data-testid={`now-${key}`}>{describeLimit(saved.limits[key], envValues[env])}</strong>
                    <br />
                    <span class="muted">
                      Empty: <code>{env}</code>
                      {envValues[env] !== undefined ? ` = ${envValues[env]}` : ''}
                    </span>
                  </>
                )}
              </small>
            </div>
          );
        })}
      </div>

      <h3>Budget per user</h3>
      <p>
        <small>
          A cap on the credits one user of this city may spend per UTC day or month (a call that would pass it gets{' '}
          <code>402 budget_exceeded</code>). Off = no cap; a cap of 0 refuses every priced call.
        </small>
      </p>
      <label>
        <input type="checkbox" role="switch" checked={form.budgetOn} onChange={(e) => setForm({ ...form, budgetOn: e.currentTarget.checked })} />
        Cap what each user spends
      </label>
      {form.budgetOn && (
        <div class="form-grid">
          <div>
            <label for={id('credits')}>Credits per user</label>
            <input
              id={id('credits')}
              inputMode="numeric"
              autocomplete="off"
              value={form.credits}
              aria-invalid={fieldError('user_budget.credits') ? true : undefined}
              onInput={(e) => setForm({ ...form, credits: e.currentTarget.value })}
            />
            {fieldError('user_budget.credits') && <small class="bad">{fieldError('user_budget.credits')}</small>}
          </div>
          <div>
            <label for={id('period')}>Per</label>
            <select id={id('period')} value={form.period} onChange={(e) => setForm({ ...form, period: e.currentTarget.value as 'day' | 'month' })}>
              <option value="day">day (UTC)</option>
              <option value="month">month (UTC)</option>
            </select>
          </div>
        </div>
      )}
      <p>
        <small>
          Now: <span data-testid="now-budget">{saved.user_budget ? `${num(saved.user_budget.credits)} credits per user per ${saved.user_budget.period}` : 'no cap'}</span>
        </small>
      </p>
      <h3>Request logs</h3>
      <p>
        <small>
          What this city's AI calls keep for debugging, secrets redacted (shown from each usage record on the <a href={href('usage')}>Usage</a> page):{' '}
          <strong>metadata</strong> = headers, sizes, timings, status; <strong>full</strong> = the request and response bodies too (64 KiB each).
          Kept <code>REQUEST_LOG_RETENTION_DAYS</code> (default 7).
        </small>
      </p>
      <div class="form-grid">
        <div>
          <label for={id('request-log')}>Request logs for this city</label>
          <select id={id('request-log')} value={form.requestLog} onChange={(e) => setForm({ ...form, requestLog: e.currentTarget.value as Form['requestLog'] })}>
            <option value="">env default (REQUEST_LOG{envValues.REQUEST_LOG !== undefined ? ` = ${envValues.REQUEST_LOG}` : ''})</option>
            <option value="off">off</option>
            <option value="metadata">metadata</option>
            <option value="full">full (bodies)</option>
          </select>
          <small>
            Now: <strong data-testid="now-request-log">{saved.request_log ?? `env default (${envValues.REQUEST_LOG ?? 'off'})`}</strong>
          </small>
        </div>
      </div>
      <div class="actions-row">
        <button type="submit" aria-busy={save.busy} disabled={save.busy}>Save limits</button>
        <button type="button" class="secondary outline" disabled={save.busy} onClick={() => (setForm(toForm(saved)), save.setError(null), setDone(null))}>
          Undo changes
        </button>
      </div>
      <ErrorBox error={save.error} />
      {done && <p class="ok" role="status">{done}</p>}
    </form>
  );
}
