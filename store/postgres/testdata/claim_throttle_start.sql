-- claim_throttle_start: rendered by TestClaimSQLGolden (-update rewrites it); do not edit.
UPDATE throttle_starts SET at = $4
	WHERE subscription_id = ANY($1) AND at >= $3 AND at < $4 AND delivery_id = ANY($2);
