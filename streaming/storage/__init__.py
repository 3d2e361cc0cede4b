"""The storage wing of the job (docs/architecture.md)."""
