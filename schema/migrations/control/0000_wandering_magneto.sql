CREATE TABLE `api_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`organization_id` text NOT NULL,
	`name` text NOT NULL,
	`key_hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` text,
	`revoked_at` text,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_keys_key_hash_unique` ON `api_keys` (`key_hash`);--> statement-breakpoint
CREATE INDEX `api_keys_organization` ON `api_keys` (`organization_id`);--> statement-breakpoint
CREATE TABLE `applied_offsets` (
	`topic` text NOT NULL,
	`partition` integer NOT NULL,
	`offset` integer NOT NULL,
	PRIMARY KEY(`topic`, `partition`)
);
--> statement-breakpoint
CREATE TABLE `deleted_rows` (
	`source_table` text NOT NULL,
	`id` text NOT NULL,
	`source_lsn` integer NOT NULL,
	PRIMARY KEY(`source_table`, `id`)
);
--> statement-breakpoint
CREATE TABLE `organizations` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`api_enabled` integer NOT NULL,
	`billing_status` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `replica_state` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `row_routes` (
	`source_table` text NOT NULL,
	`id` text NOT NULL,
	`organization_id` text NOT NULL,
	PRIMARY KEY(`source_table`, `id`)
);
