// The recommended client loop (spec/api-v1.md section 4) on /providers, as a test's polling
// client: from its watermark to the end of the list, following nextCursor (bound to the filters it
// was issued for, so they go with it), then a short wait. Records every failure, and every
// document sent as new or changed (an updatedAt after the watermark of the pass that saw it).
import { setTimeout as sleep } from 'node:timers/promises'

/** A GET of the public API with the poller's key: status and raw body. */
export type GetText = (path: string) => Promise<{ status: number; text: string }>

export interface Poller {
  /** `passes`: the passes completed, each from the watermark to the end of the list. */
  readonly state: { failures: string[]; sent: string[]; passes: number }
  /** The ids sent since the last call. */
  take(): string[]
  /**
   * Resolves once the poller has completed a whole pass begun after this call: whatever was
   * served when it was called has been seen by then. Throws on a failure, or after `timeoutMs`.
   */
  settled(timeoutMs?: number): Promise<void>
  stop(): Promise<void>
}

export function pollProviders(get: GetText, options: { limit: number; pauseMs: number }): Poller {
  const state = { failures: [] as string[], sent: [] as string[], passes: 0 }
  let running = true
  let watermark = '1970-01-01T00:00:00.000Z'
  const loop = (async () => {
    while (running) {
      let cursor: string | null = null
      let newest = watermark
      do {
        const query: string =
          `updated_since=${watermark}&limit=${options.limit}` +
          (cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`)
        try {
          const response = await get(`/providers?${query}`)
          if (response.status !== 200) {
            state.failures.push(`${response.status} ${response.text}`)
            break
          }
          const page = JSON.parse(response.text) as {
            data: Array<{ id: string; updatedAt: string }>
            nextCursor: string | null
          }
          for (const doc of page.data) {
            if (doc.updatedAt > watermark) state.sent.push(doc.id)
            if (doc.updatedAt > newest) newest = doc.updatedAt
          }
          cursor = page.nextCursor
        } catch (error) {
          state.failures.push(String(error))
          break
        }
      } while (cursor !== null)
      watermark = newest
      state.passes++
      await sleep(options.pauseMs)
    }
  })()
  return {
    state,
    take: () => state.sent.splice(0),
    async settled(timeoutMs = 60_000) {
      // The pass under way may have begun before this call: the one after it has not.
      const wanted = state.passes + 2
      const deadline = Date.now() + timeoutMs
      while (state.passes < wanted) {
        if (state.failures.length > 0) throw new Error(state.failures.join('\n'))
        if (Date.now() > deadline) throw new Error(`the poller did not settle in ${timeoutMs} ms`)
        await sleep(20)
      }
    },
    async stop() {
      running = false
      await loop
    },
  }
}
