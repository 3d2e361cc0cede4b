"""The source wing of the job (docs/architecture.md)."""
