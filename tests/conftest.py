"""Settings every test process and the jobs it starts share.

The suite's Spark batches hold tens of rows: its local sessions interpret expressions
instead of compiling them (``streaming.session_conf.SMALL_BATCH_CONF``). Set in the
environment, so the jobs the tests start as processes of their own (the kill test, the
fault suite) run the same way; a value already there is kept.
"""

from __future__ import annotations

import os

from streaming.session_conf import ENV_CONF, SMALL_BATCH_CONF

os.environ.setdefault(ENV_CONF, " ".join(f"{k}={v}" for k, v in SMALL_BATCH_CONF.items()))
