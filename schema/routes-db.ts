// Tables of the routing index's file (`routes.db`, beside control.db): which organization each
// source row belongs to, so that a delete carrying only its key reaches the row's file. A file of
// its own so that one thread keeps it while another keeps control.db (projector/lanes/route-thread.ts):
// SQLite lets one writer at a time into a file. Until 2026-11-30 these tables were control.db's,
// where they stay, empty: a generation's routes move here when the projector first opens it
// (projector/storage/route-file.ts).
export { rowRoutes, routeOrganizations } from './control-db.ts'
