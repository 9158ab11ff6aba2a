UPDATE rewards SET redeemed = redeemed + COALESCE((SELECT sum(c.n) FROM reward_redemption_counts c
    WHERE c.project_id = rewards.project_id AND c.reward_id = rewards.id), 0);
DROP TABLE reward_redemption_counts;
