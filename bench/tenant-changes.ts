// What bench:tenants and bench/shared-files.ts share: datasets of about the same number of events
// in few or many organizations, and provider renames made from a dataset's own rows (the burst and
// the steady stream of changes).
import { createReadStream, writeFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { EVENTS_PER_PROVIDER } from '../scripts/dataset/generate.ts'
import type { BenchDatasetFile, DatasetSize } from './dataset.ts'

/**
 * An organization's own events (its row, keys, groups and their children) and a provider's, in
 * organizations of under 50 providers (no onboarding while streaming), measured on the
 * generator: 3,000 x 1 gives 160,613 events, 3,000 x 20 gives 1,852,519.
 */
const SMALL_ORGANIZATION = { ownEvents: 24, perProvider: 29.7 }

/** The generator's size for about `targetEvents` events in `organizations` organizations. */
export function sizeFor(targetEvents: number, organizations: number): DatasetSize {
  const updateRounds = 3
  const perOrganization = targetEvents / organizations
  const large = perOrganization / (EVENTS_PER_PROVIDER.snapshot + 3 * EVENTS_PER_PROVIDER.perRound)
  const providers =
    large >= 50
      ? Math.round(large)
      : Math.round(
          (perOrganization - SMALL_ORGANIZATION.ownEvents) / SMALL_ORGANIZATION.perProvider,
        )
  return { organizations, providersPerOrganization: Math.max(1, providers), updateRounds }
}

/** How many providers in all the change stream and the detail reads draw from. */
const SAMPLED_PROVIDERS = 20_000

export interface SampledProvider {
  organizationId: string
  id: string
  /** Its latest Debezium payload (schemaless) in the dataset. */
  payload: { after: Record<string, unknown>; source: Record<string, unknown> } & Record<
    string,
    unknown
  >
}

/**
 * Up to SAMPLED_PROVIDERS providers spread evenly over the organizations, each with its latest
 * row, in an order that visits every organization before any twice (one file read).
 */
export async function sampleProviders(dataset: BenchDatasetFile): Promise<SampledProvider[]> {
  const perOrganization = Math.ceil(SAMPLED_PROVIDERS / dataset.organizations.length)
  const byOrganization = new Map<string, Map<string, SampledProvider>>()
  const prefix = '{"topic":"product.public.providers"'
  const input = createReadStream(dataset.path)
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    if (!line.startsWith(prefix)) continue
    const record = JSON.parse(line) as {
      key: { id: string }
      value: SampledProvider['payload'] | null
    }
    if (record.value === null) continue
    const after = record.value.after as Record<string, unknown> | null
    const id = record.key.id
    if (after === null) {
      for (const sample of byOrganization.values()) sample.delete(id)
      continue
    }
    const organizationId = after.organization_id as string
    const sample = byOrganization.get(organizationId) ?? new Map<string, SampledProvider>()
    byOrganization.set(organizationId, sample)
    if (sample.has(id) || sample.size < perOrganization) {
      sample.set(id, { organizationId, id, payload: record.value })
    }
  }
  const lists = [...byOrganization.values()].map((m) => [...m.values()])
  const interleaved: SampledProvider[] = []
  for (let n = 0; n < perOrganization; n++) {
    for (const list of lists) if (n < list.length) interleaved.push(list[n]!)
  }
  return interleaved
}

/** Provider renames: Debezium update events for sampled providers, each at a higher LSN. */
export class Renames {
  private sequence = 0
  /** Above any LSN of the generator, below 2^53. */
  private static readonly LSN_BASE = 2 ** 50

  constructor(
    private readonly providers: readonly SampledProvider[],
    readonly topic: string,
    /** Keeps two datasets' renames apart (their LSNs must rise across runs of one topic). */
    private readonly runId: string,
  ) {}

  /** The next rename: its record and the last name the api must then serve. */
  next(now = Date.now()): {
    provider: SampledProvider
    lastName: string
    key: string
    value: string
  } {
    const n = this.sequence++
    const provider = this.providers[n % this.providers.length]!
    const lastName = `Renamed${this.runId}${n}`
    const lsn = Renames.LSN_BASE + n * 64
    const { payload } = provider
    const value = {
      ...payload,
      before: null,
      after: { ...payload.after, last_name: lastName },
      source: {
        ...payload.source,
        ts_ms: now,
        ts_us: now * 1000,
        ts_ns: now * 1_000_000,
        snapshot: 'false',
        lsn,
        sequence: JSON.stringify([String(lsn - 64), String(lsn)]),
      },
      op: 'u',
      ts_ms: now,
      ts_us: now * 1000,
      ts_ns: now * 1_000_000,
    }
    return {
      provider,
      lastName,
      key: JSON.stringify({ id: provider.id }),
      value: JSON.stringify(value),
    }
  }

  /** `count` renames as an NDJSON file in the dataset's layout, for produceFile. */
  writeFile(path: string, count: number): void {
    const lines: string[] = []
    for (let n = 0; n < count; n++) {
      const r = this.next()
      lines.push(`{"topic":"${this.topic}","key":${r.key},"value":${r.value}}`)
    }
    writeFileSync(path, `${lines.join('\n')}\n`)
  }
}
