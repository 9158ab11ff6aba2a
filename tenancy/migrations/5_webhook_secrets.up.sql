-- The projects made before 4 get a webhook secret.
UPDATE projects SET webhook_secret = 'whsec_' || md5(random()::TEXT || id) WHERE webhook_secret = '';
