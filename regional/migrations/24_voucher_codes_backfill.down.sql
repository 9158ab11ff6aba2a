DELETE FROM voucher_codes WHERE voucher_id IN (SELECT id FROM loyalty_cards);
