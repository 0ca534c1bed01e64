// /provider-groups and /provider-groups/{id}.
import type { FastifyInstance } from 'fastify'
import { collections } from '../collections.ts'
import { registerDetail, registerList, type RouteContext } from './shared.ts'

export function providerGroupRoutes(app: FastifyInstance, ctx: RouteContext): void {
  registerList(app, ctx, collections['provider-groups'])
  registerDetail(app, collections['provider-groups'])
}
