INSERT INTO skus (project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
    created_at, updated_at, bin_id)
SELECT project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
    created_at, updated_at, bin_id
FROM binned_skus;
DROP TABLE binned_skus;
