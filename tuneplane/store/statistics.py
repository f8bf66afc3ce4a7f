"""Fresh planner statistics on PostgreSQL even where autovacuum is off.

PostgreSQL picks indexes from table statistics. A table analyzed while it was empty (or
never) looks empty to the planner however many rows it has since gained, and lookups that
should take one index probe scan a whole run instead: a round of 100,000 trial results then
loads in quadratic time. Autovacuum keeps statistics fresh, but it can be switched off. When
it is, this thread does its analyze part for tuneplane's tables, with autovacuum's default
rule: a table is analyzed once more than 50 rows + 10 % of it changed since the last time.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from sqlalchemy import Engine, text

from tuneplane.store.errors import StoreUnavailable
from tuneplane.store.schema import metadata

log = logging.getLogger("tuneplane.store")

#: Seconds between two looks at the tables' change counters.
CHECK_INTERVAL: Final = 5.0

_STALE = text(
    "SELECT relname FROM pg_stat_user_tables "
    "WHERE relname = ANY(:tables) AND n_mod_since_analyze > 50 + 0.1 * n_live_tup"
)


class StatisticsKeeper:
    def __init__(self, engine: Engine, interval: float = CHECK_INTERVAL) -> None:
        self._engine = engine
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tuneplane-analyze", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join()

    def analyze_stale(self) -> list[str]:
        """Analyze the tables whose statistics are stale; returns their names."""
        tables = [table.name for table in metadata.sorted_tables]
        with self._engine.connect() as connection:
            stale = list(connection.execute(_STALE, {"tables": tables}).scalars())
            for name in stale:
                connection.exec_driver_sql(f'ANALYZE "{name}"')
            connection.commit()
        return stale

    def _run(self) -> None:
        try:
            with self._engine.connect() as connection:
                autovacuum = connection.exec_driver_sql("SHOW autovacuum").scalar_one()
        except Exception:
            log.exception("could not read PostgreSQL's autovacuum setting")
            return
        if autovacuum == "on":
            return  # PostgreSQL keeps its statistics itself
        while not self._stopped.wait(self._interval):
            try:
                self.analyze_stale()
            except StoreUnavailable:
                continue  # the outage is logged once, by the engine; try again later
            except Exception:
                log.exception("analyzing tables with stale statistics failed")
