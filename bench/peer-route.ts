// The status quo the replica is measured against (bench/peer.ts): `/providers` served straight
// from the product's PostgreSQL by one SQL statement per request, on a `pg` pool, from a Fastify
// route. Not a product route. It serves what the replica serves a key without
// providers:read:sensitive: the same documents (fields, key order, nested arrays and their
// order; spec/resources.md), the same envelope and the same cursors (api/cursor.ts, one secret).
//
// The statement checks the key (hash, revocation, expiry, scope, organization switched on and
// billing active: what the replica checks, less rate limits), picks the page on the
// (organization_id, updated_at, id) index and builds every document in PostgreSQL (row_to_json,
// json_agg over lateral child lookups), joined into the page's text: Node only wraps it.
//
// `tsx bench/peer-route.ts <port> <database url> <pool size> <cursor secret>` serves it.
import { createHash } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import pg from 'pg'
import { decodeCursor, encodeCursor } from '../api/cursor.ts'
import { cursorBinding, LIMIT } from '../api/params.ts'

const ISO_MS = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`

/** A provider document (base variant) of the row `p`, as JSON text with no insignificant space. */
const providerDocument = `(select row_to_json(d)::text from (select
    p.id,
    concat_ws(' ', nullif(p.first_name, ''), nullif(p.middle_name, ''), nullif(p.last_name, ''))
      || coalesce(', ' || nullif(p.suffix, ''), '') as name,
    p.npi, p.first_name as "firstName", p.middle_name as "middleName", p.last_name as "lastName",
    p.suffix, p.is_active as "isActive", p.telehealth_services as "telehealthServices", p.type,
    p.caqh_id as "caqhId", p.start_date as "startDate", p.termed_date as "termedDate",
    p.taxonomy_code as "taxonomyCode", p.specialty,
    p.specialty_taxonomy_code as "specialtyTaxonomyCode",
    p.secondary_specialty as "secondarySpecialty",
    p.secondary_specialty_taxonomy_code as "secondarySpecialtyTaxonomyCode",
    p.additional_specialty_1 as "additionalSpecialty1",
    p.additional_specialty_1_taxonomy_code as "additionalSpecialty1TaxonomyCode",
    p.additional_specialty_2 as "additionalSpecialty2",
    p.additional_specialty_2_taxonomy_code as "additionalSpecialty2TaxonomyCode",
    p.additional_specialty_3 as "additionalSpecialty3",
    p.additional_specialty_3_taxonomy_code as "additionalSpecialty3TaxonomyCode",
    p.additional_specialty_4 as "additionalSpecialty4",
    p.additional_specialty_4_taxonomy_code as "additionalSpecialty4TaxonomyCode",
    p.additional_specialty_5 as "additionalSpecialty5",
    p.additional_specialty_5_taxonomy_code as "additionalSpecialty5TaxonomyCode",
    p.billing_address as "billingAddress", p.billing_address_line_2 as "billingAddressLine2",
    p.billing_city as "billingCity", p.billing_state as "billingState",
    p.billing_zip as "billingZip", p.personal_address as "personalAddress",
    p.personal_address_line_2 as "personalAddressLine2", p.personal_city as "personalCity",
    p.personal_county as "personalCounty", p.personal_state as "personalState",
    p.personal_zip as "personalZip", p.personal_email as "personalEmail",
    p.personal_fax as "personalFax", p.personal_phone as "personalPhone",
    array_remove(p.other_emails, null) as "otherEmails",
    array_remove(p.languages, null) as languages,
    p.medicaid_participation as "medicaidParticipation",
    p.medicare_participation as "medicareParticipation",
    array_remove(p.medicaid_states, null) as "medicaidStates",
    array_remove(p.medicare_states, null) as "medicareStates",
    coalesce(m.memberships, '[]') as "groupMemberships",
    coalesce(i.identifiers, '[]') as "providerIds",
    to_char(p.created_at at time zone 'UTC', ${ISO_MS}) as "createdAt",
    to_char(p.updated_at at time zone 'UTC', ${ISO_MS}) as "updatedAt"
  from (select json_agg(g) as memberships from (
          select grp.id as "providerGroupId", grp.name, grp.npi, grp.tin
            from group_memberships gm join provider_groups grp on grp.id = gm.provider_group_id
           where gm.provider_id = p.id
           order by grp.name, grp.id, gm.id) g) m,
       (select json_agg(x) as identifiers from (
          select pi.id, pi.type, pi.value, pi.issued_on as "issuedOn",
                 pi.expires_on as "expiresOn", pi.metadata
            from provider_identifiers pi
           where pi.provider_id = p.id
           order by pi.type, pi.id) x) i) d)`

/**
 * One page: $1 the key's SHA-256, $2/$3 the position it starts after, $4 the page size. One row:
 * the caller's organization (null: no such usable key), the page's documents joined by commas,
 * and the position of its last document when another page follows.
 */
export const PROVIDER_PAGE_SQL = `
with caller as (
  select k.organization_id
    from api_keys k join organizations o on o.id = k.organization_id
   where k.key_hash = $1 and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())
     and 'providers:read' = any(k.scopes) and o.api_enabled and o.billing_status = 'active'
), page as (
  select p.*, row_number() over (order by p.updated_at, p.id) as n
    from (select * from providers p
           where p.organization_id = (select organization_id from caller)
             and (p.updated_at, p.id) > ($2::timestamptz, $3::uuid)
           order by p.updated_at, p.id
           limit $4::int + 1) p
)
select (select organization_id from caller) as organization,
       (select string_agg(${providerDocument}, ',' order by p.n) from page p where p.n <= $4) as docs,
       (select to_char(p.updated_at at time zone 'UTC', ${ISO_MS}) from page p where p.n = $4
           and exists (select from page where n > $4)) as "nextStamp",
       (select p.id from page p where p.n = $4 and exists (select from page where n > $4))
         as "nextId"`

const FIRST: readonly [string, string] = ['-infinity', '00000000-0000-0000-0000-000000000000']

function sendError(reply: import('fastify').FastifyReply, status: number, code: string) {
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(JSON.stringify({ error: { code, message: code } }))
}

/** The route on `pool`: GET /providers?limit=&cursor=, with Authorization: Bearer <key>. */
export function buildPeerRoute(pool: pg.Pool, cursorSecret: string): FastifyInstance {
  const app = Fastify()
  app.get('/healthz', () => 'ok')
  app.get<{ Querystring: Record<string, string> }>('/providers', async (request, reply) => {
    const match = /^Bearer +(\S+)$/i.exec(request.headers.authorization ?? '')
    if (match === null) return sendError(reply, 401, 'invalid_key')
    const keyHash = createHash('sha256')
      .update(match[1] as string)
      .digest('hex')
    const { limit: rawLimit, cursor, ...other } = request.query
    const limit = rawLimit === undefined ? LIMIT.default : Number(rawLimit)
    if (
      Object.keys(other).length > 0 ||
      !Number.isInteger(limit) ||
      limit < LIMIT.min ||
      limit > LIMIT.max
    ) {
      return sendError(reply, 400, 'invalid_request')
    }
    // The cursor's binding names the organization, known only once the key is: a cursor is
    // checked after the statement, and its position is taken on trust until then (a forged one
    // only selects another page of the caller's own organization, never another's rows).
    let after: readonly string[] = FIRST
    if (cursor !== undefined) {
      const payload = cursor.split('.')[0] ?? ''
      try {
        const position = JSON.parse(Buffer.from(payload, 'base64url').toString()) as unknown
        if (!Array.isArray(position) || position.length !== 2) throw new Error('not a position')
        after = position as string[]
      } catch {
        return sendError(reply, 400, 'invalid_request')
      }
    }
    const result = await pool.query<{
      organization: string | null
      docs: string | null
      nextStamp: string | null
      nextId: string | null
    }>({ name: 'provider-page', text: PROVIDER_PAGE_SQL, values: [keyHash, ...after, limit] })
    const row = result.rows[0]
    if (row?.organization == null) return sendError(reply, 401, 'invalid_key')
    const binding = cursorBinding(row.organization, 'providers', 'base', {})
    if (cursor !== undefined && decodeCursor(cursorSecret, binding, cursor, 2) === undefined) {
      return sendError(reply, 400, 'invalid_request')
    }
    const next =
      row.nextStamp === null || row.nextId === null
        ? 'null'
        : JSON.stringify(encodeCursor(cursorSecret, binding, [row.nextStamp, row.nextId]))
    return reply
      .type('application/json; charset=utf-8')
      .send(`{"data":[${row.docs ?? ''}],"nextCursor":${next}}`)
  })
  return app
}

if (process.argv[1]?.endsWith('peer-route.ts') === true && process.argv.length >= 6) {
  const [port, url, poolSize, cursorSecret] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
  ]
  const pool = new pg.Pool({ connectionString: url, max: Number(poolSize) })
  const app = buildPeerRoute(pool, cursorSecret)
  await app.listen({ host: '127.0.0.1', port: Number(port) })
  process.once('SIGTERM', () => {
    void app.close().then(() => pool.end())
  })
}
