// The stock catalog of services, in the order health lists them. Other folders add theirs here.
import type { ServiceDef } from '../kernel/service.ts';
import { accountsService } from './accounts/index.ts';
import { balanceService } from './balance/index.ts';
import { aiService } from './ai/index.ts';
import { bureausService } from './bureaus/index.ts';
import { citiesService } from './cities/index.ts';
import { envService } from './env/index.ts';
import { paymentService } from './payment/index.ts';
import { plansService } from './plans/index.ts';
import { usageService } from './usage/index.ts';
import { webhooksService } from './webhooks/index.ts';
import { mcpService } from './mcp/index.ts';

export const stockServices: ServiceDef[] = [envService, citiesService, bureausService, accountsService, balanceService, plansService, paymentService, usageService, aiService, webhooksService, mcpService];

/** The services named by a GATEWAY_SERVICES list (comma-separated), or all of them. */
export function selectServices(list: string | undefined, all: ServiceDef[] = stockServices): ServiceDef[] {
  if (!list || list.trim() === '') return all;
  const wanted = list.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = wanted.filter((id) => !all.some((s) => s.id === id));
  if (unknown.length) {
    throw new Error(`GATEWAY_SERVICES names unknown services: ${unknown.join(', ')} (known: ${all.map((s) => s.id).join(', ')})`);
  }
  return all.filter((s) => wanted.includes(s.id));
}
