"""The group wing of the job (docs/architecture.md)."""
