// Every statement the document layer runs. The reads are written with drizzle's query builder and
// run as raw better-sqlite3 statements (rows as arrays, mapped by a loop): drizzle's prepared
// queries re-fill placeholders and map every value through its column on each call, which cost
// more than SQLite's own work here.
//
// A statement's text is the same for every file: each is planned once per process (`Plan`), and a
// file's connection prepares it on its first use (src/sqlite.ts `preparedOnUse`). Built and
// prepared afresh for every file, they cost each open 30 ms and 1.2 MB, most of it drizzle's SQL
// generation and statements the file never ran, and a projector with thousands of small
// organizations opens files by the thousand.
//
// Orderings are the ones spec/resources.md fixes, completed with the row id so that the order is
// total (equal mirror content, identical text). Text compares with SQLite's BINARY collation
// (code point order, case-sensitive). An enrollment location whose service location has not
// arrived has a null name: it sorts after every named location (NULLS LAST), then by id.
import type Database from 'better-sqlite3'
import {
  and,
  asc,
  between,
  Column,
  desc,
  eq,
  getTableColumns,
  gt,
  is,
  isNotNull,
  Placeholder,
  sql,
  type SQL,
} from 'drizzle-orm'
import { getTableConfig, QueryBuilder, type AnySQLiteColumn } from 'drizzle-orm/sqlite-core'
import {
  documentDocs,
  documents,
  enrollmentDocs,
  enrollmentLinesOfBusiness,
  enrollmentLocationParticipations,
  enrollmentRequirements,
  enrollments,
  expirableDocs,
  groupEnrollmentDocs,
  groupEnrollmentLinesOfBusiness,
  groupEnrollments,
  groupIdentifiers,
  groupMemberships,
  providerDocs,
  providerGroupDocs,
  providerGroups,
  providerIdentifiers,
  providers,
  serviceLocations,
} from '../../schema/organization-db.ts'
import type { OrganizationScope } from '../../src/organization-scope.ts'
import { preparedOnUse } from '../../src/sqlite.ts'

/** Builds SQL text with no connection: plans are made once, for every file. */
const qb = new QueryBuilder()

const id = sql.placeholder('id')
// Bounds of the whole-file build's reads (prepareBulkReads).
const firstParent = sql.placeholder('first')
const lastParent = sql.placeholder('last')
const pageAfter = sql.placeholder('after')
const pageSize = sql.placeholder('limit')
const idList = sql.placeholder('ids')

const MAPPED_AS_IS = new Set(['SQLiteText', 'SQLiteInteger', 'SQLiteBoolean'])

/** A drizzle select, with the row type it returns. */
interface BuiltSelect<T> {
  toSQL(): { sql: string; params: unknown[] }
  readonly _: { readonly selectedFields: unknown; readonly result: T[] }
}

/** What a connection makes of a plan, its statements prepared on their first use. */
interface Plan<R> {
  on(sqlite: Database.Database): R
}

/** The readers and writers a connection makes of a (nested) object of plans. */
type Bound<P> = { [K in keyof P]: P[K] extends Plan<infer R> ? R : Bound<P[K]> }

function bindPlans<P extends object>(sqlite: Database.Database, plans: P): Bound<P> {
  const bound: Record<string, unknown> = {}
  for (const [key, plan] of Object.entries(plans)) {
    bound[key] = isPlan(plan) ? plan.on(sqlite) : bindPlans(sqlite, plan as object)
  }
  return bound as Bound<P>
}

function isPlan(value: unknown): value is Plan<unknown> {
  return typeof (value as Partial<Plan<unknown>>).on === 'function'
}

/** A select's text, and how to bind its parameters and map its rows. */
interface RawPlan {
  text: string
  /** The placeholder names in the statement's parameter order. */
  order: string[]
  keys: string[]
  booleans: boolean[]
  /** Integers read exactly: as numbers where a double holds them, else as decimal text. */
  exact: boolean
}

/**
 * An int64 as the documents serve it: a number where a double holds it exactly, else its decimal
 * text (documents.size_bytes is a bigint; better-sqlite3 would round it past 2^53).
 */
