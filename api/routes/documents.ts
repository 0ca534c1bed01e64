// /documents: metadata only, never anything that locates or returns the file. No detail route.
import type { FastifyInstance } from 'fastify'
import { collections } from '../collections.ts'
import { registerList, type RouteContext } from './shared.ts'

export function documentRoutes(app: FastifyInstance, ctx: RouteContext): void {
  registerList(app, ctx, collections.documents)
}
