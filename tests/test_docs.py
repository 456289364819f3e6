"""The README documents every setting the code reads."""

from __future__ import annotations

from pathlib import Path

from memento.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    missing = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        env = alias.choices[0] if alias is not None else name.upper()  # type: ignore[union-attr]
        if f"`{env}`" not in README:
            missing.append(str(env))
    assert missing == []
