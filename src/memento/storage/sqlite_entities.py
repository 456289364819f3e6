"""The entity graph on SQLite (the EntityStore protocol, 001 §2.2-§2.4): entities with names unique
per agent regardless of case (`name_key`), relations between them, their associations with
fragments. Every statement carries the owning agent (all agents for the maintenance scope); the
foreign keys (PRAGMA foreign_keys = ON on every connection) delete an entity's relations and
associations with it, and a fragment's associations with the fragment."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pysqlite3.dbapi2 as sqlite3

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
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _scope_sql, _visible, ts

_ENTITY = (
    "SELECT e.id, e.agent_id, e.name, e.entity_type, e.description, e.metadata, e.created_at, e.updated_at, e.embedding_model,"
    " e.embedding IS NOT NULL AS embedded FROM entities e"
)
_RELATION = (
    "SELECT r.*, s.name AS source_name, t.name AS target_name FROM relations r"
    " JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"
)


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def _owner(scope: AgentScope, alias: str) -> tuple[str, list[Any]]:
    """The rows of the scope's agent (every agent's for the maintenance scope)."""
    if scope.is_maintenance:
        return "1 = 1", []
    return f"{alias}.agent_id = ?", [scope.agent_id]


class SQLiteEntities:
    """EntityStore on the SQLite database: reads on the calling thread's reader, writes on the writer."""

    def __init__(self, db: SQLiteDatabase, embedding_model: str | None) -> None:
        self.db = db
        self.embedding_model = embedding_model

    # ------------------------------------------------------------ rows

    def _entity(self, r: sqlite3.Row) -> Entity:
        return Entity(
            id=r["id"],
            agent_id=r["agent_id"],
            name=r["name"],
            entity_type=r["entity_type"],
            created_at=_at(r["created_at"]),
            updated_at=_at(r["updated_at"]),
            description=r["description"],
            metadata=json.loads(r["metadata"]),
            has_embedding=bool(r["embedded"]) and r["embedding_model"] == self.embedding_model,
        )

    @staticmethod
    def _relation(r: sqlite3.Row) -> Relation:
        return Relation(
            id=r["id"],
            agent_id=r["agent_id"],
            source_id=r["source_id"],
            target_id=r["target_id"],
            relation_type=r["relation_type"],
            strength=r["strength"],
            confidence=r["confidence"],
            created_at=_at(r["created_at"]),
            updated_at=_at(r["updated_at"]),
            context=r["context"],
            metadata=json.loads(r["metadata"]),
            source_name=r["source_name"],
            target_name=r["target_name"],
        )

    def _vector(self, vector: np.ndarray | None) -> tuple[bytes | None, str | None]:
        if vector is None or self.embedding_model is None:
            return None, None
        return np.ascontiguousarray(vector, dtype=np.float32).tobytes(), self.embedding_model

    def _entities(self, conn: sqlite3.Connection, scope: AgentScope, ids: Sequence[str]) -> dict[str, Entity]:
        if not ids:
            return {}
        owner, params = _owner(scope, "e")
        rows = conn.execute(f"{_ENTITY} WHERE e.id IN ({_marks(ids)}) AND {owner}", [*ids, *params]).fetchall()
        return {r["id"]: self._entity(r) for r in rows}

    def _require_entities(self, conn: sqlite3.Connection, scope: AgentScope, ids: Sequence[str]) -> dict[str, Entity]:
        found = self._entities(conn, scope, list(dict.fromkeys(ids)))
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            raise NotFound(f"entity not found: {', '.join(missing)}")
        return found

    # ------------------------------------------------------------ entities

    def upsert_entities(self, scope: AgentScope, entities: Sequence[NewEntity], now: datetime) -> list[tuple[Entity, bool]]:
        out: list[tuple[Entity, bool]] = []
        with self.db.tx() as conn:
            for new in entities:
                name = clean_entity_name(new.name)
                row = conn.execute(f"{_ENTITY} WHERE e.agent_id = ? AND e.name_key = ?", (scope.agent_id, name_key(name))).fetchone()
                if row is None:
                    self._create(conn, scope, new, name, now)
                    created, entity_id = True, new.id
                else:
                    self._merge(conn, self._entity(row), new, now)
                    created, entity_id = False, row["id"]
                out.append((self._entities(conn, scope, [entity_id])[entity_id], created))
        return out

    def _create(self, conn: sqlite3.Connection, scope: AgentScope, new: NewEntity, name: str, now: datetime) -> None:
        if conn.execute("SELECT 1 FROM entities WHERE id = ?", (new.id,)).fetchone() is not None:
            raise Conflict(f"entity id {new.id} is already taken")
        vector, model = self._vector(new.embedding)
        conn.execute(
            "INSERT INTO entities (id, agent_id, name, name_key, entity_type, description, metadata, embedding, embedding_model,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                new.id,
                scope.agent_id,
                name,
                name_key(name),
                new.entity_type,
                new.description,
                json.dumps(new.metadata, ensure_ascii=False),
                vector,
                model,
                ts(now),
                ts(now),
            ),
        )

    def _merge(self, conn: sqlite3.Connection, old: Entity, new: NewEntity, now: datetime) -> None:
        """An existing entity meets a new mention: an unknown type takes the given one; a given
        description, metadata (merged shallowly) and embedding replace the stored ones."""
        sets: list[str] = []
        params: list[Any] = []
        if old.entity_type == UNKNOWN_TYPE and new.entity_type != UNKNOWN_TYPE:
            sets.append("entity_type = ?")
            params.append(new.entity_type)
        if new.description is not None and new.description != old.description:
            sets.append("description = ?")
            params.append(new.description)
        if new.metadata:
            sets.append("metadata = ?")
            params.append(json.dumps({**old.metadata, **new.metadata}, ensure_ascii=False))
        vector, model = self._vector(new.embedding)
        if vector is not None:
            sets.append("embedding = ?, embedding_model = ?")
            params.extend([vector, model])
        if sets:
            conn.execute(f"UPDATE entities SET {', '.join(sets)}, updated_at = ? WHERE id = ?", [*params, ts(now), old.id])

    def get_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[Entity]:
        found = self._entities(self.db.reader(), scope, list(ids))
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def entities_named(self, scope: AgentScope, names: Sequence[str]) -> list[Entity]:
        keys = list(dict.fromkeys(name_key(n.strip()) for n in names))
        if not keys:
            return []
        owner, params = _owner(scope, "e")
        rows = self.db.reader().execute(f"{_ENTITY} WHERE e.name_key IN ({_marks(keys)}) AND {owner}", [*keys, *params]).fetchall()
        order = {k: i for i, k in enumerate(keys)}
        found = [self._entity(r) for r in rows]
        return sorted(found, key=lambda e: (order[name_key(e.name)], e.agent_id))

    def list_entities(
        self, scope: AgentScope, *, entity_type: str | None, name_contains: str | None, limit: int, offset: int
    ) -> tuple[list[Entity], int]:
        owner, params = _owner(scope, "e")
        where = [owner]
        if entity_type is not None:
            where.append("e.entity_type = ?")
            params.append(entity_type)
        if name_contains:
            where.append("instr(e.name_key, ?) > 0")
            params.append(name_key(name_contains))
        cond = " AND ".join(where)
        conn = self.db.reader()
        total = int(conn.execute(f"SELECT COUNT(*) FROM entities e WHERE {cond}", params).fetchone()[0])
        rows = conn.execute(f"{_ENTITY} WHERE {cond} ORDER BY e.name_key, e.seq LIMIT ? OFFSET ?", [*params, limit, offset]).fetchall()
        return [self._entity(r) for r in rows], total

    def update_entity(self, scope: AgentScope, entity_id: str, changes: EntityChanges, now: datetime) -> Entity:
        with self.db.tx() as conn:
            old = self._require_entities(conn, scope, [entity_id])[entity_id]
            sets: list[str] = []
            params: list[Any] = []
            if changes.name is not None:
                name = clean_entity_name(changes.name)
                clash = conn.execute(
                    "SELECT id FROM entities WHERE agent_id = ? AND name_key = ? AND id != ?", (old.agent_id, name_key(name), old.id)
                ).fetchone()
                if clash is not None:
                    raise Conflict(f"an entity named {name!r} already exists ({clash[0]})")
                sets.append("name = ?, name_key = ?")
                params.extend([name, name_key(name)])
            if changes.entity_type is not None:
                sets.append("entity_type = ?")
                params.append(changes.entity_type)
            if changes.description is not None:
                sets.append("description = ?")
                params.append(changes.description)
            if changes.metadata is not None:
                sets.append("metadata = ?")
                params.append(json.dumps(changes.metadata, ensure_ascii=False))
            vector, model = self._vector(changes.embedding)
            if vector is not None:
                sets.append("embedding = ?, embedding_model = ?")
                params.extend([vector, model])
            if sets:
                conn.execute(f"UPDATE entities SET {', '.join(sets)}, updated_at = ? WHERE id = ?", [*params, ts(now), old.id])
            return self._entities(conn, scope, [entity_id])[entity_id]

    def delete_entities(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        with self.db.tx() as conn:
            found = self._entities(conn, scope, list(dict.fromkeys(ids)))
            gone = [i for i in dict.fromkeys(ids) if i in found]
            if gone:  # relations and associations go by cascade; fragments stay
                conn.execute(f"DELETE FROM entities WHERE id IN ({_marks(gone)})", gone)
        return gone

    def entity_vectors(self, scope: AgentScope) -> list[tuple[str, np.ndarray]]:
        if self.embedding_model is None:
            return []
        owner, params = _owner(scope, "e")
        rows = (
            self.db.reader()
            .execute(
                f"SELECT e.id, e.embedding FROM entities e WHERE e.embedding IS NOT NULL AND e.embedding_model = ? AND {owner}"
                " ORDER BY e.seq",
                [self.embedding_model, *params],
            )
            .fetchall()
        )
        return [(r[0], np.frombuffer(r[1], dtype=np.float32).copy()) for r in rows]

    # ------------------------------------------------------------ relations

    def upsert_relations(self, scope: AgentScope, relations: Sequence[NewRelation], now: datetime) -> list[tuple[Relation, bool]]:
        out: list[tuple[Relation, bool]] = []
        with self.db.tx() as conn:
            ends = self._require_entities(conn, scope, [i for r in relations for i in (r.source_id, r.target_id)])
            for rel in relations:
                agent = ends[rel.source_id].agent_id
                if ends[rel.target_id].agent_id != agent:
                    raise InvalidArgument("a relation joins two entities of the same agent")
                values = (
                    unit_value("strength", rel.strength),
                    unit_value("confidence", rel.confidence),
                    rel.context,
                    json.dumps(rel.metadata, ensure_ascii=False),
                )
                found = conn.execute(
                    "SELECT id FROM relations WHERE source_id = ? AND target_id = ? AND relation_type = ?",
                    (rel.source_id, rel.target_id, rel.relation_type),
                ).fetchone()
                if found is not None:
                    conn.execute(
                        "UPDATE relations SET strength = ?, confidence = ?, context = ?, metadata = ?, updated_at = ? WHERE id = ?",
                        (*values, ts(now), found[0]),
                    )
                    relation_id, created = str(found[0]), False
                else:
                    if conn.execute("SELECT 1 FROM relations WHERE id = ?", (rel.id,)).fetchone() is not None:
                        raise Conflict(f"relation id {rel.id} is already taken")
                    conn.execute(
                        "INSERT INTO relations (id, agent_id, source_id, target_id, relation_type, strength, confidence, context,"
                        " metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (rel.id, agent, rel.source_id, rel.target_id, rel.relation_type, *values, ts(now), ts(now)),
                    )
                    relation_id, created = rel.id, True
                row = conn.execute(f"{_RELATION} WHERE r.id = ?", (relation_id,)).fetchone()
                out.append((self._relation(row), created))
        return out

    def get_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[Relation]:
        if not ids:
            return []
        owner, params = _owner(scope, "r")
        rows = self.db.reader().execute(f"{_RELATION} WHERE r.id IN ({_marks(ids)}) AND {owner}", [*ids, *params]).fetchall()
        found = {r["id"]: self._relation(r) for r in rows}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def list_relations(
        self, scope: AgentScope, *, entity_id: str | None, relation_type: str | None, limit: int, offset: int
    ) -> tuple[list[Relation], int]:
        owner, params = _owner(scope, "r")
        where = [owner]
        if entity_id is not None:
            where.append("(r.source_id = ? OR r.target_id = ?)")
            params.extend([entity_id, entity_id])
        if relation_type is not None:
            where.append("r.relation_type = ?")
            params.append(relation_type)
        cond = " AND ".join(where)
        conn = self.db.reader()
        total = int(conn.execute(f"SELECT COUNT(*) FROM relations r WHERE {cond}", params).fetchone()[0])
        rows = conn.execute(f"{_RELATION} WHERE {cond} ORDER BY r.seq LIMIT ? OFFSET ?", [*params, limit, offset]).fetchall()
        return [self._relation(r) for r in rows], total

    def relations_of(self, scope: AgentScope, entity_ids: Sequence[str], min_strength: float) -> list[Relation]:
        if not entity_ids:
            return []
        owner, params = _owner(scope, "r")
        marks = _marks(entity_ids)
        rows = (
            self.db.reader()
            .execute(
                f"{_RELATION} WHERE (r.source_id IN ({marks}) OR r.target_id IN ({marks})) AND r.strength >= ? AND {owner}"
                " ORDER BY r.strength DESC, r.seq",
                [*entity_ids, *entity_ids, min_strength, *params],
            )
            .fetchall()
        )
        return [self._relation(r) for r in rows]

    def delete_relations(self, scope: AgentScope, ids: Sequence[str]) -> list[str]:
        if not ids:
            return []
        owner, params = _owner(scope, "r")
        with self.db.tx() as conn:
            rows = conn.execute(f"SELECT r.id FROM relations r WHERE r.id IN ({_marks(ids)}) AND {owner}", [*ids, *params]).fetchall()
            found = {r[0] for r in rows}
            gone = [i for i in dict.fromkeys(ids) if i in found]
            if gone:
                conn.execute(f"DELETE FROM relations WHERE id IN ({_marks(gone)})", gone)
        return gone

    # ------------------------------------------------------------ associations

    def link_entities(self, scope: AgentScope, links: Sequence[tuple[str, str, float]], now: datetime) -> int:
        if not links:
            return 0
        with self.db.tx() as conn:
            entities = self._require_entities(conn, scope, [e for e, _, _ in links])
            wanted = list(dict.fromkeys(f for _, f, _ in links))
            seen = {f.id for f in _visible(conn, scope, wanted)}
            missing = [f for f in wanted if f not in seen]
            if missing:
                raise NotFound(f"fragment not found: {', '.join(missing)}", missing=missing)
            return self._associate(conn, [(entities[e].agent_id, e, f, unit_value("relevance", r)) for e, f, r in links], now)

    @staticmethod
    def _associate(conn: sqlite3.Connection, rows: Sequence[tuple[str, str, str, float]], now: datetime) -> int:
        """Insert (agent, entity, fragment, relevance) rows; a repeated pair keeps the higher relevance. How many were new."""
        new = 0
        for agent, entity_id, fragment_id, relevance in rows:
            exists = conn.execute(
                "SELECT 1 FROM entity_memories WHERE entity_id = ? AND fragment_id = ?", (entity_id, fragment_id)
            ).fetchone()
            conn.execute(
                "INSERT INTO entity_memories (agent_id, entity_id, fragment_id, relevance, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (entity_id, fragment_id) DO UPDATE SET relevance = MAX(relevance, excluded.relevance)",
                (agent, entity_id, fragment_id, relevance, ts(now)),
            )
            new += exists is None
        return new

    def entity_links(self, scope: AgentScope, *, entity_ids: Sequence[str] = (), fragment_ids: Sequence[str] = ()) -> list[EntityLink]:
        """Associations of the given entities and/or fragments (both given: pairs of the two), live fragments only."""
        if not entity_ids and not fragment_ids:
            return []
        owner, params = _owner(scope, "em")
        visible, vparams = _scope_sql(scope)
        where = [owner, visible]
        params.extend(vparams)
        if entity_ids:
            where.append(f"em.entity_id IN ({_marks(entity_ids)})")
            params.extend(entity_ids)
        if fragment_ids:
            where.append(f"em.fragment_id IN ({_marks(fragment_ids)})")
            params.extend(fragment_ids)
        rows = (
            self.db.reader()
            .execute(
                "SELECT em.entity_id, em.fragment_id, em.relevance, em.created_at FROM entity_memories em"
                f" JOIN fragments f ON f.id = em.fragment_id WHERE {' AND '.join(where)} ORDER BY em.relevance DESC, em.seq",
                params,
            )
            .fetchall()
        )
        return [EntityLink(r[0], r[1], r[2], _at(r[3])) for r in rows]

    def move_entity_links(self, scope: AgentScope, from_fragment: str, to_fragment: str, now: datetime) -> int:
        with self.db.tx() as conn:
            if not _visible(conn, scope, [to_fragment]):
                raise NotFound(f"fragment {to_fragment!r} not found", missing=(to_fragment,))
            owner, params = _owner(scope, "em")
            rows = conn.execute(
                f"SELECT em.seq, em.agent_id, em.entity_id, em.relevance FROM entity_memories em WHERE em.fragment_id = ? AND {owner}",
                [from_fragment, *params],
            ).fetchall()
            if not rows or from_fragment == to_fragment:
                return 0
            self._associate(conn, [(r["agent_id"], r["entity_id"], to_fragment, r["relevance"]) for r in rows], now)
            seqs = [r["seq"] for r in rows]
            conn.execute(f"DELETE FROM entity_memories WHERE seq IN ({_marks(seqs)})", seqs)
        return len(rows)

    def graph_counts(self, scope: AgentScope) -> dict[str, int]:
        conn = self.db.reader()
        counts: dict[str, int] = {}
        for key, table, alias in (("entities", "entities", "e"), ("relations", "relations", "r")):
            owner, params = _owner(scope, alias)
            counts[key] = int(conn.execute(f"SELECT COUNT(*) FROM {table} {alias} WHERE {owner}", params).fetchone()[0])
        owner, params = _owner(scope, "em")
        visible, vparams = _scope_sql(scope)
        counts["links"] = int(
            conn.execute(
                f"SELECT COUNT(*) FROM entity_memories em JOIN fragments f ON f.id = em.fragment_id WHERE {owner} AND {visible}",
                [*params, *vparams],
            ).fetchone()[0]
        )
        return counts
