// An organization file seen as a list order reads it (api/collections.ts `OrderReader`), with the
// text of every statement read through it recorded: what tests of api/list-order.ts check its
// catch-up by (a statement of the order's `all` is a read of the whole list).
import type { OrderReader } from '../../api/collections.ts'
import type { OrganizationFile } from '../../api/store.ts'

export function recording(
  file: OrganizationFile,
  statements: string[] = [],
): { reader: OrderReader; statements: string[] } {
  const reader: OrderReader = {
    rows: (query) => (statements.push(query.sql), file.rows(query)),
    value: (query) => (statements.push(query.sql), file.value(query)),
    snapshot: (read) => file.snapshot(read),
    dataVersion: () => file.dataVersion(),
  }
  return { reader, statements }
}
