// What the Kafka source needs of kafkajs beyond its calls: the consumer's settings, its errors read
// for what they mean, heartbeats while a wait lasts, retries until Kafka answers, and its logs in
// pino. Nothing here holds the source's state (sources/kafka.ts).
import {
  logLevel as kafkaLogLevel,
  type Consumer,
  type EachBatchPayload,
  type Kafka,
} from 'kafkajs'
import type { Logger } from 'pino'
import { setTimeout as sleepUnless } from 'node:timers/promises'

/**
 * The group's consumer with the source's settings. When kafkajs gives it up on an error it would
 * retry, `onRetriableCrash` hears of it, and kafkajs does not restart it.
 */
export function consumerOf(
  kafka: Kafka,
  groupId: string,
  { retries, onRetriableCrash }: { retries: number; onRetriableCrash: (error: Error) => void },
): Consumer {
  return kafka.consumer({
    groupId,
    // Small fetches, as memory goes: a fetched response stays in memory until the last of its
    // records is applied, with kafkajs's objects for each record. At 8 MB a partition and 32 MB a
    // fetch, a load over Kafka peaked at 594 MB (a million schemaless events) where the same file
    // peaks at 430; at 1 and 8 MB, 467 MB in the same time (docs/performance.md). A fetch still
    // returns a whole record batch larger than these.
    maxBytesPerPartition: 1024 * 1024,
    maxBytes: 8 * 1024 * 1024,
    // The broker answers a fetch as soon as it has one byte (minBytes 1: a change is handed over
    // the moment it is appended); maxWaitTimeInMs only bounds an idle fetch, so it sets how often
    // an idle consumer wakes, not any change's delay (docs/freshness.md).
    minBytes: 1,
    maxWaitTimeInMs: 1_000,
    // kafkajs asks whether to restart a consumer it gave up on a retriable error: never, the
    // source builds its successor itself (sources/kafka.ts `#consumerLost`).
    retry: {
      initialRetryTime: 500,
      maxRetryTime: 30_000,
      retries,
      restartOnFailure: (error) => {
        onRetriableCrash(error)
        return Promise.resolve(false)
      },
    },
  })
}

/** kafkajs's retries of a consumer's fetch or commit: 0.5 s doubling to 30 s, about 2.5 minutes. */
export const CONSUMER_RETRIES = 10

/** kafkajs's protocol errors that mean this member must join its group again. */
const MEMBERSHIP_LOST = new Set([
  'UNKNOWN_MEMBER_ID',
  'ILLEGAL_GENERATION',
  'REBALANCE_IN_PROGRESS',
  'NOT_COORDINATOR_FOR_GROUP',
])

/**
 * The error to throw from a batch's handler so that kafkajs does what it should. When a handler
 * throws a membership error (the member unknown once its session expired, during a broker outage
 * say), kafkajs joins the group again and consumes on from the committed offsets. But a commit
 * refused for that reason reaches the source wrapped by kafkajs's retrier as non-retriable, which
 * crashed the consumer for good instead, and stopped the projector (seen in the e2e fault test
 * "Kafka lost mid-stream"). The wrapped error is what kafkajs knows how to handle.
 */
export function errorForKafkajs(error: Error): Error {
  // Read by shape: kafkajs's error classes are not named exports its CommonJS module gives ESM
  // (`import { KafkaJSProtocolError }` fails at run time, though it type-checks).
  const { cause } = error as { cause?: unknown }
  const type = (cause as { type?: unknown } | undefined)?.type
  return cause instanceof Error && typeof type === 'string' && MEMBERSHIP_LOST.has(type)
    ? cause
    : error
}

/**
 * Whether kafkajs gave a consumer up as non-retriable for what passes: a group coordinator it
 * could not find, which a broker shutting down or electing leaders is enough for (kafkajs#1630).
 * The e2e fault test "Kafka lost mid-stream" met it as its broker stopped, and the projector
 * exited 1 while Kafka was away. A new consumer finds the coordinator again once there is one.
 */
export function passingForKafkajs(error: Error): boolean {
  for (let e: unknown = error; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (e.name === 'KafkaJSGroupCoordinatorNotFound') return true
  }
  return false
}

/**
 * Waits for `work`, heartbeating every few seconds meanwhile. kafkajs heartbeats only when asked,
 * and a batch spread over thousands of organization files can take longer than the group's
 * session to apply and commit: the member would be dropped, its commits refused.
 */
export async function heartbeating(payload: EachBatchPayload, work: Promise<void>): Promise<void> {
  let done = false
  const finished = work.finally(() => (done = true))
  while (!done) {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([finished, new Promise((resolve) => (timer = setTimeout(resolve, 3_000)))])
    clearTimeout(timer)
    if (!done) await payload.heartbeat()
  }
  await finished
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * Runs `attempt` until it succeeds, waiting half a second after the first failure and twice as
 * long after each next one (30 s at most), for as long as `stopped()` is false: the consumer's
 * connection and the count of organizations a new generation takes wait for Kafka alike. Its
 * result, or undefined once stopped; `signal` also ends a wait early.
 */
export async function untilKafkaAnswers<T>(
  attempt: () => Promise<T>,
  options: {
    stopped: () => boolean
    logger: Logger
    message: string
    /** Run after a failed attempt, before its wait (a half-made connection undone). */
    cleanUp?: () => Promise<void>
    signal?: AbortSignal
  },
): Promise<{ value: T } | undefined> {
  const { stopped, logger, message, cleanUp, signal } = options
  let delay = 500
  while (!stopped()) {
    try {
      return { value: await attempt() }
    } catch (error) {
      await cleanUp?.()
      if (stopped()) break
      logger.error({ err: error, retryInMs: delay }, message)
      await abortableSleep(delay, signal)
      delay = Math.min(delay * 2, 30_000)
    }
  }
  return undefined
}

export function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return sleep(ms)
  return sleepUnless(ms, undefined, { signal }).catch(() => undefined)
}

/**
 * Routes kafkajs's own logs into pino as structured lines. kafkajs adds the stack of the error it
 * reports (`stack`); that stays out, as every stack does (src/log.ts).
 */
export function kafkaLogCreator(logger: Logger) {
  const child = logger.child({ component: 'kafkajs' })
  return () =>
    ({ level, log }: { level: kafkaLogLevel; log: { message: string; [k: string]: unknown } }) => {
      const { message, timestamp: _t, logger: _l, stack: _s, ...rest } = log
      const fields = { ...rest }
      if (level <= kafkaLogLevel.ERROR) child.error(fields, message)
      else if (level === kafkaLogLevel.WARN) child.warn(fields, message)
      else if (level === kafkaLogLevel.INFO) child.info(fields, message)
      else child.debug(fields, message)
    }
}
