"""Text for people: findings, job results, numbers, and cleaning text read from run files."""
