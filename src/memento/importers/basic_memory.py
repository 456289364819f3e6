"""A basic-memory folder: markdown notes with YAML frontmatter (title, type, tags, permalink and
any custom field), observations `- [category] text #tag (context)` and relations
`- relation_type [[Target]] (context)`, anywhere in the body (conventionally under
`## Observations` and `## Relations`).

Each note becomes a memory ("Title: its prose", longer prose in part_of pieces), each
observation a memory typed by its category, each relation a `relation` memory plus an edge to
the target note when the folder holds it. Hidden folders (.git, .obsidian) are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..models import FragmentType, RelationType
from .records import ImportFormatError, ImportLink, ImportRecord, Parsed, Skipped, chunked, parse_time, relation_link

FORMAT = "basic-memory"
SOURCE = "import:basic-memory"

_OBSERVATION = re.compile(r"^\s*[-*]\s+\[([^\[\]]+)\]\s+(\S.*)$")
_RELATION = re.compile(r"^\s*[-*]\s+([A-Za-z_][\w \-]*?)\s+\[\[([^\[\]]+)\]\]\s*(?:\((.*)\))?\s*$")
_CONTEXT = re.compile(r"\s*\(([^()]*)\)\s*$")
_TAG = re.compile(r"(?<![\w#])#([\w][\w\-/:.]*)")
_TRAILING_TAGS = re.compile(r"(?:\s+#[\w][\w\-/:.]*)+\s*$")
_CHECKBOX = {" ", "x", "X"}

CATEGORY_TYPES: dict[FragmentType, tuple[str, ...]] = {
    FragmentType.DECISION: ("decision", "decisions", "choice"),
    FragmentType.PREFERENCE: ("preference", "preferences", "pref", "like", "dislike"),
    FragmentType.ERROR: ("error", "bug", "issue", "problem", "failure", "risk"),
    FragmentType.PROCEDURE: ("procedure", "method", "technique", "howto", "how-to", "step", "steps", "process", "workflow", "recipe"),
    FragmentType.FACT: ("fact", "info", "definition", "requirement", "constraint", "spec", "status"),
    FragmentType.LEARNING: ("learning", "lesson", "insight", "tip", "gotcha", "fix", "solution", "resolution"),
    FragmentType.PATTERN: ("pattern", "antipattern", "anti-pattern"),
    FragmentType.EPISODE: ("event", "meeting", "milestone", "episode"),
}
_CATEGORY_TYPE = {name: type_ for type_, names in CATEGORY_TYPES.items() for name in names}


def category_type(category: str) -> FragmentType:
    """The memory type of an observation category; categories without one are observations."""
    return _CATEGORY_TYPE.get(category.strip().lower(), FragmentType.OBSERVATION)


@dataclass(frozen=True)
class _Note:
    """One note's identity and the fields its memories share."""

    key: str
    title: str
    kind: str
    permalink: str
    path: Path
    tags: tuple[str, ...]
    created: datetime
    metadata: dict[str, Any]

    def record(
        self, key: str, where: str, content: str, type_: FragmentType, tags: tuple[str, ...] = (), context: str | None = None
    ) -> ImportRecord:
        return ImportRecord(
            key=key,
            where=where,
            content=content,
            topic=self.title,
            type=type_,
            source=SOURCE,
            tags=tuple(dict.fromkeys((*self.tags, *tags))),
            created_at=self.created,
            metadata=self.metadata,
            context=context,
        )


def read(path: Path) -> Parsed:
    """Parse a basic-memory folder (or one note); a malformed note is an error naming its line."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.md") if not _hidden(p.relative_to(path)))
    if not files:
        raise ImportFormatError(f"{path}: no markdown notes found")
    parsed = Parsed(FORMAT)
    notes: list[_Note] = []
    pending: list[tuple[_Note, str, str, str]] = []  # note, target, relation type, where
    for file in files:
        note, relations = _note(file, file.relative_to(path).as_posix() if path.is_dir() else file.name, parsed)
        notes.append(note)
        pending += [(note, target, label, where) for target, label, where in relations]
    index: dict[str, str] = {}
    for note in reversed(notes):  # the first note of a title wins
        for name in (note.title, note.permalink, note.path.stem):
            index[_linkable(name)] = note.key
    for note, target, label, where in pending:
        found = index.get(_linkable(target.split("|")[0].split("#")[0]))
        if found is None:
            parsed.skipped.append(Skipped(where, f"link to [[{target}]]: no such note in the folder (the relation memory is kept)"))
        elif found != note.key:
            parsed.links.append(relation_link(note.key, found, label, where))
    return parsed


def _linkable(name: str) -> str:
    """A note name as [[links]] match it: case, spaces and underscores do not matter."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _note(file: Path, relative: str, parsed: Parsed) -> tuple[_Note, list[tuple[str, str, str]]]:
    """Read one note into `parsed`; returns it and its relations (target, type, where)."""
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{file}: not UTF-8 text ({exc.reason})") from None
    front, body, body_line = _frontmatter(text, file)
    title = (_string(front, "title", file) or _heading(body) or file.stem).strip()
    kind = _string(front, "type", file) or "note"
    permalink = _string(front, "permalink", file) or relative.removesuffix(".md")
    custom = {k: _jsonable(v) for k, v in front.items() if k not in ("title", "type", "tags", "permalink")}
    meta = {"note": title, "noteType": kind, "permalink": permalink, "file": relative} | ({"frontmatter": custom} if custom else {})
    note = _Note(f"note:{relative}", title, kind, permalink, file, _tags(front.get("tags"), file), _created(front, file), meta)
    prose, relations = _body(note, body, body_line, parsed)
    head = note.record(note.key, f"{file}:1", f"{title}: {prose}" if prose else f"{title} ({kind})", _note_type(kind))
    records, links = chunked(head)
    parsed.records += records
    parsed.links += links
    return note, relations


