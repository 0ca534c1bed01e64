// Structured JSON logs (pino) for both processes. Credentials never reach a log line: the
// Authorization header is redacted wherever it appears.
import { pino, type Logger, type LevelWithSilent } from 'pino'

export type { Logger }

export function createLogger(name: string, level: LevelWithSilent = 'info'): Logger {
  return pino({
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
  })
}
