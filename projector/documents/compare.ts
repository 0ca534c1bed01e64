// Comparing the served documents of two organization files by content, never by stamp: the
// operators' dry run (a rebuild built aside against the live file) and `verify` (documents built
// from PostgreSQL against the live file) both ask "which responses would differ?".
//
// Content is what the api reads to answer: each stored body without its `updatedAt` (providers:
// both variants, so a change only keys with the sensitive scope see counts too), and the columns
// its filters and order test. Never the stored hash: a body changed or corrupted under an
// unchanged hash is served as it is, so it must be found. A body whose `updatedAt` is not its
// row's stamp is compared whole, so it differs too (a poller's cursor would disagree with it).
// The actual file is attached to a read-only connection of the expected one (an attached file
// takes the connection's read-only flag) and both are read in one read transaction, so a live
// file the projector is writing meanwhile is compared as of one committed state.
import Database from 'better-sqlite3'
import { NO_ORGANIZATION, organizationScopedTables } from '../../src/organization-scope.ts'

/** The API's resources, named as their paths are (spec/api-v1.md section 4). */
export const comparedResources = [
  'providers',
  'provider-groups',
  'enrollments',
  'group-enrollments',
  'documents',
  'expirables',
] as const
export type ComparedResource = (typeof comparedResources)[number]

/** How many ids a diff has of one kind, and the first of them (in id order). */
export interface IdSample {
  count: number
  ids: string[]
}

export interface ResourceDiff {
  resource: ComparedResource
  /** Documents in both files with the same content. */
  equal: number
  /** In both files, with different content. */
  changed: IdSample
  /** In the expected file only (a rebuild would add it; missing in the replica). */
  appeared: IdSample
  /** In the actual file only (a rebuild would remove it; extra in the replica). */
  disappeared: IdSample
}

/** A stored body and the stamp it ends with (`,"updatedAt":"<stamp>"}`); no stamp: served whole. */
export interface ServedBody {
  body: string
  stamp?: string
}

/** What the api serves of each resource: its bodies, and the columns it filters and orders by. */
const documentTables: Record<
  ComparedResource,
  { table: string; bodies: ServedBody[]; columns: string[] }
> = {
  providers: {
    table: 'doc_providers',
    bodies: [
      { body: 'body', stamp: 'updated_at' },
      { body: 'sensitive_body', stamp: 'sensitive_updated_at' },
    ],
    columns: ['is_active'],
  },
  'provider-groups': {
    table: 'doc_provider_groups',
    bodies: [{ body: 'body', stamp: 'updated_at' }],
    columns: [],
  },
  enrollments: {
    table: 'doc_enrollments',
    bodies: [{ body: 'body', stamp: 'updated_at' }],
    columns: ['provider_id', 'status', 'payer_key'],
  },
  'group-enrollments': {
    table: 'doc_group_enrollments',
    bodies: [{ body: 'body', stamp: 'updated_at' }],
    columns: ['provider_group_id', 'status', 'payer_key'],
  },
  documents: {
    table: 'doc_documents',
    bodies: [{ body: 'body', stamp: 'updated_at' }],
    columns: ['provider_id', 'provider_group_id'],
  },
  // Stored without its last two keys: the api appends the day count (from expires_on) and the
  // stamp to each response.
  expirables: {
    table: 'doc_expirables',
    bodies: [{ body: 'body' }],
    columns: ['expires_on', 'source_type', 'source_id'],
  },
}

/** The SQL of what row `alias` serves of `body`: its text without the stamp it should end with. */
export function servedContent(alias: string, { body, stamp }: ServedBody): string {
  if (stamp === undefined) return `${alias}.${body}`
  const suffix = `(',"updatedAt":' || json_quote(${alias}.${stamp}) || '}')`
  return `(CASE WHEN substr(${alias}.${body}, -length(${suffix})) = ${suffix}
    THEN substr(${alias}.${body}, 1, length(${alias}.${body}) - length(${suffix}))
    ELSE ${alias}.${body} END)`
}

/** Default number of ids listed of each kind. */
export const IDS_PER_LIST = 20

/**
 * Compares the documents of `expectedPath` with those of `actualPath`, resource by resource. An
 * absent `actualPath` (no such file: the organization is not in the replica) has no documents.
 */