export function exactInteger(value: bigint): number | string {
  const n = Number(value)
  return Number.isSafeInteger(n) ? n : value.toString()
}

/** A select on one connection: rows as arrays. */
interface RawSelect extends RawPlan {
  statement: () => Database.Statement<unknown[], unknown[]>
  /** Binds named values in the statement's parameter order. */
  bind(values: Readonly<Record<string, unknown>>): unknown[]
}

/** Plans a drizzle select whose parameters are all placeholders named in `names`. */
function planRaw(query: BuiltSelect<unknown>, names: readonly string[], exact = false): RawPlan {
  const { sql: text, params } = query.toSQL()
  const order = params.map((param) => {
    if (!(is(param, Placeholder) && names.includes(param.name))) {
      throw new Error(`unexpected parameter in ${text}`)
    }
    return param.name
  })
  const fields = Object.entries(query._.selectedFields as Record<string, unknown>)
  const booleans = fields.map(([key, field]) => {
    if (!is(field, Column) || !MAPPED_AS_IS.has(field.columnType)) {
      throw new Error(`${key}: only text, integer and boolean columns are mapped here`)
    }
    return field.columnType === 'SQLiteBoolean'
  })
  return { text, order, keys: fields.map(([key]) => key), booleans, exact }
}

function rawOn(sqlite: Database.Database, plan: RawPlan): RawSelect {
  return {
    ...plan,
    statement: preparedOnUse(() =>
      sqlite.prepare<unknown[], unknown[]>(plan.text).raw(true).safeIntegers(plan.exact),
    ),
    bind: (values) => plan.order.map((name) => values[name]),
  }
}

/**
 * Maps a raw row from column `from` on as drizzle maps it: null stays null, boolean columns read
 * `Number(v) === 1`, every other column here is returned as is.
 */
function rowMapper<T>({ keys, booleans, exact }: RawSelect, from = 0): (values: unknown[]) => T {
  return (values) => {
    const row: Record<string, unknown> = {}
    for (let i = from; i < keys.length; i++) {
      let value = values[i]
      if (exact && typeof value === 'bigint') value = exactInteger(value)
      row[keys[i]!] = value === null ? null : booleans[i] ? Number(value) === 1 : value
    }
    return row as T
  }
}

/** A prepared read by id: the row or rows drizzle would return, mapped the same way. */
export interface ReadById<T> {
  get(id: string): T | undefined
  all(id: string): T[]
}

/** A drizzle select whose only parameter is the `id` placeholder. */
function readPlan<T>(query: BuiltSelect<T>, exact = false): Plan<ReadById<T>> {
  const plan = planRaw(query, ['id'], exact)
  return {
    on(sqlite) {
      const raw = rawOn(sqlite, plan)
      const map = rowMapper<T>(raw)
      return {
        get(id) {
          const values = raw.statement().get(raw.bind({ id }))
          return values === undefined ? undefined : map(values)
        },
        all: (id) => raw.statement().all(raw.bind({ id })).map(map),
      }
    },
  }
}

// ---- Child lists ---------------------------------------------------------------------------------
//
// Each list a response embeds is one query, read either for one parent (a batch's refresh) or for
// every parent whose id lies in a range (the whole-file build: then the parent id comes first, as
// `parentId`, and leads the order). Both reads share the fields and the order, so the entries of a
// document and their order are the same whichever path built it.

/** Which parents a child list is read for. */
interface Parents<K extends Record<string, AnySQLiteColumn>> {
  /** Selected before the entry's fields (and left out of the entry). */
  key(parent: AnySQLiteColumn): K
  where(parent: AnySQLiteColumn): SQL
  /** Sort keys before the entry's own. */
  order(parent: AnySQLiteColumn): SQL[]
}

/** The parent `id`. */
const oneParent: Parents<Record<never, never>> = {
  key: () => ({}),
  where: (parent) => eq(parent, id),
  order: () => [],
}

