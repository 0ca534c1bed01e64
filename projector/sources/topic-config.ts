// How the change topics are kept: the one definition the projector (creating a missing topic),
// the connector (deploy/debezium/connector.json, `topic.creation.default.*`, checked equal by
// test/integration/compose.test.ts) and the tests' provisioning share.
//
// Compacted: a topic keeps each row's latest record, so its disk follows the data, not its
// history, and a replay (a rebuild) reads rows, not every change ever made. That is safe because
// the projector takes a topic as compaction leaves it: a tombstone whose delete was compacted
// away deletes by key (projector/decode.ts), a delete of a row never seen is a no-op. Two
// settings come from the recovery contract (README, docs/operations-limits.md):
//
// - delete.retention.ms: how long a tombstone outlives compaction. A consumer that read a row
//   and then reaches its tombstone only after that is gone keeps the row forever. The consumers
//   that are behind are a projector coming back from an outage and a rebuild reading from the
//   beginning, so it covers the longest outage plus the longest rebuild.
// - min.compaction.lag.ms: how long every change stays as it was written. Correctness does not
//   need it (the projector converges on compacted topics); it keeps an hour of exact history,
//   so that a projector restarted or redeployed (minutes) replays each delete with its source
//   position (the guarded path) rather than a bare tombstone, at the cost of an hour of disk.
//
// And min.cleanable.dirty.ratio 0.1 (Kafka's default: 0.5): the cleaner takes a topic once a
// tenth of it is superseded, not half, so a rebuild reads about a row's latest record, not up to
// two. A million changes to 100,125 rows left 19.6% of them at 0.5 and 11.0% at 0.1
// (bench:rebuild:compacted), the rebuild 0.32x the uncompacted one's time, then 0.24x. The cost
// is the cleaner's work: it rewrites a log's segments more often.
//
// TRUNCATE events have a null key, which a compacted topic refuses (the connector task fails):
// the connector skips them (`skipped.operations: t`), and `verify` reports what a truncate left
// behind as drift.

const HOUR_MS = 60 * 60 * 1000
const DAY_MS = 24 * HOUR_MS

/** What a change topic must cover: the replica down this long, then rebuilt from scratch. */
export const RECOVERY_CONTRACT = {
  longestOutageMs: 7 * DAY_MS,
  longestRebuildMs: 1 * DAY_MS,
} as const

/** Topic-level settings of every change topic (Kafka's names and string values). */
export const CHANGE_TOPIC_CONFIG: Readonly<Record<string, string>> = {
  'cleanup.policy': 'compact',
  'delete.retention.ms': String(
    RECOVERY_CONTRACT.longestOutageMs + RECOVERY_CONTRACT.longestRebuildMs,
  ),
  'min.compaction.lag.ms': String(HOUR_MS),
  'min.cleanable.dirty.ratio': '0.1',
}

/** The same as kafkajs's `configEntries`. */
export function changeTopicConfigEntries(): { name: string; value: string }[] {
  return Object.entries(CHANGE_TOPIC_CONFIG).map(([name, value]) => ({ name, value }))
}