export function compareDocumentFiles(
  expectedPath: string,
  actualPath: string | undefined,
  options: {
    idsPerList?: number
    /**
     * The organization compared: read in its scope in either file where organizations share it
     * (a rebuilt shared file against the live one, or an organization's own against its share).
     */
    organization?: string
  } = {},
): ResourceDiff[] {
  const limit = options.idsPerList ?? IDS_PER_LIST
  const db = new Database(expectedPath, { readonly: true, fileMustExist: true })
  try {
    if (actualPath !== undefined) db.prepare('ATTACH DATABASE ? AS actual').run(actualPath)
    const { organization } = options
    const side = (schema: string) =>
      organization === undefined ? wholeFile(schema) : organizationSide(db, schema, organization)
    const sides = {
      expected: side('main'),
      actual: actualPath === undefined ? undefined : side('actual'),
    }
    const read = db.transaction(() =>
      comparedResources.map((resource) => compareResource(db, resource, sides, limit)),
    )
    return read()
  } finally {
    db.close()
  }
}

/** Whether any resource has a changed, appeared or disappeared document. */
export function hasDifferences(diffs: readonly ResourceDiff[]): boolean {
  return diffs.some((d) => d.changed.count + d.appeared.count + d.disappeared.count > 0)
}

/**
 * SQL that joins a table's rows of both sides by id (`both`: `e` expected, `a` actual), the
 * condition under which a pair serves differently (`differs`), and how many pairs serve alike.
 */
function servedDifference(
  db: Database.Database,
  { bodies, columns }: { bodies: readonly ServedBody[]; columns: readonly string[] },
  expected: string,
  actual: string,
): { differs: string; both: string; equal: number } {
  const differs = [
    ...bodies.map((b) => `${servedContent('e', b)} IS NOT ${servedContent('a', b)}`),
    ...columns.map((c) => `e.${c} IS NOT a.${c}`),
  ].join(' OR ')
  const both = `${expected} e JOIN ${actual} a ON a.id = e.id`
  const equal = db
    .prepare(`SELECT count(*) FROM ${both} WHERE NOT (${differs})`)
    .pluck()
    .get() as number
  return { differs, both, equal }
}

function compareResource(
  db: Database.Database,
  resource: ComparedResource,
  sides: { expected: Relations; actual: Relations | undefined },
  limit: number,
): ResourceDiff {
  const { table } = documentTables[resource]
  const expected = sides.expected(table)
  if (sides.actual === undefined) {
    return {
      resource,
      equal: 0,
      changed: { count: 0, ids: [] },
      appeared: sample(db, `SELECT id FROM ${expected}`, limit),
      disappeared: { count: 0, ids: [] },
    }
  }
  const actual = sides.actual(table)
  const { differs, both, equal } = servedDifference(db, documentTables[resource], expected, actual)
  return {
    resource,
    equal,
    changed: sample(db, `SELECT e.id FROM ${both} WHERE ${differs}`, limit),
    appeared: sample(
      db,
      `SELECT e.id FROM ${expected} e WHERE NOT EXISTS (SELECT 1 FROM ${actual} a WHERE a.id = e.id)`,
      limit,
    ),
    disappeared: sample(
      db,
      `SELECT a.id FROM ${actual} a WHERE NOT EXISTS (SELECT 1 FROM ${expected} e WHERE e.id = a.id)`,
      limit,
    ),
  }
}

function sample(db: Database.Database, idsQuery: string, limit: number): IdSample {
  const count = db.prepare(`SELECT count(*) FROM (${idsQuery})`).pluck().get() as number
  const ids =
    count === 0 ? [] : (db.prepare(`${idsQuery} ORDER BY 1 LIMIT ?`).pluck().all(limit) as string[])
  return { count, ids }
}

/** A document of the actual file with its stamp (a provider's later one of its two variants). */
export interface StampedId {
  id: string
  stamp: string
}

/** Every document of one resource that differs, by id: what verify tells lag from drift by. */
export interface ResourceDifferences {
  resource: ComparedResource
  equal: number
  differing: StampedId[]
  /** In the expected file only. */
  missing: string[]
  /** In the actual file only. */
  extra: StampedId[]
}

export interface FileDifferences {
  resources: ResourceDifferences[]
  /** The actual file's applied Kafka offsets, read in the same transaction as its documents. */
  appliedOffsets: Array<{ topic: string; partition: number; offset: number }>
}

/**
 * Every difference between the documents of `expectedPath` and `actualPath`, with the actual
 * stamps and applied offsets as of the one committed state compared. Either may be absent (no
 * such file: no documents).
 */
