// One event stream for the tests that hold entry points against each other (lanes.test.ts,
// entry-points.test.ts): a generated dataset, then events the bytes alone cannot route, in the
// schemaless shape (key-only deletes, bare tombstones, a row moving between organizations of two
// lanes, a truncate).
import { LaneAssignment } from '../../projector/routing/lane-hint.ts'
import { datasetOrganizations, generateDataset } from '../../scripts/dataset/generate.ts'
import { identifierRow, providerRow, record, uuid } from './debezium.ts'

export const DATASET = { organizations: 6, providersPerOrganization: 12, updateRounds: 2, seed: 11 }
export const streamOrganizations = datasetOrganizations(DATASET).map((o) => o.id)

/** The dataset, then events the bytes alone cannot route, in the schemaless shape. */
export function lines(): string[] {
  // Two organizations that fall to different lanes of two (assigned in turn as first seen: the
  // dataset's organization rows come first, in this order).
  const assignment = new LaneAssignment(2)
  for (const id of streamOrganizations) assignment.laneOf(id)
  const from = streamOrganizations.find((id) => assignment.laneOf(id) === 0)!
  const to = streamOrganizations.find((id) => assignment.laneOf(id) === 1)!
  const moved = uuid(900_001)
  const deleted = uuid(900_002)
  const extra = [
    record({
      table: 'providers',
      op: 'c',
      after: providerRow(moved, from),
      lsn: 9e9,
      wrapped: false,
    }),
    record({
      table: 'provider_identifiers',
      op: 'c',
      after: identifierRow(uuid(900_003), moved, from),
      lsn: 9e9 + 1,
      wrapped: false,
    }),
    // The row moves to an organization of the other lane: it must leave the first file.
    record({
      table: 'providers',
      op: 'u',
      after: providerRow(moved, to, { last_name: 'Moved' }),
      lsn: 9e9 + 2,
      wrapped: false,
    }),
    record({ table: 'providers', op: 'c', after: providerRow(deleted, to), lsn: 9e9 + 3 }),
    // A delete carrying its key only, and its tombstone: routed by the routing index.
    record({ table: 'providers', op: 'd', before: { id: deleted }, lsn: 9e9 + 4, wrapped: false }),
    { ...record({ table: 'providers', op: 'd', before: { id: deleted } }), value: null },
    // A tombstone whose delete compaction removed: a delete by key, through the routing index;
    // and one of a row never seen: nothing.
    record({ table: 'providers', op: 'c', after: providerRow(uuid(900_006), from), lsn: 9e9 + 5 }),
    { ...record({ table: 'providers', op: 'd', before: { id: uuid(900_006) } }), value: null },
    { ...record({ table: 'providers', op: 'd', before: { id: uuid(900_007) } }), value: null },
    // Routes are written in the order of ids, events packed in their own order (lanes.ts): a
    // row that moves there and back, and one that moves to the other lane and is then deleted
    // by its key, each within a few events, end where one-by-one routing would leave them.
    ...[from, to, from].map((organizationId, i) =>
      record({
        table: 'providers',
        op: i === 0 ? 'c' : 'u',
        after: providerRow(uuid(900_004), organizationId, { last_name: `Round ${i}` }),
        lsn: 9e9 + 6 + i,
        wrapped: false,
      }),
    ),
    ...[from, to].map((organizationId, i) =>
      record({
        table: 'providers',
        op: i === 0 ? 'c' : 'u',
        after: providerRow(uuid(900_005), organizationId),
        lsn: 9e9 + 9 + i,
        wrapped: false,
      }),
    ),
    record({
      table: 'providers',
      op: 'd',
      before: { id: uuid(900_005) },
      lsn: 9e9 + 11,
      wrapped: false,
    }),
    // A truncate reaches every organization of every lane.
    record({ table: 'enrollment_requirements', op: 't', lsn: 9e9 + 12, wrapped: false }),
  ]
  return [...generateDataset(DATASET), ...extra.map((r) => JSON.stringify(r))]
}

/** The two organizations the extra events move rows between (lanes 0 and 1 of two). */
export function movedBetween(): { from: string; to: string } {
  const assignment = new LaneAssignment(2)
  for (const id of streamOrganizations) assignment.laneOf(id)
  const from = streamOrganizations.find((id) => assignment.laneOf(id) === 0)!
  const to = streamOrganizations.find((id) => assignment.laneOf(id) === 1)!
  return { from, to }
}
