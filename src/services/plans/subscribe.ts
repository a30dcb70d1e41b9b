// plans/subscribe, plans/portal and the providers' subscription webhooks (filled in below).
import type { AnyAction } from '../../kernel/service.ts';

export const subscriptionActions: Record<string, AnyAction> = {};
