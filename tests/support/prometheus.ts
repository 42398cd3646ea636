// Reads a Prometheus text page (as /metrics serves it) for tests: the value
// of a sample by name and labels, whatever order the labels come in.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(page: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of page.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(LABEL)) labels[k] = v.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of the samples named `name` whose labels include `labels` (0 when none). */
export function metricValue(page: string | Sample[], name: string, labels: Record<string, string> = {}): number {
  const samples = typeof page === 'string' ? parseMetrics(page) : page;
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
