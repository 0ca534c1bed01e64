// The initial snapshot: every row, table by table like Debezium's snapshot, parents before
// children, except a small fraction of parent rows held back to the end so that some children
// arrive before the row they point to.
import type { Row, TableName } from './debezium.ts'
import type { Emitter, RecordParts } from './emitter.ts'
import * as M from './model.ts'

/** Parent tables first; payer_portal_logins last (every organization has at least one). */
export const SNAPSHOT_ORDER: readonly TableName[] = [
  'organizations',
  'api_keys',
  'provider_groups',
  'service_locations',
  'group_identifiers',
  'group_enrollments',
  'group_enrollment_lines_of_business',
  'providers',
  'provider_identifiers',
  'group_memberships',
  'enrollments',
  'enrollment_requirements',
  'enrollment_lines_of_business',
  'enrollment_location_participations',
  'documents',
  'payer_portal_logins',
]

/** Share of parent rows whose snapshot read comes after all the children. */
export const DEFERRED_SHARE = 0.01
const DEFER = 0x0def

/** [organization, a, b]: enough to rebuild a deferred row. */
type Coord = readonly [number, number, number]

interface Scope {
  readonly ctx: M.Ctx
  readonly org: M.OrgPlan
  readonly groups: readonly M.GroupPlan[]
}

function* scopes(ctx: M.Ctx, withGroups: boolean): Generator<Scope> {
  for (let o = 0; o < ctx.organizations; o++) {
    const org = M.orgPlan(ctx, o)
    const groups = withGroups
      ? Array.from({ length: ctx.groups }, (_, g) => M.groupPlan(ctx, org, g))
      : []
    yield { ctx, org, groups }
  }
}

function deferred(s: Scope, table: TableName, a: number, b: number): boolean {
  return M.coin(s.ctx, DEFER + M.T[table], s.org.o, a, b, DEFERRED_SHARE)
}

export function npiIndex(ctx: M.Ctx, o: number, i: number): number {
  return o * ctx.providerSlots + i
}

function providerEnrollments(s: Scope, plan: M.ProviderPlan): M.EnrollmentPlan[] {
  return Array.from({ length: plan.enrollments }, (_, e) => M.enrollmentPlan(s.ctx, s.org, plan, e))
}

type Read = (row: Row) => void

/**
 * Where one table's rows come from: `units` per organization (the organization itself, its
 * groups or its providers), each emitting its rows; deferred parents go to `held` instead.
 */
interface TableSource {
  readonly groups: boolean
  units(s: Scope): number
  emit(s: Scope, u: number, read: Read, held: Coord[]): void
}

const perOrganization = (emit: (s: Scope, read: Read) => void): TableSource => ({
  groups: false,
  units: () => 1,
  emit: (s, _u, read) => emit(s, read),
})

const perGroup = (
  emit: (s: Scope, g: M.GroupPlan, read: Read, held: Coord[]) => void,
): TableSource => ({
  groups: true,
  units: (s) => s.groups.length,
  emit: (s, u, read, held) => emit(s, s.groups[u]!, read, held),
})

const perProvider = (
  emit: (s: Scope, plan: M.ProviderPlan, read: Read, held: Coord[]) => void,
): TableSource => ({
  groups: true,
  units: (s) => s.ctx.providers,
  emit: (s, u, read, held) => emit(s, M.providerPlan(s.ctx, s.org, u), read, held),
})

