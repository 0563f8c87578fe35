"""The fixtures of tests/celery; they are defined, with the helpers the tests use, in celery_support.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from celery_support import module_store, open_store, postgres_server, redis_server  # noqa: F401
