"""The README's and docs' spark-submit commands keep the object store's keys off the
command line (a command line is visible to every user of the machine through ``ps``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "docs/cluster.md"])
def test_no_spark_submit_passes_a_secret_as_an_argument(doc: str) -> None:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S)
    submits = [b for b in blocks if "spark-submit" in b]
    assert submits, f"{doc} has no spark-submit command"
    for block in submits:
        # the command itself: its continuation lines from spark-submit on
        command = block[block.index("spark-submit") :]
        assert not re.search(r"--conf\s+\S*(secret|access)\.key=", command), command
        assert "SECRET" not in command, command
