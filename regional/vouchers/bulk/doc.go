// Package bulk serves the voucher jobs of the interface's background-task
// table: imports of vouchers (a JSON array or a CSV file, standalone or
// into a campaign, POST /v1/vouchers/import[CSV] and
// /v1/campaigns/{campaignId}/import[CSV]) and bulk metadata updates
// (/v1/vouchers/bulk/async, /v1/vouchers/metadata/async). It holds the
// jobs' machinery: the input read once, CSV rows made voucher objects,
// chunks written one transaction each with the job's checkpoint, and the
// rows that fail reported. What a voucher is, and every statement on the
// vouchers tables, stay regional/vouchers', which this package is built on
// (vouchers.Imported, InsertMany, Locked, QueueAttrs).
package bulk
