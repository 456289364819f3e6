"""PII and secret masking: every bypass of issue 17 (defect 12) is masked, ordinary text survives.

Each true-positive row is (text, the secret that must be gone, the placeholder that replaces it).
The texts use the forms people really write: labels in English and Korean, `is`/`는`/`은`,
quotes, full-width digits and letters, zero-width and soft-hyphen characters inside a label or a
number, `+82` and E.164 numbers, provider-prefixed keys. Each true negative must come back
unchanged: versions, dates, times, ports, UUIDs, git SHAs, prices, code identifiers.
"""

from __future__ import annotations

import re
import signal
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import TIMEOUT_S, data, server_env, start_http_server

from memento.factory import FragmentFactory, content_hash
from memento.models import FragmentType
from memento.redaction import PLACEHOLDERS, normalise, redact_pii

API_KEY = PLACEHOLDERS["api_key"]
TOKEN = PLACEHOLDERS["token"]
SECRET = PLACEHOLDERS["secret"]
PRIVATE_KEY = PLACEHOLDERS["private_key"]
PWD = PLACEHOLDERS["password"]
EMAIL = PLACEHOLDERS["email"]
PHONE = PLACEHOLDERS["phone"]
CARD = PLACEHOLDERS["card"]
IBAN = PLACEHOLDERS["iban"]
RRN = PLACEHOLDERS["rrn"]

ZW = "\u200b"  # zero-width space
SHY = "\u00ad"  # soft hyphen

PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBq3b0mXkQnHfGv2oZy8c9qk1n4dIhvwcWk6AmOpUzCFAAAAJgAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

