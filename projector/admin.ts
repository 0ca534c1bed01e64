// The operations port: liveness, readiness, metrics. Bound to 127.0.0.1 by default: it is for
// the platform's probes and scrapers, not for customers.
import Fastify, { type FastifyInstance } from 'fastify'
import type { Registry } from 'prom-client'

export interface AdminDeps {
  registry: Registry
  /** Ready once the replica has caught up with its source. */
  isReady: () => boolean
}

export function buildAdmin(deps: AdminDeps): FastifyInstance {
  const app = Fastify({ logger: false })
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_req, reply) => {
    if (deps.isReady()) return { status: 'ready' }
    return reply.code(503).send({ status: 'catching_up' })
  })
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', deps.registry.contentType)
    return deps.registry.metrics()
  })
  return app
}
