UPDATE plans SET requests_per_minute = 0, requests_per_hour = 0 WHERE name IN ('free', 'standard');
