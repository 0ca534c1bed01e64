// Structured JSON logs (pino) for both processes. Credentials never reach a log line: the
// Authorization header is redacted wherever it appears. Nor do stack traces: an error is logged
// as its type, message and code, which is what an operator acts on; a stack names our files and
// lines to whoever reads the logs, and its frames can carry SQL.
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino'

export type { Logger }

export interface LoggedError {
  type: string
  message: string
  code?: string
}

/** An error as a log line carries it: no stack, no cause chain. */
export function loggedError(error: unknown): LoggedError {
  if (!(error instanceof Error)) return { type: 'Error', message: String(error) }
  const code = (error as { code?: unknown }).code
  return {
    type: error.name,
    message: error.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}),
  }
}

export function createLogger(
  name: string,
  level: LevelWithSilent = 'info',
  destination?: DestinationStream,
): Logger {
  const options = {
    name,
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'authorization',
        '*.authorization',
      ],
      censor: '[redacted]',
    },
    serializers: { err: loggedError },
  }
  return destination === undefined ? pino(options) : pino(options, destination)
}
