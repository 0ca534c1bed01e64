// The operations port: liveness, readiness, metrics. Bound to 127.0.0.1 by default: it is for
// the platform's probes and scrapers, not for customers.
import Fastify, { type FastifyInstance } from 'fastify'
import type { Registry } from 'prom-client'

/** What /readyz says: ready once caught up with the source, until the disk under it fills. */
export type Readiness = 'ready' | 'catching_up' | 'disk_full'

export interface AdminDeps {
  registry: Registry
  readiness: () => Readiness
}

export function buildAdmin(deps: AdminDeps): FastifyInstance {
  const app = Fastify({ logger: false })
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_req, reply) => {
    const status = deps.readiness()
    return reply.code(status === 'ready' ? 200 : 503).send({ status })
  })
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', deps.registry.contentType)
    return deps.registry.metrics()
  })
  return app
}
