CREATE TABLE `file_organizations` (
	`key` integer PRIMARY KEY NOT NULL,
	`organization_id` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `file_organizations_organization_id_unique` ON `file_organizations` (`organization_id`);--> statement-breakpoint
ALTER TABLE `doc_documents` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `documents` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `doc_enrollments` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `enrollment_lines_of_business` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `enrollment_location_participations` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `enrollment_requirements` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `enrollments` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `doc_expirables` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `doc_group_enrollments` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `group_enrollment_lines_of_business` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `group_enrollments` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `group_identifiers` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `group_memberships` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `doc_providers` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `doc_provider_groups` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `provider_groups` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `provider_identifiers` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `providers` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `service_locations` ADD `organization_key` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
INSERT INTO `file_organizations` (`key`, `organization_id`) SELECT 1, `value` FROM `replica_meta` WHERE `key` = 'organization_id';
