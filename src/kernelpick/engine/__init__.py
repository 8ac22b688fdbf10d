"""The tuning engine: one way from a key's choices to a stored pick, for every front."""
