// Package products serves the product catalogue: products and their SKUs
// (/v1/products, /v1/products/{productId}/skus, /v1/skus/{skuId}), their
// deletion to the bin or for good (with the bin package: a product goes to
// the bin with its SKUs, kept in binned_skus until it is restored or
// purged), and the asynchronous jobs that change many at once: bulk and
// metadata updates (/v1/products/bulk/async, /v1/products/metadata/async)
// and CSV imports (/v1/products/importCSV, /v1/skus/importCSV; csv.go
// parses them). It owns the products, skus and binned_skus tables.
package products
