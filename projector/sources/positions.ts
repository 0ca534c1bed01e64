// Where the Kafka source stands on each partition, three ways, and the rule between them: an
// offset is committed to Kafka only after the files that applied its batch have committed.
import { partitionKey } from './topic-admin.ts'

/** An offset as kafkajs commits it: the next one to read of a partition. */
export interface PartitionOffset {
  topic: string
  partition: number
  offset: string
}

export class ConsumedPositions {
  /** The next offset to read of each partition this process has applied a batch of. */
  readonly #applied = new Map<string, bigint>()
  /**
   * The next offset of each partition whose files are committed: `#applied` as of the last files'
   * commit, lowered at once by a hand-over's seek. What freshness is proved on.
   */
  readonly #visible = new Map<string, bigint>()
  /** Offsets of batches applied, not committed to Kafka yet (their files may not be). */
  readonly #uncommitted = new Map<string, PartitionOffset>()
  /** The group's committed offsets when this process started: committed only after the files. */
  readonly #committedAtStart = new Map<string, bigint>()

  /** A batch applied up to `next` (its files not necessarily committed yet). */
  applied(topic: string, partition: number, next: bigint): void {
    const key = partitionKey(topic, partition)
    this.#applied.set(key, next)
    this.#uncommitted.set(key, { topic, partition, offset: next.toString() })
  }

  /**
   * Beats read up to `next`: they touch no file. `commitNow`: their offset is committed on its
   * own, now, rather than with the next files' commit.
   */
  beaten(topic: string, partition: number, next: bigint, commitNow: boolean): PartitionOffset {
    const key = partitionKey(topic, partition)
    const offset = { topic, partition, offset: next.toString() }
    this.#applied.set(key, next)
    if (commitNow) this.#uncommitted.delete(key)
    else this.#uncommitted.set(key, offset)
    return offset
  }

  /** A hand-over's seek: this partition is read again from `seek`, files and Kafka alike. */
  rewound(seek: PartitionOffset): void {
    const key = partitionKey(seek.topic, seek.partition)
    this.#applied.set(key, BigInt(seek.offset))
    this.#visible.set(key, BigInt(seek.offset))
    this.#uncommitted.set(key, seek)
  }

  /** Every applied batch's files are committed: they are visible now. */
  filesCommitted(): void {
    for (const [key, next] of this.#applied) this.#visible.set(key, next)
  }

  /** The offsets to commit to Kafka, handed over once. */
  takeUncommitted(): PartitionOffset[] {
    const offsets = [...this.#uncommitted.values()]
    this.#uncommitted.clear()
    return offsets
  }

  /** A failure: nothing applied since the last commit may ever be committed. */
  abandonUncommitted(): void {
    this.#uncommitted.clear()
  }

  /** The next offset per partition: what this process applied, else what the group committed. */
  next(committed: ReadonlyMap<string, bigint>): Map<string, bigint> {
    const next = new Map(this.#applied)
    for (const [key, offset] of committed) if (!next.has(key)) next.set(key, offset)
    return next
  }

  rememberCommittedAtStart(committed: ReadonlyMap<string, bigint>): void {
    if (this.#committedAtStart.size > 0) return
    for (const [key, offset] of committed) this.#committedAtStart.set(key, offset)
  }

  get knowsCommittedAtStart(): boolean {
    return this.#committedAtStart.size > 0
  }

  /** Whether every batch of the partition applied so far is in committed files. */
  committedThrough(key: string): boolean {
    const applied = this.#applied.get(key)
    return applied === undefined || applied === this.#visible.get(key)
  }

  /** Where a partition's committed files reach: what a freshness candidate is proved on. */
  readonly visibleAt = (key: string): bigint | undefined =>
    this.#visible.get(key) ?? this.#committedAtStart.get(key)
}
