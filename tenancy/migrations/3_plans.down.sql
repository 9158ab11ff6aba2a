DELETE FROM plans WHERE name IN ('free', 'standard', 'enterprise');
