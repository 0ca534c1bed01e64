// `npm run verify`: checks the replica against PostgreSQL (run.ts). The report goes to stdout,
// logs and progress to stderr, so `--json` output stays one clean line.
//
//   npm run verify [-- --org ID]... [--repair] [--json]
//
// Exit codes: 0 no drift; 1 drift found (after --repair: drift left), a row the replica refuses,
// or documents that kept changing; 2 refused or cannot run (bad configuration or arguments, an
// --org neither side knows, PostgreSQL or Kafka unreachable, a grant missing, the replica not
// caught up in time, another rebuild running for --repair; for --repair's fallback to the
// source: no connector streaming, no INSERT on the signalling table, the incremental snapshot not
// completed within VERIFY_SNAPSHOT_TIMEOUT_MS).
import { parseArgs } from 'node:util'
import { loadCommandConfig, loadVerifyConfig } from '../../src/config.ts'
import { organizationIdsOption } from '../../src/layout.ts'
import { createLogger } from '../../src/log.ts'
import { createProgress } from '../../src/progress.ts'
import { RebuildStopped } from '../rebuild/aside.ts'
import { RebuildRefused } from '../rebuild/run.ts'
import { VerifyStopped } from './build.ts'
import { exitCode, reportJson, reportTable } from './report.ts'
import { verifyReplica } from './run.ts'
import { VerifyRefused } from './source.ts'

const usage = `usage: npm run verify [-- --org ID]... [--repair] [--json]

  Reads the product tables from PostgreSQL (DATABASE_URL, read-only, one consistent snapshot),
  builds each organization's documents from them with the projector's own code, and compares
  them with what the replica serves, by content (never by updatedAt).

  --org ID   only this organization (repeatable, or comma-separated)
  --repair   rebuild the organizations that drifted from the topics (as --rebuild --org does:
             the live projector swaps the files in), replace control.db's organizations and
             API keys with what their topics hold, then check them again; drift left (the
             topics never had the change) is then re-read from PostgreSQL through Debezium's
             incremental snapshot of those organizations alone, and checked a last time
  --json     the report as one line of JSON on stdout
  --help     this text

Exit codes: 0 no drift; 1 drift found (with --repair: drift left after the repair), a row the
replica refuses, or documents that kept changing; 2 refused or cannot run (configuration, an
--org neither side knows, connection, a missing grant, lag that did not resolve).

Configuration is by environment: DATABASE_URL (required), DATA_DIR, KAFKA_BROKERS, TOPIC_PREFIX,
KAFKA_GROUP_ID, VERIFY_SLOT_NAME, VERIFY_PAGE_ROWS, VERIFY_CATCH_UP_TIMEOUT_MS,
HANDOVER_TIMEOUT_MS, VERIFY_SIGNAL_TABLE, VERIFY_NOTIFICATION_TOPIC, VERIFY_SNAPSHOT_TIMEOUT_MS
(--repair), PROGRESS_INTERVAL_MS, LOG_LEVEL (see README).`

async function main(): Promise<number> {
  let args
  try {
    args = parseArgs({
      options: {
        org: { type: 'string', multiple: true },
        repair: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean' },
      },
      strict: true,
    })
  } catch (error) {
    process.stderr.write(`verify: ${(error as Error).message}\n\n${usage}\n`)
    return 2
  }
  if (args.values.help === true) {
    process.stdout.write(`${usage}\n`)
    return 0
  }
  const orgOption =
    args.values.org === undefined ? undefined : organizationIdsOption(args.values.org)
  if (orgOption !== undefined && 'error' in orgOption) {
    process.stderr.write(`verify: ${orgOption.error}\n`)
    return 2
  }
  const organizations = orgOption?.organizations

  const config = loadCommandConfig('verify', loadVerifyConfig, process.env)
  if (config === undefined) return 2
  const logger = createLogger('verify', config.projector.logLevel, process.stderr)
  const progress = createProgress({
    label: 'verify',
    unit: 'rows',
    stream: process.stderr,
    logger,
    intervalMs: config.projector.progressIntervalMs,
  })
  const stop = new AbortController()
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      logger.info({ signal }, 'stopping verify')
      stop.abort()
    })
  }
  try {
    const report = await verifyReplica(
      { config, logger, progress, signal: stop.signal },
      {
        ...(organizations === undefined ? {} : { organizations }),
        repair: args.values.repair === true,
      },
    )
    progress.done()
    process.stdout.write(
      args.values.json === true ? `${reportJson(report)}\n` : reportTable(report),
    )
    return exitCode(report)
  } catch (error) {
    progress.done()
    if (error instanceof VerifyRefused || error instanceof RebuildRefused) {
      process.stderr.write(`verify: ${error.message}\n`)
      return 2
    }
    if (error instanceof VerifyStopped || error instanceof RebuildStopped) {
      process.stderr.write(`verify: ${error.message}\n`)
      return 2
    }
    throw error
  }
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`verify: ${(error as Error).message}\n`)
    process.exitCode = 2
  },
)