/** Every parent with an id in [first, last], grouped by `parentId`. */
const parentRange: Parents<{ parentId: AnySQLiteColumn }> = {
  key: (parent) => ({ parentId: parent }),
  where: (parent) => between(parent, firstParent, lastParent),
  order: (parent) => [asc(parent)],
}

type Key = Record<string, AnySQLiteColumn>

function providerMembershipsOf<K extends Key>(parents: Parents<K>) {
  return (
    qb
      .select({
        ...parents.key(groupMemberships.providerId),
        providerGroupId: providerGroups.id,
        name: providerGroups.name,
        npi: providerGroups.npi,
        tin: providerGroups.tin,
      })
      .from(groupMemberships)
      // Inner join: a membership whose group has not arrived is left out.
      .innerJoin(providerGroups, eq(providerGroups.id, groupMemberships.providerGroupId))
      .where(parents.where(groupMemberships.providerId))
      .orderBy(
        ...parents.order(groupMemberships.providerId),
        asc(providerGroups.name),
        asc(providerGroups.id),
        asc(groupMemberships.id),
      )
  )
}

function providerIdentifiersOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(providerIdentifiers.providerId),
      id: providerIdentifiers.id,
      type: providerIdentifiers.type,
      value: providerIdentifiers.value,
      issuedOn: providerIdentifiers.issuedOn,
      expiresOn: providerIdentifiers.expiresOn,
      metadata: providerIdentifiers.metadata,
    })
    .from(providerIdentifiers)
    .where(parents.where(providerIdentifiers.providerId))
    .orderBy(
      ...parents.order(providerIdentifiers.providerId),
      asc(providerIdentifiers.type),
      asc(providerIdentifiers.id),
    )
}

function groupServiceLocationsOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(serviceLocations.providerGroupId),
      id: serviceLocations.id,
      name: serviceLocations.name,
      address: serviceLocations.address,
      addressLine2: serviceLocations.addressLine2,
      city: serviceLocations.city,
      state: serviceLocations.state,
      zip: serviceLocations.zip,
      phone: serviceLocations.phone,
      isPrimary: serviceLocations.isPrimary,
    })
    .from(serviceLocations)
    .where(parents.where(serviceLocations.providerGroupId))
    .orderBy(
      ...parents.order(serviceLocations.providerGroupId),
      desc(serviceLocations.isPrimary),
      asc(serviceLocations.name),
      asc(serviceLocations.id),
    )
}

function groupIdentifiersOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(groupIdentifiers.providerGroupId),
      id: groupIdentifiers.id,
      type: groupIdentifiers.type,
      value: groupIdentifiers.value,
      issuedOn: groupIdentifiers.issuedOn,
      expiresOn: groupIdentifiers.expiresOn,
      metadata: groupIdentifiers.metadata,
    })
    .from(groupIdentifiers)
    .where(parents.where(groupIdentifiers.providerGroupId))
    .orderBy(
      ...parents.order(groupIdentifiers.providerGroupId),
      asc(groupIdentifiers.type),
      asc(groupIdentifiers.id),
    )
}

function enrollmentRequirementsOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(enrollmentRequirements.enrollmentId),
      id: enrollmentRequirements.id,
      name: enrollmentRequirements.name,
      isComplete: enrollmentRequirements.isComplete,
      completedAt: enrollmentRequirements.completedAt,
    })
    .from(enrollmentRequirements)
    .where(parents.where(enrollmentRequirements.enrollmentId))
    .orderBy(
      ...parents.order(enrollmentRequirements.enrollmentId),
      asc(enrollmentRequirements.position),
      asc(enrollmentRequirements.id),
    )
}

function enrollmentLinesOfBusinessOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(enrollmentLinesOfBusiness.enrollmentId),
      id: enrollmentLinesOfBusiness.id,
      lineOfBusiness: enrollmentLinesOfBusiness.lineOfBusiness,
      status: enrollmentLinesOfBusiness.status,
      effectiveDate: enrollmentLinesOfBusiness.effectiveDate,
    })
    .from(enrollmentLinesOfBusiness)
    .where(parents.where(enrollmentLinesOfBusiness.enrollmentId))
    .orderBy(
      ...parents.order(enrollmentLinesOfBusiness.enrollmentId),
      asc(enrollmentLinesOfBusiness.lineOfBusiness),
      asc(enrollmentLinesOfBusiness.id),
    )
}

function enrollmentLocationsOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(enrollmentLocationParticipations.enrollmentId),
      id: enrollmentLocationParticipations.id,
      serviceLocationId: enrollmentLocationParticipations.serviceLocationId,
      // Left join: null name, city and state until the service location arrives.
      name: serviceLocations.name,
      city: serviceLocations.city,
      state: serviceLocations.state,
      isActive: enrollmentLocationParticipations.isActive,
      activatedOn: enrollmentLocationParticipations.activatedOn,
    })
    .from(enrollmentLocationParticipations)
    .leftJoin(
      serviceLocations,
      eq(serviceLocations.id, enrollmentLocationParticipations.serviceLocationId),
    )
    .where(parents.where(enrollmentLocationParticipations.enrollmentId))
    .orderBy(
      ...parents.order(enrollmentLocationParticipations.enrollmentId),
      sql`${serviceLocations.name} asc nulls last`,
      asc(enrollmentLocationParticipations.id),
    )
}

function groupEnrollmentLinesOfBusinessOf<K extends Key>(parents: Parents<K>) {
  return qb
    .select({
      ...parents.key(groupEnrollmentLinesOfBusiness.groupEnrollmentId),
      id: groupEnrollmentLinesOfBusiness.id,
      lineOfBusiness: groupEnrollmentLinesOfBusiness.lineOfBusiness,
      status: groupEnrollmentLinesOfBusiness.status,
      effectiveDate: groupEnrollmentLinesOfBusiness.effectiveDate,
    })
    .from(groupEnrollmentLinesOfBusiness)
    .where(parents.where(groupEnrollmentLinesOfBusiness.groupEnrollmentId))
    .orderBy(
      ...parents.order(groupEnrollmentLinesOfBusiness.groupEnrollmentId),
      asc(groupEnrollmentLinesOfBusiness.lineOfBusiness),
      asc(groupEnrollmentLinesOfBusiness.id),
    )
}

const embeddedProviderFields = {
  id: providers.id,
  firstName: providers.firstName,
  middleName: providers.middleName,
  lastName: providers.lastName,
  suffix: providers.suffix,
  npi: providers.npi,
}

const embeddedGroupFields = {
  id: providerGroups.id,
  name: providerGroups.name,
  npi: providerGroups.npi,
  tin: providerGroups.tin,
}

/** Reads of the mirror: each child list selects exactly the response entry, in key order. */
const mirrorReadPlans = {
  provider: readPlan(qb.select().from(providers).where(eq(providers.id, id))),
  providerMemberships: readPlan(providerMembershipsOf(oneParent)),
  providerIdentifiers: readPlan(providerIdentifiersOf(oneParent)),

  providerGroup: readPlan(qb.select().from(providerGroups).where(eq(providerGroups.id, id))),
  groupServiceLocations: readPlan(groupServiceLocationsOf(oneParent)),
  groupIdentifiers: readPlan(groupIdentifiersOf(oneParent)),

  enrollment: readPlan(qb.select().from(enrollments).where(eq(enrollments.id, id))),
  embeddedProvider: readPlan(
    qb.select(embeddedProviderFields).from(providers).where(eq(providers.id, id)),
  ),
  enrollmentRequirements: readPlan(enrollmentRequirementsOf(oneParent)),
  enrollmentLinesOfBusiness: readPlan(enrollmentLinesOfBusinessOf(oneParent)),
  enrollmentLocations: readPlan(enrollmentLocationsOf(oneParent)),

  groupEnrollment: readPlan(qb.select().from(groupEnrollments).where(eq(groupEnrollments.id, id))),
  embeddedGroup: readPlan(
    qb.select(embeddedGroupFields).from(providerGroups).where(eq(providerGroups.id, id)),
  ),
  groupEnrollmentLinesOfBusiness: readPlan(groupEnrollmentLinesOfBusinessOf(oneParent)),

  // Exact: size_bytes is a bigint.
  document: readPlan(qb.select().from(documents).where(eq(documents.id, id)), true),
  providerIdentifier: readPlan(
    qb.select().from(providerIdentifiers).where(eq(providerIdentifiers.id, id)),
  ),
  groupIdentifier: readPlan(qb.select().from(groupIdentifiers).where(eq(groupIdentifiers.id, id))),

  // Fan-outs (indexed by schema/organization-db.ts).
  enrollmentsOfProvider: readPlan(
    qb.select({ id: enrollments.id }).from(enrollments).where(eq(enrollments.providerId, id)),
  ),
  membersOfGroup: readPlan(
    qb
      .selectDistinct({ id: groupMemberships.providerId })
      .from(groupMemberships)
      .where(eq(groupMemberships.providerGroupId, id)),
  ),
  groupEnrollmentsOfGroup: readPlan(
    qb
      .select({ id: groupEnrollments.id })
      .from(groupEnrollments)
      .where(eq(groupEnrollments.providerGroupId, id)),
  ),
  enrollmentsAtLocation: readPlan(
    qb
      .selectDistinct({ id: enrollmentLocationParticipations.enrollmentId })
      .from(enrollmentLocationParticipations)
      .where(eq(enrollmentLocationParticipations.serviceLocationId, id)),
  ),
}

