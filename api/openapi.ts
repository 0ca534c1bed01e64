// The OpenAPI 3.1 document of the whole API, generated at start-up from the zod schemas the
// projector builds documents with (schema/resources.ts) and the parameter rules of params.ts.
import { z } from 'zod'
import * as resources from '../schema/resources.ts'
import { collections, expirables } from './collections.ts'
import { MAX_CURSOR_LENGTH } from './cursor.ts'
import { errorCodes, errorStatus, type ErrorCode } from './errors.ts'
import { LIMIT, listParams, MAX_FILTER_LENGTH, WITHIN_DAYS, type ParamName } from './params.ts'

export const errorEnvelope = z
  .strictObject({
    error: z.strictObject({
      code: z.enum(errorCodes as [ErrorCode, ...ErrorCode[]]).describe('stable, machine-readable'),
      message: z.string().describe('for people; may change'),
    }),
  })
  .meta({ id: 'Error' })

const list = (id: string, item: z.ZodType) =>
  z
    .strictObject({
      data: z.array(item),
      nextCursor: z
        .string()
        .nullable()
        .describe('pass back as `cursor` for the next page; null at the end of the list'),
    })
    .meta({ id })
const detail = (id: string, item: z.ZodType) => z.strictObject({ data: item }).meta({ id })

const anyProvider = z.union([resources.provider, resources.sensitiveProvider])

const envelopes = {
  providers: {
    list: list('ProviderList', anyProvider),
    detail: detail('ProviderDetail', anyProvider),
  },
  'provider-groups': {
    list: list('ProviderGroupList', resources.providerGroup),
    detail: detail('ProviderGroupDetail', resources.providerGroup),
  },
  enrollments: {
    list: list('EnrollmentList', resources.enrollment),
    detail: detail('EnrollmentDetail', resources.enrollment),
  },
  'group-enrollments': {
    list: list('GroupEnrollmentList', resources.groupEnrollment),
    detail: detail('GroupEnrollmentDetail', resources.groupEnrollment),
  },
  documents: { list: list('DocumentList', resources.documentMetadata), detail: undefined },
  expirables: { list: list('ExpirableList', resources.expirable), detail: undefined },
} as const

const parameters: Record<ParamName, { schema: z.ZodType; description: string }> = {
  limit: {
    schema: z.int().min(LIMIT.min).max(LIMIT.max).default(LIMIT.default),
    description: 'page size',
  },
  cursor: {
    schema: z.string().min(1).max(MAX_CURSOR_LENGTH),
    description: '`nextCursor` of the previous page, unchanged; omit for the first page',
  },
  updated_since: {
    schema: z.iso.datetime({ offset: true }),
    description: 'only rows whose updatedAt is at or after this instant (inclusive)',
  },
  active: {
    schema: z.enum(['true', 'false']),
    description: 'employment status; both when omitted',
  },
  status: { schema: z.enum(resources.enrollmentStatuses), description: 'exact status' },
  payer: {
    schema: z.string().min(1).max(MAX_FILTER_LENGTH),
    description: 'payer name, matched exactly ignoring case',
  },
  provider_id: { schema: z.string().min(1).max(MAX_FILTER_LENGTH), description: 'provider id' },
  group_id: {
    schema: z.string().min(1).max(MAX_FILTER_LENGTH),
    description: 'provider group id',
  },
  within_days: {
    schema: z.int().min(WITHIN_DAYS.min).max(WITHIN_DAYS.max).default(WITHIN_DAYS.default),
    description: 'only items with today <= expiresOn <= today + within_days (UTC dates)',
  },
}

const parameterComponent = (name: ParamName) => `#/components/parameters/${name}`

type Json = Record<string, unknown>

