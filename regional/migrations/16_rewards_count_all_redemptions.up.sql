-- rewards.redeemed counts every reward's standing redemptions, with or
-- without a stock, so that the rewards package reads its own column instead
-- of counting the loyalty package's redemptions on every read.
UPDATE rewards SET redeemed = (SELECT count(*) FROM redemptions r
    WHERE r.project_id = rewards.project_id AND r.reward_id = rewards.id AND r.status = 'SUCCEEDED');
