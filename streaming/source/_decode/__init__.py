"""Internal: the Spark SQL of :func:`streaming.source.decode.decode`, one module per format."""
