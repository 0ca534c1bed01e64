// /providers and /providers/{id}: keys holding providers:read:sensitive are served the variant
// with the six sensitive fields, ordered and filtered by its own stamp.
import type { FastifyInstance } from 'fastify'
import { collections } from '../collections.ts'
import { registerDetail, registerList, type RouteContext } from './shared.ts'

export function providerRoutes(app: FastifyInstance, ctx: RouteContext): void {
  registerList(app, ctx, collections.providers)
  registerDetail(app, collections.providers)
}
