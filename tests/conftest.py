"""Test-wide setup: a private, empty disk cache, so tests never touch ~/.cache/symdiff."""

import os
import tempfile

os.environ["SYMDIFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="symdiff-cache-")
