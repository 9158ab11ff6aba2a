UPDATE rewards SET redeemed = redeemed + COALESCE((SELECT sum(c.n) FROM reward_redemption_counts c
    WHERE c.project_id = rewards.project_id AND c.reward_id = rewards.id), 0);
-- Zeroed, so that 48 applied again counts nothing twice.
UPDATE reward_redemption_counts SET n = 0 WHERE n <> 0;
