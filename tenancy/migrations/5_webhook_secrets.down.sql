-- Nothing to undo: the secrets go with their column (4's down).
SELECT 1;