TRUE_POSITIVES: list[tuple[str, str, str]] = [
    # --- API keys and tokens
    ("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f", API_KEY),
    ("openai key sk-" + "Zq8Xw3Vt9Lm2Pn7Rb4Hc6Jd1Kf5Gs0Ty", "Zq8Xw3Vt9Lm2Pn7Rb4Hc6Jd1Kf5Gs0Ty", API_KEY),
    ("anthropic sk-ant-api03-Q9w8E7r6T5y4U3i2O1p0-AsDfGhJkLzXcVbNm1234567890abc", "Q9w8E7r6T5y4U3i2O1p0", API_KEY),
    ("gh token ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", API_KEY),
    ("oauth gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a", API_KEY),
    (
        "server ghs_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2 and ghr_zY9xW8vU7tS6rQ5pO4nM3lK2jI1hG0fE9dC8",
        "ghr_zY9xW8vU7tS6rQ5pO4nM3lK2jI1hG0fE9dC8",
        API_KEY,
    ),
    ("fine-grained github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsT", "github_pat_11ABCDEFG0", API_KEY),
    ("gitlab glpat-xY7zW2vU4tS6rQ8pO0nM", "glpat-xY7zW2vU4tS6rQ8pO0nM", API_KEY),
    ("slack bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-123456789012", API_KEY),
    ("aws id AKIAIOSFODNN7EXAMPLE region us-east-1", "AKIAIOSFODNN7EXAMPLE", API_KEY),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", SECRET),
    ("maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", API_KEY),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc and rk_live_51HxYzAbCdEf0123456789", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", API_KEY),
    (f"session {JWT}", "eyJzdWIiOiIxMjM0NTY3ODkwIn0", TOKEN),
    ("curl -H 'Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543'", "8f14e45fceea167a5a36dedd4bea2543", TOKEN),
    (f"deploy key:\n{PEM}\nend", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", PRIVATE_KEY),
    ("webhook token: 3f9a8b7c6d5e4f3a2b1c0d9e", "3f9a8b7c6d5e4f3a2b1c0d9e", SECRET),
    ("the api key is Zx8Qw2Lm9Pt4Rv6B", "Zx8Qw2Lm9Pt4Rv6B", SECRET),
    ("client_secret=Qm9vYmFyYmF6MTIz", "Qm9vYmFyYmF6MTIz", SECRET),
    ("API 키는 Zx8Qw2Lm9Pt4Rv6B 입니다", "Zx8Qw2Lm9Pt4Rv6B", SECRET),
    (f"zero-width inside gh{ZW}p_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", API_KEY),
    # --- passwords, every label form
    ("password: hunter2", "hunter2", PWD),
    ("password=hunter2", "hunter2", PWD),
    ("my password is hunter2", "hunter2", PWD),
    ("the password is 'correct horse battery staple'", "correct horse battery staple", PWD),
    ("the wifi password for the office is sunflower77", "sunflower77", PWD),
    ("pw hunter2", "hunter2", PWD),
    ("passwd: tr0ub4dor", "tr0ub4dor", PWD),
    ("PWD = s3cret", "s3cret", PWD),
    ('DB_PASSWORD="p@ss w0rd"', "p@ss w0rd", PWD),
    ('{"password": "letmein99"}', "letmein99", PWD),
    ("`password`: `abc123`", "abc123", PWD),
    ("user admin pass: hunter2", "hunter2", PWD),
    ("비밀번호: hunter2", "hunter2", PWD),
    ("비밀번호는 hunter2", "hunter2", PWD),
    ("비밀번호는 hunter2입니다", "hunter2", PWD),
    ("비번은 qwer1234", "qwer1234", PWD),
    ("암호는 s3cr3t!", "s3cr3t", PWD),
    ("패스워드: hunter2", "hunter2", PWD),
    ("비밀번호를 hunter2로 바꿨다", "hunter2", PWD),
    ("password - hunter2", "hunter2", PWD),
    ("PIN 4821", "4821", PWD),
    ("password：hunter2", "hunter2", PWD),  # full-width colon
    ("ｐａｓｓｗｏｒｄ is hunter2", "hunter2", PWD),  # full-width letters
    (f"pass{ZW}word: hunter2", "hunter2", PWD),
    (f"pass{SHY}word is hunter2", "hunter2", PWD),
    (f"비밀{ZW}번호는 hunter2", "hunter2", PWD),
    ("postgres://admin:Sup3rS3cret@db:5432/app", "Sup3rS3cret", PWD),
    # --- e-mail addresses
    ("write to jane.doe+billing@mail.example.co.uk today", "jane.doe+billing@mail.example.co.uk", EMAIL),
    ("ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ", "jane@example.com", EMAIL),
    (f"mail jane{ZW}.doe@example.com", "jane.doe@example.com", EMAIL),
    ("reach kim.minsu [at] example [dot] com", "kim.minsu", EMAIL),
    # --- phone numbers
    ("call 010-1234-5678 now", "1234-5678", PHONE),
    ("call 010 1234 5678 now", "1234 5678", PHONE),
    ("call 01012345678 now", "01012345678", PHONE),
    ("call 010.1234.5678 now", "1234.5678", PHONE),
    ("call 010-1234-5678-1 now", "1234-5678", PHONE),
    ("call +82 10-1234-5678 now", "1234-5678", PHONE),
    ("call +82-10-1234-5678 now", "1234-5678", PHONE),
    ("call +821012345678 now", "1012345678", PHONE),
    ("call 82 10 1234 5678 now", "1234 5678", PHONE),
    ("call +82 (0)10 1234 5678 now", "1234 5678", PHONE),
    ("call (+82) 10-1234-5678 now", "1234-5678", PHONE),
    ("call (+1) 415-555-2671 now", "555-2671", PHONE),
    ("전화 ０１０－１２３４－５６７８ 로", "5678", PHONE),  # full-width digits and hyphen
    (f"call 010{ZW}1234{ZW}5678 now", "5678", PHONE),
    ("call 010–1234–5678 now", "1234", PHONE),  # en dashes
    ("office 02-312-3456 ext", "312-3456", PHONE),
    ("US office +1 415 555 2671", "555 2671", PHONE),
    ("London +44 20 7946 0958", "7946 0958", PHONE),
    ("support (555) 123-4567 weekdays", "123-4567", PHONE),
    ("support 555-123-4567 weekdays", "123-4567", PHONE),
    # --- payment cards (Luhn-valid) and IBANs (mod-97-valid)
    ("visa 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111", CARD),
    ("visa 4111-1111-1111-1111", "1111-1111-1111", CARD),
    ("mc 5500000000000004", "5500000000000004", CARD),
    ("card 4111.1111.1111.1111", "1111.1111.1111", CARD),
    ("amex 3782 822463 10005", "822463", CARD),
    ("카드 ４１１１ １１１１ １１１１ １１１１", "1111 1111", CARD),
    ("iban DE89 3704 0044 0532 0130 00", "3704 0044 0532", IBAN),
    ("iban GB82WEST12345698765432", "GB82WEST12345698765432", IBAN),
    # --- Korean resident registration numbers
    ("주민등록번호 900101-1234567", "1234567", RRN),
    ("rrn 031215-3234567", "3234567", RRN),
    ("주민번호는 9001011234567", "9001011234567", RRN),
]

