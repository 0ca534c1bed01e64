// Kafka Connect's JsonConverter (schemas.enable=true) wraps every event as
// `{"schema":<schema>,"payload":<event>}`. The schema block is most of the bytes (about 4.8 KB
// of a 5.8 KB event) and the same for every event of a table, so parsing it is most of the cost
// of reading an event. This cache learns, per topic, the exact text `{"schema":<schema>,"payload":`
// from an event parsed in full; events that begin with those bytes have only their payload parsed.
//
// Correct for any input: the fast path is taken only when the text starts with a learned prefix
// and the rest, up to the closing brace, parses as one JSON value. Then the whole text is exactly
// `{"schema":S,"payload":P}`, whose full parse is `{schema: S, payload: P}`. Anything else (another
// schema version, extra keys, whitespace, the bare envelope, invalid JSON) returns undefined: the
// caller parses in full, and may `learn` from the result.
import { keepLongIntegers } from '../../schema/events.ts'

/** A learned prefix: its bytes (and text), and the schema it stands for, parsed once. */
export interface WrapperPrefix {
  readonly bytes: Buffer
  readonly text: string
  readonly schema: unknown
}

interface TopicPrefixes {
  prefixes: WrapperPrefix[]
  /** Full parses to let go by before trying to learn again, after a failed attempt. */
  skip: number
}

/** Topics change schema rarely; a few versions per topic are kept, most recent first. */
const PREFIXES_PER_TOPIC = 4
/** Bounds the cost of inputs no prefix can be learned from (pretty-printed JSON, ...). */
const SKIP_AFTER_FAILED_LEARN = 256
const MAX_TOPICS = 1024

const SCHEMA_OPEN = '{"schema":'
const SCHEMA_OPEN_BYTES = Buffer.from(SCHEMA_OPEN)
const CLOSE_BRACE = 0x7d

export class WrapperPrefixes {
  readonly #topics = new Map<string, TopicPrefixes>()

  /** The learned prefix that `text[start, end)` begins with, if any (nothing else is checked). */
  match(topic: string, text: Buffer, start: number, end: number): WrapperPrefix | undefined {
    const state = this.#topics.get(topic)
    if (state === undefined) return undefined
    for (const prefix of state.prefixes) {
      const length = prefix.bytes.length
      if (end - start > length && prefix.bytes.compare(text, start, start + length) === 0) {
        return prefix
      }
    }
    return undefined
  }

  /**
   * `{schema, payload}` of a whole wrapped value that begins with a learned prefix, parsing only
   * the payload; undefined when it does not (then parse it in full).
   */
  parse(topic: string, value: Buffer | string): { schema: unknown; payload: unknown } | undefined {
    const state = this.#topics.get(topic)
    if (state === undefined) return undefined
    if (typeof value === 'string') {
      for (const prefix of state.prefixes) {
        if (value.startsWith(prefix.text)) {
          let end = value.length
          while (end > 0 && isWhitespace(value.charCodeAt(end - 1))) end--
          if (value.charCodeAt(end - 1) !== CLOSE_BRACE || end - 1 <= prefix.text.length) {
            return undefined
          }
          return parsePayload(prefix, value.slice(prefix.text.length, end - 1))
        }
      }
      return undefined
    }
    const prefix = this.match(topic, value, 0, value.length)
    if (prefix === undefined) return undefined
    let end = value.length
    while (end > 0 && isWhitespace(value[end - 1]!)) end--
    if (value[end - 1] !== CLOSE_BRACE || end - 1 <= prefix.bytes.length) return undefined
    return parsePayload(prefix, value.toString('utf8', prefix.bytes.length, end - 1))
  }

  /**
   * Learns the prefix of `text` (from `start`), given its full parse `parsed`: kept when the text
   * really begins with `{"schema":<JSON.stringify(parsed.schema)>,"payload":`.
   */
  learn(topic: string, text: Buffer | string, start: number, parsed: unknown): void {
    if (!isObject(parsed) || !('schema' in parsed) || !('payload' in parsed)) return
    let state = this.#topics.get(topic)
    if (state === undefined) {
      if (this.#topics.size >= MAX_TOPICS) this.#topics.clear()
      state = { prefixes: [], skip: 0 }
      this.#topics.set(topic, state)
    }
    if (state.skip > 0) {
      state.skip--
      return
    }
    const begins =
      typeof text === 'string'
        ? text.startsWith(SCHEMA_OPEN, start)
        : SCHEMA_OPEN_BYTES.compare(text, start, start + SCHEMA_OPEN_BYTES.length) === 0
    const schemaJson = begins ? JSON.stringify(parsed.schema) : undefined
    if (schemaJson === undefined) {
      state.skip = SKIP_AFTER_FAILED_LEARN
      return
    }
    const prefixText = `${SCHEMA_OPEN}${schemaJson},"payload":`
    const bytes = Buffer.from(prefixText)
    const matches =
      typeof text === 'string'
        ? text.startsWith(prefixText, start)
        : bytes.compare(text, start, start + bytes.length) === 0
    if (!matches) {
      state.skip = SKIP_AFTER_FAILED_LEARN
      return
    }
    state.prefixes.unshift({ bytes, text: prefixText, schema: parsed.schema })
    if (state.prefixes.length > PREFIXES_PER_TOPIC) state.prefixes.pop()
  }
}

function parsePayload(
  prefix: WrapperPrefix,
  payloadText: string,
): { schema: unknown; payload: unknown } | undefined {
  try {
    return { schema: prefix.schema, payload: JSON.parse(keepLongIntegers(payloadText)) as unknown }
  } catch {
    return undefined
  }
}

/** JSON's insignificant whitespace: space, tab, line feed, carriage return. */
export function isWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