/** Removes what is per-document in zod's output ($schema, $id) and names shared definitions. */
function componentSchemas(): Json {
  const { schemas } = z.toJSONSchema(z.globalRegistry, {
    target: 'draft-2020-12',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Json> }
  const shared = (schemas.__shared?.$defs ?? {}) as Record<string, Json>
  delete schemas.__shared
  const renames = new Map<string, string>()
  for (const [name, schema] of Object.entries(shared)) {
    const component = name === 'schema0' ? 'JsonValue' : `Shared_${name}`
    renames.set(`#/components/schemas/__shared#/$defs/${name}`, `#/components/schemas/${component}`)
    schemas[component] = schema
  }
  const clean = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(clean)
    if (value === null || typeof value !== 'object') return value
    const out: Json = {}
    for (const [k, v] of Object.entries(value as Json)) {
      if (k === '$schema' || k === '$id') continue
      out[k] = k === '$ref' && typeof v === 'string' ? (renames.get(v) ?? v) : clean(v)
    }
    return out
  }
  return clean(schemas) as Json
}

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` })

const rateLimitHeaders = {
  'RateLimit-Policy': 'the per-key and per-organization quota policies (IETF httpapi draft)',
  RateLimit: 'remaining requests and seconds to reset of each policy (IETF httpapi draft)',
  'RateLimit-Limit': 'quota of the tighter policy',
  'RateLimit-Remaining': 'requests left in the tighter policy',
  'RateLimit-Reset': 'seconds until the tighter policy resets',
}
/** Every response of an organization (docs/freshness.md), and every 200's tag (api/etag.ts). */
const freshnessHeaders = {
  'Replica-Complete-Through': {
    description:
      "The PostgreSQL commit instant (RFC 3339, UTC, milliseconds) through which this organization's data is complete: every change committed at or before it is reflected in the body. `unknown` when the replica cannot prove one yet (no heartbeat applied, or a rebuilt file not yet caught up): it is said, never guessed.",
    schema: {
      type: 'string',
      pattern: '^(unknown|\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z)$',
    },
  },
  'Replica-Lag-Ms': {
    description:
      'Milliseconds from Replica-Complete-Through to this response, never negative (corrected when the clocks are seen to disagree); `unknown` with it.',
    schema: { type: 'string', pattern: '^(unknown|\\d+)$' },
  },
}
const etagHeader = {
  ETag: {
    description:
      'A strong tag of the body: it changes exactly when the body does. Send it back in If-None-Match to get 304 without a body while nothing changed.',
    schema: { type: 'string' },
  },
}
const headerRefs = (names: string[]) =>
  Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]))

const errorResponses: Record<
  string,
  { description: string; codes: ErrorCode[]; headers?: string[] }
> = {
  BadRequest: {
    description: 'a query parameter or cursor failed validation',
    codes: ['invalid_request'],
  },
  Unauthorized: {
    description: 'key missing, malformed, unknown, revoked or expired',
    codes: ['invalid_key'],
  },
  PaymentRequired: {
    description: 'API access suspended for billing reasons',
    codes: ['payment_past_due', 'subscription_inactive'],
  },
  Forbidden: {
    description: 'API access disabled, or the key lacks the required scope',
    codes: ['api_disabled', 'insufficient_scope'],
  },
  NotFound: { description: 'unknown id, or an id of another organization', codes: ['not_found'] },
  TooManyRequests: {
    description: 'the per-key or per-organization rate limit is exceeded',
    codes: ['rate_limited'],
    headers: ['Retry-After', ...Object.keys(rateLimitHeaders)],
  },
  InternalError: { description: 'server failure', codes: ['internal_error'] },
  Unavailable: {
    description:
      'api_temporarily_unavailable (with Retry-After): the replica is loading or being swapped; ' +
      'api_unavailable: data missing or corrupt, or maintenance',
    codes: ['api_unavailable', 'api_temporarily_unavailable'],
    headers: ['Retry-After'],
  },
}

const responseFor = (status: number) =>
  Object.keys(errorResponses).find((name) =>
    errorResponses[name]!.codes.some((code) => errorStatus[code] === status),
  ) as string

function operation(args: {
  id: string
  summary: string
  scope: string
  tag: string
  params: readonly ParamName[]
  pathId: boolean
  body: string
}): Json {
  const statuses = [400, 401, 402, 403, ...(args.pathId ? [404] : []), 429, 500, 503]
  return {
    operationId: args.id,
    summary: args.summary,
    description: `Requires the scope \`${args.scope}\`.`,
    tags: [args.tag],
    parameters: [
      ...(args.pathId
        ? [
            {
              name: 'id',
              in: 'path',
              required: true,
              description: 'the resource id',
              schema: { type: 'string', minLength: 1 },
            },
          ]
        : []),
      ...args.params.map((p) => ({ $ref: parameterComponent(p) })),
      { $ref: '#/components/parameters/If-None-Match' },
    ],
    responses: {
      200: {
        description: 'OK',
        headers: headerRefs([
          ...Object.keys(etagHeader),
          ...Object.keys(freshnessHeaders),
          ...Object.keys(rateLimitHeaders),
        ]),
        content: { 'application/json': { schema: ref(args.body) } },
      },
      304: { $ref: '#/components/responses/NotModified' },
      ...Object.fromEntries(
        statuses.map((s) => [s, { $ref: `#/components/responses/${responseFor(s)}` }]),
      ),
    },
  }
}

const names = {
  providers: [
    'Provider',
    'Providers',
    'listProviders',
    'getProvider',
    'ProviderList',
    'ProviderDetail',
  ],
  'provider-groups': [
    'ProviderGroup',
    'Provider groups',
    'listProviderGroups',
    'getProviderGroup',
    'ProviderGroupList',
    'ProviderGroupDetail',
  ],
  enrollments: [
    'Enrollment',
    'Enrollments',
    'listEnrollments',
    'getEnrollment',
    'EnrollmentList',
    'EnrollmentDetail',
  ],
  'group-enrollments': [
    'GroupEnrollment',
    'Group enrollments',
    'listGroupEnrollments',
    'getGroupEnrollment',
    'GroupEnrollmentList',
    'GroupEnrollmentDetail',
  ],
  documents: ['Document', 'Documents', 'listDocuments', '', 'DocumentList', ''],
} as const

