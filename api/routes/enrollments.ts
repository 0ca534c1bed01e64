// /enrollments, /enrollments/{id}, /group-enrollments and /group-enrollments/{id}: filtered by
// status, payer (exact, ignoring case: the stored payer_key is lower-cased) and provider or group.
import type { FastifyInstance } from 'fastify'
import { collections } from '../collections.ts'
import { registerDetail, registerList, type RouteContext } from './shared.ts'

export function enrollmentRoutes(app: FastifyInstance, ctx: RouteContext): void {
  registerList(app, ctx, collections.enrollments)
  registerDetail(app, collections.enrollments)
  registerList(app, ctx, collections['group-enrollments'])
  registerDetail(app, collections['group-enrollments'])
}