export function prepareMirrorReads(sqlite: Database.Database) {
  return bindPlans(sqlite, mirrorReadPlans)
}

export type MirrorReads = ReturnType<typeof prepareMirrorReads>

// ---- The whole-file build's reads -----------------------------------------------------------------
//
// refreshAll builds every document of a file. Rather than a few point reads per document, it walks
// each table in id order a page at a time and reads each child list once per page, for the page's
// range of parent ids. Every read is whole (`.all()`): better-sqlite3 runs nothing else on a
// connection while a statement iterates, and the build writes between pages.

/** A table's rows in id order, `size` to a page. */
type Pages<T> = (size: number) => Generator<T[]>

/** The child entries of every parent with an id in [first, last], by parent id, each list in order. */
type ChildrenInRange<T> = (first: string, last: string) => Map<string, T[]>

/** `query(startAfter)`: the table's rows in id order, `limit` of them, after `startAfter` if set. */
function pagesPlan<T extends { id: string }>(
  idColumn: AnySQLiteColumn,
  query: (startAfter: SQL | undefined) => BuiltSelect<T>,
  exact = false,
): Plan<Pages<T>> {
  const firstPlan = planRaw(query(undefined), ['limit'], exact)
  // Keyset: each page starts after the last id of the one before.
  const nextPlan = planRaw(query(gt(idColumn, pageAfter)), ['after', 'limit'], exact)
  return {
    on(sqlite) {
      const firstPage = rawOn(sqlite, firstPlan)
      const nextPage = rawOn(sqlite, nextPlan)
      const map = rowMapper<T>(firstPage)
      return function* (size) {
        let page = firstPage
          .statement()
          .all(firstPage.bind({ limit: size }))
          .map(map)
        while (page.length > 0) {
          yield page
          if (page.length < size) return
          const bounds = { after: page[page.length - 1]!.id, limit: size }
          page = nextPage.statement().all(nextPage.bind(bounds)).map(map)
        }
      }
    },
  }
}

/** A child list read for a range of parents: its rows arrive grouped, `parentId` first. */
function childrenPlan<R extends { parentId: unknown }>(
  query: BuiltSelect<R>,
): Plan<ChildrenInRange<Omit<R, 'parentId'>>> {
  const plan = planRaw(query, ['first', 'last'])
  if (plan.keys[0] !== 'parentId') throw new Error(`parentId must come first in ${plan.text}`)
  return {
    on(sqlite) {
      const raw = rawOn(sqlite, plan)
      const map = rowMapper<Omit<R, 'parentId'>>(raw, 1)
      return (first, last) => {
        const byParent = new Map<string, Omit<R, 'parentId'>[]>()
        let parentId: unknown
        let entries: Omit<R, 'parentId'>[] = []
        for (const values of raw.statement().all(raw.bind({ first, last }))) {
          if (values[0] !== parentId) {
            parentId = values[0]
            entries = []
            byParent.set(parentId as string, entries)
          }
          entries.push(map(values))
        }
        return byParent
      }
    },
  }
}

