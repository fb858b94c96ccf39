"""Chat memory: conversations that last across runs and processes, keyed by session id.

`SessionMemory` (windows by turns and tokens, optional summaries) over a `SessionStore`:
`InProcessStore`, `SQLiteStore`, and by URL (`store_from_url`) PostgreSQL and Redis, whose
modules (`postgres_store`, `redis_store`) import their drivers only when used.
"""

from ._private import private_sqlite_file
from ._read_only import read_only_sqlite
from .base import (
    ChatMemory,
    History,
    SessionInfo,
    SessionStore,
    SharedStore,
    StoredTurn,
    Summary,
    store_key,
)
from .in_process import InProcessStore
from .session_locks import OnWait
from .session_memory import DEFAULT_TURNS, SessionMemory
from .sqlite_store import SQLiteStore
from .summary import summarise
from .urls import STORE_URL_FORMS, store_from_url, store_url_problem
from .window import count_tokens, is_valid_history, select_window

__all__ = [
    "DEFAULT_TURNS",
    "STORE_URL_FORMS",
    "ChatMemory",
    "History",
    "InProcessStore",
    "OnWait",
    "SQLiteStore",
    "SessionInfo",
    "SessionMemory",
    "SessionStore",
    "SharedStore",
    "StoredTurn",
    "Summary",
    "count_tokens",
    "is_valid_history",
    "private_sqlite_file",
    "read_only_sqlite",
    "select_window",
    "store_from_url",
    "store_key",
    "store_url_problem",
    "summarise",
]
