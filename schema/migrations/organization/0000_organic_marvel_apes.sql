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
CREATE TABLE `doc_documents` (
	`id` text PRIMARY KEY NOT NULL,
	`updated_at` text NOT NULL,
	`hash` text NOT NULL,
	`body` text NOT NULL,
	`provider_id` text,
	`provider_group_id` text
);
--> statement-breakpoint
CREATE INDEX `doc_documents_page` ON `doc_documents` (`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_documents_provider_page` ON `doc_documents` (`provider_id`,`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_documents_group_page` ON `doc_documents` (`provider_group_id`,`updated_at`,`id`);--> statement-breakpoint
CREATE TABLE `documents` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_id` text,
	`provider_group_id` text,
	`type` text NOT NULL,
	`file_name` text NOT NULL,
	`content_type` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`expires_on` text,
	`uploaded_at` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `documents_provider` ON `documents` (`provider_id`);--> statement-breakpoint
CREATE INDEX `documents_group` ON `documents` (`provider_group_id`);--> statement-breakpoint
CREATE TABLE `doc_enrollments` (
	`id` text PRIMARY KEY NOT NULL,
	`updated_at` text NOT NULL,
	`hash` text NOT NULL,
	`body` text NOT NULL,
	`provider_id` text NOT NULL,
	`status` text NOT NULL,
	`payer_key` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `doc_enrollments_page` ON `doc_enrollments` (`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_enrollments_provider_page` ON `doc_enrollments` (`provider_id`,`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_enrollments_status_page` ON `doc_enrollments` (`status`,`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_enrollments_payer_page` ON `doc_enrollments` (`payer_key`,`updated_at`,`id`);--> statement-breakpoint
CREATE TABLE `enrollment_lines_of_business` (
	`id` text PRIMARY KEY NOT NULL,
	`enrollment_id` text NOT NULL,
	`line_of_business` text NOT NULL,
	`status` text NOT NULL,
	`effective_date` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `enrollment_lines_of_business_enrollment` ON `enrollment_lines_of_business` (`enrollment_id`);--> statement-breakpoint
CREATE TABLE `enrollment_location_participations` (
	`id` text PRIMARY KEY NOT NULL,
	`enrollment_id` text NOT NULL,
	`service_location_id` text NOT NULL,
	`is_active` integer NOT NULL,
	`activated_on` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `enrollment_location_participations_enrollment` ON `enrollment_location_participations` (`enrollment_id`);--> statement-breakpoint
CREATE INDEX `enrollment_location_participations_location` ON `enrollment_location_participations` (`service_location_id`);--> statement-breakpoint
CREATE TABLE `enrollment_requirements` (
	`id` text PRIMARY KEY NOT NULL,
	`enrollment_id` text NOT NULL,
	`position` integer NOT NULL,
	`name` text NOT NULL,
	`is_complete` integer NOT NULL,
	`completed_at` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `enrollment_requirements_enrollment` ON `enrollment_requirements` (`enrollment_id`);--> statement-breakpoint
CREATE TABLE `enrollments` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_id` text NOT NULL,
	`provider_group_id` text,
	`payer` text NOT NULL,
	`state` text,
	`status` text NOT NULL,
	`payer_provider_id` text,
	`submitted_on` text,
	`approved_on` text,
	`effective_date` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `enrollments_provider` ON `enrollments` (`provider_id`);--> statement-breakpoint
CREATE TABLE `doc_expirables` (
	`id` text PRIMARY KEY NOT NULL,
	`source_type` text NOT NULL,
	`source_id` text NOT NULL,
	`expires_on` text NOT NULL,
	`updated_at` text NOT NULL,
	`hash` text NOT NULL,
	`body` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `doc_expirables_page` ON `doc_expirables` (`expires_on`,`source_type`,`source_id`);--> statement-breakpoint
CREATE TABLE `doc_group_enrollments` (
	`id` text PRIMARY KEY NOT NULL,
	`updated_at` text NOT NULL,
	`hash` text NOT NULL,
	`body` text NOT NULL,
	`provider_group_id` text NOT NULL,
	`status` text NOT NULL,
	`payer_key` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `doc_group_enrollments_page` ON `doc_group_enrollments` (`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_group_enrollments_group_page` ON `doc_group_enrollments` (`provider_group_id`,`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_group_enrollments_status_page` ON `doc_group_enrollments` (`status`,`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_group_enrollments_payer_page` ON `doc_group_enrollments` (`payer_key`,`updated_at`,`id`);--> statement-breakpoint
CREATE TABLE `group_enrollment_lines_of_business` (
	`id` text PRIMARY KEY NOT NULL,
	`group_enrollment_id` text NOT NULL,
	`line_of_business` text NOT NULL,
	`status` text NOT NULL,
	`effective_date` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `group_enrollment_lines_of_business_enrollment` ON `group_enrollment_lines_of_business` (`group_enrollment_id`);--> statement-breakpoint
CREATE TABLE `group_enrollments` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_group_id` text NOT NULL,
	`payer` text NOT NULL,
	`state` text,
	`status` text NOT NULL,
	`payer_group_id` text,
	`submitted_on` text,
	`approved_on` text,
	`effective_date` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `group_enrollments_group` ON `group_enrollments` (`provider_group_id`);--> statement-breakpoint
CREATE TABLE `group_identifiers` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_group_id` text NOT NULL,
	`type` text NOT NULL,
	`value` text NOT NULL,
	`issued_on` text,
	`expires_on` text,
	`metadata` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `group_identifiers_group` ON `group_identifiers` (`provider_group_id`);--> statement-breakpoint
CREATE TABLE `group_memberships` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_id` text NOT NULL,
	`provider_group_id` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `group_memberships_provider` ON `group_memberships` (`provider_id`);--> statement-breakpoint
CREATE INDEX `group_memberships_group` ON `group_memberships` (`provider_group_id`);--> statement-breakpoint
CREATE TABLE `doc_providers` (
	`id` text PRIMARY KEY NOT NULL,
	`updated_at` text NOT NULL,
	`hash` text NOT NULL,
	`body` text NOT NULL,
	`sensitive_updated_at` text NOT NULL,
	`sensitive_hash` text NOT NULL,
	`sensitive_body` text NOT NULL,
	`is_active` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `doc_providers_page` ON `doc_providers` (`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_providers_sensitive_page` ON `doc_providers` (`sensitive_updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_providers_active_page` ON `doc_providers` (`is_active`,`updated_at`,`id`);--> statement-breakpoint
CREATE INDEX `doc_providers_active_sensitive_page` ON `doc_providers` (`is_active`,`sensitive_updated_at`,`id`);--> statement-breakpoint
CREATE TABLE `doc_provider_groups` (
	`id` text PRIMARY KEY NOT NULL,
	`updated_at` text NOT NULL,
	`hash` text NOT NULL,
	`body` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `doc_provider_groups_page` ON `doc_provider_groups` (`updated_at`,`id`);--> statement-breakpoint
CREATE TABLE `provider_groups` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`legal_name` text,
	`npi` text,
	`tin` text,
	`taxonomy_code` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `provider_identifiers` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_id` text NOT NULL,
	`type` text NOT NULL,
	`value` text NOT NULL,
	`issued_on` text,
	`expires_on` text,
	`metadata` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `provider_identifiers_provider` ON `provider_identifiers` (`provider_id`);--> statement-breakpoint
CREATE TABLE `providers` (
	`id` text PRIMARY KEY NOT NULL,
	`first_name` text,
	`middle_name` text,
	`last_name` text,
	`suffix` text,
	`npi` text NOT NULL,
	`is_active` integer NOT NULL,
	`telehealth_services` integer NOT NULL,
	`type` text,
	`caqh_id` text,
	`start_date` text,
	`termed_date` text,
	`taxonomy_code` text,
	`specialty` text,
	`specialty_taxonomy_code` text,
	`secondary_specialty` text,
	`secondary_specialty_taxonomy_code` text,
	`additional_specialty_1` text,
	`additional_specialty_1_taxonomy_code` text,
	`additional_specialty_2` text,
	`additional_specialty_2_taxonomy_code` text,
	`additional_specialty_3` text,
	`additional_specialty_3_taxonomy_code` text,
	`additional_specialty_4` text,
	`additional_specialty_4_taxonomy_code` text,
	`additional_specialty_5` text,
	`additional_specialty_5_taxonomy_code` text,
	`billing_address` text,
	`billing_address_line_2` text,
	`billing_city` text,
	`billing_state` text,
	`billing_zip` text,
	`personal_address` text,
	`personal_address_line_2` text,
	`personal_city` text,
	`personal_county` text,
	`personal_state` text,
	`personal_zip` text,
	`personal_email` text,
	`personal_fax` text,
	`personal_phone` text,
	`other_emails` text NOT NULL,
	`languages` text NOT NULL,
	`medicaid_participation` text,
	`medicare_participation` text,
	`medicaid_states` text NOT NULL,
	`medicare_states` text NOT NULL,
	`birth_city` text,
	`birth_country` text,
	`date_of_birth` text,
	`ethnicity` text,
	`ethnicity_detail` text,
	`gender` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `replica_meta` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `service_locations` (
	`id` text PRIMARY KEY NOT NULL,
	`provider_group_id` text NOT NULL,
	`name` text NOT NULL,
	`address` text,
	`address_line_2` text,
	`city` text,
	`state` text,
	`zip` text,
	`phone` text,
	`is_primary` integer NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`source_lsn` integer NOT NULL,
	`from_snapshot` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `service_locations_group` ON `service_locations` (`provider_group_id`);