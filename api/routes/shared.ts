// The two shapes every resource route takes: a list page and a detail. By the time a handler
// runs, the request is authenticated, within its rate limits and holds the route's scope
// (app.ts); what is left is 400 (parameters, cursor), then 404, then the page itself. Only then
// is the page cache consulted: it never answers a request those checks would refuse.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { canSeeSensitive, type Principal } from '../auth.ts'
import {
  type Collection,
  detailSql,
  orderSql,
  EMPTY_PAGE,
  lastPositionSql,
  type OrderSql,
  type PageRead,
  pageSql,
  readPage,
  type View,
} from '../collections.ts'
import { decodeCursor, encodeCursor, type Position } from '../cursor.ts'
import { ApiError, invalidRequest, notFound } from '../errors.ts'
import type { ApiMetrics } from '../metrics.ts'
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
import type { OrganizationFile } from '../store.ts'
import { type Allocate, ownedBuffer, type ResponseBuffers } from '../buffers.ts'
import { etagOf, listPageTag, noneMatch } from '../etag.ts'

export interface Clock {
  /** Epoch milliseconds. */
  now(): number
}

export interface RouteContext {
  readonly cursorSecret: string
  readonly clock: Clock
  readonly buffers: ResponseBuffers
  /** Whether list pages go through the page cache (PAGE_CACHE_MB above 0). */
  readonly cachePages: boolean
  readonly metrics: Pick<ApiMetrics, 'pageCacheLookup'>
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

/** What a list request asks for, once its parameters and cursor are checked. */
export interface ListRequest {
  readonly query: ListQuery
  readonly binding: string
  readonly after: Position | undefined
  /** The page cache's key of the page (listPageKey). */
  readonly pageKey: string
  /**
   * A poll from the start of its `updated_since` (no cursor): the key of its list, filters but
   * `updated_since` (`cursorBinding`), whose last position tells whether the page is empty.
   */
  readonly pollOf: string | undefined
}

/** Parsed list requests kept per route context, by organization, list, view and URL. */
const parsedLists = new WeakMap<RouteContext, Map<string, ListRequest>>()
const PARSED_LISTS_MAX = 10_000

/**
 * Parameters and cursor of a list request (400 when invalid). The answer depends only on the
 * organization, the list, the view and the URL: a valid one is kept (pollers ask for the same
 * URLs again and again), which spares a cached page a third of its own work.
 */
export function listRequest(
  ctx: RouteContext,
  principal: Principal,
  list: ListName,
  view: View,
  request: FastifyRequest,
  arity: number,
): ListRequest {
  let parsed = parsedLists.get(ctx)
  if (parsed === undefined) {
    parsed = new Map()
    parsedLists.set(ctx, parsed)
  }
  const memoKey = `${principal.organizationId}\u0000${list}\u0000${view}\u0000${request.url}`
  const kept = parsed.get(memoKey)
  if (kept !== undefined) return kept
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
  const pollOf =
    query.filters.updatedSince === undefined || after !== undefined
      ? undefined
      : cursorBinding(principal.organizationId, list, view, {
          ...query.filters,
          updatedSince: undefined,
        })
  const checked = {
    query,
    binding,
    after,
    pageKey: listPageKey(binding, after, query.limit),
    pollOf,
  }
  if (parsed.size >= PARSED_LISTS_MAX) parsed.clear()
  parsed.set(memoKey, checked)
  return checked
}

/**
 * A 200 with its ETag (etag.ts), or 304 without a body when the request's If-None-Match names it.
 * `kept`: the body is sent again unchanged (a cached page), so its tag is kept with it.
 */
export function sendJson(reply: FastifyReply, body: Buffer | string, kept = false): FastifyReply {
  return sendTagged(reply, body, etagOf(body, kept))
}

/** A 200 with the ETag given, or 304 without a body when the request's If-None-Match names it. */
export function sendTagged(reply: FastifyReply, body: Buffer | string, tag: string): FastifyReply {
  reply.header('etag', tag)
  if (noneMatch(reply.request.headers['if-none-match'], tag)) return reply.code(304).send()
  return reply.type(JSON_TYPE).send(body)
}

/** Sends a body built into a reusable buffer, given back once the response is done. */
export function sendBuilt(
  ctx: RouteContext,
  reply: FastifyReply,
  build: (allocate: Allocate) => Buffer,
  tag?: string,
): FastifyReply {
  const body = build(responseAllocator(ctx, reply))
  return sendTagged(reply, body, tag ?? etagOf(body, false))
}

/** Allocates a response's body in a reused slab, given back once the response is done. */
function responseAllocator(ctx: RouteContext, reply: FastifyReply): Allocate {
  const lease = ctx.buffers.lease()
  reply.raw.once('close', lease.release)
  return lease.allocate
}

/** The tags of cached list pages (listPageTag), kept with their bodies for as long as they live. */
const pageTags = new WeakMap<Buffer, string>()

/**
 * What a list page's bytes depend on besides the file's state: the binding (organization, list,
 * view, every normalized filter including updated_since; the cursor's MAC is made of it), the
 * position the page starts after and the page size. The cursor secret is fixed for the process.
 */
export function listPageKey(binding: string, after: Position | undefined, limit: number): string {
  return JSON.stringify([binding, after ?? null, limit])
}

export function registerList(app: FastifyInstance, ctx: RouteContext, collection: Collection) {
  // The name each view's known bodies are kept under in a file's handle (store.ts `bodies`).
  const bodiesOf: Record<View, string> = {
    base: `${collection.table}.${collection.columns.base.body}`,
    sensitive: `${collection.table}.${collection.columns.sensitive.body}`,
  }
  // And the statements of each view's order (store.ts `order`).
  const orderSqlOf: Record<View, OrderSql> = {
    base: orderSql(collection, 'base'),
    sensitive: orderSql(collection, 'sensitive'),
  }
  app.get(collection.path, { config: { scope: collection.scope } }, (request, reply) => {
    const { principal, served } = caller(request)
    const view = viewOf(collection, principal)
    const { query, binding, after, pageKey, pollOf } = listRequest(
      ctx,
      principal,
      collection.list,
      view,
      request,
      2,
    )
    const bodyColumn = collection.columns[view].body
    const read = (file: OrganizationFile) =>
      readPage(
        file,
        pageSql(collection, view, query.filters, after, query.limit),
        file.bodies(bodiesOf[view]),
        file.order(orderSqlOf[view]),
      )
    const cursorOf = ({ next }: { next: Position | undefined }) =>
      next === undefined ? null : encodeCursor(ctx.cursorSecret, binding, next)
    if (!ctx.cachePages) {
      const page = served.organizations.read(principal, read)
      const cursor = cursorOf(page)
      const tag = listPageTag(bodyColumn, page.versions, cursor)
      return sendBuilt(ctx, reply, (allocate) => listBody(page.bodies, cursor, allocate), tag)
    }
    // The body of a page, built with its tag (kept beside it: a cached body is sent again with it).
    const build = (page: PageRead<Buffer | readonly Buffer[]>, allocate: Allocate) => {
      const cursor = cursorOf(page)
      const body = listBody(page.bodies, cursor, allocate)
      pageTags.set(body, listPageTag(bodyColumn, page.versions, cursor))
      return body
    }
    // A poll past the end of its list (most polls: nothing changed since the last one) is empty,
    // known from where the list ends at the file's current state, read once per state: the same
    // bytes and tag as the page read from the file, without reading it. A poll whose page is
    // cached goes to it directly: the end would cost it a second read of the file's version.
    const quietPoll = (file: OrganizationFile) => {
      if (pollOf === undefined || file.pages.has(pageKey)) return undefined
      const { last, hit } = file.lastPosition(
        pollOf,
        () =>
          file.rows(lastPositionSql(collection, view, query.filters))[0] as Position | undefined,
      )
      if (last !== undefined && last[0]! >= query.filters.updatedSince!) return undefined
      return { body: build(EMPTY_PAGE, responseAllocator(ctx, reply)), hit }
    }
    // A body the cache keeps is built in a buffer of its own and sent again and again with its
    // tag; one it does not is built in a slab, reused once its response is done.
    const { body, hit } = served.organizations.read(
      principal,
      (file) =>
        quietPoll(file) ??
        file.cachedPage(pageKey, (kept) =>
          build(read(file), kept ? ownedBuffer : responseAllocator(ctx, reply)),
        ),
    )
    ctx.metrics.pageCacheLookup(hit)
    const tag = pageTags.get(body)
    if (tag === undefined) throw new Error('a cached list page without its tag')
    return sendTagged(reply, body, tag)
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
      const body = served.organizations.read(principal, (file) => file.value(sql))
      if (typeof body !== 'string') throw notFound()
      return sendJson(reply, detailBody(body))
    },
  )
}
