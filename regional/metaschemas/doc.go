// Package metaschemas checks the metadata a write sends against the
// project's metadata schema for its resource (the schemas live in the
// directory, managed through the management API and read here through the
// tenancy resolver's cache), and serves them read-only to application keys
// (GET /v1/metadata-schemas). Every domain package that writes metadata
// is given a Checker as its MetadataSchemas hook.
package metaschemas
