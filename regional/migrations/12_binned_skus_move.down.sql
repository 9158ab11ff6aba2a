INSERT INTO skus (project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
    created_at, updated_at, bin_id)
SELECT project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
    created_at, updated_at, bin_id
FROM binned_skus;
DELETE FROM binned_skus WHERE bin_id IS NOT NULL;
