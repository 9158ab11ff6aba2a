// Package products serves the product catalogue: products and their SKUs
// (/v1/products, /v1/products/{productId}/skus, /v1/skus/{skuId}), their
// deletion to the bin or for good, and the asynchronous jobs that change
// many at once: bulk and metadata updates (/v1/products/bulk/async,
// /v1/products/metadata/async) and CSV imports (/v1/products/importCSV,
// /v1/skus/importCSV; csv.go parses them).
//
// A product or a SKU deleted without force goes to the bin (regional/bin),
// a product with its SKUs: a product stays in products marked with its
// bin entry, a SKU moves to binned_skus, and nothing brings them back
// (the bin has no restore). They leave for good
// when the bin removes the entry (DELETE /v1/trash-bin/{binEntryId} or the
// retention sweep), through RemoveBinnedProduct and RemoveBinnedSKU, the
// bin's Removers. It owns the products, skus and binned_skus tables, and
// gives exports their objects (ExportSources).
package products
