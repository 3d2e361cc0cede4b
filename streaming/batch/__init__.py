"""The batch wing of the job (docs/architecture.md)."""
