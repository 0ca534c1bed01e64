// Tables of the control file (`control.db`): what the api needs before it knows which
// organization file to open (keys, organization state), the routing index the projector needs to
// deliver deletes that carry no organization, and the replica's readiness.
import { blob, index, integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core'

const sourcePosition = {
  sourceLsn: integer('source_lsn').notNull(),
  fromSnapshot: integer('from_snapshot', { mode: 'boolean' }).notNull(),
}

export const organizations = sqliteTable('organizations', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  apiEnabled: integer('api_enabled', { mode: 'boolean' }).notNull(),
  /** 'active' | 'past_due' (402 payment_past_due) | 'inactive' (402 subscription_inactive) */
  billingStatus: text('billing_status').notNull(),
  createdAt: text('created_at').notNull(),
  updatedAt: text('updated_at').notNull(),
  ...sourcePosition,
})

export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    organizationId: text('organization_id').notNull(),
    name: text('name').notNull(),
    /** Lowercase hex SHA-256 of the raw key; the raw key is never stored. */
    keyHash: text('key_hash').notNull().unique(),
    /** JSON array of scope strings. */
    scopes: text('scopes').notNull(),
    createdAt: text('created_at').notNull(),
    expiresAt: text('expires_at'),
    revokedAt: text('revoked_at'),
    ...sourcePosition,
  },
  (t) => [index('api_keys_organization').on(t.organizationId)],
)

/**
 * Which organization a source row belongs to: deletes carry only the primary key. Kept in the
 * routing index's own file (`routes.db`, schema/routes-db.ts) since 2026-11-30; control.db keeps
 * the table, empty once the projector has carried its rows over (projector/storage/route-file.ts). One row per
 * source row of every organization table, written for each as it arrives, so it is kept small
 * (WITHOUT ROWID, added by hand in migration 0001: drizzle does not model it): the uuid as its 16
 * bytes, the table and the organization as small integers. At 1M rows it is 27 MB, where text
 * columns in a rowid table took 166 MB, and a load's random inserts hit the page cache instead of
 * reading pages back.
 */
export const rowRoutes = sqliteTable(
  'routes',
  {
    /** The row's uuid, as 16 bytes. */
    id: blob('id', { mode: 'buffer' }).notNull(),
    /** `ROUTED_TABLES` in projector/storage/control-file.ts: stored codes, never renumbered. */
    sourceTable: integer('source_table').notNull(),
    /** `routeOrganizations.organization`. */
    organization: integer('organization').notNull(),
  },
  (t) => [primaryKey({ columns: [t.id, t.sourceTable] })],
)

/** The small integers `routes` stores for organizations. */
export const routeOrganizations = sqliteTable('route_organizations', {
  organization: integer('organization').primaryKey(),
  organizationId: text('organization_id').notNull().unique(),
})

export const deletedRows = sqliteTable(
  'deleted_rows',
  {
    sourceTable: text('source_table').notNull(),
    id: text('id').notNull(),
    sourceLsn: integer('source_lsn').notNull(),
  },
  (t) => [primaryKey({ columns: [t.sourceTable, t.id] })],
)

export const appliedOffsets = sqliteTable(
  'applied_offsets',
  {
    topic: text('topic').notNull(),
    partition: integer('partition').notNull(),
    offset: integer('offset').notNull(),
  },
  (t) => [primaryKey({ columns: [t.topic, t.partition] })],
)

/**
 * The file that holds an organization's data, when it is not the first one: a per-organization
 * rebuild builds a new file aside (`<organizationId>.<version>.db`) and the projector points the
 * organization at it (projector/storage/handover.ts). SQLite files must not be renamed over while
 * open, so a swap is a new name, and readers follow this row. In a generation of shared files
 * (src/organization-files.ts) the row is the shared file's: `organization_id` holds the file's key
 * (`shared-<k>.db`, its first name), `file` the version that replaced it
 * (`shared-<k>.<version>.db`), the file of every organization that hashes to it. The column keeps
 * its name so that an api and a projector of different versions read the same table.
 */
export const organizationFiles = sqliteTable('organization_files', {
  organizationId: text('organization_id').primaryKey(),
  file: text('file').notNull(),
})

/**
 * Replica-wide state. Keys:
 * - `caught_up_at`: when the replica first caught up (Kafka: lag zero on every partition once;
 *   file: the file applied). Until it is set the api answers 503 api_temporarily_unavailable.
 * - `maintenance`: present when an operator switched the api off (503 api_unavailable).
 * - `consumer_group`: the Kafka consumer group feeding this generation (a rebuild uses a fresh one).
 */
export const replicaState = sqliteTable('replica_state', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
})
