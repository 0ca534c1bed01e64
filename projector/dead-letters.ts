// Dead letters: events the projector cannot apply. They leave the stream with the reason and
// their origin, so they can be inspected and replayed (`--from-file`) after a fix, and the
// partition moves on. Columns that are never stored are removed from them too.
import { appendFileSync } from 'node:fs'
import type { DeadLetter } from './apply.ts'

const NEVER_STORED_COLUMNS = ['ssn', 'internal_notes', 'storage_key']

export interface DeadLetterHeaders {
  'dlq.reason': string
  'dlq.error': string
  'dlq.origin.topic': string
  'dlq.origin.partition': string
  'dlq.origin.offset': string
}

export function deadLetterHeaders(letter: DeadLetter): DeadLetterHeaders {
  return {
    'dlq.reason': letter.reason,
    'dlq.error': letter.message,
    'dlq.origin.topic': letter.record.topic,
    'dlq.origin.partition': String(letter.record.partition),
    'dlq.origin.offset': letter.record.offset,
  }
}

/**
 * The record's value with never-stored columns removed, as JSON text when it parses, or as it
 * came when it does not (a value that does not parse cannot be redacted, nor does it carry rows).
 */
export function redactedValue(value: unknown): unknown {
  let parsed: unknown = value
  if (typeof value === 'string' || Buffer.isBuffer(value)) {
    try {
      parsed = JSON.parse(value.toString()) as unknown
    } catch {
      return value
    }
  }
  const payload = isObject(parsed) && isObject(parsed.payload) ? parsed.payload : parsed
  if (isObject(payload)) {
    for (const side of ['before', 'after']) {
      const row = payload[side]
      if (isObject(row)) for (const column of NEVER_STORED_COLUMNS) delete row[column]
    }
  }
  return parsed
}

/** One dead letter as a line of the file source's NDJSON format, headers added. */
export function deadLetterLine(letter: DeadLetter): string {
  const { record } = letter
  return JSON.stringify({
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
    key: jsonOrText(record.key),
    value: jsonOrText(redactedValue(record.value)),
    headers: deadLetterHeaders(letter),
  })
}

export function appendDeadLetters(path: string, letters: readonly DeadLetter[]): void {
  if (letters.length === 0) return
  appendFileSync(path, letters.map((l) => `${deadLetterLine(l)}\n`).join(''))
}

function jsonOrText(value: unknown): unknown {
  if (Buffer.isBuffer(value)) {
    const text = value.toString()
    try {
      return JSON.parse(text) as unknown
    } catch {
      return text
    }
  }
  return value ?? null
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
