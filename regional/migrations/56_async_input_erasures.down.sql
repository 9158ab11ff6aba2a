DROP TABLE async_input_erasures;
