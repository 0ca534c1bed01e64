// A Kafka source over a test broker, as the source's integration tests build it: client and group
// named after the test's topic prefix, a silent logger, an applier that applies nothing unless
// given one, batches and lag heard by nobody, a promise of its catch-up, and the group it
// consumes as.
import pino from 'pino'
import { emptyOutcome } from '../../projector/lanes/pack.ts'
import {
  createKafkaSource,
  type KafkaSource,
  type KafkaSourceOptions,
} from '../../projector/sources/kafka.ts'

type Given = 'brokers' | 'topicPrefix' | 'topics'
type Defaulted =
  | 'clientId'
  | 'groupId'
  | 'logger'
  | 'applier'
  | 'onBatch'
  | 'onLag'
  | 'onCaughtUp'
  | 'lagIntervalMs'

export function testKafkaSource(
  options: Pick<KafkaSourceOptions, Given> &
    Partial<Pick<KafkaSourceOptions, Defaulted>> &
    Omit<KafkaSourceOptions, Given | Defaulted>,
): { source: KafkaSource; ready: Promise<void>; groupId: string } {
  const groupId = options.groupId ?? `it-${options.topicPrefix}`
  let caughtUp!: () => void
  const ready = new Promise<void>((resolve) => (caughtUp = resolve))
  const source = createKafkaSource({
    clientId: `it-${options.topicPrefix}`,
    groupId,
    logger: pino({ level: 'silent' }),
    applier: {
      applyBatch: () => emptyOutcome(),
      commit: () => ({}),
      buildInProgress: () => undefined,
    },
    onBatch: () => undefined,
    onLag: () => undefined,
    lagIntervalMs: 200,
    ...options,
    onCaughtUp: async () => {
      await options.onCaughtUp?.()
      caughtUp()
    },
  })
  return { source, ready, groupId }
}
