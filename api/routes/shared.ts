// The two shapes every resource route takes: a list page and a detail. By the time a handler
// runs, the request is authenticated, within its rate limits and holds the route's scope
// (app.ts); what is left is 400 (parameters, cursor), then 404, then the page itself.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { canSeeSensitive, type Principal } from '../auth.ts'
import { type Collection, detailSql, pageSql, readPage, type View } from '../collections.ts'
import { decodeCursor, encodeCursor, type Position } from '../cursor.ts'
import { ApiError, invalidRequest, notFound } from '../errors.ts'
import { detailBody, listBody } from '../page.ts'
import {
  cursorBinding,
  type ListName,
  type ListQuery,
  parseListQuery,
  parseNoParams,
  rawQueryOf,
} from '../params.ts'
import type { ServedGeneration } from '../replica.ts'
import type { Allocate, ResponseBuffers } from '../buffers.ts'

export interface Clock {
  /** Epoch milliseconds. */
  now(): number
}

export interface RouteContext {
  readonly cursorSecret: string
  readonly clock: Clock
  readonly buffers: ResponseBuffers
}

export const JSON_TYPE = 'application/json; charset=utf-8'

/** What the authentication hook attached to a request of a protected route. */
export function caller(request: FastifyRequest): {
  principal: Principal
  served: ServedGeneration
} {
  const { principal, served } = request
  if (principal === null || served === null) throw new Error('route reached without authentication')
  return { principal, served }
}

export function viewOf(collection: Collection, principal: Principal): View {
  return collection.list === 'providers' && canSeeSensitive(principal) ? 'sensitive' : 'base'
}

/** Parameters and cursor of a list request (400 when invalid). */
export function listRequest(
  ctx: RouteContext,
  principal: Principal,
  list: ListName,
  view: View,
  request: FastifyRequest,
  arity: number,
): { query: ListQuery; binding: string; after: Position | undefined } {
  const query = parseListQuery(list, rawQueryOf(request.url))
  if (query instanceof ApiError) throw query
  const binding = cursorBinding(principal.organizationId, list, view, query.filters)
  let after: Position | undefined
  if (query.cursor !== undefined) {
    after = decodeCursor(ctx.cursorSecret, binding, query.cursor, arity)
    if (after === undefined) {
      throw invalidRequest(
        'cursor is malformed, was altered, or was issued for another endpoint or set of filters',
      )
    }
  }
  return { query, binding, after }
}

export function sendJson(reply: FastifyReply, body: Buffer | string): FastifyReply {
  return reply.type(JSON_TYPE).send(body)
}

/** Sends a body built into a reusable buffer, given back once the response is done. */
export function sendBuilt(
  ctx: RouteContext,
  reply: FastifyReply,
  build: (allocate: Allocate) => Buffer,
): FastifyReply {
  const lease = ctx.buffers.lease()
  reply.raw.once('close', lease.release)
  return sendJson(reply, build(lease.allocate))
}

export function registerList(app: FastifyInstance, ctx: RouteContext, collection: Collection) {
  app.get(collection.path, { config: { scope: collection.scope } }, (request, reply) => {
    const { principal, served } = caller(request)
    const view = viewOf(collection, principal)
    const { query, binding, after } = listRequest(ctx, principal, collection.list, view, request, 2)
    const page = pageSql(collection, view, query.filters, after, query.limit)
    const { bodies, next } = served.organizations.read(principal.organizationId, (file) =>
      readPage(file, page),
    )
    const cursor = next === undefined ? null : encodeCursor(ctx.cursorSecret, binding, next)
    return sendBuilt(ctx, reply, (allocate) => listBody(bodies, cursor, allocate))
  })
}

export function registerDetail(app: FastifyInstance, collection: Collection) {
  app.get<{ Params: { id: string } }>(
    `${collection.path}/:id`,
    { config: { scope: collection.scope } },
    (request, reply) => {
      const { principal, served } = caller(request)
      const invalid = parseNoParams(rawQueryOf(request.url))
      if (invalid !== undefined) throw invalid
      const sql = detailSql(collection, viewOf(collection, principal), request.params.id)
      const body = served.organizations.read(principal.organizationId, (file) => file.value(sql))
      if (typeof body !== 'string') throw notFound()
      return sendJson(reply, detailBody(body))
    },
  )
}