/** Rows by id, for the ids asked (a JSON array bound as `ids`); ids without a row are absent. */
function byIdsPlan<T extends { id: string }>(
  query: BuiltSelect<T>,
): Plan<(wanted: Iterable<string>) => Map<string, T>> {
  const plan = planRaw(query, ['ids'])
  return {
    on(sqlite) {
      const raw = rawOn(sqlite, plan)
      const map = rowMapper<T>(raw)
      return (wanted) => {
        const rows = new Map<string, T>()
        const bound = raw.bind({ ids: JSON.stringify([...new Set(wanted)]) })
        for (const values of raw.statement().all(bound)) {
          const row = map(values)
          rows.set(row.id, row)
        }
        return rows
      }
    },
  }
}

/** Ids of the stored documents of `table` that `sources` (a select of ids) no longer implies. */
function orphansPlan(table: DocumentTable, sources: string): Plan<() => string[]> {
  const text = `SELECT "id" FROM "${getTableConfig(table).name}" WHERE "id" NOT IN (${sources})`
  return {
    on(sqlite) {
      const statement = preparedOnUse(() => sqlite.prepare<[], string>(text).pluck())
      return () => statement().all()
    },
  }
}

/** Reads of the whole-file build: pages of parents, child lists by page, orphaned documents. */
function bulkReadPlans() {
  const children = childrenPlan
  const inList = (column: AnySQLiteColumn) =>
    sql`${column} IN (SELECT value FROM json_each(${idList}))`
  return {
    providers: pagesPlan(providers.id, (startAfter) =>
      qb.select().from(providers).where(startAfter).orderBy(asc(providers.id)).limit(pageSize),
    ),
    providerMemberships: children(providerMembershipsOf(parentRange)),
    providerIdentifiers: children(providerIdentifiersOf(parentRange)),

    providerGroups: pagesPlan(providerGroups.id, (startAfter) =>
      qb
        .select()
        .from(providerGroups)
        .where(startAfter)
        .orderBy(asc(providerGroups.id))
        .limit(pageSize),
    ),
    groupServiceLocations: children(groupServiceLocationsOf(parentRange)),
    groupIdentifiers: children(groupIdentifiersOf(parentRange)),

    enrollments: pagesPlan(enrollments.id, (startAfter) =>
      qb.select().from(enrollments).where(startAfter).orderBy(asc(enrollments.id)).limit(pageSize),
    ),
    // A page's providers are anywhere in the table: read by id list, not by range.
    embeddedProviders: byIdsPlan(
      qb.select(embeddedProviderFields).from(providers).where(inList(providers.id)),
    ),
    enrollmentRequirements: children(enrollmentRequirementsOf(parentRange)),
    enrollmentLinesOfBusiness: children(enrollmentLinesOfBusinessOf(parentRange)),
    enrollmentLocations: children(enrollmentLocationsOf(parentRange)),

    groupEnrollments: pagesPlan(groupEnrollments.id, (startAfter) =>
      qb
        .select()
        .from(groupEnrollments)
        .where(startAfter)
        .orderBy(asc(groupEnrollments.id))
        .limit(pageSize),
    ),
    embeddedGroups: byIdsPlan(
      qb.select(embeddedGroupFields).from(providerGroups).where(inList(providerGroups.id)),
    ),
    groupEnrollmentLinesOfBusiness: children(groupEnrollmentLinesOfBusinessOf(parentRange)),

    // Each document row is also the source of its expirable, if it has an expiration date.
    documents: pagesPlan(
      documents.id,
      (startAfter) =>
        qb.select().from(documents).where(startAfter).orderBy(asc(documents.id)).limit(pageSize),
      true,
    ),

    // The other sources of expirables: identifiers with an expiration date, with what the
    // expirable shows of them.
    expiringGroupIdentifiers: pagesPlan(groupIdentifiers.id, (startAfter) =>
      qb
        .select({
          id: groupIdentifiers.id,
          providerGroupId: groupIdentifiers.providerGroupId,
          type: groupIdentifiers.type,
          value: groupIdentifiers.value,
          expiresOn: groupIdentifiers.expiresOn,
        })
        .from(groupIdentifiers)
        .where(and(isNotNull(groupIdentifiers.expiresOn), startAfter))
        .orderBy(asc(groupIdentifiers.id))
        .limit(pageSize),
    ),
    expiringProviderIdentifiers: pagesPlan(providerIdentifiers.id, (startAfter) =>
      qb
        .select({
          id: providerIdentifiers.id,
          providerId: providerIdentifiers.providerId,
          type: providerIdentifiers.type,
          value: providerIdentifiers.value,
          expiresOn: providerIdentifiers.expiresOn,
        })
        .from(providerIdentifiers)
        .where(and(isNotNull(providerIdentifiers.expiresOn), startAfter))
        .orderBy(asc(providerIdentifiers.id))
        .limit(pageSize),
    ),

    orphans: {
      providers: orphansPlan(providerDocs, 'SELECT id FROM providers'),
      providerGroups: orphansPlan(providerGroupDocs, 'SELECT id FROM provider_groups'),
      enrollments: orphansPlan(enrollmentDocs, 'SELECT id FROM enrollments'),
      groupEnrollments: orphansPlan(groupEnrollmentDocs, 'SELECT id FROM group_enrollments'),
      documents: orphansPlan(documentDocs, 'SELECT id FROM documents'),
      // Ids as builders.ts `expirableId` makes them.
      expirables: orphansPlan(
        expirableDocs,
        `SELECT 'provider_identifier:' || id FROM provider_identifiers WHERE expires_on IS NOT NULL
         UNION ALL SELECT 'group_identifier:' || id FROM group_identifiers WHERE expires_on IS NOT NULL
         UNION ALL SELECT 'document:' || id FROM documents WHERE expires_on IS NOT NULL`,
      ),
    },
  }
}

