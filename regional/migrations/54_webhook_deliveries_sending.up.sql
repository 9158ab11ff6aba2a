-- Until when a delivery is sending its body: set, and committed, before it
-- reads its payload afresh for erasures (webhooks.Service.deliver), cleared
-- with its attempt's record. A permanent deletion waits for the deliveries
-- of its project that were marked before it committed (AwaitSends), so that
-- none sends the customer's data once it has answered DONE.
ALTER TABLE webhook_deliveries ADD COLUMN sending_until TIMESTAMPTZ NULL;
