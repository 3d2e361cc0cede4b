"""The file spark-submit runs; the job itself comes from the shardmerge wheel (--py-files).

spark-submit needs a Python file as its application (it has no ``-m``); this one only hands
over to ``streaming.job``, which takes the session Spark gives it (docs/cluster.md).
"""

import sys

from streaming.job import main

sys.exit(main())