const SOURCES: Record<TableName, TableSource> = {
  organizations: perOrganization((s, read) => read(M.organizationRow(s.org))),
  api_keys: perOrganization((s, read) =>
    s.org.keys.forEach((key) => read(M.apiKeyRow(s.org, key))),
  ),
  payer_portal_logins: perOrganization((s, read) => {
    for (let n = 0; n < s.org.portalLogins.length; n++) read(M.portalLoginRow(s.ctx, s.org, n))
  }),
  provider_groups: perGroup((s, g, read, held) => {
    if (deferred(s, 'provider_groups', g.g, 0)) held.push([s.org.o, g.g, 0])
    else read(M.groupRow(s.ctx, s.org, g))
  }),
  service_locations: perGroup((s, g, read, held) => {
    for (let l = 0; l < g.locations; l++) {
      if (deferred(s, 'service_locations', g.g, l)) held.push([s.org.o, g.g, l])
      else read(M.locationRow(s.ctx, s.org, g, l))
    }
  }),
  group_identifiers: perGroup((s, g, read) => {
    for (let j = 0; j < g.identifierTypes.length; j++)
      read(M.groupIdentifierRow(s.ctx, s.org, g, j))
  }),
  group_enrollments: perGroup((s, g, read, held) => {
    for (let n = 0; n < g.enrollments; n++) {
      if (deferred(s, 'group_enrollments', g.g, n)) held.push([s.org.o, g.g, n])
      else read(M.groupEnrollmentRow(s.ctx, s.org, g, M.groupEnrollmentPlan(s.ctx, s.org, g, n)))
    }
  }),
  group_enrollment_lines_of_business: perGroup((s, g, read) => {
    for (let n = 0; n < g.enrollments; n++) {
      M.groupEnrollmentLobRows(s.ctx, s.org, g, M.groupEnrollmentPlan(s.ctx, s.org, g, n)).forEach(
        read,
      )
    }
  }),
  providers: perProvider((s, plan, read, held) => {
    if (deferred(s, 'providers', plan.i, 0)) held.push([s.org.o, plan.i, 0])
    else read(M.providerRow(s.ctx, s.org, plan, npiIndex(s.ctx, s.org.o, plan.i)))
  }),
  provider_identifiers: perProvider((s, plan, read) => {
    for (let j = 0; j < plan.identifierTypes.length; j++)
      read(M.providerIdentifierRow(s.ctx, s.org, plan, j))
  }),
  group_memberships: perProvider((s, plan, read) => {
    for (let m = 0; m < plan.groups.length; m++) read(M.membershipRow(s.ctx, s.org, plan, m))
  }),
  enrollments: perProvider((s, plan, read, held) => {
    for (const ep of providerEnrollments(s, plan)) {
      if (deferred(s, 'enrollments', plan.i, ep.e)) held.push([s.org.o, plan.i, ep.e])
      else read(M.enrollmentRow(s.ctx, s.org, plan, ep))
    }
  }),
  enrollment_requirements: perProvider((s, plan, read) => {
    for (const ep of providerEnrollments(s, plan))
      M.requirementRows(s.ctx, s.org, plan, ep).forEach(read)
  }),
  enrollment_lines_of_business: perProvider((s, plan, read) => {
    for (const ep of providerEnrollments(s, plan))
      M.enrollmentLobRows(s.ctx, s.org, plan, ep).forEach(read)
  }),
  enrollment_location_participations: perProvider((s, plan, read) => {
    for (const ep of providerEnrollments(s, plan)) {
      const group = ep.group === null ? null : s.groups[ep.group]!
      M.participationRows(s.ctx, s.org, plan, ep, group).forEach(read)
    }
  }),
  documents: {
    groups: true,
    units: (s) => s.ctx.providers + s.groups.length,
    emit: (s, u, read) => {
      if (u >= s.ctx.providers) {
        M.groupDocumentRows(s.ctx, s.org, s.groups[u - s.ctx.providers]!).forEach(read)
        return
      }
      const plan = M.providerPlan(s.ctx, s.org, u)
      const identifiers = plan.identifierTypes.map((_, j) =>
        M.providerIdentifierRow(s.ctx, s.org, plan, j),
      )
      M.providerDocumentRows(s.ctx, s.org, plan, identifiers).forEach(read)
    },
  },
}

function heldRow(ctx: M.Ctx, table: TableName, [o, a, b]: Coord): Row {
  const org = M.orgPlan(ctx, o)
  switch (table) {
    case 'providers':
      return M.providerRow(ctx, org, M.providerPlan(ctx, org, a), npiIndex(ctx, o, a))
    case 'enrollments': {
      const plan = M.providerPlan(ctx, org, a)
      return M.enrollmentRow(ctx, org, plan, M.enrollmentPlan(ctx, org, plan, b))
    }
    case 'provider_groups':
      return M.groupRow(ctx, org, M.groupPlan(ctx, org, a))
    case 'service_locations':
      return M.locationRow(ctx, org, M.groupPlan(ctx, org, a), b)
    case 'group_enrollments': {
      const group = M.groupPlan(ctx, org, a)
      return M.groupEnrollmentRow(ctx, org, group, M.groupEnrollmentPlan(ctx, org, group, b))
    }
    default:
      throw new Error(`${table} rows are never deferred`)
  }
}

/** Records handed out per batch. */
const BATCH = 64

/** The snapshot, in batches of records. */
export function* snapshot(ctx: M.Ctx, emitter: Emitter): Generator<RecordParts[]> {
  const held = new Map<TableName, Coord[]>()
  const lastTable = SNAPSHOT_ORDER[SNAPSHOT_ORDER.length - 1]
  for (const table of SNAPSHOT_ORDER) {
    const source = SOURCES[table]
    const coords: Coord[] = []
    held.set(table, coords)
    const read: Read = (row) => emitter.read(table, row)
    for (const s of scopes(ctx, source.groups)) {
      const units = source.units(s)
      for (let u = 0; u < units; u++) {
        source.emit(s, u, read, coords)
        if (emitter.buffered >= BATCH) yield emitter.drain()
      }
    }
    const anyHeld = [...held.values()].some((c) => c.length > 0)
    emitter.endSection(coords.length === 0, table === lastTable && !anyHeld)
  }
  const heldTables = SNAPSHOT_ORDER.filter((t) => (held.get(t) ?? []).length > 0)
  for (const table of heldTables) {
    for (const coord of held.get(table)!) {
      emitter.read(table, heldRow(ctx, table, coord))
      if (emitter.buffered >= BATCH) yield emitter.drain()
    }
    emitter.endSection(true, table === heldTables[heldTables.length - 1])
  }
  yield emitter.drain()
}
