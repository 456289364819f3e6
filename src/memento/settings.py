"""Configuration, read once from the environment with the seed's variable names (000 §10, 001 §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from platformdirs import user_data_dir
from pydantic import AliasChoices, BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class RankingConfig(BaseModel):
    """Composite ranking weights (000 §4.4, plus the weight of query relevance)."""

    importanceWeight: float = Field(0.6, ge=0, le=1, description="Weight of importance in the prior.")
    recencyWeight: float = Field(0.4, ge=0, le=1, description="Weight of recency in the prior.")
    relevanceWeight: float = Field(
        0.9, ge=0, le=1, description="Share of the final score given to query relevance when a query is present."
    )
    semanticWeight: float = Field(
        0.75, ge=0, le=4, description="Weight of the vector tier in fusion (keyword and full-text tiers weigh 1)."
    )
    fusion: Literal["linear", "rrf"] = Field(
        "linear",
        description="How the tiers are fused: linear (each tier's scores scaled to [0, 1], weighted and summed) or rrf (reciprocal rank fusion, k=60; semanticWeight 0.3 suits it).",
    )
    contextBefore: float = Field(
        0.7,
        ge=0,
        le=1,
        description="A candidate's relevance is at least this blend of the memory written just before it and its own: b·before + (1−b)·own (0: off).",
    )
    contextAfter: float = Field(
        0.4, ge=0, le=1, description="The same with the memory written just after it: a·after + (1−a)·own (0: off)."
    )
    contextReach: int = Field(
        2, ge=0, le=4, description="How many memories written before (and after) a candidate lend it context (0: off)."
    )
    contextWindowMinutes: float = Field(
        60.0, gt=0, description="Memories of one namespace, topic and session created this close are one conversation."
    )
    temporalBoost: float = Field(
        0.4,
        ge=0,
        le=4,
        description="A recall naming a time (in May, last week, 2023-06-03) multiplies the relevance of memories created then by 1 + this (0: off).",
    )
    temporalSlackDays: float = Field(
        7.0, ge=0, le=366, description="Days after the named time still counted as in it (a memory is written after what it tells of)."
    )
    keywordWeight: float = Field(0.05, ge=0, le=4, description="Weight of the keyword tier in rank fusion (the full-text tier weighs 1).")
    activationThreshold: int = Field(100, ge=0, description="Below this many candidates without a query, order by creation time.")
    recencyHalfLifeDays: float = Field(30.0, gt=0, description="Age at which the recency score halves.")

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> RankingConfig:
        if abs(self.importanceWeight + self.recencyWeight - 1.0) > 1e-6:
            raise ValueError("importanceWeight + recencyWeight must equal 1.0")
        return self


class StaleThresholds(BaseModel):
    """Days without access before a cold fragment expires (000 §5.2)."""

    procedure: int = 30
    fact: int = 60
    decision: int = 90
    default: int = 60

    def for_type(self, type_: str) -> int:
        return int(getattr(self, type_, self.default)) if type_ in {"procedure", "fact", "decision"} else self.default


class MemoryConfig(BaseModel):
    """The seed's MEMORY_CONFIG; set as JSON in the MEMORY_CONFIG environment variable."""

    ranking: RankingConfig = RankingConfig()
    staleThresholds: StaleThresholds = StaleThresholds()
    linkedFragmentLimit: int = Field(10, ge=0, le=100)
    hotDays: int = Field(7, ge=0, description="Age after which hot fragments move to warm.")
    warmInactiveDays: int = Field(30, ge=0, description="Days without access after which warm moves to cold.")
    decayFactor: float = Field(0.95, gt=0, le=1, description="Importance multiplier for unused, low-utility fragments.")


def default_database_url() -> str:
    return "sqlite:///" + str(Path(user_data_dir("memento", appauthor=False)) / "memento.db")


