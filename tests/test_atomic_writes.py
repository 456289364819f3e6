"""Multi-step writes are one transaction (issue 17, defect 7): a failure at any step leaves
nothing behind. Faults are injected by the database itself (a trigger that aborts one
statement), so the real stores and their real transactions are what is tested."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import pysqlite3.dbapi2 as sqlite3
import pytest

from memento.models import AmendInput, CallContext, ReflectInput, RememberInput, TaskEffectiveness
from memento.service import MemoryService
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")


@runtime_checkable
class TaskFeedbackReader(Protocol):
    """The stores' read-back of reflect's task feedback, which is outside the Store protocol."""

    def task_feedback(self, session_id: str) -> list[dict[str, object]]: ...


SQLITE_TRIGGER = "CREATE TRIGGER injected_fault BEFORE {event} ON fragments WHEN {when} BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION agent_memory.injected_fault() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$"
)
PG_TRIGGER = (
    "CREATE TRIGGER injected_fault BEFORE {event} ON agent_memory.fragments FOR EACH ROW"
    " WHEN ({when}) EXECUTE FUNCTION agent_memory.injected_fault()"
)


@contextmanager
def fault(settings: Settings, request: pytest.FixtureRequest, event: str, when: str) -> Iterator[None]:
    """While inside, the database aborts any `event` on a fragment row matching `when`."""
    if settings.backend == "sqlite":
        path = settings.database_url.removeprefix("sqlite:///")
        with sqlite3.connect(path, isolation_level=None) as conn:
            conn.execute(SQLITE_TRIGGER.format(event=event, when=when))
        try:
            yield
        finally:
            with sqlite3.connect(path, isolation_level=None) as conn:
                conn.execute("DROP TRIGGER injected_fault")
        return
    import psycopg

    owner = request.getfixturevalue("postgres_server").owner_dsn
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(PG_FUNCTION)
        conn.execute(PG_TRIGGER.format(event=event, when=when))
    try:
        yield
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("DROP TRIGGER injected_fault ON agent_memory.fragments")


def contents(service: MemoryService, ctx: CallContext) -> set[str]:
    return {f.content for f in service.store.list_fragments(service._scope(None, ctx), _everything(), 1000)}


def _everything() -> Any:
    from memento.storage.protocol import SearchFilter

    return SearchFilter()


def test_a_reflect_that_fails_half_way_stores_none_of_its_fragments(
    service: MemoryService, ctx: CallContext, settings: Settings, request: pytest.FixtureRequest
) -> None:
    inp = ReflectInput(
        summary="the deploy took an hour",
        decisions=["pin the base image"],
        errorsResolved=["BOOM: the cache was stale"],
        taskEffectiveness=TaskEffectiveness(overallSuccess=True),
    )
    with fault(settings, request, "INSERT", "NEW.content LIKE '%BOOM%'"), pytest.raises(Exception):  # noqa: B017 - the driver's error, whichever backend
        service.reflect(inp, ctx)
    assert contents(service, ctx) == set()
    store = service.store
    assert isinstance(store, TaskFeedbackReader)  # both stores have it; the Store protocol does not
    assert store.task_feedback("unspecified") == []
    # and without the fault, the same reflect stores all of it
    result = service.reflect(inp, ctx)
    assert result.count == 3 and len(contents(service, ctx)) == 3
    assert all(f.source == "reflect" for f in service.store.get_many(service._scope(None, ctx), [i.id for i in result.fragments]))


def test_a_supersede_that_fails_at_its_last_step_leaves_no_successor_and_no_edge(
    service: MemoryService, ctx: CallContext, settings: Settings, request: pytest.FixtureRequest
) -> None:
    old = service.remember(RememberInput(content="staging runs on port 5432", topic="db", type="fact"), ctx).id
    amend = AmendInput(id=old, content="staging runs on port 5433", supersedes=True)
    # The last step lowers the original's importance: abort exactly that update.
    with fault(settings, request, "UPDATE", "NEW.importance < OLD.importance"), pytest.raises(Exception):  # noqa: B017 - the driver's error
        service.amend(amend, ctx)
    assert contents(service, ctx) == {"staging runs on port 5432"}
    assert service.store.neighbours(service._scope(None, ctx), [old], list(_relations()), 10) == []
    done = service.amend(amend, ctx)
    assert done.superseded_id == old and done.original is not None and done.original.importance < 0.5 + 1e-9


def _relations() -> Any:
    from memento.models import RelationType

    return tuple(RelationType)


def test_reflect_never_writes_the_session_id_into_shared_data(service: MemoryService) -> None:
    operator = CallContext(session_id="operator-session-7f3a")
    result = service.reflect(ReflectInput(summary="a summary others may read", sessionId="operator-session-7f3a"), operator)
    stored = service.store.get_many(service._scope(None, operator), [result.fragments[0].id])[0]
    assert "operator-session-7f3a" not in (stored.source or "")
