DROP INDEX outbox_erasing;