class Settings(BaseSettings):
    """Every setting Memento reads. Invalid values fail at start-up."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    host: str = Field("127.0.0.1", validation_alias=AliasChoices("MEMENTO_HOST", "HOST"), description="Address the HTTP server binds.")
    port: int = Field(56332, ge=0, le=65535, validation_alias=AliasChoices("PORT"), description="TCP port of the HTTP listener.")
    access_key: str = Field(
        "", validation_alias=AliasChoices("MEMENTO_ACCESS_KEY"), description="Bearer token; empty disables authentication."
    )
    keys: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_KEYS"),
        description='Named access keys as JSON: [{"name": "...", "key": "...", "agent": "agent-a" or "*", "access": "read-write" or "read-only"}].',
    )
    keys_file: Path | None = Field(
        None, validation_alias=AliasChoices("MEMENTO_KEYS_FILE"), description="A file holding named access keys (the MEMENTO_KEYS JSON)."
    )
    allow_unauthenticated: bool = Field(
        False,
        validation_alias=AliasChoices("MEMENTO_ALLOW_UNAUTHENTICATED"),
        description="Serve HTTP on a non-loopback address without any credential (unsafe; off by default).",
    )
    stdio_agent: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_STDIO_AGENT"),
        description="Agent namespace of the stdio transport; empty runs as the operator (every namespace).",
    )
    workspace: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_WORKSPACE"),
        description="Seed 003's workspace of the stdio transport (HTTP callers send X-Memento-Workspace); empty: none. A workspace is a namespace: see docs/protocol.md.",
    )
    shared_pool: Literal["read", "write"] = Field(
        "read",
        validation_alias=AliasChoices("MEMENTO_SHARED_POOL"),
        description="Who may change the shared `default` pool: read = agent credentials only read it (admins add, amend and forget); write = read-write agent credentials may also add, amend and forget its non-anchored fragments (000 §3.6). Anchored pool fragments are admin-only either way.",
    )
    public_url: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_PUBLIC_URL"),
        description="The server's external base URL (e.g. https://memento.example.com): the OAuth issuer and the tokens' audience ({url}/mcp). Empty: the scheme and Host of each request.",
    )
    oauth: bool = Field(
        True,
        validation_alias=AliasChoices("MEMENTO_OAUTH"),
        description="Serve the OAuth 2.1 authorization server for MCP clients (active only with MEMENTO_ACCESS_KEY, which approves clients).",
    )
    oauth_access_token_ttl_s: int = Field(
        3600,
        ge=60,
        le=86400,
        validation_alias=AliasChoices("MEMENTO_OAUTH_ACCESS_TTL"),
        description="Lifetime of an OAuth access token, in seconds.",
    )
    oauth_refresh_token_ttl_s: int = Field(
        30 * 86400,
        ge=3600,
        validation_alias=AliasChoices("MEMENTO_OAUTH_REFRESH_TTL"),
        description="Lifetime of an OAuth refresh token, in seconds (rotated on every use).",
    )
    oauth_register_rate: int = Field(
        20,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_OAUTH_REGISTER_RATE"),
        description="OAuth dynamic client registrations allowed per minute from one client address (0: no limit); more get 429 with Retry-After.",
    )
    oauth_register_global_rate: int = Field(
        200,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_OAUTH_REGISTER_GLOBAL_RATE"),
        description="OAuth dynamic client registrations allowed per minute from all addresses together (0: no limit).",
    )
    oauth_unused_client_ttl_s: int = Field(
        86400,
        ge=60,
        validation_alias=AliasChoices("MEMENTO_OAUTH_UNUSED_CLIENT_TTL"),
        description="Seconds a registered OAuth client that has not completed an authorization (operator consent) is kept.",
    )
    oauth_max_clients: int = Field(
        10_000,
        ge=1,
        validation_alias=AliasChoices("MEMENTO_OAUTH_MAX_CLIENTS"),
        description="Most OAuth clients kept that have not completed an authorization; a new registration drops the oldest of them (approved clients are never dropped).",
    )
    session_ttl_minutes: int = Field(60, ge=1, validation_alias=AliasChoices("SESSION_TTL_MINUTES"), description="Idle MCP session expiry.")
    max_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        validation_alias=AliasChoices("MEMENTO_MAX_BODY_BYTES"),
        description="Largest HTTP request body accepted, in bytes (413 beyond it, checked while the body streams in); the OAuth form endpoints take at most 64 KiB. Also the largest stdio line (one message).",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        validation_alias=AliasChoices("MEMENTO_HEADER_TIMEOUT_S"),
        description="Seconds a connection may take to send a request's line and headers before it is closed.",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        validation_alias=AliasChoices("MEMENTO_BODY_TIMEOUT_S"),
        description="Seconds a request may take to send its whole body (408 and the connection closed after).",
    )
    max_connections: int = Field(
        1000,
        ge=1,
        validation_alias=AliasChoices("MEMENTO_MAX_CONNECTIONS"),
        description="Concurrent HTTP connections (and requests) served; beyond it requests get 503.",
    )
    max_sessions: int = Field(
        1000,
        ge=1,
        validation_alias=AliasChoices("MEMENTO_MAX_SESSIONS"),
        description="MCP sessions held per process; a new one ends the least recently used idle session (503 when none is idle).",
    )
    stream_queue_limit: int = Field(
        1000,
        ge=1,
        validation_alias=AliasChoices("MEMENTO_STREAM_QUEUE_LIMIT"),
        description="Messages an SSE stream may hold for a client that does not read them; beyond it the stream is closed (a resumable stream can be resumed with Last-Event-ID).",
    )
    sse_heartbeat_s: float = Field(
        15.0,
        gt=0,
        le=3600,
        validation_alias=AliasChoices("MEMENTO_SSE_HEARTBEAT_S"),
        description="Seconds between the comment lines that keep an idle /api/events stream open.",
    )
    events_ring_size: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        validation_alias=AliasChoices("MEMENTO_EVENTS_RING"),
        description="Live events (/api/events) kept per process, and in Redis when on, for Last-Event-ID resumption.",
    )
    ui_session_idle_minutes: int = Field(
        30,
        ge=1,
        le=1440,
        validation_alias=AliasChoices("MEMENTO_UI_SESSION_IDLE_MINUTES"),
        description="Minutes a dashboard (/ui) login session may stay idle before it ends and the key must be entered again.",
    )
    metrics_public: bool = Field(
        False,
        validation_alias=AliasChoices("MEMENTO_METRICS_PUBLIC"),
        description="Serve /metrics without a credential (for a scraper on a private network); otherwise it needs an admin credential whenever credentials are configured.",
    )
    log_dir: Path | None = Field(
        None, validation_alias=AliasChoices("LOG_DIR"), description="Directory for log files; stderr only when unset."
    )
    log_level: str = Field("INFO", validation_alias=AliasChoices("LOG_LEVEL"))
    log_format: Literal["auto", "json", "text"] = Field(
        "auto",
        validation_alias=AliasChoices("MEMENTO_LOG_FORMAT", "LOG_FORMAT"),
        description="stderr log format: auto (text lines on a terminal, JSON lines otherwise), json or text; files are always JSON lines.",
    )
    log_max_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1024,
        validation_alias=AliasChoices("LOG_MAX_BYTES"),
        description="Size at which LOG_DIR/memento.log is rotated.",
    )
    log_backup_count: int = Field(5, ge=0, le=100, validation_alias=AliasChoices("LOG_BACKUP_COUNT"), description="Rotated log files kept.")
    allowed_origins: str = Field("", validation_alias=AliasChoices("ALLOWED_ORIGINS"), description="Comma-separated allowed Origin values.")
    allowed_hosts: str = Field(
        "",
        validation_alias=AliasChoices("ALLOWED_HOSTS"),
        description="Comma-separated Host header values accepted besides localhost (DNS-rebinding protection); '*' accepts any.",
    )
    database_url: str = Field(
        default_factory=default_database_url,
        validation_alias=AliasChoices("DATABASE_URL"),
        description="sqlite:///path (default: a file in the user data directory) or postgresql://user:pass@host:port/db.",
    )
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = Field(
        "FULL",
        validation_alias=AliasChoices("MEMENTO_SQLITE_SYNCHRONOUS"),
        description="SQLite synchronous pragma; FULL makes every acknowledged write survive power loss.",
    )

    database_migration_url: str = Field(
        "",
        validation_alias=AliasChoices("DATABASE_MIGRATION_URL"),
        description="PostgreSQL only: a connection string for the schema owner, used to apply migrations at start-up; empty means the application's own connection.",
    )
    postgres_host: str = Field(
        "",
        validation_alias=AliasChoices("POSTGRES_HOST", "DB_HOST"),
        description="PostgreSQL host; when set (and DATABASE_URL is not) PostgreSQL is used.",
    )
    postgres_port: int = Field(5432, ge=1, le=65535, validation_alias=AliasChoices("POSTGRES_PORT", "DB_PORT"))
    postgres_db: str = Field("memento", validation_alias=AliasChoices("POSTGRES_DB", "DB_NAME"))
    postgres_user: str = Field("", validation_alias=AliasChoices("POSTGRES_USER", "DB_USER"))
    postgres_password: str = Field("", validation_alias=AliasChoices("POSTGRES_PASSWORD", "DB_PASSWORD"))
    db_max_connections: int = Field(
        20, ge=1, le=1000, validation_alias=AliasChoices("DB_MAX_CONNECTIONS"), description="PostgreSQL pool maximum size."
    )
    db_idle_timeout_ms: int = Field(
        30000,
        ge=1000,
        validation_alias=AliasChoices("DB_IDLE_TIMEOUT_MS"),
        description="Idle pooled connections are closed after this long.",
    )
    db_conn_timeout_ms: int = Field(
        10000, ge=100, validation_alias=AliasChoices("DB_CONN_TIMEOUT_MS"), description="How long to wait for a pooled connection."
    )
    db_query_timeout: int = Field(
        30000, ge=0, validation_alias=AliasChoices("DB_QUERY_TIMEOUT"), description="Statement timeout in ms (0 disables)."
    )

    redis_enabled: bool = Field(
        False,
        validation_alias=AliasChoices("REDIS_ENABLED"),
        description="Use Redis for the L1 keyword index (000 §4.1) and for what several replicas share: MCP sessions, SSE events, tasks, OAuth state, pub/sub. When false, recall starts at the store's keyword tier and sessions live in one process. Redis down: L1 is skipped, everything else works (000 §9.1).",
    )
    redis_host: str = Field("localhost", validation_alias=AliasChoices("REDIS_HOST"), description="Redis server hostname.")
    redis_port: int = Field(6379, ge=1, le=65535, validation_alias=AliasChoices("REDIS_PORT"), description="Redis server port.")
    redis_password: str = Field(
        "", validation_alias=AliasChoices("REDIS_PASSWORD"), description="Redis authentication password (empty: none)."
    )
    redis_db: int = Field(0, ge=0, validation_alias=AliasChoices("REDIS_DB"), description="Redis logical database index.")
    redis_sentinel_enabled: bool = Field(
        False,
        validation_alias=AliasChoices("REDIS_SENTINEL_ENABLED"),
        description="Find the Redis master through Sentinel (REDIS_SENTINELS, REDIS_MASTER_NAME) instead of REDIS_HOST/REDIS_PORT.",
    )
    redis_master_name: str = Field("mymaster", validation_alias=AliasChoices("REDIS_MASTER_NAME"), description="Sentinel master name.")
    redis_sentinels: str = Field(
        "localhost:26379", validation_alias=AliasChoices("REDIS_SENTINELS"), description="Comma-separated host:port list of Sentinel nodes."
    )

    embedding_provider: Literal["local", "openai", "hash", "none"] = Field(
        "local",
        validation_alias=AliasChoices("EMBEDDING_PROVIDER"),
        description="local (bundled multilingual-e5-small), openai (OpenAI-compatible HTTP), hash (deterministic, tests), none (keyword only).",
    )
    embedding_model: str = Field(
        "", validation_alias=AliasChoices("EMBEDDING_MODEL"), description="Model name; the provider's default when empty."
    )
    embed_threads: str = Field(
        "auto",
        validation_alias=AliasChoices("MEMENTO_EMBED_THREADS"),
        description="CPU threads of the local model per call: auto (every call on every core, a batch on at most one thread a text; on an otherwise idle machine a recall embeds its query before its other reads) or a fixed number for every call.",
    )
    recall_workers: str = Field(
        "auto",
        validation_alias=AliasChoices("MEMENTO_RECALL_WORKERS"),
        description="Threads a recall embeds its query and reads the vector tier on while it reads the keyword and full-text tiers:"
        " auto (one per core beyond the first, at most 4; none on one core) or a number (0: the tiers run one after another).",
    )
    embedding_dimensions: int | None = Field(
        None,
        ge=8,
        le=8192,
        validation_alias=AliasChoices("EMBEDDING_DIMENSIONS"),
        description="Vector size; the provider's default when unset.",
    )
    openai_api_key: str = Field("", validation_alias=AliasChoices("OPENAI_API_KEY"))
    openai_base_url: str = Field("https://api.openai.com/v1", validation_alias=AliasChoices("OPENAI_BASE_URL", "EMBEDDING_BASE_URL"))
    embedding_timeout_s: float = Field(10.0, gt=0, validation_alias=AliasChoices("EMBEDDING_TIMEOUT_S"))
    # ---- the embedding outbox (docs/embeddings.md): writes never wait for the provider
    embed_write_wait_ms: int = Field(
        50,
        ge=0,
        le=10000,
        validation_alias=AliasChoices("MEMENTO_EMBED_WRITE_WAIT_MS"),
        description="The longest a write waits for the provider when a write-time decision needs the new text's vector (001's near-duplicate check, distill's duplicate check, entity and skip-list vectors); late: decided without it, embedded in the background. Plain writes never wait.",
    )
    embed_settle_ms: int = Field(
        250,
        ge=0,
        le=60000,
        validation_alias=AliasChoices("MEMENTO_EMBED_SETTLE_MS"),
        description="The longest a recall waits for the embeddings of writes acknowledged before it in its namespaces (read-your-writes by meaning); never while the provider is failing or hanging, nor when the worker's backlog up to them cannot be embedded within it at its recent pace.",
    )
    embed_drain_s: float = Field(
        10.0,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_EMBED_DRAIN_S"),
        description="At close, the longest the app waits for pending embeddings; what is left stays pending for the next start (or consolidation).",
    )
    embed_max_backoff_s: float = Field(
        60.0,
        gt=0,
        validation_alias=AliasChoices("MEMENTO_EMBED_MAX_BACKOFF_S"),
        description="The embedding worker's back-off cap after provider failures (doubling from 0.5 s); the rows stay pending meanwhile.",
    )

    ann_threshold: int = Field(
        5000,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_ANN_THRESHOLD"),
        description="Vectors per agent above which search uses the HNSW graph instead of an exact scan.",
    )
    hnsw_ef_search: int = Field(
        512, ge=8, le=4096, validation_alias=AliasChoices("HNSW_EF_SEARCH"), description="HNSW candidate list size at query time."
    )
    hnsw_m: int = Field(
        32,
        ge=4,
        le=128,
        validation_alias=AliasChoices("HNSW_M"),
        description="SQLite's HNSW graph (usearch): links per vector. A saved index built with another value is rebuilt at load.",
    )
    hnsw_ef_construction: int = Field(
        128,
        ge=8,
        le=4096,
        validation_alias=AliasChoices("HNSW_EF_CONSTRUCTION"),
        description="SQLite's HNSW graph (usearch): candidate list size while inserting. A saved index built with another value is rebuilt at load.",
    )
    memory: MemoryConfig = Field(default_factory=MemoryConfig, validation_alias=AliasChoices("MEMORY_CONFIG"))
    text_length_norm: float = Field(
        0.2,
        ge=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_TEXT_LENGTH_NORM"),
        description="BM25's b when the full-text tier rescores its candidates: 0 ignores length, 0.75 is FTS5's own.",
    )
    text_match_bonus: float = Field(
        0.5,
        ge=0,
        le=4,
        validation_alias=AliasChoices("MEMENTO_TEXT_MATCH_BONUS"),
        description="BM25+'s delta: the score, in IDF units, of each matched query term whatever the memory's length.",
    )
    text_rescore_pool: int = Field(
        60,
        ge=1,
        le=2000,
        validation_alias=AliasChoices("MEMENTO_TEXT_RESCORE_POOL"),
        description="Full-text candidates (the index's best) that the full-text tier scores again with every query term.",
    )
    text_postings_budget: int = Field(
        1000,
        ge=100,
        le=1_000_000,
        validation_alias=AliasChoices("MEMENTO_TEXT_POSTINGS_BUDGET"),
        description="In a store of 2,000 memories or more: the matches the rarest query terms may bring to the full-text tier;"
        " rarer terms select until their matches reach it, the others only score (the tier's cost stays bounded at any size).",
    )
    text_idf_window: int = Field(
        2000,
        ge=0,
        le=10_000_000,
        validation_alias=AliasChoices("MEMENTO_TEXT_IDF_WINDOW"),
        description="In a larger scope: the latest memories whose statistics weigh the query terms (IDF) in the full-text tier;"
        " 0 weighs them over the whole scope.",
    )
    text_common_terms: Literal["score", "drop"] = Field(
        "score",
        validation_alias=AliasChoices("MEMENTO_TEXT_COMMON_TERMS"),
        description="Query terms in more than 2% of a large store: score the candidates the rarer terms find, or drop them.",
    )
    toolsets: str = Field(
        "memento",
        validation_alias=AliasChoices("MEMENTO_TOOLSETS"),
        description="Comma list of the toolsets tools/list shows (docs/toolsets.md): memento (seed 000's eleven tools, the default), entity, vault, or all.",
    )
    structured_output: bool = Field(
        False,
        validation_alias=AliasChoices("MEMENTO_STRUCTURED_OUTPUT"),
        description="Declare outputSchema and send each tool result also as structuredContent (2025-06-18 and later). Off: the JSON is sent once, as text.",
    )
    # ---- seed 002 (vault face, §4 session identity)
    memory_session_id: str = Field(
        "",
        max_length=200,
        validation_alias=AliasChoices("MEMORY_MCP_SESSION_ID"),
        description="stdio: the session id of the vault toolset's session scope (002 §4); empty: the client's clientInfo.extra.sessionId, else the transport's session.",
    )
    memory_session_persist: bool = Field(
        False,
        validation_alias=AliasChoices("MEMORY_MCP_SESSION_PERSIST"),
        description="Keep a session's working memory (002's session scope and 000's scope=session) when the session ends, for debugging; off: it is deleted.",
    )
    # ---- seed 001 (entity face, search control, confidence); the seed's names are accepted too
    confidence_half_life_days: float = Field(
        30.0,
        gt=0,
        validation_alias=AliasChoices("MEMENTO_CONFIDENCE_HALF_LIFE_DAYS", "CONFIDENCE_HALF_LIFE_DAYS"),
        description="Days after which a memory's effective confidence halves without access (001 §4.2).",
    )
    confidence_prune_threshold: float = Field(
        0.05,
        ge=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_CONFIDENCE_PRUNE_THRESHOLD", "CONFIDENCE_PRUNE_THRESHOLD"),
        description="Consolidation prunes memories whose effective confidence is below this (0: never; pinned, anchored and permanent ones are kept).",
    )
    confidence_prune_action: Literal["archive", "delete"] = Field(
        "archive",
        validation_alias=AliasChoices("MEMENTO_CONFIDENCE_PRUNE_ACTION"),
        description="archive: soft-delete (restorable); delete: remove for good.",
    )
    forget_retention_days: float = Field(
        30.0,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_FORGET_RETENTION_DAYS"),
        description="Days a soft-forgotten memory stays restorable before consolidation deletes it for good (0: never deleted).",
    )
    search_min_similarity: float = Field(
        0.5,
        ge=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_SEARCH_MIN_SIMILARITY", "SEARCH_MIN_SIMILARITY"),
        description="Floor of semantic results in the keyword/semantic/hybrid/graph search modes, on the calibrated 0-1 scale (docs/search.md).",
    )
    similarity_baseline: float | None = Field(
        None,
        ge=0,
        lt=1,
        validation_alias=AliasChoices("MEMENTO_SIMILARITY_BASELINE"),
        description="Raw cosine of unrelated texts for the embedding model (calibrated = (cos - baseline) / (1 - baseline)); default: known per model.",
    )
    hybrid_keyword_weight: float = Field(
        0.4,
        ge=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_HYBRID_KEYWORD_WEIGHT", "HYBRID_KEYWORD_WEIGHT"),
        description="Keyword weight of hybrid search (semantic = 1 - this), 001 §5.4.",
    )
    coverage_threshold: float = Field(
        0.2,
        ge=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_COVERAGE_THRESHOLD"),
        description="A recall whose coverage (how likely the answer is among the results, 0-1) is below this says noGoodMatch: true (docs/search.md).",
    )
    near_duplicate_similarity: float = Field(
        0.97,
        gt=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_NEAR_DUPLICATE_SIMILARITY"),
        description="Raw cosine above which store_memory merges a new memory into an existing one (entity face only; docs/search.md).",
    )
    consolidation_similarity: float = Field(
        0.85,
        gt=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_CONSOLIDATION_THRESHOLD", "CONSOLIDATION_THRESHOLD"),
        description="Default similarity of consolidate_memories clusters, calibrated scale (001 §6.2).",
    )
    merge_on_consolidate: bool = Field(
        True,
        validation_alias=AliasChoices("MEMENTO_MERGE_ON_CONSOLIDATE"),
        description="The consolidation pipeline merges clusters of near-identical memories (its `merged` stage, 001 §6.2) in every run.",
    )
    # ---- seed 004 (score profile §4.1/§7, retention per memory system §4.2/§7)
    score_profile: Literal["default", "004", "003"] = Field(
        "default",
        validation_alias=AliasChoices("MEMENTO_SCORE_PROFILE"),
        description="How recall's cascade ranks: default (000's fused relevance and prior, MEMORY_CONFIG.ranking), 004 (S = 0.5·relevance + 0.2·recency + 0.2·importance + 0.1·usage − ε·duplication) or 003 (S = relevance × 0.5^(age/7 days) × access boost × recent-access lift); docs/search.md.",
    )
    score_recency_lambda: float = Field(
        0.0231,
        ge=0,
        le=10,
        validation_alias=AliasChoices("MEMENTO_SCORE_RECENCY_LAMBDA"),
        description="Profile 004: λ of recency = exp(−λ·age in days); 0.0231 halves it every 30 days, 0 turns it off.",
    )
    score_duplication_weight: float = Field(
        0.1,
        ge=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_SCORE_DUPLICATION_WEIGHT"),
        description="Profile 004: ε, the weight of the penalty of a result near-identical to a higher-ranked one in the same list.",
    )
    score_duplicate_similarity: float = Field(
        0.95,
        gt=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_SCORE_DUPLICATE_SIMILARITY"),
        description="Profile 004: raw cosine at which a result counts as a duplicate of a higher-ranked one.",
    )
    retention_working_hours: int = Field(
        48,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_RETENTION_WORKING_HOURS"),
        description="Consolidation archives working-system memories unused (neither created nor recalled) for this many hours; 0: kept.",
    )
    retention_episodic_days: int = Field(
        90,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_RETENTION_EPISODIC_DAYS"),
        description="The same for episodic memories, in days; 0: kept.",
    )
    retention_semantic_days: int = Field(
        0,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_RETENTION_SEMANTIC_DAYS"),
        description="The same for semantic memories, in days; 0 (the default): kept without limit.",
    )
    retention_procedural_days: int = Field(
        0,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_RETENTION_PROCEDURAL_DAYS"),
        description="The same for procedural memories, in days; 0 (the default): kept without limit.",
    )
    # ---- issue 13: the scheduler (docs/lifecycle.md "Scheduling"); servers only, never one-shot commands
    consolidate_interval_minutes: int = Field(
        1440,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_CONSOLIDATE_INTERVAL_MINUTES"),
        description="A served store is consolidated (every namespace) once per this many minutes, by one replica; 0: no interval runs.",
    )
    consolidate_every_inserts: int = Field(
        50,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_CONSOLIDATE_EVERY_INSERTS"),
        description="A namespace is consolidated after this many new memories stored through this server (001 §6.3); 0: never by count.",
    )
    consolidate_on_start: bool = Field(
        True,
        validation_alias=AliasChoices("MEMENTO_CONSOLIDATE_ON_START"),
        description="A server consolidates every namespace shortly after it starts (a backfill after downtime).",
    )
    # ---- sleep consolidation and spaced review (004 §4.2-4.3, docs/lifecycle.md)
    sleep_window_days: int = Field(
        7,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_SLEEP_WINDOW_DAYS"),
        description="Sleep consolidation integrates episodic memories created within this many days; 0: the stage is off.",
    )
    sleep_similarity: float = Field(
        0.8,
        gt=0,
        le=1,
        validation_alias=AliasChoices("MEMENTO_SLEEP_SIMILARITY"),
        description="Calibrated similarity (0-1, as MEMENTO_CONSOLIDATION_THRESHOLD) from which two episodes belong to one cluster.",
    )
    sleep_min_cluster: int = Field(
        2,
        ge=2,
        le=100,
        validation_alias=AliasChoices("MEMENTO_SLEEP_MIN_CLUSTER"),
        description="Fewest consistent episodes that become one semantic memory.",
    )
    review_top: int = Field(
        20,
        ge=0,
        le=1000,
        validation_alias=AliasChoices("MEMENTO_REVIEW_TOP"),
        description="Spaced review: the most important memories of each namespace that get review cards; 0: no reviews.",
    )
    review_shown: int = Field(
        3,
        ge=0,
        le=20,
        validation_alias=AliasChoices("MEMENTO_REVIEW_SHOWN"),
        description="Most due reviews one context call shows (within its token budget).",
    )
    # ---- 004 §3 wm_buffer: working memory's end (docs/lifecycle.md "Working memory's end")
    summarize_on_session_end: bool = Field(
        True,
        validation_alias=AliasChoices("MEMENTO_SUMMARIZE_ON_SESSION_END"),
        description="When a session ends (closed, or idle past SESSION_TTL_MINUTES) its working memory becomes one episodic summary before it is removed (the deterministic summary, no model); off: it is only removed.",
    )
    working_memory_token_budget: int = Field(
        4000,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_WORKING_MEMORY_TOKEN_BUDGET"),
        description="Tokens of one session's working memory (scope=session, keyed memories apart); a remember past it folds the oldest items into an episodic summary until half the budget is left; 0: no limit.",
    )
    summary_max_tokens: int = Field(
        300,
        ge=50,
        le=4000,
        validation_alias=AliasChoices("MEMENTO_SUMMARY_MAX_TOKENS"),
        description="The longest working-memory summary, in tokens (summarize_thread, a session's end, a budget fold).",
    )
    skip_meaning_threshold: float | None = Field(
        None,
        ge=-1,
        le=1,
        validation_alias=AliasChoices("MEMENTO_SKIP_MEANING_THRESHOLD"),
        description="Seed 003's skip list: the relative similarity (cosine above the background, docs/protocol.md) from which a message matches an entry by meaning; empty: 0.045 with the bundled local models (calibrated on them), no matching by meaning with any other embedder.",
    )
    conformance_fixtures: bool = Field(
        False,
        validation_alias=AliasChoices("MEMENTO_CONFORMANCE_FIXTURES"),
        description="Expose the MCP conformance suite's test_* tools, test:// resources and prompts (testing only; never in production).",
    )
    # ---- MCP 2026-07-28 multi round-trip requests (mcp/mrtr.py)
    state_key: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_STATE_KEY"),
        description="Secret keying the HMAC that seals MCP 2026-07-28 requestState (at least 16 characters); empty: a random key kept in the database, shared by the replicas using it.",
    )
    state_ttl_s: float = Field(
        600.0,
        gt=0,
        le=86400,
        validation_alias=AliasChoices("MEMENTO_STATE_TTL_S"),
        description="Seconds a requestState (an input_required round's sealed state) stays valid for the client's retry.",
    )
    # ---- language model (docs/llm.md): drafts for seed 003's distill and crystallize
    llm_url: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_LLM_URL"),
        description="Base URL of an OpenAI-compatible chat-completions API (llama.cpp, Ollama, vLLM, OpenAI), e.g. http://127.0.0.1:8080/v1; empty: no LLM (deterministic drafts, or the MCP client's sampling).",
    )
    llm_model: str = Field(
        "",
        validation_alias=AliasChoices("MEMENTO_LLM_MODEL"),
        description="Model name sent with each request; empty: none sent (the server's default).",
    )
    llm_api_key: str = Field(
        "", validation_alias=AliasChoices("MEMENTO_LLM_API_KEY"), description="Bearer key of the LLM API, if it needs one."
    )
    llm_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        validation_alias=AliasChoices("MEMENTO_LLM_TIMEOUT_S"),
        description="Seconds one LLM request may take, connecting included.",
    )
    # ---- the evaluator (000 §7, issue 13; docs/lifecycle.md "Evaluator")
    evaluator_enabled: bool = Field(
        True,
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_ENABLED"),
        description="Run the evaluator's worker thread in the server; off: memories are still queued, and evaluated once it runs.",
    )
    evaluator_provider: Literal["auto", "heuristic", "llm", "gemini", "sampling"] = Field(
        "auto",
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_PROVIDER"),
        description="Who judges a memory: auto (the configured LLM, else Gemini with GEMINI_API_KEY, else a connected client's sampling, else heuristic), heuristic, llm, gemini or sampling.",
    )
    evaluator_poll_ms: int = Field(
        5000,
        ge=10,
        le=3_600_000,
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_POLL_MS"),
        description="How often the worker looks for due jobs.",
    )
    evaluator_max_attempts: int = Field(
        5,
        ge=1,
        le=50,
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_MAX_ATTEMPTS"),
        description="Attempts of a job before it is dead (dead-lettered, re-queueable).",
    )
    evaluator_backoff_s: float = Field(
        30.0,
        gt=0,
        le=86_400,
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_BACKOFF_S"),
        description="The first retry's delay; each further retry waits twice as long (capped at a day).",
    )
    evaluator_daily_tokens: int = Field(
        200_000,
        ge=0,
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_DAILY_TOKENS"),
        description="Model tokens the evaluator may spend per agent per UTC day (jobs past it wait for the next day); 0: no limit.",
    )
    evaluator_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        validation_alias=AliasChoices("MEMENTO_EVALUATOR_TIMEOUT_S"),
        description="Seconds one Gemini or sampling request of the evaluator may take (the LLM keeps MEMENTO_LLM_TIMEOUT_S).",
    )
    gemini_api_key: str = Field(
        "",
        validation_alias=AliasChoices("GEMINI_API_KEY"),
        description="Google Gemini API key for the evaluator (000 §10); empty: no Gemini.",
    )
    gemini_model: str = Field(
        "gemini-2.0-flash", validation_alias=AliasChoices("MEMENTO_GEMINI_MODEL"), description="The Gemini model the evaluator asks."
    )
    gemini_url: str = Field(
        "https://generativelanguage.googleapis.com/v1beta",
        validation_alias=AliasChoices("MEMENTO_GEMINI_URL"),
        description="Base URL of the Gemini API (generateContent); tests point it at a local server.",
    )

    @field_validator("llm_url")
    @classmethod
    def _llm_url(cls, value: str) -> str:
        from urllib.parse import urlsplit

        value = value.strip().rstrip("/")
        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
                raise ValueError("MEMENTO_LLM_URL must be an http(s) base URL without query or fragment, e.g. http://127.0.0.1:8080/v1")
        return value

    @model_validator(mode="after")
    def _evaluator_provider_configured(self) -> Settings:
        if self.evaluator_provider == "llm" and not self.llm_url:
            raise ValueError("MEMENTO_EVALUATOR_PROVIDER=llm needs MEMENTO_LLM_URL")
        if self.evaluator_provider == "gemini" and not self.gemini_api_key:
            raise ValueError("MEMENTO_EVALUATOR_PROVIDER=gemini needs GEMINI_API_KEY")
        return self

    @field_validator("recall_workers")
    @classmethod
    def _recall_workers(cls, value: str) -> str:
        value = value.strip().lower()
        if value == "auto" or (value.isdigit() and 0 <= int(value) <= 64):
            return value
        raise ValueError("MEMENTO_RECALL_WORKERS must be auto or a number of threads from 0 to 64")

    @field_validator("embed_threads")
    @classmethod
    def _embed_threads(cls, value: str) -> str:
        value = value.strip().lower()
        if value == "auto" or (value.isdigit() and 1 <= int(value) <= 256):
            return value
        raise ValueError("MEMENTO_EMBED_THREADS must be auto or a number of threads from 1 to 256")

    @field_validator("state_key")
    @classmethod
    def _state_key(cls, value: str) -> str:
        if value and len(value) < 16:
            raise ValueError("MEMENTO_STATE_KEY must be at least 16 characters (or unset for a key kept in the database)")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        from urllib.parse import urlsplit

        value = value.strip().rstrip("/")
        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
                raise ValueError("MEMENTO_PUBLIC_URL must be an http(s) URL without query or fragment, e.g. https://memento.example.com")
        return value

    @field_validator("database_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("DATABASE_URL must start with sqlite:///, postgresql:// or postgres://")
        return value

    @property
    def backend(self) -> Literal["sqlite", "postgres"]:
        """PostgreSQL when DATABASE_URL says so, or when POSTGRES_HOST/DB_HOST is set without DATABASE_URL."""
        if self.database_url.startswith(("postgresql://", "postgres://")):
            return "postgres"
        if self.postgres_host and "database_url" not in self.model_fields_set:
            return "postgres"
        return "sqlite"

    @property
    def postgres_dsn(self) -> str:
        """The application's PostgreSQL connection string (DATABASE_URL, else the POSTGRES_* parts)."""
        if self.database_url.startswith(("postgresql://", "postgres://")):
            return self.database_url
        from psycopg.conninfo import make_conninfo

        parts: dict[str, str | int | None] = {
            "host": self.postgres_host,
            "port": self.postgres_port,
            "dbname": self.postgres_db,
            "user": self.postgres_user or None,
            "password": self.postgres_password or None,
        }
        return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})

    @property
    def sqlite_path(self) -> Path:
        return Path(self.database_url.removeprefix("sqlite:///")).expanduser()

    @property
    def origins(self) -> list[str]:
        return [o.strip() for o in self.allowed_origins.split(",") if o.strip()]

    @property
    def sentinel_nodes(self) -> list[tuple[str, int]]:
        """REDIS_SENTINELS parsed into (host, port) pairs."""
        nodes = []
        for item in self.redis_sentinels.split(","):
            host, _, port = item.strip().rpartition(":")
            if item.strip():
                nodes.append((host or item.strip(), int(port) if host and port.isdigit() else 26379))
        return nodes
