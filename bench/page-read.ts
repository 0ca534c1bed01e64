// What reading one list page from SQLite costs, and what in it: bench:api's organization (10,000
// providers, bench/api-organization.ts), distinct first-page positions of `/providers`, read on
// one thread through the api's own reader (api/store.ts, openForReading: mapped, read-only).
// Not a target's benchmark: it splits the part of an uncached page that is SQLite's own, to say
// how far a page read from the file can go down (docs/performance.md, "The api while the
// projector writes").
//
//   page            the api's statements as shipped (api/collections.ts readPage): the page's
//                   edge, then its bodies joined inside SQLite and handed over as one BLOB
//   known           the api's read with every body known (api/document-bodies.ts): the page's
//                   versions in one statement, the bodies joined from memory
//   ordered         the api's read with every body known and the list's order held
//                   (api/list-order.ts): no statement at all, the bodies joined from memory
//   versions        the same rows' id, stamp and stored hash only (what a page's ETag is made of)
//   positions       the index walk alone: the page's rows counted on the (stamp, id) index
//
// `npx tsx bench/page-read.ts [--pages N]` prints µs per page for each, then one line of JSON.
import { parseArgs } from 'node:util'
import { collections, orderSql, pageSql, readPage } from '../api/collections.ts'
import type { Position } from '../api/cursor.ts'
import { PageCache } from '../api/page-cache.ts'
import { listBody } from '../api/page.ts'
import { OrganizationFile } from '../api/store.ts'
import { openForReading } from '../src/sqlite.ts'
import { buildOrganization, PROVIDERS } from './api-organization.ts'

const { values } = parseArgs({ options: { pages: { type: 'string', default: '20000' } } })
const PAGES = Number(values.pages)
const LIMIT = 50

const { replica, organizationId } = buildOrganization()
try {
  const db = openForReading(replica.generation.organizationPath(organizationId))
  const file = new OrganizationFile(db, new PageCache(256 * 1024 * 1024).forFile())
  const known = file.bodies('doc_providers.body')
  const order = file.order(orderSql(collections.providers, 'base'))
  const slab = Buffer.allocUnsafeSlow(512 * 1024)
  const positions = db
    .prepare('SELECT updated_at, id FROM doc_providers ORDER BY updated_at, id')
    .raw(true)
    .all() as Position[]
  const providers = collections.providers
  const between = `FROM doc_providers WHERE (updated_at, id) > (?, ?) AND (updated_at, id) <= (?, ?)`
  const versions = db
    .prepare(
      `SELECT group_concat(id || ' ' || updated_at || ' ' || hash, ',') FROM ` +
        `(SELECT id, updated_at, hash ${between} ORDER BY updated_at, id)`,
    )
    .pluck(true)
  const walk = db
    .prepare(`SELECT count(*) FROM (SELECT id ${between} ORDER BY updated_at, id)`)
    .pluck(true)

  /** The start and last position of the `n`th distinct page (spread over the whole list). */
  const pageAt = (n: number): [Position, Position] => {
    const i = (n * 7919) % (PROVIDERS - LIMIT - 1)
    return [positions[i]!, positions[i + LIMIT]!]
  }
  const pageSqlAt = (n: number) => pageSql(providers, 'base', {}, pageAt(n)[0], LIMIT)
  /** The api's read with the bodies known (and the order, when given), copied into a response. */
  const joined = (withOrder?: typeof order) => (n: number) =>
    listBody(readPage(file, pageSqlAt(n), known, withOrder).bodies, null, (size) =>
      slab.subarray(0, size),
    ).length
  const reads: Record<string, (n: number) => number> = {
    page: (n) => readPage(file, pageSqlAt(n)).bodies.length,
    known: joined(),
    ordered: joined(order),
    versions: (n) => {
      const [from, last] = pageAt(n)
      return (versions.get(...from, ...last) as string).length
    },
    positions: (n) => {
      const [from, last] = pageAt(n)
      return walk.get(...from, ...last) as number
    },
  }
  const figures: Record<string, number> = {}
  for (const [name, read] of Object.entries(reads)) {
    for (let n = 0; n < 2000; n++) read(n) // warm: the mapping, SQLite's statements
    const started = process.hrtime.bigint()
    let sink = 0
    for (let n = 0; n < PAGES; n++) sink += read(n)
    const us = Number(process.hrtime.bigint() - started) / 1e3 / PAGES
    figures[`${name}Us`] = Math.round(us * 10) / 10
    process.stdout.write(`${name.padEnd(10)} ${us.toFixed(1)} µs a page (${sink} units read)\n`)
  }
  file.close()
  process.stdout.write(`${JSON.stringify(figures)}\n`)
} finally {
  replica.destroy()
}
