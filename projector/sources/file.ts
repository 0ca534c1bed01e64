// The NDJSON file source: one Kafka record per line,
//   {"topic": "...", "partition": 0, "offset": "12", "key": <json or null>, "value": <json or null>}
// where `value` is exactly what Debezium wrote (partition and offset are optional: 0 and the line
// number). The embedded default for a first run without Kafka, and how dead letters are replayed.
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import type { SourceRecord } from '../decode.ts'

export class FileSourceError extends Error {
  override name = 'FileSourceError'
}

/** Parses one line; throws a FileSourceError naming the line when it is not a record. */
export function parseRecordLine(line: string, lineNumber: number): SourceRecord {
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch {
    throw new FileSourceError(`line ${lineNumber}: not valid JSON`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new FileSourceError(`line ${lineNumber}: expected a JSON object`)
  }
  const r = parsed as Record<string, unknown>
  if (typeof r.topic !== 'string' || r.topic === '') {
    throw new FileSourceError(`line ${lineNumber}: "topic" must be a non-empty string`)
  }
  const partition = r.partition ?? 0
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0) {
    throw new FileSourceError(`line ${lineNumber}: "partition" must be a non-negative integer`)
  }
  const offset = r.offset ?? String(lineNumber)
  if (
    !(typeof offset === 'string' && /^\d+$/.test(offset)) &&
    !(typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0)
  ) {
    throw new FileSourceError(
      `line ${lineNumber}: "offset" must be a non-negative integer or a string of digits`,
    )
  }
  return {
    topic: r.topic,
    partition,
    offset: String(offset),
    key: r.key ?? null,
    value: r.value ?? null,
  }
}

/** Reads the file in batches of records; a bad line stops the run with its line number. */
export async function* readRecordBatches(
  path: string,
  batchSize: number,
): AsyncGenerator<SourceRecord[]> {
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity })
  let batch: SourceRecord[] = []
  let lineNumber = 0
  for await (const line of lines) {
    lineNumber++
    if (line.trim() === '') continue
    batch.push(parseRecordLine(line, lineNumber))
    if (batch.length >= batchSize) {
      yield batch
      batch = []
    }
  }
  if (batch.length > 0) yield batch
}
