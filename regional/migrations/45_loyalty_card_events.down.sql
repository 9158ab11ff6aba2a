DROP TABLE loyalty_card_events;
