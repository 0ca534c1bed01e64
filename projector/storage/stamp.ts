/**
 * The visibility stamp for a batch: the wall clock, but always after the file's last stamp, even
 * when the clock stands still (two batches in one millisecond) or steps back. Strictly later, not
 * just never earlier: a cursor resumes after an exact (updatedAt, id) position, so a row stamped
 * equal to the last stamp, with a smaller id, committed after a cursor was handed out, would sort
 * behind that cursor and be skipped by the walk holding it.
 */
export function nextStamp(now: Date, lastStamp: string | undefined): string {
  const stamp = now.toISOString()
  if (lastStamp === undefined || stamp > lastStamp) return stamp
  return new Date(Date.parse(lastStamp) + 1).toISOString()
}