export function documentDifferences(
  expectedPath: string | undefined,
  actualPath: string | undefined,
  /** The organization compared, in an actual file organizations share (read in its scope). */
  actualOrganization?: string,
): FileDifferences {
  const first = expectedPath ?? actualPath
  if (first === undefined) {
    return { resources: comparedResources.map((r) => noDifferences(r)), appliedOffsets: [] }
  }
  const db = new Database(first, { readonly: true, fileMustExist: true })
  try {
    let actualSchema = 'main'
    if (expectedPath !== undefined && actualPath !== undefined) {
      db.prepare('ATTACH DATABASE ? AS actual').run(actualPath)
      actualSchema = 'actual'
    }
    // Its applied offsets are the file's; its documents the organization's.
    const offsetsOf = actualSchema
    const sides = {
      expected: wholeFile('main'),
      actual:
        actualPath !== undefined && actualOrganization !== undefined
          ? organizationSide(db, actualSchema, actualOrganization)
          : wholeFile(actualSchema),
    }
    const read = db.transaction((): FileDifferences => ({
      resources: comparedResources.map((resource) =>
        resourceDifferences(db, resource, {
          expected: expectedPath === undefined ? undefined : sides.expected,
          actual: actualPath === undefined ? undefined : sides.actual,
        }),
      ),
      appliedOffsets:
        actualPath === undefined
          ? []
          : (db
              .prepare(`SELECT topic, partition, offset FROM ${offsetsOf}.applied_offsets`)
              .all() as FileDifferences['appliedOffsets']),
    }))
    return read()
  } finally {
    db.close()
  }
}

/** Where one side's rows of a table are read, by the table's name: a qualified relation. */
type Relations = (table: string) => string

/** The tables of the file attached as `schema`, as they are. */
function wholeFile(schema: string): Relations {
  return (table) => `${schema}."${table}"`
}

/**
 * Where an organization's documents are read in the file attached as `schema`: the file itself,
 * or, in a file organizations share, temporary views of that organization's rows (its scope, as
 * src/organization-scope.ts gives a connection), named after the schema and the table so that
 * both sides of a comparison may be scoped.
 */
function organizationSide(
  db: Database.Database,
  schema: string,
  organizationId: string,
): Relations {
  const layout = db
    .prepare<[], string>(`SELECT value FROM ${schema}.replica_meta WHERE key = 'layout'`)
    .pluck()
    .get()
  if (layout !== 'shared') return wholeFile(schema)
  const key =
    db
      .prepare<[string], number>(
        `SELECT key FROM ${schema}.file_organizations WHERE organization_id = ?`,
      )
      .pluck()
      .get(organizationId) ?? NO_ORGANIZATION
  const view = (table: string) => `"${schema}_${table}"`
  for (const table of organizationScopedTables) {
    db.exec(
      `CREATE TEMP VIEW ${view(table)} AS SELECT * FROM ${schema}."${table}" WHERE organization_key = ${key}`,
    )
  }
  return (table) => `temp.${view(table)}`
}

function noDifferences(resource: ComparedResource): ResourceDifferences {
  return { resource, equal: 0, differing: [], missing: [], extra: [] }
}

function resourceDifferences(
  db: Database.Database,
  resource: ComparedResource,
  schemas: { expected: Relations | undefined; actual: Relations | undefined },
): ResourceDifferences {
  const { table, bodies } = documentTables[resource]
  const stamp = bodies
    .map((b) => `a.${b.stamp ?? 'updated_at'}`)
    .reduce((later, next) => `max(${later}, ${next})`)
  const stamped = (sql: string) => db.prepare(sql).all() as StampedId[]
  const ids = (sql: string) => db.prepare(sql).pluck().all() as string[]
  if (schemas.actual === undefined) {
    if (schemas.expected === undefined) return noDifferences(resource)
    return {
      ...noDifferences(resource),
      missing: ids(`SELECT id FROM ${schemas.expected(table)} ORDER BY id`),
    }
  }
  const actual = schemas.actual(table)
  if (schemas.expected === undefined) {
    return {
      ...noDifferences(resource),
      extra: stamped(`SELECT a.id AS id, ${stamp} AS stamp FROM ${actual} a ORDER BY a.id`),
    }
  }
  const expected = schemas.expected(table)
  const { differs, both, equal } = servedDifference(db, documentTables[resource], expected, actual)
  return {
    resource,
    equal,
    differing: stamped(
      `SELECT e.id AS id, ${stamp} AS stamp FROM ${both} WHERE ${differs} ORDER BY e.id`,
    ),
    missing: ids(
      `SELECT e.id FROM ${expected} e WHERE NOT EXISTS (SELECT 1 FROM ${actual} a WHERE a.id = e.id) ORDER BY e.id`,
    ),
    extra: stamped(
      `SELECT a.id AS id, ${stamp} AS stamp FROM ${actual} a
        WHERE NOT EXISTS (SELECT 1 FROM ${expected} e WHERE e.id = a.id) ORDER BY a.id`,
    ),
  }
}
