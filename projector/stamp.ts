/**
 * The visibility stamp for a batch: the wall clock, but never earlier than the file's last stamp,
 * so stamps never go backwards within an organization even if the clock does.
 */
export function nextStamp(now: Date, lastStamp: string | undefined): string {
  const stamp = now.toISOString()
  return lastStamp !== undefined && lastStamp > stamp ? lastStamp : stamp
}
