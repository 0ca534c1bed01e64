// Dead letters: events the projector cannot apply. They leave the stream with the reason and
// their origin, so they can be inspected and replayed (`--from-file`) after a fix, and the
// partition moves on. Columns that are never stored are removed from them too.
import { appendFileSync } from 'node:fs'
import type { Logger } from 'pino'
import type { DeadLetter } from '../lanes/apply.ts'

const NEVER_STORED_COLUMNS = ['ssn', 'internal_notes', 'storage_key']

/**
 * The value of a dead letter whose original is not JSON: such a value cannot be searched for
 * never-stored columns, so it is left out rather than copied. Nothing is lost: the original stays
 * in its source topic (kept forever) at the origin the headers name, and no fix of the projector
 * could ever apply it.
 */
export const UNPARSEABLE_VALUE_OMITTED = 'omitted: not JSON, so it cannot be redacted'

export interface DeadLetterHeaders {
  'dlq.reason': string
  'dlq.error': string
  'dlq.origin.topic': string
  'dlq.origin.partition': string
  'dlq.origin.offset': string
  'dlq.value'?: string
}

export function deadLetterHeaders(letter: DeadLetter): DeadLetterHeaders {
  return {
    'dlq.reason': letter.reason,
    'dlq.error': letter.message,
    'dlq.origin.topic': letter.record.topic,
    'dlq.origin.partition': String(letter.record.partition),
    'dlq.origin.offset': letter.record.offset,
    ...(redactedValue(letter.record.value) === undefined
      ? { 'dlq.value': UNPARSEABLE_VALUE_OMITTED }
      : {}),
  }
}

/**
 * The record's value, parsed, with never-stored columns removed; undefined when it is not JSON
 * (see UNPARSEABLE_VALUE_OMITTED) and null when there is none.
 */
export function redactedValue(value: unknown): unknown {
  if (value === null || value === undefined) return null
  let parsed: unknown = value
  if (typeof value === 'string' || Buffer.isBuffer(value)) {
    try {
      parsed = JSON.parse(value.toString()) as unknown
    } catch {
      return undefined
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

/** A dead letter's value as the dead-letter topic receives it: JSON text, or none. */
export function deadLetterValue(letter: DeadLetter): string | null {
  const value = redactedValue(letter.record.value)
  return value === undefined || value === null ? null : JSON.stringify(value)
}

/** One dead letter as a line of the file source's NDJSON format, headers added. */
export function deadLetterLine(letter: DeadLetter): string {
  const { record } = letter
  return JSON.stringify({
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
    key: jsonOrText(record.key),
    value: redactedValue(record.value) ?? null,
    headers: deadLetterHeaders(letter),
  })
}

export function appendDeadLetters(path: string, letters: readonly DeadLetter[]): void {
  if (letters.length === 0) return
  appendFileSync(path, letters.map((l) => `${deadLetterLine(l)}\n`).join(''))
}

/** One warning per dead letter, naming its origin and reason (never its value). */
export function logDeadLetters(logger: Logger, letters: readonly DeadLetter[]): void {
  for (const letter of letters) {
    logger.warn(
      {
        topic: letter.record.topic,
        partition: letter.record.partition,
        offset: letter.record.offset,
        reason: letter.reason,
        error: letter.message,
      },
      'dead-lettered a change event',
    )
  }
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