/** Planned on the first build in a process: the live path never needs them. */
let bulkPlans: ReturnType<typeof bulkReadPlans> | undefined

export function prepareBulkReads(sqlite: Database.Database) {
  return bindPlans(sqlite, (bulkPlans ??= bulkReadPlans()))
}

export type BulkReads = ReturnType<typeof prepareBulkReads>

type DocumentTable =
  | typeof providerDocs
  | typeof providerGroupDocs
  | typeof enrollmentDocs
  | typeof groupEnrollmentDocs
  | typeof documentDocs
  | typeof expirableDocs

function columnsOf(table: DocumentTable) {
  return Object.entries<AnySQLiteColumn>(getTableColumns(table)).map(([key, column]) => ({
    key,
    name: column.name,
    boolean: column.columnType === 'SQLiteBoolean',
  }))
}

/**
 * Writes a served document unless the stored one has the same content: one upsert that does
 * nothing when the stored hash equals the new one (then its stamp and body stay). Returns whether
 * it wrote. Values bind by column key, booleans as 1/0 (as drizzle binds them).
 */
function writePlan<T extends DocumentTable>(
  table: T,
  /** SET clauses by column name, for columns not simply replaced by the new value. */
  keep: Record<string, string> = {},
): StorePlan<(row: Omit<T['$inferInsert'], 'organizationKey'>) => boolean> {
  const name = getTableConfig(table).name
  const columns = columnsOf(table)
  const changed = columns
    .filter((c) => c.name.endsWith('hash') || c.name === 'organization_key')
    .map((c) => `"${name}"."${c.name}" IS NOT excluded."${c.name}"`)
  // The table itself (`main.`): a shared file's connection reads through views of one
  // organization (src/organization-scope.ts), and writes carry the organization in scope.
  const text = `INSERT INTO main."${name}" (${columns.map((c) => `"${c.name}"`).join(', ')})
     VALUES (${columns.map(() => '?').join(', ')})
     ON CONFLICT ("id") DO UPDATE SET ${columns
       .filter((c) => c.name !== 'id')
       .map((c) => `"${c.name}" = ${keep[c.name] ?? `excluded."${c.name}"`}`)
       .join(', ')}
     WHERE ${changed.join(' OR ')}`
  const keys = columns.map((c) => c.key)
  const booleans = columns.map((c) => c.boolean)
  const organizationAt = keys.indexOf('organizationKey')
  return {
    on(sqlite, scope) {
      const statement = preparedOnUse(() => sqlite.prepare<unknown[]>(text))
      return (row) => {
        const values = new Array<unknown>(keys.length)
        for (let i = 0; i < keys.length; i++) {
          const value = (row as Record<string, unknown>)[keys[i]!]
          values[i] = booleans[i] ? (value ? 1 : 0) : (value ?? null)
        }
        values[organizationAt] = scope.key
        return statement().run(values).changes > 0
      }
    },
  }
}

