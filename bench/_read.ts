import { readRecordBatches } from '../projector/sources/file.ts'
import { decodeRecord } from '../projector/decode.ts'
const path = process.argv[2]!
const limit = Number(process.argv[3] ?? 300000)
const decode = process.argv[4] === 'decode'
let n = 0
const t0 = process.hrtime.bigint()
let td = 0n
for await (const batch of readRecordBatches(path, 5000)) {
  if (decode) {
    const s = process.hrtime.bigint()
    for (const r of batch) decodeRecord(r, 'product')
    td += process.hrtime.bigint() - s
  }
  n += batch.length
  if (n >= limit) break
}
const total = Number(process.hrtime.bigint() - t0) / 1000 / n
console.log(
  JSON.stringify({
    n,
    totalMicros: total.toFixed(2),
    decodeMicros: (Number(td) / 1000 / n).toFixed(2),
  }),
)
