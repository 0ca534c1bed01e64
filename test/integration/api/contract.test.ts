// The contract of spec/api-v1.md and spec/resources.md, over real HTTP against the api built
// in-process, on files written the way the projector writes them.
import { randomUUID } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import * as resources from '../../../schema/resources.ts'
import {
  allScopes,
  baseScopes,
  type OrganizationFixture,
  ReplicaFixture,
  stamp,
} from './fixtures.ts'
import { type RunningApi, startApi } from './server.ts'

const NOW = Date.parse('2026-06-01T12:00:00.000Z')
const TODAY = '2026-06-01'

const listOf = <T extends z.ZodType>(item: T) =>
  z.strictObject({ data: z.array(item), nextCursor: z.string().nullable() })
const detailOf = <T extends z.ZodType>(item: T) => z.strictObject({ data: item })
const errorEnvelope = z.strictObject({
  error: z.strictObject({ code: z.string(), message: z.string() }),
})

async function expectError(
  response: Response,
  status: number,
  code: string,
): Promise<{ code: string; message: string }> {
  const text = await response.text()
  expect({ status: response.status, text }).toMatchObject({ status })
  expect(response.headers.get('content-type')).toMatch(/^application\/json/)
  const body = errorEnvelope.parse(JSON.parse(text))
  expect(body.error.code).toBe(code)
  return body.error
}

async function json(response: Response): Promise<unknown> {
  const text = await response.text()
  expect({ status: response.status, text }).toMatchObject({ status: 200 })
  return JSON.parse(text)
}

/**
 * Sends `request` as raw bytes on a new connection and reads the answer until the server closes
 * it: for requests no HTTP client would send.
 */
async function rawExchange(
  url: string,
  request: string,
): Promise<{ statusLine: string; headers: Map<string, string>; body: string }> {
  const { hostname, port } = new URL(url)
  const received = await new Promise<string>((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) })
    let text = ''
    socket.setEncoding('utf8')
    socket.setTimeout(5000, () => socket.destroy(new Error('the connection was not closed')))
    socket.on('connect', () => socket.write(request))
    socket.on('data', (chunk: string) => (text += chunk))
    socket.on('close', () => resolve(text))
    socket.on('error', reject)
  })
  const split = received.indexOf('\r\n\r\n')
  const [statusLine = '', ...lines] = received.slice(0, split).split('\r\n')
  const headers = new Map(
    lines.map((line) => {
      const colon = line.indexOf(':')
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as const
    }),
  )
  return { statusLine, headers, body: received.slice(split + 4) }
}

/** Every id of a list, walking its cursors with `limit`. */
async function walk(
  api: RunningApi,
  key: string,
  path: string,
  limit: number,
  between?: (page: number) => void,
): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | null = null
  const sep = path.includes('?') ? '&' : '?'
  for (let page = 0; page < 1000; page++) {
    const query = `${sep}limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`
    const body = listOf(z.object({ id: z.string() }).loose()).parse(
      await json(await api.get(`${path}${query}`, key)),
    )
    ids.push(...body.data.map((d) => d.id))
    if (body.nextCursor === null) return ids
    cursor = body.nextCursor
    between?.(page)
  }
  throw new Error('walk did not end')
}

