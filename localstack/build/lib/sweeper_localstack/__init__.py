"""LocalStack extension used by sweeper's integration tests and demo."""
