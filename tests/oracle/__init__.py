"""The test oracle: a pure-Python reference decoder of the three CDC formats.

Only tests use it. The job decodes in the JVM (``streaming/_decode``); the integration
tests run this decoder on the very bytes Spark read and compare the two rule for rule.
"""
