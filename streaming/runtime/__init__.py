"""The runtime wing of the job (docs/architecture.md)."""
