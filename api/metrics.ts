// Prometheus metrics of the api, in a registry of its own (two apps in one process, as in tests,
// do not share counters).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

export interface ApiMetrics {
  readonly registry: Registry
  observeRequest(route: string, status: number, seconds: number): void
  rateLimited(policy: string): void
}

export function createMetrics(openFiles: () => number): ApiMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
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
  const limited = new Counter({
    name: 'api_rate_limited_total',
    help: 'Requests refused with 429, by the limit exceeded',
    labelNames: ['policy'] as const,
    registers: [registry],
  })
  new Gauge({
    name: 'api_open_file_handles',
    help: 'SQLite files the api holds open (control and organization files, all generations)',
    registers: [registry],
    collect() {
      this.set(openFiles())
    },
  })
  return {
    registry,
    observeRequest(route, status, seconds) {
      requests.inc({ route, status: String(status) })
      duration.observe({ route }, seconds)
    },
    rateLimited(policy) {
      limited.inc({ policy })
    },
  }
}
