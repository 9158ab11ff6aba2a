-- The loyalty cards' codes enter the registry of codes (23): from now on a
-- voucher cannot take a card's code, nor a card a voucher's.
INSERT INTO voucher_codes (project_id, code, voucher_id)
SELECT project_id, code, id FROM loyalty_cards
ON CONFLICT (project_id, code) DO NOTHING;
