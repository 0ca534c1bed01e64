CREATE TABLE `organization_files` (
	`organization_id` text PRIMARY KEY NOT NULL,
	`file` text NOT NULL
);
