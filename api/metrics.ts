// Prometheus metrics of the api, in a registry of its own (two apps in one process, as in tests,
// do not share counters).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** The signal a request was refused on by load shedding (api/overload.ts). */
export type ShedReason = 'event_loop_delay' | 'queue_delay' | 'in_flight'

export interface ApiMetrics {
  readonly registry: Registry
  observeRequest(route: string, status: number, seconds: number): void
  rateLimited(policy: string): void
  /** A request refused by load shedding (api/overload.ts), by the signal that refused it. */
  shed(reason: ShedReason): void
  /** A list page looked up in the page cache: found (hit) or read from the file (miss). */
  pageCacheLookup(hit: boolean): void
  /** A response whose freshness instant was ahead of this host's clock (clamped, counted). */
  clockSkewed(): void
}

/** What the gauges read when scraped. */
export interface Gauges {
  /** SQLite files held open. */
  openFiles(): number
  /** Bytes held by the page cache: list pages and documents' bodies. */
  pageCacheBytes(): number
  /** Milliseconds the served generation is behind its source (docs/freshness.md); undefined: unknown. */
  stalenessMs(): number | undefined
}

export function createMetrics(gauges: Gauges): ApiMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const { observeRequest } = requestMetrics(registry)
  const refusals = refusalMetrics(registry)
  const replica = replicaMetrics(registry, gauges)
  return { registry, observeRequest, ...refusals, ...replica }
}

/** Requests answered, by route and status, and their time. */
function requestMetrics(registry: Registry): Pick<ApiMetrics, 'observeRequest'> {
  const requests = new Counter({
    name: 'api_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'api_http_request_duration_seconds',
    help: 'Time to answer a request, by route',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  })
  // Each request's series, looked up once per route and status (route patterns and statuses are
  // few): prom-client otherwise hashes the labels on every call. Nested maps, so that the lookup
  // builds no key string per request.
  type Serie = { answered: () => void; took: (seconds: number) => void }
  const series = new Map<string, Map<number, Serie>>()
  return {
    observeRequest: (route, status, seconds) => {
      let byStatus = series.get(route)
      if (byStatus === undefined) {
        byStatus = new Map()
        series.set(route, byStatus)
      }
      let serie = byStatus.get(status)
      if (serie === undefined) {
        const count = requests.labels({ route, status: String(status) })
        const time = duration.labels({ route })
        serie = { answered: () => count.inc(), took: (s) => time.observe(s) }
        byStatus.set(status, serie)
      }
      serie.answered()
      serie.took(seconds)
    },
  }
}

/** Requests refused before their route: rate limits (429) and load shedding (503). */
function refusalMetrics(registry: Registry): Pick<ApiMetrics, 'rateLimited' | 'shed'> {
  const limited = new Counter({
    name: 'api_rate_limited_total',
    help: 'Requests refused with 429, by the limit exceeded',
    labelNames: ['policy'] as const,
    registers: [registry],
  })
  const shed = new Counter({
    name: 'api_shed_total',
    help: 'Requests refused with 503 because the api was over capacity, by the signal that refused them',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  // Every series from the start: an alert on their rate needs them before the first refusal.
  shed.inc({ reason: 'event_loop_delay' }, 0)
  shed.inc({ reason: 'queue_delay' }, 0)
  shed.inc({ reason: 'in_flight' }, 0)
  return {
    rateLimited: (policy) => limited.inc({ policy }),
    shed: (reason) => shed.inc({ reason }),
  }
}

/** The files served: open handles, the page cache, and how fresh the data is. */
function replicaMetrics(
  registry: Registry,
  gauges: Gauges,
): Pick<ApiMetrics, 'pageCacheLookup' | 'clockSkewed'> {
  new Gauge({
    name: 'api_open_file_handles',
    help: 'SQLite files the api holds open (control and organization files, all generations)',
    registers: [registry],
    collect() {
      this.set(gauges.openFiles())
    },
  })
  const pageCache = new Counter({
    name: 'api_page_cache_lookups_total',
    help: 'List pages looked up in the page cache, by result (hit: served without reading the file)',
    labelNames: ['result'] as const,
    registers: [registry],
  })
  new Gauge({
    name: 'api_page_cache_bytes',
    help: "Bytes of list pages and documents' bodies cached, across every open organization file",
    registers: [registry],
    collect() {
      this.set(gauges.pageCacheBytes())
    },
  })
  // Both series exist from the start, so a hit ratio is defined before the first lookup.
  pageCache.inc({ result: 'hit' }, 0)
  pageCache.inc({ result: 'miss' }, 0)
  const skew = new Counter({
    name: 'replica_api_clock_skew_anomalies_total',
    help: "Responses whose freshness instant was after this host's clock: the clocks disagree (the lag was clamped to 0).",
    registers: [registry],
  })
  new Gauge({
    name: 'replica_api_staleness_seconds',
    help: 'Now minus the commit instant the served generation is complete through (Replica-Complete-Through); NaN while unknown.',
    registers: [registry],
    collect() {
      const lag = gauges.stalenessMs()
      this.set(lag === undefined ? Number.NaN : lag / 1000)
    },
  })
  const hits = pageCache.labels({ result: 'hit' })
  const misses = pageCache.labels({ result: 'miss' })
  return {
    pageCacheLookup: (hit) => (hit ? hits.inc() : misses.inc()),
    clockSkewed: () => skew.inc(),
  }
}
