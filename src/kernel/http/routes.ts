// Finding the action of a /v1/{service}/{action} URL, without building a URL object.
import type { AnyAction, ServiceDef } from '../service.ts';

/**
 * The path of a request's URL, as URL.pathname gives it, without building a URL object: the
 * runtimes hand over URLs already normalized (dot segments resolved, characters escaped).
 */
export function pathOf(href: string): string {
  const start = href.indexOf('/', href.indexOf('//') + 2);
  if (start < 0) return '/';
  let end = href.indexOf('?', start);
  if (end < 0) end = href.length;
  const hash = href.indexOf('#', start);
  return href.slice(start, hash >= 0 && hash < end ? hash : end);
}

export function findAction(service: ServiceDef, path: string): { action: AnyAction; id: string; restPath: string } | null {
  const exact = service.actions[path];
  if (exact && !path.endsWith('/*')) return { action: exact, id: path, restPath: '' };
  for (const [id, action] of Object.entries(service.actions)) {
    if (!id.endsWith('/*')) continue;
    const prefix = id.slice(0, -1);
    if (path.startsWith(prefix) && path.length > prefix.length) return { action, id, restPath: path.slice(prefix.length) };
  }
  return null;
}

export function cityIdOf(raw: unknown): string | null {
  if (raw && typeof raw === 'object' && !Array.isArray(raw) && 'city_id' in raw) {
    const v = (raw as { city_id: unknown }).city_id;
    if (typeof v === 'string') return v;
  }
  return null;
}
