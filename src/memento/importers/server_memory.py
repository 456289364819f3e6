"""The reference MCP memory server's knowledge graph (modelcontextprotocol/servers, src/memory):
`memory.jsonl`, one JSON object a line, `{"type": "entity", "name", "entityType", "observations"}`
or `{"type": "relation", "from", "to", "relationType"}`.

Each entity becomes one memory ("NAME is a TYPE"), each observation a memory ("NAME: text")
part_of it, each relation a `relation` memory ("FROM relationType TO") plus an edge between the
two entities. Forks that add `createdAt` to a line have it kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..models import FragmentType, RelationType
from .records import (
    ImportFormatError,
    ImportLink,
    ImportRecord,
    Parsed,
    Skipped,
    json_lines,
    parse_time,
    relation_link,
    string_list,
    text_field,
)

FORMAT = "server-memory"
SOURCE = "import:server-memory"


def read(path: Path) -> Parsed:
    """Parse a memory.jsonl file; a malformed line is an error naming it."""
    parsed = Parsed(FORMAT)
    entities: dict[str, str] = {}  # name -> key of its head record
    relations: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()  # relation keys
    for where, item in json_lines(path):
        kind = item.get("type")
        if kind == "entity":
            _entity(parsed, entities, item, where)
        elif kind == "relation":
            relations.append((where, item))
        else:
            raise ImportFormatError(f"{where}: 'type' must be 'entity' or 'relation', not {kind!r}")
    for where, item in relations:
        _relation(parsed, entities, seen, item, where)
    return parsed


def _entity(parsed: Parsed, entities: dict[str, str], item: dict[str, Any], where: str) -> None:
    name = text_field(item, "name", where).strip()
    kind = text_field(item, "entityType", where).strip()
    observations = string_list(item.get("observations"), where, "observations")
    if not name or not kind:
        raise ImportFormatError(f"{where}: 'name' and 'entityType' must not be empty")
    if name in entities:
        raise ImportFormatError(f"{where}: entity {name!r} appears twice")
    created = parse_time(item.get("createdAt"), where, "createdAt")
    key = f"entity:{name}"
    entities[name] = key
    meta = {"entity": name, "entityType": kind}

    def record(record_key: str, content: str, type_: FragmentType) -> ImportRecord:
        return ImportRecord(
            key=record_key,
            where=where,
            content=content,
            topic=name,
            type=type_,
            source=SOURCE,
            tags=(kind.lower(),),
            created_at=created,
            metadata=meta,
        )

    article = "an" if kind[:1].lower() in "aeiou" else "a"
    parsed.records.append(record(key, f"{name} is {article} {kind}", FragmentType.FACT))
    for index, text in enumerate(observations, start=1):
        if not text.strip():
            parsed.skipped.append(Skipped(f"{where} observation {index}", "empty observation"))
            continue
        obs_key = f"{key}#obs{index}"
        parsed.records.append(record(obs_key, f"{name}: {text.strip()}", FragmentType.OBSERVATION))
        parsed.links.append(ImportLink(obs_key, key, RelationType.PART_OF, where))


def _relation(parsed: Parsed, entities: dict[str, str], seen: set[str], item: dict[str, Any], where: str) -> None:
    source = text_field(item, "from", where).strip()
    target = text_field(item, "to", where).strip()
    label = text_field(item, "relationType", where).strip()
    if not source or not target or not label:
        raise ImportFormatError(f"{where}: 'from', 'to' and 'relationType' must not be empty")
    missing = [n for n in (source, target) if n not in entities]
    if missing:
        parsed.skipped.append(Skipped(where, f"relation names an entity not in the file: {', '.join(missing)}"))
        return
    created = parse_time(item.get("createdAt"), where, "createdAt")
    key = f"relation:{source}|{label}|{target}"
    if key in seen:
        parsed.skipped.append(Skipped(where, "the same relation appears earlier"))
        return
    seen.add(key)
    meta = {"from": source, "to": target, "relationType": label}
    words = label.replace("_", " ")
    parsed.records.append(
        ImportRecord(
            key=key,
            where=where,
            content=f"{source} {words} {target}",
            topic=source,
            type=FragmentType.RELATION,
            source=SOURCE,
            created_at=created,
            metadata=meta,
        )
    )
    parsed.links.append(ImportLink(key, entities[source], RelationType.PART_OF, where))
    if source != target:
        parsed.links.append(relation_link(entities[source], entities[target], label, where))
