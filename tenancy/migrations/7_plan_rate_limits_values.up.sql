-- The limits of the plans (6).
UPDATE plans SET requests_per_minute = 100, requests_per_hour = 1000 WHERE name = 'free';
UPDATE plans SET requests_per_minute = 2000, requests_per_hour = 100000 WHERE name = 'standard';
