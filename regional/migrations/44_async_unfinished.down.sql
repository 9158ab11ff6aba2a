DROP INDEX async_actions_unfinished;