def _body(note: _Note, body: str, first_line: int, parsed: Parsed) -> tuple[str, list[tuple[str, str, str]]]:
    """Observations and relations of a note's body into `parsed`; returns the remaining prose
    and the relations to resolve once every note is known."""
    prose: list[str] = []
    relations: list[tuple[str, str, str]] = []
    fenced = False
    observations = 0
    for number, line in enumerate(body.splitlines(), start=first_line):
        where = f"{note.path}:{number}"
        fence = line.lstrip().startswith(("```", "~~~"))
        fenced = fenced != fence
        obs = None if fenced or fence else _OBSERVATION.match(line)
        rel = None if fenced or fence else _RELATION.match(line)
        if obs and obs.group(1) not in _CHECKBOX:
            observations += 1
            content, context, tags = _observation_parts(obs.group(2))
            if not content:
                parsed.skipped.append(Skipped(where, "observation without text"))
                continue
            key = f"{note.key}#obs{observations}"
            category = obs.group(1).strip()
            record = note.record(key, where, content, category_type(category), tags, context)
            parsed.records.append(replace(record, metadata={**note.metadata, "category": category}))
            parsed.links.append(ImportLink(key, note.key, RelationType.PART_OF, where))
        elif rel:
            label, target = rel.group(1).strip(), rel.group(2).strip()
            key = f"{note.key}#rel{len(relations) + 1}"
            content = f"{note.title} {label.replace('_', ' ')} {target.split('|')[-1].strip()}"
            parsed.records.append(note.record(key, where, content, FragmentType.RELATION, (), rel.group(3)))
            parsed.links.append(ImportLink(key, note.key, RelationType.PART_OF, where))
            relations.append((target, label, where))
        elif fenced or fence or not line.lstrip().startswith("#"):
            prose.append(line)
    return "\n".join(prose).strip(), relations


def _frontmatter(text: str, file: Path) -> tuple[dict[str, Any], str, int]:
    """The frontmatter mapping, the body after it and the body's first line number."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    import yaml  # on first use: the CLI (and so `serve`) imports this module, rarely to read YAML

    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            try:
                front = yaml.safe_load("\n".join(lines[1:end]))
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                line = mark.line + 2 if mark is not None else 1
                raise ImportFormatError(f"{file}:{line}: the frontmatter is not valid YAML ({getattr(exc, 'problem', exc)})") from None
            if front is None:
                front = {}
            if not isinstance(front, dict):
                raise ImportFormatError(f"{file}:2: the frontmatter must be a YAML mapping (key: value lines)")
            return {str(k): v for k, v in front.items()}, "\n".join(lines[end + 1 :]), end + 2
    raise ImportFormatError(f"{file}:1: the frontmatter opened with --- is never closed")


def _heading(body: str) -> str | None:
    """The note's first level-one heading (the title of a note without frontmatter)."""
    found = re.search(r"^#\s+(.+?)\s*#*\s*$", body, re.MULTILINE)
    return found.group(1) if found else None


def _string(front: dict[str, Any], name: str, file: Path) -> str | None:
    value = front.get(name)
    if value is None:
        return None
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    raise ImportFormatError(f"{file}: frontmatter {name!r} must be text, not {type(value).__name__}")


def _tags(value: Any, file: Path) -> tuple[str, ...]:
    """basic-memory tags: a list or a comma-separated string, each maybe written #tag."""
    if value is None:
        return ()
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise ImportFormatError(f"{file}: frontmatter 'tags' must be a list or a comma-separated string")
    if not all(isinstance(t, str | int | float) for t in items):
        raise ImportFormatError(f"{file}: frontmatter 'tags' must hold plain values")
    return tuple(t for t in (str(i).strip().lstrip("#").strip() for i in items) if t)


def _created(front: dict[str, Any], file: Path) -> datetime:
    """A `created` (or `created_at`, `date`) field of the frontmatter, else the file's mtime."""
    for name in ("created", "created_at", "date"):
        if front.get(name) is not None:
            found = parse_time(front[name], str(file), f"frontmatter {name!r}")
            if found is not None:
                return found
    return datetime.fromtimestamp(file.stat().st_mtime, UTC)


def _observation_parts(rest: str) -> tuple[str, str | None, tuple[str, ...]]:
    """An observation's text, its trailing (context) and its #tags (trailing ones leave the text)."""
    context = None
    found = _CONTEXT.search(rest)
    if found:
        context = found.group(1).strip() or None
        rest = rest[: found.start()]
    tags = tuple(_TAG.findall(rest))
    content = _TRAILING_TAGS.sub("", rest).strip()
    return content, context, tags


def _note_type(kind: str) -> FragmentType:
    """A note's own memory: its type when it names one of Memento's, else a fact."""
    lowered = kind.strip().lower()
    if lowered in {t.value for t in FragmentType}:
        return FragmentType(lowered)
    return category_type(lowered) if lowered in _CATEGORY_TYPE else FragmentType.FACT


def _jsonable(value: Any) -> Any:
    """A frontmatter value as JSON (dates as ISO strings) for the memory's metadata."""
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