export function buildOpenApiDocument(): Json {
  void envelopes // the envelopes register their ids in zod's global registry when defined
  return {
    openapi: '3.1.0',
    info: {
      title: 'Credentialing Data Read-Only API',
      version: '1.0.0',
      description:
        "Read-only access to an organization's credentialing data. GET only; every other method " +
        'is 405 with `Allow: GET`. Clients poll with `updated_since`; lists page with opaque cursors.',
    },
    servers: [{ url: '/api/v1' }],
    security: [{ bearerAuth: [] }],
    tags: [
      'Providers',
      'Provider groups',
      'Enrollments',
      'Group enrollments',
      'Documents',
      'Expirables',
      'Meta',
    ].map((name) => ({ name })),
    paths: openApiPaths(),
    components: openApiComponents(),
  }
}

/** Every path: each collection's list and detail, the expirables, this document. */
function openApiPaths(): Json {
  const paths: Json = {}
  for (const collection of Object.values(collections)) {
    const [, tag, listId, getId, listBody, detailBody] = names[collection.list]
    paths[collection.path] = {
      get: operation({
        id: listId,
        summary: `List ${tag.toLowerCase()}, ordered by updatedAt then id`,
        scope: collection.scope,
        tag,
        params: listParams[collection.list],
        pathId: false,
        body: listBody,
      }),
    }
    if (collection.hasDetail) {
      paths[`${collection.path}/{id}`] = {
        get: operation({
          id: getId,
          summary: `One ${tag.toLowerCase().replace(/s$/, '')} by id`,
          scope: collection.scope,
          tag,
          params: [],
          pathId: true,
          body: detailBody,
        }),
      }
    }
  }
  paths[expirables.path] = {
    get: operation({
      id: 'listExpirables',
      summary: 'Credentials and documents nearing expiration, by expiresOn, sourceType, sourceId',
      scope: expirables.scope,
      tag: 'Expirables',
      params: listParams.expirables,
      pathId: false,
      body: 'ExpirableList',
    }),
  }
  paths['/openapi.json'] = {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      tags: ['Meta'],
      security: [],
      responses: {
        200: { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } },
        400: { $ref: '#/components/responses/BadRequest' },
      },
    },
  }
  return paths
}

/** Security, schemas, parameters, headers and responses the paths refer to. */
function openApiComponents(): Json {
  return {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description: 'An organization API key: `Authorization: Bearer <key>`',
      },
    },
    schemas: componentSchemas(),
    parameters: {
      ...Object.fromEntries(
        Object.entries(parameters).map(([name, p]) => [
          name,
          {
            name,
            in: 'query',
            required: false,
            description: p.description,
            schema: clean(z.toJSONSchema(p.schema, { target: 'draft-2020-12', io: 'input' })),
          },
        ]),
      ),
      'If-None-Match': {
        name: 'If-None-Match',
        in: 'header',
        required: false,
        description:
          'ETags of bodies already held (or `*`): when one is current, the answer is 304 without a body. A 304 counts against the rate limits like any request.',
        schema: { type: 'string' },
      },
    },
    headers: {
      'Retry-After': {
        description: 'seconds to wait before retrying',
        schema: { type: 'integer', minimum: 0 },
      },
      ...etagHeader,
      ...freshnessHeaders,
      ...Object.fromEntries(
        Object.entries(rateLimitHeaders).map(([name, description]) => [
          name,
          {
            description,
            schema: {
              type: name.endsWith('Policy') || name === 'RateLimit' ? 'string' : 'integer',
            },
          },
        ]),
      ),
    },
    responses: {
      NotModified: {
        description:
          'Not Modified: the If-None-Match request header names the current ETag; no body. It counts against the rate limits.',
        headers: headerRefs([
          ...Object.keys(etagHeader),
          ...Object.keys(freshnessHeaders),
          ...Object.keys(rateLimitHeaders),
        ]),
      },
      ...Object.fromEntries(
        Object.entries(errorResponses).map(([name, r]) => [
          name,
          {
            description: `${r.description} (codes: ${r.codes.join(', ')})`,
            ...(r.headers === undefined ? {} : { headers: headerRefs(r.headers) }),
            content: { 'application/json': { schema: ref('Error') } },
          },
        ]),
      ),
    },
  }
}

function clean(schema: Json): Json {
  const { $schema: _schema, ...rest } = schema
  return rest
}
