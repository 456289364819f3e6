"""The entity graph on PostgreSQL (the EntityStore protocol, 001 §2.2-§2.4). Each call is one
transaction in the caller's row-level security context (migration 0007: an agent sees only its own
entities, relations and associations; the maintenance agents see all), and every statement also
carries the owning agent, as the fragment queries carry their scope. Names are unique per agent
by their case-folded key (graph.name_key); the foreign keys delete an entity's relations and associations with it, and a
fragment's associations with the fragment."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ..errors import Conflict, InvalidArgument, NotFound
from ..graph import (
    UNKNOWN_TYPE,
    Entity,
    EntityChanges,
    EntityLink,
    NewEntity,
    NewRelation,
    Relation,
    clean_entity_name,
    name_key,
    unit_value,
)
from ..models import AgentScope
from .postgres_db import Cursor, PostgresDatabase, retried
from .postgres_rows import _visible
from .postgres_sql import scope_sql

_ENTITY = (
    "SELECT e.id, e.agent_id, e.name, e.name_key, e.entity_type, e.description, e.metadata, e.created_at, e.updated_at, e.embedding_model,"
    " e.embedding IS NOT NULL AS embedded FROM agent_memory.entities e"
)
_RELATION = (
    "SELECT r.*, s.name AS source_name, t.name AS target_name FROM agent_memory.relations r"
    " JOIN agent_memory.entities s ON s.id = r.source_id JOIN agent_memory.entities t ON t.id = r.target_id"
)


def _owner(scope: AgentScope, alias: str) -> tuple[str, list[Any]]:
    """The rows of the scope's agent (every agent's for the maintenance scope), as RLS decides too."""
    if scope.is_maintenance:
        return "TRUE", []
    return f"{alias}.agent_id = %s", [scope.agent_id]


def _relation(r: dict[str, Any]) -> Relation:
    return Relation(
        id=r["id"],
        agent_id=r["agent_id"],
        source_id=r["source_id"],
        target_id=r["target_id"],
        relation_type=r["relation_type"],
        strength=r["strength"],
        confidence=r["confidence"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        context=r["context"],
        metadata=dict(r["metadata"]),
        source_name=r["source_name"],
        target_name=r["target_name"],
    )


class PostgresEntities:
    """EntityStore on the PostgreSQL database; writes are retried when PostgreSQL rolled them back."""

    def __init__(self, db: PostgresDatabase, embedding_model: str | None) -> None:
        self.db = db
        self.embedding_model = embedding_model

    # ------------------------------------------------------------ rows

    def _entity(self, r: dict[str, Any]) -> Entity:
        return Entity(
            id=r["id"],
            agent_id=r["agent_id"],
            name=r["name"],
            entity_type=r["entity_type"],
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            description=r["description"],
            metadata=dict(r["metadata"]),
            has_embedding=bool(r["embedded"]) and r["embedding_model"] == self.embedding_model,
        )

    def _vector(self, vector: np.ndarray | None) -> tuple[bytes | None, str | None]:
        if vector is None or self.embedding_model is None:
            return None, None
        return np.ascontiguousarray(vector, dtype=np.float32).tobytes(), self.embedding_model

    def _entities(self, cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> dict[str, Entity]:
        if not ids:
            return {}
        owner, params = _owner(scope, "e")
        cur.execute(f"{_ENTITY} WHERE e.id = ANY(%s) AND {owner}", [list(ids), *params])
        return {r["id"]: self._entity(r) for r in cur.fetchall()}

    def _require_entities(self, cur: Cursor, scope: AgentScope, ids: Sequence[str]) -> dict[str, Entity]:
        wanted = list(dict.fromkeys(ids))
        found = self._entities(cur, scope, wanted)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise NotFound(f"entity not found: {', '.join(missing)}")
        return found

    def _named(self, cur: Cursor, agent: str, name: str) -> Entity | None:
        cur.execute(f"{_ENTITY} WHERE e.agent_id = %s AND e.name_key = %s", (agent, name_key(name)))
        row = cur.fetchone()
        return self._entity(row) if row else None

    # ------------------------------------------------------------ entities

    @retried
    def upsert_entities(self, scope: AgentScope, entities: Sequence[NewEntity], now: datetime) -> list[tuple[Entity, bool]]:
        out: list[tuple[Entity, bool]] = []
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            for new in entities:
                name = clean_entity_name(new.name)
                old = self._named(cur, scope.agent_id, name)
                if old is None and self._create(cur, scope, new, name, now):
                    out.append((self._entities(cur, scope, [new.id])[new.id], True))
                    continue
                old = old or self._named(cur, scope.agent_id, name)  # a concurrent writer created it first
                if old is None:
                    raise Conflict(f"entity id {new.id} is already taken")
                self._merge(cur, old, new, now)
                out.append((self._entities(cur, scope, [old.id])[old.id], False))
        return out

    def _create(self, cur: Cursor, scope: AgentScope, new: NewEntity, name: str, now: datetime) -> bool:
        """Insert the entity; False when its name (or id) is taken."""
        vector, model = self._vector(new.embedding)
        cur.execute(
            "INSERT INTO agent_memory.entities (id, agent_id, name, name_key, entity_type, description, metadata, embedding,"
            " embedding_model, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
            (new.id, scope.agent_id, name, name_key(name), new.entity_type, new.description, Jsonb(new.metadata), vector, model, now, now),
        )
        return cur.fetchone() is not None

    def _merge(self, cur: Cursor, old: Entity, new: NewEntity, now: datetime) -> None:
        """An existing entity meets a new mention: an unknown type takes the given one; a given
        description, metadata (merged shallowly) and embedding replace the stored ones."""
        sets: list[str] = []
        params: list[Any] = []
        if old.entity_type == UNKNOWN_TYPE and new.entity_type != UNKNOWN_TYPE:
            sets.append("entity_type = %s")
            params.append(new.entity_type)
        if new.description is not None and new.description != old.description:
            sets.append("description = %s")
            params.append(new.description)
        if new.metadata:
            sets.append("metadata = %s")
            params.append(Jsonb({**old.metadata, **new.metadata}))
        vector, model = self._vector(new.embedding)
        if vector is not None:
            sets.append("embedding = %s, embedding_model = %s")
            params.extend([vector, model])
        if sets:
            cur.execute(f"UPDATE agent_memory.entities SET {', '.join(sets)}, updated_at = %s WHERE id = %s", [*params, now, old.id])

    def get_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[Entity]:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            found = self._entities(cur, scope, list(ids))
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def entities_named(self, scope: AgentScope, names: Sequence[str]) -> list[Entity]:
        wanted = list(dict.fromkeys(name_key(n) for n in names if n.strip()))
        if not wanted:
            return []
        owner, params = _owner(scope, "e")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT e.*, q.o FROM ({_ENTITY}) e JOIN unnest(CAST(%s AS text[])) WITH ORDINALITY AS q(name_key, o)"
                f" ON e.name_key = q.name_key WHERE {owner} ORDER BY q.o, e.agent_id",
                [wanted, *params],
            )
            rows = cur.fetchall()
        seen: set[str] = set()
        out = []
        for r in rows:  # two given spellings of one name find it once
            if r["id"] not in seen:
                seen.add(r["id"])
                out.append(self._entity(r))
        return out

    def list_entities(
        self, scope: AgentScope, *, entity_type: str | None, name_contains: str | None, limit: int, offset: int
    ) -> tuple[list[Entity], int]:
        owner, params = _owner(scope, "e")
        where = [owner]
        if entity_type is not None:
            where.append("e.entity_type = %s")
            params.append(entity_type)
        if name_contains:
            where.append("strpos(e.name_key, %s) > 0")
            params.append(name_key(name_contains))
        cond = " AND ".join(where)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM agent_memory.entities e WHERE {cond}", params)
            total = cur.fetchone()
            cur.execute(f'{_ENTITY} WHERE {cond} ORDER BY e.name_key COLLATE "C", e.seq LIMIT %s OFFSET %s', [*params, limit, offset])
            rows = cur.fetchall()
        return [self._entity(r) for r in rows], int(total["n"]) if total else 0

    @retried
    def update_entity(self, scope: AgentScope, entity_id: str, changes: EntityChanges, now: datetime) -> Entity:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            old = self._require_entities(cur, scope, [entity_id])[entity_id]
            sets: list[str] = []
            params: list[Any] = []
            if changes.name is not None:
                name = clean_entity_name(changes.name)
                clash = self._named(cur, old.agent_id, name)
                if clash is not None and clash.id != old.id:
                    raise Conflict(f"an entity named {name!r} already exists ({clash.id})")
                sets.append("name = %s, name_key = %s")
                params.extend([name, name_key(name)])
            if changes.entity_type is not None:
                sets.append("entity_type = %s")
                params.append(changes.entity_type)
            if changes.description is not None:
                sets.append("description = %s")
                params.append(changes.description)
            if changes.metadata is not None:
                sets.append("metadata = %s")
                params.append(Jsonb(changes.metadata))
            vector, model = self._vector(changes.embedding)
            if vector is not None:
                sets.append("embedding = %s, embedding_model = %s")
                params.extend([vector, model])
            if sets:
                try:
                    cur.execute(
                        f"UPDATE agent_memory.entities SET {', '.join(sets)}, updated_at = %s WHERE id = %s", [*params, now, old.id]
                    )
                except psycopg.errors.UniqueViolation as exc:  # renamed concurrently to the same name
                    raise Conflict(f"an entity named {changes.name!r} already exists") from exc
            return self._entities(cur, scope, [entity_id])[entity_id]

    @retried
    def delete_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        owner, params = _owner(scope, "e")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            # relations and associations go by cascade; fragments stay
            cur.execute(f"DELETE FROM agent_memory.entities e WHERE e.id = ANY(%s) AND {owner} RETURNING e.id", [list(ids), *params])
            found = {r["id"] for r in cur.fetchall()}
        return [i for i in dict.fromkeys(ids) if i in found]

    def entity_vectors(self, scope: AgentScope) -> list[tuple[str, np.ndarray]]:
        if self.embedding_model is None:
            return []
        owner, params = _owner(scope, "e")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT e.id, e.embedding FROM agent_memory.entities e WHERE e.embedding IS NOT NULL AND e.embedding_model = %s"
                f" AND {owner} ORDER BY e.seq",
                [self.embedding_model, *params],
            )
            rows = cur.fetchall()
        return [(r["id"], np.frombuffer(bytes(r["embedding"]), dtype=np.float32).copy()) for r in rows]

    # ------------------------------------------------------------ relations

    @retried
    def upsert_relations(self, scope: AgentScope, relations: Sequence[NewRelation], now: datetime) -> list[tuple[Relation, bool]]:
        out: list[tuple[Relation, bool]] = []
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            ends = self._require_entities(cur, scope, [i for r in relations for i in (r.source_id, r.target_id)])
            for rel in relations:
                agent = ends[rel.source_id].agent_id
                if ends[rel.target_id].agent_id != agent:
                    raise InvalidArgument("a relation joins two entities of the same agent")
                try:
                    cur.execute(
                        "INSERT INTO agent_memory.relations (id, agent_id, source_id, target_id, relation_type, strength, confidence,"
                        " context, metadata, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (source_id, target_id, relation_type) DO UPDATE SET strength = excluded.strength,"
                        " confidence = excluded.confidence, context = excluded.context, metadata = excluded.metadata,"
                        " updated_at = excluded.updated_at RETURNING id, (xmax = 0) AS created",
                        (
                            rel.id,
                            agent,
                            rel.source_id,
                            rel.target_id,
                            rel.relation_type,
                            unit_value("strength", rel.strength),
                            unit_value("confidence", rel.confidence),
                            rel.context,
                            Jsonb(rel.metadata),
                            now,
                            now,
                        ),
                    )
                except psycopg.errors.UniqueViolation as exc:
                    raise Conflict(f"relation id {rel.id} is already taken") from exc
                written = cur.fetchone()
                assert written is not None
                cur.execute(f"{_RELATION} WHERE r.id = %s", (written["id"],))
                row = cur.fetchone()
                assert row is not None
                out.append((_relation(row), bool(written["created"])))
        return out

    def get_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[Relation]:
        if not ids:
            return []
        owner, params = _owner(scope, "r")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"{_RELATION} WHERE r.id = ANY(%s) AND {owner}", [list(ids), *params])
            found = {r["id"]: _relation(r) for r in cur.fetchall()}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def list_relations(
        self, scope: AgentScope, *, entity_id: str | None, relation_type: str | None, limit: int, offset: int
    ) -> tuple[list[Relation], int]:
        owner, params = _owner(scope, "r")
        where = [owner]
        if entity_id is not None:
            where.append("(r.source_id = %s OR r.target_id = %s)")
            params.extend([entity_id, entity_id])
        if relation_type is not None:
            where.append("r.relation_type = %s")
            params.append(relation_type)
        cond = " AND ".join(where)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM agent_memory.relations r WHERE {cond}", params)
            total = cur.fetchone()
            cur.execute(f"{_RELATION} WHERE {cond} ORDER BY r.seq LIMIT %s OFFSET %s", [*params, limit, offset])
            rows = cur.fetchall()
        return [_relation(r) for r in rows], int(total["n"]) if total else 0

    def relations_of(self, scope: AgentScope, entity_ids: Sequence[str], min_strength: float) -> list[Relation]:
        if not entity_ids:
            return []
        owner, params = _owner(scope, "r")
        ids = list(entity_ids)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"{_RELATION} WHERE (r.source_id = ANY(%s) OR r.target_id = ANY(%s)) AND r.strength >= %s AND {owner}"
                " ORDER BY r.strength DESC, r.seq",
                [ids, ids, min_strength, *params],
            )
            return [_relation(r) for r in cur.fetchall()]

    @retried
    def delete_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        owner, params = _owner(scope, "r")
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(f"DELETE FROM agent_memory.relations r WHERE r.id = ANY(%s) AND {owner} RETURNING r.id", [list(ids), *params])
            found = {r["id"] for r in cur.fetchall()}
        return [i for i in dict.fromkeys(ids) if i in found]

    # ------------------------------------------------------------ associations

    @retried
    def link_entities(self, scope: AgentScope, links: Sequence[tuple[str, str, float]], now: datetime) -> int:
        if not links:
            return 0
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            entities = self._require_entities(cur, scope, [e for e, _, _ in links])
            wanted = list(dict.fromkeys(f for _, f, _ in links))
            seen = {f.id for f in _visible(cur, scope, wanted)}
            missing = [f for f in wanted if f not in seen]
            if missing:
                raise NotFound(f"fragment not found: {', '.join(missing)}", missing=missing)
            return _associate(cur, [(entities[e].agent_id, e, f, unit_value("relevance", r)) for e, f, r in links], now)

    def entity_links(self, scope: AgentScope, *, entity_ids: Sequence[str] = (), fragment_ids: Sequence[str] = ()) -> list[EntityLink]:
        """Associations of the given entities and/or fragments (both given: pairs of the two), live fragments only."""
        if not entity_ids and not fragment_ids:
            return []
        owner, params = _owner(scope, "em")
        visible, vparams = scope_sql(scope)
        where = [owner, visible]
        params.extend(vparams)
        if entity_ids:
            where.append("em.entity_id = ANY(%s)")
            params.append(list(entity_ids))
        if fragment_ids:
            where.append("em.fragment_id = ANY(%s)")
            params.append(list(fragment_ids))
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                "SELECT em.entity_id, em.fragment_id, em.relevance, em.created_at FROM agent_memory.entity_memories em"
                f" JOIN agent_memory.fragments f ON f.id = em.fragment_id WHERE {' AND '.join(where)}"
                " ORDER BY em.relevance DESC, em.seq",
                params,
            )
            return [EntityLink(r["entity_id"], r["fragment_id"], r["relevance"], r["created_at"]) for r in cur.fetchall()]

    @retried
    def move_entity_links(self, scope: AgentScope, from_fragment: str, to_fragment: str, now: datetime) -> int:
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            if not _visible(cur, scope, [to_fragment]):
                raise NotFound(f"fragment {to_fragment!r} not found", missing=(to_fragment,))
            if from_fragment == to_fragment:
                return 0
            owner, params = _owner(scope, "em")
            cur.execute(
                f"DELETE FROM agent_memory.entity_memories em WHERE em.fragment_id = %s AND {owner}"
                " RETURNING em.agent_id, em.entity_id, em.relevance",
                [from_fragment, *params],
            )
            rows = cur.fetchall()
            _associate(cur, [(r["agent_id"], r["entity_id"], to_fragment, r["relevance"]) for r in rows], now)
        return len(rows)

    def graph_counts(self, scope: AgentScope) -> dict[str, int]:
        e_owner, e_params = _owner(scope, "e")
        r_owner, r_params = _owner(scope, "r")
        m_owner, m_params = _owner(scope, "em")
        visible, vparams = scope_sql(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            cur.execute(
                f"SELECT (SELECT COUNT(*) FROM agent_memory.entities e WHERE {e_owner}) AS entities,"
                f" (SELECT COUNT(*) FROM agent_memory.relations r WHERE {r_owner}) AS relations,"
                " (SELECT COUNT(*) FROM agent_memory.entity_memories em JOIN agent_memory.fragments f ON f.id = em.fragment_id"
                f" WHERE {m_owner} AND {visible}) AS links",
                [*e_params, *r_params, *m_params, *vparams],
            )
            row = cur.fetchone() or {}
        return {k: int(row.get(k, 0)) for k in ("entities", "relations", "links")}


def _associate(cur: Cursor, rows: Sequence[tuple[str, str, str, float]], now: datetime) -> int:
    """Insert (agent, entity, fragment, relevance) rows; a repeated pair keeps the higher relevance. How many were new."""
    new = 0
    for agent, entity_id, fragment_id, relevance in rows:
        cur.execute(
            "INSERT INTO agent_memory.entity_memories (agent_id, entity_id, fragment_id, relevance, created_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (entity_id, fragment_id)"
            " DO UPDATE SET relevance = GREATEST(agent_memory.entity_memories.relevance, excluded.relevance)"
            " RETURNING (xmax = 0) AS created",
            (agent, entity_id, fragment_id, relevance, now),
        )
        written = cur.fetchone()
        new += bool(written and written["created"])
    return new
