// The stubs' embeddings: a deterministic unit vector per text (float32-exact values, so what a
// client decodes equals what a test computes). Each stub passes its own seed, so two providers
// answer the same text with different vectors and a test can tell which one answered.
export function unitVector(text: string, dims: number, seed: number): number[] {
  let h = seed;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  const v: number[] = [];
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) ^ i;
    const x = ((h >>> 0) % 2001) / 1000 - 1;
    v.push(x);
    norm += x * x;
  }
  const n = Math.sqrt(norm) || 1;
  return Array.from(new Float32Array(v.map((x) => x / n)));
}
