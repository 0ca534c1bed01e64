// The file source's fast path (schema blocks skipped, schemaless lines parsed whole) must read
// every line exactly as parseRecordLine, the plain JSON.parse of the line, does.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { parseRecordLine } from '../../../projector/decode/file-line.ts'
import {
  readLineBatches,
  readRecordBatches,
  recordsOfTopicInFile,
} from '../../../projector/sources/file.ts'
import { generateDataset } from '../../../scripts/dataset/generate.ts'

const dir = mkdtempSync(join(tmpdir(), 'file-source-test-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function readAll(lines: string[]): Promise<unknown[]> {
  const path = join(dir, `lines-${Math.random().toString(36).slice(2)}.ndjson`)
  writeFileSync(path, lines.join('\n') + '\n')
  const out: unknown[] = []
  for await (const batch of readRecordBatches(path, 7)) out.push(...batch)
  return out
}

const size = { organizations: 1, providersPerOrganization: 8, updateRounds: 1, seed: 3 }
const wrapped = [...generateDataset(size)]
const schemaless = [...generateDataset({ ...size, schemas: false })]

describe('readRecordBatches', () => {
  it('reads schema-wrapped, schemaless and mixed lines as parseRecordLine does', async () => {
    // Interleaved, so each topic's learned schema prefix meets lines without one.
    const mixed = wrapped.flatMap((line, i) => [line, schemaless[i]!])
    const lines = [...wrapped, ...schemaless, ...mixed]
    expect(await readAll(lines)).toEqual(lines.map((line, i) => parseRecordLine(line, i + 1)))
    // And the two encodings carry the same payloads.
    const payloads = (records: unknown[]) =>
      records.map((r) => {
        const { key, value } = r as { key: { payload?: unknown }; value: { payload?: unknown } }
        return [key.payload ?? key, value === null ? null : (value.payload ?? value)]
      })
    expect(payloads(await readAll(schemaless))).toEqual(payloads(await readAll(wrapped)))
  })

  it('reads unusual but valid lines as parseRecordLine does', async () => {
    const record = JSON.parse(wrapped[3]!) as Record<string, unknown>
    const bare = JSON.parse(schemaless[3]!) as Record<string, unknown>
    const lines = [
      wrapped[3]!,
      // the same schema, then another one for the topic
      wrapped[3]!.replace('"version":2', '"version":3'),
      JSON.stringify({ ...record, value: bare.value }), // wrapped key, schemaless value
      JSON.stringify({ ...bare, key: record.key }), // schemaless value, wrapped key
      JSON.stringify({ value: record.value, key: record.key, topic: record.topic }), // other order
      JSON.stringify(record, null, 1).replace(/\n/g, ' '), // whitespace everywhere
      ` ${wrapped[3]!} `,
      JSON.stringify({ ...record, key: null }),
      JSON.stringify({ ...record, value: null }),
      JSON.stringify({ ...record, offset: 12 }),
      JSON.stringify({ ...bare, partition: 2 }),
      JSON.stringify({ topic: record.topic, key: bare.key, value: bare.value }), // no offset
      `{"topic":${JSON.stringify(record.topic)},"topic":"other","key":null,"value":null}`,
      JSON.stringify({ ...record, topic: 'caf\u00e9.public.providers' }),
    ]
    expect(await readAll(lines)).toEqual(lines.map((line, i) => parseRecordLine(line, i + 1)))
  })
})

describe('recordsOfTopicInFile', () => {
  it("counts a topic's lines, one cut by the read's 64 KB chunks included, and no other topic's", () => {
    const line = (topic: string) => JSON.stringify({ topic, partition: 0, offset: '0', key: null })
    const organizations = line('product.public.organizations')
    // Padding up to the middle of a needle at the first 64 KB chunk's end.
    const head = `${line('product.public.providers')}\n`
    const cut = 64 * 1024 - head.length - 1 - '{"topic":"product.pu'.length
    const lines = [
      head.trimEnd(),
      `{"pad":"${'x'.repeat(cut - '{"pad":""}'.length)}"}`,
      organizations,
      organizations,
      line('product.public.organizations_archive'),
      // A record whose value names the topic, quoted inside a string: not a record of it.
      JSON.stringify({
        topic: 'product.public.providers',
        note: '"topic":"product.public.organizations"',
      }),
    ]
    const path = join(dir, 'topics.ndjson')
    writeFileSync(path, `${lines.join('\n')}\n`)
    expect(lines.slice(0, 2).join('\n').length + 1 + '{"topic":"product.pu'.length).toBe(64 * 1024)
    expect(recordsOfTopicInFile(path, 'product.public.organizations')).toBe(2)
    expect(recordsOfTopicInFile(path, 'product.public.providers')).toBe(2)
  })
})

describe('readLineBatches', () => {
  /** Each batch's lines as text, with their numbers. */
  async function linesOf(text: string, batchSize = 2): Promise<Array<[number, string]>> {
    const path = join(dir, `lines-${Math.random().toString(36).slice(2)}.ndjson`)
    writeFileSync(path, text)
    const out: Array<[number, string]> = []
    for await (const batch of readLineBatches(path, batchSize)) {
      for (let i = 0; i < batch.lines.length; i += 3) {
        const [start, end, lineNumber] = batch.lines.slice(i, i + 3) as [number, number, number]
        out.push([lineNumber, batch.buf.toString('utf8', start, end)])
      }
      batch.release()
    }
    return out
  }

  // Its read buffers are sized to a file smaller than them: the edges of that size.
  it('reads a file smaller than its buffers whole, with or without a last line break', async () => {
    expect(await linesOf('')).toEqual([])
    expect(await linesOf('{}')).toEqual([[1, '{}']])
    expect(await linesOf('{"a":1}\n\n{"b":2}\r\n{"c":3}')).toEqual([
      [1, '{"a":1}'],
      [3, '{"b":2}'],
      [4, '{"c":3}'],
    ])
  })
})
