"""The fs wing of the job (docs/architecture.md)."""
