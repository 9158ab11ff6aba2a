-- The vouchers of a publication of several (POST /v1/publications with
-- campaign.count above 1): one publication row, answered with the
-- reference's vouchers and vouchers_id, whose voucher_id and voucher_code
-- are NULL; its vouchers are here, one row each, in the order given. The
-- index finds a voucher's publications (the list's voucher filter,
-- publish.count).
CREATE TABLE publication_vouchers (
    project_id     TEXT NOT NULL,
    publication_id TEXT NOT NULL,
    position       INT8 NOT NULL,
    voucher_id     TEXT NOT NULL,
    voucher_code   TEXT NOT NULL,
    PRIMARY KEY (project_id, publication_id, position) {{hash_sharded}}
);
CREATE INDEX publication_vouchers_by_voucher ON publication_vouchers (project_id, voucher_code, publication_id);
