// The projector's command line, parsed into what to run: pure, so every refusal is a unit test.
import { parseArgs } from 'node:util'
import { organizationIdsOption } from '../src/layout.ts'

export const usage = `usage: npm run projector [-- --from-file FILE | --rebuild [--org ID]... [--dry-run] [--json]]

  (no option)       consume the change topics from Kafka (KAFKA_BROKERS) until SIGTERM
  --from-file FILE  apply an NDJSON file of Kafka records, one per line, then exit
  --rebuild         replay every topic from the beginning into a new generation (fresh consumer
                    group), keeping updatedAt of unchanged documents; the api switches to it
                    once it has caught up, and this process goes on serving it
  --org ID          with --rebuild: only this organization (repeatable, or comma-separated):
                    replays every topic aside, keeping its events, then hands the rebuilt file
                    to the live projector, which swaps it in; the others are not touched
  --dry-run         with --rebuild (whole or --org): build aside, report per organization and
                    resource how many documents would change, appear and disappear (up to 20
                    ids each), swap nothing, remove what was built. Exit 0: nothing would
                    change; 1: something would
  --json            with --dry-run or --org: the report as one line of JSON on stdout
  --help            this text

Configuration is by environment: DATA_DIR, KAFKA_BROKERS, KAFKA_GROUP_ID, TOPIC_PREFIX, LOG_LEVEL,
ADMIN_HOST, ADMIN_PORT, DEAD_LETTER_TOPIC, WAL_CHECKPOINT_BYTES, OPEN_FILES_MAX,
PROGRESS_INTERVAL_MS, HANDOVER_TIMEOUT_MS (--rebuild --org; see README). --from-file and --rebuild show their progress: a bar on stderr
when it is a terminal, else a log line every PROGRESS_INTERVAL_MS.`

export type ProjectorCommand =
  | { run: 'help' }
  /** A refusal: the message for stderr, exit 2. */
  | { run: 'refused'; message: string }
  | { run: 'live'; rebuild: boolean }
  | { run: 'file'; path: string }
  /** `--rebuild --org` or `--rebuild --dry-run`: a run aside that ends with a report. */
  | { run: 'aside'; organizations: string[] | undefined; dryRun: boolean; json: boolean }

export function parseCommand(args: readonly string[]): ProjectorCommand {
  let values
  try {
    values = parseArgs({
      args: [...args],
      options: {
        'from-file': { type: 'string' },
        rebuild: { type: 'boolean' },
        org: { type: 'string', multiple: true },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean' },
      },
      strict: true,
    }).values
  } catch (error) {
    return { run: 'refused', message: `${(error as Error).message}\n\n${usage}` }
  }
  if (values.help === true) return { run: 'help' }
  const orgOption = values.org === undefined ? undefined : organizationIdsOption(values.org)
  const dryRun = values['dry-run'] === true
  const aside = orgOption !== undefined || dryRun
  if (aside && values.rebuild !== true) {
    return {
      run: 'refused',
      message: `projector: --org and --dry-run go with --rebuild\n\n${usage}`,
    }
  }
  if (values.json === true && !aside) {
    return {
      run: 'refused',
      message: 'projector: --json goes with --rebuild --org or --rebuild --dry-run',
    }
  }
  if (orgOption !== undefined && 'error' in orgOption) {
    return { run: 'refused', message: `projector: ${orgOption.error}` }
  }
  if (aside) {
    const organizations = orgOption?.organizations
    return { run: 'aside', organizations, dryRun, json: values.json === true }
  }
  const file = values['from-file']
  if (file !== undefined) return { run: 'file', path: file }
  return { run: 'live', rebuild: values.rebuild === true }
}
