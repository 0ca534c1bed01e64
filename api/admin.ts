// The operations server, on its own port (127.0.0.1 by default): liveness, readiness, metrics.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Logger } from '../src/log.ts'
import type { ApiMetrics } from './metrics.ts'
import type { Replica } from './replica.ts'

export function buildAdmin(deps: {
  logger: Logger
  metrics: ApiMetrics
  replica: Replica
}): FastifyInstance {
  const logger: FastifyBaseLogger = deps.logger.child({ server: 'admin' })
  const admin = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
  })
  admin.get('/healthz', (_request, reply) => reply.send({ status: 'ok' }))
  admin.get('/readyz', (_request, reply) => {
    const ready = deps.replica.usable()
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'not_ready',
      generation: deps.replica.generationName ?? null,
    })
  })
  admin.get('/metrics', async (_request, reply) => {
    const body = await deps.metrics.registry.metrics()
    return reply.type(deps.metrics.registry.contentType).send(body)
  })
  return admin
}