/** Deletes a served document of the organization in scope; true if there was one. */
function removePlan(table: DocumentTable): StorePlan<(documentId: string) => boolean> {
  const text = `DELETE FROM main."${getTableConfig(table).name}" WHERE "id" = ? AND organization_key = ?`
  return {
    on(sqlite, scope) {
      const statement = preparedOnUse(() => sqlite.prepare<[string, number]>(text))
      return (documentId) => statement().run(documentId, scope.key).changes > 0
    },
  }
}

/** A write of the documents: made for a connection and the organization scope it writes in. */
interface StorePlan<R> {
  on(sqlite: Database.Database, scope: Pick<OrganizationScope, 'key'>): R
}

// Each provider variant keeps its stamp and body unless its own content changed (the stored
// body is the same content stamped with the stored stamp). SQLite evaluates every SET
// expression against the row as it was. A row that moved to another organization of a shared file
// takes the new stamps: its new organization's clients never saw it.
const keepUnless = (hash: string, column: string) =>
  `CASE WHEN "doc_providers"."${hash}" = excluded."${hash}"
     AND "doc_providers".organization_key = excluded.organization_key
   THEN "doc_providers"."${column}" ELSE excluded."${column}" END`

const documentStorePlans = {
  provider: {
    /** Writes both variants unless both hashes are unchanged; true if it wrote. */
    write: writePlan(providerDocs, {
      updated_at: keepUnless('hash', 'updated_at'),
      body: keepUnless('hash', 'body'),
      sensitive_updated_at: keepUnless('sensitive_hash', 'sensitive_updated_at'),
      sensitive_body: keepUnless('sensitive_hash', 'sensitive_body'),
    }),
    remove: removePlan(providerDocs),
  },
  providerGroup: { write: writePlan(providerGroupDocs), remove: removePlan(providerGroupDocs) },
  enrollment: { write: writePlan(enrollmentDocs), remove: removePlan(enrollmentDocs) },
  groupEnrollment: {
    write: writePlan(groupEnrollmentDocs),
    remove: removePlan(groupEnrollmentDocs),
  },
  document: { write: writePlan(documentDocs), remove: removePlan(documentDocs) },
  expirable: { write: writePlan(expirableDocs), remove: removePlan(expirableDocs) },
}

/** Writes of the served documents, for the organization `scope` names. */
export function prepareDocumentStore(
  sqlite: Database.Database,
  scope: Pick<OrganizationScope, 'key'>,
) {
  const bind = <W, R>(plans: { write: StorePlan<W>; remove: StorePlan<R> }) => ({
    write: plans.write.on(sqlite, scope),
    remove: plans.remove.on(sqlite, scope),
  })
  const p = documentStorePlans
  return {
    provider: bind(p.provider),
    providerGroup: bind(p.providerGroup),
    enrollment: bind(p.enrollment),
    groupEnrollment: bind(p.groupEnrollment),
    document: bind(p.document),
    expirable: bind(p.expirable),
  }
}

export type DocumentStore = ReturnType<typeof prepareDocumentStore>
