// The cities this credential can see (all for the admin, its own for a bureau).
import { get, type City } from './api.ts';
import { useWho } from './app.tsx';
import { useLoad } from './ui.tsx';

export function useCities() {
  const who = useWho();
  return useLoad(async () => (who.kind === 'bureau' && who.city ? [who.city] : (await get<{ items: City[] }>('cities/list')).items), [who]);
}
