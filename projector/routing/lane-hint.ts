// Which lane an event goes to, read from its bytes without parsing them (lanes.ts).
//
// The main thread must know an event's organization to hand it to the lane that owns it, but
// parsing is most of an event's cost and belongs in the lanes. Debezium's JsonConverter writes
// compact JSON in a fixed order (`before`, `after`, `source`, `op`, ...), so for an insert, update
// or snapshot read the row's table, id and organization are found by a few byte searches: the
// `"after":{` object, then its `"id":"` and the last `"organization_id":"`, then `source`'s
// `"table":"` and the `"op":"`. Inside a JSON string every quote is escaped, so these patterns
// (each starting and ending with an unescaped quote) match only keys. The schema block of a
// wrapped value names fields as `"field":"after"`, never `"after":`.
//
// Anything else (a delete, a truncate, a control table, whitespace, a missing field) gives no
// hint: the main thread decodes that event itself, as before lanes. A lane checks every hint
// against what it decodes, and stops on a disagreement (lanes/lane-core.ts).
import { ROUTED_TABLES } from '../storage/route-file.ts'
import type { OrganizationTable } from '../../schema/events.ts'

export interface LaneHint {
  table: OrganizationTable
  id: string
  /** Where the id's 36 characters start in the bytes (a lane checks them against its decode). */
  idAt: number
  organizationId: string
}

const AFTER = Buffer.from('"after":{')
const ID = Buffer.from('"id":"')
const ORGANIZATION = Buffer.from('"organization_id":"')
const TABLE = Buffer.from('"table":"')
const OP = Buffer.from('"op":"')
const QUOTE = 0x22
const UUID_LENGTH = 36
/** Longer than any schemaless event of these tables; shorter than any wrapped one. */
const WRAPPED_LENGTH = 3072

/**
 * The table, row id and organization of the upsert whose value (a Debezium event, wrapped or not)
 * is in `buf[start, end)`; undefined when it is not one this can be sure of.
 */
export function laneHint(buf: Buffer, start = 0, end = buf.length): LaneHint | undefined {
  // One `"after":{` matches (only keys can), so it may be searched from either end. A long value
  // is one wrapped with its schema, some four kilobytes before the payload, which holds `after`:
  // from the end, the schema is not scanned.
  const after = within(
    end - start > WRAPPED_LENGTH
      ? buf.lastIndexOf(AFTER, end - AFTER.length)
      : buf.indexOf(AFTER, start),
    start,
    end,
  )
  if (after < 0) return undefined
  const op = within(buf.lastIndexOf(OP, end - OP.length), after, end)
  if (op < 0) return undefined
  const opCode = buf[op + OP.length]
  // c, u, r
  if (opCode !== 0x63 && opCode !== 0x75 && opCode !== 0x72) return undefined
  if (buf[op + OP.length + 1] !== QUOTE) return undefined
  const tableAt = within(buf.lastIndexOf(TABLE, end - TABLE.length), after, end)
  if (tableAt < 0) return undefined
  const tableStart = tableAt + TABLE.length
  const tableEnd = buf.indexOf(QUOTE, tableStart)
  if (tableEnd < 0 || tableEnd >= end || tableEnd - tableStart > 64) return undefined
  const table = buf.toString('latin1', tableStart, tableEnd)
  if (!Object.hasOwn(ROUTED_TABLES, table)) return undefined
  const idAt = within(buf.indexOf(ID, after), after, end)
  if (idAt < 0 || idAt > tableAt) return undefined
  const id = uuidAt(buf, idAt + ID.length, end)
  if (id === undefined) return undefined
  const organizationAt = within(
    buf.lastIndexOf(ORGANIZATION, end - ORGANIZATION.length),
    after,
    end,
  )
  if (organizationAt < 0 || organizationAt > tableAt) return undefined
  const organizationId = uuidAt(buf, organizationAt + ORGANIZATION.length, end)
  if (organizationId === undefined) return undefined
  return { table: table as OrganizationTable, id, idAt: idAt + ID.length, organizationId }
}

function within(at: number, from: number, end: number): number {
  return at >= from && at < end ? at : -1
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The uuid at `i`, closed by a quote, lower-cased as the decoder does; else undefined. */
function uuidAt(buf: Buffer, i: number, end: number): string | undefined {
  if (i + UUID_LENGTH >= end || buf[i + UUID_LENGTH] !== QUOTE) return undefined
  const text = buf.toString('latin1', i, i + UUID_LENGTH)
  return UUID.test(text) ? text.toLowerCase() : undefined
}

/**
 * Which lane owns each file (an organization's own, or one organizations share: its key,
 * src/organization-files.ts), for the life of the process: the next lane in turn, the first time
 * a file is seen. A hash of the id would need no memory, but with few
 * organizations it is lumpy (the benchmark's seven fell five to two on two lanes, so one lane
 * did most of the work); in turn, they fall four to three. Nothing outlives the process: each
 * run's lanes open their files afresh.
 */
export class LaneAssignment {
  readonly #lanes: number
  readonly #owners = new Map<string, number>()
  #next = 0

  constructor(lanes: number) {
    this.#lanes = lanes
  }

  laneOf(fileKey: string): number {
    let lane = this.#owners.get(fileKey)
    if (lane === undefined) {
      lane = this.#next
      this.#next = (this.#next + 1) % this.#lanes
      this.#owners.set(fileKey, lane)
    }
    return lane
  }
}