TRUE_NEGATIVES: list[str] = [
    "released version 1.2.3 and v2.10.0-rc.1",
    "meeting on 2024-01-15 at 14:30, moved to 2024/02/01",
    "created 2026-11-24T06:10:02.123Z, updated 2026-11-24 06:10:02+09:00",
    "listen on port 8080, postgres on localhost:5432",
    "docker run -p 127.0.0.1:8000:8000 memento",
    "request 123e4567-e89b-12d3-a456-426614174000 failed",
    "commit 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a fixed it",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "order 2024-01-15 costs 12345",
    "price $1,299.99 or ₩1,500,000 or 1.500.000 EUR",
    "timestamp 1732425600000 in milliseconds",
    "pi is 3.14159265358979 roughly",
    "IP 192.168.0.1 and 10.0.0.254",
    "ISBN 978-3-16-148410-0",
    "HTTP 404 after 3 retries, 250 ms, 16:9 aspect",
    "the password policy requires 12 characters",
    "reset your password via the settings page",
    "password reset link expired",
    "the password is wrong",
    "비밀번호를 잊어버렸다",
    "비밀번호가 틀렸다",
    "비밀번호는 바꿨어요!",
    "pin numpy==1.26 and pin the base image",
    "my password is my dog's name",
    "암호화 방식은 AES-256-GCM 이다",
    "the token budget is 2000 and max_tokens=4096",
    "secret sauce is garlic",
    "api_key_header = settings.api_key",
    "token = os.getenv('GITHUB_TOKEN')",
    "def get_password(user: User) -> str: return user.password_hash",
    "use Bearer authentication for the API",
    "the ghp_ prefix marks GitHub tokens, sk- marks OpenAI keys",
    "pip install pydantic==2.7.1 httpx>=0.27",
    "+1 for this idea, 2+2=4",
    "range 10-20, matrix 3x3, build 20240115.3",
    "2024년 1월 15일 오후 3시 회의",
    "user@localhost is not an address here",
    "a deck of 52 cards and 13 rounds",
]


@pytest.mark.parametrize(("text", "secret", "placeholder"), TRUE_POSITIVES, ids=[row[0][:40] for row in TRUE_POSITIVES])
def test_sensitive_text_is_masked(text: str, secret: str, placeholder: str) -> None:
    out = redact_pii(text)
    assert secret not in out, out
    assert secret not in normalise(out), out
    assert placeholder in out, out


@pytest.mark.parametrize("text", TRUE_NEGATIVES)
def test_ordinary_text_survives(text: str) -> None:
    assert redact_pii(text) == text


def test_the_tables_are_big_enough() -> None:
    assert len(TRUE_POSITIVES) >= 40 and len(TRUE_NEGATIVES) >= 25
    assert {p for _, _, p in TRUE_POSITIVES} == set(PLACEHOLDERS.values())


def test_labels_and_surrounding_words_are_kept() -> None:
    assert redact_pii("password is hunter2, ok") == f"password is {PWD}, ok"
    assert redact_pii("비밀번호는 hunter2입니다") == f"비밀번호는 {PWD}입니다"
    assert redact_pii("call +82 10-1234-5678 now") == f"call {PHONE} now"
    assert redact_pii("Authorization: Bearer 8f14e45fceea167a5a36dedd") == f"Authorization: Bearer {TOKEN}"


def test_luhn_and_checksums_keep_lookalikes() -> None:
    assert redact_pii("ref 4111 1111 1111 1112") == "ref 4111 1111 1111 1112"  # Luhn fails
    assert redact_pii("iban DE88 3704 0044 0532 0130 00") == "iban DE88 3704 0044 0532 0130 00"  # mod 97 fails
    assert redact_pii("id 901301-1234567") == "id 901301-1234567"  # month 13 is no birth date


def test_text_is_normalised_before_storage() -> None:
    assert normalise("ａｂｃ１２３") == "abc123"
    assert normalise(f"in{ZW}vis{SHY}ible\u2060\ufeff") == "invisible"
    assert normalise("odd\u00a0spaces\u3000here\u2003too") == "odd spaces here too"
    assert normalise("line\r\nbreaks\rkept\ttabs") == "line\nbreaks\nkept\ttabs"
    assert redact_pii("plain ａｓｃｉｉ") == "plain ascii"


def test_masking_is_idempotent() -> None:
    for text, _, _ in TRUE_POSITIVES:
        once = redact_pii(text)
        assert redact_pii(once) == once


