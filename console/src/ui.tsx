// Small shared pieces: data loading with loading/error states, empty states, a confirm
// dialog for destructive actions, a copy button, number and date formats.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: Error | null;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` when `deps` change (and on reload()); keeps the last data while reloading. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load().then(
      (d) => live && (setData(d), setError(null), setLoading(false)),
      (e) => live && (setError(e as Error), setLoading(false)),
    );
    return () => void (live = false);
  }, [...deps, tick]);
  return { data, error, loading, reload: useCallback(() => setTick((t) => t + 1), []) };
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="loading" aria-busy="true" role="status">
      {what}…
    </p>
  );
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error as Error;
  const detail = e instanceof ApiError ? `${e.status ? `${e.status} · ` : ''}${e.code}` : null;
  return (
    <div class="error" role="alert">
      <strong>{e.message}</strong>
      {detail && <small> ({detail})</small>}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/** Shows loading, error or the content of a load. */
export function Show<T>({ load, children }: { load: Loaded<T>; children: (d: T) => ComponentChildren }) {
  if (load.error) return <ErrorBox error={load.error} />;
  if (load.data === undefined) return <Loading />;
  return <>{children(load.data)}</>;
}

/** A button that asks before it does something that cannot be undone. */
export function ConfirmButton(props: {
  label: string;
  question: string;
  confirmLabel?: string;
  onConfirm: () => Promise<unknown> | void;
  class?: string;
  disabled?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  return (
    <>
      <button type="button" class={props.class ?? 'secondary outline'} disabled={props.disabled || busy} onClick={() => dialog.current?.showModal()}>
        {props.label}
      </button>
      <dialog ref={dialog} aria-label={props.question}>
        <article>
          <p>{props.question}</p>
          <footer>
            <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
              Cancel
            </button>{' '}
            <button
              type="button"
              class="danger"
              onClick={async () => {
                dialog.current?.close();
                setBusy(true);
                try {
                  await props.onConfirm();
                } finally {
                  setBusy(false);
                }
              }}
            >
              {props.confirmLabel ?? props.label}
            </button>
          </footer>
        </article>
      </dialog>
    </>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState<string | null>(null);
  return (
    <button
      type="button"
      class="secondary copy"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setDone('Copied');
        } catch {
          setDone('Select and copy it by hand');
        }
        setTimeout(() => setDone(null), 2000);
      }}
    >
      {done ?? label}
    </button>
  );
}

/** A secret shown once on purpose (a new token), with a copy button. */
export function OneTimeSecret({ title, value, note }: { title: string; value: string; note?: string }) {
  return (
    <div class="secret" role="status">
      <strong>{title}</strong>
      <p>{note ?? 'Shown once: copy it now. citygate keeps no readable copy.'}</p>
      <div class="secret-row">
        <code class="token" data-testid="one-time-secret">{value}</code>
        <CopyButton text={value} />
      </div>
    </div>
  );
}

/** An action button that shows progress and any error next to it. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async <T,>(f: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await f();
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
}

/** The last error names this field (its `param`, up to the first dot): mark the input invalid. */
export const invalidIn = (error: unknown) => (k: string) => (error instanceof ApiError && error.param?.split('.')[0] === k ? true : undefined);

type StringKeys<F> = { [K in keyof F]: F[K] extends string ? K : never }[keyof F] & string;

/**
 * A form's text inputs: `input(key, label)` renders a labelled input bound to `f[key]` (ids
 * prefixed with `prefix`, so two forms on a page never share one), marked invalid when the last
 * error names it.
 */
export function textInputs<F>(prefix: string, f: F, setF: (f: F) => void, error: unknown) {
  const invalid = invalidIn(error);
  const input = (k: StringKeys<F>, label: string, extra: Record<string, unknown> = {}) => (
    <div>
      <label for={`${prefix}-${k}`}>{label}</label>
      <input id={`${prefix}-${k}`} autocomplete="off" value={f[k] as string} aria-invalid={invalid(k)} onInput={(e) => setF({ ...f, [k]: e.currentTarget.value })} {...extra} />
    </div>
  );
  return { input, invalid };
}

const nf = new Intl.NumberFormat('en-US');
export const num = (n: number | null | undefined) => (n == null ? '—' : nf.format(n));
export const ms = (n: number | null | undefined) => (n == null ? '—' : `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`);
export const usd = (credits: number) => `$${(credits / 1_000_000).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 })}`;
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString('en-GB', { dateStyle: 'short', timeStyle: 'medium', timeZone: 'UTC' }) + ' UTC' : '—');
export const today = () => new Date().toISOString().slice(0, 10);
export const daysAgo = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);

export function Badge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status}</span>;
}

export function PageHead({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <header class="page-head">
      <h1>{title}</h1>
      {children && <div class="page-actions">{children}</div>}
    </header>
  );
}
