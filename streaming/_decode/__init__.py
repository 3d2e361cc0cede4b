"""Internal: the Spark SQL of :func:`streaming.decode.decode`, one module per format."""
