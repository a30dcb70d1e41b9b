// citygate's own time per AI call (x-citygate-overhead-ms: the request's time minus upstream
// waits), so usage/stats can report p50/p99 overhead per city, model and day. Older records
// have none (NULL).
export default [`ALTER TABLE usage ADD COLUMN overhead_ms REAL`];
