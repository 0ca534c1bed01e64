// /expirables: ordered by (expiresOn, sourceType, sourceId), windowed by within_days from the
// current UTC date; each stored body is completed with daysUntilExpiration and updatedAt.
import type { FastifyInstance } from 'fastify'
import { expirables, expirablesSql } from '../collections.ts'
import { encodeCursor } from '../cursor.ts'
import { addDays, daysBetween, expirableBody, listBody, utcDate } from '../page.ts'
import { WITHIN_DAYS } from '../params.ts'
import { caller, listRequest, sendBuilt, type RouteContext } from './shared.ts'

export function expirableRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get(expirables.path, { config: { scope: expirables.scope } }, (request, reply) => {
    const { principal, served } = caller(request)
    const { query, binding, after } = listRequest(ctx, principal, 'expirables', 'base', request, 3)
    const today = utcDate(ctx.clock.now())
    const lastDay = addDays(today, query.filters.withinDays ?? WITHIN_DAYS.default)
    const sql = expirablesSql(today, lastDay, after, query.limit + 1)
    const rows = served.organizations.read(principal, (file) => file.rows(sql))
    const page = rows.slice(0, query.limit)
    const last = page[page.length - 1]
    const next =
      rows.length > query.limit && last !== undefined
        ? encodeCursor(ctx.cursorSecret, binding, [last[0], last[1], last[2]] as string[])
        : null
    const bodies = page.map((row) =>
      expirableBody(row[4] as string, daysBetween(today, row[0] as string), row[3] as string),
    )
    return sendBuilt(ctx, reply, (allocate) => listBody(bodies.join(','), next, allocate))
  })
}
