// The whole-file build (refreshAll: pages of parents, each child list read once per page by a
// range of parent ids) against the per-batch refresh (point reads per document): on the same
// mirror, every document table must be identical, byte for byte, stamps included.
import { afterEach, describe, expect, it } from 'vitest'
import { priorStampsFrom, priorStampsScanned } from '../../../projector/documents/index.ts'
import { DOCUMENT_TABLES } from '../../support/applier.ts'
import {
  document,
  enrollment,
  enrollmentLine,
  groupEnrollment,
  groupEnrollmentLine,
  groupIdentifier,
  membership,
  openTestFile,
  participation,
  provider,
  providerGroup,
  providerIdentifier,
  requirement,
  serviceLocation,
  T1,
  T2,
  T3,
  type TestFile,
} from './fixtures.ts'

/** One write to a mirror, replayable on any file. */
type Operation = (file: TestFile) => void

const opened: TestFile[] = []
afterEach(() => {
  for (const file of opened.splice(0)) file.close()
})

function open(options: Parameters<typeof openTestFile>[0] = {}): TestFile {
  const file = openTestFile(options)
  opened.push(file)
  return file
}

/** mulberry32: the same fixture on every run. */
function seededRandom(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * Rows with every ordering rule at stake, inserted against id order (so that a scan in insertion
 * order differs from one in id order): sort keys tied (then the id decides), references to rows
 * that never arrive (null names, null embedded objects, left-out memberships), children whose
 * parent never arrives (their expirables still exist), nulls everywhere a column allows them.
 */
function edgeCases(): Operation[] {
  return [
    (f) => f.put('providers', provider({ id: 'p-ties', middleName: 'Q', suffix: 'MD' })),
    // Deleted by laterChanges: its document is an orphan of the next whole build.
    (f) => f.put('providers', provider({ id: 'p-gone' })),
    (f) => f.put('provider_groups', providerGroup({ id: 'g-2', name: 'Same', npi: '2' })),
    (f) => f.put('provider_groups', providerGroup({ id: 'g-1', name: 'Same', tin: '1' })),
    (f) => f.put('provider_groups', providerGroup({ id: 'g-0', name: 'Other' })),
    // Identifiers: two of one type (the id decides), one of another, one expiring.
    ...['i-b', 'i-c', 'i-a'].map(
      (id): Operation =>
        (f) =>
          f.put(
            'provider_identifiers',
            providerIdentifier({
              id,
              providerId: 'p-ties',
              type: id === 'i-c' ? 'dea' : 'npi',
              expiresOn: id === 'i-a' ? '2026-01-01' : null,
            }),
          ),
    ),
    // Memberships: two groups of the same name, one group that never arrives.
    ...[
      ['m-3', 'g-2'],
      ['m-2', 'g-1'],
      ['m-1', 'g-missing'],
      ['m-0', 'g-0'],
    ].map(
      ([id, group]): Operation =>
        (f) =>
          f.put(
            'group_memberships',
            membership({ id: id!, providerId: 'p-ties', providerGroupId: group! }),
          ),
    ),
    // Service locations: primary first, then name, then id.
    ...[
      ['s-4', false, 'Clinic'],
      ['s-3', true, 'Main'],
      ['s-2', true, 'Main'],
      ['s-1', false, 'Annex'],
    ].map(
      ([id, isPrimary, name]): Operation =>
        (f) =>
          f.put(
            'service_locations',
            serviceLocation({
              id: id as string,
              providerGroupId: 'g-1',
              isPrimary: isPrimary as boolean,
              name: name as string,
            }),
          ),
    ),
    (f) => f.put('group_identifiers', groupIdentifier({ id: 'gi-2', providerGroupId: 'g-1' })),
    (f) =>
      f.put(
        'group_identifiers',
        groupIdentifier({ id: 'gi-1', providerGroupId: 'g-1', expiresOn: '2027-03-04' }),
      ),
    (f) => f.put('enrollments', enrollment({ id: 'e-ties', providerId: 'p-ties' })),
    // Requirements: positions tied.
    ...[
      ['r-z', 2],
      ['r-y', 1],
      ['r-x', 1],
    ].map(
      ([id, position]): Operation =>
        (f) =>
          f.put(
            'enrollment_requirements',
            requirement({ id: id as string, enrollmentId: 'e-ties', position: position as number }),
          ),
    ),
    ...['l-2', 'l-1', 'l-0'].map(
      (id): Operation =>
        (f) =>
          f.put(
            'enrollment_lines_of_business',
            enrollmentLine({
              id,
              enrollmentId: 'e-ties',
              lineOfBusiness: id === 'l-0' ? 'medicare' : 'commercial',
            }),
          ),
    ),
    // Locations: a service location that never arrives (null name: last), names tied.
    ...[
      ['lp-4', 's-missing'],
      ['lp-3', 's-4'],
      ['lp-2', 's-1'],
      ['lp-1', 's-2'],
      ['lp-0', 's-missing-too'],
    ].map(
      ([id, location]): Operation =>
        (f) =>
          f.put(
            'enrollment_location_participations',
            participation({ id: id!, enrollmentId: 'e-ties', serviceLocationId: location! }),
          ),
    ),
    (f) =>
      f.put(
        'service_locations',
        serviceLocation({ id: 's-0', providerGroupId: 'g-0', name: 'Clinic' }),
      ),
    (f) =>
      f.put(
        'enrollment_location_participations',
        participation({ id: 'lp-5', enrollmentId: 'e-ties', serviceLocationId: 's-0' }),
      ),
    // Parents that never arrive: null embedded provider and group.
    (f) => f.put('enrollments', enrollment({ id: 'e-orphan', providerId: 'p-missing' })),
    (f) =>
      f.put(
        'group_enrollments',
        groupEnrollment({ id: 'ge-orphan', providerGroupId: 'g-missing' }),
      ),
    (f) => f.put('group_enrollments', groupEnrollment({ id: 'ge-1', providerGroupId: 'g-1' })),
    ...['gl-2', 'gl-1'].map(
      (id): Operation =>
        (f) =>
          f.put(
            'group_enrollment_lines_of_business',
            groupEnrollmentLine({ id, groupEnrollmentId: 'ge-1' }),
          ),
    ),
    // Children whose parent never arrives: no document, but their expirables exist.
    (f) =>
      f.put(
        'provider_identifiers',
        providerIdentifier({ id: 'i-orphan', providerId: 'p-missing', expiresOn: '2025-06-30' }),
      ),
    (f) =>
      f.put('enrollment_requirements', requirement({ id: 'r-orphan', enrollmentId: 'e-missing' })),
    (f) =>
      f.put(
        'documents',
        document({ id: 'd-1', providerGroupId: 'g-1', expiresOn: '2026-02-02', fileName: 'a.pdf' }),
      ),
    (f) => f.put('documents', document({ id: 'd-0', providerId: 'p-ties' })),
  ]
}

/**
 * A few hundred rows with ids and values drawn from small sets (so sort keys tie often), rows
 * pointing at rows that may not exist, and a shuffled insertion order.
 */
function randomMirror(seed: number): Operation[] {
  const random = seededRandom(seed)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  const maybe = <T>(value: T, p = 0.5): T | null => (random() < p ? value : null)
  const upTo = (n: number) => Math.floor(random() * (n + 1))
  // Ids ending in -never are referenced and never inserted.
  // Ids of varying length and case, some beyond ASCII: their order is SQLite's (BINARY).
  const idOf = (prefix: string) =>
    `${prefix}${pick(['', 'A', 'a', 'é', '\u{1F600}'])}${Math.floor(random() * 1e6).toString(36)}`
  const dates = ['2025-01-01', '2025-06-30', '2026-12-31']
  const names = ['Alpha', 'Beta', 'beta', 'Ärzte']

  const groupIds = Array.from({ length: 8 }, () => idOf('g'))
  const providerIds = Array.from({ length: 40 }, () => idOf('p'))
  const locationIds: string[] = []
  const ops: Operation[] = []

  for (const id of groupIds) {
    // Rows are drawn here, once: every file replays the same ones.
    const group = providerGroup({ id, name: pick(names), npi: maybe('1'), tin: maybe('2') })
    ops.push((f) => f.put('provider_groups', group))
    for (let i = upTo(3); i > 0; i--) {
      const location = idOf('s')
      locationIds.push(location)
      const row = serviceLocation({
        id: location,
        providerGroupId: id,
        name: pick(names),
        isPrimary: random() < 0.4,
        city: maybe('Springfield'),
      })
      ops.push((f) => f.put('service_locations', row))
    }
    for (let i = upTo(3); i > 0; i--) {
      const row = groupIdentifier({
        id: idOf('gi'),
        providerGroupId: id,
        type: pick(['clia', 'npi']),
        expiresOn: maybe(pick(dates)),
      })
      ops.push((f) => f.put('group_identifiers', row))
    }
  }
  for (const id of providerIds) {
    const row = provider({
      id,
      firstName: maybe('Ada', 0.8),
      middleName: maybe('B'),
      suffix: maybe('Jr'),
      npi: pick(['1', '2']),
    })
    ops.push((f) => f.put('providers', row))
    for (let i = upTo(4); i > 0; i--) {
      const identifier = providerIdentifier({
        id: idOf('i'),
        providerId: random() < 0.9 ? id : 'p-never',
        type: pick(['npi', 'dea', 'state_license']),
        expiresOn: maybe(pick(dates)),
        issuedOn: maybe('2020-01-01'),
      })
      ops.push((f) => f.put('provider_identifiers', identifier))
    }
    for (let i = upTo(3); i > 0; i--) {
      const row = membership({
        id: idOf('m'),
        providerId: id,
        providerGroupId: random() < 0.9 ? pick(groupIds) : 'g-never',
      })
      ops.push((f) => f.put('group_memberships', row))
    }
  }
  for (let n = 0; n < 60; n++) {
    const id = idOf('e')
    const row = enrollment({
      id,
      providerId: random() < 0.9 ? pick(providerIds) : 'p-never',
      providerGroupId: maybe(pick(groupIds)),
      payer: pick(['Aetna', 'aetna', 'Cigna']),
    })
    ops.push((f) => f.put('enrollments', row))
    for (let i = upTo(5); i > 0; i--) {
      const child = requirement({
        id: idOf('r'),
        enrollmentId: id,
        position: upTo(2),
        isComplete: random() < 0.5,
        completedAt: maybe('2024-05-05T00:00:00.000Z'),
      })
      ops.push((f) => f.put('enrollment_requirements', child))
    }
    for (let i = upTo(3); i > 0; i--) {
      const child = enrollmentLine({
        id: idOf('l'),
        enrollmentId: id,
        lineOfBusiness: pick(['commercial', 'medicare']),
        effectiveDate: maybe(pick(dates)),
      })
      ops.push((f) => f.put('enrollment_lines_of_business', child))
    }
    for (let i = upTo(3); i > 0; i--) {
      const child = participation({
        id: idOf('lp'),
        enrollmentId: id,
        serviceLocationId: random() < 0.8 && locationIds.length > 0 ? pick(locationIds) : 's-never',
        isActive: random() < 0.5,
      })
      ops.push((f) => f.put('enrollment_location_participations', child))
    }
  }
  for (let n = 0; n < 12; n++) {
    const id = idOf('ge')
    const row = groupEnrollment({
      id,
      providerGroupId: random() < 0.9 ? pick(groupIds) : 'g-never',
    })
    ops.push((f) => f.put('group_enrollments', row))
    for (let i = upTo(3); i > 0; i--) {
      const child = groupEnrollmentLine({
        id: idOf('gl'),
        groupEnrollmentId: random() < 0.9 ? id : 'ge-never',
        lineOfBusiness: pick(['commercial', 'medicare']),
      })
      ops.push((f) => f.put('group_enrollment_lines_of_business', child))
    }
  }
  for (let n = 0; n < 40; n++) {
    const owner = random()
    const row = document({
      id: idOf('d'),
      providerId: owner < 0.5 ? pick([...providerIds, 'p-never']) : null,
      providerGroupId: owner >= 0.5 && owner < 0.9 ? pick(groupIds) : null,
      expiresOn: maybe(pick(dates)),
      fileName: pick(['a.pdf', 'b.pdf']),
    })
    ops.push((f) => f.put('documents', row))
  }
  // Shuffled: insertion (rowid) order is not id order.
  for (let i = ops.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[ops[i], ops[j]] = [ops[j]!, ops[i]!]
  }
  return ops
}

/** Changes after a first build: renames, removed expiration dates, deleted parents and children. */
function laterChanges(): Operation[] {
  return [
    (f) => f.put('provider_groups', providerGroup({ id: 'g-1', name: 'Renamed', tin: '1' })),
    (f) => f.put('providers', provider({ id: 'p-ties', firstName: 'Grace', suffix: null })),
    (f) =>
      f.put(
        'provider_identifiers',
        providerIdentifier({ id: 'i-a', providerId: 'p-ties', type: 'npi', expiresOn: null }),
      ),
    (f) => f.remove('service_locations', 's-1'),
    (f) => f.remove('enrollment_requirements', 'r-y'),
    (f) => f.remove('documents', 'd-1'),
    (f) => f.remove('group_enrollments', 'ge-1'),
    (f) => f.remove('enrollments', 'e-orphan'),
    (f) => f.remove('provider_groups', 'g-2'),
    (f) => f.remove('providers', 'p-gone'),
    (f) =>
      f.put('documents', document({ id: 'd-2', providerId: 'p-ties', expiresOn: '2028-01-01' })),
  ]
}

function apply(file: TestFile, operations: readonly Operation[]): void {
  for (const operation of operations) operation(file)
}

/** What a batch does: refresh the documents its changes touch. */
function refreshBatch(file: TestFile, stamp: string): void {
  file.refresh(stamp)
}

/** What the catch-up build does: every document, whatever the changes were. */
function buildAll(file: TestFile, stamp: string): void {
  file.db.transaction(() => file.refresher.refreshAll(stamp))()
}

/** Every document row of the file, every column, in id order. */
function documentTables(file: TestFile): Record<string, unknown[]> {
  const tables: Record<string, unknown[]> = {}
  for (const table of DOCUMENT_TABLES) {
    tables[table] = file.db.prepare(`SELECT * FROM ${table} ORDER BY id`).all()
  }
  return tables
}

const mirror = [...edgeCases(), ...randomMirror(7)]
// Pages of one row, pages that end inside runs of children, and the default.
const pageSizes = [1, 2, 7, undefined]

// CPU-bound: 10 s on a quiet machine, over 30 s beside other test runs.
describe('refreshAll', { timeout: 120_000 }, () => {
  it('writes byte for byte the documents the per-batch refresh writes', () => {
    const batch = open()
    apply(batch, mirror)
    refreshBatch(batch, T1)
    const expected = documentTables(batch)
    // Not vacuous: every kind of document is there, the edge cases among them.
    for (const table of DOCUMENT_TABLES) expect(expected[table]!.length).toBeGreaterThan(4)
    expect(batch.body('doc_enrollments', 'e-ties').locations).toHaveLength(6)
    expect(batch.doc('doc_expirables', 'provider_identifier:i-orphan')).toBeDefined()

    for (const buildPageRows of pageSizes) {
      const whole = open(buildPageRows === undefined ? {} : { buildPageRows })
      apply(whole, mirror)
      buildAll(whole, T1)
      expect(documentTables(whole), `pages of ${buildPageRows ?? 'default'} rows`).toEqual(expected)
    }
  })

  it('after changes: same stamps kept, same restamped, same orphans removed as per batch', () => {
    const batch = open()
    apply(batch, mirror)
    refreshBatch(batch, T1)
    apply(batch, laterChanges())
    const stats = batch.refresh(T2)
    expect(stats.removed).toBeGreaterThan(0)
    const expected = documentTables(batch)

    for (const buildPageRows of pageSizes) {
      const whole = open(buildPageRows === undefined ? {} : { buildPageRows })
      apply(whole, mirror)
      buildAll(whole, T1)
      apply(whole, laterChanges())
      buildAll(whole, T2)
      expect(documentTables(whole), `pages of ${buildPageRows ?? 'default'} rows`).toEqual(expected)
    }
  })

  it("in a rebuild, keeps the previous generation's stamps as the per-batch refresh does", () => {
    const previous = open()
    apply(previous, mirror)
    refreshBatch(previous, T1)
    const changed = [...mirror, ...laterChanges()]

    const batch = open({ priorStamp: priorStampsFrom(previous.db) })
    apply(batch, changed)
    refreshBatch(batch, T3)
    const whole = open({ priorStamp: priorStampsFrom(previous.db), buildPageRows: 3 })
    apply(whole, changed)
    buildAll(whole, T3)

    const built = documentTables(whole)
    expect(built).toEqual(documentTables(batch))
    const scanned = open({ priorStamp: priorStampsScanned(previous.db), buildPageRows: 3 })
    apply(scanned, changed)
    buildAll(scanned, T3)
    expect(documentTables(scanned)).toEqual(built)
    const stamps = new Set(
      built['doc_providers']!.map((row) => (row as { updated_at: string }).updated_at),
    )
    expect(stamps).toEqual(new Set([T1, T3]))
  })
})
