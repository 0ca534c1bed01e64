// Each request's logger (`request.log`, bound to its reqId), made only when the request logs.
//
// Fastify makes a pino child per request before any handler runs. With the redaction paths of
// src/log.ts (a wildcard among them), making a child costs more than a cached list page's own
// work: a formatter object, the bindings run through the redaction, and about a tenth of what
// such a request allocates. Most requests log nothing below the configured level (`warn` in
// production-like settings, or no error at all), so the child is made on the first log call at
// an enabled level: the same `parent.child(bindings, options)` call, the same lines.
import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions, Logger } from 'pino'

type Method = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'

export class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger & Partial<Pick<Logger, 'isLevelEnabled'>>
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: FastifyBaseLogger | undefined

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  /** The pino child, made on first use. */
  get #logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options)
    return this.#child
  }

  get level(): string {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level
  }

  set level(level: string) {
    this.#logger.level = level
  }

  // A call at a disabled level is a no-op in pino: it need not make the child. Methods on the
  // prototype, not arrow fields: an instance is made per request and must stay small.
  #log(method: Method, args: unknown[]): void {
    const parent = this.#parent
    if (this.#child === undefined && this.#options.level === undefined) {
      if (parent.isLevelEnabled !== undefined && !parent.isLevelEnabled(method)) return
    }
    const logger = this.#logger
    Reflect.apply(logger[method], logger, args)
  }

  fatal(...args: unknown[]): void {
    this.#log('fatal', args)
  }
  error(...args: unknown[]): void {
    this.#log('error', args)
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args)
  }
  info(...args: unknown[]): void {
    this.#log('info', args)
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args)
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args)
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options)
  }
}