describe('api contract', () => {
  let replica: ReplicaFixture
  let api: RunningApi
  let a: OrganizationFixture
  let b: OrganizationFixture
  const keys: Record<string, { id: string; raw: string }> = {}
  const logLines: string[] = []
  const ids = {
    providers: [] as string[],
    bProvider: '',
    group: '',
    enrollment: '',
    groupEnrollment: '',
  }

  beforeAll(async () => {
    replica = ReplicaFixture.create()
    a = replica.organization()
    b = replica.organization()
    // Twelve providers, some sharing a stamp (ties are ordered by id), a third inactive.
    for (let i = 0; i < 12; i++) {
      const { sensitive } = a.provider(
        { isActive: i % 3 !== 0, lastName: `Provider${i}` },
        { updatedAt: stamp(10 + Math.floor(i / 2)), sensitiveUpdatedAt: stamp(100 - i) },
      )
      ids.providers.push(sensitive.id)
    }
    ids.bProvider = b.provider({ lastName: 'OtherOrg' }, { updatedAt: stamp(12) }).sensitive.id
    ids.group = a.providerGroup({ updatedAt: stamp(20) }).id
    b.providerGroup({ updatedAt: stamp(20) })
    const p0 = ids.providers[0] as string
    ids.enrollment = a.enrollment({
      providerId: p0,
      payer: 'Blue Cross',
      status: 'approved',
      updatedAt: stamp(30),
    }).id
    a.enrollment({ payer: 'Aetna', status: 'denied', updatedAt: stamp(31) })
    a.enrollment({ payer: 'blue cross', status: 'submitted', updatedAt: stamp(32) })
    b.enrollment({
      providerId: ids.bProvider,
      payer: 'Blue Cross',
      status: 'approved',
      updatedAt: stamp(30),
    })
    ids.groupEnrollment = a.groupEnrollment({
      providerGroupId: ids.group,
      payer: 'Cigna',
      status: 'approved',
      updatedAt: stamp(40),
    }).id
    a.groupEnrollment({ payer: 'CIGNA', status: 'withdrawn', updatedAt: stamp(41) })
    a.document({ providerId: p0, updatedAt: stamp(50) })
    a.document({ providerId: null, providerGroupId: ids.group, updatedAt: stamp(51) })
    b.document({ providerId: ids.bProvider, updatedAt: stamp(50) })
    a.expirable({ expiresOn: '2026-05-31', sourceId: 'past' })
    a.expirable({ expiresOn: TODAY, sourceId: 'today' })
    a.expirable({
      expiresOn: '2026-06-02',
      sourceType: 'document',
      sourceId: 'd1',
      providerGroupId: null,
    })
    a.expirable({
      expiresOn: '2026-06-02',
      sourceType: 'group_identifier',
      sourceId: 'g1',
      providerId: null,
      providerGroupId: ids.group,
    })
    a.expirable({ expiresOn: '2026-07-01', sourceId: 'in30' })
    a.expirable({ expiresOn: '2027-06-01', sourceId: 'in365' })
    a.expirable({ expiresOn: '2027-06-02', sourceId: 'in366' })
    b.expirable({ expiresOn: '2026-06-02', sourceId: 'other-org' })

    keys.all = replica.key(a.id, { scopes: baseScopes })
    keys.sensitive = replica.key(a.id, { scopes: allScopes })
    keys.providersOnly = replica.key(a.id, { scopes: ['providers:read'] })
    keys.none = replica.key(a.id, { scopes: [] })
    keys.revoked = replica.key(a.id, { revokedAt: stamp(1) })
    keys.expired = replica.key(a.id, { expiresAt: '2026-06-01T11:59:59.999Z' })
    keys.later = replica.key(a.id, { expiresAt: '2026-06-01T12:00:00.001Z' })
    keys.b = replica.key(b.id, { scopes: allScopes })
    const pastDue = replica.organization({ billingStatus: 'past_due', apiEnabled: false })
    keys.pastDue = replica.key(pastDue.id, { scopes: [] })
    const inactive = replica.organization({ billingStatus: 'inactive' })
    keys.inactive = replica.key(inactive.id)
    const disabled = replica.organization({ apiEnabled: false })
    keys.disabled = replica.key(disabled.id, { scopes: [] })
    const noFile = replica.organization({ file: false })
    keys.noFile = replica.key(noFile.id)
    const corrupt = replica.organization({ file: false })
    writeFileSync(corrupt.path, 'this is not a database '.repeat(200))
    keys.corrupt = replica.key(corrupt.id)
    keys.orphan = replica.key(randomUUID())
    replica.publish()

    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          logLines.push(chunk.toString())
          done()
        },
      }),
    )
    api = await startApi(replica.dataDir, {
      clock: { now: () => NOW },
      logger,
      env: { RATE_LIMIT_PER_KEY: '100000', RATE_LIMIT_PER_ORGANIZATION: '100000' },
    })
  })

  afterAll(async () => {
    await api?.close()
    replica?.destroy()
  })

  describe('error table (spec/api-v1.md section 7)', () => {
    it('400 invalid_request names the parameter and its rule', async () => {
      const error = await expectError(
        await api.get('/providers?limit=0', keys.all!.raw),
        400,
        'invalid_request',
      )
      expect(error.message).toBe('limit must be an integer from 1 to 200')
    })

    it('401 invalid_key: missing, malformed, unknown, revoked, expired', async () => {
      await expectError(await api.get('/providers'), 401, 'invalid_key')
      for (const authorization of ['Basic abc', 'Bearer', 'Bearer two words', 'abc']) {
        const response = await api.get('/providers', undefined, { headers: { authorization } })
        await expectError(response, 401, 'invalid_key')
      }
      await expectError(await api.get('/providers', 'ck_unknown'), 401, 'invalid_key')
      await expectError(await api.get('/providers', keys.revoked!.raw), 401, 'invalid_key')
      await expectError(await api.get('/providers', keys.expired!.raw), 401, 'invalid_key')
      expect((await api.get('/providers', keys.later!.raw)).status).toBe(200)
    })

    it('402 payment_past_due and subscription_inactive', async () => {
      await expectError(await api.get('/providers', keys.pastDue!.raw), 402, 'payment_past_due')
      await expectError(
        await api.get('/providers', keys.inactive!.raw),
        402,
        'subscription_inactive',
      )
    })

    it('403 api_disabled and insufficient_scope naming the missing scope', async () => {
      await expectError(await api.get('/providers', keys.disabled!.raw), 403, 'api_disabled')
      const cases: [string, string][] = [
        ['/providers', 'providers:read'],
        ['/providers/x', 'providers:read'],
        ['/provider-groups', 'groups:read'],
        ['/provider-groups/x', 'groups:read'],
        ['/enrollments', 'enrollments:read'],
        ['/enrollments/x', 'enrollments:read'],
        ['/group-enrollments', 'enrollments:read'],
        ['/group-enrollments/x', 'enrollments:read'],
        ['/documents', 'documents:read'],
        ['/expirables', 'providers:read'],
      ]
      for (const [path, scope] of cases) {
        const error = await expectError(
          await api.get(path, keys.none!.raw),
          403,
          'insufficient_scope',
        )
        expect(error.message).toContain(scope)
      }
      await expectError(
        await api.get('/documents', keys.providersOnly!.raw),
        403,
        'insufficient_scope',
      )
    })

    it('404 not_found for unknown ids and unknown paths', async () => {
      for (const path of [
        '/providers/',
        '/provider-groups/',
        '/enrollments/',
        '/group-enrollments/',
      ]) {
        await expectError(await api.get(`${path}${randomUUID()}`, keys.all!.raw), 404, 'not_found')
      }
      await expectError(await api.get('/nothing-here', keys.all!.raw), 404, 'not_found')
      await expectError(await api.get('/documents/x', keys.all!.raw), 404, 'not_found')
      await expectError(await fetch(`${api.url}/`), 404, 'not_found')
      await expectError(await fetch(`${api.url}/api/v2/providers`), 404, 'not_found')
    })

    it('405 method_not_allowed with Allow: GET for every other method on every path', async () => {
      const paths = [
        '/api/v1/providers',
        '/api/v1/providers/x',
        '/api/v1/openapi.json',
        '/nowhere',
        '/',
      ]
      for (const path of paths) {
        for (const method of [
          'POST',
          'PUT',
          'PATCH',
          'DELETE',
          'HEAD',
          'OPTIONS',
          'QUERY',
          'PROPFIND',
        ]) {
          const response = await fetch(`${api.url}${path}`, {
            method,
            headers: { authorization: `Bearer ${keys.all!.raw}` },
          })
          expect(response.status, `${method} ${path}`).toBe(405)
          expect(response.headers.get('allow')).toBe('GET')
          if (method !== 'HEAD') await expectError(response, 405, 'method_not_allowed')
        }
      }
    })

    it('405 for CONNECT too, which never reaches the router', async () => {
      const { request } = await import('node:http')
      const { hostname, port } = new URL(api.url)
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = request({ method: 'CONNECT', host: hostname, port, path: 'example.com:443' })
        req.on('connect', (response, socket) => {
          socket.destroy()
          resolve(response.statusCode)
        })
        req.on('response', (response) => resolve(response.statusCode))
        req.on('error', reject)
        req.end()
      })
      expect(status).toBe(405)
    })

    it('405 for a method the HTTP parser does not know, which never reaches Fastify', async () => {
      const key = keys.all!.raw
      const { statusLine, headers, body } = await rawExchange(
        api.url,
        `FOO /api/v1/providers HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\n\r\n`,
      )
      expect(statusLine).toBe('HTTP/1.1 405 Method Not Allowed')
      expect(headers.get('allow')).toBe('GET')
      expect(headers.get('connection')).toBe('close')
      expect(headers.get('content-type')).toMatch(/^application\/json/)
      expect(Number(headers.get('content-length'))).toBe(Buffer.byteLength(body))
      expect(errorEnvelope.parse(JSON.parse(body)).error.code).toBe('method_not_allowed')
      expect(logLines.join('')).not.toContain(key)
    })

    it('400 invalid_request, in the envelope and without internals, for an unreadable request', async () => {
      const { statusLine, headers, body } = await rawExchange(
        api.url,
        'GET /api/v1/providers HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n',
      )
      expect(statusLine).toBe('HTTP/1.1 400 Bad Request')
      expect(headers.has('allow')).toBe(false)
      expect(headers.get('content-type')).toMatch(/^application\/json/)
      const { error } = errorEnvelope.parse(JSON.parse(body))
      expect(error).toEqual({ code: 'invalid_request', message: 'the request could not be read' })
    })

    it('500 internal_error carries no stack trace, SQL or internals', async () => {
      const failing = await startApi(replica.dataDir, {
        clock: {
          now() {
            throw new Error('boom at SELECT * FROM api_keys /work/main/api/app.ts:1')
          },
        },
      })
      try {
        const response = await failing.get('/providers', keys.all!.raw)
        const error = await expectError(response, 500, 'internal_error')
        expect(error.message).not.toMatch(/boom|SELECT|\.ts|at /)
      } finally {
        await failing.close()
      }
    })

    it('503 api_unavailable when the organization file is missing or corrupt', async () => {
      await expectError(await api.get('/providers', keys.noFile!.raw), 503, 'api_unavailable')
      await expectError(await api.get('/providers', keys.corrupt!.raw), 503, 'api_unavailable')
      // Other organizations are unaffected.
      expect((await api.get('/providers', keys.all!.raw)).status).toBe(200)
    })

    it('503 api_temporarily_unavailable with Retry-After while a key has no organization yet', async () => {
      const response = await api.get('/providers', keys.orphan!.raw)
      expect(response.headers.get('retry-after')).toMatch(/^\d+$/)
      await expectError(response, 503, 'api_temporarily_unavailable')
    })
  })

  describe('order of checks: 401, 402, 403 api_disabled, 403 insufficient_scope, 400, 404', () => {
    it('401 before 402', async () => {
      const org = replica.organization({ billingStatus: 'past_due' })
      const key = replica.key(org.id, { revokedAt: stamp(1) })
      await expectError(await api.get('/providers', key.raw), 401, 'invalid_key')
    })
    it('402 before 403 api_disabled and insufficient_scope', async () => {
      await expectError(
        await api.get('/documents?limit=0', keys.pastDue!.raw),
        402,
        'payment_past_due',
      )
    })
    it('403 api_disabled before insufficient_scope', async () => {
      await expectError(
        await api.get('/documents?limit=0', keys.disabled!.raw),
        403,
        'api_disabled',
      )
    })
    it('insufficient_scope before 400', async () => {
      await expectError(
        await api.get('/documents?limit=0', keys.none!.raw),
        403,
        'insufficient_scope',
      )
    })
    it('400 before 404', async () => {
      await expectError(
        await api.get(`/providers/${randomUUID()}?x=1`, keys.all!.raw),
        400,
        'invalid_request',
      )
    })
    it('401 before 400 and 404', async () => {
      await expectError(await api.get(`/providers/${randomUUID()}?limit=0`), 401, 'invalid_key')
    })
  })

  describe('authentication', () => {
    it('takes revocation into account on the next request', async () => {
      const key = replica.key(a.id)
      expect((await api.get('/providers', key.raw)).status).toBe(200)
      replica.revokeKey(key.id)
      await expectError(await api.get('/providers', key.raw), 401, 'invalid_key')
    })

    it('takes organization state changes into account on the next request', async () => {
      const org = replica.organization()
      const key = replica.key(org.id)
      expect((await api.get('/providers', key.raw)).status).toBe(200)
      replica.setOrganization(org.id, { apiEnabled: false })
      await expectError(await api.get('/providers', key.raw), 403, 'api_disabled')
      replica.setOrganization(org.id, { apiEnabled: true, billingStatus: 'past_due' })
      await expectError(await api.get('/providers', key.raw), 402, 'payment_past_due')
    })

    it('logs the key id, never the raw key', async () => {
      const key = replica.key(a.id, { raw: `ck_never_logged_${randomUUID()}` })
      await api.get('/providers?limit=1', key.raw)
      await api.get('/providers?limit=0', key.raw)
      await api.get('/nowhere', key.raw)
      const logs = logLines.join('')
      expect(logs).not.toContain(key.raw)
      expect(logs).toContain(key.id)
    })
  })

  describe('resources and envelopes', () => {
    it('serves every list and detail in its envelope, valid against the resource schemas', async () => {
      const key = keys.all!.raw
      listOf(resources.provider).parse(await json(await api.get('/providers', key)))
      listOf(resources.providerGroup).parse(await json(await api.get('/provider-groups', key)))
      listOf(resources.enrollment).parse(await json(await api.get('/enrollments', key)))
      listOf(resources.groupEnrollment).parse(await json(await api.get('/group-enrollments', key)))
      listOf(resources.documentMetadata).parse(await json(await api.get('/documents', key)))
      listOf(resources.expirable).parse(await json(await api.get('/expirables', key)))
      detailOf(resources.provider).parse(
        await json(await api.get(`/providers/${ids.providers[1]}`, key)),
      )
      detailOf(resources.providerGroup).parse(
        await json(await api.get(`/provider-groups/${ids.group}`, key)),
      )
      detailOf(resources.enrollment).parse(
        await json(await api.get(`/enrollments/${ids.enrollment}`, key)),
      )
      detailOf(resources.groupEnrollment).parse(
        await json(await api.get(`/group-enrollments/${ids.groupEnrollment}`, key)),
      )
    })

    it('always carries data and nextCursor on lists, even empty ones', async () => {
      const body = await json(
        await api.get(`/enrollments?provider_id=${randomUUID()}`, keys.all!.raw),
      )
      expect(body).toEqual({ data: [], nextCursor: null })
    })

    it('orders lists by updatedAt, then id', async () => {
      const body = listOf(resources.provider).parse(
        await json(await api.get('/providers?limit=200', keys.all!.raw)),
      )
      const order = body.data.map((p) => [p.updatedAt, p.id].join(' '))
      expect(order).toEqual([...order].sort())
      expect(body.data).toHaveLength(12)
    })

    it('releases the sensitive fields only to keys holding providers:read:sensitive', async () => {
      const sensitiveFields = Object.keys(resources.sensitiveProviderFields)
      const base = listOf(resources.provider).parse(
        await json(await api.get('/providers', keys.all!.raw)),
      )
      for (const p of base.data) for (const f of sensitiveFields) expect(p).not.toHaveProperty(f)
      const detail = detailOf(resources.provider).parse(
        await json(await api.get(`/providers/${ids.providers[0]}`, keys.all!.raw)),
      )
      for (const f of sensitiveFields) expect(detail.data).not.toHaveProperty(f)

      const sensitive = listOf(resources.sensitiveProvider).parse(
        await json(await api.get('/providers', keys.sensitive!.raw)),
      )
      for (const p of sensitive.data) for (const f of sensitiveFields) expect(p).toHaveProperty(f)
      detailOf(resources.sensitiveProvider).parse(
        await json(await api.get(`/providers/${ids.providers[0]}`, keys.sensitive!.raw)),
      )
    })

    it('orders and filters the sensitive variant by its own stamp', async () => {
      const sensitive = listOf(resources.sensitiveProvider).parse(
        await json(await api.get('/providers?limit=200', keys.sensitive!.raw)),
      )
      // Sensitive stamps run backwards relative to the base ones in the fixture.
      expect(sensitive.data.map((p) => p.id)).toEqual([...ids.providers].reverse())
      const since = await json(
        await api.get(
          `/providers?updated_since=${encodeURIComponent(stamp(95))}`,
          keys.sensitive!.raw,
        ),
      )
      expect((since as { data: { id: string }[] }).data.map((p) => p.id)).toEqual(
        ids.providers.slice(0, 6).reverse(),
      )
    })

    it('never exposes ssn, internal notes, storage keys or payer portal fields, at any scope', async () => {
      const forbidden = /ssn|internal_?notes|storage_?key|portal|password|username/i
      const paths = [
        '/providers?limit=200',
        `/providers/${ids.providers[0]}`,
        '/provider-groups',
        `/provider-groups/${ids.group}`,
        '/enrollments',
        `/enrollments/${ids.enrollment}`,
        '/group-enrollments',
        `/group-enrollments/${ids.groupEnrollment}`,
        '/documents',
        '/expirables?within_days=730',
      ]
      for (const key of [keys.all!.raw, keys.sensitive!.raw]) {
        for (const path of paths) {
          const text = await (await api.get(path, key)).text()
          const names = text.match(/"[A-Za-z_]+":/g) ?? []
          expect(
            names.filter((n) => forbidden.test(n)),
            path,
          ).toEqual([])
        }
      }
      const openapi = await (await api.get('/openapi.json')).text()
      expect((openapi.match(/"[A-Za-z_]+":/g) ?? []).filter((n) => forbidden.test(n))).toEqual([])
    })

    it('completes expirables with daysUntilExpiration from the current UTC date', async () => {
      const body = listOf(resources.expirable).parse(
        await json(await api.get('/expirables', keys.all!.raw)),
      )
      expect(body.data.map((e) => [e.sourceId, e.daysUntilExpiration])).toEqual([
        ['today', 0],
        ['d1', 1],
        ['g1', 1],
        ['in30', 30],
        ['in365', 365],
      ])
    })
  })

  describe('filters', () => {
    const idsOf = async (path: string, key = keys.all!.raw) =>
      ((await json(await api.get(path, key))) as { data: { id: string }[] }).data.map((d) => d.id)

    it('active filters by employment status; both when omitted', async () => {
      const active = await idsOf('/providers?active=true&limit=200')
      const inactive = await idsOf('/providers?active=false&limit=200')
      expect(active).toHaveLength(8)
      expect(inactive).toHaveLength(4)
      expect(new Set([...active, ...inactive])).toEqual(new Set(ids.providers))
    })

    it('status matches exactly; other values are 400 naming the allowed values', async () => {
      expect(await idsOf('/enrollments?status=approved')).toEqual([ids.enrollment])
      expect(await idsOf('/group-enrollments?status=approved')).toEqual([ids.groupEnrollment])
      const error = await expectError(
        await api.get('/enrollments?status=pending', keys.all!.raw),
        400,
        'invalid_request',
      )
      expect(error.message).toBe(
        'status must be one of: not_started, in_progress, submitted, approved, denied, withdrawn',
      )
    })

    it('payer matches the payer name exactly, ignoring case', async () => {
      expect(await idsOf('/enrollments?payer=BLUE%20CROSS')).toHaveLength(2)
      expect(await idsOf('/enrollments?payer=blue')).toHaveLength(0)
      expect(await idsOf('/group-enrollments?payer=cigna')).toHaveLength(2)
    })

    it('provider_id and group_id filter enrollments, group enrollments and documents', async () => {
      expect(await idsOf(`/enrollments?provider_id=${ids.providers[0]}`)).toEqual([ids.enrollment])
      expect(await idsOf(`/group-enrollments?group_id=${ids.group}`)).toEqual([ids.groupEnrollment])
      expect(await idsOf(`/documents?provider_id=${ids.providers[0]}`)).toHaveLength(1)
      expect(await idsOf(`/documents?group_id=${ids.group}`)).toHaveLength(1)
      expect(
        await idsOf(`/documents?group_id=${ids.group}&provider_id=${ids.providers[0]}`),
      ).toHaveLength(0)
    })

    it('updated_since is inclusive', async () => {
      const all = listOf(resources.provider).parse(
        await json(await api.get('/providers?limit=200', keys.all!.raw)),
      ).data
      const watermark = all[4]!.updatedAt
      const since = await idsOf(
        `/providers?limit=200&updated_since=${encodeURIComponent(watermark)}`,
      )
      expect(since).toEqual(all.filter((p) => p.updatedAt >= watermark).map((p) => p.id))
      expect(since).toContain(all[4]!.id)
      // The same instant in another offset selects the same rows.
      const local = new Date(Date.parse(watermark)).toISOString().replace('Z', '+00:00')
      expect(
        await idsOf(`/providers?limit=200&updated_since=${encodeURIComponent(local)}`),
      ).toEqual(since)
      // One millisecond later excludes the watermark row and its stamp-mates.
      const later = new Date(Date.parse(watermark) + 1).toISOString()
      expect(await idsOf(`/providers?limit=200&updated_since=${later}`)).not.toContain(all[4]!.id)
    })

    it('within_days keeps today <= expiresOn <= today + N (UTC)', async () => {
      const sources = async (n: number) =>
        listOf(resources.expirable)
          .parse(await json(await api.get(`/expirables?within_days=${n}`, keys.all!.raw)))
          .data.map((e) => e.sourceId)
      expect(await sources(0)).toEqual(['today'])
      expect(await sources(1)).toEqual(['today', 'd1', 'g1'])
      expect(await sources(30)).toEqual(['today', 'd1', 'g1', 'in30'])
      expect(await sources(365)).toEqual(['today', 'd1', 'g1', 'in30', 'in365'])
      expect(await sources(730)).toEqual(['today', 'd1', 'g1', 'in30', 'in365', 'in366'])
    })

    it('rejects unknown and repeated parameters, and parameters of other lists', async () => {
      for (const path of [
        '/providers?updated_snce=2026-01-01T00:00:00Z',
        '/providers?limit=5&limit=6',
        '/providers?status=approved',
        '/provider-groups?active=true',
        '/documents?payer=x',
        '/expirables?updated_since=2026-01-01T00:00:00Z',
        `/providers/${ids.providers[0]}?limit=5`,
        '/openapi.json?x=1',
      ]) {
        const error = await expectError(await api.get(path, keys.all!.raw), 400, 'invalid_request')
        expect(error.message).toMatch(/"[a-z_]+"/)
      }
    })
  })

  describe('paging', () => {
    it('a full walk returns each id once when nothing changes', async () => {
      for (const limit of [1, 2, 5, 7, 12, 200]) {
        const walked = await walk(api, keys.all!.raw, '/providers', limit)
        expect(walked).toHaveLength(12)
        expect(new Set(walked)).toEqual(new Set(ids.providers))
      }
      const expirables = await walk(api, keys.all!.raw, '/expirables?within_days=730', 2)
      expect(expirables).toHaveLength(6)
      expect(new Set(expirables).size).toBe(6)
    })

    it('walks filtered lists with cursors', async () => {
      const active = await walk(api, keys.all!.raw, '/providers?active=true', 3)
      expect(active).toHaveLength(8)
      const payer = await walk(api, keys.all!.raw, '/enrollments?payer=blue%20cross', 1)
      expect(payer).toHaveLength(2)
    })

    it('returns a record edited mid-walk again later, and loses none', async () => {
      const org = replica.organization()
      const key = replica.key(org.id)
      const docs = Array.from({ length: 10 }, (_, i) =>
        org.document({ updatedAt: stamp(1000 + i), fileName: `f${i}.pdf` }),
      )
      const edited = docs[1]!
      const walked = await walk(api, key.raw, '/documents', 3, (page) => {
        // After the first page (which held docs 0..2), the projector stamps doc 1 anew.
        if (page === 0) org.document({ ...edited, fileName: 'renamed.pdf', updatedAt: stamp(2000) })
      })
      expect(new Set(walked)).toEqual(new Set(docs.map((d) => d.id)))
      expect(walked.filter((id) => id === edited.id)).toHaveLength(2)
      expect(walked.at(-1)).toBe(edited.id)
    })

    it('answers many concurrent pages, each with its own rows', async () => {
      const key = keys.all!.raw
      const pages = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const limit = 1 + (i % 12)
          const body = listOf(resources.provider).parse(
            await json(await api.get(`/providers?limit=${limit}`, key)),
          )
          return { limit, ids: body.data.map((p) => p.id) }
        }),
      )
      const all = await walk(api, key, '/providers', 200)
      for (const page of pages) expect(page.ids).toEqual(all.slice(0, page.limit))
    })

    it('keeps cursors opaque and ends with nextCursor null', async () => {
      const body = (await json(await api.get('/providers?limit=5', keys.all!.raw))) as {
        nextCursor: string
      }
      expect(typeof body.nextCursor).toBe('string')
      expect(body.nextCursor).not.toMatch(/2026|[0-9a-f]{8}-/)
      const last = (await json(await api.get('/providers?limit=12', keys.all!.raw))) as {
        nextCursor: null
      }
      expect(last.nextCursor).toBeNull()
    })

    it('accepts a different limit with the same cursor', async () => {
      const first = (await json(await api.get('/providers?limit=2', keys.all!.raw))) as {
        nextCursor: string
      }
      const rest = await json(
        await api.get(`/providers?limit=200&cursor=${first.nextCursor}`, keys.all!.raw),
      )
      expect((rest as { data: unknown[] }).data).toHaveLength(10)
    })

    it('refuses malformed, tampered and foreign cursors with 400, never 500', async () => {
      const key = keys.all!.raw
      const first = (await json(await api.get('/providers?limit=2', key))) as { nextCursor: string }
      const cursor = first.nextCursor
      const tampered = (cursor[0] === 'A' ? 'B' : 'A') + cursor.slice(1)
      const bad = [
        `/providers?cursor=${tampered}`,
        '/providers?cursor=garbage',
        '/providers?cursor=%00%01',
        `/providers?cursor=${'x'.repeat(2000)}`,
        `/providers?cursor=${cursor}&active=true`,
        `/providers?cursor=${cursor}&updated_since=2026-01-01T00:00:00Z`,
        `/documents?cursor=${cursor}`,
        `/expirables?cursor=${cursor}`,
        `/enrollments?cursor=${cursor}`,
      ]
      for (const path of bad) {
        await expectError(await api.get(path, key), 400, 'invalid_request')
      }
      // The sensitive view is ordered by other stamps: its cursors do not fit the base view.
      await expectError(
        await api.get(`/providers?cursor=${cursor}`, keys.sensitive!.raw),
        400,
        'invalid_request',
      )
      const filtered = (await json(await api.get('/enrollments?status=approved&limit=1', key))) as {
        nextCursor: string | null
      }
      expect(filtered.nextCursor).toBeNull()
      const payer = (await json(await api.get('/enrollments?payer=blue%20cross&limit=1', key))) as {
        nextCursor: string
      }
      await expectError(
        await api.get(`/enrollments?payer=aetna&cursor=${payer.nextCursor}`, key),
        400,
        'invalid_request',
      )
      // Same filter spelled in another case is the same filter.
      expect(
        (await api.get(`/enrollments?payer=BLUE%20CROSS&cursor=${payer.nextCursor}`, key)).status,
      ).toBe(200)
    })
  })

  describe('isolation between organizations', () => {
    it('answers another organization id exactly as an unknown id', async () => {
      const foreign = await api.get(`/providers/${ids.bProvider}`, keys.all!.raw)
      const unknown = await api.get(`/providers/${randomUUID()}`, keys.all!.raw)
      expect(foreign.status).toBe(404)
      expect(await foreign.text()).toBe(await unknown.text())
      expect((await api.get(`/providers/${ids.bProvider}`, keys.b!.raw)).status).toBe(200)
    })

    it('lists and filters only the key organization rows', async () => {
      const aList = await walk(api, keys.all!.raw, '/providers', 5)
      expect(aList).not.toContain(ids.bProvider)
      const bList = await walk(api, keys.b!.raw, '/providers', 5)
      expect(bList).toEqual([ids.bProvider])
      const byForeign = await json(
        await api.get(`/enrollments?provider_id=${ids.bProvider}`, keys.all!.raw),
      )
      expect(byForeign).toEqual({ data: [], nextCursor: null })
      const docs = await json(
        await api.get(`/documents?provider_id=${ids.bProvider}`, keys.all!.raw),
      )
      expect(docs).toEqual({ data: [], nextCursor: null })
      const exp = listOf(resources.expirable).parse(
        await json(await api.get('/expirables', keys.all!.raw)),
      )
      expect(exp.data.map((e) => e.sourceId)).not.toContain('other-org')
    })

    it('refuses a cursor carried to another organization', async () => {
      const other = replica.key(b.id)
      const fromA = (await json(await api.get('/providers?limit=1', keys.all!.raw))) as {
        nextCursor: string
      }
      await expectError(
        await api.get(`/providers?cursor=${fromA.nextCursor}`, other.raw),
        400,
        'invalid_request',
      )
    })
  })

  describe('headers', () => {
    it('sends no CORS headers, preflight included', async () => {
      const headers = { origin: 'https://evil.example', 'access-control-request-method': 'GET' }
      for (const init of [
        { headers: { ...headers, authorization: `Bearer ${keys.all!.raw}` } },
        { method: 'OPTIONS', headers },
      ]) {
        const response = await fetch(`${api.url}/api/v1/providers`, init)
        expect([...response.headers.keys()].filter((h) => h.startsWith('access-control'))).toEqual(
          [],
        )
      }
    })

    it('carries rate-limit headers on every authenticated response', async () => {
      for (const [path, status] of [
        ['/providers', 200],
        ['/providers?limit=0', 400],
        [`/providers/${randomUUID()}`, 404],
        ['/documents', 200],
      ] as const) {
        const response = await api.get(path, keys.providersOnly!.raw)
        expect(response.status === status || response.status === 403).toBe(true)
        expect(response.headers.get('ratelimit-policy')).toMatch(
          /^"key";q=\d+;w=60, "organization";q=\d+;w=60$/,
        )
        expect(response.headers.get('ratelimit')).toMatch(
          /^"key";r=\d+;t=\d+, "organization";r=\d+;t=\d+$/,
        )
        for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
          expect(response.headers.get(h)).toMatch(/^\d+$/)
        }
      }
    })
  })

  describe('replica states', () => {
    it('503 api_unavailable during maintenance, and back after', async () => {
      replica.setState('maintenance', 'on')
      try {
        await expectError(await api.get('/providers', keys.all!.raw), 503, 'api_unavailable')
      } finally {
        replica.setState('maintenance', undefined)
      }
      expect((await api.get('/providers', keys.all!.raw)).status).toBe(200)
    })

    it('503 api_temporarily_unavailable with Retry-After until the replica has caught up', async () => {
      replica.setState('caught_up_at', undefined)
      try {
        const response = await api.get('/providers', keys.all!.raw)
        expect(response.headers.get('retry-after')).toMatch(/^\d+$/)
        await expectError(response, 503, 'api_temporarily_unavailable')
        // Without a key too: readiness is known before the key can be checked.
        await expectError(await api.get('/providers'), 503, 'api_temporarily_unavailable')
      } finally {
        replica.setState('caught_up_at', stamp(0))
      }
    })
  })

  describe('OpenAPI document', () => {
    it('is served without a key and describes every operation', async () => {
      const doc = (await json(await api.get('/openapi.json'))) as {
        openapi: string
        paths: Record<string, { get: { operationId: string; responses: Record<string, unknown> } }>
        components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> }
      }
      expect(doc.openapi).toBe('3.1.0')
      const operations = Object.values(doc.paths).map((p) => p.get.operationId)
      expect(operations).toEqual(
        expect.arrayContaining([
          'listProviders',
          'getProvider',
          'listProviderGroups',
          'getProviderGroup',
          'listEnrollments',
          'getEnrollment',
          'listGroupEnrollments',
          'getGroupEnrollment',
          'listDocuments',
          'listExpirables',
        ]),
      )
      expect(Object.keys(doc.paths['/providers/{id}']!.get.responses)).toEqual(
        expect.arrayContaining(['200', '400', '401', '402', '403', '404', '429', '500', '503']),
      )
      expect(doc.components.securitySchemes.bearerAuth).toMatchObject({
        type: 'http',
        scheme: 'bearer',
      })
      expect(Object.keys(doc.components.schemas)).toEqual(
        expect.arrayContaining([
          'Provider',
          'ProviderWithSensitiveFields',
          'Error',
          'ExpirableList',
        ]),
      )
      expect(JSON.stringify(doc)).not.toContain('__shared')
    })
  })

  it('answers 503 api_temporarily_unavailable before any generation exists', async () => {
    const empty = ReplicaFixture.create()
    rmSync(`${empty.dataDir}/CURRENT`, { force: true })
    const early = await startApi(empty.dataDir)
    try {
      const response = await early.get('/providers', 'whatever')
      expect(response.headers.get('retry-after')).toMatch(/^\d+$/)
      await expectError(response, 503, 'api_temporarily_unavailable')
      expect((await fetch(`${early.adminUrl}/readyz`)).status).toBe(503)
      empty.publish()
      expect((await fetch(`${early.adminUrl}/readyz`)).status).toBe(200)
      await expectError(await early.get('/providers', 'whatever'), 401, 'invalid_key')
    } finally {
      await early.close()
      empty.destroy()
    }
  })
})