NOW = datetime(2026, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[1]


def test_the_privacy_doc_names_every_placeholder_and_the_readme_links_it() -> None:
    doc = (ROOT / "docs" / "privacy.md").read_text()
    assert all(f"`{placeholder}`" in doc for placeholder in PLACEHOLDERS.values())
    assert "(docs/privacy.md)" in (ROOT / "README.md").read_text()


def test_stored_content_is_normalised_so_variants_deduplicate() -> None:
    factory = FragmentFactory()
    wide = factory.draft(content="ｄｅｐｌｏｙ ｏｎ ｆｒｉｄａｙ", topic="t", type_=FragmentType.FACT, created_at=NOW)
    hidden = factory.draft(content=f"de{ZW}ploy on fri{SHY}day", topic="t", type_=FragmentType.FACT, created_at=NOW)
    assert wide.content == hidden.content == "deploy on friday"
    assert wide.content_hash == hidden.content_hash == content_hash("deploy on friday")


def test_given_keywords_that_hold_pii_are_dropped() -> None:
    draft = FragmentFactory().draft(
        content="deploy notes",
        topic="t",
        type_=FragmentType.FACT,
        created_at=NOW,
        keywords=["Deploy", "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "jane@example.com", "ｒｅｌｅａｓｅ", "010-1234-5678"],
    )
    assert draft.keywords == ["deploy", "release"]


def test_extracted_keywords_come_from_the_masked_text() -> None:
    draft = FragmentFactory().draft(content="비밀번호는 zebra77 입니다 zebra77 zebra77", topic="t", type_=FragmentType.FACT, created_at=NOW)
    assert all("zebra77" not in k for k in draft.keywords)


# Planted through a real server; each must be absent from every file the server wrote.
GH_TOKEN = "ghp_Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4"
PASSWORD = "Quokka-Velvet-8841"
KOREAN_PASSWORD = "tangerine5521"
EMAIL_ADDRESS = "planted.person+memo@mail.example.org"
WIDE_PHONE = "０１０－９８７６－５４３２"


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_planted_secrets_reach_no_file_over_a_real_transport(tmp_path: Path, anyio_backend: str) -> None:
    log_dir = tmp_path / "logs"
    env = {**server_env(tmp_path / "m.db"), "LOG_DIR": str(log_dir), "LOG_LEVEL": "DEBUG"}
    server = start_http_server(env, tmp_path / "stderr.log")
    content = f"deploy: the password is {PASSWORD}, token {GH_TOKEN}, mail {EMAIL_ADDRESS}, call {WIDE_PHONE}"
    try:
        async with httpx2.AsyncClient(timeout=TIMEOUT_S) as http:
            async with Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S) as client:
                stored = data(
                    await client.call_tool(
                        "remember", {"content": content, "topic": "deploy", "type": "fact", "keywords": ["deploy", GH_TOKEN, EMAIL_ADDRESS]}
                    )
                )
                first = data(await client.call_tool("recall", {"topic": "deploy", "verbose": True}))
                extracted = data(await client.call_tool("remember", {"content": content + " again", "topic": "deploy", "type": "fact"}))
                amended = data(await client.call_tool("amend", {"id": stored["id"], "content": f"비밀번호는 {KOREAN_PASSWORD}입니다"}))
                superseding = data(await client.call_tool("amend", {"id": extracted["id"], "content": content + " v2", "supersedes": True}))
                found = data(await client.call_tool("recall", {"text": "deploy password token", "topic": "deploy", "verbose": True}))
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    replies = [stored, first, extracted, amended, superseding, found]
    (kept,) = [f for f in first["fragments"] if f["id"] == stored["id"]]
    assert f"the password is {PWD}" in kept["content"] and kept["keywords"] == ["deploy"]
    assert [f["content"] for f in found["fragments"] if f["id"] == amended["id"]] == [f"비밀번호는 {PWD}입니다"]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "m.db" for p in files) and any(p.name == "memento.log" for p in files)
    written = b"\n".join(p.read_bytes() for p in files) + repr(replies).encode()
    for secret in (GH_TOKEN, PASSWORD, KOREAN_PASSWORD, EMAIL_ADDRESS, WIDE_PHONE, normalise(WIDE_PHONE)):
        assert secret.encode() not in written, f"{secret!r} was written"
    # The phone's digits in any width or separation; four digits alone turn up by chance in binary pages and ids.
    phone = re.compile("(?:9876|９８７６)[^0-9]{0,9}(?:5432|５４３２)".encode())
    assert not phone.search(written), "the phone's digits were written"
