-- The binned SKUs move to binned_skus (11).
INSERT INTO binned_skus (project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
    created_at, updated_at, bin_id)
SELECT project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
    created_at, updated_at, bin_id
FROM skus WHERE bin_id IS NOT NULL;
DELETE FROM skus WHERE bin_id IS NOT NULL;
