import { mkdtempSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { createLaneApplier } from '/work/main/projector/lanes/lanes.ts'
import { generation } from '/work/main/src/layout.ts'
const lanes = Number(process.argv[2])
const dir = mkdtempSync(join(tmpdir(), 'lm-'))
const g = generation(dir, 'g1'); mkdirSync(g.organizationsDir, { recursive: true })
const rss = () => Math.round(process.memoryUsage().rss / 1e6)
await new Promise((r) => setTimeout(r, 300))
const before = rss()
const a = createLaneApplier({ generation: g, topicPrefix: 'x', logger: pino({ level: 'silent' }), offsetGuard: false, walCheckpointBytes: 64e6, lanes, deferDocumentsUntilCaughtUp: true, loadCommitEvents: 100000 })
await a.commit({})
await a.applyBatch([])
await new Promise((r) => setTimeout(r, 3000))
console.log(process.argv[3] ?? '', 'lanes', lanes, 'rss after start', rss() - before, 'MB')
await a.close()
