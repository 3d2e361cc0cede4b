"""The sql wing of the job (docs/architecture.md)."""
