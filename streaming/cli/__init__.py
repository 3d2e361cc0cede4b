"""The cli wing of the job (docs/architecture.md)."""
