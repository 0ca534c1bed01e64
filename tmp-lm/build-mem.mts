import { Worker } from 'node:worker_threads'
const src = process.argv[2]!
const { workerSource } = await import(`${src}/projector/lanes/worker-source.ts`)
const rss = () => Math.round(process.memoryUsage().rss / 1e6)
await new Promise((r) => setTimeout(r, 300))
const before = rss()
const workers = Array.from({ length: 3 }, () => new Worker(workerSource(new URL(`file://${src}/projector/lanes/build-worker.ts`)), { eval: true, resourceLimits: { maxYoungGenerationSizeMb: 8 } }))
await new Promise((r) => setTimeout(r, 4000))
console.log(src, '3 build workers idle', rss() - before, 'MB')
await Promise.all(workers.map((w) => w.terminate()))
