// The operations server, on its own port (127.0.0.1 by default): liveness, readiness, metrics.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Logger } from '../src/log.ts'
import type { ApiMetrics } from './metrics.ts'
import type { Replica } from './replica.ts'

export function buildAdmin(deps: {
  logger: Logger
  metrics: ApiMetrics
  replica: Replica
  /** Known and staler than this: not ready (docs/freshness.md). */
  maxStalenessMs: number
  now: () => number
}): FastifyInstance {
  const logger: FastifyBaseLogger = deps.logger.child({ server: 'admin' })
  const admin = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
  })
  admin.get('/healthz', (_request, reply) => reply.send({ status: 'ok' }))
  admin.get('/readyz', (_request, reply) => {
    const usable = deps.replica.usable()
    // Unknown staleness (no heartbeat applied yet) does not fail readiness: the projector warns
    // about it, and responses say so; a known one past the bound drains the node until it recovers.
    const stalenessMs = usable ? deps.replica.stalenessMs(deps.now()) : undefined
    const stale = stalenessMs !== undefined && stalenessMs > deps.maxStalenessMs
    const ready = usable && !stale
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : stale ? 'stale' : 'not_ready',
      generation: deps.replica.generationName ?? null,
      stalenessMs: stalenessMs ?? null,
      maxStalenessMs: deps.maxStalenessMs,
    })
  })
  admin.get('/metrics', async (_request, reply) => {
    const body = await deps.metrics.registry.metrics()
    return reply.type(deps.metrics.registry.contentType).send(body)
  })
  return admin
}
