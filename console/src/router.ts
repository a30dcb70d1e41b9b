// Hash routes (#/cities, #/users?city=x&user=y): the gateway serves one index.html and
// nothing about a page travels to the server, on Node and on Workers alike.
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  page: string;
  params: URLSearchParams;
}

export function parseHash(hash = location.hash): Route {
  const [path, q = ''] = hash.replace(/^#\/?/, '').split('?');
  return { page: path || 'overview', params: new URLSearchParams(q) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const on = () => setRoute(parseHash());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

export function href(page: string, params: Record<string, string | undefined> = {}): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) p.set(k, v);
  const q = p.toString();
  return `#/${page}${q ? `?${q}` : ''}`;
}

export const go = (page: string, params: Record<string, string | undefined> = {}) => void (location.hash = href(page, params));
